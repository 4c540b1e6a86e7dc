"""Benchmark "convert and build" of a config's function and its untuned latency (issue 2).

One process measures, side by side, per config:

* scan-tir: ``scan_tir.create_prim_func`` (convert, with the config's lowering options) and
  ``tvm.compile`` (build), from a fresh TE graph each repeat; the module's untuned latency;
  its error against the workload's numpy reference.
* For the LSTM, TVM's Relax path, the only other way TVM 0.27 compiles one (experiments/
  bench/relax_baseline.py): its export, import, compile and VM load times, VM latency, and
  error against the reference and PyTorch.
* Baselines for latency: the workload's numpy reference, PyTorch eager at 2 and 1
  threads, and onnxruntime's own RNN kernels at 2 and 1 intra-op threads on the same
  PyTorch module exported to ONNX (``bench.onnx_baseline``; modules only).

Compile times are wall times, median over repeats. Each path's compile time also counts its
"load" (the first function lookup, or the Relax VM's construction), because TVM's llvm
module generates machine code only then; for the unrolled Relax LSTM that step takes longer
than ``tvm.compile`` itself. One-time costs of the process (LLVM start-up, dynamo import)
are paid in an untimed warm-up.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/bench_convert.py --configs
A,B``. Exits non-zero when scan-tir's output is off by more than ``--tol``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import tvm
from bench.build import build, fresh_tensors, param_names
from bench.check import max_err, outputs_error
from bench.database import config_list
from bench.onnx_baseline import OrtTimes, measure_ort
from bench.relax_baseline import has_relax_path, relax_build, relax_import
from bench.report import fmt, header, markdown_table, start_run, write_json
from bench.timing import evaluator_latency_ms, loop_latency_ms, median
from bench.torch_baselines import measure_torch, torch_available

import scan_tir
from scan_tir import workloads
from scan_tir.tune import log
from scan_tir.workloads import Workload


@dataclass
class Result:
    """Raw numbers of one config; medians are derived from the lists when printing."""

    config: str
    workload: str
    scan_convert_s: list[float] = field(default_factory=list)
    scan_build_s: list[float] = field(default_factory=list)
    scan_load_s: list[float] = field(default_factory=list)
    scan_ms: list[float] = field(default_factory=list)
    numpy_ms: list[float] = field(default_factory=list)
    torch2_ms: list[float] = field(default_factory=list)
    torch1_ms: list[float] = field(default_factory=list)
    ort: OrtTimes = field(default_factory=OrtTimes)
    relax_export_s: list[float] = field(default_factory=list)
    relax_import_s: list[float] = field(default_factory=list)
    relax_compile_s: list[float] = field(default_factory=list)
    relax_load_s: list[float] = field(default_factory=list)
    relax_ms: list[float] = field(default_factory=list)
    errors: dict[str, float] = field(default_factory=dict)


def convert_and_build(w: Workload) -> tuple[float, float, float, tvm.runtime.Module]:
    """Convert, build and load once from a fresh TE graph: (convert s, build s, load s,
    module).

    Building the TE graph itself is not timed: it is the user's model, the counterpart of
    ``torch.export`` on the Relax side. "Load" is the first ``mod["main"]`` lookup.
    """
    ops = w.tensors()
    t0 = time.perf_counter()
    func = scan_tir.create_prim_func(ops, options=w.options)
    t1 = time.perf_counter()
    mod = build(func)
    t2 = time.perf_counter()
    mod["main"]
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, mod


def warm_up(with_relax: bool) -> None:
    """Pay one-time process costs (LLVM init, dynamo import) outside every timed region, so
    that no config's first repeat carries them."""
    log("warm-up: tiny scan-tir build" + (" and tiny Relax import/compile" if with_relax else ""))
    tiny = workloads.get("lstm", seq=2, batch=1, input=2, hidden=2)
    convert_and_build(tiny)
    if with_relax:
        relax_build(relax_import(tiny.input_arrays())[2])


def bench_config(name: str, args: argparse.Namespace, with_torch: bool) -> Result:
    """All measurements of one config, in a fixed order: scan-tir, numpy, PyTorch,
    onnxruntime, Relax."""
    w = workloads.get(name)
    res = Result(name, w.name)
    inputs = w.input_arrays()
    ref = w.numpy(inputs)

    mod = None
    for r in range(args.repeats):
        log(f"{name}: scan-tir convert+build, repeat {r + 1}/{args.repeats}")
        conv, build_s, load, mod = convert_and_build(w)
        res.scan_convert_s.append(conv)
        res.scan_build_s.append(build_s)
        res.scan_load_s.append(load)
    assert mod is not None
    log(f"{name}: scan-tir run and latency ({args.latency_repeats} repeats)")
    func = w.prim_func()
    tensors = fresh_tensors(func, inputs)
    run_args = [tensors[n] for n in param_names(func)]
    mod["main"](*run_args)
    res.errors["scan-tir vs numpy"] = outputs_error(run_args, ref)[1]
    res.scan_ms = evaluator_latency_ms(mod, run_args, args.latency_repeats)

    log(f"{name}: numpy latency")
    res.numpy_ms = loop_latency_ms(lambda: w.numpy(inputs), args.latency_repeats)
    if with_torch:
        log(f"{name}: PyTorch eager latency (2 and 1 threads)")
        times = measure_torch(w, inputs, ref, args.latency_repeats, compile_too=False)
        res.torch2_ms, res.torch1_ms = times.eager2_ms, times.eager1_ms
        res.errors.update(times.errors)
    log(f"{name}: onnxruntime latency (2 and 1 intra-op threads)")
    res.ort = measure_ort(w, inputs, ref, args.latency_repeats)
    res.errors.update(res.ort.errors)

    if not args.no_relax and has_relax_path(w):
        vm = None
        for r in range(args.relax_repeats):
            log(f"{name}: Relax export+import+compile+load, repeat {r + 1}/{args.relax_repeats}")
            exp_s, imp_s, rmod = relax_import(inputs)
            comp_s, load_s, vm = relax_build(rmod)
            res.relax_export_s.append(exp_s)
            res.relax_import_s.append(imp_s)
            res.relax_compile_s.append(comp_s)
            res.relax_load_s.append(load_s)
        assert vm is not None
        log(f"{name}: Relax VM run and latency ({args.latency_repeats} repeats)")
        x = tvm.runtime.tensor(inputs[0])
        r_hs = vm["main"](x)[0].numpy()
        res.relax_ms = evaluator_latency_ms(vm, [x], args.latency_repeats)
        res.errors["Relax vs numpy (hs)"] = max_err(r_hs, ref[0])
        if with_torch:
            torch_hs = np.asarray(w.recurrence.torch_model(*inputs, **w.sizes)())
            res.errors["Relax vs PyTorch"] = max_err(r_hs, torch_hs)
    return res


