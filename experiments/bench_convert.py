"""Benchmark "convert and build" of ``topi.nn.lstm`` and its untuned latency.

One process measures, side by side, per LSTM config (seq, batch, in, hidden):

* scan-tir: ``scan_tir.create_prim_func`` (convert) and ``tvm.compile`` (build), built afresh
  each repeat; the module's untuned latency; its error against ``lstm_python`` and numpy.
* TVM's Relax path, the only other way TVM 0.27 compiles an LSTM: ``torch.nn.LSTM`` ->
  ``torch.export`` -> ``relax.frontend.torch.from_exported_program`` -> ``tvm.compile`` with the
  default pipeline; its compile time, VM latency and error against PyTorch.
* Baselines for latency: a plain numpy LSTM (input GEMM hoisted) and PyTorch eager ``nn.LSTM``
  at 2 and 1 threads.

All paths use the same float32 weights (drawn like PyTorch's init, gate layout IFGO, which is
both topi's default and PyTorch's), so every output can be compared with every other.

Timing: compile times are wall times (``time.perf_counter``), median over repeats. Each path's
compile time also counts its "load" (the first function lookup, or the Relax VM's construction),
because TVM's llvm module generates machine code only then; for the unrolled Relax LSTM that
step takes longer than ``tvm.compile`` itself. Latency of
TVM modules (scan-tir and the Relax VM) comes from ``time_evaluator``; numpy and PyTorch from a
``perf_counter`` loop of the same shape: each repeat times ``number`` back-to-back calls (number
chosen so that a repeat lasts at least about 10 ms), and the median over repeats is reported.
One-time costs of the process (LLVM start-up, dynamo import) are paid in an untimed warm-up.

Run it as the Makefile does: ``TVM_NUM_THREADS=2 python experiments/bench_convert.py``.
Exits non-zero when scan-tir's output is off by more than ``--tol`` (default 1e-4).
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
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import te
from tvm.target.codegen import llvm_get_system_cpu
from tvm.topi.testing import lstm_python

import scan_tir
from scan_tir import workloads

CONFIGS: dict[str, tuple[int, int, int, int]] = {
    "A": (80, 1, 512, 256),
    "B": (256, 1, 16, 16),
}
# This machine's CPU (znver5 here): llvm's default "generic" CPU is SSE2 only (notes.md, section 3).
TARGET_JSON = {"kind": "llvm", "mcpu": llvm_get_system_cpu(), "num-cores": 2}
MIN_REPEAT_S = 0.01
T0 = time.perf_counter()


@dataclass
class Weights:
    """One LSTM's inputs, in topi's / PyTorch's layout (gates IFGO), all float32."""

    x: np.ndarray  # (seq, batch, in)
    wi: np.ndarray  # (4H, in)
    wh: np.ndarray  # (4H, H)
    bi: np.ndarray  # (4H,)
    bh: np.ndarray  # (4H,)


@dataclass
class Result:
    """Raw numbers of one config; medians are derived from the lists when printing."""

    config: str
    shape: tuple[int, int, int, int]
    scan_convert_s: list[float] = field(default_factory=list)
    scan_build_s: list[float] = field(default_factory=list)
    scan_load_s: list[float] = field(default_factory=list)
    scan_ms: list[float] = field(default_factory=list)
    numpy_ms: list[float] = field(default_factory=list)
    torch2_ms: list[float] = field(default_factory=list)
    torch1_ms: list[float] = field(default_factory=list)
    relax_export_s: list[float] = field(default_factory=list)
    relax_import_s: list[float] = field(default_factory=list)
    relax_compile_s: list[float] = field(default_factory=list)
    relax_load_s: list[float] = field(default_factory=list)
    relax_ms: list[float] = field(default_factory=list)
    errors: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def log(msg: str) -> None:
    """Progress goes to stderr so that stdout holds only the report, while compiles run."""
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def median(xs: list[float]) -> float:
    """Median, or NaN for a path that was skipped (keeps the table's shape fixed)."""
    return statistics.median(xs) if xs else math.nan


def target() -> tvm.target.Target:
    """A fresh target object each time, so no build reuses state from a previous one."""
    return tvm.target.Target(TARGET_JSON)


