-- A where() that never returns: stopped by the instruction limit.
rule {
  name = "spin",
  pattern = function(x) return tanh(x) end,
  where = function(m)
    while true do end
  end,
  replace = function(x) return x end,
}
