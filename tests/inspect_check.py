#!/usr/bin/env python3
"""inspect_check.py CKPT JSON: checks `graphrun inspect --json CKPT` (saved
in JSON) against the checkpoint read with json and numpy alone
(tests/interop/read_checkpoint.py): the metadata, and per tensor its dtype,
shape, bytes, min, max, mean and NaN/Inf counts.  Exits 1 on a difference.

inspect_check.py --poison CKPT OUT: writes a copy of CKPT whose first F32
tensor with 3 values or more holds a NaN and an Inf (a valid file that
inspect must count them in).
"""
import json
import math
import os
import shutil
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "interop"))
from read_checkpoint import load_safetensors  # noqa: E402


def fail(msg):
    sys.exit("inspect_check: " + msg)


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7)


def expected(arr):
    a = arr.astype(np.float64).ravel()
    ok = a[~np.isnan(a)]
    fin = lambda v: float(v) if math.isfinite(v) else None
    return {
        "dtype": "F32" if arr.dtype == np.float32 else "I32",
        "shape": list(arr.shape),
        "bytes": arr.nbytes,
        "min": fin(ok.min()) if ok.size else None,
        "max": fin(ok.max()) if ok.size else None,
        "mean": fin(ok.mean()) if ok.size else None,
        "nan": int(np.isnan(a).sum()),
        "inf": int(np.isinf(a).sum()),
    }


def check(ckpt, got):
    meta, tensors = load_safetensors(ckpt)
    if got["metadata"] != meta:
        fail(f"metadata {got['metadata']} != {meta}")
    if [t["name"] for t in got["tensors"]] != list(tensors):
        fail("tensor names or order differ")
    for t in got["tensors"]:
        want = expected(tensors[t["name"]])
        for k, v in want.items():
            if not (close(t[k], v) if k in ("min", "max", "mean") else t[k] == v):
                fail(f"{t['name']}: {k} = {t[k]}, numpy says {v}")


def poison(ckpt, out):
    shutil.copyfile(ckpt, out)
    with open(out, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    for name, e in header.items():
        if name != "__metadata__" and e["dtype"] == "F32" and e["data_offsets"][1] - e["data_offsets"][0] >= 12:
            at = 8 + n + e["data_offsets"][0]
            with open(out, "r+b") as f:
                f.seek(at)
                f.write(struct.pack("<ff", float("nan"), float("inf")))
            return
    fail("no F32 tensor to poison")


def main():
    if sys.argv[1] == "--poison":
        poison(sys.argv[2], sys.argv[3])
    else:
        with open(sys.argv[2]) as f:
            check(sys.argv[1], json.load(f))


if __name__ == "__main__":
    main()
