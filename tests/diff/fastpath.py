#!/usr/bin/env python3
"""The parser's fast paths against its general path, differentially.

A plain statement line, `%r = op(%a, %b) : T`, is read by the parser's fast
lane (ir-text/parse_fast.c) or by its byte reader (fast_read); the same
statement written `%r:1 = op(...)` takes the general, token by token path.
For random graphs (plain runs, type changes, attributes, constants, several
results, regions that shadow outer names, blank and comment lines), both
spellings must print the same text, and for each injected error both must
report the same errors on the same lines (columns differ by the two
characters of ':1').

usage: fastpath.py KFUSE_OPT [SEED]"""
import os, random, re, subprocess, sys, tempfile

BIN = ["add", "sub", "mul", "max", "min"]
UN = ["neg", "exp", "tanh", "abs", "relu"]
T = "f32[8]"


def gen(rng, n):
    """Lines of one graph (statements only, each a list: [indent, name, rest])
    and the names a later line may use."""
    lines, live, k = [], ["x", "y"], 0
    while k < n:
        r = rng.random()
        name = "v%d" % k
        k += 1
        if r < 0.55:
            a, b = rng.choice(live[-6:]), rng.choice(live)
            lines.append(["  ", name, "%s(%%%s, %%%s) : %s" % (rng.choice(BIN), a, b, T)])
        elif r < 0.75:
            lines.append(["  ", name, "%s(%%%s) : %s" % (rng.choice(UN), rng.choice(live[-4:]), T)])
        elif r < 0.8:
            lines.append(["  ", name, 'gelu(%%%s) {approximate = "tanh"} : %s' % (rng.choice(live), T)])
        elif r < 0.84:
            lines.append(["  ", name, "const 1.5 : %s" % T])
        elif r < 0.87:
            lines.append(["  # a comment line"])
            continue
        elif r < 0.9:
            lines.append([""])
            continue
        elif r < 0.94:  # several results, then a run on another type
            src = rng.choice(live)
            lines.append(["  ", name + ":2", "split(%%%s) {axis = 0, sizes = [4, 4]} : f32[4], f32[4]" % src])
            lines.append(["  ", name + "h", "add(%%%s#0, %%%s#1) : f32[4]" % (name, name)])
            lines.append(["  ", name + "m", "mul(%%%sh, %%%sh) : f32[4]" % (name, name)])
            lines.append(["  ", name + "w", "concat(%%%sm, %%%s#1) {axis = 0} : %s" % (name, name, T)])
            live.append(name + "w")
            continue
        else:  # a region whose names shadow outer ones
            a, b = rng.choice(live), rng.choice(live)
            inner = rng.sample(live, 2) if len(live) > 3 else ["q0", "q1"]
            lines.append(["  ", name, 'fusion @k%d(%%%s, %%%s) {kind = "elementwise"} : %s {' % (k, a, b, T)])
            lines.append(["  ^(%%p0: %s, %%p1: %s):" % (T, T)])
            lines.append(["    ", inner[0], "add(%%p0, %%p1) : %s" % T])
            lines.append(["    ", inner[1], "mul(%%%s, %%p0) : %s" % (inner[0], T)])
            lines.append(["    yield %%%s" % inner[1]])
            lines.append(["  }"])
        live.append(name)
    return lines, live


def text(lines, live, general):
    out = ["graph @g(%%x: %s, %%y: %s) -> (%s) {" % (T, T, T)]
    for ln in lines:
        if len(ln) == 1:
            out.append(ln[0])
            continue
        ind, name, rest = ln
        if general and ":" not in name:
            name += ":1"
        out.append("%s%%%s = %s" % (ind, name, rest))
    out.append("  return %%%s" % live[-1])
    out.append("}")
    return "\n".join(out) + "\n"


def run(tool, path, *args):
    r = subprocess.run([tool, path, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def errors(stderr):
    """(line, message) of each error; columns and carets left out."""
    found = re.findall(r"^[^\s:]+:(\d+):\d+: error: (.*)$", stderr, re.M)
    # a message that quotes a column ('first at 3:7') is compared by line
    return [(l, re.sub(r"(first at \d+):\d+", r"\1", m)) for l, m in found]


def stmt_lines(lines):
    """The graph-level statements of one result (not in a region)."""
    return [i for i, ln in enumerate(lines) if len(ln) == 3 and ":" not in ln[1] and ln[0] == "  "]


PLAIN = re.compile(r"^(%s|gelu|const)\b" % "|".join(BIN + UN))


def mutate(rng, lines):
    """A copy of lines with one error put in; a word for what it is."""
    ls = [list(x) for x in lines]
    idx = stmt_lines(ls)
    i = rng.choice([j for j in idx[2:] if PLAIN.match(ls[j][2])])
    kind = rng.choice(["undefined", "redefinition", "arity", "unknown", "index", "later"])
    rest = ls[i][2]
    if kind == "undefined":
        ls[i][2] = re.sub(r"%\w+", "%nope", rest, count=1) if "%" in rest else "neg(%nope) : " + T
    elif kind == "redefinition":
        ls[i][1] = ls[idx[0]][1]
    elif kind == "arity":
        ls[i][2] = "add(%x) : " + T
    elif kind == "unknown":
        ls[i][2] = "addd" + rest[rest.index("("):] if "(" in rest else "addd(%x) : " + T
    elif kind == "index":  # a second result of a value that has one
        ls[i][2] = re.sub(r"(%\w+)", r"\1#1", rest, count=1) if "%" in rest else "neg(%x#1) : " + T
    else:  # a use before the definition
        ls[i][2] = "neg(%%%s) : %s" % (ls[idx[-1]][1], T)
    return ls, kind


def main():
    tool = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as d:
        pa, pb = os.path.join(d, "plain.kf"), os.path.join(d, "general.kf")
        for g in range(8):
            lines, live = gen(rng, rng.randrange(20, 400))
            open(pa, "w").write(text(lines, live, False))
            open(pb, "w").write(text(lines, live, True))
            ra, rb = run(tool, pa), run(tool, pb)
            assert ra[0] == 0 and rb[0] == 0, (ra[2], rb[2])
            assert ra[1] == rb[1], "graph %d: the two spellings print differently" % g
            assert ra[1].count(" = ") >= len(stmt_lines(lines)), "graph %d: statements lost" % g
            for e in range(12):
                bad, kind = mutate(rng, lines)
                open(pa, "w").write(text(bad, live, False))
                open(pb, "w").write(text(bad, live, True))
                ra, rb = run(tool, pa), run(tool, pb)
                ea, eb = errors(ra[2]), errors(rb[2])
                assert ra[0] == 1 and ea, "graph %d, %s: no error reported:\n%s" % (g, kind, ra[2])
                assert ea == eb, "graph %d, %s: the spellings report differently:\n%s\n---\n%s" % (
                    g, kind, ra[2], rb[2])
    print("ok: 8 graphs, 96 errors, fast and general paths agree")


main()
