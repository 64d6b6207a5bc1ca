-- print writes its arguments, tab-separated, as a note at the line that
-- called it, and nothing else.
print("hello", 1, 2.5, nil, true)
print("x")
