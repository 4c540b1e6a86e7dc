"""Time per step of an LSTM of symbolic length, tuned at one length (issue 15, item 4).

topi's LSTM (the zoo's ``lstm``, which ``scan_tir.relax`` lowers every ``nn.LSTM`` layer
to) is built twice: at the config's fixed length, and with ``seq`` a ``te.var``. The
committed database's best record of the fixed-length function is replayed on both: as it
is on the fixed one, and through :func:`scan_tir.apply_best` (tiles of the hoisted input
product kept, the outer loop covering any length) on the symbolic one. Both run on
prepacked weights, what a deployment runs; the symbolic module is checked against numpy
at every length first. Columns: microseconds per step (median over ``--repeats`` of
``time_evaluator``), and the symbolic module's ratio to the fixed-length kernel, measured
side by side in one process (the fixed kernel timed again before each length), ``--runs``
times.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/relax_symbolic.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import tvm
from bench.build import build, target
from bench.check import max_err
from bench.database import best_record, open_database
from bench.report import fmt, header, markdown_table, start_run
from bench.timing import evaluator_latency_ms, median
from tvm import te, tirx

import scan_tir
from scan_tir import workloads
from scan_tir.db.replay import replay
from scan_tir.workloads import lstm

RESULTS = Path(__file__).parent / "results"
RNG = np.random.default_rng(0)


def symbolic_lstm(w: workloads.Workload) -> tirx.PrimFunc:
    """The workload's function with ``seq`` symbolic (same options, same layout-free
    weights)."""
    sizes = {**w.sizes, "seq": te.var("seq")}
    func = scan_tir.create_prim_func(lstm.build(**sizes), options=w.options)
    return scan_tir.layout_free(func, w.recurrence.layout_free)


def check(func: tirx.PrimFunc, w: workloads.Workload, length: int, tol: float) -> float:
    """Max abs error against numpy at ``length`` (weights as the zoo draws them)."""
    lib = build(func)
    at_length = workloads.get("lstm", **{**w.sizes, "seq": length})
    values = at_length.input_arrays(seed=3)
    ref = at_length.numpy(values)
    outs = [tvm.runtime.tensor(np.zeros(r.shape, "float32")) for r in ref]
    lib["main"](*(tvm.runtime.tensor(v) for v in values), *outs)
    err = max(max_err(o.numpy(), r) for o, r in zip(outs, ref, strict=True))
    if err > tol:
        sys.exit(f"symbolic module off from numpy at length {length}: {err:.3g} > {tol}")
    return err


def us_per_step(func: tirx.PrimFunc, length: int, repeats: int) -> float:
    """Median microseconds per step of ``func`` on prepacked weights at ``length``."""
    packed = scan_tir.prepacked(tvm.IRModule({"main": func}))["main"]
    lib = build(packed)
    args = []
    for p in packed.params:
        shape = [int(d) if isinstance(d, tirx.IntImm) else length for d in p.ty.shape]
        args.append(tvm.runtime.tensor(RNG.uniform(-0.1, 0.1, shape).astype("float32")))
    return median(evaluator_latency_ms(lib, args, repeats)) * 1e3 / length


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="A", help="an LSTM config of the zoo (default A)")
    p.add_argument("--work-dir", type=Path, default=RESULTS / "instep" / "A-FAST-INSTEP")
    p.add_argument("--lengths", default="17,80,300,2048")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--tol", type=float, default=1e-4)
    args = p.parse_args()
    load = start_run()
    w = workloads.get(args.config)
    if w.recurrence.name != "lstm":
        sys.exit(f"{args.config} is a {w.recurrence.name}, not an lstm config")
    fixed = w.prim_func()
    mod = tvm.IRModule({"main": fixed})
    db = open_database(args.work_dir)
    record = best_record(db, args.work_dir, mod, args.config)
    fixed_tuned = replay(record, fixed)
    symbolic = scan_tir.apply_best(db, fixed, symbolic_lstm(w), target())
    lengths = [int(x) for x in args.lengths.split(",")]
    errors = {n: check(symbolic, w, n, args.tol) for n in lengths}
    print(header(load))
    print(
        f"\nConfig {args.config} {w.sizes}, database {args.work_dir}: its best record on the "
        f"fixed-length function (seq {w.sizes['seq']}) and, through apply_best, on seq "
        "symbolic; prepacked weights; microseconds per step.\n"
    )
    rows = []
    for run in range(1, args.runs + 1):
        for n in lengths:  # the two side by side, so that drift between rows cancels
            base = us_per_step(fixed_tuned, w.sizes["seq"], args.repeats)
            t = us_per_step(symbolic, n, args.repeats)
            rows.append([str(run), str(n), fmt(base), fmt(t), fmt(t / base), f"{errors[n]:.1e}"])
    head = [
        "run",
        "length",
        f"fixed-length kernel at {w.sizes['seq']}",
        "symbolic",
        "symbolic / fixed",
        "max err vs numpy",
    ]
    print(markdown_table(head, rows))


if __name__ == "__main__":
    main()