def sums(*columns: list[float]) -> float:
    """Median of per-repeat sums."""
    return median([sum(x) for x in zip(*columns)])


def table(results: list[Result]) -> str:
    """One row per config, medians of the raw numbers."""
    head = [
        "config: workload",
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
        "onnxruntime ms (2 thr / 1 thr)",
        "Relax ms",
        "scan-tir max err",
        "Relax max err",
    ]
    rows = []
    for r in results:
        total = sums(r.scan_convert_s, r.scan_build_s, r.scan_load_s)
        relax_total = sums(r.relax_import_s, r.relax_compile_s, r.relax_load_s)
        relax_err = r.errors.get("Relax vs PyTorch", r.errors.get("Relax vs numpy (hs)"))
        ort = f"{fmt(median(r.ort.ort2_ms))} / {fmt(median(r.ort.ort1_ms))}"
        rows.append(
            [
                f"{r.config}: {r.workload}",
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
                ort,
                fmt(median(r.relax_ms)),
                f"{r.errors['scan-tir vs numpy']:.1e}",
                "-" if relax_err is None else f"{relax_err:.1e}",
            ]
        )
    return markdown_table(head, rows)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--configs", default="A,B", type=config_list, help="comma-separated config names"
    )
    p.add_argument("--repeats", type=int, default=5, help="scan-tir convert+build repeats")
    p.add_argument(
        "--relax-repeats",
        type=int,
        default=None,
        help="Relax export+import+compile+load repeats; each takes many seconds, so the "
        "default is min(--repeats, 3)",
    )
    p.add_argument("--latency-repeats", type=int, default=50, help="repeats of each latency")
    p.add_argument("--no-relax", action="store_true", help="skip the Relax path")
    p.add_argument("--tol", type=float, default=1e-4, help="max abs error allowed for scan-tir")
    p.add_argument("--json", metavar="PATH", help="write the raw numbers here")
    args = p.parse_args(argv)
    if args.relax_repeats is None:
        args.relax_repeats = min(args.repeats, 3)
    if min(args.repeats, args.relax_repeats, args.latency_repeats) < 1:
        p.error("repeat counts must be >= 1")
    return args


def main(argv: list[str]) -> int:
    """Run every selected config, print the report, and fail on a wrong scan-tir result."""
    args = parse_args(argv)
    load = start_run()
    with_torch = torch_available()
    if not with_torch and not args.no_relax:
        log("torch is not importable: skipping the Relax path and the PyTorch columns")
        args.no_relax = True
    warm_up(not args.no_relax)
    results = [bench_config(name, args, with_torch) for name in args.configs]

    print(header(load))
    print(
        f"Repeats: scan-tir build {args.repeats}, Relax export+import+compile+load "
        f"{args.relax_repeats}, latency {args.latency_repeats} (medians)."
    )
    print()
    print(table(results))
    print()
    print(
        "Totals are medians of per-repeat sums. Compile speedup = Relax total (import + "
        "compile + VM load) / scan-tir total (convert + build + load); torch.export is not "
        'included (its counterpart, building the TE graph, is not timed either). "Load" is '
        "the first function lookup / VM initialisation, where TVM's llvm module generates "
        "machine code. Inputs: the workload's own. Latency: TVM modules via time_evaluator, "
        "numpy (the workload's reference), PyTorch and onnxruntime (the PyTorch module "
        "exported by torch.onnx.export, its ONNX RNN nodes run by onnxruntime's CPU kernels) "
        "via a perf_counter loop; all report the median per-call time over repeats."
    )
    for r in results:
        if r.ort.skipped:
            print(f"- {r.config}: no onnxruntime column: {r.ort.skipped}.")
    print()
    print("Max abs errors (every output where both exist; Relax and PyTorch give hs only):")
    for r in results:
        print(f"- {r.config}: " + ", ".join(f"{k} {v:.2e}" for k, v in r.errors.items()))
    for r in results:
        for k, v in r.errors.items():
            if not k.startswith("scan-tir") and not v <= args.tol:
                print(f"WARNING: {r.config}: {k} max abs err {v:.2e} > {args.tol:g} (baseline)")
    if args.json:
        payload = {"args": {k: v for k, v in vars(args).items() if k != "json"}}
        write_json(args.json, {**payload, "results": [asdict(r) for r in results]})
    failed = [r.config for r in results if not r.errors["scan-tir vs numpy"] <= args.tol]
    for c in failed:
        print(f"FAIL: {c}: scan-tir max abs err > {args.tol:g}", file=sys.stderr)
    log("done")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
