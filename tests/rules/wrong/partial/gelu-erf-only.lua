-- Only the erf forms of GELU: `kfuse-verify-rules --covers` against the 24
-- rules of tests/rules/covers/gelu-24.lua must report the tanh forms.
rule {
  name = "gelu-erf", benefit = 3,
  pattern = function(x) return 0.5 * x * (1 + erf(x * 0.7071067811865476)) end,
  replace = function(x) return gelu(x) end,
}
