transform {
  name = "neg-neg", on = "neg",
  apply = function(g, node)
    local x = node.inputs[1]
    if x.node and x.node.op == "neg" then
      node.outputs[1]:replace_all_uses(x.node.inputs[1])
      return true
    end
    return false
  end,
}
local t = {}
for i = 1, 10 do t[#t + 1] = string.rep("a", i) end
while #t > 0 do table.remove(t) end