def make_weights(shape: tuple[int, int, int, int], seed: int = 0) -> Weights:
    """Draw weights as ``nn.LSTM`` does (U(-1/sqrt(H), 1/sqrt(H))) without needing torch."""
    seq, batch, inp, hid = shape
    rng = np.random.default_rng(seed)
    k = 1.0 / math.sqrt(hid)

    def u(*dims: int) -> np.ndarray:
        return rng.uniform(-k, k, size=dims).astype("float32")

    x = rng.standard_normal((seq, batch, inp)).astype("float32")
    return Weights(x, u(4 * hid, inp), u(4 * hid, hid), u(4 * hid), u(4 * hid))


# ----------------------------------------------------------------------------- timing helpers


def calibrate_number(fn: Callable[[], Any]) -> int:
    """Calls per repeat so one repeat lasts >= MIN_REPEAT_S: timer noise is then negligible."""
    fn()  # warm-up: first-call costs (allocation, JIT, thread pool start) are not latency
    t = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t, 1e-7)
    return max(1, math.ceil(MIN_REPEAT_S / once))


def loop_latency_ms(fn: Callable[[], Any], repeats: int) -> list[float]:
    """Per-call ms of each repeat, measured with a perf_counter loop (numpy and PyTorch)."""
    number = calibrate_number(fn)
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t) / number * 1e3)
    return out


def evaluator_latency_ms(mod: Any, args: list[Any], repeats: int) -> list[float]:
    """Per-call ms of each repeat from TVM's ``time_evaluator`` (no Python call overhead)."""
    number = calibrate_number(lambda: mod["main"](*args))
    res = mod.time_evaluator("main", tvm.cpu(), number=number, repeat=repeats)(*args)
    return [r * 1e3 for r in res.results]


def max_err(a: np.ndarray, b: np.ndarray) -> float:
    """Max absolute difference; shapes must agree exactly (no silent broadcasting)."""
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a.astype("float64") - b.astype("float64"))))


# ----------------------------------------------------------------------------- scan-tir


def lstm_te(shape: tuple[int, int, int, int]) -> list[te.Tensor]:
    """The TE graph of ``topi.nn.lstm`` with biases: inputs then outputs (hs, cs)."""
    seq, batch, inp, hid = shape
    return workloads.get("lstm", seq=seq, batch=batch, input=inp, hidden=hid).tensors()


def build_scan_tir(
    shape: tuple[int, int, int, int],
) -> tuple[float, float, float, tvm.runtime.Module]:
    """Convert, build and load once from a fresh TE graph; returns (convert s, build s, load s,
    module).

    Building the TE graph itself is not timed: it is the user's model, the counterpart of
    ``torch.export`` on the Relax side. "Load" is the first ``mod["main"]`` lookup: TVM's llvm
    module defers machine-code generation to it, so without it the build time would be short
    by as much again; it is the counterpart of the Relax VM's initialisation.
    """
    ops = lstm_te(shape)
    t0 = time.perf_counter()
    func = scan_tir.create_prim_func(ops)
    t1 = time.perf_counter()
    mod = tvm.compile(tvm.IRModule({"main": func}), target=target()).jit()
    t2 = time.perf_counter()
    mod["main"]
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, mod


def run_scan_tir(mod: tvm.runtime.Module, w: Weights) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """Run once; returns the argument list (for timing) and the outputs hs, cs."""
    seq, batch, _ = w.x.shape
    hid = w.wh.shape[1]
    ins = [tvm.runtime.tensor(a) for a in (w.x, w.wi, w.wh, w.bi, w.bh)]
    outs = [tvm.runtime.tensor(np.zeros((seq, batch, hid), "float32")) for _ in range(2)]
    mod["main"](*ins, *outs)
    return ins + outs, outs[0].numpy(), outs[1].numpy()


# ----------------------------------------------------------------------------- numpy


def numpy_lstm(w: Weights) -> tuple[np.ndarray, np.ndarray]:
    """The obvious numpy LSTM: one input GEMM for all steps, then one small GEMM per step."""
    seq, batch, inp = w.x.shape
    hid = w.wh.shape[1]
    xg = (w.x.reshape(seq * batch, inp) @ w.wi.T + (w.bi + w.bh)).reshape(seq, batch, 4 * hid)
    wht = np.ascontiguousarray(w.wh.T)
    hs = np.empty((seq, batch, hid), "float32")
    cs = np.empty((seq, batch, hid), "float32")
    h = np.zeros((batch, hid), "float32")
    c = np.zeros((batch, hid), "float32")
    for t in range(seq):
        g = xg[t] + h @ wht
        i = 1.0 / (1.0 + np.exp(-g[:, :hid]))
        f = 1.0 / (1.0 + np.exp(-g[:, hid : 2 * hid]))
        gg = np.tanh(g[:, 2 * hid : 3 * hid])
        o = 1.0 / (1.0 + np.exp(-g[:, 3 * hid :]))
        c = f * c + i * gg
        h = o * np.tanh(c)
        hs[t] = h
        cs[t] = c
    return hs, cs


