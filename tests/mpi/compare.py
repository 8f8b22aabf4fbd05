#!/usr/bin/env python3
"""compare.py A.safetensors B.safetensors TOL - every variable of A equals
B's within TOL, relative to the largest magnitude in the two tensors (TOL 0:
bit for bit).  Exit 1, naming the worst tensor, when one does not."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from read_checkpoint import load_safetensors  # noqa: E402

import numpy as np  # noqa: E402


def main():
    a_path, b_path, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    _, a = load_safetensors(a_path)
    _, b = load_safetensors(b_path)
    if sorted(a) != sorted(b):
        print("compare: the files hold different variables")
        return 1
    worst, name = 0.0, None
    for k in sorted(a):
        if not b[k].size:
            continue
        scale = max(float(np.max(np.abs(a[k]))), float(np.max(np.abs(b[k]))), 1e-30)
        d = float(np.max(np.abs(a[k].astype(np.float64) - b[k]))) / scale
        if d > worst:
            worst, name = d, k
    print("compare: largest relative difference %.3g (%s), tolerance %g" % (worst, name, tol))
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
