-- table.move loops e - f + 1 times in C, allocating nothing.
table.move({}, 1, 1e15, 2)
