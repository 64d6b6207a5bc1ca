-- A rule that always matches what it builds: the rewrite cap stops it.
rule {
  name = "grow",
  pattern = function(x) return relu(x) end,
  replace = function(x) return relu(relu(x)) end,
}
