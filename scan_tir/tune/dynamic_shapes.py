"""Tuning a function of symbolic sizes for a weighted set of size instances (DietCode's idea).

Serving traffic has every batch size and sequence length; MetaSchedule tunes one static
shape. DietCode (MLSys 2022) tunes once for a set of shape instances and dispatches among
a few kernels at run time. A recurrence's sizes are of two kinds: a length, which only
repeats the step (the serial time loop), and sizes that shape the step (a batch), on
which the step's best tiles depend. So the function is tuned at every listed value of
the step's sizes at the shortest length (cheap to measure; the grid's corners where no
size shapes the step), each with its share of the budget; the best records of each are
replayed on the symbolic function (:func:`~scan_tir.tune.symbolic.replay_sized`, which
keeps tile shapes and pads the hoisted product) and built, generic and with the body
fixed at each listed value of the step's sizes (:func:`specialize_body`: a symbolic batch
costs the step its constant bounds and vector code). Each is timed at the two shortest
lengths and its latency at longer ones predicted (:mod:`~scan_tir.tune.instance_cost`:
affine in the length padded to its tiles), so a candidate costs two timings per step
size, not one per instance; at most ``kernels`` are chosen greedily by weighted latency,
then checked at every instance and timed there, and the table of which kernel serves
which instance comes from those timings. Timing races: a kernel whose one long run at an
instance is already far slower than the best there is not timed further there.
:func:`dispatch` joins the chosen ones into one function that picks by shape: at a listed
value of the step's sizes, the body fixed there; elsewhere the generic kernel of the
instance the shape rounds up to, the one whose generic build was fastest there.

A record that fails to replay, to build or to compute right where it was timed is
skipped with its reason logged (a body that does not build fixed at a step size is
served there by its generic build); a chosen kernel wrong at some instance is not used there
(the choice is made again without it there), never a wrong result. A symbolic batch is
served as a symbolic length is: the step's tiles over batch keep their tuned shape, the
last one guarded by a predicate (``scan_tir.transform.tile_buffers`` sizes its buffers,
which TVM 0.27 does not).
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
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
from ..lower.vocabulary import expected_scans, find_scans, scan_violations
from .dispatch import dispatch, nearest_instance
from .instance_cost import fit_latency, tile_multiples
from .progress import log
from .symbolic import replay_sized, size_vars, specialize, specialize_body
from .target import default_target
from .tuner import records_of, tune_module

Instance = tuple[int, ...]

#: A kernel whose one run at an instance takes ``RACE_MS`` or more (long enough that a
#: cold cache does not count) and ``RACE`` times the fastest so far there is not timed
#: further there: that one run is its figure.
RACE, RACE_MS = 2.0, 100.0


@dataclass
class Dynamic:
    """What :func:`dynamic` chose, and the measurements it chose by."""

    func: tirx.PrimFunc  # the dispatching function
    names: list[str]  # the sizes, in the order of every instance tuple
    kernels: list[tirx.PrimFunc]  # the chosen schedules, replayed on the symbolic function
    table: dict[Instance, int]  # instance -> index into kernels
    latency_ms: dict[Instance, float]  # the chosen kernel's median at each instance
    predicted_ms: dict[Instance, float]  # what the choice expected of it there
    candidates: int  # kernels that replayed, built and were right where timed
    skipped: list[str] = field(default_factory=list)  # why a record was not used (where)
    # (kernel, step sizes) served by the kernel's generic body: its body fixed there
    # does not build (a persistent launch whose parallel loop the fixed size removes)
    unfixed: set[tuple[int, Instance]] = field(default_factory=set)


@dataclass
class _Kernel:
    func: tirx.PrimFunc  # the schedule on the symbolic function
    lib: tvm.runtime.Module | None  # its generic build, for shapes off the grid
    where: str
    estimate: dict[Instance, float]  # ms, measured or predicted; inf where it is wrong
    measured: dict[Instance, float] = field(default_factory=dict)
    checked: set = field(default_factory=set)
    fixed: dict[Instance, tvm.runtime.Module] = field(default_factory=dict)  # step sizes -> lib
    only: Instance | None = None  # the step sizes it serves, where it has no generic build
    unfixed: set[Instance] = field(default_factory=set)  # step sizes its generic build serves


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
    predict: bool = True,
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
        Instances tuned at; default every listed value of the step's sizes at the
        shortest length (the grid's corners where no size shapes the step).
    predict
        Time each candidate at the two shortest lengths only (the grid's corners where
        no size shapes the step) and predict the other instances
        (:mod:`~scan_tir.tune.instance_cost`); the chosen kernels are then checked and
        timed everywhere. False times every candidate everywhere.
    """
    target = target or default_target()
    names, grid = _grid(func, instances)
    weights = dict(weights) if weights is not None else {i: 1.0 for i in grid}
    missing = [i for i in grid if i not in weights]
    if missing:
        raise ScanLoweringError(f"dynamic: no weight for instance(s) {missing[:3]}")
    step = _step_sizes(func, names)
    reps = (
        list(representatives)
        if representatives is not None
        else _representatives(instances, names, step)
    )
    main = func.with_attr("global_symbol", "main")  # as MetaSchedule's builder and runner call it
    tasks = {_task_name(names, r): specialize(main, dict(zip(names, r))) for r in reps}
    for i, (name, task) in enumerate(tasks.items()):  # each its share of the budget
        share = trials // len(tasks) + (i < trials % len(tasks))
        task_mod = tvm.IRModule({"main": task})
        more = share - records_of(Path(work_dir), task_mod)
        if more > 0:
            tune_module(
                task_mod,
                Path(work_dir),
                more,
                target,
                label=f"dynamic {name}",
                population=population,
            )
    database = ms.database.JSONDatabase(work_dir=str(work_dir))

    timed_at = _timed_at(instances, names, step) if predict else grid
    bench = _Bench(func, names, step, target, repeat)
    expected = expected_scans(tvm.IRModule({"main": func}))["main"]
    sizes = [size_vars(func)[n] for n in names]
    pool: list[_Kernel] = []
    skipped: list[str] = []
    for rep, (name, task) in zip(reps, tasks.items()):
        task_mod = tvm.IRModule({"main": task})
        records = database.get_top_k(database.commit_workload(task_mod), candidates)
        at = {names[k]: rep[k] for k in step}
        for rank, record in enumerate(records):
            where = f"{name} #{rank}"
            kernel = _replayed(record, func, expected, target, where, at)
            if isinstance(kernel, str):
                skipped.append(f"{where}: {kernel}")
                log(f"dynamic: skipped {where}: {kernel}")
                continue
            if kernel.only is not None:
                skipped.append(f"{where}: serves {at} only ({kernel.where})")
                log(f"dynamic: {where} serves {at} only ({kernel.where})")
                kernel.where = where
            serves = [i for i in timed_at if kernel.only in (None, tuple(i[k] for k in step))]
            off_grid = tuple(v + 1 for v in grid[0])  # the generic build, checked once
            try:
                generic_wrong = kernel.lib is not None and not bench.right(kernel, off_grid, True)
                wrong = [off_grid] if generic_wrong else []
                wrong += [i for i in serves if not wrong and not bench.right(kernel, i)]
            except Exception as err:  # TVM's codegen, on a body fixed at a step size
                skipped.append(f"{where}: does not build at fixed sizes ({_last(err)})")
                log(f"dynamic: skipped {where}: does not build at fixed sizes ({_last(err)})")
                continue
            if wrong:
                skipped.append(f"{where}: wrong result at {wrong[0]}")
                log(f"dynamic: skipped {where}: wrong result at {wrong[0]}")
                continue
            kernel.measured = {i: bench.time(kernel, i, _best(pool, i)) for i in serves}
            kernel.estimate = _estimates(kernel, grid, step, sizes)
            pool.append(kernel)
            log(f"dynamic: candidate {len(pool)} ({where}) timed at {len(serves)} instances")
    if not pool:
        raise ScanLoweringError(
            "dynamic: no tuned record serves the symbolic function: "
            + (
                "; ".join(skipped)
                or f"{work_dir} holds no valid record of its tasks (the "
                "tuning log says why its candidates failed)"
            )
        )
    if all(p.lib is None for p in pool):
        raise ScanLoweringError(
            "dynamic: no tuned record replays on the symbolic function, so no kernel serves "
            "shapes off the grid: " + "; ".join(skipped)
        )
    chosen = _checked_choice(pool, grid, weights, kernels, bench, skipped)
    for i in grid:  # the table comes from measurements, not from the model
        for c in sorted(chosen, key=lambda c: pool[c].estimate[i]):  # the likely best first
            if i not in pool[c].measured and pool[c].estimate[i] != math.inf:
                pool[c].measured[i] = bench.time(pool[c], i, _best(pool, i))
    measured = [{i: pool[c].measured.get(i, math.inf) for i in grid} for c in chosen]
    table = {i: min(range(len(chosen)), key=lambda k: measured[k][i]) for i in grid}
    latency = {i: measured[table[i]][i] for i in grid}
    predicted = {i: pool[chosen[table[i]]].estimate[i] for i in grid}
    anywhere = _fallbacks([pool[c] for c in chosen], measured, grid, bench)
    wrong = [i for i in grid if measured[anywhere[i]][i] == math.inf]
    if wrong:  # shapes off the grid near them would have no right kernel
        raise ScanLoweringError(
            f"dynamic: no generic kernel chosen is right at {wrong[:3]}: " + "; ".join(skipped)
        )
    picked = [pool[c].func for c in chosen]
    unfixed = {(k, u) for k, c in enumerate(chosen) for u in pool[c].unfixed}
    return Dynamic(
        _dispatching(func, names, step, instances, picked, table, anywhere, unfixed),
        names,
        picked,
        table,
        latency,
        predicted,
        len(pool),
        skipped,
        unfixed,
    )


