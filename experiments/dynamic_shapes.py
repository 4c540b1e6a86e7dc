"""One tuning for a grid of lengths against today's one tuned length (issue 17, item 5, a first
measurement).

topi's LSTM with ``seq`` symbolic is tuned twice with the same budget:

- dynamic: :func:`scan_tir.tune.dynamic` over the listed lengths (tuned at the shortest and
  the longest, the best records of each timed at every listed length, at most
  ``--kernels`` chosen, one function dispatching by length);
- single: today's way, the function tuned at one length (``--single-at``) and its best
  record replayed on the symbolic function (``dynamic`` with that one representative, one
  candidate, one kernel: what ``apply_best`` gives).

Both are checked against numpy and timed side by side, in rounds, at every listed length
and at lengths not listed. Weights are unpacked (no layout-free weights: a kernel chosen at
run time reads the weights as given). Tuning times include timing the candidates.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/dynamic_shapes.py``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import tvm
from bench.build import build
from bench.check import max_err
from bench.report import fmt, header, markdown_table, start_run, write_json
from bench.timing import evaluator_latency_ms, median

from scan_tir import workloads
from scan_tir.tune import dynamic


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="batch=1,input=512,hidden=256")
    p.add_argument("--seqs", default="16,64,256,1024", help="the listed lengths")
    p.add_argument("--unlisted", default="37,1000")
    p.add_argument("--single-at", type=int, default=80, help="today's one tuned length")
    p.add_argument("--trials", type=int, default=64, help="budget of each tuning")
    p.add_argument("--kernels", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--work-dir", type=Path, default=Path("build/dynamic_shapes"))
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    load = start_run()
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in args.sizes.split(","))}
    listed = [int(s) for s in args.seqs.split(",")]
    unlisted = [int(s) for s in args.unlisted.split(",")]
    base = workloads.get("lstm", seq=listed[0], **sizes)
    func = base.symbolic_func(["seq"])

    runs, seconds = {}, {}
    for name, kwargs in {
        "dynamic": dict(kernels=args.kernels),
        "single": dict(kernels=1, candidates=1, representatives=[(args.single_at,)]),
    }.items():
        t = time.perf_counter()
        runs[name] = dynamic(
            func, args.work_dir / name, {"seq": listed}, trials=args.trials, **kwargs
        )
        seconds[name] = time.perf_counter() - t
    libs = {name: build(r.func) for name, r in runs.items()}

    rows, raw = [], {}
    for seq in listed + unlisted:
        wl = workloads.get("lstm", seq=seq, **sizes)
        values = wl.input_arrays(seed=1)
        ref = wl.numpy(values)
        args_of = {}
        for name, lib in libs.items():
            outs = [tvm.runtime.tensor(np.zeros(r.shape, "float32")) for r in ref]
            ins = [tvm.runtime.tensor(v) for v in values]
            lib["main"](*ins, *outs)
            err = max(max_err(o.numpy(), r) for o, r in zip(outs, ref, strict=True))
            if err > 1e-4:
                raise SystemExit(f"{name} off from numpy at seq {seq}: {err:.3g}")
            args_of[name] = [*ins, *outs]
        times = {name: [] for name in libs}
        for _ in range(args.rounds):
            for name, lib in libs.items():
                times[name] += evaluator_latency_ms(lib, args_of[name], args.repeats)
        ms = {name: median(ts) for name, ts in times.items()}
        raw[seq] = times
        kernel = "-" if seq not in listed else str(runs["dynamic"].table[(seq,)])
        rows.append([str(seq), "yes" if seq in listed else "no", kernel, fmt(ms["dynamic"]),
                     fmt(ms["single"]), fmt(ms["dynamic"] / ms["single"])])
    print(header(load))
    print(f"Sizes {sizes}; listed lengths {listed}; budget {args.trials} trials each; "
          f"tuning and choosing took {seconds['dynamic']:.0f} s (dynamic, "
          f"{runs['dynamic'].candidates} candidates timed, {len(runs['dynamic'].kernels)} "
          f"kernels) and {seconds['single']:.0f} s (single, tuned at {args.single_at}).")
    print(markdown_table(
        ["seq", "listed", "dynamic kernel", "dynamic ms", "single ms", "dynamic / single"], rows
    ))
    if args.json:
        write_json(args.json, {"sizes": sizes, "listed": listed, "seconds": seconds,
                               "ms": {str(k): v for k, v in raw.items()},
                               "table": {str(k): v for k, v in runs["dynamic"].table.items()}})


if __name__ == "__main__":
    main()
