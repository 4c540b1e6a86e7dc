"""Does the tuner's ranking hold? The top records of a database, timed again two ways.

Archived probe: it ran at commit 0977950 (second half of 2026-11-30, notes.md section 3);
its finding lives in ``scan_tir.tune.local_runner`` (small inputs, the mean of 5 repeats).
Config names are read by ``scan_tir.workloads`` now: that day's databases are ``A-MERGED``
(``--results experiments/results/old-runner`` for the one tuned with MetaSchedule's runner).

MetaSchedule ranks candidates by the runner's ``run_secs``. This script takes a config's
``k`` best records by that ranking, builds each as the tuner timed it (weights prepacked)
and times it, in one process with 10 repeats, on inputs drawn as MetaSchedule's runner
draws them (uniform in [1, 10]) and as ``scan_tir.tune.local_runner`` draws them (uniform
in [-0.1, 0.1], where an LSTM's gates are not saturated). If the order of the last column
differs from the first, the database's "best" is not the best.

Run: ``TVM_NUM_THREADS=2 python experiments/archive/runner_ranking.py --config A-MERGED -k 10``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import tvm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: bench
from bench.build import target  # noqa: E402
from bench.database import database_dir, open_database, require_workload  # noqa: E402

import scan_tir  # noqa: E402
from scan_tir import workloads  # noqa: E402
from scan_tir.tune.measure import INPUT_SCALE  # noqa: E402


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="A-MERGED")
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--results", default="experiments/results", type=Path)
    args = parser.parse_args(argv)
    name = args.config
    mod = tvm.IRModule({"main": workloads.get(name).prim_func()})
    work_dir = database_dir(args.results, name, mod)
    db = open_database(work_dir)
    require_workload(db, work_dir, mod, name)
    records = db.get_top_k(db.commit_workload(mod), args.k)
    rng = np.random.default_rng(0)
    print(f"Command: `{' '.join([Path(sys.executable).name, *sys.argv])}`\n")
    print("| runner rank | runner ms | ms on [1, 10] inputs | ms on small inputs |")
    print("|---|---|---|---|")
    for rank, record in enumerate(records, 1):
        sch = tvm.s_tir.Schedule(mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        func = scan_tir.prepacked(sch.mod)["main"].with_attr("global_symbol", "main")
        lib = tvm.compile(tvm.IRModule({"main": func}), target=target()).jit()
        shapes = [tuple(int(d) for d in p.ty.shape) for p in func.params]
        timer = lib.time_evaluator("main", tvm.cpu(), number=5, repeat=10)
        times = []
        for low, high in ((1.0, 10.0), (-INPUT_SCALE, INPUT_SCALE)):
            args = [tvm.runtime.tensor(rng.uniform(low, high, s).astype("float32")) for s in shapes]
            times.append(float(np.median(timer(*args).results)) * 1e3)
        runner = float(np.mean([float(x) for x in record.run_secs])) * 1e3
        big, small = times
        print(f"| {rank} | {runner:.3f} | {big:.3f} | {small:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
