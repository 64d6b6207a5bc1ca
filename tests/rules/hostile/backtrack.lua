-- Lua's pattern matcher backtracks: this one line ran for minutes, one
-- instruction as far as the count hook could see.
local x = ("a"):rep(28):find(("a*"):rep(14) .. "b")
