-- Tensor constants built by a transform and by a replacement: a sum over
-- the last axis of a [N, K] value becomes a matmul with a column of ones,
-- and a mean a matmul with a column of 1/K (a nested list gives the shape).
local function column(k, v)
  local c = {}
  for i = 1, k do c[i] = {v} end
  return c
end

transform {
  name = "sum-as-matmul", on = "reduce_sum",
  apply = function(g, node)
    local x = node.inputs[1]
    local axes = node:attr("axes")
    if x.rank ~= 2 or not axes or #axes ~= 1 or (axes[1] ~= 1 and axes[1] ~= -1) then return false end
    local ones = g:const(column(x.shape[2], 1), x.dtype)
    local m = g:create("matmul", {x, ones})
    g:replace_all_uses(node, m)
    g:erase(node)
    return true
  end,
}

rule {
  name = "mean-as-matmul",
  types = {x = "T[N, K]"},
  pattern = function(x) return reduce_mean(x, {axes = {-1}}) end,
  replace = function(x, m) return matmul(x, const(column(m.K, 1 / m.K), m.T)) end,
  verify = { {x = "f32[3,4]"}, {x = "f64[2,5]"} },
}
