-- A rule file that does not parse.
rule {
  name = "broken",
  pattern = function(x) return x +* 1 end,
  replace = function(x) return x end,
}
