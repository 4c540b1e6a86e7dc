"""Tune ``topi.nn.lstm`` with MetaSchedule on scan-tir's search space; compare with baselines.

Per LSTM config (seq, batch, in, hidden) this script

1. tunes the converted function (``scan_tir.create_prim_func``, weights marked layout-free) with
   ``ms.tune_tir(..., space=scan_tir.scan_space(target))``; the JSON database lives in
   ``<work-dir>/<config>/`` and a rerun resumes from it (``--replay``: no tuning, measure only);
2. measures side by side, in one process: the best tuned schedule two ways (weights prepacked once,
   and repacked inside every call), the untuned function, PyTorch eager ``nn.LSTM`` at 2 and
   1 threads, numpy, and TVM's Relax path (``torch.export`` -> Relax -> ``tvm.compile``, unrolled);
3. checks every scan-tir module against ``tvm.topi.testing.lstm_python`` (fails above ``--tol``)
   and prints a Markdown table (``--json PATH`` for the raw numbers).

Why two tuned numbers: ``layout_free`` lets MetaSchedule's RewriteLayout postproc repack Wi/Wh
into the layouts the tiled loops want. The schedule it returns does the repacking itself, in
blocks annotated ``meta_schedule.layout_rewrite_preproc``, at the start of every call; what the
tuner measured (its database's run_secs) is the function without those blocks, fed weights that
are already packed (its builder, ``scan_tir.tuning.build_candidate``, applies
``scan_tir.prepacked``: RemoveWeightLayoutRewriteBlock, then no per-call copy of a packed
weight). A deployment packs
the weights once, as Relax does: ``SplitLayoutRewritePreproc`` moves the preproc blocks into a
function of their own (``*_weight_prepack``), which Relax runs once (or folds into constants).
"Prepacked" here does the same: that split function packs the weights once, and the timed module
is ``scan_tir.prepacked`` of the tuned one (what the tuner timed).

Run with ``TVM_NUM_THREADS=2`` (set to 2 if unset). Reuses bench_convert's weights, numpy and
PyTorch baselines, Relax path and latency helpers (same directory, so on ``sys.path`` when run as
``python experiments/tune_lstm.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tvm
import tvm.s_tir.meta_schedule as ms
from bench_convert import (
    TARGET_JSON,
    Weights,
    evaluator_latency_ms,
    loop_latency_ms,
    lstm_te,
    make_weights,
    max_err,
    numpy_lstm,
    relax_build,
    relax_import,
    thread_settings,
    torch_available,
    torch_latency,
)
from machine import DRAM_BYTES_PER_S, cache_bytes, peak_flops
from tvm import relax, tirx
from tvm.topi.testing import lstm_python

import scan_tir
from scan_tir.tuning import count_lines, log, records_file, tune_module

Shape = tuple[int, int, int, int]

CONFIGS: dict[str, Shape] = {
    "A": (80, 1, 512, 256),
    "B": (256, 1, 16, 16),
    "C": (100, 1, 1024, 1024),
    "D": (50, 64, 512, 512),
}
#: Suffixes of a config name, each a variant of its function (combinable: "A-MERGED-FAST"):
#: -MERGED lowers with merge_updates=True, -FAST applies scan_tir.fast_math.
VARIANTS = ("-MERGED", "-FAST", "-INSTEP")
# Relax unrolls the LSTM over time: minutes of compile and 7-18 s per call at C and D.
RELAX_OPT_IN = {"C", "D"}
FAILED_RUN_S = 1e9  # MetaSchedule records failed builds/runs as run_secs = 1e10
SLOW_CALL_S = 1.0  # a path slower than this per call gets --slow-repeats repeats
DEFAULT_WORK_ROOT = Path("experiments") / "results"  # run from the repo root, as documented


@dataclass
class Result:
    """Raw numbers of one config. Field names torch2_ms/torch1_ms match bench_convert.Result,
    whose ``torch_latency`` appends to them."""

    config: str
    shape: Shape
    work_dir: str
    tune_s: float = math.nan  # wall time of this run's tuning; NaN when replayed
    db_records: int = 0
    db_valid: int = 0
    db_best_ms: float = math.nan
    tuned_prepacked_ms: list[float] = field(default_factory=list)
    tuned_repack_ms: list[float] = field(default_factory=list)
    prepack_once_ms: list[float] = field(default_factory=list)
    untuned_ms: list[float] = field(default_factory=list)
    torch2_ms: list[float] = field(default_factory=list)
    torch1_ms: list[float] = field(default_factory=list)
    numpy_ms: list[float] = field(default_factory=list)
    relax_ms: list[float] = field(default_factory=list)
    relax_compile_s: float = math.nan
    relax_skipped: str = ""  # why the Relax path did not run, empty when it did
    packed_shapes: dict[str, list[int]] = field(default_factory=dict)
    errors: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def median(xs: list[float]) -> float:
    """Median, or NaN for a path that did not run (keeps the table's shape fixed)."""
    return statistics.median(xs) if xs else math.nan


def target() -> tvm.target.Target:
    """The target of tuning and of every build, so tuned records match at compile time."""
    return tvm.target.Target(TARGET_JSON)


# ----------------------------------------------------------------------------- tuning


def lstm_module(
    shape: Shape, merge_updates: bool = False, fast_math: bool = False, copies_in_step: bool = False
) -> tvm.IRModule:
    """The function that is tuned and measured untuned; Wi/Wh may be repacked by RewriteLayout.

    Built afresh from the TE graph each time: the database matches it structurally.
    """
    func = scan_tir.create_prim_func(
        lstm_te(shape), merge_updates=merge_updates, copies_in_step=copies_in_step
    )
    if fast_math:
        func = scan_tir.fast_math(func)
    return tvm.IRModule({"main": scan_tir.layout_free(func, ["Wi", "Wh"])})


def config_base(name: str) -> str:
    """A-D: the config name without its VARIANTS suffixes (an unknown one stays)."""
    for variant in VARIANTS:
        name = name.replace(variant, "")
    return name


def config_shape(name: str) -> Shape:
    """The LSTM sizes of a config name: A-D, with or without VARIANTS suffixes."""
    return CONFIGS[config_base(name)]


def config_module(name: str) -> tvm.IRModule:
    """The function of a config: with ``-MERGED``, next_c and next_h in one loop nest
    (``create_prim_func(..., merge_updates=True)``), so that the step can be tiled by them;
    with ``-FAST``, vectorisable exp/sigmoid/tanh (``scan_tir.fast_math``); with
    ``-INSTEP``, the hidden_states/cell_states copies inside the step
    (``create_prim_func(..., copies_in_step=True)``)."""
    return lstm_module(config_shape(name), "-MERGED" in name, "-FAST" in name, "-INSTEP" in name)


def tune(label: str, mod: tvm.IRModule, work_dir: Path, args: argparse.Namespace) -> float:
    """Run ``ms.tune_tir`` for ``--trials`` more trials (it resumes from the database in
    ``work_dir``); returns its wall time in seconds."""
    start = count_lines(records_file(work_dir))
    return tune_module(
        mod,
        work_dir,
        args.trials,
        target(),
        label=label,
        build_timeout_s=args.build_timeout,
        total=start + args.trials,
    )


def open_database(work_dir: Path) -> ms.database.JSONDatabase:
    """The saved database; refuses a missing one so that --replay never measures nothing."""
    if not records_file(work_dir).exists():
        sys.exit(f"no tuning database in {work_dir}: run without --replay first")
    return ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=False)


