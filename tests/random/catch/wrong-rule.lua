-- A wrong rule for tests/random/CMakeLists.txt's random/catches-wrong-rule:
-- kf-random's oracle must report it, also on a graph that computes an
-- infinity elsewhere (rounding_only takes fewer infinities as a better
-- rounding only when the rewrite removed them, not when it left them).
rule {
  name = "wrong-tanh", verify = false,
  pattern = function(x) return tanh(x) end,
  replace = function(x) return sigmoid(x) end,
}
