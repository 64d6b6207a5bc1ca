-- require reads only modules below the rule path.
local secret = require "..etc.passwd"
