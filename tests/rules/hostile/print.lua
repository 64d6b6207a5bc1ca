-- print writes its arguments, tab-separated, as a note: nothing more.
print("one", 2, true)