# ----------------------------------------------------------------------------- PyTorch / Relax


def torch_lstm(w: Weights) -> Any:
    """An eval-mode ``nn.LSTM`` holding our weights (loaded unchanged: same gate layout)."""
    import torch

    inp, hid = w.wi.shape[1], w.wh.shape[1]
    m = torch.nn.LSTM(inp, hid).eval()
    with torch.no_grad():
        for name, a in (("weight_ih_l0", w.wi), ("weight_hh_l0", w.wh)):
            getattr(m, name).copy_(torch.from_numpy(a))
        for name, a in (("bias_ih_l0", w.bi), ("bias_hh_l0", w.bh)):
            getattr(m, name).copy_(torch.from_numpy(a))
    return m


def torch_latency(w: Weights, repeats: int, res: Result) -> np.ndarray:
    """PyTorch eager latency at 2 and 1 threads; returns its output sequence for checks."""
    import torch

    m = torch_lstm(w)
    x = torch.from_numpy(w.x)
    old = torch.get_num_threads()
    try:
        with torch.no_grad():
            out = m(x)[0].numpy()
            for n, dest in ((2, res.torch2_ms), (1, res.torch1_ms)):
                torch.set_num_threads(n)
                dest.extend(loop_latency_ms(lambda: m(x), repeats))
    finally:
        torch.set_num_threads(old)
    return out


def relax_import(w: Weights) -> tuple[float, float, tvm.IRModule]:
    """torch.export then the Relax frontend; returns (export s, import s, module).

    The frontend bakes the weights in as constants, so ``main`` takes only the input sequence.
    """
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    m = torch_lstm(w)
    x = torch.from_numpy(w.x)
    with warnings.catch_warnings():
        # torch.export warns that nn.LSTM's _flat_weights are plain attributes; harmless here.
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        ep = torch.export.export(m, (x,))
        t1 = time.perf_counter()
        mod = from_exported_program(ep)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1, mod


def relax_build(mod: tvm.IRModule) -> tuple[float, float, Any]:
    """``tvm.compile`` with the default Relax pipeline, then the VM; returns (compile s, load s,
    VM).

    The VM's construction is timed as "load": its initialisation is where the llvm module's
    functions are first looked up (machine code generated), seconds for the unrolled LSTM.
    """
    from tvm import relax

    t0 = time.perf_counter()
    ex = tvm.compile(mod, target=target())
    t1 = time.perf_counter()
    vm = relax.VirtualMachine(ex, tvm.cpu())
    return t1 - t0, time.perf_counter() - t1, vm


def relax_run(vm: Any, w: Weights, repeats: int, res: Result) -> np.ndarray:
    """Run on the VM; ``main(x)`` returns (output (seq, batch, H), h_n (1, batch, H), c_n)."""
    x = tvm.runtime.tensor(w.x)
    out = vm["main"](x)
    res.relax_ms.extend(evaluator_latency_ms(vm, [x], repeats))
    return out[0].numpy()


# ----------------------------------------------------------------------------- driver


def warm_up(with_relax: bool) -> None:
    """Pay one-time process costs (LLVM init, dynamo import) outside every timed region.

    Without this the first config's first repeat would carry them, and repeats=1 would report
    them as compile time of whichever path happened to run first.
    """
    log("warm-up: tiny scan-tir build" + (" and tiny Relax import/compile" if with_relax else ""))
    tiny = (2, 1, 2, 2)
    build_scan_tir(tiny)
    if with_relax:
        relax_build(relax_import(make_weights(tiny))[2])


