-- A pattern whose search grows as 8!: a chain of eight distinct variables,
-- then a check (the second operand must be the first variable) that fails
-- for every order.  The driver's step budget stops it with an error.
rule {
  name = "eight",
  pattern = function(a, b, c, d, e, f, g, h) return (a + b + c + d + e + f + g + h) * a end,
  replace = function(a, b, c, d, e, f, g, h) return a end,
}
