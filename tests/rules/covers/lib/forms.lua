-- lib/forms.lua: helpers shared by the standard rules (require "lib.forms").
--
-- Exporters write one formula in several shapes.  Commutative operands are
-- matched in either order by the engine, but association is not: (a*b)*c
-- and a*(b*c) are different graphs.  These helpers list the variants, and
-- the rule files declare one rule per variant.
local M = {}

-- The three ways a product of three factors is grouped.  Each entry is a
-- function of the three factors (called while tracing, so the factors may be
-- traced values or numbers).
M.products3 = {
  function(a, b, c) return (a * b) * c end,
  function(a, b, c) return a * (b * c) end,
  function(a, b, c) return (a * c) * b end,
}

-- x cubed, as pow or as products.
M.cubes = {
  pow = function(x) return x ^ 3 end,
  mul_left = function(x) return (x * x) * x end,
  mul_right = function(x) return x * (x * x) end,
}

-- Sorted iteration, so that rules are declared in a stable order.
function M.sorted(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local i = 0
  return function()
    i = i + 1
    if keys[i] ~= nil then return keys[i], t[keys[i]] end
  end
end

-- Declares one rule per variant, named base .. "/" .. the variant's key.
function M.variants(base, variants, make)
  for vname, v in M.sorted(variants) do
    local spec = make(v)
    spec.name = base .. "/" .. vname
    rule(spec)
  end
end

return M
