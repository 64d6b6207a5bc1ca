-- a misspelt attribute in the replacement is refused as well
rule {
  name = "gelu-tanh-typo",
  pattern = function(x) return x * sigmoid(1.702 * x) end,
  replace = function(x) return gelu(x, {aproximate = "tanh"}) end,
}
