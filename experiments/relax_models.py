"""Benchmark two real-shaped recurrent models through scan_tir.relax (issue 15, item 7).

Models (``bench/models.py``, built in code, seeded random weights, eval mode, time-major):
``lm1``/``lm16``, a word-level language model (Embedding(10000, 512) -> 2-layer
nn.LSTM(512, 512) -> Linear(512, 10000), seq 64, batch 1 / 16), and ``tagger``, a
bidirectional 2-layer nn.GRU(300, 256) -> Linear(512, 20) on embedded input (seq 128,
batch 1). Per model, in one process, side by side:

* PyTorch eager at 2 and 1 threads; ``torch.compile`` (``allow_rnn``) at the faster of
  the two, its first call timed as its compile (cold: caches off), in a child process.
* onnxruntime at ``intra_op_num_threads`` 2 and 1 on the model exported by
  ``torch.onnx.export(..., dynamo=False)`` (ONNX LSTM/GRU nodes, run by onnxruntime's own
  kernels); session creation timed as its compile.
* TVM's own path: ``tvm.relax.frontend.torch.from_exported_program`` (default
  decomposition: the recurrences unrolled into per-step cell ops) and ``tvm.compile``, in
  a child process.
* scan-tir untuned: ``scan_tir.relax.from_exported_program`` and ``scan_tir.relax.from_onnx``,
  each then ``tvm.compile`` + ``relax.VirtualMachine`` (``bench.relax_baseline.relax_build``),
  compiled ``--compile-repeats`` times (median).
* scan-tir tuned: ``scan_tir.relax.tune`` (resumable, ``--trials`` records per model in
  ``--work-dir``/<model>), then ``scan_tir.relax.build`` (weights prepacked at build); the
  tuning wall time in its own column. Skipped with ``--trials 0``.

Compile = import + build + VM load, without ``torch.export`` (its own column) and without
tuning. Latency: median over ``--repeats`` (VMs by ``time_evaluator``, PyTorch and
onnxruntime by a ``perf_counter`` loop; a VM whose one call takes over a second, single
calls, ``--slow-repeats``). Every output is checked against PyTorch eager
(max abs error); "vs fastest" is a path's latency over the fastest of eager, torch.compile
and onnxruntime. Beside them, the model's compute bound (``bench.bound.model_bound``:
every FLOP of its products at the peak GEMM rate the run measures). One-time process
costs are paid in an untimed warm-up on a tiny LSTM.
Both compilers that can take minutes (torch.compile, TVM's unrolled path) run in child
processes (same seed, their own warm-up), each limited to ``--timeout`` seconds: "timed
out" past it.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/relax_models.py --trials 512``
(``--smoke``: the same architectures at tiny sizes). Exits non-zero when a scan-tir path
fails or is off from PyTorch eager by more than ``--tol``.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tvm
from bench.bound import ModelBound, model_bound, model_footnote
from bench.build import target
from bench.check import max_err
from bench.cli import name_list
from bench.frontends import brief, import_onnx, import_scan, import_tvm, torch_export, vm_outputs
from bench.limited import call_limited
from bench.models import MODELS, ModelCase
from bench.onnx_baseline import onnx_export, ort_latency
from bench.relax_baseline import relax_build
from bench.report import fmt, header, markdown_table, start_run, write_json
from bench.timing import median, one_call_s, tvm_latency_ms
from bench.torch_module import compiled_run, eager_ms

from scan_tir.tune import log

#: Paths in table order: key -> label. ``BASELINES`` are what "vs fastest" divides by;
#: ``SCAN`` are checked against ``--tol``.
PATHS = {
    "eager2": "PyTorch eager, 2 threads",
    "eager1": "PyTorch eager, 1 thread",
    "compile": "torch.compile (allow_rnn)",
    "ort2": "onnxruntime, 2 threads",
    "ort1": "onnxruntime, 1 thread",
    "tvm": "TVM from_exported_program (unrolled)",
    "scan": "scan-tir from_exported_program, untuned",
    "scan_onnx": "scan-tir from_onnx, untuned",
    "tuned": "scan-tir from_exported_program, tuned",
    "tuned_repack": "scan-tir tuned, weights repacked at every call",
}
BASELINES = ("eager2", "eager1", "compile", "ort2", "ort1")
SCAN = ("scan", "scan_onnx", "tuned", "tuned_repack")

#: The issue's targets: tuned latency over the fastest baseline, compile seconds.
TARGET_RATIO = 0.7
TARGET_COMPILE_S = 2.0


@dataclass
class PathResult:
    """One path of one model: raw numbers of every repeat."""

    export_s: float = math.nan  # torch.export or torch.onnx.export, not in compile
    compile_s: list[float] = field(default_factory=list)  # import + build + load
    tune_s: float = math.nan
    run_ms: list[float] = field(default_factory=list)
    err: float = math.nan  # max abs vs PyTorch eager
    note: str = ""  # why it did not run, or failed

    def failed(self, tol: float) -> bool:
        """No latency, or an output off by more than ``tol``."""
        return not self.run_ms or not self.err <= tol


@dataclass
class ModelResult:
    """Everything measured for one model."""

    name: str
    description: str
    paths: dict[str, PathResult] = field(default_factory=lambda: {k: PathResult() for k in PATHS})
    bound: ModelBound | None = None

    def fastest(self) -> tuple[str, float]:
        """The fastest baseline that ran: (key, ms)."""
        ran = [(median(self.paths[k].run_ms), k) for k in BASELINES if self.paths[k].run_ms]
        ms, key = min(ran, default=(math.nan, ""))
        return key, ms


@dataclass
class ChildRun:
    """A path measured in a child process (TVM's unrolled path, torch.compile)."""

    export_s: float
    compile_s: float
    output: np.ndarray
    run_ms: list[float]


def export_case(case: ModelCase) -> tuple[float, Any]:
    """``torch.export`` of the model on its input: (seconds, program)."""
    return torch_export(case.module, (case.input,))


def vm_output(vm: Any, x: tvm.runtime.Tensor) -> np.ndarray:
    """The model's one output (the importers return it alone or in a 1-tuple)."""
    return vm_outputs(vm, x)[0]


def compiled(importer: Callable[[], tvm.IRModule]) -> tuple[float, tvm.IRModule, Any]:
    """Import and build; returns (import + compile + VM load seconds, module, VM)."""
    t = time.perf_counter()
    mod = importer()
    import_s = time.perf_counter() - t
    compile_s, load_s, vm = relax_build(mod)
    return import_s + compile_s + load_s, mod, vm


def vm_latency_ms(vm: Any, x: tvm.runtime.Tensor, repeats: int, slow_repeats: int) -> list[float]:
    """Per-call ms of each repeat of a VM already called once: ``repeats`` calibrated
    repeats, or ``slow_repeats`` single calls where one call takes over a second (the
    untuned kernels of the large models)."""
    return tvm_latency_ms(vm, [x], one_call_s(vm, [x]), repeats, slow_repeats)


def input_tensor(case: ModelCase) -> tvm.runtime.Tensor:
    """The model's input as a TVM tensor."""
    return tvm.runtime.tensor(case.input.numpy())


def unrolled(name: str, smoke: bool, repeats: int, slow_repeats: int) -> ChildRun:
    """TVM's own path for model ``name`` (in the child: rebuilt from the same seed), after
    an untimed warm-up of the same path on a tiny LSTM."""
    import torch

    tiny = torch.nn.LSTM(2, 2).eval()
    relax_build(import_tvm(torch_export(tiny, (torch.zeros(2, 1, 2),))[1]))
    case = MODELS[name](smoke)
    export_s, ep = export_case(case)
    compile_s, _, vm = compiled(lambda: import_tvm(ep))
    x = input_tensor(case)
    out = vm_output(vm, x)
    return ChildRun(export_s, compile_s, out, vm_latency_ms(vm, x, repeats, slow_repeats))


def torch_compiled(name: str, smoke: bool, threads: int, repeats: int) -> ChildRun:
    """``torch.compile`` of model ``name`` at ``threads`` threads (in the child, as
    :func:`unrolled`), after an untimed warm-up compile of a tiny LSTM."""
    import torch

    tiny = torch.nn.LSTM(2, 2).eval()
    compiled_run(lambda x: tiny(x)[0], [torch.zeros(2, 1, 2)], threads, 1)
    case = MODELS[name](smoke)
    run = compiled_run(case.module, [case.input], threads, repeats)
    return ChildRun(math.nan, run.compile_s, run.output, run.run_ms)


def warm_up() -> None:
    """Pay one-time costs (LLVM, TorchScript, the ONNX importer, onnxruntime) outside the
    timed regions (the child processes warm up on their own)."""
    import torch

    log("warm-up: tiny LSTM through every in-process path")
    model = torch.nn.LSTM(2, 2).eval()
    x = torch.zeros(2, 1, 2)
    compiled(lambda: import_scan(torch_export(model, (x,))[1]))
    _, proto = onnx_export(model, (x,), ["x"])
    compiled(lambda: import_onnx(proto))
    ort_latency(proto, {"x": x.numpy()}, 1, 1)


def in_child(
    p: PathResult, fn: Callable[..., ChildRun], args: tuple, timeout: float, want: np.ndarray
) -> None:
    """``fn(*args)`` in a child process limited to ``timeout`` seconds, into ``p``."""
    try:
        run = call_limited(fn, args, timeout)
    except TimeoutError:
        p.note = f"timed out: no result after {timeout:g} s (compile + run)"
        return
    except Exception as e:
        p.note = "failed: " + brief(e)
        return
    p.export_s = run.export_s
    p.compile_s = [run.compile_s]
    p.run_ms = run.run_ms
    p.err = max_err(run.output, want)


def measure_baselines(
    case: ModelCase, res: ModelResult, want: np.ndarray, args: argparse.Namespace
) -> Any:
    """PyTorch eager, torch.compile (in a child process), onnxruntime; returns the ONNX
    model (None if the export failed)."""
    p = res.paths
    repeats = args.repeats
    for n, key in ((2, "eager2"), (1, "eager1")):
        log(f"{res.name}: PyTorch eager, {n} thread(s)")
        p[key].run_ms = eager_ms(case.module, [case.input], n, repeats)
        p[key].err = 0.0
    threads = 2 if median(p["eager2"].run_ms) <= median(p["eager1"].run_ms) else 1
    log(f"{res.name}: torch.compile at {threads} thread(s) (child, limit {args.timeout:g} s)")
    in_child(
        p["compile"], torch_compiled, (res.name, args.smoke, threads, repeats), args.timeout, want
    )
    p["compile"].note = p["compile"].note or f"{threads} thread(s)"
    try:
        export_s, proto = onnx_export(case.module, (case.input,), ["input"])
    except Exception as e:
        for key in ("ort2", "ort1", "scan_onnx"):
            p[key].note = "torch.onnx.export failed: " + brief(e)
        return None
    for n, key in ((2, "ort2"), (1, "ort1")):
        log(f"{res.name}: onnxruntime, {n} thread(s)")
        p[key].export_s = export_s
        try:
            run = ort_latency(proto, {"input": case.input.numpy()}, n, repeats)
        except Exception as e:
            p[key].note = "failed: " + brief(e)
            continue
        p[key].compile_s = [run.session_s]
        p[key].run_ms = run.run_ms
        p[key].err = max_err(run.outputs[0], want)
    p["scan_onnx"].export_s = export_s
    return proto


def measure_vm(
    p: PathResult, vm: Any, case: ModelCase, want: np.ndarray, args: argparse.Namespace
) -> None:
    """Check a VM's output, then time it."""
    x = input_tensor(case)
    p.err = max_err(vm_output(vm, x), want)
    p.run_ms = vm_latency_ms(vm, x, args.repeats, args.slow_repeats)


def measure_scan(
    case: ModelCase, res: ModelResult, want: np.ndarray, proto: Any, args: argparse.Namespace
) -> tvm.IRModule | None:
    """scan-tir untuned from PyTorch and from ONNX, each compiled ``args.compile_repeats``
    times (a fresh ``torch.export`` before each PyTorch import, timed apart); returns the
    last module imported from PyTorch (what is tuned), None if that failed."""
    p, q = res.paths["scan"], res.paths["scan_onnx"]
    mod, vm, onnx_vm = None, None, None
    export_s = []
    for r in range(args.compile_repeats):
        log(f"{res.name}: scan-tir compile {r + 1}/{args.compile_repeats}")
        try:
            seconds, ep = export_case(case)
            export_s.append(seconds)
            seconds, mod, vm = compiled(lambda ep=ep: import_scan(ep))
            p.compile_s.append(seconds)
        except Exception as e:
            p.note = "failed: " + brief(e)
            mod = vm = None
            break
    p.export_s = median(export_s)
    for r in range(args.compile_repeats if proto is not None else 0):
        log(f"{res.name}: scan-tir ONNX compile {r + 1}/{args.compile_repeats}")
        try:
            seconds, _, onnx_vm = compiled(lambda: import_onnx(proto))
            q.compile_s.append(seconds)
        except Exception as e:
            q.note = "failed: " + brief(e)
            onnx_vm = None
            break
    for key, machine in (("scan", vm), ("scan_onnx", onnx_vm)):
        if machine is not None:
            log(f"{res.name}: {key} check and latency")
            measure_vm(res.paths[key], machine, case, want, args)
    return mod


def measure_tvm(res: ModelResult, want: np.ndarray, args: argparse.Namespace) -> None:
    """TVM's unrolled path in a child process."""
    log(f"{res.name}: TVM's unrolled path (child, limit {args.timeout:g} s)")
    in_child(
        res.paths["tvm"],
        unrolled,
        (res.name, args.smoke, args.repeats, args.slow_repeats),
        args.timeout,
        want,
    )


def measure_tuned(
    case: ModelCase, res: ModelResult, want: np.ndarray, mod: tvm.IRModule, args: argparse.Namespace
) -> None:
    """``scan_tir.relax.tune`` to ``args.trials`` records, then ``scan_tir.relax.build``."""
    from tvm import relax

    import scan_tir.relax as scan_relax

    p = res.paths["tuned"]
    work = Path(args.work_dir) / res.name
    log(f"{res.name}: tuning to {args.trials} trials in {work}")
    # MetaSchedule's console handler takes this logger's level when tuning starts (and
    # tuning resets it to DEBUG): stdout keeps only the report; the logs go to work/logs.
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    try:
        t = time.perf_counter()
        scan_relax.tune(mod, target(), str(work), args.trials)
        p.tune_s = time.perf_counter() - t
    except Exception as e:
        p.note = "failed: " + brief(e)
        return
    # Then the same schedules with each weight's repacking left in its kernel (build's
    # prepack=False): what packing the weights once at build time saves per call.
    for key, prepack in (("tuned", True), ("tuned_repack", False)):
        q = res.paths[key]
        try:
            t = time.perf_counter()
            exe = scan_relax.build(mod, target(), str(work), prepack=prepack)
            vm = relax.VirtualMachine(exe, tvm.cpu())
            q.compile_s = [time.perf_counter() - t]
        except Exception as e:
            q.note = "failed: " + brief(e)
            continue
        q.note = f"{args.trials} trials"
        measure_vm(q, vm, case, want, args)


def bench_model(name: str, args: argparse.Namespace) -> ModelResult:
    """Every path of one model."""
    import torch

    case = MODELS[name](args.smoke)
    res = ModelResult(name, case.description)
    with torch.no_grad():
        want = case.module(case.input).numpy()
    proto = measure_baselines(case, res, want, args)
    measure_tvm(res, want, args)
    mod = measure_scan(case, res, want, proto, args)
    if args.trials <= 0:
        for key in ("tuned", "tuned_repack"):
            res.paths[key].note = "skipped (--trials 0)"
    elif mod is None:
        for key in ("tuned", "tuned_repack"):
            res.paths[key].note = "skipped: the import from PyTorch failed"
    else:
        measure_tuned(case, res, want, mod, args)
    log(f"{name}: compute bound (peak GEMM rate of this machine)")
    seq, batch = case.input.shape[:2]
    res.bound = model_bound(case.module, seq, batch)
    return res


def path_rows(res: ModelResult) -> list[list[str]]:
    """One row per path of one model."""
    _, best = res.fastest()
    rows = []
    for key, label in PATHS.items():
        p = res.paths[key]
        ms = median(p.run_ms)
        err = "-" if math.isnan(p.err) else f"{p.err:.1e}"
        rows.append(
            [
                res.name,
                label,
                fmt(p.export_s),
                fmt(median(p.compile_s)),
                fmt(p.tune_s, 4),
                fmt(ms),
                "-" if math.isnan(ms) else f"{ms / best:.2f}x",
                err,
                p.note,
            ]
        )
    return rows


def summary_row(res: ModelResult) -> list[str]:
    """The model against the issue's targets: one row."""
    key, best = res.fastest()
    p = res.paths

    def ratio(k: str) -> str:
        ms = median(p[k].run_ms)
        return "-" if math.isnan(ms) else f"{fmt(ms)} ({ms / best:.2f}x)"

    def met(ok: bool, ran: bool) -> str:
        return ("yes" if ok else "no") if ran else "not run"

    tuned = median(p["tuned"].run_ms) / best
    compile_s = [median(p[k].compile_s) for k in ("scan", "scan_onnx")]
    bound = res.bound.ms if res.bound else math.nan
    return [
        res.name,
        f"{fmt(best)} ({PATHS[key]})" if key else "-",
        f"{fmt(bound)} ({bound / best:.2f}x)",
        ratio("scan"),
        ratio("tuned"),
        " / ".join(fmt(c) for c in compile_s),
        fmt(median(p["tvm"].compile_s)) if p["tvm"].compile_s else p["tvm"].note,
        met(tuned <= TARGET_RATIO, not math.isnan(tuned)),
        met(max(compile_s) < TARGET_COMPILE_S, not any(map(math.isnan, compile_s))),
    ]


def report(results: list[ModelResult], args: argparse.Namespace, load: tuple, wall: float) -> None:
    import onnxruntime
    import torch

    print(
        header(
            load,
            "; torch eager at 2 and 1 threads, onnxruntime intra_op_num_threads 2 and 1 "
            "(inter_op 1), TVM's VMs at TVM_NUM_THREADS",
        )
    )
    print(
        f"Versions: tvm {tvm.__version__}, torch {torch.__version__}, onnxruntime "
        f"{onnxruntime.__version__}. os.cpu_count()={os.cpu_count()}. Latency: median of "
        f"{args.repeats} repeats ({args.slow_repeats} single calls where one call takes > 1 s); "
        f"scan-tir untuned compile: median of {args.compile_repeats}. "
        f"Wall time {wall:.0f} s."
    )
    print("Models (seeded weights, eval mode, time-major):")
    for r in results:
        print(f"- {r.name}: {r.description}")
    print()
    head = [
        "model",
        "fastest baseline ms",
        "compute bound ms (vs fastest)",
        "scan-tir untuned ms (vs fastest)",
        "scan-tir tuned ms (vs fastest)",
        "scan-tir compile s (PyTorch / ONNX)",
        "TVM unrolled compile s",
        f"tuned <= {TARGET_RATIO}x",
        f"compile < {TARGET_COMPILE_S:g} s",
    ]
    print(markdown_table(head, [summary_row(r) for r in results]))
    print()
    head = [
        "model",
        "path",
        "export s",
        "compile s",
        "tuning s",
        "run ms",
        "vs fastest",
        "max abs err vs eager",
        "note",
    ]
    print(markdown_table(head, [row for r in results for row in path_rows(r)]))
    print()
    print(
        f"Targets (issue 15): scan-tir tuned <= {TARGET_RATIO}x the fastest of PyTorch eager "
        f"(2, 1 threads), torch.compile and onnxruntime (2, 1 threads); compile without "
        f"tuning < {TARGET_COMPILE_S:g} s. Compile s: import + tvm.compile + VM load for the "
        "Relax paths (tuned: scan_tir.relax.build from the database + VM load), the first "
        "call for torch.compile (cold), session creation for onnxruntime; export s "
        "(torch.export, or torch.onnx.export for the ONNX paths) is not in it. torch.compile "
        "and TVM's unrolled path ran in child processes (same seed, their own warm-up). "
        + model_footnote()
    )
    print(f"Load average (1, 5, 15 min) at end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}"
    )
    p.add_argument("--trials", type=int, default=0, help="tuning records per model (0: skip)")
    p.add_argument("--repeats", type=int, default=20, help="latency repeats (median)")
    p.add_argument(
        "--slow-repeats", type=int, default=3, help="repeats of a VM whose one call takes > 1 s"
    )
    p.add_argument("--compile-repeats", type=int, default=3, help="scan-tir untuned compiles")
    p.add_argument(
        "--work-dir",
        help="tuning databases go to WORK_DIR/<model> (default build/relax-models, "
        "build/relax-models-smoke with --smoke)",
    )
    p.add_argument("--tol", type=float, default=1e-4, help="max abs error allowed for scan-tir")
    p.add_argument(
        "--timeout",
        type=float,
        default=900,
        help="seconds for each of torch.compile and TVM's unrolled path (child processes)",
    )
    p.add_argument("--smoke", action="store_true", help="the same models at tiny sizes")
    p.add_argument("--json", metavar="PATH", help="write the raw numbers here")
    args = p.parse_args(argv)
    args.models = name_list(p, args.models, MODELS)
    if min(args.repeats, args.slow_repeats, args.compile_repeats) < 1 or args.trials < 0:
        p.error("repeat counts must be >= 1 and --trials >= 0")
    if args.work_dir is None:
        args.work_dir = "build/relax-models" + ("-smoke" if args.smoke else "")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    load = start_run()
    t0 = time.perf_counter()
    warm_up()
    results = [bench_model(name, args) for name in args.models]
    report(results, args, load, time.perf_counter() - t0)
    if args.json:
        write_json(args.json, {"args": vars(args), "results": [asdict(r) for r in results]})
    checked = [k for k in SCAN if not k.startswith("tuned") or args.trials > 0]
    failed = [
        f"{r.name} {PATHS[k]}: {r.paths[k].note or f'max abs err {r.paths[k].err:.1e}'}"
        for r in results
        for k in checked
        if r.paths[k].failed(args.tol)
    ]
    for f in failed:
        print(f"FAIL: {f} (tolerance {args.tol:g})", file=sys.stderr)
    log("done")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
