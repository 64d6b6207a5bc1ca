-- conv.lua: per-channel affine ops after a convolution, folded into its
-- weights and bias: an inference batch norm, however the exporter wrote it.
--
--   conv(x, w, b) * s  ->  conv(x, w * S, b * s)      S = s as [O, 1, ..., 1]
--   conv(x, w, b) / s  ->  conv(x, w / S, b / s)
--   conv(x, w, b) + t  ->  conv(x, w, b + t)
--   conv(x, w, b) - t  ->  conv(x, w, b - t)
--   t - conv(x, w, b)  ->  conv(x, -w, t - b)
-- and the same without a bias (b taken as 0).  One rewrite absorbs one op;
-- the driver repeats, so (conv - mean) * (gamma / sqrt(var + eps)) + beta,
-- as the ONNX importer writes BatchNormalization, becomes one conv (the
-- operand order of add and mul does not matter: the matcher tries both).
-- s and t must be computed from constants alone (a const, or ops over
-- consts: `rsqrt(var + eps) * gamma` from file() weights qualifies) and vary
-- at most along the output channels (the conv's dim 1, or its last dim with
-- channels_last): [O, 1, 1], [1, O, 1, 1], [O] channels last, or a scalar.
-- The new weight and bias are expressions over constants; canonicalize folds
-- them into new constants where it can (inline constants up to its size
-- limit), so run it after the rules.

-- v is computed from constants only (within a few ops).
local function const_derived(v, depth)
  if v.is_const then return true end
  local d = v.def
  if not d or depth > 12 or #d.inputs == 0 or d.op == "fusion" then return false end
  for _, u in ipairs(d.inputs) do
    if not const_derived(u, depth + 1) then return false end
  end
  return true
end

-- The conv node among the root's operands.
local function conv_of(m)
  for _, v in ipairs(m.root.inputs) do
    if v.def and v.def.op == "conv" then return v.def end
  end
end

-- c broadcasts into the conv's result y along its channel dim only.
local function per_channel(c, y, last)
  local r, rc = y.rank, c.rank
  if rc > r or type(y.shape[last and r or 2]) ~= "number" then return false end
  local ch = last and r or 2
  for i = 1, rc do
    local d, yi = c.shape[i], r - rc + i
    if type(d) ~= "number" or (d ~= 1 and not (yi == ch and d == y.shape[yi])) then return false end
  end
  return true
end

local function ok(m)
  local cv = conv_of(m)
  if not cv then return false end
  local y = cv.outputs[1]
  return const_derived(m.c, 0) and per_channel(m.c, y, cv:attr("channels_last") == true or
    cv:attr("channels_last") == 1) and m.c.dtype == y.dtype
end

-- c as a vector [O] (a scalar is broadcast), and as [O, 1, ..., 1] to
-- scale w's output channels, which are w's dim 0 in both layouts.
local function vec(c, O)
  local v = reshape(c, {shape = {c.numel}})
  if c.numel ~= O then v = broadcast_to(v, {shape = {O}}) end
  return v
end
local function per_out(v, w)
  local s = {w.shape[1]}
  for i = 2, w.rank do s[i] = 1 end
  return reshape(v, {shape = s})
end

-- The rewrites: (w, b, s) -> new w, new b; b is nil without a bias.
local folds = {
  mul = {pattern = function(y, c) return y * c end,
         fold = function(w, b, s) return w * per_out(s, w), b and b * s end},
  div = {pattern = function(y, c) return y / c end,
         fold = function(w, b, s) return w / per_out(s, w), b and b / s end},
  add = {pattern = function(y, c) return y + c end,
         fold = function(w, b, s) return w, b and b + s or s end},
  sub = {pattern = function(y, c) return y - c end,
         fold = function(w, b, s) return w, b and b - s or neg(s) end},
  rsub = {pattern = function(y, c) return c - y end,
          fold = function(w, b, s) return neg(w), b and s - b or s end},
}

for _, name in ipairs({"mul", "div", "add", "sub", "rsub"}) do
  local f = folds[name]
  for _, bias in ipairs({false, true}) do
    local function make(x, w, b) if bias then return conv(x, w, b) end return conv(x, w) end
    local function apply(x, w, b, c, m)
      local cv = conv_of(m)
      local w2, b2 = f.fold(w, bias and b or nil, vec(c, w.shape[1]))
      if b2 then return conv(x, w2, b2, cv.attrs) end
      return conv(x, w2, cv.attrs)
    end
    local spec = {
      name = "conv-affine-fold/" .. name .. (bias and "/bias" or ""), benefit = 5,
      where = ok,
      verify = { {x = "f32[2,4,6,5]", w = "const f32[6,4,3,3]", b = "const f32[6]",
                  c = name == "div" and "const f32[6,1,1]=1.5" or "const f32[6,1,1]"} },
    }
    if bias then
      spec.pattern = function(x, w, b, c) return f.pattern(make(x, w, b), c) end
      spec.replace = function(x, w, b, c, m) return apply(x, w, b, c, m) end
    else
      spec.pattern = function(x, w, c) return f.pattern(make(x, w), c) end
      spec.replace = function(x, w, c, m) return apply(x, w, nil, c, m) end
      spec.verify[1].b = nil
    end
    rule(spec)
  end
end

