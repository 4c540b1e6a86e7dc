"""Tune any config with scan-tir's search space, or replay its database; compare with baselines.

A config is a name of ``scan_tir.workloads`` (A-D: topi's LSTM; E: GRU; A2: stacked LSTM;
Abi: bidirectional LSTM; S: selective scan; M: minGRU), whose suffixes choose the lowering
options (``A-FAST-INSTEP``, ``A-LEGACY``; no suffix: the default options, the fast path).
Per config this script

1. tunes the workload's function (``Workload.prim_func``: weights layout-free, tagged with
   its workload and options) with ``ms.tune_tir(..., space=scan_tir.scan_space(target))``
   for ``--trials`` more trials; the database lives in ``<work-dir>/<config>/``
   (``bench.database.database_dir``) and a rerun resumes from it (``--replay``: measure
   only; ``--per-scan``: each scan its own task, identical layers once, and the whole
   function's best is the composed schedule, ``scan_tir.tune.per_scan``);
2. measures side by side, in one process: the best tuned schedule two ways (weights prepacked
   once, and repacked inside every call: ``bench.prepack``), the untuned function, PyTorch
   eager at 2 and 1 threads (the module where PyTorch has one, a Python loop over steps
   otherwise), ``torch.compile`` with ``allow_rnn`` where PyTorch has the module,
   onnxruntime's own RNN kernels at 2 and 1 intra-op threads on that module exported to
   ONNX (``bench.onnx_baseline``; modules only), the workload's numpy reference, TVM's Relax
   path for the LSTM (``torch.export`` -> Relax -> ``tvm.compile``, unrolled; opt-in at C
   and D), and the hardware bound;
3. checks every scan-tir module against the numpy reference on the workload's own inputs
   (fails above ``--tol``) and prints a Markdown table (``--json PATH`` for the raw numbers).
   The tuned module is held against the fastest baseline of this run: PyTorch eager (2 or
   1 threads), torch.compile or onnxruntime (2 or 1 threads).

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/tune.py --configs A,B
--trials 32 --work-dir build/main-tuning`` (TVM_NUM_THREADS is set to 2 if unset).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tvm
from bench.bound import Bound, bound_constants, hardware_bound
from bench.bound import footnote as bound_footnote
from bench.build import fresh_tensors, param_names, target
from bench.check import build_checked, max_err
from bench.database import (
    best_schedule,
    config_list,
    database_dir,
    database_stats,
    open_database,
    require_workload,
)
from bench.onnx_baseline import OrtTimes, measure_ort
from bench.prepack import on_packed_weights
from bench.relax_baseline import has_relax_path, relax_build, relax_import
from bench.report import fmt, header, markdown_table, start_run, write_json
from bench.timing import loop_latency_ms, median, one_call_s, tvm_latency_ms
from bench.torch_baselines import TorchTimes, measure_torch, torch_available
from tvm import tirx

from scan_tir import workloads
from scan_tir.tune import tune_module
from scan_tir.tune.per_scan import scan_tasks, task_records, tune_per_scan
from scan_tir.tune.progress import count_lines, log, records_file
from scan_tir.workloads import Workload

# Relax unrolls the LSTM over time: minutes of compile and 7-18 s per call at C and D.
RELAX_OPT_IN = {"C", "D"}
# Issue 16's targets: tuned (prepacked) / the fastest of PyTorch eager (2 or 1 threads),
# torch.compile and onnxruntime (2 or 1 threads), all measured in the same run.
TARGETS = {"A": 0.65, "B": 0.25, "C": 0.6, "D": 0.95, "E": 0.6, "A2": 0.65, "Abi": 0.7}
DEFAULT_WORK_ROOT = Path("experiments") / "results"  # run from the repo root, as documented


@dataclass
class Result:
    """Raw numbers of one config (every repeat, in ms)."""

    config: str
    workload: str
    work_dir: str
    tune_s: float = math.nan  # wall time of this run's tuning; NaN when replayed
    db_records: int = 0
    db_valid: int = 0
    db_best_ms: float = math.nan
    tuned_prepacked_ms: list[float] = field(default_factory=list)
    tuned_repack_ms: list[float] = field(default_factory=list)
    prepack_once_ms: list[float] = field(default_factory=list)
    packed_shapes: dict[str, list[int]] = field(default_factory=dict)
    untuned_ms: list[float] = field(default_factory=list)
    torch: TorchTimes = field(default_factory=TorchTimes)
    ort: OrtTimes = field(default_factory=OrtTimes)
    numpy_ms: list[float] = field(default_factory=list)
    relax_ms: list[float] = field(default_factory=list)
    relax_compile_s: float = math.nan
    relax_skipped: str = ""  # why the Relax path did not run, empty when it did
    bound: Bound | None = None
    errors: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- scan-tir


def measure_module(
    label: str,
    func: tirx.PrimFunc,
    names: list[str],
    tensors: dict,
    ref: list[np.ndarray],
    res: Result,
    args: argparse.Namespace,
) -> list[float]:
    """Build ``func``, check every output against the numpy reference, return latencies."""
    log(f"{res.config}: {label}: build")
    checked = build_checked(func, names, tensors, ref)
    res.errors[f"{label} vs numpy"] = checked.err
    return latency_ms(label, checked.lib, checked.args, res, args)


def latency_ms(
    label: str, mod: Any, run_args: list, res: Result, args: argparse.Namespace
) -> list[float]:
    """Latencies of a TVM module already called once; the one-call time is logged, so that a
    slow path shows in the log before its repeats start."""
    once = one_call_s(mod, run_args)
    log(f"{res.config}: {label}: latency (one call {once * 1e3:.1f} ms)")
    return tvm_latency_ms(mod, run_args, once, args.latency_repeats, args.slow_repeats)


def measure_scan_tir(
    base: tirx.PrimFunc,
    tuned: tirx.PrimFunc,
    inputs: list[np.ndarray],
    ref: list[np.ndarray],
    res: Result,
    args: argparse.Namespace,
) -> None:
    """Tuned (repack per call, prepacked) and untuned modules, each on fresh tensors."""
    names = param_names(base)
    res.tuned_repack_ms = measure_module(
        "tuned, repack per call", tuned, names, fresh_tensors(base, inputs), ref, res, args
    )
    tensors = fresh_tensors(base, inputs)
    log(f"{res.config}: split off and run the weight prepack function")
    packed = on_packed_weights(tuned, tensors, len(ref), args.latency_repeats)
    if not packed.once_ms:
        res.notes.append("the best schedule repacks no weight: prepacked = repack per call")
    res.prepack_once_ms, res.packed_shapes = packed.once_ms, packed.shapes
    res.tuned_prepacked_ms = measure_module(
        "tuned, prepacked", packed.func, names, tensors, ref, res, args
    )
    res.untuned_ms = measure_module(
        "untuned", base, names, fresh_tensors(base, inputs), ref, res, args
    )


# ----------------------------------------------------------------------------- baselines


def relax_skip_reason(w: Workload, base: str, args: argparse.Namespace, with_torch: bool) -> str:
    """Why the Relax column is empty, or "" when it is measured."""
    if not has_relax_path(w):
        return "no Relax path"
    if args.no_relax:
        return "--no-relax"
    if not with_torch:
        return "no torch"
    if base in RELAX_OPT_IN and not args.relax_large:
        return "C/D need --relax-large"
    return ""


def measure_relax(
    inputs: list[np.ndarray], ref: list[np.ndarray], res: Result, args: argparse.Namespace
) -> None:
    """TVM's own path for an nn.LSTM: unrolled Relax, default pipeline, no tuning."""
    log(f"{res.config}: Relax export+import+compile (slow: unrolled over time)")
    _, import_s, rmod = relax_import(inputs)
    compile_s, load_s, vm = relax_build(rmod)
    res.relax_compile_s = import_s + compile_s + load_s
    x = tvm.runtime.tensor(inputs[0])
    hs = vm["main"](x)[0].numpy()
    res.errors["Relax vs numpy (hs)"] = max_err(hs, ref[0])
    res.relax_ms = latency_ms("Relax", vm, [x], res, args)