def bench_config(name: str, args: argparse.Namespace, with_torch: bool) -> Result:
    """All measurements of one config, in a fixed order: scan-tir, numpy, PyTorch, Relax."""
    shape = CONFIGS[name]
    res = Result(name, shape)
    w = make_weights(shape)
    ref_hs, ref_cs = lstm_python(w.x, w.wi, w.wh, w.bi, w.bh)

    mod = None
    for r in range(args.repeats):
        log(f"{name}: scan-tir convert+build, repeat {r + 1}/{args.repeats}")
        conv, build, load, mod = build_scan_tir(shape)
        res.scan_convert_s.append(conv)
        res.scan_build_s.append(build)
        res.scan_load_s.append(load)
    assert mod is not None
    log(f"{name}: scan-tir run and latency ({args.latency_repeats} repeats)")
    run_args, hs, cs = run_scan_tir(mod, w)
    res.scan_ms = evaluator_latency_ms(mod, run_args, args.latency_repeats)

    log(f"{name}: numpy latency")
    np_hs, np_cs = numpy_lstm(w)
    res.numpy_ms = loop_latency_ms(lambda: numpy_lstm(w), args.latency_repeats)
    res.errors["scan-tir vs lstm_python"] = max(max_err(hs, ref_hs), max_err(cs, ref_cs))
    res.errors["scan-tir vs numpy"] = max(max_err(hs, np_hs), max_err(cs, np_cs))
    res.errors["numpy vs lstm_python"] = max(max_err(np_hs, ref_hs), max_err(np_cs, ref_cs))

    t_hs = None
    if with_torch:
        log(f"{name}: PyTorch eager latency (2 and 1 threads)")
        t_hs = torch_latency(w, args.latency_repeats, res)
        res.errors["PyTorch vs lstm_python"] = max_err(t_hs, ref_hs)

    if not args.no_relax:
        vm = None
        for r in range(args.relax_repeats):
            log(f"{name}: Relax export+import, repeat {r + 1}/{args.relax_repeats}")
            exp_s, imp_s, rmod = relax_import(w)
            log(f"{name}: Relax compile + VM load, repeat {r + 1}/{args.relax_repeats}")
            comp_s, load_s, vm = relax_build(rmod)
            res.relax_export_s.append(exp_s)
            res.relax_import_s.append(imp_s)
            res.relax_compile_s.append(comp_s)
            res.relax_load_s.append(load_s)
        assert vm is not None
        log(f"{name}: Relax VM run and latency ({args.latency_repeats} repeats)")
        r_hs = relax_run(vm, w, args.latency_repeats, res)
        if t_hs is not None:
            res.errors["Relax vs PyTorch"] = max_err(r_hs, t_hs)
        res.errors["Relax vs lstm_python"] = max_err(r_hs, ref_hs)
    return res


def fmt(x: float, digits: int = 3) -> str:
    """Numbers for the table; a dash for a path that did not run."""
    return "-" if math.isnan(x) else f"{x:.{digits}g}" if x < 1e-3 else f"{x:.{digits}f}"


