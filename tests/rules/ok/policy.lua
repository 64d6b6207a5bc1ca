-- A fusion policy for `fuse{policy=...}`: the fuse pass asks can_fuse for
-- every producer -> consumer edge it could fuse.  true allows (waiving the
-- pass's heuristic limits, never legality), false vetoes, nil leaves it to
-- the pass.  The nodes are read-only handles (op, inputs, outputs, attrs,
-- types, ...).
function can_fuse(producer, consumer)
  if consumer.op == "tanh" then return false end
  return nil
end
