"""Whether a search at one shape finds what serves another: a dynamic tuning's records
timed at other instances (issue 17).

``scan_tir.tune.dynamic`` tunes at a few instances (every other listed batch, the shortest
length) and serves the others with those searches' best records. This replays the
``--top`` best records of the task tuned at ``--task`` (in ``--work-dir``, a dynamic
arm's database) as the dispatching function would serve them (replayed on the symbolic
function, the body fixed at the instance's batch), and times each at ``--task`` and at every
``--at`` instance; with ``--per-instance DIR``, the best record of a tuning at the
first ``--at`` instance alone is served and timed the same way beside them. Each build
is checked against numpy first. A record ranked low at its own instance but first at
another says the choice should time more candidates; none near the per-instance record
says the search at ``--task`` did not find it.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/rank_transfer.py
--workload gru --sizes input=512,hidden=256 --work-dir build/<dir>/dynamic --task 4x16
--at 4x64 --per-instance build/<dir>/per_instance_4x64``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import tvm
from bench.build import build
from bench.report import fmt, header, markdown_table, start_run
from bench.timing import median
from dynamic_shapes import side_by_side
from tvm.s_tir import meta_schedule as ms

from scan_tir import workloads
from scan_tir.tune.symbolic import replay_sized, specialize, specialize_body

NAMES = ["batch", "seq"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="lstm")
    p.add_argument("--sizes", default="input=512,hidden=256")
    p.add_argument("--work-dir", type=Path, required=True, help="a dynamic arm's database")
    p.add_argument("--task", required=True, help="the instance tuned at, BATCHxSEQ")
    p.add_argument("--at", required=True, help="instances to time at, comma-separated")
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--per-instance", type=Path, help="a tuning at the first --at alone")
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    load = start_run()
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in args.sizes.split(","))}
    task = tuple(int(v) for v in args.task.split("x"))
    at = list(dict.fromkeys(  # the task first, once, even where --at lists it
        [task] + [tuple(int(v) for v in t.split("x")) for t in args.at.split(",")]))
    func = workloads.get(args.workload, seq=task[1], **sizes).symbolic_func(NAMES)
    main_func = func.with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": specialize(main_func, dict(zip(NAMES, task)))})
    database = ms.database.JSONDatabase(work_dir=str(args.work_dir))
    records = database.get_top_k(database.commit_workload(mod), args.top)
    if not records:
        raise SystemExit(f"{args.work_dir} holds no record of the task at {args.task}")

    cases = {}
    for instance in at:
        wl = workloads.get(args.workload, **sizes, **dict(zip(NAMES, instance)))
        values = wl.input_arrays(seed=1)
        cases[instance] = (values, wl.numpy(values))

    def timed(lib: tvm.runtime.Module, instance: tuple[int, int]) -> float:
        values, ref = cases[instance]
        return median(side_by_side({"record": lib}, values, ref, str(instance), 1,
                                   args.repeats)["record"])

    def served(record: ms.database.TuningRecord, batch: int) -> tvm.runtime.Module:
        """As dynamic serves a record at ``batch``: replayed on the symbolic function, the
        batch fixed in the body (replayed at that batch where it replays there only)."""
        try:
            kernel = specialize_body(replay_sized(record.trace, main_func), {"batch": batch})
        except Exception:  # a schedule that replays at a fixed batch only (StepFusion)
            kernel = replay_sized(record.trace, specialize_body(main_func, {"batch": batch}))
        return build(kernel)

    named = [(f"#{rank}", r) for rank, r in enumerate(records)]
    if args.per_instance:
        alone = tvm.IRModule({"main": specialize(main_func, dict(zip(NAMES, at[1])))})
        best = ms.database.JSONDatabase(work_dir=str(args.per_instance))
        named += [(f"per-instance {args.at.split(',')[0]}", r)
                  for r in best.get_top_k(best.commit_workload(alone), 1)]
    rows, columns = [], {instance: [] for instance in at}
    for name, record in named:
        tuned_ms = float(np.mean([float(s) for s in record.run_secs])) * 1e3
        libs = {b: served(record, b) for b in sorted({i[0] for i in at})}
        got = [timed(libs[instance[0]], instance) for instance in at]
        for instance, figure in zip(at, got):
            columns[instance].append(figure)
        rows.append([name, fmt(tuned_ms), *map(fmt, got)])
    for instance, figures in columns.items():  # each record's rank at each instance
        for place, k in enumerate(np.argsort(figures)):
            rows[k][2 + at.index(instance)] += f" ({place + 1})"
    print(header(load))
    print(f"{args.workload} {sizes}: the top {len(records)} records of the task at "
          f"{args.task} ({args.work_dir}), ms (rank) at each instance, medians of "
          f"{args.repeats}; 'tuned ms' is the tuning runner's mean where it was tuned.")
    print(markdown_table(
        ["record", "tuned ms", *("x".join(map(str, i)) for i in at)], rows))


if __name__ == "__main__":
    main()
