-- Sees the sandbox as if a.lua had never run.
for _ in pairs({1}) do end
assert(string.rep("a", 3) == "aaa", "string.rep poisoned")
assert(("a"):rep(3) == "aaa", "the string metatable poisoned")
assert(table.concat({1, 2}, ",") == "1,2", "table.concat poisoned")
assert(math.floor(2.5) == 2, "math.floor poisoned")
assert(require("lib.shared").value == "fresh", "a module poisoned")
assert(ops.tanh, "ops poisoned")
rule {
  name = "double-neg", pattern = function(x) return -(-x) end, replace = function(x) return x end,
}
