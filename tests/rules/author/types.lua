-- Type and shape variables: one rule for every dtype a cast pair can take,
-- and shapes that must agree between variables.

-- A round trip through f32 gives back an f16 or bf16 (or f32) value exactly:
-- T binds to x's dtype, and the outer cast must go back to it.
rule {
  name = "cast-roundtrip",
  types = {x = "T"},
  pattern = function(x) return cast(cast(x, {to = "f32"}), {to = "T"}) end,
  where = function(m) return m.T == "f16" or m.T == "bf16" or m.T == "f32" end,
  replace = function(x) return x end,
  verify = { {x = "f16[8]"}, {x = "bf16[4,8]"} },
}

-- A bias of the row's length (D is x's last dim, whatever the leading dims)
-- added before a scale of the same length: (x + b) * s -> x * s + b * s,
-- with b * s folded by canonicalize.  A bias of another length, or one in
-- another dtype, is not this rule's.
rule {
  name = "bias-scale",
  types = {x = "T[..., D]", b = "T[D]", s = "T[D]"},
  pattern = function(x, b, s) return (x + b) * s end,
  where = function(m) return m.b.is_const and m.s.is_const end,
  replace = function(x, b, s) return x * s + b * s end,
  verify = { {x = "f32[4,8]", b = "const f32[8]", s = "const f32[8]"},
             {x = "f64[2,3,5]", b = "const f64[5]", s = "const f64[5]"} },
}