def measure_baselines(
    w: Workload,
    base: str,
    inputs: list[np.ndarray],
    ref: list[np.ndarray],
    res: Result,
    args: argparse.Namespace,
    with_torch: bool,
) -> None:
    """numpy, PyTorch (eager 2 and 1 threads, torch.compile), onnxruntime (2 and 1 threads)
    and, unless skipped, Relax."""
    log(f"{res.config}: numpy latency")
    res.numpy_ms = loop_latency_ms(lambda: w.numpy(inputs), args.latency_repeats)
    if with_torch:
        log(f"{res.config}: PyTorch eager (2 and 1 threads) and torch.compile")
        res.torch = measure_torch(w, inputs, ref, args.latency_repeats, not args.no_compile)
        res.errors.update(res.torch.errors)
    log(f"{res.config}: onnxruntime (2 and 1 intra-op threads)")
    res.ort = measure_ort(w, inputs, ref, args.latency_repeats)
    res.errors.update(res.ort.errors)
    if res.ort.skipped:
        log(f"{res.config}: onnxruntime skipped: {res.ort.skipped}")
    res.relax_skipped = relax_skip_reason(w, base, args, with_torch)
    if not res.relax_skipped:
        measure_relax(inputs, ref, res, args)


# ----------------------------------------------------------------------------- per config


