-- Sibling matmuls of one input with constant weights become one matmul of
-- the concatenated weights and a split (of unequal widths when the weights
-- differ: a merged Q/K/V).  New nodes go where their operands are defined;
-- g:dominates keeps out a sibling whose weight is defined after the first
-- matmul (the merged one takes its place, so every weight must be there).
transform {
  name = "merge-sibling-matmuls", on = "matmul",
  apply = function(g, node)
    local x, w = node.inputs[1], node.inputs[2]
    if not w.is_const or w.rank ~= 2 or x.rank ~= 2 then return false end
    local group = {node}
    for _, u in ipairs(x.users) do
      local v = u.op == "matmul" and u ~= node and u.inputs[1] == x and u.inputs[2]
      if v and v.is_const and v.rank == 2 and v.shape[1] == w.shape[1] and g:before(node, u)
         and g:dominates(v, node) then
        group[#group + 1] = u
      end
    end
    if #group < 2 then return false end
    table.sort(group, function(a, b) return g:before(a, b) end) -- in graph order
    local ws, sizes = {}, {}
    for i, m in ipairs(group) do
      ws[i] = m.inputs[2]
      sizes[i] = ws[i].shape[2]
    end
    local wc = g:create("concat", ws, {axis = 1})
    local mm = g:create("matmul", {x, wc:output(1)})
    local parts = g:create{op = "split", inputs = {mm:output(1)}, attrs = {axis = 1, sizes = sizes}}
    for i, m in ipairs(group) do
      g:replace_all_uses(m:output(1), parts:output(i))
      g:erase(m)
    end
    return true
  end,
}
