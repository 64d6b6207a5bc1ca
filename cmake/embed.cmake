# embed.cmake: cmake -DIN=file -DOUT=file.c -DNAME=sym -P embed.cmake
# writes OUT, a C file defining `const char NAME[]`: the text of IN.  Run at
# build time (the output is generated, never committed).
file(READ "${IN}" text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REPLACE "\n" "\\n\"\n\t\"" text "${text}")
get_filename_component(base "${IN}" NAME)
file(WRITE "${OUT}.tmp" "/* generated from ${base} by cmake/embed.cmake */\nconst char ${NAME}[] =\n\t\"${text}\";\n")
file(RENAME "${OUT}.tmp" "${OUT}")
