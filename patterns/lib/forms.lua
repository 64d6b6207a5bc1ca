-- lib/forms.lua: helpers shared by the standard rules (require "lib.forms").
--
-- Exporters write one formula in several shapes.  The matcher takes care of
-- operand order and of the grouping of sums and products (docs/rules.md,
-- "Matching"); what is left are different ops for one value (x^2 and x*x,
-- / sqrt and * rsqrt), which the rule files list as variants.
local M = {}

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
