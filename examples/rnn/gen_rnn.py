#!/usr/bin/env python3
"""gen_rnn.py: writes an LSTM or GRU as unrolled primitive ops in kfuse IR.

The IR has no loop construct, so a recurrent model is its steps written out:
per step t

  LSTM: g = x_t W_ih^T + h W_hh^T + b          (gates i, f, g, o: PyTorch's order)
        c = sigmoid(f) * c + sigmoid(i) * tanh(g);  h = sigmoid(o) * tanh(c)
  GRU:  a = x_t W_ih^T + b_ih;  r_ = h W_hh^T + b_hh   (gates r, z, n)
        r = sigmoid(a_r + r_r); z = sigmoid(a_z + r_z)
        n = tanh(a_n + r * r_n);  h = (1 - z) * n + z * h

Weights are graph inputs (so `kfuse-run --random-inputs` runs it), batch is
1, and the outputs are Y (every step's h of the last layer, [T, H]) and the
last layer's final h (and c).  With --layers L, layer l > 0 reads layer
l-1's h_t as its x_t.  The `persistent` pass turns each layer's chain of
steps into one `fusion {kind = "persistent"}` node (docs/persistent.md).

  gen_rnn.py --cell lstm --steps 80 --input 256 --hidden 256 > lstm_80x256.kf
"""
import argparse
import sys


