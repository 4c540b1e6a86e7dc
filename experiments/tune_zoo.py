"""Tune the workload zoo (GRU, stacked and bidirectional LSTM, selective scan, minGRU) with
scan-tir's search space and compare each with PyTorch and numpy in one process.

Per config (``scan_tir.workloads.CONFIGS``: E, A2, Abi, S, M) this script

1. tunes the zoo's function (``Workload.prim_func``: weights marked layout-free, tagged with
   its workload) with ``ms.tune_tir(..., space=scan_tir.scan_space(target))``; the database
   lives in ``<work-dir>/<config>/`` and a rerun resumes from it (``--replay``: measure only);
2. measures side by side: the best tuned schedule (weights prepacked once, and repacked in every
   call, as in tune_lstm.py), the untuned function, PyTorch eager at 2 and 1 threads (the
   module where PyTorch has one: nn.GRU, nn.LSTM(num_layers=2), nn.LSTM(bidirectional=True);
   a Python loop over steps otherwise), ``torch.compile`` with
   ``torch._dynamo.config.allow_rnn = True`` where PyTorch has the module, and the numpy
   reference;
3. checks every scan-tir module against the numpy reference (fails above ``--tol``) and prints
   a Markdown table with ratios and a hardware bound.

The bound is max(FLOPs / peak, bytes of the parameters / DRAM bandwidth): FLOPs from
``tvm.s_tir.analysis.estimate_tir_flops`` (exp, tanh and sigmoid count as one), peak is
the fp32 GEMM rate of the two cores measured by the run (experiments/machine.py), so for
the elementwise-heavy scans it is loose. ``estimate_tir_flops`` counts the polynomials of
``scan_tir.fast_math`` as the dozens of operations they are.

Run from the repo root with ``TVM_NUM_THREADS=2``. Shares tune_lstm.py's tuning, prepacking and
timing helpers (same directory).
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tvm
import tvm.s_tir.meta_schedule as ms
from bench_convert import (
    evaluator_latency_ms,
    loop_latency_ms,
    max_err,
    thread_settings,
    torch_available,
)
from machine import DRAM_BYTES_PER_S, peak_flops
from tune_lstm import (
    DEFAULT_WORK_ROOT,
    TARGET_JSON,
    build,
    database_stats,
    fmt,
    json_safe,
    log,
    median,
    open_database,
    param_shape,
    prepack,
    target,
    tune,
    weight_prepack_func,
)
from tvm import s_tir, tirx

import scan_tir
from scan_tir import workloads
from scan_tir.workloads import Workload

# Recurrences PyTorch has a module for (the others are timed as a Python loop over steps).
# Only these get the torch.compile baseline: on a loop over 1024 steps dynamo would unroll
# the loop (minutes of compile).
TORCH_MODULES = {"lstm", "lstm_stacked", "bilstm", "gru", "rnn_tanh", "rnn_relu"}
TARGETS = {"E": 0.6, "A2": 0.7, "Abi": 0.7}  # issue 4: tuned / faster PyTorch baseline


@dataclass
class Result:
    """Raw numbers of one config (every repeat, in ms)."""

    config: str
    workload: str
    work_dir: str
    tune_s: float = math.nan
    db_records: int = 0
    db_valid: int = 0
    db_best_ms: float = math.nan
    tuned_prepacked_ms: list[float] = field(default_factory=list)
    tuned_repack_ms: list[float] = field(default_factory=list)
    untuned_ms: list[float] = field(default_factory=list)
    torch2_ms: list[float] = field(default_factory=list)
    torch1_ms: list[float] = field(default_factory=list)
    compiled_ms: list[float] = field(default_factory=list)
    compile_s: float = math.nan
    compile_threads: int = 0
    torch_kind: str = ""
    numpy_ms: list[float] = field(default_factory=list)
    flops: float = math.nan
    param_bytes: int = 0
    errors: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- scan-tir


def fresh_tensors(func: tirx.PrimFunc, inputs: list[np.ndarray]) -> dict[str, Any]:
    """Inputs by parameter name, and zeroed outputs (no module sees another's results)."""
    names = [str(p.name) for p in func.params]
    out = {n: tvm.runtime.tensor(a) for n, a in zip(names, inputs)}
    for p in func.params[len(inputs) :]:
        out[str(p.name)] = tvm.runtime.tensor(np.zeros(param_shape(p), str(p.ty.dtype)))
    return out


def measure_module(
    label: str,
    func: tirx.PrimFunc,
    names: list[str],
    tensors: dict[str, Any],
    ref: list[np.ndarray],
    res: Result,
    repeats: int,
) -> list[float]:
    """Build ``func``, check every output against the numpy reference, return latencies.

    Arguments are looked up by the original parameter names: RemoveWeightLayoutRewriteBlock
    renames repacked weights but keeps their positions.
    """
    log(f"{res.config}: {label}: build")
    mod = build(func)
    args = [tensors[n] for n in names]
    mod["main"](*args)
    outs = [a.numpy() for a in args[len(names) - len(ref) :]]
    res.errors[f"{label} vs numpy"] = max(max_err(o, r) for o, r in zip(outs, ref))
    log(f"{res.config}: {label}: latency")
    return evaluator_latency_ms(mod, args, repeats)


def measure_scan_tir(
    w: Workload, tuned: tirx.PrimFunc, res: Result, inputs: list, ref: list, repeats: int
) -> None:
    """Tuned (repack per call, prepacked) and untuned modules, each checked against numpy."""
    base = w.prim_func()
    names = [str(p.name) for p in base.params]
    res.tuned_repack_ms = measure_module(
        "tuned, repack per call", tuned, names, fresh_tensors(base, inputs), ref, res, repeats
    )
    tensors = fresh_tensors(base, inputs)
    pre = weight_prepack_func(tuned, n_outputs=len(ref))
    if pre is None:
        res.notes.append("the best schedule repacks no weight: prepacked = repack per call")
        compute = tuned
    else:
        packed, once = prepack(pre, tensors, repeats)
        res.notes.append(f"one-off prepack {fmt(median(once))} ms")
        tensors.update(packed)
        compute = scan_tir.prepacked(tvm.IRModule({"main": tuned}))["main"]
    res.tuned_prepacked_ms = measure_module(
        "tuned, prepacked", compute, names, tensors, ref, res, repeats
    )
    res.untuned_ms = measure_module(
        "untuned", base, names, fresh_tensors(base, inputs), ref, res, repeats
    )


# ----------------------------------------------------------------------------- baselines


def measure_torch(w: Workload, res: Result, inputs: list, ref: list, args: Any) -> None:
    """PyTorch eager at 2 and 1 threads, then torch.compile at the faster count."""
    import torch

    call = w.recurrence.torch_model(*inputs, **w.sizes)
    module = w.recurrence.name in TORCH_MODULES
    res.torch_kind = "module" if module else "Python loop"
    res.errors["PyTorch vs numpy"] = max_err(np.asarray(call()), ref[0])
    old = torch.get_num_threads()
    try:
        for n, dest in ((2, res.torch2_ms), (1, res.torch1_ms)):
            torch.set_num_threads(n)
            log(f"{res.config}: PyTorch eager, {n} thread(s)")
            dest.extend(loop_latency_ms(call, args.latency_repeats))
        if module and not args.no_compile:
            res.compile_threads = 2 if median(res.torch2_ms) <= median(res.torch1_ms) else 1
            torch.set_num_threads(res.compile_threads)
            torch._dynamo.config.allow_rnn = True
            compiled = torch.compile(call)
            log(f"{res.config}: torch.compile (allow_rnn), first call compiles")
            t = time.perf_counter()
            out = compiled()
            res.compile_s = time.perf_counter() - t
            res.errors["torch.compile vs numpy"] = max_err(np.asarray(out), ref[0])
            res.compiled_ms = loop_latency_ms(compiled, args.latency_repeats)
    finally:
        torch.set_num_threads(old)


# ----------------------------------------------------------------------------- per config


def run_config(config: str, args: argparse.Namespace, with_torch: bool) -> Result:
    """Tune (unless --replay), then measure everything for one config."""
    w = workloads.get(config)
    work_dir = Path(args.work_dir) / config
    res = Result(config, w.name, str(work_dir))
    mod = tvm.IRModule({"main": w.prim_func()})
    res.flops = float(s_tir.analysis.estimate_tir_flops(mod))
    res.param_bytes = sum(
        math.prod(param_shape(p)) * tvm.DataType(str(p.ty.dtype)).bits // 8
        for p in mod["main"].params
    )
    if args.replay:
        log(f"{config}: replay from {work_dir}")
    else:
        res.tune_s = tune(config, mod, work_dir, args)
    db = open_database(work_dir)
    res.db_records, res.db_valid, res.db_best_ms = database_stats(db)
    if not res.db_valid:
        sys.exit(f"{config}: the database in {work_dir} holds no successful candidate")
    sch = ms.tir_integration.compile_tir(db, mod, target())
    if sch is None:
        sys.exit(f"{config}: compile_tir found no record for {w.name} in {work_dir}")
    inputs = w.input_arrays()
    log(f"{config}: numpy reference")
    ref = w.numpy(inputs)
    measure_scan_tir(w, sch.mod["main"], res, inputs, ref, args.latency_repeats)
    res.numpy_ms = loop_latency_ms(lambda: w.numpy(inputs), args.latency_repeats)
    if with_torch:
        measure_torch(w, res, inputs, ref, args)
    log(f"{config}: done")
    return res


# ----------------------------------------------------------------------------- report


def bound_ms(r: Result) -> tuple[float, str]:
    """The hardware bound in ms and which resource sets it."""
    compute = r.flops / peak_flops() * 1e3
    memory = r.param_bytes / DRAM_BYTES_PER_S * 1e3
    return (compute, "compute") if compute >= memory else (memory, "memory")


def table(results: list[Result]) -> str:
    """One row per config, medians."""
    head = [
        "config: workload",
        "trials in DB (valid)",
        "tuned ms, prepacked",
        "tuned ms, repack per call",
        "untuned ms",
        "PyTorch eager ms (2 thr / 1 thr)",
        "torch.compile ms",
        "numpy ms",
        "tuned / best PyTorch",
        "target",
        "bound ms",
        "max err",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        torch_best = min(median(r.torch2_ms), median(r.torch1_ms), median(r.compiled_ms))
        ratio = median(r.tuned_prepacked_ms) / torch_best
        bound, kind = bound_ms(r)
        err = max(v for k, v in r.errors.items() if k.startswith(("tuned", "untuned")))
        eager = f"{fmt(median(r.torch2_ms))} / {fmt(median(r.torch1_ms))}"
        row = [
            f"{r.config}: {r.workload}",
            f"{r.db_records} ({r.db_valid})",
            fmt(median(r.tuned_prepacked_ms)),
            fmt(median(r.tuned_repack_ms)),
            fmt(median(r.untuned_ms)),
            eager + (" (loop)" if r.torch_kind == "Python loop" else ""),
            fmt(median(r.compiled_ms)),
            fmt(median(r.numpy_ms)),
            "-" if math.isnan(ratio) else f"{ratio:.2f}",
            f"<= {TARGETS[r.config]}" if r.config in TARGETS else "report",
            f"{fmt(bound)} ({kind})",
            f"{err:.1e}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def footnotes(results: list[Result]) -> list[str]:
    out = []
    for r in results:
        tuned = "replayed" if math.isnan(r.tune_s) else f"tuned {r.tune_s:.0f} s this run"
        parts = [tuned, f"database {r.work_dir}", f"{r.flops / 1e6:.1f} MFLOP"]
        if not math.isnan(r.compile_s):
            parts.append(
                f"torch.compile first call {r.compile_s:.1f} s at {r.compile_threads} thread(s)"
            )
        parts += r.notes
        out.append(f"- {r.config}: " + "; ".join(parts) + ".")
        out.append("  Errors: " + ", ".join(f"{k} {v:.2e}" for k, v in r.errors.items()) + ".")
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="E,A2,Abi,S,M", help="comma-separated zoo configs")
    p.add_argument("--trials", type=int, default=64, help="tuning trials to add per config")
    p.add_argument("--work-dir", default=str(DEFAULT_WORK_ROOT), help="root of the databases")
    p.add_argument("--replay", action="store_true", help="measure from the saved databases")
    p.add_argument("--build-timeout", type=float, default=30.0, help="seconds per build")
    p.add_argument("--latency-repeats", type=int, default=20, help="repeats of each latency")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--tol", type=float, default=1e-4, help="max abs error allowed for scan-tir")
    p.add_argument("--json", metavar="PATH", help="write the raw numbers here")
    args = p.parse_args(argv)
    args.config_list = [c.strip() for c in args.configs.split(",") if c.strip()]
    bad = [c for c in args.config_list if c not in workloads.CONFIGS]
    if bad:
        p.error(f"unknown config(s) {bad}; choose from {sorted(workloads.CONFIGS)}")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    load = os.getloadavg()
    os.environ.setdefault("TVM_NUM_THREADS", "2")
    with_torch = torch_available()
    results = [run_config(c, args, with_torch) for c in args.config_list]
    cmd = " ".join(shlex.quote(a) for a in ["python", *sys.argv])
    print(f"Command: `{cmd}`")
    print("Threads: " + ", ".join(f"{k}={v}" for k, v in thread_settings().items()))
    print(f"Target: {TARGET_JSON}. Load average at start: " + ", ".join(f"{x:.2f}" for x in load))
    print()
    print(table(results))
    print()
    print("\n".join(footnotes(results)))
    if args.json:
        import json

        payload = {"command": cmd, "results": [asdict(r) for r in results]}
        Path(args.json).write_text(json.dumps(json_safe(payload), indent=2, allow_nan=False))
    failed = [
        (r.config, k, v)
        for r in results
        for k, v in r.errors.items()
        if k.startswith(("tuned", "untuned")) and not v <= args.tol
    ]
    for c, k, v in failed:
        print(f"FAIL: {c}: {k} max abs err {v:.2e} > {args.tol:g}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
