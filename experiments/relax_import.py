"""Benchmark the Relax frontend (scan_tir.relax) against TVM's own importer, untuned (issue 15).

One process measures, side by side, per model (a 2-layer ``nn.LSTM`` and a bidirectional
1-layer ``nn.GRU``, input 64, hidden 64, batch 1, seq 80 by default):

* ``torch.export`` time (each importer gets its own fresh export every repeat; both are
  counted in the export median).
* scan-tir from PyTorch: ``scan_tir.relax.from_exported_program`` import, then build
  (``tvm.compile`` with the default Relax pipeline, then ``relax.VirtualMachine``
  construction, where TVM's llvm module generates machine code: experiments/bench/
  relax_baseline.py's ``relax_build``).
* TVM's own path: ``tvm.relax.frontend.torch.from_exported_program``, which unrolls the
  sequence, with the same build.
* scan-tir from ONNX: ``torch.onnx.export(..., dynamo=False)`` (the TorchScript exporter,
  which emits ONNX ``LSTM``/``GRU`` nodes; timed, not counted in import), then
  ``scan_tir.relax.from_onnx`` and the same build. Skipped, with the reason printed, if the
  export or import fails.
* Untuned latency of each compiled VM (``time_evaluator``), of PyTorch eager at 2 and 1
  threads and of onnxruntime at ``intra_op_num_threads`` 2 and 1 (perf_counter loops), and
  the max abs error of every path's outputs against PyTorch's.

No tuning anywhere: the scan kernels are the converter's naive loops (tuning through Relax
is not built yet). Compile times are medians over ``--repeats``; import + build is the
median of per-repeat sums. One-time process costs (LLVM start-up, dynamo and TorchScript
imports) are paid in an untimed warm-up on a tiny LSTM.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/relax_import.py``. Exits
non-zero when a scan-tir path's output is off from PyTorch's by more than ``--tol``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import tvm
from bench.check import max_err
from bench.cli import name_list
from bench.frontends import brief, import_onnx, import_scan, import_tvm, torch_export, vm_outputs
from bench.onnx_baseline import onnx_export, ort_latency
from bench.relax_baseline import relax_build
from bench.report import fmt, header, markdown_table, start_run, write_json
from bench.timing import evaluator_latency_ms, median
from bench.torch_module import eager_ms

from scan_tir.tune import log

SIZES = {"input": 64, "hidden": 64, "batch": 1}

#: The models: name -> description (built by :func:`make_model`).
MODELS = {"lstm2": "nn.LSTM, 2 layers", "bigru": "nn.GRU, bidirectional, 1 layer"}


#: Compiled paths, in table order: (key, label).
PATHS = (
    ("scan", "scan-tir from_exported_program"),
    ("tvm", "TVM from_exported_program (unrolled)"),
    ("onnx", "scan-tir from_onnx"),
)


@dataclass
class PathTimes:
    """Raw numbers of one compiled path (every repeat)."""

    export_s: list[float] = field(default_factory=list)
    import_s: list[float] = field(default_factory=list)
    compile_s: list[float] = field(default_factory=list)
    load_s: list[float] = field(default_factory=list)
    run_ms: list[float] = field(default_factory=list)
    err: float = math.nan  # every output against PyTorch's
    outputs: str = ""  # which outputs were compared
    skipped: str = ""  # why the path did not run

    def total_s(self) -> float:
        """Median over repeats of import + compile + VM load."""
        sums = [sum(x) for x in zip(self.import_s, self.compile_s, self.load_s)]
        return median(sums)


@dataclass
class Result:
    """Everything measured for one model."""

    model: str
    description: str
    seq: int
    paths: dict[str, PathTimes] = field(default_factory=lambda: {k: PathTimes() for k, _ in PATHS})
    torch2_ms: list[float] = field(default_factory=list)
    torch1_ms: list[float] = field(default_factory=list)
    ort2_ms: list[float] = field(default_factory=list)
    ort1_ms: list[float] = field(default_factory=list)
    ort_err: float = math.nan
    ort_skipped: str = ""


def make_model(name: str, seq: int, seed: int = 0) -> tuple[Any, Any]:
    """The eval-mode module (weights seeded) and an input in U(-1, 1), (seq, batch, input)."""
    import torch

    torch.manual_seed(seed)
    i, h = SIZES["input"], SIZES["hidden"]
    if name == "lstm2":
        model = torch.nn.LSTM(i, h, num_layers=2)
    else:
        model = torch.nn.GRU(i, h, bidirectional=True)
    x = torch.rand(seq, SIZES["batch"], i) * 2 - 1
    return model.eval(), x


def torch_outputs(model: Any, x: Any) -> list[np.ndarray]:
    """PyTorch's outputs flattened in order (y, h_n[, c_n]), as both importers flatten them."""
    import torch

    with torch.no_grad():
        y, state = model(x)
    states = state if isinstance(state, tuple) else (state,)
    return [t.numpy() for t in (y, *states)]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def compare(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, str]:
    """Max abs error over the outputs both give (shapes must agree); which ones."""
    names = ["y", "h_n", "c_n"][: len(want)]
    n = min(len(got), len(want))
    err = max(max_err(g, w) for g, w in zip(got[:n], want[:n]))
    return err, "+".join(names[:n])