-- Zero padding in front of a conv or an average pool, folded into their
-- pads (PyTorch exports avg_pool2d with count_include_pad = True, its
-- default, as Pad + AveragePool; other exporters pad convs explicitly):
--   conv(pad(x), w, b?)  ->  conv(x, w, b?) {pads += the pad's spatial pads}
--   avg_pool(pad(x))     ->  avg_pool(x) {pads, count_include_pad = true}
-- when the pad is constant 0 on the spatial dims alone (none on the batch
-- or channel dims, none negative).  The pool only when it had no pads of
-- its own, no ceil_mode (an overhanging window would count differently)
-- and the pads stay below the dilated kernel, as pools require.
local function spatial_pads(m, last)
  local pd = m.root.inputs[1].def
  local pads, mode, value = pd:attr("pads"), pd:attr("mode"), pd:attr("value")
  if (mode and mode ~= "constant") or (value and value ~= 0) or not pads then return nil end
  local r = #pads // 2
  local ch = last and r or 2
  local out = {}
  for i = 1, r do
    local b, e = pads[i], pads[r + i]
    if b < 0 or e < 0 then return nil end
    if i == 1 or i == ch then
      if b ~= 0 or e ~= 0 then return nil end
    end
  end
  for i = 1, r do
    if i ~= 1 and i ~= ch then out[#out + 1] = pads[i] end
  end
  for i = 1, r do
    if i ~= 1 and i ~= ch then out[#out + 1] = pads[r + i] end
  end
  return out
end

local function channels_last(node)
  local cl = node:attr("channels_last")
  return cl == true or cl == 1
end

local function with_pads(node, add)
  local attrs, old = node.attrs, node:attr("pads")
  local pads = {}
  for i = 1, #add do pads[i] = add[i] + (old and old[i] or 0) end
  attrs.pads = pads
  return attrs
end

for _, bias in ipairs({false, true}) do
  local spec = {
    name = "pad-into-conv" .. (bias and "/bias" or ""), benefit = 4,
    where = function(m) return spatial_pads(m, channels_last(m.root)) ~= nil end,
    verify = false, -- a pad needs its pads, which a random graph lacks: the golden test checks it
  }
  local function attrs_of(m) return with_pads(m.root, spatial_pads(m, channels_last(m.root))) end
  if bias then
    spec.pattern = function(x, w, b) return conv(pad(x), w, b) end
    spec.replace = function(x, w, b, m) return conv(x, w, b, attrs_of(m)) end
  else
    spec.pattern = function(x, w) return conv(pad(x), w) end
    spec.replace = function(x, w, m) return conv(x, w, attrs_of(m)) end
  end
  rule(spec)
end

rule {
  name = "pad-into-avg_pool", benefit = 4,
  pattern = function(x) return avg_pool(pad(x)) end,
  where = function(m)
    local p = m.root
    local add = spatial_pads(m, channels_last(p))
    if not add or p:attr("pads") or (p:attr("ceil_mode") and p:attr("ceil_mode") ~= 0 and p:attr("ceil_mode") ~= false) then
      return false
    end
    local k, d, n = p:attr("kernel_shape"), p:attr("dilations"), #add // 2
    for i = 1, n do
      local keff = (d and d[i] or 1) * (k[i] - 1) + 1
      if add[i] >= keff or add[n + i] >= keff then return false end
    end
    return true
  end,
  replace = function(x, m)
    local attrs = with_pads(m.root, spatial_pads(m, channels_last(m.root)))
    attrs.count_include_pad = true
    return avg_pool(x, attrs)
  end,
  verify = false, -- as above
}

examples = {
  { -- BatchNormalization as the ONNX importer writes it, after a conv
    -- without a bias: folded into one conv with a bias
    before = [==[
graph @conv_bn(%x: f32[1,2,5,5], %w: f32[3,2,3,3]) -> (f32[1,3,5,5]) {
  %y = conv(%x, %w) {pads = [1, 1, 1, 1]} : f32[1,3,5,5]
  %mean = const dense<[[[0.5]], [[0.25]], [[-1.0]]]> : f32[3,1,1]
  %k = const dense<[[[2.0]], [[0.5]], [[1.5]]]> : f32[3,1,1]
  %beta = const dense<[[[0.0]], [[0.5]], [[-0.5]]]> : f32[3,1,1]
  %c = sub(%y, %mean) : f32[1,3,5,5]
  %n = mul(%k, %c) : f32[1,3,5,5]
  %z = add(%beta, %n) : f32[1,3,5,5]
  return %z
}]==],
    after = [==[
graph @conv_bn(%x: f32[1,2,5,5], %w: f32[3,2,3,3]) -> (f32[1,3,5,5]) {
  %mean = const dense<[[[0.5]], [[0.25]], [[-1.0]]]> : f32[3,1,1]
  %k = const dense<[[[2.0]], [[0.5]], [[1.5]]]> : f32[3,1,1]
  %beta = const dense<[[[0.0]], [[0.5]], [[-0.5]]]> : f32[3,1,1]
  %m3 = reshape(%mean) {shape = [3]} : f32[3]
  %b0 = neg(%m3) : f32[3]
  %k3 = reshape(%k) {shape = [3]} : f32[3]
  %k4 = reshape(%k3) {shape = [3, 1, 1, 1]} : f32[3,1,1,1]
  %w1 = mul(%w, %k4) : f32[3,2,3,3]
  %b1 = mul(%b0, %k3) : f32[3]
  %beta3 = reshape(%beta) {shape = [3]} : f32[3]
  %b2 = add(%b1, %beta3) : f32[3]
  %z = conv(%x, %w1, %b2) {pads = [1, 1, 1, 1]} : f32[1,3,5,5]
  return %z
}]==],
  },
}
