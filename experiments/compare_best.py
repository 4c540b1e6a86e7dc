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
``--pipelined 4,8`` also times each record with its stacked layers pipelined, in at most
4 and at most 8 chunks (``postprocs.pipelined_scans.pipeline`` on the replayed record;
a record that does not allow it is listed with the reason).

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
from tvm.s_tir import Schedule

from postprocs.pipelined_scans import mark_all_pipelined
from scan_tir import workloads
from scan_tir.db.replay import replay
from scan_tir.lower.vocabulary import pipelines
from scan_tir.tune import log


def pipelined(func: tvm.tirx.PrimFunc, most: int) -> tuple[tvm.tirx.PrimFunc | None, str]:
    """``func`` with its stacked layers pipelined (at most ``most`` chunks), and what was
    done; None where nothing was."""
    if pipelines(func)[0]:
        return None, "tuned pipelined already"
    sch = Schedule(tvm.IRModule({"main": func}))
    said = "; ".join(mark_all_pipelined(sch, most)) or "one scan"
    done = sch.mod["main"]
    return (None if done.same_as(func) else done), said


def built_top(
    name: str, results: Path, k: int, inputs: list, ref: list, chunks: list[int]
) -> list[tuple[str, Checked | str]]:
    """Config ``name``'s ``k`` best records in ``results``, built on packed weights, checked,
    each also pipelined in at most each of ``chunks`` chunks: (label, built or why not)."""
    w = workloads.get(name)
    base = w.prim_func()
    mod = tvm.IRModule({"main": base})
    work_dir = database_dir(results, name)
    db = open_database(work_dir)
    best_record(db, work_dir, mod, name)  # exits, saying why, without one
    built: list[tuple[str, Checked | str]] = []
    for rank, record in enumerate(db.get_top_k(db.commit_workload(mod), k)):
        tuned = replay(record, mod["main"])
        tensors = fresh_tensors(base, inputs)
        on_packed_weights(tuned, tensors, len(ref), repeats=1)
        compute = copy_elided(tuned)
        label = str(work_dir) + (f" #{rank + 1}" if k > 1 else "")
        built.append((label, build_checked(compute, param_names(base), tensors, ref)))
        for most in chunks:
            variant, said = pipelined(compute, most)
            built.append((
                f"{label}, pipelined ({said})",
                build_checked(variant, param_names(base), tensors, ref) if variant else
                f"not pipelined ({said})",
            ))
    return built


def compare(name: str, args: argparse.Namespace) -> list[list[str]]:
    w = workloads.get(name)
    inputs = w.input_arrays()
    ref = w.numpy(inputs)
    roots = [args.results] + ([args.against] if args.against else [])
    built = [
        entry for root in roots
        for entry in built_top(name, root, args.top, inputs, ref, args.pipelined)
    ]
    rounds: list[list[float]] = [[] for _ in built]
    for i in range(args.rounds):
        log(f"{name}: timing round {i + 1}/{args.rounds}")
        for (_, checked), times in zip(built, rounds):
            if not isinstance(checked, str):
                timed = evaluator_latency_ms(checked.lib, checked.args, args.repeats)
                times.append(median(timed))
    first = median(rounds[0])
    return [
        [name, label, "-", "", "", ""] if isinstance(checked, str) else [
            name,
            label,
            f"{median(times):.4g}",
            ", ".join(f"{x:.4g}" for x in times),
            f"{median(times) / first:.3f}",
            f"{checked.err:.1e}",
        ]
        for (label, checked), times in zip(built, rounds)
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    parser.add_argument("--against", type=Path,
                        help="root of the other databases (config X: <against>/X/)")
    parser.add_argument("--top", type=int, default=1,
                        help="time each database's TOP best records (#1, #2, ... by the runner)")
    parser.add_argument("--pipelined", type=lambda s: [int(x) for x in s.split(",")],
                        default=[], help="also time each record pipelined, in at most "
                        "each of these numbers of chunks (comma-separated)")
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
    wrong = [r[1] for r in rows if r[2] != "-" and not float(r[-1]) <= args.tol]
    if wrong:
        print(f"FAIL: off by more than --tol {args.tol:g}: {wrong}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
