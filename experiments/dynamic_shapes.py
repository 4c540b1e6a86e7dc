"""One tuning for a grid of shapes against today's one tuned shape, tuning per instance, and
PyTorch and onnxruntime (issue 17, item 5).

A zoo recurrence (``--workload``: topi's LSTM by default, or the GRU of config E) with
``seq`` (and, with ``--batches``, ``batch``) symbolic, tuned three ways:

- dynamic: :func:`scan_tir.tune.dynamic` over the grid (tuned at every listed batch at
  the shortest length where it has ``ROWS`` rows, or at the corners with the length
  alone symbolic, each with its share of ``--trials``; the best ``--candidates`` of each
  timed at the two shortest lengths of their batch and the ``--reach`` nearest listed
  batches, and predicted at the others, unless ``--time-everywhere``; at most
  ``--kernels`` chosen, one function dispatching by shape);
- single: today's way, the function tuned at one shape (``--single-at``, ``--trials``)
  and its best schedule replayed on the symbolic function (``apply_best``);
- per-instance (``--per-instance``): the fixed-shape function tuned at that instance
  alone (``--per-instance-trials``) and built at that shape: the issue's reference;
- same-budget (in ``--arms``): every listed instance tuned alone as per-instance is, with
  dynamic's budget shared among them (``--trials`` over the number of instances, at
  least one each): what tuning shape by shape buys for the trials dynamic spends.

``--arms single,per-instance`` (or with ``same-budget``) makes only the reference arms
and stops, so that they can
be tuned ahead and several dynamic arms measured against them (a copy of the work dir
each). Everything is checked against numpy and timed side by side, in rounds, at every listed
instance and at instances not listed; with ``--baselines``, PyTorch eager and onnxruntime
(2 and 1 threads each, the faster kept) at every instance too. Weights are read as given,
or, with ``--packed``, marked layout-free in every arm: each task is tuned on weights
packed for its tiles, and each arm's module takes them packed, one copy per distinct
layout, made once by its ``prepack`` before it is timed (``Workload.symbolic_func``,
``scan_tir.transform.weight_prepack``), as issue 16's tables time prepacked weights.
Tuning times include timing the
candidates. Instances are written ``SEQ`` or, with ``--batches``, ``BATCHxSEQ``. Each arm
leaves its library and facts (tuning seconds, table, predictions) in its work dir, and a
rerun with the same work dir takes them from there: a killed run resumes at the next arm
(the tuning itself resumes from the records, as every scan-tir tuning does).

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/dynamic_shapes.py``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tvm
from bench.build import build_prepacked
from bench.check import max_err
from bench.onnx_baseline import measure_ort
from bench.report import fmt, header, markdown_table, start_run, write_json
from bench.timing import evaluator_latency_ms, median
from bench.torch_baselines import measure_torch
from tvm.s_tir import meta_schedule as ms

from scan_tir import workloads
from scan_tir.db.records import repair
from scan_tir.transform.pipeline import signature
from scan_tir.transform.weight_prepack import prepack_module
from scan_tir.tune import default_target, dispatch_target, dynamic
from scan_tir.tune.budget import SPLITS
from scan_tir.tune.symbolic import apply_best, specialize
from scan_tir.tune.tuner import records_of, tune_module


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="lstm", help="a zoo recurrence: lstm, gru, ...")
    p.add_argument("--sizes", default="batch=1,input=512,hidden=256")
    p.add_argument("--seqs", default="16,64,256,1024", help="the listed lengths")
    p.add_argument("--batches", default="", help="the listed batches (batch symbolic)")
    p.add_argument("--unlisted", default="37,1000", help="instances not listed")
    p.add_argument("--single-at", default="80", help="today's one tuned instance")
    p.add_argument("--per-instance", default="",
                   help="instances tuned alone, comma-separated, or 'all' (every listed one)")
    p.add_argument("--per-instance-trials", type=int, default=32)
    p.add_argument("--trials", type=int, default=64, help="budget of dynamic and of single")
    p.add_argument("--split", default=SPLITS[0], choices=SPLITS,
                   help="dynamic's budget among its tasks: all evenly, or half evenly and "
                   "the rest by the work each stands for")
    p.add_argument("--single-trials", type=int, help="single's budget, if not --trials")
    p.add_argument("--population", type=int, default=512)
    p.add_argument("--kernels", type=int, default=4)
    p.add_argument("--candidates", type=int, default=2, help="best records per batch timed")
    p.add_argument("--tune-at", default="",
                   help="instances dynamic tunes at, comma-separated (default: every "
                        "(reach + 1)-th listed batch, ends included, at the shortest length "
                        "where it has ROWS (64) rows)")
    p.add_argument("--reach", type=int, default=1,
                   help="listed batches on either side of its own a candidate is timed at "
                        "(-1: all)")
    p.add_argument("--time-everywhere", action="store_true")
    p.add_argument("--baselines", action="store_true", help="PyTorch and onnxruntime too")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--arms", default="dynamic,single,per-instance",
                   help="the arms made, of dynamic, single, per-instance and same-budget; "
                   "without the first three the run stops after making them (reference "
                   "arms tuned ahead, left in the work dir)")
    p.add_argument("--packed", action="store_true",
                   help="weights layout-free in every arm, packed once for each kernel")
    p.add_argument("--work-dir", type=Path, default=Path("build/dynamic_shapes"))
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    single_trials = args.trials if args.single_trials is None else args.single_trials
    load = start_run()
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in args.sizes.split(","))}
    grid = {"seq": [int(s) for s in args.seqs.split(",")]}
    if args.batches:
        grid = {"batch": [int(b) for b in args.batches.split(",")], **grid}
    names = list(grid)

    def instance(text: str) -> tuple[int, ...]:
        values = tuple(int(v) for v in text.split("x"))
        if len(values) != len(names):
            raise SystemExit(f"instance {text!r}: expected {'x'.join(names).upper()}")
        return values

    listed = [(b, s) for b in grid["batch"] for s in grid["seq"]] if args.batches else [
        (s,) for s in grid["seq"]]
    unlisted = [instance(t) for t in args.unlisted.split(",") if t]
    probes = listed if args.per_instance == "all" else [
        instance(t) for t in args.per_instance.split(",") if t]
    zoo = workloads.get(args.workload, seq=grid["seq"][0], **sizes)
    func = zoo.symbolic_func(names, packed=args.packed)

    def workload(at: tuple[int, ...]) -> workloads.Workload:
        return workloads.get(args.workload, **{**sizes, **dict(zip(names, at))})

    def key(at: tuple[int, ...]) -> str:
        return "x".join(map(str, at))

    facts, libs, packed = {}, {}, {}  # packed: arm -> its packed weights' [shape, dtype]

    def tuned():
        t = time.perf_counter()
        r = dynamic(func, args.work_dir / "dynamic", grid, trials=args.trials, split_by=args.split,
                    population=args.population, kernels=args.kernels,
                    candidates=args.candidates, reach=None if args.reach < 0 else args.reach,
                    representatives=[instance(t) for t in args.tune_at.split(",") if t] or None,
                    predict=not args.time_everywhere, reference=zoo.symbolic_case())
        # the function as built, for experiments/dispatch_branches.py
        (args.work_dir / "dynamic" / "dispatch.tvmscript").write_text(
            prepack_module(r.func)[0].script())
        return r.compile(dispatch_target(default_target())).jit(), {
            "seconds": time.perf_counter() - t, "kernels": len(r.kernels), "split": args.split,
            "packed": [[list(shape), dtype] for shape, dtype in r.packed],
            "candidates": r.candidates, "skipped": r.skipped, "phases_s": r.seconds,
            "table": {key(i): k for i, k in r.table.items()},
            "latency_ms": {key(i): v for i, v in r.latency_ms.items()},
            "served_ms": {key(i): v for i, v in r.served_ms.items()},
            "predicted_ms": {key(i): v for i, v in r.predicted_ms.items()},
            "padded_from": {str(at): start for at, start in r.padded.items()},
            "chunked": r.chunked,
            "held": {key(i): dict(p for p in k if isinstance(p, tuple))
                     for i, k in r.keys.items() if any(isinstance(p, tuple) for p in k)},
        }

    def tuned_once():  # today's way: one shape tuned, its best schedule replayed
        t = time.perf_counter()
        at = specialize(func, dict(zip(names, instance(args.single_at))))
        work = args.work_dir / "single"
        resumed(tvm.IRModule({"main": at}), work, single_trials, args.population, "single")
        replayed = apply_best(ms.database.JSONDatabase(work_dir=str(work)), at, func,
                              default_target())
        lib, packed = build_prepacked(replayed)
        return lib, {"seconds": time.perf_counter() - t, "packed": packed}

    made = set(args.arms.split(","))
    if "dynamic" in made:
        libs["dynamic"], facts["dynamic"] = cached(
            args.work_dir / "dynamic", tuned, dispatch_target(default_target())
        )
    if "single" in made:
        libs["single"], facts["single"] = cached(
            args.work_dir / "single", tuned_once, default_target()
        )
    shared = max(1, args.trials // len(listed))  # same-budget's trials per instance
    alone = [("per-instance", probe, args.per_instance_trials)
             for probe in probes if "per-instance" in made]
    alone += [("same-budget", at, shared) for at in listed if "same-budget" in made]
    for arm, at, trials in alone:
        # the fixed-shape function, tuned and built at its instance
        # a same-budget arm's directory names its budget: another budget must not resume it
        name = "per_instance" if arm == "per-instance" else f"same_budget_{trials}t"
        work, label = args.work_dir / f"{name}_{key(at)}", f"{arm} {key(at)}"

        def alone_at(at=at, work=work, trials=trials, label=label):
            return tuned_alone(func, dict(zip(names, at)), work, trials, args.population, label)

        libs[arm, at], facts[label] = cached(work, alone_at, default_target())
        packed[arm, at] = facts[label].get("packed", [])
    seconds = {name: f["seconds"] for name, f in facts.items()}
    packed |= {arm: facts[arm].get("packed", []) for arm in ("dynamic", "single") if arm in facts}
    if not {"dynamic", "single", "per-instance"} <= made:
        print(f"Made {', '.join(sorted(made))} in {args.work_dir} (" + ", ".join(
            f"{k} {v:.0f} s" for k, v in seconds.items()) + "); nothing measured.")
        return

    rows, raw = [], {}
    ratios = {"per-instance": [], "same-budget": []}  # dynamic / it, at listed instances
    for at in listed + unlisted:
        wl = workload(at)
        values = wl.input_arrays(seed=1)
        ref = wl.numpy(values)
        arms = ["dynamic", "single", *(a for a in [("per-instance", at), ("same-budget", at)]
                                       if a in libs)]
        times = side_by_side({arm: libs[arm] for arm in arms}, values, ref, key(at),
                             args.rounds, args.repeats, packed)
        ms_of = {(a[0] if isinstance(a, tuple) else a): median(t) for a, t in times.items()}
        if args.baselines:
            torch = measure_torch(wl, values, ref, args.repeats * args.rounds, False)
            ort = measure_ort(wl, values, ref, args.repeats * args.rounds)
            ms_of["PyTorch"] = min(median(torch.eager2_ms), median(torch.eager1_ms))
            if not ort.skipped:
                ms_of["onnxruntime"] = min(median(ort.ort2_ms), median(ort.ort1_ms))
        raw[key(at)] = {(a[0] if isinstance(a, tuple) else a): t for a, t in times.items()} | {
            k: v for k, v in ms_of.items() if k in ("PyTorch", "onnxruntime")}
        for arm in ratios.keys() & ms_of.keys():
            ratios[arm].append(ms_of["dynamic"] / ms_of[arm])
        dyn = facts["dynamic"]
        baseline = min([ms_of[k] for k in ("PyTorch", "onnxruntime") if k in ms_of] or [np.nan])
        alike = [ms_of.get(arm) for arm in ratios]  # per-instance, same-budget
        rows.append([
            key(at), "yes" if at in listed else "no",
            str(dyn["table"][key(at)]) if at in listed else "-",
            fmt(ms_of["dynamic"]),
            fmt(dyn["predicted_ms"][key(at)]) if at in listed else "-",
            fmt(ms_of["single"]),
            *(fmt(v) if v else "-" for v in alike),
            fmt(ms_of.get("PyTorch", float("nan"))),
            fmt(ms_of.get("onnxruntime", float("nan"))),
            fmt(ms_of["dynamic"] / ms_of["single"]),
            *(fmt(ms_of["dynamic"] / v) if v else "-" for v in alike),
            fmt(ms_of["dynamic"] / baseline),
        ])
    print(header(load))
    print(f"{args.workload}, sizes {sizes}" + (", weights prepacked" if args.packed else "")
          + f"; grid {grid}; budget {args.trials} trials for "
          f"dynamic (split by {args.split}), {single_trials} for single, "
          f"{args.per_instance_trials} per probe, "
          f"{shared} per instance same-budget; "
          f"population {args.population}; "
          f"tuning and choosing took " + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items())
          + " (dynamic's phases: " + ", ".join(
              f"{k} {v:.0f} s" for k, v in facts["dynamic"]["phases_s"].items())
          + f"); dynamic: {facts['dynamic']['candidates']} candidates, "
          f"{facts['dynamic']['kernels']} kernels, "
          + ("timed everywhere" if args.time_everywhere else "predicted at long lengths")
          + "; padded: " + (", ".join(
              f"{names[0]} {start} to {int(at) - 1} on the bodies of {at}"
              for at, start in facts["dynamic"].get("padded_from", {}).items()) or "none")
          + ("; beyond the largest in chunks of it" if facts["dynamic"].get("chunked")
             else "")
          + "; row tiles held to the length at: "
          + (", ".join(facts["dynamic"].get("held", {})) or "none") + ".")
    print(markdown_table(
        ["instance", "listed", "kernel", "dynamic ms", "predicted", "single ms",
         "per-instance ms", "same-budget ms", "PyTorch ms", "onnxruntime ms",
         "dyn / single", "dyn / per-instance", "dyn / same-budget", "dyn / fastest baseline"],
        rows))
    for arm, of_arm in ratios.items():
        print(against_alone(arm, of_arm, seconds))
    if args.json:
        write_json(args.json, {"workload": args.workload, "sizes": sizes, "grid": grid,
                               "packed": args.packed,
                               "ms": raw, "arms": facts})


def against_alone(arm: str, ratios: list[float], seconds: dict[str, float]) -> str:
    """Issue 17's targets over the listed instances that ``arm`` tuned alone: how many the
    dispatched module serves within 10% of their own tuning, the mean ratio (the grid's
    instances weigh alike), and the tuning time of those instances against dynamic's."""
    alone = [v for k, v in seconds.items() if k.startswith(arm + " ")]
    if not ratios:
        return f"No listed instance was tuned alone ({arm})."
    return (f"Against {arm} tuning at {len(ratios)} listed instances: within 10% at "
            f"{sum(r <= 1.1 for r in ratios)}, worst {max(ratios):.3f}, mean ratio "
            f"{np.mean(ratios):.3f}; tuning them alone took {sum(alone):.0f} s, "
            f"{sum(alone) / seconds['dynamic']:.2f}x dynamic's {seconds['dynamic']:.0f} s.")