def table(results: list[Result]) -> str:
    """The Markdown table: one row per config, medians of the raw numbers."""
    head = [
        "config (seq, batch, in, hidden)",
        "scan-tir convert s",
        "scan-tir build s",
        "scan-tir load s",
        "scan-tir total s",
        "torch.export s",
        "Relax import s",
        "Relax compile s",
        "Relax VM load s",
        "Relax total s",
        "compile speedup (Relax/scan-tir)",
        "scan-tir untuned ms",
        "numpy ms",
        "PyTorch eager ms (2 thr / 1 thr)",
        "Relax ms",
        "scan-tir max err",
        "Relax max err",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        total = median([sum(x) for x in zip(r.scan_convert_s, r.scan_build_s, r.scan_load_s)])
        relax_total = median(
            [sum(x) for x in zip(r.relax_import_s, r.relax_compile_s, r.relax_load_s)]
        )
        scan_err = max(r.errors["scan-tir vs lstm_python"], r.errors["scan-tir vs numpy"])
        row = [
            f"{r.config} {r.shape}",
            fmt(median(r.scan_convert_s)),
            fmt(median(r.scan_build_s)),
            fmt(median(r.scan_load_s)),
            fmt(total),
            fmt(median(r.relax_export_s), 2),
            fmt(median(r.relax_import_s), 2),
            fmt(median(r.relax_compile_s), 2),
            fmt(median(r.relax_load_s), 2),
            fmt(relax_total, 2),
            "-" if math.isnan(relax_total) else f"{relax_total / total:.0f}x",
            fmt(median(r.scan_ms)),
            fmt(median(r.numpy_ms)),
            f"{fmt(median(r.torch2_ms))} / {fmt(median(r.torch1_ms))}",
            fmt(median(r.relax_ms)),
            f"{scan_err:.1e}",
            f"{r.errors['Relax vs PyTorch']:.1e}" if "Relax vs PyTorch" in r.errors else "-",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def thread_settings() -> dict[str, str]:
    """Environment that decides thread counts (and BLAS kernels) of the measured libraries."""
    keys = ["TVM_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE"]
    return {k: os.environ.get(k, "(unset)") for k in keys}


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command line; defaults are what the Makefile's ``main`` target runs."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="A,B", help="comma-separated subset of: A,B")
    p.add_argument("--repeats", type=int, default=5, help="scan-tir convert+build repeats")
    p.add_argument(
        "--relax-repeats",
        type=int,
        default=None,
        help="Relax export+import+compile+load repeats; each takes many seconds, so the "
        "default is min(--repeats, 3)",
    )
    p.add_argument("--latency-repeats", type=int, default=50, help="repeats of each latency")
    p.add_argument("--no-relax", action="store_true", help="skip the Relax path (no torch)")
    p.add_argument("--tol", type=float, default=1e-4, help="max abs error allowed for scan-tir")
    p.add_argument("--json", metavar="PATH", help="write the raw numbers here")
    args = p.parse_args(argv)
    if args.relax_repeats is None:
        args.relax_repeats = min(args.repeats, 3)
    args.config_list = [c.strip().upper() for c in args.configs.split(",") if c.strip()]
    bad = [c for c in args.config_list if c not in CONFIGS]
    if bad:
        p.error(f"unknown config(s) {bad}; choose from {sorted(CONFIGS)}")
    if min(args.repeats, args.relax_repeats, args.latency_repeats) < 1:
        p.error("repeat counts must be >= 1")
    return args


def torch_available() -> bool:
    """PyTorch is an optional extra; without it the eager columns (and Relax) are skipped."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str]) -> int:
    """Run every selected config, print the report, and fail on a wrong scan-tir result."""
    args = parse_args(argv)
    with_torch = torch_available()
    if not with_torch and not args.no_relax:
        log("torch is not importable: skipping the Relax path and the PyTorch columns")
        args.no_relax = True
    if os.environ.get("TVM_NUM_THREADS") is None:
        log("warning: TVM_NUM_THREADS is unset; the Makefile runs with TVM_NUM_THREADS=2")

    warm_up(not args.no_relax)
    results = [bench_config(name, args, with_torch) for name in args.config_list]

    cmd = " ".join(shlex.quote(a) for a in ["python", *sys.argv])
    threads = thread_settings()
    print(f"Command: `{cmd}`")
    print("Threads: " + ", ".join(f"{k}={v}" for k, v in threads.items()))
    print(
        f"Repeats: scan-tir build {args.repeats}, "
        f"Relax export+import+compile+load {args.relax_repeats}, "
        f"latency {args.latency_repeats} (medians). Target: {json.dumps(TARGET_JSON)}."
    )
    print()
    print(table(results))
    print()
    print(
        "Totals are medians of per-repeat sums. Compile speedup = Relax total (import + "
        "compile + VM load) / scan-tir total (convert + build + load); torch.export is not "
        'included (its counterpart, building the TE graph, is not timed either). "Load" is '
        "the first function lookup / VM initialisation, where TVM's llvm module generates "
        "machine code. Latency: TVM modules via time_evaluator, numpy and PyTorch via a "
        "perf_counter loop; both report the median per-call time over repeats."
    )
    print()
    print("Max abs errors (outputs hs and cs where both exist; Relax and PyTorch give hs only):")
    for r in results:
        errs = ", ".join(f"{k} {v:.2e}" for k, v in r.errors.items())
        print(f"- {r.config}: {errs}")

    failed = [
        (r.config, k, v)
        for r in results
        for k, v in r.errors.items()
        if k.startswith("scan-tir") and not v <= args.tol
    ]
    warned = [
        (r.config, k, v)
        for r in results
        for k, v in r.errors.items()
        if not k.startswith("scan-tir") and not v <= args.tol
    ]
    for c, k, v in warned:
        print(f"WARNING: {c}: {k} max abs err {v:.2e} > {args.tol:g} (baseline, not scan-tir)")

    if args.json:
        payload = {
            "command": cmd,
            "threads": threads,
            "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
            "tvm_version": tvm.__version__,
            "target": TARGET_JSON,
            "args": {k: v for k, v in vars(args).items() if k != "json"},
            "results": [asdict(r) for r in results],
        }
        with open(args.json, "w") as fh:
            json.dump(payload, fh, indent=2)
        log(f"wrote {args.json}")

    for c, k, v in failed:
        print(f"FAIL: {c}: {k} max abs err {v:.2e} > {args.tol:g}", file=sys.stderr)
    log("done")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