def database_stats(db: ms.database.Database) -> tuple[int, int, float]:
    """(records, valid records, best mean latency in ms) over the whole database.

    The mean of run_secs is what MetaSchedule ranks by. Failed candidates are kept in the
    database with run_secs 1e10, so they count as trials but not as valid ones.
    """
    means = [
        statistics.fmean(float(s) for s in rec.run_secs)
        for rec in db.get_all_tuning_records()
        if rec.run_secs
    ]
    valid = [m for m in means if m < FAILED_RUN_S]
    return len(db), len(valid), min(valid) * 1e3 if valid else math.nan


# ----------------------------------------------------------------------------- weight layout


def param_shape(param: tirx.Var) -> tuple[int, ...]:
    """The static shape of a PrimFunc buffer parameter."""
    return tuple(int(d) for d in param.ty.shape)


def tensor_type(param: tirx.Var) -> relax.TensorType:
    """The Relax type of a PrimFunc buffer parameter."""
    return relax.TensorType(list(param_shape(param)), str(param.ty.dtype))


def weight_prepack_func(tuned: tirx.PrimFunc, n_outputs: int) -> tirx.PrimFunc | None:
    """The tuned function's ``layout_rewrite_preproc`` blocks as a function of their own, or
    None when the schedule repacks nothing.

    Uses Relax's SplitLayoutRewritePreproc, the pass through which TVM itself obtains
    prepacked weights (``relax.pipeline`` with MetaSchedule). It acts on ``call_tir`` sites, so
    the PrimFunc is wrapped in a one-call Relax function. The split function takes the original
    weights, then the packed outputs, each in the order of the preproc blocks.
    ``RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=False)`` cannot serve: in TVM 0.27 it
    ignores the flag and only drops the blocks and retypes the parameters (see
    src/s_tir/transform/remove_weight_layout_rewrite_block.cc).
    """
    n_in = len(tuned.params) - n_outputs
    args = [relax.Var(str(p.name), tensor_type(p)) for p in tuned.params[:n_in]]
    bb = relax.BlockBuilder()
    with bb.function("main", args):
        gv = bb.add_func(tuned, "lstm")
        out_types = [tensor_type(p) for p in tuned.params[n_in:]]
        with bb.dataflow():
            out = bb.emit_output(relax.call_tir(gv, relax.Tuple(args), out_types))
        bb.emit_func_output(out)
    split = relax.transform.SplitLayoutRewritePreproc()(bb.get())
    found = [gv for gv in split.get_global_vars() if gv.name_hint == "lstm_weight_prepack"]
    return split[found[0]] if found else None


