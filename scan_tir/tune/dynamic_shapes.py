"""Tuning a function of symbolic sizes for a weighted set of size instances (DietCode's idea).

Serving traffic has every sequence length; MetaSchedule tunes one static shape. DietCode
(MLSys 2022) tunes once for a set of shape instances and dispatches among a few kernels
at run time. Here: the function is tuned at a few representative instances (by default
the corners of the grid, smallest and largest of every size), each with its share of
the budget; the best records of each are replayed on the symbolic function
(:func:`~scan_tir.tune.symbolic.replay_sized`, which keeps tile shapes and pads the
hoisted product), each replayed kernel is built once and timed at every instance, and at
most ``kernels`` of them are chosen greedily by weighted latency. :func:`dispatch` joins
the chosen ones into one function that picks by shape (the instance a shape rounds up
to). Every kernel is checked against the untuned function at every instance before it
may be chosen; one that fails to replay, to build or to compute right is skipped with
its reason logged.

Not yet DietCode's cost model: every candidate is timed at every instance instead of
being timed at a few and predicted at the rest. A symbolic batch does not build in TVM
0.27 once the step is tiled over it (notes.md), so batch is fixed for now.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target

from ..db import numerics
from ..errors import ScanLoweringError
from ..lower.vocabulary import expected_scans, scan_violations
from .dispatch import dispatch, nearest_instance
from .progress import log
from .symbolic import replay_sized, size_vars, specialize
from .target import default_target
from .tuner import records_of, tune_module

Instance = tuple[int, ...]


@dataclass
class Dynamic:
    """What :func:`dynamic` chose, and the measurements it chose by."""

    func: tirx.PrimFunc  # the dispatching function
    names: list[str]  # the sizes, in the order of every instance tuple
    kernels: list[tirx.PrimFunc]  # the chosen schedules, replayed on the symbolic function
    table: dict[Instance, int]  # instance -> index into kernels
    latency_ms: dict[Instance, float]  # the chosen kernel's median at each instance
    candidates: int  # kernels timed (replayed, built and right at every instance)
    skipped: list[str] = field(default_factory=list)  # why each other record was not


def dynamic(
    func: tirx.PrimFunc,
    work_dir: str | Path,
    instances: Mapping[str, Sequence[int]],
    *,
    weights: Mapping[Instance, float] | None = None,
    trials: int = 64,
    kernels: int = 4,
    candidates: int = 4,
    representatives: Sequence[Instance] | None = None,
    target: Target | None = None,
    population: int = 512,
    repeat: int = 3,
) -> Dynamic:
    """Tune ``func`` for the grid ``instances`` (size name -> values) and dispatch.

    Parameters
    ----------
    weights
        Per instance (a tuple in ``instances``' order of sizes); default all equal.
    trials
        The tuning budget over all representatives (records already in ``work_dir``
        count, as with :func:`~scan_tir.tune.tune`).
    kernels
        At most this many schedules in the dispatching function.
    candidates
        Best records of each representative replayed and timed.
    representatives
        Instances tuned at; default the grid's corners.
    """
    target = target or default_target()
    names, grid = _grid(func, instances)
    weights = dict(weights) if weights is not None else {i: 1.0 for i in grid}
    missing = [i for i in grid if i not in weights]
    if missing:
        raise ScanLoweringError(f"dynamic: no weight for instance(s) {missing[:3]}")
    reps = list(representatives) if representatives is not None else _corners(instances, names)
    tasks = {_task_name(names, r): specialize(func, dict(zip(names, r))) for r in reps}
    for i, (name, task) in enumerate(tasks.items()):  # each its share of the budget
        share = trials // len(tasks) + (i < trials % len(tasks))
        task_mod = tvm.IRModule({"main": task})
        more = share - records_of(Path(work_dir), task_mod)
        if more > 0:
            tune_module(task_mod, Path(work_dir), more, target, label=f"dynamic {name}",
                        population=population)
    database = ms.database.JSONDatabase(work_dir=str(work_dir))

    reference = _build(func, target)
    cases = {i: _case(func, names, i, reference) for i in grid}
    expected = expected_scans(tvm.IRModule({"main": func}))["main"]
    timed: list[tuple[tirx.PrimFunc, dict[Instance, float]]] = []
    skipped: list[str] = []
    for name, task in tasks.items():
        task_mod = tvm.IRModule({"main": task})
        records = database.get_top_k(database.commit_workload(task_mod), candidates)
        for rank, record in enumerate(records):
            where = f"{name} #{rank}"
            kernel, times = _candidate(record, func, expected, target, cases, repeat)
            if isinstance(kernel, str):
                skipped.append(f"{where}: {kernel}")
                log(f"dynamic: skipped {where}: {kernel}")
            else:
                timed.append((kernel, times))
    if not timed:
        raise ScanLoweringError(
            "dynamic: no tuned record serves the symbolic function: " + "; ".join(skipped)
        )
    chosen = _choose(timed, grid, weights, kernels)
    table = {i: min(range(len(chosen)), key=lambda k: timed[chosen[k]][1][i]) for i in grid}
    latency = {i: timed[chosen[table[i]]][1][i] for i in grid}
    picked = [timed[c][0] for c in chosen]
    choice = nearest_instance(func, {n: instances[n] for n in names}, table)
    return Dynamic(
        dispatch(func, picked, choice), names, picked, table, latency, len(timed), skipped
    )


def _grid(func: tirx.PrimFunc, instances: Mapping[str, Sequence[int]]) -> tuple[list, list]:
    sizes = size_vars(func)
    names = list(instances)
    unknown = sorted(set(names) - set(sizes))
    if unknown:
        raise ScanLoweringError(
            f"dynamic: the function has no symbolic size {unknown}; it has {sorted(sizes)}"
        )
    unlisted = sorted(set(sizes) - set(names))
    if unlisted:
        raise ScanLoweringError(f"dynamic: no instances given for the size(s) {unlisted}")
    bad = {n: list(v) for n, v in instances.items() if not v or min(v) < 1}
    if bad:
        raise ScanLoweringError(f"dynamic: every size needs positive instances, got {bad}")
    values = [sorted(set(instances[n])) for n in names]
    return names, list(itertools.product(*values))


def _corners(instances: Mapping[str, Sequence[int]], names: list[str]) -> list[Instance]:
    ends = [sorted({min(instances[n]), max(instances[n])}) for n in names]
    return list(itertools.product(*ends))


def _task_name(names: list[str], instance: Instance) -> str:
    return "_".join(f"{n}{v}" for n, v in zip(names, instance))


@dataclass
class _Case:
    args: list[np.ndarray]
    outputs: list[int]  # positions of the outputs among args
    expected: list[np.ndarray]


def _case(func: tirx.PrimFunc, names: list[str], instance: Instance, reference) -> _Case:
    """Random inputs at ``instance`` and the untuned function's outputs on them (the
    parameters some block writes)."""
    fixed = specialize(func, dict(zip(names, instance)))
    shapes = [(tuple(int(d) for d in p.ty.shape), str(p.ty.dtype)) for p in fixed.params]
    rng = np.random.default_rng(0)
    args = [rng.uniform(-1, 1, s).astype(d) for s, d in shapes]
    written = _written(func)
    outputs = [k for k, p in enumerate(func.params) if any(p.same_as(w) for w in written)]
    got = numerics.call(reference, args)
    return _Case(args, outputs, [got[k] for k in outputs])


def _written(func: tirx.PrimFunc) -> list[tirx.Var]:
    found: list[tirx.Var] = []

    def on_block(block: s_tir.SBlock) -> None:
        found.extend(region.source for region in block.writes)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, on_block))
    return found


def _build(func: tirx.PrimFunc, target: Target) -> tvm.runtime.Module:
    return numerics.build(func.with_attr("global_symbol", "main"), target)


def _candidate(
    record: ms.database.TuningRecord,
    func: tirx.PrimFunc,
    expected: list,
    target: Target,
    cases: dict[Instance, _Case],
    repeat: int,
) -> tuple[tirx.PrimFunc | str, dict[Instance, float]]:
    """The record's schedule on the symbolic function and its median ms at each
    instance; or why it is not a candidate."""
    try:
        kernel = replay_sized(record.trace, func)
    except Exception as err:  # ScheduleError, TVM's InternalError on a symbolic tile
        return f"does not replay on the symbolic function ({_last(err)})", {}
    broken = scan_violations(kernel, expected)
    if broken:
        return f"breaks the scan: {'; '.join(broken)}", {}
    try:
        lib = _build(kernel, target)
    except Exception as err:  # TVM's codegen
        return f"does not build ({_last(err)})", {}
    times = {}
    for instance, c in cases.items():
        got = numerics.call(lib, c.args)
        for k, want in zip(c.outputs, c.expected):
            if not np.allclose(got[k], want, rtol=1e-4, atol=1e-4):
                return f"wrong result at {instance}", {}
        tensors = [tvm.runtime.tensor(a.copy()) for a in c.args]
        timer = lib.time_evaluator("main", tvm.cpu(), repeat=repeat, min_repeat_ms=20)
        times[instance] = statistics.median(timer(*tensors).results) * 1e3
    return kernel, times


def _choose(
    timed: list[tuple[tirx.PrimFunc, dict[Instance, float]]],
    grid: list[Instance],
    weights: Mapping[Instance, float],
    k: int,
) -> list[int]:
    """Greedy: start from the best single kernel by weighted latency, then add the one
    that lowers the weighted latency of the best-per-instance choice most, while any does."""
    chosen: list[int] = []

    def cost(ks: list[int]) -> float:
        return sum(weights[i] * min(timed[c][1][i] for c in ks) for i in grid)

    while len(chosen) < k:
        rest = [c for c in range(len(timed)) if c not in chosen]
        if not rest:
            break
        best = min(rest, key=lambda c: cost([*chosen, c]))
        if chosen and cost([*chosen, best]) >= cost(chosen):
            break
        chosen.append(best)
    return chosen


def _last(err: Exception) -> str:
    lines = [x for x in str(err).strip().splitlines() if x.strip()]
    return f"{type(err).__name__}: {lines[-1][:160] if lines else ''}"
