-- A rule that "succeeds" without changing anything (add is commutative, so
-- y + x is the graph it matched).
rule {
  name = "swap",
  pattern = function(x, y) return x + y end,
  replace = function(x, y) return y + x end,
}