def _dispatching(
    func: tirx.PrimFunc,
    names: list[str],
    step: list[int],
    instances: Mapping[str, Sequence[int]],
    picked: list[tirx.PrimFunc],
    table: dict[Instance, int],
    anywhere: dict[Instance, int],
    unfixed: set[tuple[int, Instance]],
) -> tirx.PrimFunc:
    """``func`` branching to ``picked`` by ``table``: at listed values of the step's sizes
    to a kernel's body fixed at those values (:func:`specialize_body`; its generic body
    where ``unfixed`` says so), elsewhere to the generic kernel ``anywhere`` gives the
    instance the shape rounds up to."""
    grid = {n: instances[n] for n in names}
    generic = nearest_instance(func, grid, anywhere)
    if not step:
        return dispatch(func, picked, generic)
    bodies = list(picked)
    variant: dict[tuple[int, Instance], int] = {}
    fixed_table = {}
    for i, k in table.items():
        key = (k, tuple(i[s] for s in step))
        if key in unfixed:
            fixed_table[i] = k
            continue
        if key not in variant:
            variant[key] = len(bodies)
            bodies.append(specialize_body(picked[k], {names[s]: i[s] for s in step}))
        fixed_table[i] = variant[key]
    sizes = size_vars(func)
    listed = None
    for values in itertools.product(*(sorted(set(instances[names[s]])) for s in step)):
        here = None
        for s, v in zip(step, values):
            test = sizes[names[s]] == tirx.IntImm(sizes[names[s]].ty.dtype, v)
            here = test if here is None else tirx.And(here, test)
        listed = here if listed is None else tirx.Or(listed, here)
    choice = tirx.Select(listed, nearest_instance(func, grid, fixed_table), generic)
    return dispatch(func, bodies, choice)