def warm_up() -> None:
    """Pay one-time costs (LLVM, dynamo, TorchScript, ONNX importer) outside timed regions."""
    import torch

    log("warm-up: tiny LSTM through every path")
    model = torch.nn.LSTM(2, 2).eval()
    x = torch.zeros(2, 1, 2)
    relax_build(import_scan(torch_export(model, (x,))[1]))
    relax_build(import_tvm(torch_export(model, (x,))[1]))
    try:
        relax_build(import_onnx(onnx_export(model, (x,), ["x"])[1]))
    except Exception as e:  # reported per model below
        log(f"warm-up: ONNX path failed ({type(e).__name__}: {e})")


def bench_model(name: str, args: argparse.Namespace) -> Result:
    """Compile every path ``args.repeats`` times (interleaved, so that drift hits all alike),
    then check and time each last VM, then the PyTorch and onnxruntime baselines."""
    model, x = make_model(name, args.seq)
    res = Result(name, MODELS[name], args.seq)
    want = torch_outputs(model, x)
    vms: dict[str, Any] = {}
    onnx_model = None
    for r in range(args.repeats):
        log(f"{name}: compile repeat {r + 1}/{args.repeats}")
        for key, importer in (("scan", import_scan), ("tvm", import_tvm)):
            p = res.paths[key]
            exp_s, ep = torch_export(model, (x,))
            imp_s, mod = timed(lambda ep=ep, importer=importer: importer(ep))
            comp_s, load_s, vms[key] = relax_build(mod)
            p.export_s.append(exp_s)
            p.import_s.append(imp_s)
            p.compile_s.append(comp_s)
            p.load_s.append(load_s)
        p = res.paths["onnx"]
        if p.skipped:
            continue
        try:
            exp_s, onnx_model = onnx_export(model, (x,), ["x"])
        except Exception as e:
            onnx_model = None
            p.skipped = "torch.onnx.export failed: " + brief(e)
            log(f"{name}: ONNX path skipped: {p.skipped}")
            continue
        try:
            imp_s, mod = timed(lambda m=onnx_model: import_onnx(m))
            comp_s, load_s, vms["onnx"] = relax_build(mod)
        except Exception as e:
            vms.pop("onnx", None)
            p.skipped = "import or build failed: " + brief(e)
            log(f"{name}: ONNX path skipped: {p.skipped}")
            continue
        p.export_s.append(exp_s)
        p.import_s.append(imp_s)
        p.compile_s.append(comp_s)
        p.load_s.append(load_s)

    xt = tvm.runtime.tensor(x.numpy())
    for key, _ in PATHS:
        if key not in vms:
            continue
        log(f"{name}: {key} VM check and latency ({args.latency_repeats} repeats)")
        p = res.paths[key]
        p.err, p.outputs = compare(vm_outputs(vms[key], xt), want)
        p.run_ms = evaluator_latency_ms(vms[key], [xt], args.latency_repeats)

    log(f"{name}: PyTorch eager latency (2 and 1 threads)")
    res.torch2_ms = eager_ms(model, [x], 2, args.latency_repeats)
    res.torch1_ms = eager_ms(model, [x], 1, args.latency_repeats)

    if onnx_model is None:
        res.ort_skipped = res.paths["onnx"].skipped
        return res
    log(f"{name}: onnxruntime latency (intra_op_num_threads 2 and 1)")
    feeds = {"x": x.numpy()}
    try:
        for n, dest in ((2, res.ort2_ms), (1, res.ort1_ms)):
            run = ort_latency(onnx_model, feeds, n, args.latency_repeats)
            if n == 2:
                res.ort_err = compare(run.outputs, want)[0]
            dest.extend(run.run_ms)
    except Exception as e:
        res.ort_skipped = "onnxruntime failed: " + brief(e)
        log(f"{name}: {res.ort_skipped}")
    return res


