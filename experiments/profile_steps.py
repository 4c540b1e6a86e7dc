"""Where a tuned recurrence spends its time: outside the scan, and per step.

A tuned module is one function; a sampling profiler sees one symbol. This script splits it
by construction instead: it builds the best schedule from a config's database twice, once
as tuned and once with every scan's time loop cut to one step (the loop's extent set to 1,
nothing else changed), and times both with random inputs. Then

    per step = (full - one step) / (steps - 1),    outside = one step - per step

and, for the step, how many parallel loops (one thread-pool fork/join each) it runs and how
many of its loops are vectorised. The cut module computes garbage (later rows are never
written); it is only timed.

Run: ``TVM_NUM_THREADS=2 python experiments/profile_steps.py --configs A,B`` after
``experiments/tune_lstm.py`` has filled ``experiments/results/<config>/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import tvm
import tvm_ffi
from tune_lstm import build, config_module, config_shape, open_database, target
from tvm.s_tir import meta_schedule as ms

import scan_tir


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


def time_ms(func: tvm.tirx.PrimFunc, repeats: int) -> float:
    """Median ms per call on random inputs of the parameters' shapes."""
    lib = build(func)
    rng = np.random.default_rng(0)
    args = [
        tvm.runtime.tensor(rng.standard_normal([int(d) for d in p.shape]).astype(p.dtype) * 0.1)
        for p in func.params
    ]
    evaluator = lib.time_evaluator("main", tvm.cpu(), number=5, repeat=repeats)
    return float(np.median(evaluator(*args).results)) * 1e3


def profile(name: str, results: Path, repeats: int) -> str:
    shape = config_shape(name)
    mod = config_module(name)
    sch = ms.tir_integration.compile_tir(open_database(results / name), mod, target())
    # Time what the tuner timed: weights already packed (RewriteLayout's blocks removed).
    tuned = scan_tir.prepacked(sch.mod)["main"]
    full, one = time_ms(tuned, repeats), time_ms(cut_to_one_step(tuned), repeats)
    steps = int(scan_tir.find_scans(tuned)[0].loop.extent)
    per_step = (full - one) / (steps - 1)
    parallel, vector = step_loop_kinds(tuned)
    return (
        f"| {name} {shape} | {full:.3f} | {one - per_step:.3f} | {per_step * 1e3:.1f} | "
        f"{steps} | {per_step * steps:.3f} | {parallel} | {vector} |"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="A,B")
    parser.add_argument("--results", default="experiments/results", type=Path)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    print(f"Command: `{' '.join([Path(sys.executable).name, *sys.argv])}`")
    print()
    print(
        "| config | tuned ms | outside the scan ms | per step us | steps | all steps ms "
        "| parallel loops per step | vectorised loops per step |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in args.configs.upper().split(","):
        print(profile(name, args.results, args.repeats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
