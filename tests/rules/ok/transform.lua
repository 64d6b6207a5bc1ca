-- A transform over the graph API: x / c with a scalar constant c becomes
-- x * (1 / c).  (Used by tests/unit/test_rewrite.c.)
transform {
  name = "div-to-mul", on = "div",
  apply = function(g, node)
    local x, c = node.inputs[1], node.inputs[2]
    if not c.is_const or c.value == nil or c.value == 0 or c.numel ~= 1 then return false end
    local k = g:const(1 / c.value, c.dtype)
    local m = g:create("mul", {x, k})
    g:replace_all_uses(node, m)
    g:erase(node)
    return true
  end,
}

-- A rule whose replacement reads facts of the match, so it runs per match.
rule {
  name = "sum-to-mean", benefit = 2,
  pattern = function(x) return reduce_sum(x, {axes = {-1}}) / 4 end,
  where = function(m) return m.x.shape[m.x.rank] == 4 end,
  replace = function(x) return reduce_mean(x, {axes = {x.rank - 1}}) end,
  verify = { {x = "f32[3,4]"}, {x = "f64[2,5,4]"} },
}

examples = {
  {
    before = [[
graph @g(%x: f32[2,4]) -> (f32[2,1], f32[2,4]) {
  %s = reduce_sum(%x) {axes = [1]} : f32[2,1]
  %four = const 4.0 : f32[]
  %m = div(%s, %four) : f32[2,1]
  %two = const 2.0 : f32[]
  %h = div(%x, %two) : f32[2,4]
  return %m, %h
}]],
    after = [[
graph @g(%x: f32[2,4]) -> (f32[2,1], f32[2,4]) {
  %m = reduce_mean(%x) {axes = [1]} : f32[2,1]
  %k = const 0.5 : f32[]
  %h = mul(%x, %k) : f32[2,4]
  return %m, %h
}]],
  },
}