def table(results: list[Result]) -> str:
    """One row per model and path; compile columns blank for the runtime-only baselines."""
    head = [
        "model",
        "path",
        "export s",
        "import s",
        "compile s",
        "VM load s",
        "import + build s",
        "vs scan-tir",
        "untuned run ms",
        "max abs err vs PyTorch",
    ]
    rows = []
    for r in results:
        model = f"{r.model}, seq {r.seq}"
        base = r.paths["scan"].total_s()
        for key, label in PATHS:
            p = r.paths[key]
            if p.skipped:
                rows.append([model, label, *["-"] * 7, f"skipped: {p.skipped}"])
                continue
            total = p.total_s()
            rows.append(
                [
                    model,
                    label,
                    fmt(median(p.export_s)),
                    fmt(median(p.import_s)),
                    fmt(median(p.compile_s)),
                    fmt(median(p.load_s)),
                    fmt(total),
                    f"{total / base:.1f}x",
                    fmt(median(p.run_ms)),
                    f"{p.err:.1e} ({p.outputs})",
                ]
            )
        err = "-" if math.isnan(r.ort_err) else f"{r.ort_err:.1e}"
        if r.ort_skipped:
            err = f"skipped: {r.ort_skipped}"
        blank = ["-"] * 6
        rows.append([model, "PyTorch eager, 2 threads", *blank, fmt(median(r.torch2_ms)), "0"])
        rows.append([model, "PyTorch eager, 1 thread", *blank, fmt(median(r.torch1_ms)), "0"])
        rows.append([model, "onnxruntime, 2 threads", *blank, fmt(median(r.ort2_ms)), err])
        rows.append([model, "onnxruntime, 1 thread", *blank, fmt(median(r.ort1_ms)), err])
    return markdown_table(head, rows)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}"
    )
    p.add_argument("--seq", type=int, default=80, help="sequence length")
    p.add_argument("--repeats", type=int, default=3, help="export/import/build repeats")
    p.add_argument("--latency-repeats", type=int, default=50, help="repeats of each latency")
    p.add_argument("--tol", type=float, default=1e-4, help="max abs error allowed for scan-tir")
    p.add_argument("--json", metavar="PATH", help="write the raw numbers here")
    args = p.parse_args(argv)
    args.models = name_list(p, args.models, MODELS)
    if min(args.repeats, args.latency_repeats, args.seq) < 1:
        p.error("--seq and repeat counts must be >= 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    load = start_run()
    import onnxruntime
    import torch

    t0 = time.perf_counter()
    warm_up()
    results = [bench_model(name, args) for name in args.models]
    wall = time.perf_counter() - t0

    print(
        header(
            load,
            f"; torch.get_num_threads()={torch.get_num_threads()} (eager timed at 2 and 1), "
            f"onnxruntime intra_op_num_threads 2 and 1, inter_op 1",
        )
    )
    print(
        f"Versions: tvm {tvm.__version__}, torch {torch.__version__}, onnxruntime "
        f"{onnxruntime.__version__}. os.cpu_count()={os.cpu_count()}."
    )
    print(
        f"Repeats: export/import/build {args.repeats} (medians), latency "
        f"{args.latency_repeats} (median). Wall time {wall:.0f} s."
    )
    print(
        "Models (batch 1, input 64, hidden 64, eval mode, seeded weights, x in U(-1, 1)): "
        + "; ".join(f"{r.model} = {r.description}" for r in results)
        + "."
    )
    print()
    print(table(results))
    print()
    print(
        "Untuned: every TVM kernel is what tvm.compile's default pipeline makes (the scan "
        "PrimFuncs are the converter's loops; tuning through Relax is not built yet). "
        "Build = tvm.compile + relax.VirtualMachine construction (where llvm code is "
        "generated). import + build = median of per-repeat sums; 'vs scan-tir' is that "
        "over scan-tir from_exported_program's. ONNX export is torch.onnx.export "
        "(dynamo=False), not counted in import. Errors: max abs over the outputs named, "
        "against PyTorch eager; onnxruntime's over all of its outputs. Latency: VMs via "
        "time_evaluator, PyTorch and onnxruntime via a perf_counter loop; median per call."
    )
    for r in results:
        for key, label in PATHS:
            if r.paths[key].skipped:
                print(f"{r.model}: {label} skipped: {r.paths[key].skipped}")
    print(f"Load average (1, 5, 15 min) at end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.json:
        payload = {"args": vars(args), "results": [asdict(r) for r in results]}
        write_json(args.json, payload)
    failed = [
        f"{r.model} {key}"
        for r in results
        for key in ("scan", "onnx")
        if not r.paths[key].skipped and not r.paths[key].err <= args.tol
    ]
    for f in failed:
        print(f"FAIL: {f}: max abs err vs PyTorch > {args.tol:g}", file=sys.stderr)
    log("done")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
