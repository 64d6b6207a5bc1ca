-- table.insert shifts #t slots in C, and #t is what __len says.
local t = setmetatable({}, {__len = function() return 1e15 end})
table.insert(t, 1, "x")
