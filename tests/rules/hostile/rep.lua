-- string.rep of an empty string loops n times in C, allocating nothing.
local s = string.rep("", 1e15)
