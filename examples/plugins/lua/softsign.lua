-- softsign.lua: an op plugin written in Lua, with the rule that finds it.
--
--   kfuse-opt model.kf --plugin examples/plugins/lua/softsign.lua \
--       -p 'rules{path=examples/plugins/lua/softsign.lua},fuse'
--
-- op{} registers `softsign` in the context like a built-in op: graphs may
-- use it by name once the plugin is loaded, the interpreter runs its cpu
-- function element by element, and the CUDA emitter inlines its expression
-- (over the operand `a`), so it fuses with its neighbours.
op {
  name = "softsign", trait = "elementwise", arity = 1,
  doc = "x / (1 + |x|)",
  cpu = function(a) return a / (1 + math.abs(a)) end,
  cuda = "(a / (1.f + fabsf(a)))",
}

rule {
  name = "softsign",
  pattern = function(x) return x / (1 + abs(x)) end,
  replace = function(x) return softsign(x) end,
}

examples = {
  {
    before = [[
graph @g(%x: f32[4,8]) -> (f32[4,8]) {
  %a = abs(%x) : f32[4,8]
  %one = const 1.0 : f32[]
  %d = add(%a, %one) : f32[4,8]
  %y = div(%x, %d) : f32[4,8]
  return %y
}]],
    after = [[
graph @g(%x: f32[4,8]) -> (f32[4,8]) {
  %y = softsign(%x) : f32[4,8]
  return %y
}]],
  },
}
