#!/usr/bin/env python3
"""Hostile ONNX files, written here byte by byte (no onnx module needed):

  deep.onnx   If nodes whose then_branch nests 3000 graphs deep (122 KB):
              protobuf-c's unpacker recursed once per level and overflowed
              the stack (SIGSEGV); now refused by the depth pre-scan.
  wide.onnx   a 1 MiB packed field of one-byte varints that protobuf-c
              unpacks into 8 MiB of int64: under --max-memory 4M, refused
              with the budget's message, not allocated.
  names.onnx  y = Add(a/b, a:b) of two initializers whose names clean to
              the same file name (a_b.npy): the second one silently
              replaced the first's weights; kfuse-run must print 3 * 100.

    hostile.py KFUSE_IMPORT_ONNX KFUSE_RUN WORKDIR
    hostile.py --seeds CORPUS_DIR REGRESS_DIR   (the fuzz target's nesting
        seed, 31 levels of If, and regression input, 34: both kept in git)
Exit 0 when each is rejected cleanly with its message (names.onnx: when it
imports and computes the right sum)."""
import struct
import os
import subprocess
import sys


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    """A length-delimited field (wire type 2)."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def field_int(num, v):
    return varint(num << 3) + varint(v)


def model(graph):
    # ModelProto: ir_version = 1, graph = 7, opset_import = 8 (OperatorSetId.version = 2)
    return field_int(1, 8) + field(8, field_int(2, 17)) + field(7, graph)


def deep(levels):
    g = field(2, b"g")                                     # GraphProto.name
    for _ in range(levels):
        attr = field(1, b"then_branch") + field_int(20, 5) + field(6, g)  # name, type GRAPH, g
        node = field(4, b"If") + field(5, attr)            # NodeProto.op_type, attribute
        g = field(1, node) + field(2, b"g")                # GraphProto.node, name
    return model(g)


def wide(nbytes):
    # GraphProto.initializer (5): a TensorProto whose dims (1, packed int64)
    # hold nbytes one-byte varints
    dims = field(1, b"\x01" * nbytes)
    tensor = dims + field_int(2, 1) + field(8, b"w")       # data_type FLOAT, name
    return model(field(5, tensor) + field(2, b"g"))


def names():
    def init(name, value):
        dims = field_int(1, 100)
        return dims + field_int(2, 1) + field(8, name) + field(9, struct.pack("<100f", *([value] * 100)))
    node = field(1, b"a/b") + field(1, b"a:b") + field(2, b"y") + field(4, b"Add")
    shape = field(2, field(1, field_int(1, 100)))
    out = field(1, b"y") + field(2, field(1, field_int(1, 1) + shape))
    return model(field(1, node) + field(2, b"g") + field(5, init(b"a/b", 1.0)) + field(5, init(b"a:b", 2.0))
                 + field(12, out))


def check(tool, path, args, want):
    p = subprocess.run([tool, path] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    err = p.stderr.decode(errors="replace")
    ok = p.returncode == 1 and want in err
    print(f"{os.path.basename(path)}: exit {p.returncode}: {err.strip()}")
    if not ok:
        print(f"  expected exit 1 and: {want}")
    return ok


def main():
    if sys.argv[1] == "--seeds":
        for d, levels in ((sys.argv[2], 31), (sys.argv[3], 34)):
            # messages nest 2 + 3 x levels deep (model, graph; node,
            # attribute, graph per level): 95 is within the limit, 104 not
            with open(os.path.join(d, f"nested_if_{levels}_levels.onnx"), "wb") as f:
                f.write(deep(levels))
        return 0
    tool, run, work = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    d, w = os.path.join(work, "deep.onnx"), os.path.join(work, "wide.onnx")
    with open(d, "wb") as f:
        f.write(deep(3000))
    with open(w, "wb") as f:
        f.write(wide(1 << 20))
    ok = check(tool, d, [], "not a valid ONNX model: messages nested deeper than 100")
    ok &= check(tool, w, ["--max-memory", "4M"], "cannot unpack the ONNX model: 8388608 bytes would exceed "
                "the memory budget of 4194304 bytes")
    n = os.path.join(work, "names.onnx")
    with open(n, "wb") as f:
        f.write(names())
    kf = os.path.join(work, "names.kf")
    p = subprocess.run([tool, n, "-o", kf], stderr=subprocess.PIPE, timeout=60)
    r = subprocess.run([run, kf], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60) if p.returncode == 0 else p
    got = r.stdout.decode(errors="replace") if r.stdout else ""
    print(f"names.onnx: import exit {p.returncode}, run: {got.strip()} {r.stderr.decode(errors='replace').strip()}")
    if "[3, 3, 3" not in got or "sum=3e+02" not in got:
        print("  expected the sum 300 (1 + 2 for each of 100 elements)")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
