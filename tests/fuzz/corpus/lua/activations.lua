-- activations.lua: SiLU, sigmoid, ReLU, hard-sigmoid and hard-swish
-- written as primitive ops, with or without a bias before them.
--
-- kfuse has no hard-sigmoid or hard-swish op, so this file defines them as
-- Lua ops (PyTorch's definitions: relu6(x + 3) / 6 and x * relu6(x + 3) / 6;
-- ONNX HardSigmoid with alpha 1/6, beta 0.5), with a CUDA expression so they
-- fuse like built-in ops and a per-element CPU function for the interpreter.
-- Exporters clip with max/min, or with relu (which the relu rule below
-- makes of max(x, 0) first), so the patterns cover both.
local forms = require "lib.forms"

op {
  name = "hardsigmoid", trait = "elementwise", arity = 1,
  doc = "min(max(x / 6 + 1/2, 0), 1) (PyTorch's hardsigmoid)",
  cpu = function(a) return math.min(math.max(a / 6 + 0.5, 0), 1) end,
  cuda = "fminf(fmaxf(a * (1.f / 6.f) + 0.5f, 0.f), 1.f)",
}
op {
  name = "hardswish", trait = "elementwise", arity = 1,
  doc = "x * hardsigmoid(x) (PyTorch's hardswish)",
  cpu = function(a) return a * math.min(math.max(a / 6 + 0.5, 0), 1) end,
  cuda = "(a * fminf(fmaxf(a * (1.f / 6.f) + 0.5f, 0.f), 1.f))",
}

rule {
  name = "silu/sigmoid", benefit = 2,
  pattern = function(x) return x * sigmoid(x) end,
  replace = function(x) return silu(x) end,
}
rule {
  name = "silu/exp", benefit = 2,
  pattern = function(x) return x / (1 + exp(-x)) end,
  replace = function(x) return silu(x) end,
}
rule {
  name = "sigmoid/exp", benefit = 2,
  pattern = function(x) return 1 / (1 + exp(-x)) end,
  replace = function(x) return sigmoid(x) end,
}
rule {
  name = "relu/max", benefit = 1,
  pattern = function(x) return max(x, 0) end,
  replace = function(x) return relu(x) end,
}

-- relu6(x + 3) with max or relu; then / 6 or * (1/6)
local relu6 = {
  max = function(x) return min(max(x + 3, 0), 6) end,
  relu = function(x) return min(relu(x + 3), 6) end,
}
local sixth = {
  div = function(t) return t / 6 end,
  mul = function(t) return t * (1 / 6) end,
}
for rname, r6 in forms.sorted(relu6) do
  for sname, s in forms.sorted(sixth) do
    rule {
      name = "hardsigmoid/" .. rname .. "/" .. sname, benefit = 3,
      pattern = function(x) return s(r6(x)) end,
      replace = function(x) return hardsigmoid(x) end,
    }
    rule {
      name = "hardswish/" .. rname .. "/" .. sname, benefit = 3,
      pattern = function(x) return s(x * r6(x)) end,
      replace = function(x) return hardswish(x) end,
    }
  end
end
-- the clip form min(max(x / 6 + 0.5, 0), 1), and relu's
rule {
  name = "hardsigmoid/clip", benefit = 3,
  pattern = function(x) return min(max(x * (1 / 6) + 0.5, 0), 1) end,
  replace = function(x) return hardsigmoid(x) end,
}
rule {
  name = "hardsigmoid/clip-relu", benefit = 3,
  pattern = function(x) return min(relu(x * (1 / 6) + 0.5), 1) end,
  replace = function(x) return hardsigmoid(x) end,
}
rule {
  name = "hardswish/hardsigmoid", benefit = 2,
  pattern = function(x) return x * hardsigmoid(x) end,
  replace = function(x) return hardswish(x) end,
}

examples = {
  { -- bias + SiLU, as exp and division
    before = [[
graph @bias_silu(%x: f32[4,8], %b: f32[8]) -> (f32[4,8]) {
  %t = add(%x, %b) : f32[4,8]
  %n = neg(%t) : f32[4,8]
  %e = exp(%n) : f32[4,8]
  %one = const 1.0 : f32[]
  %d = add(%one, %e) : f32[4,8]
  %y = div(%t, %d) : f32[4,8]
  return %y
}]],
    after = [[
graph @bias_silu(%x: f32[4,8], %b: f32[8]) -> (f32[4,8]) {
  %t = add(%x, %b) : f32[4,8]
  %y = silu(%t) : f32[4,8]
  return %y
}]],
  },
  { -- hard-swish as MobileNetV3 exports it: x * relu6(x + 3) / 6
    before = [[
graph @hswish(%x: f32[16]) -> (f32[16]) {
  %three = const 3.0 : f32[]
  %a = add(%x, %three) : f32[16]
  %zero = const 0.0 : f32[]
  %r = max(%a, %zero) : f32[16]
  %six = const 6.0 : f32[]
  %c = min(%r, %six) : f32[16]
  %m = mul(%x, %c) : f32[16]
  %y = div(%m, %six) : f32[16]
  return %y
}]],
    after = [[
graph @hswish(%x: f32[16]) -> (f32[16]) {
  %y = hardswish(%x) : f32[16]
  return %y
}]],
  },
  { -- bias + hard-sigmoid in the clip form
    before = [[
graph @hsig(%x: f32[2,16], %b: f32[16]) -> (f32[2,16]) {
  %t = add(%x, %b) : f32[2,16]
  %k = const 0.16666666666666666 : f32[]
  %s = mul(%t, %k) : f32[2,16]
  %h = const 0.5 : f32[]
  %a = add(%s, %h) : f32[2,16]
  %zero = const 0.0 : f32[]
  %r = max(%a, %zero) : f32[2,16]
  %one = const 1.0 : f32[]
  %y = min(%r, %one) : f32[2,16]
  return %y
}]],
    after = [[
graph @hsig(%x: f32[2,16], %b: f32[16]) -> (f32[2,16]) {
  %t = add(%x, %b) : f32[2,16]
  %y = hardsigmoid(%t) : f32[2,16]
  return %y
}]],
  },
}
