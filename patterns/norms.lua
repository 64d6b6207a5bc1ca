-- norms.lua: layer norm and RMS norm written as primitive ops.
--
-- Layer norm over the last axis, as exporters write it:
--     d = x - reduce_mean(x);  v = reduce_mean(d * d)  (or d ^ 2)
--     d / sqrt(v + eps)        (or d * rsqrt(v + eps))
-- becomes layer_norm(x) {axis = -1, epsilon = eps}; a following * scale +
-- bias is folded into it by a second rule.  eps is a pattern variable that
-- where() requires to be a scalar constant; the replacement reads its value,
-- so it runs per match.
--
-- kfuse has no rms_norm op: the RMS norm variants
--     x / sqrt(mean(x*x) + eps), x / sqrt(mean(x^2) + eps),
--     x * rsqrt(mean(x^2) + eps)
-- are rewritten to one canonical form, x * rsqrt(mean(x*x) + eps), which
-- the fuse pass turns into one reduction kernel.
local forms = require "lib.forms"

local function mean(t) return reduce_mean(t, {axes = {-1}, keepdims = true}) end

local squares = {
  mul = function(d) return d * d end,
  pow = function(d) return d ^ 2 end,
}
local scales = {
  div_sqrt = function(d, v, eps) return d / sqrt(v + eps) end,
  mul_rsqrt = function(d, v, eps) return d * rsqrt(v + eps) end,
}

local function scalar_const(v) return v.value ~= nil and v.numel == 1 end

for sname, sq in forms.sorted(squares) do
  for nname, scale in forms.sorted(scales) do
    rule {
      name = "layer-norm/" .. sname .. "/" .. nname, benefit = 4,
      pattern = function(x, eps)
        local d = x - mean(x)
        return scale(d, mean(sq(d)), eps)
      end,
      where = function(m) return scalar_const(m.eps) end,
      replace = function(x, eps) return layer_norm(x, {axis = -1, epsilon = eps.value}) end,
      verify = { {x = "f32[4,8]", eps = "const f32[]=1e-5"}, {x = "f64[2,3,16]", eps = "const f64[]=1e-6"} },
    }
  end
end

-- layer_norm(x) * scale + bias: the affine part, when scale and bias are
-- per-feature vectors of the normalised axis (the type constraints say so:
-- D is x's last dim).  The epsilon comes from the matched layer_norm node
-- (add and mul operands may come in either order).
local function matched_layer_norm(root)
  for _, v in ipairs(root.inputs) do
    local mul = v.def
    if mul and mul.op == "mul" then
      for _, u in ipairs(mul.inputs) do
        if u.def and u.def.op == "layer_norm" then return u.def end
      end
    end
  end
end

rule {
  name = "layer-norm-affine", benefit = 4,
  types = {x = "T[..., D]", w = "T[D]", b = "T[D]"},
  pattern = function(x, w, b) return layer_norm(x, {axis = -1}) * w + b end,
  replace = function(x, w, b, m)
    local eps = matched_layer_norm(m.root):attr("epsilon") or 1e-5
    return layer_norm(x, w, b, {axis = -1, epsilon = eps})
  end,
  verify = { {x = "f32[4,8]", w = "f32[8]", b = "f32[8]"} },
}

local canonical = function(x, eps) return x * rsqrt(mean(x * x) + eps) end
local rms = {
  div_sqrt_mul = function(x, eps) return x / sqrt(mean(x * x) + eps) end,
  div_sqrt_pow = function(x, eps) return x / sqrt(mean(x ^ 2) + eps) end,
  rsqrt_pow = function(x, eps) return x * rsqrt(mean(x ^ 2) + eps) end,
}
for rname, form in forms.sorted(rms) do
  rule {
    name = "rms-norm/" .. rname, benefit = 4,
    pattern = form,
    replace = canonical,
    where = function(m) return scalar_const(m.eps) end,
    verify = { {x = "f32[4,8]", eps = "const f32[]=1e-6"} },
  }
end

examples = {
  { -- layer norm with scale and bias, as a transformer exporter writes it
    before = [[
graph @ln(%x: f32[2,8], %w: f32[8], %b: f32[8]) -> (f32[2,8]) {
  %mu = reduce_mean(%x) {axes = [-1], keepdims = true} : f32[2,1]
  %d = sub(%x, %mu) : f32[2,8]
  %d2 = mul(%d, %d) : f32[2,8]
  %v = reduce_mean(%d2) {axes = [1]} : f32[2,1]
  %eps = const 1e-05 : f32[]
  %ve = add(%v, %eps) : f32[2,1]
  %s = sqrt(%ve) : f32[2,1]
  %n = div(%d, %s) : f32[2,8]
  %sc = mul(%n, %w) : f32[2,8]
  %y = add(%sc, %b) : f32[2,8]
  return %y
}]],
    after = [[
graph @ln(%x: f32[2,8], %w: f32[8], %b: f32[8]) -> (f32[2,8]) {
  %y = layer_norm(%x, %w, %b) {axis = -1, epsilon = 1e-05} : f32[2,8]
  return %y
}]],
  },
  { -- RMS norm with a division becomes the canonical rsqrt form
    before = [[
graph @rms(%x: f32[4,16]) -> (f32[4,16]) {
  %two = const 2.0 : f32[]
  %sq = pow(%x, %two) : f32[4,16]
  %ms = reduce_mean(%sq) {axes = [-1], keepdims = true} : f32[4,1]
  %eps = const 1e-06 : f32[]
  %a = add(%ms, %eps) : f32[4,1]
  %r = sqrt(%a) : f32[4,1]
  %y = div(%x, %r) : f32[4,16]
  return %y
}]],
    after = [[
graph @rms(%x: f32[4,16]) -> (f32[4,16]) {
  %sq = mul(%x, %x) : f32[4,16]
  %ms = reduce_mean(%sq) {axes = [-1], keepdims = true} : f32[4,1]
  %eps = const 1e-06 : f32[]
  %a = add(%ms, %eps) : f32[4,1]
  %r = rsqrt(%a) : f32[4,1]
  %y = mul(%x, %r) : f32[4,16]
  return %y
}]],
  },
}