def _checked_choice(
    pool: list[_Kernel],
    grid: list[Instance],
    weights: Mapping[Instance, float],
    k: int,
    bench: _Bench,
    skipped: list[str],
) -> list[int]:
    """Choose by the estimates, check the chosen kernels at every instance, and choose
    again without a kernel where it is wrong, until every instance has a right one."""
    while True:
        timed = [(p.func, p.estimate) for p in pool]
        chosen = _choose(timed, grid, weights, k, [p.lib is not None for p in pool])
        changed = False
        for c in chosen:
            for i in grid:
                if i in pool[c].checked or pool[c].estimate[i] == math.inf:
                    continue
                if bench.right(pool[c], i):
                    pool[c].checked.add(i)
                    continue
                pool[c].estimate[i] = math.inf
                skipped.append(f"{pool[c].where}: wrong result at {i}, not used there")
                log(f"dynamic: {pool[c].where} is wrong at {i}; not used there")
                changed = True
        if changed:
            continue
        uncovered = [i for i in grid if min(pool[c].estimate[i] for c in chosen) == math.inf]
        if uncovered:
            raise ScanLoweringError(
                f"dynamic: no candidate is right at {uncovered[:3]}: " + "; ".join(skipped)
            )
        return chosen


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


def _step_sizes(func: tirx.PrimFunc, names: list[str]) -> list[int]:
    """Indices in ``names`` of the sizes no scan's time loop runs over (a batch): those
    shape the step, whose schedule depends on them; a length only repeats the step."""
    lengths: set[str] = set()
    for scan in find_scans(func):
        tvm_ffi.structural_walk(
            scan.loop.extent, (tvm.ir.expr.Var, lambda v: lengths.add(str(v.name)))
        )
    return [k for k, n in enumerate(names) if n not in lengths]


