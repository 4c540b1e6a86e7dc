"""How far a checking run of ``tune.dynamic`` (one call of a freshly built module at an
instance, made to compare its outputs with the reference) is from the module's steady
time there: whether one such run can stand for a figure (issue 17).

The choice is made again on a copy of a dynamic work dir (its records are there, so
nothing is tuned); every checking run of ``--at-least`` ms or more is followed by two
more calls on the same tensors and TVM's ``time_evaluator`` (best of 3), and all four
figures are printed.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/checking_runs.py
--work-dir build/grid_lstm_v7/dynamic --tune-at 1x16,4x16,16x16,64x16``.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np
import tvm
from bench.report import fmt, header, markdown_table, start_run

from scan_tir import workloads
from scan_tir.tune import dynamic_shapes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", type=Path, required=True, help="a dynamic arm's work dir")
    p.add_argument("--workload", default="lstm")
    p.add_argument("--sizes", default="input=512,hidden=256")
    p.add_argument("--batches", default="1,2,4,8,16,32,64")
    p.add_argument("--seqs", default="16,64,256,1024")
    p.add_argument("--tune-at", required=True, help="the instances the work dir was tuned at")
    p.add_argument("--trials", type=int, default=112, help="as tuned (nothing more is tuned)")
    p.add_argument("--at-least", type=float, default=30.0, help="ms of a checking run probed")
    args = p.parse_args()
    load = start_run()
    copy = Path("build/checking_runs")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(args.work_dir, copy)
    rows = []
    check = dynamic_shapes._Bench.check

    def probed(bench, lib, instance):
        ran = check(bench, lib, instance)
        if ran >= args.at_least:
            tensors = [tvm.runtime.tensor(a.copy()) for a in bench.case(instance)[0]]
            again = []
            for _ in range(2):
                start = time.perf_counter()
                lib["main"](*tensors)
                again.append((time.perf_counter() - start) * 1e3)
            timer = lib.time_evaluator("main", tvm.cpu(), repeat=3, min_repeat_ms=20)
            steady = min(timer(*tensors).results) * 1e3
            rows.append(["x".join(map(str, instance)), fmt(ran), fmt(again[0]), fmt(again[1]),
                         fmt(steady), fmt(ran / steady)])
        return ran

    dynamic_shapes._Bench.check = probed
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in args.sizes.split(","))}
    zoo = workloads.get(args.workload, seq=16, **sizes)
    grid = {"batch": [int(b) for b in args.batches.split(",")],
            "seq": [int(s) for s in args.seqs.split(",")]}
    dynamic_shapes.dynamic(
        zoo.symbolic_func(["batch", "seq"]), copy, grid, trials=args.trials, population=128,
        representatives=[tuple(int(v) for v in t.split("x")) for t in args.tune_at.split(",")],
        reference=zoo.symbolic_case())
    print(header(load))
    print(markdown_table(["instance", "checking run ms", "2nd call", "3rd call",
                          "time_evaluator (best of 3)", "checking / steady"], rows))
    ratios = [float(r[-1]) for r in rows]
    print(f"{len(rows)} checking runs of {args.at_least:g} ms or more: checking / steady "
          f"median {np.median(ratios):.2f}, max {max(ratios):.2f}; "
          f"{sum(r > dynamic_shapes.SUSPECT for r in ratios)} past SUSPECT.")


if __name__ == "__main__":
    main()
