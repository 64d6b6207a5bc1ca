-- Two rules that undo each other: the driver notices the graph coming back.
rule {
  name = "double-to-add",
  pattern = function(x) return x * 2 end,
  replace = function(x) return x + x end,
}
rule {
  name = "add-to-double",
  pattern = function(x) return x + x end,
  replace = function(x) return x * 2 end,
}
