rule {
  name = "silu", benefit = 2,
  pattern = function(x) return x * sigmoid(x) end,
  replace = function(x) return silu(x) end,
  where = function(m) return m.x.dtype ~= "i32" end,
}
examples = {
  { before = [[
graph @g(%x: f32[4]) -> (f32[4]) {
  %s = sigmoid(%x) : f32[4]
  %y = mul(%x, %s) : f32[4]
  return %y
}]], after = [[
graph @g(%x: f32[4]) -> (f32[4]) {
  %y = silu(%x) : f32[4]
  return %y
}]] },
}