def _representatives(
    instances: Mapping[str, Sequence[int]], names: list[str], step: list[int]
) -> list[Instance]:
    """Every listed value of the step's sizes at the shortest lengths (a short length
    is cheap to measure and has the same step); the grid's corners where there is no
    length or no step size."""
    if not step or len(step) == len(names):
        return _corners(instances, names)
    values = [
        sorted(set(instances[n])) if k in step else [min(instances[n])] for k, n in enumerate(names)
    ]
    return list(itertools.product(*values))


def _timed_at(
    instances: Mapping[str, Sequence[int]], names: list[str], step: list[int]
) -> list[Instance]:
    """Where candidates are timed: every listed value of the step's sizes (each is a
    build of its own) at the two shortest lengths, which fit the length's cost; the
    corners where no size shapes the step."""
    if not step:
        return _corners(instances, names)
    values = [
        sorted(set(instances[n])) if k in step else sorted(set(instances[n]))[:2]
        for k, n in enumerate(names)
    ]
    return list(itertools.product(*values))


def _estimates(
    kernel: _Kernel, grid: list[Instance], step: list[int], sizes: list[tirx.Var]
) -> dict[Instance, float]:
    """Measured where timed; elsewhere :func:`fit_latency` over the lengths, fitted on
    the timings at the same values of the step's sizes (or on all, where none shapes the
    step)."""
    free = [k for k in range(len(sizes)) if k not in step]
    multiples = tile_multiples(kernel.func, [sizes[k] for k in free])
    groups: dict[Instance, dict[Instance, float]] = {}
    for i, ms_ in kernel.measured.items():
        groups.setdefault(tuple(i[k] for k in step), {})[tuple(i[k] for k in free)] = ms_
    models = {g: fit_latency(timed, multiples) for g, timed in groups.items() if free}
    estimate = {}
    for i in grid:
        g = tuple(i[k] for k in step)
        if i in kernel.measured:
            estimate[i] = kernel.measured[i]
        elif g in models:
            estimate[i] = max(models[g](tuple(i[k] for k in free)), 0.0)
        else:  # never timed at these step sizes (representatives given by hand)
            estimate[i] = math.inf
    return estimate


