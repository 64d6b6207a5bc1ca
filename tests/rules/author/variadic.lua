-- `...` in a pattern stands for any number of operands of one node of an op
-- of variable arity (concat here), and in the replacement for those values:
-- concat(concat(a, b, ...), y) along one axis is concat(a, b, ..., y).
-- where(m) sees the values as the list m["..."].
rule {
  name = "concat-flatten",
  pattern = function(y, ...) return concat(concat(..., {axis = 1}), y, {axis = 1}) end,
  where = function(m) return #m["..."] >= 2 end,
  replace = function(y, ...) return concat(..., y, {axis = 1}) end,
  verify = { {y = "f32[4,3]", ["..."] = "f32[4,2]"} },
}

-- A concat of one operand is that operand.  The replacement reads a fact of
-- its values, so it runs per match and gets them as its `...`.
rule {
  name = "concat-one",
  pattern = function(...) return concat(..., {axis = 1}) end,
  where = function(m) return #m["..."] == 1 end,
  replace = function(...)
    local v = select(1, ...)
    return v.rank > 0 and v or nil
  end,
  verify = false, -- one operand only: the golden test checks it
}
