op {
  name = "square", trait = "elementwise", arity = 1,
  infer = function(x) return x end,
  cpu = function(x) return x * x end,
  cuda = "a * a",
}
rule {
  name = "mul-self", benefit = 1,
  pattern = function(x) return x * x end,
  replace = function(x) return square(x) end,
}
