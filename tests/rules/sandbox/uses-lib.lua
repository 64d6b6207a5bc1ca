-- require of a module below the rule path, and a sandbox census.
local util = require "lib.util"

rule {
  name = "double-neg", benefit = util.benefit,
  pattern = function(x) return -(-x) end,
  replace = function(x) return x end,
}

-- what a script can see: only the whitelist
census = {
  io = io == nil, os = os == nil, debug = debug == nil, package = package == nil,
  dofile = dofile == nil, loadfile = loadfile == nil, collectgarbage = collectgarbage == nil,
  dump = string.dump == nil, binary = load(string.char(27) .. "Lua") == nil,
  math = math.floor(2.5) == 2, string = ("a"):rep(3) == "aaa", table = table.concat({1, 2}, ",") == "1,2",
}
for k, v in pairs(census) do
  if not v then error("sandbox census failed: " .. k) end
end

examples = {
  {
    before = [[
graph @g(%x: f32[4]) -> (f32[4]) {
  %a = neg(%x) : f32[4]
  %b = neg(%a) : f32[4]
  return %b
}]],
    after = [[
graph @g(%x: f32[4]) -> (f32[4]) {
  return %x
}]],
  },
}
