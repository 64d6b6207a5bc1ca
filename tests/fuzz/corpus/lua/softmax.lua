-- softmax.lua: softmax and log-softmax written as primitive ops.
--
--   exp(x - reduce_max(x)) / reduce_sum(exp(x - reduce_max(x)))   -> softmax(x)
--   exp(x) / reduce_sum(exp(x))                                    -> softmax(x)
--   (x - m) - log(reduce_sum(exp(x - m))), m = reduce_max(x)       -> log_softmax(x)
--   x - log(reduce_sum(exp(x)))                                    -> log_softmax(x)
--   log(softmax(x))                                                -> log_softmax(x)
-- over the last axis, reductions with keepdims (the default).  The
-- replacement is the stable form even where the pattern was not.
local function rmax(t) return reduce_max(t, {axes = {-1}, keepdims = true}) end
local function rsum(t) return reduce_sum(t, {axes = {-1}, keepdims = true}) end

rule {
  name = "softmax/stable", benefit = 4,
  pattern = function(x) local e = exp(x - rmax(x)); return e / rsum(e) end,
  replace = function(x) return softmax(x, {axis = -1}) end,
}
rule {
  name = "softmax/plain", benefit = 3,
  pattern = function(x) local e = exp(x); return e / rsum(e) end,
  replace = function(x) return softmax(x, {axis = -1}) end,
}
rule {
  name = "log-softmax/stable", benefit = 4,
  pattern = function(x) local t = x - rmax(x); return t - log(rsum(exp(t))) end,
  replace = function(x) return log_softmax(x, {axis = -1}) end,
}
rule {
  name = "log-softmax/plain", benefit = 3,
  pattern = function(x) return x - log(rsum(exp(x))) end,
  replace = function(x) return log_softmax(x, {axis = -1}) end,
}
rule {
  name = "log-softmax/log-of-softmax", benefit = 3,
  pattern = function(x) return log(softmax(x, {axis = -1})) end,
  replace = function(x) return log_softmax(x, {axis = -1}) end,
}

examples = {
  {
    before = [[
graph @attn(%s: f32[2,4,16]) -> (f32[2,4,16]) {
  %m = reduce_max(%s) {axes = [-1], keepdims = true} : f32[2,4,1]
  %d = sub(%s, %m) : f32[2,4,16]
  %e = exp(%d) : f32[2,4,16]
  %z = reduce_sum(%e) {axes = [2]} : f32[2,4,1]
  %p = div(%e, %z) : f32[2,4,16]
  return %p
}]],
    after = [[
graph @attn(%s: f32[2,4,16]) -> (f32[2,4,16]) {
  %p = softmax(%s) {axis = -1} : f32[2,4,16]
  return %p
}]],
  },
  {
    before = [[
graph @lsm(%x: f32[8,10]) -> (f32[8,10]) {
  %m = reduce_max(%x) {axes = [-1]} : f32[8,1]
  %t = sub(%x, %m) : f32[8,10]
  %e = exp(%t) : f32[8,10]
  %z = reduce_sum(%e) {axes = [-1]} : f32[8,1]
  %l = log(%z) : f32[8,1]
  %y = sub(%t, %l) : f32[8,10]
  return %y
}]],
    after = [[
graph @lsm(%x: f32[8,10]) -> (f32[8,10]) {
  %y = log_softmax(%x) {axis = -1} : f32[8,10]
  return %y
}]],
  },
  { -- the sum over another axis: not a softmax, unchanged
    before = [[
graph @g(%x: f32[8,10]) -> (f32[8,10]) {
  %e = exp(%x) : f32[8,10]
  %z = reduce_sum(%e) {axes = [0]} : f32[1,10]
  %p = div(%e, %z) : f32[8,10]
  return %p
}]],
    after = [[
graph @g(%x: f32[8,10]) -> (f32[8,10]) {
  %e = exp(%x) : f32[8,10]
  %z = reduce_sum(%e) {axes = [0]} : f32[1,10]
  %p = div(%e, %z) : f32[8,10]
  return %p
}]],
  },
}