def run_config(name: str, args: argparse.Namespace, with_torch: bool) -> Result:
    """Tune (unless --replay), then measure everything for one config."""
    base_config, _ = workloads.parse_config(name)
    w = workloads.get(name)
    base = w.prim_func()
    mod = tvm.IRModule({"main": base})
    work_dir = database_dir(Path(args.work_dir), name)
    res = Result(name, w.name, str(work_dir))
    if args.replay:
        log(f"{name}: replay from {work_dir} (no tuning)")
    else:
        start = count_lines(records_file(work_dir))
        if start:  # never mix another function into a database of records
            require_workload(open_database(work_dir), work_dir, mod, name)
        if args.per_scan:
            tasks = scan_tasks(base)
            done = tune_per_scan(
                base,
                work_dir,
                task_records(work_dir, tasks) + args.trials,
                target(),
                label=name,
                build_timeout_s=args.build_timeout,
            )
            res.tune_s = done.seconds
        else:
            res.tune_s = tune_module(
                mod,
                work_dir,
                args.trials,
                target(),
                label=name,
                build_timeout_s=args.build_timeout,
                total=start + args.trials,
            )

    db = open_database(work_dir)
    tuned = best_schedule(db, work_dir, mod, name)
    res.db_records, res.db_valid, res.db_best_ms = database_stats(db, mod)
    log(
        f"{name}: database has {res.db_records} records ({res.db_valid} valid), "
        f"best {res.db_best_ms:.4f} ms"
    )
    inputs = w.input_arrays()
    log(f"{name}: numpy reference")
    ref = w.numpy(inputs)
    measure_scan_tir(base, tuned, inputs, ref, res, args)
    measure_baselines(w, base_config, inputs, ref, res, args, with_torch)
    res.bound = hardware_bound(w, base)
    log(f"{name}: done")
    return res


# ----------------------------------------------------------------------------- report


def scan_err(r: Result) -> float:
    """Worst error of the scan-tir modules (tuned both ways, untuned)."""
    return max(v for k, v in r.errors.items() if k.startswith(("tuned", "untuned")))


def baselines_ms(r: Result) -> dict[str, float]:
    """Median of each baseline the ratio is taken against, by name (NaN: did not run)."""
    return {
        "eager 2 thr": median(r.torch.eager2_ms),
        "eager 1 thr": median(r.torch.eager1_ms),
        "torch.compile": median(r.torch.compiled_ms),
        "ORT 2 thr": median(r.ort.ort2_ms),
        "ORT 1 thr": median(r.ort.ort1_ms),
    }


def ratio_cell(r: Result) -> str:
    """Tuned (prepacked) over the fastest baseline that ran, naming it; "-" when none ran.
    NaNs are dropped first: ``min`` over values that include a NaN depends on their order."""
    ran = {k: v for k, v in baselines_ms(r).items() if not math.isnan(v)}
    if not ran:
        return "-"
    fastest = min(ran, key=ran.__getitem__)
    return f"{median(r.tuned_prepacked_ms) / ran[fastest]:.2f} (vs {fastest})"


def pair(two: list[float], one: list[float]) -> str:
    """A baseline's 2-thread and 1-thread medians in one cell."""
    return f"{fmt(median(two))} / {fmt(median(one))}"