def side_by_side(
    libs: dict[Any, Any], values: list[np.ndarray], ref: list[np.ndarray], where: str,
    rounds: int, repeats: int, packed: dict[Any, list] | None = None,
) -> dict[Any, list[float]]:
    """Each library's ``main`` checked against numpy's ``ref`` on ``values`` (its first
    call, so that the clock never sees one), then all timed in ``rounds`` that take each
    in turn, so that a drift of the machine falls on all alike: ms by key. Each round
    starts one library further on, after an untimed round of all: whatever the work
    before (the previous instance's PyTorch and onnxruntime runs) leaves on the cores
    slowed the first library timed in every first round, and that was always
    dynamic's (notes.md). A library with ``packed`` weights (their [shape, dtype] by
    key) gets them made by its ``prepack`` first, untimed, as a deployment packs them
    once."""
    calls = {}
    for name, lib in libs.items():
        outs = [tvm.runtime.tensor(np.zeros(r.shape, "float32")) for r in ref]
        ins = [tvm.runtime.tensor(v) for v in values]
        made = [tvm.runtime.tensor(np.zeros(s, d)) for s, d in (packed or {}).get(name, [])]
        if made:  # after the outputs, as the function takes them
            lib["prepack"](*ins, *outs, *made)
        lib["main"](*ins, *outs, *made)
        err = max(max_err(o.numpy(), r) for o, r in zip(outs, ref, strict=True))
        if err > 1e-4:
            raise SystemExit(f"{name} off from numpy at {where}: {err:.3g}")
        calls[name] = [*ins, *outs, *made]
    names = list(libs)
    for name in names:
        evaluator_latency_ms(libs[name], calls[name], repeats)
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name] += evaluator_latency_ms(libs[name], calls[name], repeats)
    return times


