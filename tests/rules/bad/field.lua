-- A misspelled field is an error, not ignored.
rule {
  name = "typo",
  pattern = function(x) return tanh(x) end,
  replace = function(x) return x end,
  wher = function(m) return true end,
}
