-- A rule that holds in f32 but not in the low types: (x + 64) - 64 is x
-- within f32's rounding (an ulp of 64 is 7.6e-6), but f16 rounds x + 64 to
-- a multiple of 1/16 and bf16 to one of 1/2.  kfuse-verify-rules must pass
-- it with --no-low and report it in f16 without (tests/rules/CMakeLists.txt:
-- rules/verify-low-catches-rounding).
rule {
  name = "absorb-64",
  pattern = function(x) return (x + 64) - 64 end,
  replace = function(x) return x end,
}