def _task_name(names: list[str], instance: Instance) -> str:
    return "_".join(f"{n}{v}" for n, v in zip(names, instance))


class _Bench:
    """Inputs at each instance, the untuned function's outputs on them (made when first
    needed), and the checks and timings of kernels there."""

    def __init__(
        self,
        func: tirx.PrimFunc,
        names: list[str],
        step: list[int],
        target: Target,
        repeat: int,
    ):
        self.func, self.names, self.step, self.repeat = func, names, step, repeat
        self.target = target
        self.reference = _build(func, target)
        written = _written(func)
        self.outputs = [k for k, p in enumerate(func.params) if any(p.same_as(w) for w in written)]
        self.cases: dict[Instance, tuple[list[np.ndarray], list[np.ndarray]]] = {}

    def case(self, instance: Instance) -> tuple[list[np.ndarray], list[np.ndarray]]:
        if instance not in self.cases:
            fixed = specialize(self.func, dict(zip(self.names, instance)))
            shapes = [(tuple(int(d) for d in p.ty.shape), str(p.ty.dtype)) for p in fixed.params]
            rng = np.random.default_rng(0)
            args = [rng.uniform(-1, 1, s).astype(d) for s, d in shapes]
            got = numerics.call(self.reference, args)
            self.cases[instance] = (args, [got[k] for k in self.outputs])
        return self.cases[instance]

    def lib(self, kernel: _Kernel, instance: Instance) -> tvm.runtime.Module:
        """The build of ``kernel`` that serves ``instance`` from the dispatching
        function: its body fixed at the instance's step sizes, if any."""
        if not self.step:
            return kernel.lib
        key = tuple(instance[s] for s in self.step)
        if kernel.only not in (None, key):
            raise ScanLoweringError(f"dynamic: {kernel.where} serves {kernel.only} only")
        if key not in kernel.fixed:
            fixed = {self.names[s]: v for s, v in zip(self.step, key)}
            try:
                kernel.fixed[key] = _build(specialize_body(kernel.func, fixed), self.target)
            except Exception as err:  # a legality check or TVM's codegen, at that size
                if kernel.lib is None:
                    raise
                log(f"dynamic: {kernel.where} does not build with its body fixed at {fixed} "
                    f"({_last(err)}); its generic build serves there")
                kernel.unfixed.add(key)
                kernel.fixed[key] = kernel.lib
        return kernel.fixed[key]

    def right(self, kernel: _Kernel, instance: Instance, generic: bool = False) -> bool:
        args, expected = self.case(instance)
        got = numerics.call(kernel.lib if generic else self.lib(kernel, instance), args)
        return all(
            np.allclose(got[k], want, rtol=1e-4, atol=1e-4)
            for k, want in zip(self.outputs, expected)
        )

    def time(
        self, kernel: _Kernel, instance: Instance, best: float = math.inf, generic: bool = False
    ) -> float:
        """Median ms of ``repeat`` runs of at least 20 ms each (of the ``generic`` build,
        else the one that serves ``instance``); or one run, where that run is long and
        ``RACE`` times ``best`` (the fastest at ``instance`` so far): such a kernel will
        not serve there, and at the largest instances one run takes seconds."""
        tensors = [tvm.runtime.tensor(a.copy()) for a in self.case(instance)[0]]
        lib = kernel.lib if generic else self.lib(kernel, instance)
        if best < math.inf:  # nothing to race against before the first figure
            start = time.perf_counter()
            lib["main"](*tensors)
            once = (time.perf_counter() - start) * 1e3
            if once >= RACE_MS and once > RACE * best:
                return once
        timer = lib.time_evaluator("main", tvm.cpu(), repeat=self.repeat, min_repeat_ms=20)
        return statistics.median(timer(*tensors).results) * 1e3


