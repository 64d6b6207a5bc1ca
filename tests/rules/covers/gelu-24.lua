-- gelu-24.lua: patterns/gelu.lua as it was before the matcher knew
-- association (24 rules, one per grouping), kept as the reference that
-- `kfuse-verify-rules --covers` proves the 6 rules of patterns/gelu.lua
-- against: every graph one of these rewrites, those rewrite the same way.
--
-- GELU as exporters write it, rewritten to the gelu op.
--
-- The erf form 0.5 * x * (1 + erf(x / sqrt(2))) with the division written
-- as x * 0.7071067811865476 or x / 1.4142135623730951, the three groupings
-- of the outer product, and erf computed in f32 through casts (mixed
-- precision).  The tanh form 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715
-- * x^3))) with x^3 as pow or products, and Megatron's
-- tanh(0.79788456 * x * (1 + 0.044715 * x * x)).  Constants match within
-- the rule's rtol (1e-6 by default), so 0.7978845608 and
-- 0.7978845608028654 are one constant.
local forms = require "lib.forms"

local SQRT1_2 = 0.7071067811865476
local SQRT2 = 1.4142135623730951
local SQRT_2_PI = 0.7978845608028654

local erfs = {
  mul = function(x) return erf(x * SQRT1_2) end,
  div = function(x) return erf(x / SQRT2) end,
  -- erf computed in f32 inside an f16 or bf16 graph (mixed precision)
  cast_f16 = function(x) return cast(erf(cast(x * SQRT1_2, {to = "f32"})), {to = "f16"}) end,
  cast_bf16 = function(x) return cast(erf(cast(x * SQRT1_2, {to = "f32"})), {to = "bf16"}) end,
}
local verify = {
  cast_f16 = { {x = "f16[16]"}, {x = "f16[4,8]"} },
  cast_bf16 = { {x = "bf16[16]"}, {x = "bf16[4,8]"} },
}

for ename, e in forms.sorted(erfs) do
  for i, prod in ipairs(forms.products3) do
    rule {
      name = "gelu-erf/" .. ename .. "/" .. i, benefit = 3,
      pattern = function(x) return prod(0.5, x, 1 + e(x)) end,
      replace = function(x) return gelu(x) end,
      verify = verify[ename],
      -- half precision: the rewritten graph rounds once, the original
      -- after every op
      tolerance = verify[ename] and {rtol = 3e-2, atol = 1e-2} or nil,
    }
  end
end

local inners = {}
for cname, cube in forms.sorted(forms.cubes) do
  inners[cname] = function(x) return SQRT_2_PI * (x + 0.044715 * cube(x)) end
end
-- Megatron and others factor x out: c * x * (1 + 0.044715 * x * x)
inners.factored = function(x) return SQRT_2_PI * x * (1 + 0.044715 * x * x) end

for iname, inner in forms.sorted(inners) do
  for i, prod in ipairs(forms.products3) do
    rule {
      name = "gelu-tanh/" .. iname .. "/" .. i, benefit = 3,
      pattern = function(x) return prod(0.5, x, 1 + tanh(inner(x))) end,
      replace = function(x) return gelu(x, {approximate = "tanh"}) end,
    }
  end
end

examples = {
  { -- the erf form as PyTorch exports it, with a bias before it
    before = [[
graph @bias_gelu(%x: f32[4,8], %b: f32[8]) -> (f32[4,8]) {
  %xb = add(%x, %b) : f32[4,8]
  %c = const 1.4142135623730951 : f32[]
  %d = div(%xb, %c) : f32[4,8]
  %e = erf(%d) : f32[4,8]
  %one = const 1.0 : f32[]
  %a = add(%e, %one) : f32[4,8]
  %m = mul(%xb, %a) : f32[4,8]
  %h = const 0.5 : f32[]
  %y = mul(%m, %h) : f32[4,8]
  return %y
}]],
    after = [[
graph @bias_gelu(%x: f32[4,8], %b: f32[8]) -> (f32[4,8]) {
  %xb = add(%x, %b) : f32[4,8]
  %y = gelu(%xb) : f32[4,8]
  return %y
}]],
  },
  { -- the tanh form with x*x*x and a splat constant
    before = [[
graph @g(%x: f32[2,3]) -> (f32[2,3]) {
  %x2 = mul(%x, %x) : f32[2,3]
  %x3 = mul(%x2, %x) : f32[2,3]
  %k = const dense<0.044715> : f32[2,3]
  %a = mul(%k, %x3) : f32[2,3]
  %s = add(%x, %a) : f32[2,3]
  %c = const 0.7978845608 : f32[]
  %i = mul(%c, %s) : f32[2,3]
  %t = tanh(%i) : f32[2,3]
  %one = const 1.0 : f32[]
  %u = add(%one, %t) : f32[2,3]
  %h = const 0.5 : f32[]
  %hx = mul(%h, %x) : f32[2,3]
  %y = mul(%hx, %u) : f32[2,3]
  return %y
}]],
    after = [[
graph @g(%x: f32[2,3]) -> (f32[2,3]) {
  %y = gelu(%x) {approximate = "tanh"} : f32[2,3]
  return %y
}]],
  },
  { -- not GELU: 0.6 instead of 0.5, nothing changes
    before = [[
graph @g(%x: f32[4]) -> (f32[4]) {
  %c = const 0.7071067811865476 : f32[]
  %d = mul(%x, %c) : f32[4]
  %e = erf(%d) : f32[4]
  %one = const 1.0 : f32[]
  %a = add(%e, %one) : f32[4]
  %h = const 0.6 : f32[]
  %m = mul(%h, %x) : f32[4]
  %y = mul(%m, %a) : f32[4]
  return %y
}]],
    after = [[
graph @g(%x: f32[4]) -> (f32[4]) {
  %c = const 0.7071067811865476 : f32[]
  %d = mul(%x, %c) : f32[4]
  %e = erf(%d) : f32[4]
  %one = const 1.0 : f32[]
  %a = add(%e, %one) : f32[4]
  %h = const 0.6 : f32[]
  %m = mul(%h, %x) : f32[4]
  %y = mul(%m, %a) : f32[4]
  return %y
}]],
  },
}
