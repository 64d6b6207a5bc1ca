-- batchnorm.lua: an inference batch norm after a matmul or gemm, folded
-- into the weights.
--
--   (matmul(x, w) - mean) / sqrt(var + eps) * gamma + beta
--     -> matmul(x, w * s) + (beta - mean * s),   s = gamma / sqrt(var + eps)
--   matmul(x, w) * scale + shift  ->  matmul(x, w * scale) + shift
--   gemm(a, w, c) * scale + shift ->  gemm(a, w * scale, c * scale + shift)
-- where w, mean, var, gamma, beta, scale and shift are constants and the
-- per-feature vectors are 1-D (one entry per output column): `w * s` then
-- scales w's columns, and canonicalize folds it into a new weight constant.
-- gemm only with trans_b = 0 (w is [K, N]); any alpha and beta are fine,
-- since gemm is linear in w and c.
local function consts(m, names)
  for _, n in ipairs(names) do
    if not m[n].is_const then return false end
  end
  return true
end
local function vectors(m, names)
  for _, n in ipairs(names) do
    if m[n].rank ~= 1 then return false end
  end
  return true
end

local norms = {
  div_sqrt = function(y, mean, var, eps) return (y - mean) / sqrt(var + eps) end,
  mul_rsqrt = function(y, mean, var, eps) return (y - mean) * rsqrt(var + eps) end,
}
for _, name in ipairs({"div_sqrt", "mul_rsqrt"}) do
  local norm = norms[name]
  rule {
    name = "batchnorm-fold/matmul/" .. name, benefit = 5,
    pattern = function(x, w, mean, var, eps, gamma, beta)
      return norm(matmul(x, w), mean, var, eps) * gamma + beta
    end,
    where = function(m)
      return consts(m, {"w", "mean", "var", "eps", "gamma", "beta"}) and m.w.rank == 2
        and vectors(m, {"mean", "var", "gamma", "beta"}) and m.eps.numel == 1
    end,
    replace = function(x, w, mean, var, eps, gamma, beta)
      local s = gamma / sqrt(var + eps)
      return matmul(x, w * s) + (beta - mean * s)
    end,
    verify = { {x = "f32[4,8]", w = "const f32[8,6]", mean = "const f32[6]", var = "const f32[6]=1.5",
                eps = "const f32[]=1e-5", gamma = "const f32[6]", beta = "const f32[6]"} },
  }
end

rule {
  name = "scale-fold/matmul", benefit = 4,
  pattern = function(x, w, scale, shift) return matmul(x, w) * scale + shift end,
  where = function(m)
    return consts(m, {"w", "scale", "shift"}) and m.w.rank == 2 and vectors(m, {"scale"})
  end,
  replace = function(x, w, scale, shift) return matmul(x, w * scale) + shift end,
  verify = { {x = "f32[4,8]", w = "const f32[8,6]", scale = "const f32[6]", shift = "const f32[6]"} },
}

rule {
  name = "scale-fold/gemm", benefit = 4,
  pattern = function(a, w, c, scale, shift) return gemm(a, w, c, {trans_b = 0}) * scale + shift end,
  where = function(m)
    return consts(m, {"w", "c", "scale", "shift"}) and vectors(m, {"scale"})
  end,
  replace = function(a, w, c, scale, shift, m)
    -- keep the gemm's alpha, beta and trans_a
    for _, v in ipairs(m.root.inputs) do
      local mul = v.def
      for _, u in ipairs(mul and mul.op == "mul" and mul.inputs or {}) do
        if u.def and u.def.op == "gemm" then
          return gemm(a, w * scale, c * scale + shift, u.def.attrs)
        end
      end
    end
  end,
  verify = { {a = "f32[4,8]", w = "const f32[8,6]", c = "const f32[6]", scale = "const f32[6]",
              shift = "const f32[6]"} },
}

examples = {
  {
    before = [==[
graph @fc_bn(%x: f32[2,3]) -> (f32[2,4]) {
  %w = const dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]> : f32[3,4]
  %y = matmul(%x, %w) : f32[2,4]
  %mean = const dense<[0.5, 0.25, 0.0, 1.0]> : f32[4]
  %var = const dense<[1.0, 4.0, 9.0, 16.0]> : f32[4]
  %eps = const 1e-05 : f32[]
  %gamma = const dense<[1.0, 1.0, 2.0, 2.0]> : f32[4]
  %beta = const dense<[0.0, 0.5, 0.0, 0.5]> : f32[4]
  %c = sub(%y, %mean) : f32[2,4]
  %ve = add(%var, %eps) : f32[4]
  %sd = sqrt(%ve) : f32[4]
  %n = div(%c, %sd) : f32[2,4]
  %g = mul(%n, %gamma) : f32[2,4]
  %z = add(%g, %beta) : f32[2,4]
  return %z
}]==],
    after = [==[
graph @fc_bn(%x: f32[2,3]) -> (f32[2,4]) {
  %w = const dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]> : f32[3,4]
  %mean = const dense<[0.5, 0.25, 0.0, 1.0]> : f32[4]
  %var = const dense<[1.0, 4.0, 9.0, 16.0]> : f32[4]
  %eps = const 1e-05 : f32[]
  %gamma = const dense<[1.0, 1.0, 2.0, 2.0]> : f32[4]
  %beta = const dense<[0.0, 0.5, 0.0, 0.5]> : f32[4]
  %ve = add(%var, %eps) : f32[4]
  %sd = sqrt(%ve) : f32[4]
  %s = div(%gamma, %sd) : f32[4]
  %ws = mul(%w, %s) : f32[3,4]
  %y = matmul(%x, %ws) : f32[2,4]
  %ms = mul(%mean, %s) : f32[4]
  %sh = sub(%beta, %ms) : f32[4]
  %z = add(%y, %sh) : f32[2,4]
  return %z
}]==],
  },
}