def tuned_alone(
    func: tvm.tirx.PrimFunc, at: dict[str, int], work: Path, trials: int, population: int,
    label: str,
) -> tuple[Any, dict]:
    """The symbolic ``func`` fixed at ``at``, tuned alone in ``work`` and built there: the
    per-instance and same-budget arms' kernel, and its tuning seconds."""
    t = time.perf_counter()
    fixed = tvm.IRModule({"main": specialize(func, at)})
    resumed(fixed, work, trials, population, label)
    best = ms.tir_integration.compile_tir(
        ms.database.JSONDatabase(work_dir=str(work)), fixed, default_target())
    lib, packed = build_prepacked(best.mod["main"])
    return lib, {"seconds": time.perf_counter() - t, "packed": packed}


def resumed(mod: tvm.IRModule, work: Path, trials: int, population: int, label: str) -> None:
    """``mod`` tuned in ``work`` until it holds ``trials`` records of it: a killed arm, or
    one whose library is made again, resumes from its records (a line a kill cut short
    dropped first)."""
    if (work / "database_tuning_record.json").exists():
        repair(work)
    more = trials - records_of(work, mod)
    if more > 0:
        tune_module(mod, work, more, default_target(), label=label, population=population)


def cached(
    directory: Path, make: Callable[[], tuple[Any, dict]], built_for: tvm.target.Target
) -> tuple[Any, dict]:
    """The library and facts an arm left in ``directory``, or both made now and left
    there, so that a run killed after an arm neither tunes nor chooses it again. A
    library built for another target (its options included: a copied work dir's, say)
    or by another TIR pipeline (:func:`scan_tir.transform.pipeline.signature`) is made
    again, from the records already there; its facts keep the seconds the first making
    took, which the records cost (the remaking only replays and builds them)."""
    lib_path, facts_path = directory / "arm.so", directory / "arm.json"
    key = f"{built_for} | {signature()}"
    old = json.loads(facts_path.read_text()) if facts_path.exists() else None
    if old is not None and lib_path.exists():
        if old.get("built_for") == key:
            return tvm.runtime.load_module(str(lib_path)), old
        print(f"{directory}: built for {old.get('built_for', 'another target')}, made again")
    lib, facts = make()
    if old is not None:
        facts["seconds"], facts["remade_seconds"] = old["seconds"], facts["seconds"]
    facts["built_for"] = key
    directory.mkdir(parents=True, exist_ok=True)
    lib.export_library(str(lib_path))
    facts_path.write_text(json.dumps(facts, indent=1) + "\n")
    return lib, facts


if __name__ == "__main__":
    main()
