-- A where() that eats memory: stopped by the allocator's budget.
rule {
  name = "hog",
  pattern = function(x) return tanh(x) end,
  where = function(m)
    local s = "0123456789abcdef"
    while true do s = s .. s end
  end,
  replace = function(x) return x end,
}
