"""Linear recurrences (issue 18): the selective scan and minGRU, each form side by side.

Per config (``S``, ``M``, or a recurrence with sizes: ``selective_scan:seq=4096,d_state=64``;
separate configs with ``;`` where any has sizes)
this script tunes each form of the recurrence (``scan_tir.tune.tune_forms``: the
sequential lowering and the chunked ones of ``--chunks``, each ``--trials`` trials with
``scan_space``, databases under ``<work-dir>/<config>/<form>/``; a rerun resumes), then
measures in one process:

- the untuned function (every nest of a step its own fork/join);
- each form's best tuned schedule four ways: as found (its weights repacked in every
  call); on weights packed once (``bench.prepack``: what the tuner timed, and what a
  deployment runs); with every nest of each step
  shared out and forked/joined per nest (``shared_out(..., launch=False)``); and in one
  persistent launch per scan (``shared_out``), which ``MarkOwnedShares`` makes
  channel-parallel (no barriers: each thread runs its channels through the whole
  sequence) where it proves that no thread reads another's writes; the table says which;
- baselines: the PyTorch loop (2 and 1 threads; PyTorch has no module for either),
  the float64 numpy reference, and numba's channel-parallel loop (``bench.numba_scans``,
  the form of the fast CPU kernels), with minGRU's projections by numpy's BLAS;
- the bound (``bench.bound.scan_bound``: the function's exps at the exp rate measured in
  this run, ``bench.bound.exp_rate``, its other FLOPs at the measured GEMM peak, against
  the parameters' bytes; ``estimated_bound``, which counts each exp as its polynomial's
  uncommoned expression tree, is kept in the JSON).

Every scan-tir output is checked against the numpy reference. Run from the repo root:
``TVM_NUM_THREADS=2 python experiments/linear_scans.py --configs S,M --trials 64``
(``--tune-only`` tunes and measures nothing).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import tvm
from bench.bound import estimated_bound, exp_rate, scan_bound
from bench.build import build, target
from bench.check import max_err
from bench.numba_scans import numba_available, numba_call
from bench.prepack import on_packed_weights
from bench.report import fmt, header, markdown_table, start_run, write_json
from bench.timing import evaluator_latency_ms, loop_latency_ms, median
from machine import peak_flops

from postprocs.persistent_step import shared_out
from scan_tir import workloads
from scan_tir.lower.options import LoweringOptions
from scan_tir.transform.owned_shares import verdicts
from scan_tir.tune import log, tune_forms


def parse_config(text: str) -> tuple[str, workloads.Workload]:
    """``S`` or ``selective_scan:seq=4096,d_state=64`` (the other sizes: config S's or M's)."""
    if ":" not in text:
        return text, workloads.get(text)
    name, sizes = text.split(":", 1)
    base = {"selective_scan": "S", "mingru": "M"}[name]
    given = {k: int(v) for k, v in (kv.split("=") for kv in sizes.split(","))}
    return text, workloads.get(name, **{**workloads.CONFIGS[base][1], **given})


def launch_form(func: tvm.tirx.PrimFunc) -> str:
    """'fork/join', 'persistent, barriers (why)' or 'channel-parallel' (no barriers)."""
    said = verdicts(func)
    if not said:
        return "fork/join"
    if all(v == 1 for v in said):
        return "channel-parallel"
    return f"persistent, barriers ({'; '.join(str(v) for v in said if v != 1)})"


def tvm_row(label: str, func, inputs, ref, repeats: int) -> dict:
    lib = build(func)
    args = [tvm.runtime.tensor(np.ascontiguousarray(a, dtype="float32")) for a in inputs]
    args += [tvm.runtime.tensor(np.zeros(r.shape, "float32")) for r in ref]
    lib["main"](*args)
    err = max(max_err(a.numpy(), r) for a, r in zip(args[len(inputs) :], ref))
    times = evaluator_latency_ms(lib, args, repeats)
    log(f"  {label}: {median(times):.3f} ms (error {err:.1e})")
    return {"label": label, "ms": times, "err": err, "form": launch_form(func)}


def packed_row(label: str, tuned, inputs, ref, repeats: int) -> dict | None:
    """``tuned`` on weights packed once (what the tuner timed, and what a deployment
    runs: ``bench.prepack``), or None where its schedule repacks nothing."""
    names = [str(p.name) for p in tuned.params]
    tensors = {
        n: tvm.runtime.tensor(np.ascontiguousarray(a, dtype="float32"))
        for n, a in zip(names, inputs)
    }
    packed = on_packed_weights(tuned, tensors, len(ref), repeats)
    if packed.func.same_as(tuned):
        return None
    lib = build(packed.func)
    outs = [tvm.runtime.tensor(np.zeros(r.shape, "float32")) for r in ref]
    args = [tensors[n] for n in names[: len(inputs)]] + outs
    lib["main"](*args)
    err = max(max_err(a.numpy(), r) for a, r in zip(outs, ref))
    times = evaluator_latency_ms(lib, args, repeats)
    log(f"  {label}: {median(times):.3f} ms (error {err:.1e})")
    return {"label": label, "ms": times, "err": err, "form": launch_form(packed.func)}


def python_row(label: str, call, ref, repeats: int) -> dict:
    err = max_err(np.asarray(call()), ref[0])
    times = loop_latency_ms(call, repeats)
    log(f"  {label}: {median(times):.3f} ms (error {err:.1e})")
    return {"label": label, "ms": times, "err": err, "form": ""}


def measure(name: str, w: workloads.Workload, args: argparse.Namespace) -> dict:
    func = w.prim_func()
    inputs = [np.asarray(a, "float32") for a in w.input_arrays(seed=0)]
    ref = w.numpy(inputs)
    threads = int(target().attrs.get("num-cores", 2))
    safe = name.replace(":", "_").replace(",", "_").replace("=", "")
    forms = tune_forms(
        w.tensors(),
        args.work_dir / safe,
        args.trials,
        chunks=args.chunks,
        weights=w.weights(),
        population=args.population,
    )
    if args.tune_only:
        return {}
    rows = [tvm_row("scan-tir untuned", func, inputs, ref, args.repeats)]
    for form, best in forms.scheduled.items():
        rows.append(tvm_row(f"scan-tir {form}, tuned", best, inputs, ref, args.repeats))
        packed = packed_row(f"scan-tir {form}, tuned, prepacked", best, inputs, ref, args.repeats)
        if packed is not None:
            rows.append(packed)
        for label, launch in (("fork/join per nest", False), ("persistent", True)):
            formed = shared_out(best, threads, launch=launch)
            if isinstance(formed, str):
                log(f"  {form}, {label}: {formed}")
                continue
            rows.append(tvm_row(f"scan-tir {form}, {label}", formed, inputs, ref, args.repeats))
    if numba_available():
        call = numba_call(w.recurrence.name, inputs)
        rows.append(python_row("numba, channel-parallel", call, ref, args.repeats))
    import torch

    loop = w.recurrence.torch_model(*inputs, **w.sizes)
    old = torch.get_num_threads()
    for n in (2, 1):
        torch.set_num_threads(n)
        rows.append(python_row(f"PyTorch loop, {n} thread(s)", loop, ref, args.repeats))
    torch.set_num_threads(old)
    numpy_call = lambda: w.numpy(inputs)[0]  # noqa: E731
    rows.append(python_row("numpy reference (float64)", numpy_call, ref, args.repeats))
    exact = workloads.get(w.recurrence.name, LoweringOptions(fast_math=False), **w.sizes)
    bound = scan_bound(func, exact.prim_func())
    return {
        "tuned_ms": forms.latency_ms,
        "fastest_form": forms.best,
        "config": name,
        "sizes": w.sizes,
        "rows": rows,
        "bound_ms": bound.ms,
        "bound_kind": bound.kind,
        "exp_rate": exp_rate(threads),
        "peak_flops": peak_flops(),
        "estimated_bound_ms": estimated_bound(func).ms,
    }


def table(result: dict) -> str:
    rows = result["rows"]
    torch_ms = min(median(r["ms"]) for r in rows if r["label"].startswith("PyTorch"))
    numba_ms = next((median(r["ms"]) for r in rows if r["label"].startswith("numba")), math.nan)
    body = [
        [
            r["label"],
            fmt(median(r["ms"])),
            fmt(median(r["ms"]) / torch_ms, 2),
            fmt(median(r["ms"]) / numba_ms, 2),
            fmt(median(r["ms"]) / result["bound_ms"], 1),
            f"{r['err']:.1e}",
            r["form"],
        ]
        for r in rows
    ]
    head = ["path", "ms", "/ PyTorch loop", "/ numba", "/ bound", "max error", "launch"]
    sizes = ", ".join(f"{k}={v}" for k, v in result["sizes"].items())
    return (
        f"\n{result['config']} ({sizes}); bound {result['bound_ms']:.3f} ms "
        f"({result['bound_kind']}: exps at {result['exp_rate'] / 1e9:.2f} G/s, other FLOPs "
        f"at {result['peak_flops'] / 1e9:.0f} GFLOP/s, both measured in this run)\n\n"
        + markdown_table(head, body)
    )


def main() -> None:
    load = start_run()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="S,M")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument(
        "--chunks", type=lambda v: [int(c) for c in v.split(",") if c], default=[64]
    )
    parser.add_argument("--population", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--work-dir", type=Path, default=Path("build/linear_scans"))
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--tune-only", action="store_true", help="tune the databases, measure nothing"
    )
    args = parser.parse_args()
    results = []
    for text in args.configs.split(";" if ";" in args.configs or ":" in args.configs else ","):
        name, w = parse_config(text)
        log(f"{name}: {w.sizes}")
        results.append(measure(name, w, args))
    if args.tune_only:
        return
    print(header(load))
    for result in results:
        print(table(result))
    if args.json:
        write_json(args.json, {"results": results})


if __name__ == "__main__":
    main()
