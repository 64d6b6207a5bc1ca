-- tan.lua: the op an imported `opaque @Tan` stands for (tests/golden/onnx/opaque.kf).
op {
  name = "Tan", trait = "elementwise", arity = 1,
  doc = "tangent",
  cpu = function(a) return math.tan(a) end,
  cuda = "tanf(a)",
}