def table(results: list[Result]) -> str:
    """One row per config, medians of the raw numbers."""
    head = [
        "config: workload",
        "trials in DB (valid)",
        "DB best ms",
        "tuned ms, prepacked",
        "tuned ms, repack per call",
        "untuned ms",
        "PyTorch eager ms (2 thr / 1 thr)",
        "torch.compile ms",
        "onnxruntime ms (2 thr / 1 thr)",
        "numpy ms",
        "Relax ms",
        "tuned prepacked / fastest baseline [3]",
        "target",
        "bound ms [1]",
        "max err [2]",
    ]
    rows = []
    for r in results:
        base, _ = workloads.parse_config(r.config)
        eager = pair(r.torch.eager2_ms, r.torch.eager1_ms)
        if r.relax_skipped == "no Relax path":
            relax = "-"
        elif r.relax_skipped:
            relax = f"skipped ({r.relax_skipped})"
        else:
            relax = fmt(median(r.relax_ms))
        rows.append(
            [
                f"{r.config}: {r.workload}",
                f"{r.db_records} ({r.db_valid})",
                fmt(r.db_best_ms),
                fmt(median(r.tuned_prepacked_ms)),
                fmt(median(r.tuned_repack_ms)),
                fmt(median(r.untuned_ms)),
                eager + (" (loop)" if r.torch.kind == "Python loop" else ""),
                fmt(median(r.torch.compiled_ms)),
                "-" if r.ort.skipped else pair(r.ort.ort2_ms, r.ort.ort1_ms),
                fmt(median(r.numpy_ms)),
                relax,
                ratio_cell(r),
                f"<= {TARGETS[base]}" if base in TARGETS else "report",
                f"{fmt(r.bound.ms)} ({r.bound.kind})" if r.bound else "-",
                f"{scan_err(r):.1e}",
            ]
        )
    return markdown_table(head, rows)


def footnotes(results: list[Result], args: argparse.Namespace) -> list[str]:
    """How each column was obtained, then per-config notes (prepack cost, errors, tuning)."""
    out = [
        f"[1] {bound_footnote()}",
        "[2] Max abs error over every output of every scan-tir module (tuned both ways, "
        "untuned) against the workload's numpy reference (tvm.topi.testing.lstm_python for "
        f"the LSTM); the run fails above --tol {args.tol:g}.",
        "[3] Against the fastest of PyTorch eager (2 and 1 threads), torch.compile and "
        "onnxruntime (2 and 1 intra-op threads), all measured in this process run; the "
        "fastest is named in parentheses. The target is issue 16's, on the same ratio.",
        "Inputs: the workload's own (Workload.input_arrays(), seed 0), the same arrays for "
        "every column. Latency: medians; TVM modules via time_evaluator, numpy, PyTorch and "
        "onnxruntime via a perf_counter loop (experiments/bench/timing.py). 'DB best' is the "
        "lowest mean run_secs in the tuning records (measured by MetaSchedule's runner on "
        "prepacked weights). 'Prepacked': the weights are packed once by the function that "
        "Relax's SplitLayoutRewritePreproc splits off the tuned schedule, and the timed "
        "module is scan_tir.prepacked(tuned) (what the tuner timed). 'Repack per call': the "
        "tuned module as compiled, packing its weights at the start of every call. PyTorch: "
        "the module where PyTorch has one, else a Python loop over steps ('(loop)'); "
        "torch.compile with torch._dynamo.config.allow_rnn = True at the faster thread "
        "count, modules only. onnxruntime: the same module (weights copied once, "
        "Recurrence.torch_module) exported by torch.onnx.export(dynamo=False), one ONNX "
        "LSTM/GRU/RNN node per layer (both directions in one node), run by onnxruntime's own "
        "kernels on the CPU execution provider at intra_op_num_threads 2 and 1 "
        "(inter_op_num_threads 1), modules only; '-' with the reason in the config's notes "
        "where it cannot run. numpy: the workload's numpy reference.",
        "",
    ]
    for r in results:
        tuned = "replayed" if math.isnan(r.tune_s) else f"tuned {r.tune_s:.0f} s this run"
        parts = [tuned, f"database {r.work_dir}"]
        if r.bound is not None:
            parts.append(f"{r.bound.flops / 1e6:.1f} MFLOP")
        if r.prepack_once_ms:
            shapes = ", ".join(f"{n} -> {s}" for n, s in r.packed_shapes.items())
            parts.append(f"one-off prepack {fmt(median(r.prepack_once_ms))} ms ({shapes})")
        if not math.isnan(r.relax_compile_s):
            parts.append(f"Relax import+compile+load {r.relax_compile_s:.1f} s")
        if r.ort.skipped:
            parts.append(f"onnxruntime: {r.ort.skipped}")
        else:
            parts.append(
                f"ONNX export {r.ort.export_s:.2f} s, onnxruntime session "
                f"{r.ort.session2_s:.3f} s (2 thr) / {r.ort.session1_s:.3f} s (1 thr)"
            )
        if not math.isnan(r.torch.compile_s):
            parts.append(
                f"torch.compile first call {r.torch.compile_s:.1f} s at "
                f"{r.torch.compile_threads} thread(s)"
            )
        parts += r.notes
        out.append(f"- {r.config}: " + "; ".join(parts) + ".")
        errs = ", ".join(f"{k} {v:.2e}" for k, v in r.errors.items())
        out.append(f"  Errors: {errs}.")
    return out