def build(func: tirx.PrimFunc) -> tvm.runtime.Module:
    """Compile one PrimFunc as ``main`` (whatever its global_symbol) and load it."""
    func = func.with_attr("global_symbol", "main")
    return tvm.compile(tvm.IRModule({"main": func}), target=target()).jit()


def prepack(
    func: tirx.PrimFunc, weights: dict[str, Any], repeats: int
) -> tuple[dict[str, Any], list[float]]:
    """Run the split-off preproc function once: packed tensors by original parameter name, and
    its own latency (a one-time cost of deployment, reported in the notes)."""
    n = len(func.params) // 2
    names = [str(p.name) for p in func.params[:n]]
    outs = [tvm.runtime.tensor(np.zeros(param_shape(p), str(p.ty.dtype))) for p in func.params[n:]]
    mod = build(func)
    run_args = [weights[name] for name in names] + outs
    mod["main"](*run_args)
    return dict(zip(names, outs)), evaluator_latency_ms(mod, run_args, repeats)


# ----------------------------------------------------------------------------- scan-tir runs


def plain_tensors(func: tirx.PrimFunc, w: Weights) -> dict[str, Any]:
    """Inputs by the converted function's parameter names, and zeroed outputs."""
    names = [str(p.name) for p in func.params]
    arrays = [w.x, w.wi, w.wh, w.bi, w.bh]
    out = {n: tvm.runtime.tensor(a) for n, a in zip(names, arrays)}
    for p in func.params[len(arrays) :]:
        out[str(p.name)] = tvm.runtime.tensor(np.zeros(param_shape(p), "float32"))
    return out


def call_args(func: tirx.PrimFunc, names: list[str], tensors: dict[str, Any]) -> list[Any]:
    """Arguments of ``func`` by position, looked up by the ORIGINAL parameter names.

    RemoveWeightLayoutRewriteBlock renames the repacked parameters (Wi -> Wi_global) but keeps
    their positions. Shapes are checked, so a packed tensor can never land in the wrong slot.
    """
    args = [tensors[n] for n in names]
    for p, a, n in zip(func.params, args, names):
        want = param_shape(p)
        if tuple(a.shape) != want:
            raise ValueError(f"argument {n}: shape {tuple(a.shape)}, parameter wants {want}")
    return args


def run_timed(mod: Any, args: list[Any]) -> float:
    """Seconds of one call, made after the numerics call so that it excludes the llvm module's
    lazy code generation; it decides whether the path counts as slow."""
    t = time.perf_counter()
    mod["main"](*args)
    return time.perf_counter() - t


