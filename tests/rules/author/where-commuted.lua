-- An asymmetric where() on a commutative op: x * 2 -> x + x, where the 2 is
-- a constant and x is not.  The graph may have the constant on either side;
-- the rule must fire on both.
rule {
  name = "double-to-add",
  pattern = function(x, c) return x * c end,
  where = function(m) return m.c.is_const and m.c.value == 2 and not m.x.is_const end,
  replace = function(x, c) return x + x end,
  verify = { {x = "f32[4]", c = "const f32[]=2"} },
}
