"""One GEMM under given SSRSRS tiles, beside PyTorch (oneDNN) and numpy on the same shape.

Archived probe: it ran at commit 5f3e526 (night of 2026-11-30, notes.md section 3) and was
checked again at e60a6cc; its finding lives in ``meta_rules.RegisterTiling``.

Why: a tuned LSTM is one function, so its database says how fast the whole was, not how
fast its GEMM kernel is. This script isolates the kernel: ``C = X W^T`` (X: M x K, W: N x K,
the layout of topi's LSTM weights), W packed as RewriteLayout packs it for the innermost
column tile, the loops split by the given tiles and ordered as MultiLevelTiling and
meta_rules.RegisterTiling order them (S0 S1 R0 S2 R1 S3), S0 fused and parallel, the
innermost rows unrolled and the innermost columns vectorised. It is how RegisterTiling's
structure was chosen (notes.md, section 3, "Night of 2026-11-30").

Run: ``TVM_NUM_THREADS=2 python experiments/archive/gemm_tiles.py --shape 100,4096,1024
--tiles 2,2,25,1/2,8,4,64/32,32 --tiles 1,10,1,10/2,64,1,32/1,1024``
(each ``--tiles``: rows/columns/reduction, outermost first).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import torch
import tvm
from tvm import s_tir, te

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: bench
from bench.build import target  # noqa: E402
from bench.timing import evaluator_latency_ms, loop_latency_ms, median  # noqa: E402


def gemm(m: int, n: int, k: int, rows: list[int], cols: list[int], red: list[int]):
    """The scheduled GEMM, built for this machine's CPU."""
    nr = cols[-1]
    x = te.placeholder((m, k), name="X")
    w = te.placeholder((n // nr, k, nr), name="W")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(x[i, r] * w[j // nr, r, j % nr], axis=r), name="C")
    sch = s_tir.Schedule(te.create_prim_func([x, w, c]))
    block = sch.get_sblock("C")
    i, j, kk = sch.get_loops(block)
    i0, i1, i2, i3 = sch.split(i, rows)
    j0, j1, j2, j3 = sch.split(j, cols)
    k0, k1 = sch.split(kk, red)
    sch.reorder(i0, j0, i1, j1, k0, i2, j2, k1, i3, j3)
    sch.parallel(sch.fuse(i0, j0))
    sch.unroll(i3)
    sch.vectorize(j3)
    return tvm.compile(sch.mod, target=target()).mod


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="100,4096,1024", help="M,N,K")
    parser.add_argument("--tiles", action="append", required=True, help="rows/cols/reduction")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    m, n, k = (int(v) for v in args.shape.split(","))
    flop = 2.0 * m * n * k
    rng = np.random.default_rng(0)
    xn = rng.uniform(-1, 1, (m, k)).astype("float32")
    wn = rng.uniform(-1, 1, (n, k)).astype("float32")
    want = xn @ wn.T
    threads = int(os.environ.get("TVM_NUM_THREADS", "2"))
    torch.set_num_threads(threads)
    xt, wt = torch.from_numpy(xn), torch.from_numpy(wn)
    print(f"GEMM {m} x {n} x {k}, {threads} threads; load average {os.getloadavg()[0]:.2f}")
    print("| kernel | tiles (rows / columns / reduction) | ms | GFLOP/s |")
    print("|---|---|---|---|")
    for spec in args.tiles:
        rows, cols, red = ([int(v) for v in part.split(",")] for part in spec.split("/"))
        mod = gemm(m, n, k, rows, cols, red)
        nr = cols[-1]
        dev = tvm.cpu()
        packed = wn.reshape(n // nr, nr, k).transpose(0, 2, 1).copy()
        xa, wa = tvm.runtime.tensor(xn, dev), tvm.runtime.tensor(packed, dev)
        ca = tvm.runtime.tensor(np.zeros((m, n), "float32"), dev)
        mod["main"](xa, wa, ca)
        np.testing.assert_allclose(ca.numpy(), want, rtol=1e-3, atol=1e-3)
        ms = median(evaluator_latency_ms(mod, [xa, wa, ca], args.repeats))
        print(f"| TVM | {spec} | {ms:.3f} | {flop / ms / 1e6:.0f} |")
    for name, fn in (("PyTorch (oneDNN)", lambda: xt @ wt.T), ("numpy", lambda: xn @ wn.T)):
        ms = median(loop_latency_ms(fn, args.repeats))
        print(f"| {name} | | {ms:.3f} | {flop / ms / 1e6:.0f} |")


if __name__ == "__main__":
    main()
