#!/bin/sh
# Times kfuse-check against LLVM FileCheck 19 on one large input: 200k lines of
# printed-IR-like text and a check file of 1000 directives (CHECK-LABEL,
# CHECK, CHECK-NEXT, CHECK-SAME, CHECK-DAG, CHECK-NOT, regexes and
# variables), spread over the whole input.  Prints both times and the ratio.
#
#   bench/filecheck_speed.sh [BUILD_DIR] [LINES] [DIRECTIVES]
set -eu
build=${1:-build}
lines=${2:-200000}
ndir=${3:-1000}
kc=$build/kfuse-check
fc=$(command -v FileCheck-19 || echo /usr/lib/llvm-19/bin/FileCheck)
[ -x "$kc" ] || { echo "no $kc; build first" >&2; exit 1; }
[ -x "$fc" ] || { echo "FileCheck-19 not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$tmp" "$lines" "$ndir" <<'EOF'
import sys
tmp, lines, ndir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
groups = ndir // 8            # 8 directives per checked function
per = lines // groups         # lines per function
with open(f"{tmp}/input.txt", "w") as inp, open(f"{tmp}/check.txt", "w") as chk:
    for g in range(groups):
        inp.write(f"graph @f{g}(%x: f32[64,{g}]) -> (f32[64]) {{\n")
        for i in range(per - 2):
            inp.write(f"  %v{i} = add(%v{i-1}, %x) : f32[64,{g}]   # id {g*per+i}\n")
        inp.write("}\n")
        mid = per // 2
        chk.write(f"CHECK-LABEL: graph @f{g}(\n")
        chk.write(f"CHECK-SAME: %x: f32[64,{g}]\n")
        chk.write(f"CHECK: %[[A{g}:v[0-9]+]] = add(%v{mid-1}, %x)\n")
        chk.write(f"CHECK-NEXT: = add(%[[A{g}]], {{{{%[a-z]+}}}}) : f32[64,{{{{[0-9]+}}}}]\n")
        chk.write(f"CHECK-DAG: # id {g*per+mid+3}\n")
        chk.write(f"CHECK-DAG: # id {g*per+mid+2}\n")
        chk.write(f"CHECK-NOT: sub(\n")
        chk.write(f"CHECK: # id {{{{{g*per+per-3}$}}}}\n")
EOF
echo "input: $(wc -l < "$tmp/input.txt") lines; check file: $(wc -l < "$tmp/check.txt") directives"

t() { # prints the best of three runs in seconds
	best=
	for i in 1 2 3; do
		s=$(date +%s.%N)
		"$@" "$tmp/check.txt" --input-file "$tmp/input.txt" || { echo "$1 failed" >&2; exit 1; }
		e=$(date +%s.%N)
		d=$(echo "$e - $s" | bc)
		if [ -z "$best" ] || [ "$(echo "$d < $best" | bc)" = 1 ]; then best=$d; fi
	done
	echo "$best"
}
tk=$(t "$kc")
tf=$(t "$fc")
echo "kfuse-check: ${tk}s   FileCheck-19: ${tf}s   ratio kfuse-check/FileCheck: $(echo "scale=2; $tk / $tf" | bc)"
