-- layout.lua: transposes and reshapes that cancel.
--
--   transpose(transpose(x)) whose perms compose to the identity -> x
--   transpose(transpose(x)) otherwise                           -> one transpose
--   transpose(x) with the identity perm                         -> x
--   reshape(reshape(x))                                         -> one reshape
--   reshape(x) to x's own shape                                 -> x
-- Attributes are read in where() and replace() from the matched nodes, so
-- these rules run per match (they are cheap).  The inner node of a pair
-- may have other users: it is then kept for them (keep_interior).

-- The perm of a transpose node (absent: reversed dims).
local function perm_of(node, rank)
  local p = node:attr("perm")
  if p then return p end
  p = {}
  for i = 1, rank do p[i] = rank - i end
  return p
end

-- perm of transpose(transpose(x, inner), outer): out[i] = inner[outer[i]]
local function compose(inner, outer)
  local p = {}
  for i = 1, #outer do p[i] = inner[outer[i] + 1] end
  return p
end

local function is_identity(p)
  for i = 1, #p do
    if p[i] ~= i - 1 then return false end
  end
  return true
end

local function composed(m)
  local outer = m.root
  local inner = outer.inputs[1].def
  return compose(perm_of(inner, m.x.rank), perm_of(outer, m.x.rank))
end

local function static(shape)
  for _, d in ipairs(shape) do
    if type(d) ~= "number" then return false end
  end
  return true
end

rule {
  name = "transpose-transpose/cancel", benefit = 3,
  pattern = function(x) return transpose(transpose(x)) end,
  where = function(m) return is_identity(composed(m)) end,
  replace = function(x) return x end,
  keep_interior = true, -- the inner transpose stays for its other users
}
rule {
  name = "transpose-transpose/merge", benefit = 2,
  pattern = function(x) return transpose(transpose(x)) end,
  where = function(m) return not is_identity(composed(m)) end,
  replace = function(x, m) return transpose(x, {perm = composed(m)}) end,
  keep_interior = true,
  verify = false, -- a random graph has default perms, which cancel: the examples check it
}
rule {
  name = "transpose/identity", benefit = 2,
  pattern = function(x) return transpose(x) end,
  where = function(m) return is_identity(perm_of(m.root, m.x.rank)) end,
  replace = function(x) return x end,
  verify = { {x = "f32[4]"} },
}
rule {
  name = "reshape-reshape", benefit = 2,
  pattern = function(x) return reshape(reshape(x)) end,
  where = function(m) return static(m.root.outputs[1].shape) end,
  replace = function(x, m) return reshape(x, {shape = m.root.outputs[1].shape}) end,
  keep_interior = true,
  verify = false, -- reshape needs a shape, which a random graph lacks
}
rule {
  name = "reshape/identity", benefit = 2,
  pattern = function(x) return reshape(x) end,
  where = function(m) return m.x.type == m.root.outputs[1].type end,
  replace = function(x) return x end,
  verify = false, -- as above
}

examples = {
  {
    before = [[
graph @g(%x: f32[2,3,4]) -> (f32[2,3,4], f32[4,2,3]) {
  %a = transpose(%x) {perm = [1, 2, 0]} : f32[3,4,2]
  %b = transpose(%a) {perm = [2, 0, 1]} : f32[2,3,4]
  %c = transpose(%a) {perm = [1, 2, 0]} : f32[4,2,3]
  return %b, %c
}]],
    after = [[
graph @g(%x: f32[2,3,4]) -> (f32[2,3,4], f32[4,2,3]) {
  %c = transpose(%x) {perm = [2, 0, 1]} : f32[4,2,3]
  return %x, %c
}]],
  },
  {
    before = [[
graph @g(%x: f32[4,6]) -> (f32[3,8]) {
  %a = reshape(%x) {shape = [24]} : f32[24]
  %b = reshape(%a) {shape = [3, -1]} : f32[3,8]
  return %b
}]],
    after = [[
graph @g(%x: f32[4,6]) -> (f32[3,8]) {
  %b = reshape(%x) {shape = [3, 8]} : f32[3,8]
  return %b
}]],
  },
}
