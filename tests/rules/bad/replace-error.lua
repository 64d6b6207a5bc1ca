-- A replacement that fails half way: the nodes it made are rolled back.
rule {
  name = "half",
  pattern = function(x) return tanh(x) end,
  replace = function(x, m)
    local y = exp(x) * m.root.outputs[1]
    error("gave up after building " .. tostring(y))
  end,
}
