-- A module for sandbox/uses-lib.lua.
return { benefit = 7 }
