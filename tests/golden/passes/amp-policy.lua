-- A user's override of the standard amp policy: one op, one line.
amp = { f32 = {"gelu"} }