def tvm_latency_ms(
    mod: Any, run_args: list[Any], once: float, args: argparse.Namespace
) -> list[float]:
    """Per-call ms of each repeat via time_evaluator; a slow path (> SLOW_CALL_S per call) gets
    --slow-repeats single-call repeats and skips bench_convert's calibration calls, which
    would cost two more calls of many seconds each (Relax at C/D, untuned at D)."""
    if once <= SLOW_CALL_S:
        return evaluator_latency_ms(mod, run_args, args.latency_repeats)
    timer = mod.time_evaluator("main", tvm.cpu(), number=1, repeat=args.slow_repeats)
    return [r * 1e3 for r in timer(*run_args).results]


def measure_module(
    label: str,
    func: tirx.PrimFunc,
    names: list[str],
    tensors: dict[str, Any],
    ref: tuple[np.ndarray, np.ndarray],
    res: Result,
    args: argparse.Namespace,
) -> list[float]:
    """Build ``func``, check hs/cs against lstm_python, return its latencies (ms)."""
    log(f"{res.config}: {label}: build")
    mod = build(func)
    run_args = call_args(func, names, tensors)
    mod["main"](*run_args)
    hs, cs = run_args[-2].numpy(), run_args[-1].numpy()
    res.errors[f"{label} vs lstm_python"] = max(max_err(hs, ref[0]), max_err(cs, ref[1]))
    once = run_timed(mod, run_args)
    log(f"{res.config}: {label}: latency (one call {once * 1e3:.1f} ms)")
    return tvm_latency_ms(mod, run_args, once, args)


def measure_scan_tir(
    mod: tvm.IRModule, tuned: tirx.PrimFunc, w: Weights, res: Result, args: argparse.Namespace
) -> None:
    """Tuned (prepacked, repack per call) and untuned modules, each checked for numerics."""
    base = mod["main"]
    names = [str(p.name) for p in base.params]
    ref = lstm_python(w.x, w.wi, w.wh, w.bi, w.bh)

    def fresh() -> dict[str, Any]:
        return plain_tensors(base, w)  # new zeroed outputs: no module sees another's results

    res.tuned_repack_ms = measure_module(
        "tuned, repack per call", tuned, names, fresh(), ref, res, args
    )

    pre = weight_prepack_func(tuned, n_outputs=2)
    tensors = fresh()
    if pre is None:
        res.notes.append("the best schedule repacks no weight: prepacked = repack per call")
        compute = tuned
    else:
        log(f"{res.config}: split off and run the weight prepack function")
        packed, res.prepack_once_ms = prepack(pre, tensors, args.latency_repeats)
        res.packed_shapes = {n: list(t.shape) for n, t in packed.items()}
        tensors.update(packed)
        compute = scan_tir.prepacked(tvm.IRModule({"main": tuned}))["main"]
    res.tuned_prepacked_ms = measure_module(
        "tuned, prepacked", compute, names, tensors, ref, res, args
    )
    res.untuned_ms = measure_module("untuned", base, names, fresh(), ref, res, args)


# ----------------------------------------------------------------------------- baselines


def measure_relax(w: Weights, res: Result, args: argparse.Namespace) -> None:
    """TVM's own path for an nn.LSTM: unrolled Relax, default pipeline, no tuning."""
    log(f"{res.config}: Relax export+import+compile (slow: unrolled over time)")
    _, import_s, rmod = relax_import(w)
    compile_s, load_s, vm = relax_build(rmod)
    res.relax_compile_s = import_s + compile_s + load_s
    x = tvm.runtime.tensor(w.x)
    hs = vm["main"](x)[0].numpy()
    res.errors["Relax vs lstm_python (hs)"] = max_err(
        hs, lstm_python(w.x, w.wi, w.wh, w.bi, w.bh)[0]
    )
    once = run_timed(vm, [x])
    log(f"{res.config}: Relax latency (one call {once * 1e3:.1f} ms)")
    res.relax_ms = tvm_latency_ms(vm, [x], once, args)


