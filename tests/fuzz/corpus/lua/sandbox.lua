local ok = pcall(function() return io.open("/etc/passwd") end)
local ok2 = pcall(function() return os.execute("true") end)
local ok3 = pcall(require, "../../etc/passwd")
local ok4 = pcall(load, "\27Lua")
rule { name = tostring(ok) .. tostring(ok2) .. tostring(ok3) .. tostring(ok4),
       pattern = function(x) return x + 0 end, replace = function(x) return x end }
