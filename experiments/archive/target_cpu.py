"""What the llvm target's CPU is worth: one tuned schedule, compiled for several ``mcpu``.

Archived probe: it ran at commit 0977950 (second half of 2026-11-30, notes.md section 3);
its finding lives in ``scan_tir.tune.default_target`` (``mcpu`` = this CPU). Config names
are read by ``scan_tir.workloads`` now: the databases of that day are ``A-LEGACY``,
``A-MERGED``, ``B-LEGACY``, ``C-LEGACY``.

TVM's llvm target without ``mcpu`` compiles for LLVM's "generic" x86-64 CPU: SSE2, 4-wide
vectors, no FMA. Every database tuned before 2026-11-30 (session 4) was tuned and measured
that way. This script takes the best schedule of a config's database (weights prepacked, as
the tuner timed it) and times it compiled for each CPU, in one process, so the difference is
the code generation alone (the schedule is the same; its tile sizes were chosen for the
target it was tuned with).

Run: ``TVM_NUM_THREADS=2 python experiments/archive/target_cpu.py --configs A-LEGACY,B-LEGACY``
(``--cpus generic,haswell,znver5`` by default).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import tvm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: bench
from bench.database import best_schedule, database_dir, open_database  # noqa: E402

import scan_tir  # noqa: E402
from scan_tir import workloads  # noqa: E402


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
    parser.add_argument("--configs", default="A-LEGACY,B-LEGACY")
    parser.add_argument("--cpus", default="generic,haswell,znver5")
    parser.add_argument("--results", default="experiments/results", type=Path)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    cpus = args.cpus.split(",")
    print(f"Command: `{' '.join([Path(sys.executable).name, *sys.argv])}`\n")
    print("| config | " + " | ".join(f"{c} ms" for c in cpus) + " | first / last |")
    print("|---" * (len(cpus) + 2) + "|")
    for name in args.configs.split(","):
        mod = tvm.IRModule({"main": workloads.get(name).prim_func()})
        work_dir = database_dir(args.results, name, mod)
        best = best_schedule(open_database(work_dir), work_dir, mod, name)
        tuned = scan_tir.prepacked(tvm.IRModule({"main": best}))["main"]
        times = [time_ms(tuned, cpu, args.repeats) for cpu in cpus]
        cells = " | ".join(f"{t:.3f}" for t in times)
        ratio = times[0] / times[-1]
        print(f"| {name} | {cells} | {ratio:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