def report(results: list[Result], args: argparse.Namespace) -> int:
    """Print header, table and notes; return the exit status (1 on wrong numerics)."""
    print(
        header(
            args.load_at_start,
            "; PyTorch set to 2 then 1 thread per column, onnxruntime intra_op_num_threads "
            "2 then 1",
        )
    )
    print(
        f"Latency repeats {args.latency_repeats} (slow paths {args.slow_repeats}). Trials this "
        f"run: {'none (--replay)' if args.replay else args.trials} (builder timeout "
        f"{args.build_timeout:g} s, scan_tir.tune.build_candidate: no tensor_intrin import)."
    )
    print()
    print(table(results))
    print()
    print("\n".join(footnotes(results, args)))
    if args.json:
        write_json(
            args.json,
            {
                "bound_constants": bound_constants(),
                "args": {k: v for k, v in vars(args).items() if k != "json"},
                "results": [asdict(r) for r in results],
            },
        )
    failed = [
        (r.config, k, v)
        for r in results
        for k, v in r.errors.items()
        if k.startswith(("tuned", "untuned")) and not v <= args.tol
    ]
    for c, k, v in failed:
        for stream in (sys.stdout, sys.stderr):  # in the report and on the console
            print(f"FAIL: {c}: {k} max abs err {v:.2e} > {args.tol:g}", file=stream)
    return 1 if failed else 0


# ----------------------------------------------------------------------------- driver


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--configs",
        required=True,
        type=config_list,
        help=f"comma-separated configs of {sorted(workloads.CONFIGS)}, each with optional "
        "suffixes -FAST, -INSTEP, -MERGED (exactly those options on) or -LEGACY (all off); "
        "no suffix: the default options. E.g. A,B or D-FAST-INSTEP or A-LEGACY",
    )
    p.add_argument("--trials", type=int, default=64, help="tuning trials to add per config")
    p.add_argument(
        "--work-dir",
        default=str(DEFAULT_WORK_ROOT),
        help="root of the tuning databases; config X uses <work-dir>/X/ (X spelled as "
        "scan_tir.workloads.config_name spells it) (default: experiments/results)",
    )
    p.add_argument("--replay", action="store_true", help="measure from the saved databases")
    p.add_argument(
        "--per-scan",
        action="store_true",
        help="tune each scan of a config as its own task, identical layers once "
        "(scan_tir.tune.per_scan); the best of the whole function is then the composed one",
    )
    p.add_argument(
        "--build-timeout",
        type=float,
        default=30.0,
        help="seconds per candidate build while tuning (MetaSchedule's default: 30)",
    )
    p.add_argument("--latency-repeats", type=int, default=20, help="repeats of each latency")
    p.add_argument(
        "--slow-repeats",
        type=int,
        default=5,
        help="repeats for a TVM module whose first call takes > 1 s",
    )
    p.add_argument("--no-relax", action="store_true", help="skip TVM's Relax path everywhere")
    p.add_argument(
        "--relax-large",
        action="store_true",
        help="also run the Relax path for C and D (minutes of compile, seconds per call)",
    )
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--tol", type=float, default=1e-4, help="max abs error allowed for scan-tir")
    p.add_argument("--json", metavar="PATH", help="write the raw numbers here")
    args = p.parse_args(argv)
    if min(args.trials, args.latency_repeats, args.slow_repeats) < 1:
        p.error("--trials and repeat counts must be >= 1")
    return args


def main(argv: list[str]) -> int:
    """Tune and measure every selected config, then report."""
    args = parse_args(argv)
    args.load_at_start = start_run()
    with_torch = torch_available()
    if not with_torch:
        log("torch is not importable: skipping the PyTorch columns and the Relax path")
    results = []
    for name in args.configs:
        log(f"{name}: {workloads.get(name).name}")
        results.append(run_config(name, args, with_torch))
    status = report(results, args)
    log("done" if status == 0 else "done, with FAILED numerics")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
