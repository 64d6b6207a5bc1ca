-- assoc = false: the rule matches its products only as written, so the
-- operand-order check of kfuse-verify-rules must report the groupings it
-- misses (tests/rules/CMakeLists.txt: rules/orders-catch-no-assoc).
rule {
  name = "silu-scaled", assoc = false,
  pattern = function(x) return (2 * x) * sigmoid(x) end,
  replace = function(x) return 2 * silu(x) end,
}
