-- attention.lua: scales written on k, moved after the first matmul of an
-- attention, where fuse-attention takes them as part of the scores:
--
--   matmul(q, k * s)               -> matmul(q, k) * s
--   matmul(q, k / s)               -> matmul(q, k) / s
--   matmul(q, transpose(k * s))    -> matmul(q, transpose(k)) * s    (any perm)
--   matmul(q, transpose(k / s))    -> matmul(q, transpose(k)) / s
--
-- s has one element (torch 2's exporter scales both q and k by the square
-- root of the scale; a scale on q stays where it is: the attention kernel
-- applies it as it loads q, once).  Only where the product goes on,
-- through element-wise ops, into a softmax: elsewhere a scaled operand is a
-- contraction kernel's prologue, as cheap as its epilogue.  Exact in real
-- arithmetic; in floating point the rounding of the scaled operand moves
-- to the scores.  kfuse-verify-rules cannot build a softmax after a
-- pattern, so these rules say verify = false; the examples below check
-- them, and tests/golden/attention/rules.kf checks graphs rewritten by them
-- against the originals on the interpreter.

local elementwise = {
  add = true, sub = true, mul = true, div = true, where = true, cast = true, neg = true,
  max = true, min = true, tanh = true,
}

-- The matmul's result reaches a softmax through element-wise ops, each
-- read only by the next.
local function feeds_softmax(node)
  for _ = 1, 16 do
    local us = node.users
    if #us ~= 1 then return false end
    node = us[1]
    if node.op == "softmax" then return true end
    if not elementwise[node.op] then return false end
  end
  return false
end

local function scalar(v) return v.numel == 1 end

local function ok(m) return scalar(m.s) and feeds_softmax(m.root) end

-- The perm of the transpose the pattern matched (operand 2 of the matmul).
local function perm_of(m) return m.root.inputs[2].def.attrs.perm end

rule {
  name = "attention/k-scale", benefit = 2,
  pattern = function(q, k, s) return matmul(q, k * s) end,
  replace = function(q, k, s) return matmul(q, k) * s end,
  where = ok,
  verify = false,
}
rule {
  name = "attention/k-div", benefit = 2,
  pattern = function(q, k, s) return matmul(q, k / s) end,
  replace = function(q, k, s) return matmul(q, k) / s end,
  where = ok,
  verify = false,
}
rule {
  name = "attention/kt-scale", benefit = 3,
  pattern = function(q, k, s) return matmul(q, transpose(k * s)) end,
  replace = function(q, k, s, m) return matmul(q, transpose(k, {perm = perm_of(m)})) * s end,
  where = ok,
  verify = false,
}
rule {
  name = "attention/kt-div", benefit = 3,
  pattern = function(q, k, s) return matmul(q, transpose(k / s)) end,
  replace = function(q, k, s, m) return matmul(q, transpose(k, {perm = perm_of(m)})) / s end,
  where = ok,
  verify = false,
}

examples = {
  { -- torch 2's scaled_dot_product_attention: q and k each scaled by
    -- sqrt(scale), k transposed after its scale
    before = [[
graph @sdpa(%q: f32[2,4,8,16], %k: f32[2,4,8,16], %v: f32[2,4,8,16]) -> (f32[2,4,8,16]) {
  %c = const 0.5 : f32[]
  %qs = mul(%q, %c) : f32[2,4,8,16]
  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f32[2,4,16,8]
  %ks = mul(%kt, %c) : f32[2,4,16,8]
  %s = matmul(%qs, %ks) : f32[2,4,8,8]
  %p = softmax(%s) {axis = -1} : f32[2,4,8,8]
  %o = matmul(%p, %v) : f32[2,4,8,16]
  return %o
}]],
    after = [[
graph @sdpa(%q: f32[2,4,8,16], %k: f32[2,4,8,16], %v: f32[2,4,8,16]) -> (f32[2,4,8,16]) {
  %c = const 0.5 : f32[]
  %qs = mul(%q, %c) : f32[2,4,8,16]
  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f32[2,4,16,8]
  %s0 = matmul(%qs, %kt) : f32[2,4,8,8]
  %s = mul(%s0, %c) : f32[2,4,8,8]
  %p = softmax(%s) {axis = -1} : f32[2,4,8,8]
  %o = matmul(%p, %v) : f32[2,4,8,16]
  return %o
}]],
  },
  { -- the scale before the transpose, as a division
    before = [[
graph @kt(%q: f32[4,8,16], %k: f32[4,8,16], %v: f32[4,8,16]) -> (f32[4,8,16]) {
  %c = const 4.0 : f32[]
  %kd = div(%k, %c) : f32[4,8,16]
  %kt = transpose(%kd) {perm = [0, 2, 1]} : f32[4,16,8]
  %s = matmul(%q, %kt) : f32[4,8,8]
  %p = softmax(%s) {axis = -1} : f32[4,8,8]
  %o = matmul(%p, %v) : f32[4,8,16]
  return %o
}]],
    after = [[
graph @kt(%q: f32[4,8,16], %k: f32[4,8,16], %v: f32[4,8,16]) -> (f32[4,8,16]) {
  %c = const 4.0 : f32[]
  %kt = transpose(%k) {perm = [0, 2, 1]} : f32[4,16,8]
  %s0 = matmul(%q, %kt) : f32[4,8,8]
  %s = div(%s0, %c) : f32[4,8,8]
  %p = softmax(%s) {axis = -1} : f32[4,8,8]
  %o = matmul(%p, %v) : f32[4,8,16]
  return %o
}]],
  },
  { -- a scaled operand of a matmul that is not attention: unchanged
    before = [[
graph @mm(%x: f32[8,16], %w: f32[16,4]) -> (f32[8,4]) {
  %c = const 0.5 : f32[]
  %ws = mul(%w, %c) : f32[16,4]
  %y = matmul(%x, %ws) : f32[8,4]
  return %y
}]],
    after = [[
graph @mm(%x: f32[8,16], %w: f32[16,4]) -> (f32[8,4]) {
  %c = const 0.5 : f32[]
  %ws = mul(%w, %c) : f32[16,4]
  %y = matmul(%x, %ws) : f32[8,4]
  return %y
}]],
  },
}
