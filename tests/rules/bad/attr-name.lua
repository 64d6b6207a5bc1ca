-- reduce_sum takes `axes`; `axis` would make a pattern that never matches
rule {
  name = "sum-to-mean",
  pattern = function(x) return reduce_sum(x, {axis = {-1}}) / 4 end,
  replace = function(x) return reduce_mean(x, {axes = {-1}}) end,
}