def gen(cell, steps, inp, hid, layers, name):
    ng = 4 if cell == "lstm" else 3
    G = ng * hid
    L = []
    args = ["%%x: f32[%d,%d]" % (steps, inp)]
    for l in range(layers):
        isz = inp if l == 0 else hid
        args.append("%%h0_%d: f32[1,%d]" % (l, hid))
        if cell == "lstm":
            args.append("%%c0_%d: f32[1,%d]" % (l, hid))
        args.append("%%w_ih_%d: f32[%d,%d]" % (l, G, isz))
        args.append("%%w_hh_%d: f32[%d,%d]" % (l, G, hid))
        if cell == "lstm":
            args.append("%%b_%d: f32[%d]" % (l, G))
        else:
            args.append("%%b_ih_%d: f32[%d]" % (l, G))
            args.append("%%b_hh_%d: f32[%d]" % (l, G))
    res = ["f32[%d,%d]" % (steps, hid), "f32[1,%d]" % hid]
    if cell == "lstm":
        res.append("f32[1,%d]" % hid)
    L.append("graph @%s(%s) -> (%s) {" % (name, ", ".join(args), ", ".join(res)))
    row = "f32[1,%d]" % hid
    grow = "f32[1,%d]" % G

    def sl(dst, src, a, b, axis, ty):
        L.append("  %%%s = slice(%%%s) {axes = [%d], ends = [%d], starts = [%d]} : %s"
                 % (dst, src, axis, b, a, ty))

    if cell == "gru":
        L.append("  %one = const 1.0 : f32[]")
    xs = None  # previous layer's h_t names
    for l in range(layers):
        isz = inp if l == 0 else hid
        L.append("  %%wt_ih_%d = transpose(%%w_ih_%d) {perm = [1, 0]} : f32[%d,%d]" % (l, l, isz, G))
        L.append("  %%wt_hh_%d = transpose(%%w_hh_%d) {perm = [1, 0]} : f32[%d,%d]" % (l, l, hid, G))
        h = "h0_%d" % l
        c = "c0_%d" % l
        hs = []
        for t in range(steps):
            p = "l%d_t%d_" % (l, t)
            if l == 0:
                sl(p + "x", "x", t, t + 1, 0, "f32[1,%d]" % inp)
                xin = p + "x"
            else:
                xin = xs[t]
            L.append("  %%%sxw = matmul(%%%s, %%wt_ih_%d) : %s" % (p, xin, l, grow))
            L.append("  %%%shw = matmul(%%%s, %%wt_hh_%d) : %s" % (p, h, l, grow))
            if cell == "lstm":
                L.append("  %%%ss = add(%%%sxw, %%%shw) : %s" % (p, p, p, grow))
                L.append("  %%%spre = add(%%%ss, %%b_%d) : %s" % (p, p, l, grow))
                for k, gate in enumerate("ifgo"):
                    sl(p + "g" + gate, p + "pre", k * hid, (k + 1) * hid, 1, row)
                L.append("  %%%sia = sigmoid(%%%sgi) : %s" % (p, p, row))
                L.append("  %%%sfa = sigmoid(%%%sgf) : %s" % (p, p, row))
                L.append("  %%%sga = tanh(%%%sgg) : %s" % (p, p, row))
                L.append("  %%%soa = sigmoid(%%%sgo) : %s" % (p, p, row))
                L.append("  %%%sfc = mul(%%%sfa, %%%s) : %s" % (p, p, c, row))
                L.append("  %%%sig = mul(%%%sia, %%%sga) : %s" % (p, p, p, row))
                L.append("  %%%sc = add(%%%sfc, %%%sig) : %s" % (p, p, p, row))
                L.append("  %%%stc = tanh(%%%sc) : %s" % (p, p, row))
                L.append("  %%%sh = mul(%%%soa, %%%stc) : %s" % (p, p, p, row))
                c = p + "c"
            else:
                L.append("  %%%sa = add(%%%sxw, %%b_ih_%d) : %s" % (p, p, l, grow))
                L.append("  %%%sr = add(%%%shw, %%b_hh_%d) : %s" % (p, p, l, grow))
                for k, gate in enumerate("rzn"):
                    sl(p + "a" + gate, p + "a", k * hid, (k + 1) * hid, 1, row)
                    sl(p + "r" + gate, p + "r", k * hid, (k + 1) * hid, 1, row)
                L.append("  %%%srs = add(%%%sar, %%%srr) : %s" % (p, p, p, row))
                L.append("  %%%srg = sigmoid(%%%srs) : %s" % (p, p, row))
                L.append("  %%%szs = add(%%%saz, %%%srz) : %s" % (p, p, p, row))
                L.append("  %%%szg = sigmoid(%%%szs) : %s" % (p, p, row))
                L.append("  %%%srm = mul(%%%srg, %%%srn) : %s" % (p, p, p, row))
                L.append("  %%%sns = add(%%%san, %%%srm) : %s" % (p, p, p, row))
                L.append("  %%%sn = tanh(%%%sns) : %s" % (p, p, row))
                L.append("  %%%somz = sub(%%one, %%%szg) : %s" % (p, p, row))
                L.append("  %%%sa1 = mul(%%%somz, %%%sn) : %s" % (p, p, p, row))
                L.append("  %%%sa2 = mul(%%%szg, %%%s) : %s" % (p, p, h, row))
                L.append("  %%%sh = add(%%%sa1, %%%sa2) : %s" % (p, p, p, row))
            h = p + "h"
            hs.append(h)
        xs = hs
    L.append("  %%y = concat(%s) {axis = 0} : f32[%d,%d]"
             % (", ".join("%" + v for v in xs), steps, hid))
    outs = ["%y", "%" + xs[-1]]
    if cell == "lstm":
        outs.append("%" + c)
    L.append("  return " + ", ".join(outs))
    L.append("}")
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--input", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--name", default=None)
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args()
    if min(a.steps, a.input, a.hidden, a.layers) < 1:
        ap.error("sizes must be >= 1")
    name = a.name or "%s_%dx%d%s" % (a.cell, a.steps, a.hidden,
                                     "x%dl" % a.layers if a.layers > 1 else "")
    head = ("# %s, batch 1, %d steps, input %d, hidden %d, %d layer%s; written by\n"
            "# examples/rnn/gen_rnn.py --cell %s --steps %d --input %d --hidden %d --layers %d\n"
            % (a.cell.upper(), a.steps, a.input, a.hidden, a.layers, "" if a.layers == 1 else "s",
               a.cell, a.steps, a.input, a.hidden, a.layers))
    text = head + gen(a.cell, a.steps, a.input, a.hidden, a.layers, name)
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
