-- `to` names a dtype or a type variable the rule declares
rule {
  name = "cast-pair",
  pattern = function(x) return cast(cast(x, {to = "f32"}), {to = "T"}) end,
  replace = function(x) return x end,
}
