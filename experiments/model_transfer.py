"""Whether MetaSchedule's cost model, trained on the candidates measured at some batches,
ranks the candidates of another (issue 17).

``scan_tir.tune.dynamic`` tunes one task per listed batch it tunes at, each too short for
its own cost model to train, so each task but the first selects its candidates by the
model trained on the tasks before it (:func:`scan_tir.tune.search.learned_model`). This
asks how much that selection can be worth, from a dynamic arm's database alone (the
tuning runner's figures; nothing is timed here, so the machine's load does not matter):
for each task but the first, the model trained on the records of the tasks before it
(as ``dynamic`` trains it; ``--others``: on every other task's) scores that task's own
records, and the table gives the spread of its scores (0: one score for all, no
selection), their rank correlation with speed, and the fastest
of the ``--top`` records it scores best against the fastest of ``--top`` drawn at random
(its expectation) and of all. A database whose tasks drew at random (tuned before
``dynamic`` had the learned model) is the fair test: records a model selected are not a
random sample of the space.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/model_transfer.py
--workload gru --packed --work-dir build/<dir>/dynamic --tasks 1x16,4x16,16x16,64x16``.
"""

from __future__ import annotations

import argparse
from math import comb
from pathlib import Path

import numpy as np
import tvm
from bench.report import fmt, header, markdown_table, start_run
from tvm.s_tir import meta_schedule as ms

from scan_tir import workloads
from scan_tir.tune import default_target
from scan_tir.tune.search import learned_model
from scan_tir.tune.symbolic import specialize

NAMES = ["batch", "seq"]


def expected_best_of_random(latencies: list[float], k: int) -> float:
    """The expected fastest of ``k`` of ``latencies`` drawn without replacement."""
    ordered, n = sorted(latencies), len(latencies)
    return sum(t * comb(n - 1 - i, k - 1) for i, t in enumerate(ordered)) / comb(n, k)


def ranks(values: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(values)).astype(float)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="lstm")
    p.add_argument("--sizes", default="input=512,hidden=256")
    p.add_argument("--work-dir", type=Path, required=True, help="a dynamic arm's database")
    p.add_argument("--tasks", required=True, help="the instances tuned at, BATCHxSEQ,...")
    p.add_argument("--top", type=int, default=7, help="records the model picks per task")
    p.add_argument("--packed", action="store_true", help="the grid was tuned --packed")
    p.add_argument("--others", action="store_true", help="train on every other task")
    args = p.parse_args()
    load = start_run()
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in args.sizes.split(","))}
    tasks = [tuple(int(v) for v in t.split("x")) for t in args.tasks.split(",")]
    func = workloads.get(args.workload, seq=tasks[0][1], **sizes).symbolic_func(
        NAMES, packed=args.packed
    )
    main_func = func.with_attr("global_symbol", "main")
    mods = [tvm.IRModule({"main": specialize(main_func, dict(zip(NAMES, t)))}) for t in tasks]
    database = ms.database.JSONDatabase(work_dir=str(args.work_dir))
    target = default_target()
    rows = []
    for i, (task, mod) in enumerate(zip(tasks, mods)):
        trained_on = [m for m in mods if m is not mod] if args.others else mods[:i]
        if not trained_on:
            continue
        records = database.get_top_k(database.commit_workload(mod), len(database))
        latency = np.array([np.mean([float(s) for s in r.run_secs]) * 1e3 for r in records])
        valid = latency < 1e9  # a candidate that failed to run has 1e10 s
        records = [r for r, ok in zip(records, valid) if ok]
        latency = latency[valid]
        if len(records) < args.top:
            raise SystemExit(f"{args.work_dir}: {len(records)} valid records of the task at "
                             f"{task} (tuned --packed? then pass it)")
        model = learned_model(database, trained_on, target)
        scores = model.predict(
            ms.TuneContext(mod=mod, target=target), [r.as_measure_candidate() for r in records]
        )
        at_random = expected_best_of_random(list(latency), args.top)
        if np.ptp(scores) == 0:  # one score for all: the search keeps any of them
            rho, picked = "-", at_random
        else:
            rho = f"{np.corrcoef(ranks(scores), ranks(-latency))[0, 1]:.2f}"
            picked = latency[np.argsort(-scores)[: args.top]].min()
        rows.append([
            "x".join(map(str, task)), str(len(records)), f"{np.ptp(scores):.3g}", rho,
            fmt(picked), fmt(at_random), fmt(latency.min()),
        ])
    print(header(load))
    print(f"{args.workload} {sizes}, {args.work_dir}: each task's records scored by the "
          f"model trained on the {'other' if args.others else 'earlier'} tasks' records; "
          f"runner ms; top {args.top}.")
    print(markdown_table(
        ["task", "records", "score range", "rank correlation", f"best of model's top {args.top}",
         f"best of {args.top} at random (expected)", "best of all"], rows))


if __name__ == "__main__":
    main()
