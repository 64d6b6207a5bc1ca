-- The sandbox has no io, os, debug or package.
local f = io.open("/etc/passwd")
