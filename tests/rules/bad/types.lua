-- types names the pattern's parameters
rule {
  name = "typed",
  types = {x = "T[N]", y = "T[N]"},
  pattern = function(x) return exp(x) end,
  replace = function(x) return x end,
}
