-- The standard mixed-precision policy of the `amp` pass (docs/amp.md):
-- PyTorch autocast's lists for CUDA, in kfuse's op names.
--   low:    run in the low type (bf16 or f16); autocast's
--           "lower_precision_fp" list (conv*, matmul, mm, bmm, linear, ...)
--   f32:    operands cast up, result f32; autocast's "fp32" list (exp, log,
--           pow, rsqrt, softplus, layer_norm, ...) and its reductions that
--           accumulate in f32 (softmax, log_softmax, sum, mean)
--   follow: everything not named; runs in the type its operands arrive in
-- A policy file given with amp{policy=FILE} is read after this one and
-- overrides it op by op, e.g. a file holding the one line
--   amp = { f32 = {"gelu"} }
amp = {
  low = { "matmul", "gemm", "conv", "conv_transpose" },
  f32 = {
    "exp", "log", "pow", "rsqrt",
    "softmax", "log_softmax", "layer_norm",
    "reduce_sum", "reduce_mean",
  },
}
