"""Where a tuned recurrence spends its time: outside the scan, and per step.

A tuned module is one function; a sampling profiler sees one symbol. This script splits it
by construction instead: it builds the best schedule from a config's database twice, once
as tuned and once with every scan's time loop cut to one step (the loop's extent set to 1,
nothing else changed), and times both on the workload's inputs, weights prepacked (what the
tuner timed). Then

    per step = (full - one step) / (steps - 1),    outside = one step - per step

and, for the step, how many parallel loops (one thread-pool fork/join each) it runs and how
many of its loops are vectorised. The cut module computes garbage (later rows are never
written); it is only timed.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/profile_steps.py --configs
A-FAST-INSTEP --results experiments/results/instep``, after ``experiments/tune.py`` has
filled the databases.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import tvm
import tvm_ffi
from bench.build import build, call_args, fresh_tensors, param_names
from bench.database import add_database_arguments, best_schedule, database_dir, open_database
from bench.prepack import on_packed_weights
from bench.report import header, markdown_table, start_run
from bench.timing import evaluator_latency_ms, median

import scan_tir
from scan_tir import workloads


def cut_to_one_step(func: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    """``func`` with each scan's time loop running once."""
    loops = [scan.loop for scan in scan_tir.find_scans(func)]

    def on_for(loop: tvm.tirx.For) -> tvm.tirx.For:
        if any(loop.same_as(t) for t in loops):
            return tvm.tirx.For(
                loop.loop_var,
                loop.min,
                tvm.tirx.const(1, loop.extent.ty.dtype),
                loop.kind,
                loop.body,
                loop.thread_binding,
                loop.annotations,
            )
        return loop

    return func.with_body(tvm_ffi.structural_map(func.body, (tvm.tirx.For, on_for), order="pre"))


def step_loop_kinds(func: tvm.tirx.PrimFunc) -> tuple[int, int]:
    """(parallel loops, vectorised loops) inside the first scan's step."""
    kinds: list = []
    step = scan_tir.find_scans(func)[0].step
    tvm_ffi.structural_walk(step.body, (tvm.tirx.For, lambda loop: kinds.append(loop.kind)))
    return kinds.count(tvm.tirx.ForKind.PARALLEL), kinds.count(tvm.tirx.ForKind.VECTORIZED)


def profile(name: str, results: Path, repeats: int) -> list[str]:
    """One table row: full time, outside the scan, per step, loops per step."""
    w = workloads.get(name)
    base = w.prim_func()
    mod = tvm.IRModule({"main": base})
    work_dir = database_dir(results, name)
    tuned = best_schedule(open_database(work_dir), work_dir, mod, name)
    inputs = w.input_arrays()
    tensors = fresh_tensors(base, inputs)
    n_outputs = len(base.params) - len(inputs)
    packed = on_packed_weights(tuned, tensors, n_outputs, repeats=1).func

    def time_ms(func: tvm.tirx.PrimFunc) -> float:
        args = call_args(func, param_names(base), tensors)
        return median(evaluator_latency_ms(build(func), args, repeats))

    full, one = time_ms(packed), time_ms(cut_to_one_step(packed))
    steps = int(scan_tir.find_scans(packed)[0].loop.extent)
    per_step = (full - one) / (steps - 1)
    parallel, vector = step_loop_kinds(packed)
    return [
        f"{name}: {w.name}",
        f"{full:.3f}",
        f"{one - per_step:.3f}",
        f"{per_step * 1e3:.1f}",
        str(steps),
        f"{per_step * steps:.3f}",
        str(parallel),
        str(vector),
    ]


def main(argv: list[str]) -> int:
    """Profile every config given, then print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    load = start_run()
    rows = [profile(name, args.results, args.repeats) for name in args.configs]
    print(header(load))
    print()
    head = [
        "config",
        "tuned ms",
        "outside the scan ms",
        "per step us",
        "steps",
        "all steps ms",
        "parallel loops per step",
        "vectorised loops per step",
    ]
    print(markdown_table(head, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
