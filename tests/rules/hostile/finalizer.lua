-- Lua runs finalizers with hooks off: this one would spin for ever when the
-- state closes, out of the instruction budget's and the time limit's reach.
setmetatable({}, {__gc = function() while true do end end})