def _fallbacks(
    kernels: list[_Kernel], measured: list[dict[Instance, float]], grid: list[Instance], bench
) -> dict[Instance, int]:
    """For each instance, the kernel whose generic build is fastest there: it serves the
    shapes off the grid that round up to the instance. Where the step's sizes are
    symbolic, the generic build is another program than the body fixed at the
    instance (a symbolic batch costs the step its constant bounds and vector code), so
    it is timed itself; a kernel wrong at the instance is not considered there."""
    generic = [k for k, kernel in enumerate(kernels) if kernel.lib is not None]
    out: dict[Instance, int] = {}
    for i in grid:
        right = [k for k in generic if measured[k][i] != math.inf] or generic
        if len(right) == 1 or not bench.step:
            out[i] = min(right, key=lambda k: measured[k][i])
            continue
        times: dict[int, float] = {}
        for k in sorted(right, key=lambda k: measured[k][i]):
            times[k] = bench.time(kernels[k], i, min(times.values(), default=math.inf), True)
        out[i] = min(times, key=times.get)
        log(
            f"dynamic: generic builds at {i}: "
            + ", ".join(f"{kernels[k].where} {ms:.3g} ms" for k, ms in times.items())
        )
    return out


def _best(pool: list[_Kernel], instance: Instance) -> float:
    return min((k.measured[instance] for k in pool if instance in k.measured), default=math.inf)


def _written(func: tirx.PrimFunc) -> list[tirx.Var]:
    found: list[tirx.Var] = []

    def on_block(block: s_tir.SBlock) -> None:
        found.extend(region.source for region in block.writes)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, on_block))
    return found


def _build(func: tirx.PrimFunc, target: Target) -> tvm.runtime.Module:
    return numerics.build(func.with_attr("global_symbol", "main"), target)


def _replayed(
    record: ms.database.TuningRecord,
    func: tirx.PrimFunc,
    expected: list,
    target: Target,
    where: str,
    at: dict[str, int],
) -> _Kernel | str:
    """The record's schedule on the symbolic function, built; where it does not replay
    there, on the function with the step's sizes fixed ``at`` its representative (a
    schedule may fuse a batch loop of extent 1 with another, which a symbolic batch
    refuses), serving those sizes only; or why it is not a candidate."""
    only = None
    try:
        kernel = replay_sized(record.trace, func)
    except Exception as err:  # ScheduleError, TVM's InternalError on a symbolic tile
        why = f"does not replay on the symbolic function ({_last(err)})"
        if not at:
            return why
        try:
            kernel, only = replay_sized(record.trace, specialize_body(func, at)), at
        except Exception as err2:
            return f"{why}, nor at {at} ({_last(err2)})"
    broken = scan_violations(kernel, expected)
    if broken:
        return f"breaks the scan: {'; '.join(broken)}"
    if only is not None:
        return _Kernel(kernel, None, why, {}, only=tuple(only.values()))
    try:
        lib = _build(kernel, target)
    except Exception as err:  # TVM's codegen
        return f"does not build ({_last(err)})"
    return _Kernel(kernel, lib, where, {})


def _choose(
    timed: list[tuple[tirx.PrimFunc, dict[Instance, float]]],
    grid: list[Instance],
    weights: Mapping[Instance, float],
    k: int,
    generic: Sequence[bool] | None = None,
) -> list[int]:
    """Greedy: start from the best single kernel by weighted latency among the
    ``generic`` ones (those that serve every shape; default all), then add the one that
    lowers the weighted latency of the best-per-instance choice most, while any does."""
    chosen: list[int] = []
    generic = list(generic) if generic is not None else [True] * len(timed)

    def cost(ks: list[int]) -> float:
        return sum(weights[i] * min(timed[c][1][i] for c in ks) for i in grid)

    while len(chosen) < k:
        rest = [c for c in range(len(timed)) if c not in chosen and (chosen or generic[c])]
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
