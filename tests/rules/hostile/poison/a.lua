-- Tries to change what other rule files see; each attempt may fail (the
-- sandbox refuses) or change only this file's own copy.
local function try(f) pcall(f) end
try(function() getmetatable(_ENV).__index.pairs = function() error("poisoned pairs") end end)
try(function() pairs = function() error("poisoned pairs") end end)
try(function() string.rep = function() return "poisoned" end end)
try(function() table.concat = function() return "poisoned" end end)
try(function() math.floor = function() return -1 end end)
try(function() getmetatable("").__index.rep = function() return "poisoned" end end)
try(function() getmetatable("").__index = {} end)
try(function() ops.tanh = nil end)
try(function() getmetatable(ops).__index = function() error("poisoned ops") end end)
try(function() rule = function() error("poisoned rule") end end)
try(function() require("lib.shared").value = "poisoned" end)
try(function() setmetatable(_ENV, nil) end)
