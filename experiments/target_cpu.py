"""What the llvm target's CPU is worth: one tuned schedule, compiled for several ``mcpu``.

TVM's llvm target without ``mcpu`` compiles for LLVM's "generic" x86-64 CPU: SSE2, 4-wide
vectors, no FMA. Every database tuned before 2026-11-30 (session 4) was tuned and measured
that way. This script takes the best schedule of a config's database (weights prepacked, as
the tuner timed it) and times it compiled for each CPU, in one process, so the difference is
the code generation alone (the schedule is the same; its tile sizes were chosen for the
target it was tuned with).

Run: ``TVM_NUM_THREADS=2 python experiments/target_cpu.py --configs A,B``
(``--cpus generic,haswell,znver5`` by default).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import tvm
from tune_lstm import config_module, config_shape, open_database, target
from tvm.s_tir import meta_schedule as ms

import scan_tir


def time_ms(func: tvm.tirx.PrimFunc, cpu: str, repeats: int) -> float:
    """Median ms per call of ``func`` built for ``cpu``, on random inputs."""
    tgt = tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": 2})
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), tgt).jit()
    rng = np.random.default_rng(0)
    args = [
        tvm.runtime.tensor(rng.standard_normal([int(d) for d in p.ty.shape]).astype("float32"))
        for p in func.params
    ]
    evaluator = lib.time_evaluator("main", tvm.cpu(), number=5, repeat=repeats)
    return float(np.median(evaluator(*args).results)) * 1e3


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="A,B")
    parser.add_argument("--cpus", default="generic,haswell,znver5")
    parser.add_argument("--results", default="experiments/results", type=Path)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    cpus = args.cpus.split(",")
    print(f"Command: `{' '.join([Path(sys.executable).name, *sys.argv])}`\n")
    print("| config | " + " | ".join(f"{c} ms" for c in cpus) + " | first / last |")
    print("|---" * (len(cpus) + 2) + "|")
    for name in args.configs.upper().split(","):
        mod = config_module(name)
        sch = ms.tir_integration.compile_tir(open_database(args.results / name), mod, target())
        tuned = scan_tir.prepacked(sch.mod)["main"]
        times = [time_ms(tuned, cpu, args.repeats) for cpu in cpus]
        cells = " | ".join(f"{t:.3f}" for t in times)
        ratio = times[0] / times[-1]
        print(f"| {name} {config_shape(name)} | {cells} | {ratio:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