def relax_skip_reason(config: str, args: argparse.Namespace, with_torch: bool) -> str:
    """Why the Relax column is empty for ``config``, or "" when it is measured."""
    if args.no_relax:
        return "--no-relax"
    if not with_torch:
        return "no torch"
    if config_base(config) in RELAX_OPT_IN and not args.relax_large:
        return "C/D need --relax-large"
    return ""


def measure_baselines(w: Weights, res: Result, args: argparse.Namespace, with_torch: bool) -> None:
    """numpy, PyTorch eager (2 and 1 threads) and, unless skipped, Relax."""
    log(f"{res.config}: numpy latency")
    res.numpy_ms = loop_latency_ms(lambda: numpy_lstm(w), args.latency_repeats)
    if with_torch:
        log(f"{res.config}: PyTorch eager latency (2 and 1 threads)")
        t_hs = torch_latency(w, args.latency_repeats, res)  # type: ignore[arg-type]
        ref_hs = lstm_python(w.x, w.wi, w.wh, w.bi, w.bh)[0]
        res.errors["PyTorch vs lstm_python (hs)"] = max_err(t_hs, ref_hs)
    res.relax_skipped = relax_skip_reason(res.config, args, with_torch)
    if not res.relax_skipped:
        measure_relax(w, res, args)


# ----------------------------------------------------------------------------- per config


def hardware_bound_ms(shape: Shape) -> tuple[float, float]:
    """(compute bound, memory bound) in ms on this machine (experiments/machine.py).

    Compute: every step multiplies [x_t, h_{t-1}] (in + H wide) by the 4H gate weights, at
    the measured peak. Memory: a W_hh larger than the last-level cache is streamed from DRAM
    once per step; one that fits in L2 or L3 counts 0 (L3 bandwidth is not measured).
    """
    seq, batch, inp, hid = shape
    flops = 2 * seq * batch * 4 * hid * (inp + hid)
    wh_bytes = 4 * hid * hid * 4
    last_level = max(cache_bytes(2), cache_bytes(3))
    mem = seq * wh_bytes / DRAM_BYTES_PER_S if wh_bytes > last_level else 0.0
    return flops / peak_flops() * 1e3, mem * 1e3


def run_config(name: str, args: argparse.Namespace, with_torch: bool) -> Result:
    """Tune (unless --replay), then measure everything for one config."""
    shape = config_shape(name)
    work_dir = Path(args.work_dir) / name
    res = Result(name, shape, str(work_dir))
    mod = config_module(name)
    if args.replay:
        log(f"{name}: replay from {work_dir} (no tuning)")
    else:
        res.tune_s = tune(name, mod, work_dir, args)

    db = open_database(work_dir)
    res.db_records, res.db_valid, res.db_best_ms = database_stats(db)
    if not res.db_valid:
        sys.exit(f"{name}: the database in {work_dir} holds no successful candidate")
    log(
        f"{name}: database has {res.db_records} records ({res.db_valid} valid), "
        f"best {res.db_best_ms:.4f} ms; compiling the best schedule"
    )
    sch = ms.tir_integration.compile_tir(db, mod, target())
    if sch is None:
        sys.exit(f"{name}: compile_tir found no record for this workload in {work_dir}")

    w = make_weights(shape)
    measure_scan_tir(mod, sch.mod["main"], w, res, args)
    measure_baselines(w, res, args, with_torch)
    log(f"{name}: done")
    return res


# ----------------------------------------------------------------------------- report


def fmt(x: float, digits: int = 3) -> str:
    """Numbers for the table; a dash for a path that did not run."""
    if math.isnan(x):
        return "-"
    return f"{x:.{digits}g}" if x < 1e-2 else f"{x:.{digits}f}"


def scan_err(r: Result) -> float:
    """Worst error of the scan-tir modules (tuned both ways, untuned)."""
    return max(v for k, v in r.errors.items() if k.startswith(("tuned", "untuned")))


