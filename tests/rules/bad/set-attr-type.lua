-- set_attr that changes a node's result type (keepdims = false drops a dim
-- its users read) is refused with the transform's name and rolled back.
transform {
  name = "drop-dims", on = "reduce_sum",
  apply = function(g, node)
    if node:attr("keepdims") == false then return false end
    g:set_attr(node, "keepdims", false)
    return true
  end,
}
