-- gelu.lua: GELU as exporters write it -> the gelu op.
--   erf form  0.5 * x * (1 + erf(x / sqrt(2))), the division as x * 0.7071...
--             or x / 1.4142..., or erf in f32 through casts in an f16/bf16 graph
--   tanh form 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), x^3 as
--             pow or a product; Megatron's sqrt(2/pi) * x * (1 + 0.044715 * x * x)
-- Products and sums match in any grouping and operand order, constants within
-- rtol (1e-6).  Examples: tests/golden/rules/gelu.kf.
local S = 0.7978845608028654 -- sqrt(2 / pi)
local erfs = {
  {"mul", function(x) return erf(x * 0.7071067811865476) end},
  {"div", function(x) return erf(x / 1.4142135623730951) end},
  {"cast", function(x) return cast(erf(cast(x * 0.7071067811865476, {to = "f32"})), {to = "T"}) end},
}
local inners = {
  {"pow", function(x) return S * (x + 0.044715 * x ^ 3) end},
  {"mul", function(x) return S * (x + 0.044715 * x * x * x) end},
  {"factored", function(x) return S * x * (1 + 0.044715 * x * x) end},
}
for _, e in ipairs(erfs) do
  local half = e[1] == "cast" -- f16/bf16: the rewrite rounds once, the original after every op
  rule { name = "gelu-erf/" .. e[1], benefit = 3, types = half and {x = "T"} or nil,
         pattern = function(x) return 0.5 * x * (1 + e[2](x)) end,
         replace = function(x) return gelu(x) end,
         verify = half and { {x = "f16[16]"}, {x = "f16[4,8]"}, {x = "bf16[16]"}, {x = "bf16[4,8]"} } or nil,
         tolerance = half and {rtol = 3e-2, atol = 1e-2} or nil }
end
for _, t in ipairs(inners) do
  rule { name = "gelu-tanh/" .. t[1], benefit = 3,
         pattern = function(x) return 0.5 * x * (1 + tanh(t[2](x))) end,
         replace = function(x) return gelu(x, {approximate = "tanh"}) end }
end