def table(results: list[Result]) -> str:
    """The Markdown table: one row per config, medians of the raw numbers."""
    head = [
        "config (seq, batch, in, hidden)",
        "trials in DB (valid)",
        "DB best ms",
        "tuned ms, prepacked",
        "tuned ms, repack per call",
        "untuned ms",
        "PyTorch ms (2 thr / 1 thr)",
        "numpy ms",
        "Relax ms",
        "tuned prepacked / PyTorch best",
        "bound ms [1]",
        "max err [2]",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        torch_best = min(median(r.torch2_ms), median(r.torch1_ms))
        ratio = median(r.tuned_prepacked_ms) / torch_best
        compute, memory = hardware_bound_ms(r.shape)
        bound = f"{fmt(max(compute, memory))}" + (" (mem)" if memory > compute else "")
        relax = f"skipped ({r.relax_skipped})" if r.relax_skipped else fmt(median(r.relax_ms))
        row = [
            f"{r.config} {r.shape}",
            f"{r.db_records} ({r.db_valid})",
            fmt(r.db_best_ms),
            fmt(median(r.tuned_prepacked_ms)),
            fmt(median(r.tuned_repack_ms)),
            fmt(median(r.untuned_ms)),
            f"{fmt(median(r.torch2_ms))} / {fmt(median(r.torch1_ms))}",
            fmt(median(r.numpy_ms)),
            relax,
            "-" if math.isnan(ratio) else f"{ratio:.2f}",
            bound,
            f"{scan_err(r):.1e}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def footnotes(results: list[Result], args: argparse.Namespace) -> list[str]:
    """How each column was obtained, then per-config notes (prepack cost, errors, tuning)."""
    out = [
        f"[1] Hardware bound = max(FLOPs / peak, memory). FLOPs = 2*seq*batch*4H*(in + H), "
        f"peak = {peak_flops():.3g} FLOP/s (measured in this run: the best fp32 2048^3 "
        f"matmul of MKL, oneDNN and numpy on 2 threads). Memory = seq * 4H*H*4 B / "
        f"{DRAM_BYTES_PER_S:.3g} B/s (DRAM, FIELD_NOTES), counted only when W_hh (4H*H*4 B) "
        f"exceeds the {cache_bytes(3) / 2**20:g} MiB L3 "
        f"(L2: {cache_bytes(2) / 2**20:g} MiB in all); "
        "a W_hh held in L2 or L3 counts 0. '(mem)' marks rows where memory dominates.",
        "[2] Max abs error over hs and cs of every scan-tir module (tuned both ways, untuned) "
        f"against tvm.topi.testing.lstm_python; the run fails above --tol {args.tol:g}.",
        "Latency: medians; TVM modules via time_evaluator, numpy and PyTorch via a "
        "perf_counter loop (bench_convert's helpers). 'DB best' is the lowest mean run_secs "
        "in the tuning records (measured by MetaSchedule's runner on prepacked weights). "
        "'Prepacked': the weights are packed once by the function that Relax's "
        "SplitLayoutRewritePreproc splits off the tuned schedule, and the timed module is "
        "scan_tir.prepacked(tuned) (what the tuner timed). 'Repack per call': the "
        "tuned module as compiled, packing Wi/Wh at the start of every call.",
        "",
    ]
    for r in results:
        tuned = "replayed" if math.isnan(r.tune_s) else f"tuned {r.tune_s:.0f} s this run"
        parts = [tuned, f"database {r.work_dir}"]
        if r.prepack_once_ms:
            shapes = ", ".join(f"{n} -> {s}" for n, s in r.packed_shapes.items())
            parts.append(f"one-off prepack {fmt(median(r.prepack_once_ms))} ms ({shapes})")
        if not math.isnan(r.relax_compile_s):
            parts.append(f"Relax import+compile+load {r.relax_compile_s:.1f} s")
        parts += r.notes
        out.append(f"- {r.config}: " + "; ".join(parts) + ".")
        errs = ", ".join(f"{k} {v:.2e}" for k, v in r.errors.items())
        out.append(f"  Errors: {errs}.")
    return out


def json_safe(value: Any) -> Any:
    """NaN (a path that did not run) as null: strict JSON readers reject NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json(path: str, results: list[Result], cmd: str, args: argparse.Namespace) -> None:
    """Raw numbers (every repeat) for later analysis."""
    payload = {
        "command": cmd,
        "threads": thread_settings(),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "tvm_version": tvm.__version__,
        "target": TARGET_JSON,
        "bound_constants": {
            "peak_flops": peak_flops(),
            "l2_bytes": cache_bytes(2),
            "l3_bytes": cache_bytes(3),
            "dram_bytes_per_s": DRAM_BYTES_PER_S,
        },
        "args": {k: v for k, v in vars(args).items() if k != "json"},
        "results": [
            {**asdict(r), "bound_ms": dict(zip(("compute", "memory"), hardware_bound_ms(r.shape)))}
            for r in results
        ],
    }
    with open(path, "w") as fh:
        json.dump(json_safe(payload), fh, indent=2, allow_nan=False)
    log(f"wrote {path}")


# ----------------------------------------------------------------------------- driver


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--configs",
        default="A,B,C,D",
        help="comma-separated subset of A,B,C,D, each with optional suffixes -merged "
        "(merge_updates=True), -fast (scan_tir.fast_math) and -instep (copies_in_step=True), "
        "e.g. D-fast-instep",
    )
    p.add_argument("--trials", type=int, default=64, help="tuning trials to add per config")
    p.add_argument(
        "--work-dir",
        default=str(DEFAULT_WORK_ROOT),
        help="root of the tuning databases; config X uses <work-dir>/X/ (default: "
        "experiments/results)",
    )
    p.add_argument("--replay", action="store_true", help="measure from the saved databases")
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
        help=f"repeats for a path whose first call takes > {SLOW_CALL_S:g} s",
    )
    p.add_argument("--no-relax", action="store_true", help="skip TVM's Relax path everywhere")
    p.add_argument(
        "--relax-large",
        action="store_true",
        help="also run the Relax path for C and D (minutes of compile, seconds per call)",
    )
    p.add_argument("--tol", type=float, default=1e-4, help="max abs error allowed for scan-tir")
    p.add_argument("--json", metavar="PATH", help="write the raw numbers here")
    args = p.parse_args(argv)
    args.config_list = [c.strip().upper() for c in args.configs.split(",") if c.strip()]
    bad = [c for c in args.config_list if config_base(c) not in CONFIGS]
    if bad:
        p.error(f"unknown config(s) {bad}; choose from {sorted(CONFIGS)} (+ {VARIANTS})")
    if min(args.trials, args.latency_repeats, args.slow_repeats) < 1:
        p.error("--trials and repeat counts must be >= 1")
    return args


def report(results: list[Result], args: argparse.Namespace) -> int:
    """Print command, threads, table and notes; return the exit status (1 on wrong numerics)."""
    cmd = " ".join(shlex.quote(a) for a in ["python", *sys.argv])
    print(f"Command: `{cmd}`")
    print(
        "Threads: "
        + ", ".join(f"{k}={v}" for k, v in thread_settings().items())
        + "; PyTorch set to 2 then 1 thread per column"
    )
    print(
        f"Target: {json.dumps(TARGET_JSON)}. Latency repeats {args.latency_repeats} "
        f"(slow paths {args.slow_repeats}). Trials this run: "
        f"{'none (--replay)' if args.replay else args.trials} (builder timeout "
        f"{args.build_timeout:g} s, scan_tir.tuning.build_candidate: no tensor_intrin import)."
    )
    print(
        "Load average (1, 5, 15 min) at start: "
        + ", ".join(f"{x:.2f}" for x in args.load_at_start)
        + " (anything else running on the 2 cores inflates the latencies below)"
    )
    print()
    print(table(results))
    print()
    print("\n".join(footnotes(results, args)))
    if args.json:
        write_json(args.json, results, cmd, args)
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


def main(argv: list[str]) -> int:
    """Tune and measure every selected config, then report."""
    args = parse_args(argv)
    args.load_at_start = os.getloadavg()  # other users of the 2 cores skew every number
    if os.environ.get("TVM_NUM_THREADS") is None:
        # Read when TVM's thread pool starts (first parallel call) and by tuning workers.
        os.environ["TVM_NUM_THREADS"] = "2"
        log("TVM_NUM_THREADS was unset; set to 2")
    with_torch = torch_available()
    if not with_torch:
        log("torch is not importable: skipping the PyTorch columns and the Relax path")
    results = []
    for name in args.config_list:
        log(f"{name}: config {config_shape(name)} (seq, batch, in, hidden)")
        results.append(run_config(name, args, with_torch))
    status = report(results, args)
    log("done" if status == 0 else "done, with FAILED numerics")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
