"""Two databases' best records of the same config, timed side by side in one process.

A tuning run's figures (the runner's, or ``tune.py``'s single measurement after it) come
from one stretch of time, and this machine's speed drifts from one minute to the next, so
two tunings made at different times cannot be compared by their own numbers. Here both
best records are replayed (``scan_tir.db.replay``: the whole trace, postprocs included, as
``compile_tir`` replays it; a per-scan tuning's composed record has no postprocs to run
again), run on prepacked weights as the tuner timed them, checked against the numpy
reference, and
timed in alternating rounds (``time_evaluator``, median of ``--repeats`` each), so that a
slow minute reaches both alike. The table gives each round and the median over rounds.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/compare_best.py --configs
Abi --results experiments/results --against build/abi-lanes``; ``--top K`` times each
database's K best records (``--top 2`` without ``--against``: a database's two best).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import tvm
from ablation import copy_elided
from bench.build import fresh_tensors, param_names
from bench.check import Checked, build_checked
from bench.database import add_database_arguments, best_record, database_dir, open_database
from bench.prepack import on_packed_weights
from bench.report import header, markdown_table, start_run
from bench.timing import evaluator_latency_ms, median

from scan_tir import workloads
from scan_tir.db.replay import replay
from scan_tir.tune import log


def built_top(name: str, results: Path, k: int, inputs: list, ref: list) -> list[Checked]:
    """Config ``name``'s ``k`` best records in ``results``, built on packed weights, checked."""
    w = workloads.get(name)
    base = w.prim_func()
    mod = tvm.IRModule({"main": base})
    work_dir = database_dir(results, name)
    db = open_database(work_dir)
    best_record(db, work_dir, mod, name)  # exits, saying why, without one
    built = []
    for record in db.get_top_k(db.commit_workload(mod), k):
        tuned = replay(record, mod["main"])
        tensors = fresh_tensors(base, inputs)
        on_packed_weights(tuned, tensors, len(ref), repeats=1)
        built.append(build_checked(copy_elided(tuned), param_names(base), tensors, ref))
    return built


def compare(name: str, args: argparse.Namespace) -> list[list[str]]:
    w = workloads.get(name)
    inputs = w.input_arrays()
    ref = w.numpy(inputs)
    roots = [args.results] + ([args.against] if args.against else [])
    built = {
        (root, rank): checked
        for root in roots
        for rank, checked in enumerate(built_top(name, root, args.top, inputs, ref))
    }
    rounds: dict[tuple[Path, int], list[float]] = {key: [] for key in built}
    for i in range(args.rounds):
        log(f"{name}: timing round {i + 1}/{args.rounds}")
        for key, checked in built.items():
            timed = evaluator_latency_ms(checked.lib, checked.args, args.repeats)
            rounds[key].append(median(timed))
    first = median(rounds[(args.results, 0)])
    return [
        [
            name,
            str(database_dir(root, name)) + (f" #{rank + 1}" if args.top > 1 else ""),
            f"{median(rounds[(root, rank)]):.4g}",
            ", ".join(f"{x:.4g}" for x in rounds[(root, rank)]),
            f"{median(rounds[(root, rank)]) / first:.3f}",
            f"{built[(root, rank)].err:.1e}",
        ]
        for root, rank in built
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    parser.add_argument("--against", type=Path,
                        help="root of the other databases (config X: <against>/X/)")
    parser.add_argument("--top", type=int, default=1,
                        help="time each database's TOP best records (#1, #2, ... by the runner)")
    parser.add_argument("--rounds", type=int, default=15, help="timing rounds")
    parser.add_argument("--repeats", type=int, default=10, help="time_evaluator repeats a round")
    parser.add_argument("--tol", type=float, default=1e-4, help="max abs error vs numpy")
    args = parser.parse_args(argv)
    load = start_run()
    rows = [row for name in args.configs for row in compare(name, args)]
    print(header(load))
    print()
    head = ["config", "database", "ms (median of rounds)", "each round ms",
            "vs the first", "max abs err vs numpy"]
    print(markdown_table(head, rows))
    wrong = [r[1] for r in rows if not float(r[-1]) <= args.tol]
    if wrong:
        print(f"FAIL: off by more than --tol {args.tol:g}: {wrong}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
