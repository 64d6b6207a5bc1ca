#!/usr/bin/env python3
"""Writes a graph of about N nodes (default 1000) for the compile-time bench:
blocks of bias + tanh-GELU + residual + layer norm (as primitive ops) + scale
on [256, 1024] f32, each block reading its own bias, gamma and beta."""
import argparse

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    T = "f32[256,1024]"
    R = "f32[256,1]"
    per = 13
    nb = max(1, a.nodes // per)
    args = ["%x: " + T] + [f"%b{i}: f32[1024], %g{i}: f32[1024], %e{i}: f32[1024]" for i in range(nb)]
    L = [f"graph @big({', '.join(args)}) -> ({T}) {{", "  %eps = const 1.0e-5 : f32[]",
         "  %half = const 0.5 : f32[]"]
    h = "%x"
    for i in range(nb):
        L += [f"  %a{i} = add({h}, %b{i}) : {T}",
              f"  %q{i} = gelu(%a{i}) {{approximate = \"tanh\"}} : {T}",
              f"  %r{i} = add(%q{i}, {h}) : {T}",
              f"  %mu{i} = reduce_mean(%r{i}) {{axes = [-1], keepdims = true}} : {R}",
              f"  %d{i} = sub(%r{i}, %mu{i}) : {T}",
              f"  %dd{i} = mul(%d{i}, %d{i}) : {T}",
              f"  %v{i} = reduce_mean(%dd{i}) {{axes = [-1], keepdims = true}} : {R}",
              f"  %ve{i} = add(%v{i}, %eps) : {R}",
              f"  %rs{i} = rsqrt(%ve{i}) : {R}",
              f"  %n{i} = mul(%d{i}, %rs{i}) : {T}",
              f"  %s{i} = mul(%n{i}, %g{i}) : {T}",
              f"  %t{i} = add(%s{i}, %e{i}) : {T}",
              f"  %h{i} = mul(%t{i}, %half) : {T}"]
        h = f"%h{i}"
    L += [f"  return {h}", "}"]
    with open(a.out, "w") as f:
        f.write("\n".join(L) + "\n")
    print(f"gen_big: {a.out}: {nb} blocks, {nb * 13 + 3} nodes")

main()
