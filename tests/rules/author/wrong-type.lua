-- A replacement of another type than what it replaces: the match is
-- declined, and a warning says so once (instead of the rule never firing
-- in silence).
rule {
  name = "sum-keeps-dims",
  pattern = function(x) return reduce_sum(exp(x), {axes = {-1}, keepdims = false}) end,
  replace = function(x) return reduce_sum(exp(x), {axes = {-1}}) end,
  verify = false,
}
