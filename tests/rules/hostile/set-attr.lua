-- g:set_attr on a node that has no attributes yet (UBSan once saw a
-- memcpy from NULL there).
transform {
  name = "set-axis", on = "softmax",
  apply = function(g, node)
    if node:attr("axis") then return false end
    g:set_attr(node, "axis", 0)
    return true
  end,
}
