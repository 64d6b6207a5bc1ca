-- Reductions defined in Lua: trait "reduce", and cpu a function of the
-- values that reduce into one output element.  The shape rule is the
-- built-in reductions' (axes, all when absent; keepdims, default true).
op {
  name = "reduce_sumsq", trait = "reduce", doc = "sum of squares over {axes}",
  cpu = function(v)
    local s = 0
    for i = 1, #v do s = s + v[i] * v[i] end
    return s
  end,
}

op {
  name = "logsumexp", trait = "reduce", doc = "log(sum(exp(x))) over {axes}, computed stably",
  cpu = function(v)
    local m = -math.huge
    for i = 1, #v do if v[i] > m then m = v[i] end end
    local s = 0
    for i = 1, #v do s = s + math.exp(v[i] - m) end
    return m + math.log(s)
  end,
}

rule {
  name = "sum-of-squares",
  pattern = function(x) return reduce_sum(x * x, {axes = {-1}}) end,
  replace = function(x) return reduce_sumsq(x, {axes = {-1}}) end,
}

rule {
  name = "logsumexp",
  pattern = function(x) return log(reduce_sum(exp(x), {axes = {-1}, keepdims = false})) end,
  replace = function(x) return logsumexp(x, {axes = {-1}, keepdims = false}) end,
}
