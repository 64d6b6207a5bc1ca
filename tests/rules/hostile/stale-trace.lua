-- A traced value kept in a global by one rule's replace (a replacement that
-- reads x.dtype is traced, fails and is freed) and used in the next rule's
-- pattern.  The next pattern is often allocated where the freed one was, so
-- an address check let the stale value through: a heap overflow under ASan,
-- a corrupt pattern otherwise.  It must be refused every time.
for i = 1, 100 do
  rule {
    name = "keep" .. i,
    pattern = function(y)
      local ok = pcall(function() return tanh(kept) end)
      if ok then accepted = (accepted or 0) + 1 end
      return tanh(y) + y
    end,
    replace = function(y) kept = y return y.dtype and y end,
  }
end
if accepted then error("a stale traced value was accepted " .. accepted .. " times") end
