-- A wrong rule: x * sigmoid(x) is SiLU, not GELU.  kfuse-verify-rules must
-- say so and show the inputs.
rule {
  name = "silu-is-not-gelu",
  pattern = function(x) return x * sigmoid(x) end,
  replace = function(x) return gelu(x) end,
}
