#!/usr/bin/env python3
"""Generates the .npy samples that tests/unit/test_npy.c reads.

Run from anywhere: python3 tests/npy/gen.py (needs numpy).  The outputs are
committed, so the tests do not need numpy.  good_*.npy are valid files the
reader must accept; bad_*.npy must each give the error test_npy.c expects.
Values are small and exact so the C test can check every element.
"""
import io
import os
import pickle
import struct
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(HERE, name)


def save(name, arr, version=None):
    with open(path(name), "wb") as f:
        np.lib.format.write_array(f, arr, version=version, allow_pickle=False)


def raw(name, data):
    with open(path(name), "wb") as f:
        f.write(data)


def npy_bytes(arr, version=None):
    b = io.BytesIO()
    np.lib.format.write_array(b, arr, version=version, allow_pickle=False)
    return b.getvalue()


def header(text, version=1):
    """A .npy preamble and header holding text as is (padded like numpy)."""
    body = text.encode("latin1")
    pre = 10 if version == 1 else 12
    pad = (-(pre + len(body) + 1)) % 64
    body += b" " * pad + b"\n"
    ln = struct.pack("<H", len(body)) if version == 1 else struct.pack("<I", len(body))
    return b"\x93NUMPY" + bytes([version, 0]) + ln + body


# Every dtype kfuse reads; values -2.5 .. or 0..5 in a 2x3 array.
vals = np.array([[-2.5, -1.0, 0.0], [0.5, 1.5, 65504.0]])
save("good_f2.npy", vals.astype("<f2"))
save("good_f4.npy", vals.astype("<f4"))
save("good_f8.npy", vals.astype("<f8"))
save("good_b1.npy", np.array([True, False, True, True]))
save("good_i1.npy", np.array([-128, -1, 0, 127], dtype="|i1"))
save("good_i4.npy", np.array([[-2147483648, 0], [1, 2147483647]], dtype="<i4"))
save("good_i8.npy", np.array([-(2**63), -1, 2**53 + 1, 2**63 - 1], dtype="<i8"))
# bf16 as np.save writes an ml_dtypes.bfloat16 array: raw 2-byte voids.
bf16_bits = np.array([0x3F80, 0xC020, 0x7F80, 0x0001], dtype="<u2")  # 1, -2.5, inf, min subnormal
save("good_bf16.npy", bf16_bits.view("V2"))
save("good_scalar.npy", np.float32(3.25).reshape(()))
save("good_empty.npy", np.zeros((0, 3), dtype="<f4"))
save("good_rank8.npy", np.arange(256, dtype="<i4").reshape((2,) * 8))
save("good_v2.npy", np.arange(6, dtype="<f4").reshape(2, 3), version=(2, 0))
save("good_v3.npy", np.arange(6, dtype="<f4").reshape(2, 3), version=(3, 0))

# Bad files, one problem each.
good = npy_bytes(np.arange(6, dtype="<f4").reshape(2, 3))
save("bad_fortran.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
save("bad_bigendian.npy", np.arange(4, dtype=">f4"))
save("bad_u4.npy", np.arange(4, dtype="<u4"))
save("bad_u1.npy", np.arange(4, dtype="|u1"))
save("bad_c8.npy", np.arange(4, dtype="<c8"))
save("bad_struct.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
with open(path("bad_object.npy"), "wb") as f:
    np.lib.format.write_array(f, np.array([1, "x"], dtype=object), allow_pickle=True)
raw("bad_pickle.npy", pickle.dumps([1.0, 2.0], protocol=2))
buf = io.BytesIO()
np.savez(buf, x=np.arange(3))
raw("bad_npz.npy", buf.getvalue())
raw("bad_magic.npy", b"PNG\r\n\x1a\n" + b"\0" * 64)
raw("bad_truncated.npy", good[:-5])
raw("bad_trailing.npy", good + b"\0\0\0")
raw("bad_short_header.npy", good[:40])
raw("bad_version.npy", b"\x93NUMPY\x04\x00" + good[8:])
raw("bad_noshape.npy", header("{'descr': '<f4', 'fortran_order': False, }") + b"\0" * 4)
raw("bad_shape_overflow.npy",
    header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"))
raw("bad_rank9.npy",
    header("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }") + b"\0" * 4)
raw("bad_negative.npy", header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2), }"))
raw("bad_dict.npy", header("['descr', '<f4']"))
raw("bad_key.npy",
    header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1, }") + b"\0" * 4)
raw("bad_empty.npy", b"")
