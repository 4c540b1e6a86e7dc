"""Tuning a function of symbolic sizes for a weighted set of size instances (DietCode's idea).

Serving traffic has every batch size and sequence length; MetaSchedule tunes one static
shape. DietCode (MLSys 2022) tunes once for a set of shape instances and dispatches among
a few kernels at run time. A recurrence's sizes are of two kinds: a length, which only
repeats the step (the serial time loop), and sizes that shape the step (a batch), on
which the step's best tiles depend. So the function is tuned at listed values of the
step's sizes at the shortest length where the task has ``ROWS`` rows (cheap to measure;
the grid's corners where no size shapes the step): every other one where candidates are
timed one listed value away (``reach=1``), as each task costs the search's fixed cost
more than its trials. The budget is split evenly among the tasks (or half of it by the
weighted work each stands for: :mod:`~scan_tir.tune.budget`). A task's search is too
short for MetaSchedule's cost model to train within it, so it would measure a random
draw of its samples; it selects them by
the model trained on what the tasks before it measured
(:func:`~scan_tir.tune.search.learned_model`): one function at other batches. The
smallest batch's task, whose records spread the widest, is tuned in two halves, first
and last: the second selected by the model all the others trained. The best
records of each are replayed on the symbolic function
(:func:`~scan_tir.tune.symbolic.replay_sized`, which keeps tile shapes and pads the
hoisted product) and built, generic and with the body fixed at the step sizes near the
ones it was tuned at (replayed on :func:`specialize_body`'s function: a symbolic batch
costs the step its constant bounds and vector code, and its rows padded to the tuned
batch's tiles; a schedule tuned at batch 1 is a poor one at 64, so it is not built
there). A hoisted product's row tile is kept from the tuned length, so a record tuned at
64 steps would compute 64 steps' rows at 16: at a listed length shorter than its tile, a
body is replayed with the tile held to that length (``replay_sized``'s ``cap``;
:meth:`_Kernel.body_key` says which body serves where, and the dispatcher already
branches on the length), where that body is timed faster than the one not held (another
program, not always a faster one). Each is timed at the two shortest lengths and its
latency at longer ones predicted (:mod:`~scan_tir.tune.instance_cost`: affine in the
length padded to its tiles, fitted on the body the longer lengths run), so a candidate
costs a build and two short timings per nearby step size, not one per instance: the
builds and the long instances' runs were what made choosing cost more than tuning. At
most ``kernels`` are chosen greedily by weighted latency (a step size none of them was
timed at gets them timed there); each is then checked at every instance, and where its
checking run is far off the prediction (``SUSPECT``), and a second call too, the kernel
is timed there and the choice made again; so are chosen kernels whose figures at an
instance the model puts within that factor of each other, as it cannot tell them apart,
and, at the longest lengths, kernels not chosen within that factor of the one serving:
the table of which kernel serves which instance rests on measurements at long lengths
too. A candidate's builds are made with the others', one per core, before any is
timed. A checking run is never a figure itself: it is a module's first call at that
size (workspace touched for the first time, code generated lazily) and can take far
longer than the kernel's steady time. Timing
races: a kernel whose one long run at an instance is already far slower than the best
there is not timed further there. A figure above the kernel's own at a longer length, or
far above its checking runs there, was taken with the machine busy (a persistent step
whose thread lost its core waits at every barrier): it is timed again. :func:`dispatch`
joins the chosen ones into one function that picks by shape: at a listed value of the
step's sizes, the body fixed there; at a batch between two listed ones, where the body
fixed at the next listed batch beats the generic build per row, that body on copies
padded to its batch (:mod:`~scan_tir.tune.padding`), and past the largest, above the
batch where chunks of it beat the generic build, the body fixed there in chunks of it;
elsewhere the generic kernel of the instance the shape rounds up to, the one whose
generic build was fastest there.

A record that does not replay where the batch is symbolic (a fusion of a batch loop of
extent 1, or batch tiles whose product covers only batches up to its own) is replayed
with the body fixed at each listed batch near its own and serves those it replays at.
A record that fails to replay, to build or to compute right where it was timed is
skipped with its reason logged (a body that does not build fixed at a step size is
served there by its generic build; where no record replays on the symbolic function, the
untuned function is the generic kernel, so shapes off the grid are still served); a
chosen kernel wrong at some instance is not used there (the choice is made again without
it there), never a wrong result. A symbolic batch is
served as a symbolic length is: the step's tiles over batch keep their tuned shape, the
last one guarded by a predicate (``scan_tir.transform.tile_buffers`` sizes its buffers,
which TVM 0.27 does not).
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.schedule import Trace
from tvm.target import Target

from ..db import numerics
from ..errors import ScanLoweringError
from ..lower.vocabulary import expected_scans, find_scans, scan_violations
from ..transform.pipeline import PIPELINE
from ..transform.weight_prepack import prepack_module
from .budget import SPLITS, split
from .dispatch import dispatch, dispatch_target, nearest_instance
from .instance_cost import fit_latency, tile_multiples
from .padding import accesses, padded
from .progress import log
from .search import learned_model
from .symbolic import replay_sized, size_vars, specialize, specialize_body
from .target import default_target
from .tuner import records_of_each, tune_module

Instance = tuple[int, ...]
#: sizes by name -> (input arrays, expected output arrays) there; see :func:`dynamic`.
Reference = Callable[[dict[str, int]], tuple[list[np.ndarray], list[np.ndarray]]]

#: A kernel whose one run at an instance (after its checking run there, so not a
#: module's first call) takes ``RACE_MS`` or more and ``RACE`` times the fastest so far
#: there is not timed further there: that one run is its figure.
RACE, RACE_MS = 2.0, 100.0
#: A chosen kernel's checking run at an instance it was not timed at, off the model's
#: figure there by more than this factor either way, gets it timed there: the model's
#: line through two short lengths misses what the longer ones do to the cache.
SUSPECT = 1.25
#: The dispatching function, built whole, timed at a listed instance more than this
#: factor over the figure its kernel was chosen by there is reported: its branch was
#: built otherwise than the kernel alone (a build defect, not a wrong choice).
SLOWER = 1.25
#: A task is tuned at the shortest listed length where it has this many rows (the
#: product of its sizes, a hoisted input product's rows): batch 1 at 16 steps tiles a
#: 16-row product no longer length runs, and its records were slower at every length,
#: 16 steps included, than ones tuned at 64 steps or more (notes.md).
ROWS = 64
#: Builds at a time while choosing (one per core; nothing is timed meanwhile).
BUILDS = os.cpu_count() or 1


@dataclass
class Dynamic:
    """What :func:`dynamic` chose, and the measurements it chose by."""

    func: tirx.PrimFunc  # the dispatching function
    names: list[str]  # the sizes, in the order of every instance tuple
    kernels: list[tirx.PrimFunc]  # the chosen schedules, replayed on the symbolic function
    table: dict[Instance, int]  # instance -> index into kernels
    # the serving kernel's figure at each instance: its median where timed, else the model's
    latency_ms: dict[Instance, float]
    predicted_ms: dict[Instance, float]  # the model's figure for it there
    candidates: int  # tuned records that replayed, built and were right where timed
    # wall time of each phase (tune, candidates, choice, fallbacks, padding, dispatch,
    # check: the whole function's), and
    # of the reference outputs' computation among them (what the checks compare with)
    seconds: dict[str, float]
    skipped: list[str] = field(default_factory=list)  # why a record was not used (where)
    # (kernel, body key) served by the kernel's generic body: its body fixed there
    # does not build (a persistent launch whose parallel loop the fixed size removes)
    unfixed: set[tuple[int, tuple]] = field(default_factory=set)
    # listed batch -> the smallest batch below it that runs its bodies on padded copies
    padded: dict[int, int] = field(default_factory=dict)
    # batches above this one (at or beyond the largest listed) run in chunks of the
    # largest listed; 0 where none do
    chunked: int = 0
    # instance -> the body of its kernel that serves it (:meth:`_Kernel.body_key`: the
    # step sizes, then the lengths its tiles are held to there, if any)
    keys: dict[Instance, tuple] = field(default_factory=dict)
    # instance -> the ms of the dispatching function itself, built whole, there (:func:`_served`)
    served_ms: dict[Instance, float] = field(default_factory=dict)
    # the target the function was built for while choosing, and that build
    built: tuple[Target, tvm.runtime.Executable] | None = None
    # instance -> the kernel whose generic build serves the shapes off the listed step
    # sizes that round up to it (:func:`_fallbacks`); a kernel in neither this nor
    # ``unfixed`` has no generic body in ``func`` (:func:`~scan_tir.tune.dispatch.dispatch`
    # leaves out a body no shape reaches)
    generic: dict[Instance, int] = field(default_factory=dict)

    def compile(self, target: Target | None = None) -> tvm.runtime.Executable:
        """The dispatching function built as ``main`` for ``target`` (default: this
        machine's), with :func:`~scan_tir.tune.dispatch.dispatch_target`'s options. Where
        its kernels pack weights, ``main`` takes them packed after the function's
        parameters (:attr:`packed`), and ``prepack``, of the same arguments, packs them:
        run it once, ``main`` at every call. For the target :func:`dynamic` tuned for,
        the build it checked."""
        wanted = dispatch_target(target or default_target())
        if self.built is not None and str(self.built[0]) == str(wanted):
            return self.built[1]
        return _compiled(self.func, wanted)[0]

    @property
    def packed(self) -> list[tuple[tuple[int, ...], str]]:
        """Shape and dtype of each packed weight ``main`` takes after the function's
        parameters (:func:`~scan_tir.transform.weight_prepack.prepack_module`); empty
        where no kernel packs one."""
        return prepack_module(self.func)[1]


@dataclass
class _Kernel:
    func: tirx.PrimFunc  # the schedule on the symbolic function
    lib: _Built | None  # its generic build, for shapes off the grid
    where: str
    estimate: dict[Instance, float]  # ms, measured or predicted; inf where it is wrong
    predicted: dict[Instance, float] = field(default_factory=dict)  # the model's, as fitted
    measured: dict[Instance, float] = field(default_factory=dict)
    checked: set = field(default_factory=set)
    fixed: dict[Instance, _Built] = field(default_factory=dict)  # step sizes -> lib
    # Where the record does not replay on the symbolic function: step sizes -> the record
    # replayed on the function with its body fixed there, the only sizes it serves
    bodies: dict[Instance, tirx.PrimFunc] = field(default_factory=dict)
    unfixed: set[tuple] = field(default_factory=set)  # body keys its generic build serves
    trace: Trace | None = None  # the record's, replayed for each body
    base: tirx.PrimFunc | None = None  # the symbolic function it is a schedule of
    # held body keys where the body not held was timed faster: that one serves there
    unheld: set[tuple] = field(default_factory=set)
    # At the step sizes where a held body was timed: the body not held (what the longer
    # lengths run), timed at lengths that are whole multiples of its tiles, where it
    # pads nothing; the longer lengths' estimates there are fitted on these (_line)
    line: dict[Instance, float] = field(default_factory=dict)
    _tiles: dict[tuple, dict[str, int]] = field(default_factory=dict)  # body key -> tiles
    _replays: dict[tuple, tirx.PrimFunc] = field(default_factory=dict)  # body key -> body

    def serves(self, key: Instance) -> bool:
        """Whether the kernel has a body for these step sizes."""
        return not self.bodies or key in self.bodies

    def body_key(self, sizes: dict[str, int], lengths: Mapping[str, int]) -> tuple:
        """Which body serves the step ``sizes`` at ``lengths``: the step sizes, then a
        (name, value) pair for each length shorter than the tile its body at those sizes
        pads rows of that length to (a hoisted product's, tuned at a longer length),
        where the body is replayed with its tiles held to that length, unless the body
        not held was timed faster there (:func:`_timed`)."""
        key = tuple(sizes.values())
        if self.trace is None:
            return key
        tiles = self.tiles(sizes)
        held = (*key, *((n, v) for n, v in lengths.items() if v < tiles.get(n, 1)))
        return key if held in self.unheld else held

    def tiles(self, sizes: dict[str, int], lengths: Mapping[str, int] | None = None) -> dict:
        """The tile over each length (:func:`tile_multiples`) of the body serving the step
        ``sizes`` at ``lengths`` (default: of the body not held to any)."""
        key = self.body_key(sizes, lengths) if lengths else tuple(sizes.values())
        if key not in self._tiles:
            try:
                body = self.body(sizes, lengths)
            except Exception:  # no body at these sizes: nothing to hold (its build says why)
                return {}
            named = size_vars(body)
            free = [n for n in named if n not in sizes]
            self._tiles[key] = dict(zip(free, tile_multiples(body, [named[n] for n in free])))
        return self._tiles[key]

    def body(
        self, sizes: dict[str, int], lengths: Mapping[str, int] | None = None
    ) -> tirx.PrimFunc:
        """Its schedule with the body fixed at ``sizes`` (the step's, in order): the record
        replayed on the function with those sizes fixed, its tiles held to ``lengths`` where
        :meth:`body_key` says so. Replayed, not the symbolic schedule's body fixed there:
        that one keeps the rows padded to the tiles of the batch it was tuned at (a record
        tuned at batch 4 computes four rows at batch 2). Where the replay fails or breaks
        the scan, the symbolic schedule's body: slower there, still right."""
        own = tuple(sizes.values())
        key = self.body_key(sizes, lengths) if lengths else own
        if self.bodies and key == own:  # replayed at these sizes already
            return self.bodies[own]
        if self.trace is None:
            return specialize_body(self.func, sizes)
        if key not in self._replays:
            cap = dict(key[len(own) :])
            try:
                body = replay_sized(self.trace, specialize_body(self.base, sizes), cap)
                expected = expected_scans(tvm.IRModule({"main": self.base}))["main"]
                broken = scan_violations(body, expected)
                if broken:
                    raise ScanLoweringError("; ".join(broken))
            except Exception as err:  # ScheduleError, or the scan check
                log(f"dynamic: {self.where} not replayed at {sizes} {cap or ''} ({_last(err)})")
                body = self.body(sizes) if cap else (
                    self.bodies[own] if self.bodies else specialize_body(self.func, sizes))
            self._replays[key] = body
        return self._replays[key]


def dynamic(
    func: tirx.PrimFunc,
    work_dir: str | Path,
    instances: Mapping[str, Sequence[int]],
    *,
    weights: Mapping[Instance, float] | None = None,
    trials: int = 64,
    split_by: str = SPLITS[0],
    kernels: int = 4,
    candidates: int = 2,
    reach: int | None = 1,
    representatives: Sequence[Instance] | None = None,
    predict: bool = True,
    target: Target | None = None,
    population: int = 512,
    repeat: int = 3,
    reference: Reference | None = None,
) -> Dynamic:
    """Tune ``func`` for the grid ``instances`` (size name -> values) and dispatch.

    Parameters
    ----------
    weights
        Per instance (a tuple in ``instances``' order of sizes); default all equal.
    trials
        The tuning budget over all representatives (records already in ``work_dir``
        count, as with :func:`~scan_tir.tune.tune`), split among the representatives.
    split_by
        ``"even"``: every representative the same share; ``"work"``: half evenly, the
        rest by the weighted work each stands for (:func:`~scan_tir.tune.budget.split`).
    kernels
        At most this many schedules in the dispatching function.
    candidates
        Best records of each representative replayed and timed.
    reach
        A candidate is built and timed at the listed values of the step's sizes at most
        this many places from its representative's, on either side (None: at all).
    representatives
        Instances tuned at; default every ``reach + 1``-th listed value of the step's
        sizes (the smallest and largest included), so that every listed value is within
        ``reach`` of a tuned one, each at the shortest listed length where it has
        ``ROWS`` rows (the grid's corners where no size shapes the step).
    predict
        Time each candidate at the two shortest lengths only (the grid's corners where
        no size shapes the step) and at its own representative, and predict the other
        instances
        (:mod:`~scan_tir.tune.instance_cost`); the chosen kernels are then checked and
        timed everywhere. False times every candidate everywhere.
    reference
        Inputs at an instance (its sizes by name; the parameters the function does not
        write, in order) and the outputs expected from them: what every kernel is checked
        against there before it is timed or served, and run on. Default: random inputs
        and the untuned function's outputs, which at the longest instances take most of
        the time spent choosing (its hoisted products are untiled loops); a workload's
        inputs and numpy reference (:meth:`~scan_tir.workloads.Workload.symbolic_case`)
        take seconds.
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
        else _representatives(instances, names, step, reach)
    )
    clock = _Clock()
    main = func.with_attr("global_symbol", "main")  # as MetaSchedule's builder and runner call it
    tasks = {_task_name(names, r): specialize(main, dict(zip(names, r))) for r in reps}
    task_mods = [tvm.IRModule({"main": task}) for task in tasks.values()]
    budgets = split(trials, reps, grid, weights, step or list(range(len(names))), split_by)
    log("dynamic: trials per task " + ", ".join(f"{n} {b}" for n, b in zip(tasks, budgets)))
    model = None
    have = records_of_each(Path(work_dir), task_mods)  # a run adds its own task's only
    done, names_of = dict(enumerate(have)), list(tasks)
    for t, upto in _tuning_plan(reps, step, budgets):
        if upto > done[t]:  # selecting by what the tasks before it measured
            if model is None:  # trained once; each run then adds what it measures
                Path(work_dir).mkdir(parents=True, exist_ok=True)
                measured = ms.database.JSONDatabase(work_dir=str(work_dir))
                model = learned_model(measured, task_mods, target)
            tune_module(
                task_mods[t],
                Path(work_dir),
                upto - done[t],
                target,
                label=f"dynamic {names_of[t]}",
                population=population,
                cost_model=model,
            )
            done[t] = upto
    clock.lap("tune")
    database = ms.database.JSONDatabase(work_dir=str(work_dir))

    timed_at = _timed_at(instances, names, step) if predict else grid
    bench = _Bench(func, names, step, target, repeat, reference)
    expected = expected_scans(tvm.IRModule({"main": func}))["main"]
    sizes = [size_vars(func)[n] for n in names]
    pool: list[_Kernel] = []
    skipped: list[str] = []
    replayed: list[tuple[str, _Kernel, list[Instance]]] = []  # and where each is timed
    for rep, (name, task) in zip(reps, tasks.items()):
        task_mod = tvm.IRModule({"main": task})
        records = database.get_top_k(database.commit_workload(task_mod), candidates)
        near = [_near(instances[names[k]], rep[k], reach) for k in step]
        own = tuple(rep[k] for k in step)  # first, then the step sizes near it
        keys = sorted(itertools.product(*map(sorted, near)), key=lambda v: v != own)
        around = [{names[k]: v for k, v in zip(step, key)} for key in keys]
        for rank, record in enumerate(records):
            where = f"{name} #{rank}"
            kernel = _replayed(record, func, expected, where, around)
            if isinstance(kernel, str):
                skipped.append(f"{where}: {kernel}")
                log(f"dynamic: skipped {where}: {kernel}")
                continue
            if kernel.bodies:
                sized = (dict(zip((names[k] for k in step), key)) for key in kernel.bodies)
                only = ", ".join(map(str, sized))
                skipped.append(f"{where}: serves {only} only ({kernel.where})")
                log(f"dynamic: {skipped[-1]}")
                kernel.where = where
            own_at = [rep] if rep in grid and rep not in timed_at else []
            serves = [
                i
                for i in [*timed_at, *own_at]  # and where it was tuned: its length's rows
                if kernel.serves(tuple(i[k] for k in step))
                and all(i[k] in values for k, values in zip(step, near))
            ]
            replayed.append((where, kernel, serves))
    unbuilt = bench.prebuild([(kernel, serves) for _, kernel, serves in replayed])
    off_grid = tuple(v + 1 for v in grid[0])  # the generic build, checked once
    for (where, kernel, serves), err in zip(replayed, unbuilt):
        if err is not None:  # TVM's codegen
            skipped.append(f"{where}: does not build ({_last(err)})")
            log(f"dynamic: skipped {skipped[-1]}")
            continue
        try:
            if kernel.bodies:  # no generic build to fall back on where a body fails
                serves = _built_bodies(kernel, serves, bench, skipped)
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
        _time(kernel, serves, pool, bench, (grid, step, sizes))
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
    tuned = len(pool)
    if all(p.lib is None for p in pool):  # shapes off the grid still need a kernel
        why = "no tuned record replays on the symbolic function: the untuned one serves"
        skipped.append(why)
        log(f"dynamic: {why}")
        untuned = _Kernel(func, bench.untuned, "untuned", {})
        _time(untuned, timed_at, pool, bench, (grid, step, sizes))
        pool.append(untuned)
    clock.lap("candidates")

    def widen(chosen: list[int], uncovered: list[Instance]) -> bool:
        """Time the chosen kernels at the step sizes of ``uncovered``; whether any was."""
        more = {tuple(i[k] for k in step) for i in uncovered}
        timed = False
        for c in chosen:
            kernel = pool[c]
            new = []
            for i in timed_at:
                if i in kernel.measured or tuple(i[k] for k in step) not in more:
                    continue
                if not kernel.serves(tuple(i[k] for k in step)):
                    continue
                if bench.right(kernel, i):
                    kernel.measured[i] = _timed(kernel, i, pool, bench)
                else:
                    kernel.measured[i] = math.inf
                    skipped.append(f"{kernel.where}: wrong result at {i}, not used there")
                new.append(i)
            timed = timed or bool(new)
            _in_order(kernel, new, pool, bench)
            _line(kernel, new, bench)
            kernel.estimate = _estimates(kernel, grid, step, sizes)
            for i in grid:  # the model's where it had none (earlier figures stay)
                if kernel.predicted.get(i, math.inf) == math.inf:
                    kernel.predicted[i] = kernel.estimate[i]
        return timed

    chosen = _checked_choice(pool, grid, weights, kernels, bench, skipped, widen)
    clock.lap("choice")
    log("dynamic: chose " + ", ".join(f"kernel {k}: {pool[c].where}" for k, c in enumerate(chosen)))
    figures = [pool[c].estimate for c in chosen]
    table = {i: min(range(len(chosen)), key=lambda k: figures[k][i]) for i in grid}
    latency = {i: figures[table[i]][i] for i in grid}
    predicted = {i: pool[chosen[table[i]]].predicted[i] for i in grid}
    anywhere, generic_ms = _fallbacks([pool[c] for c in chosen], figures, grid, bench)
    clock.lap("fallbacks")
    picked = [pool[c] for c in chosen]
    unfixed = {(k, u) for k, c in enumerate(chosen) for u in pool[c].unfixed}
    pads, beyond = _pads(names, step, instances, picked, table, figures, generic_ms, unfixed, bench)
    clock.lap("padding")
    dispatching = _dispatching(
        func, names, step, instances, picked, table, anywhere, unfixed, pads, beyond
    )
    clock.lap("dispatch")
    built_for = dispatch_target(target)
    whole, packed = _compiled(dispatching, built_for)
    served = _served(_Built(whole.jit(), packed), grid, latency, bench)
    clock.lap("check")
    clock.seconds["of which the reference outputs"] = bench.reference_s
    log("dynamic: " + ", ".join(f"{k} {v:.0f} s" for k, v in clock.seconds.items()))
    return Dynamic(
        dispatching,
        names,
        [k.func for k in picked],
        table,
        latency,
        predicted,
        tuned,
        clock.seconds,
        skipped,
        unfixed,
        {at: start + 1 for at, (start, _) in pads.items()},
        beyond[0] if beyond else 0,
        {i: picked[k].body_key(*bench.split(i)) for i, k in table.items()},
        served,
        (built_for, whole),
        anywhere,
    )


def _served(
    lib: _Built, grid: list[Instance], latency: dict[Instance, float], bench: _Bench
) -> dict[Instance, float]:
    """The dispatching function, built whole, checked at every listed instance: its ms
    there (the checking run's; where that run was over :data:`SLOWER` times the figure
    its kernel was chosen by, the faster of it and a second call, as a first call
    overstates; where that one is too, its median). Its kernels were chosen by builds of
    each alone, and a whole function is another build: TVM's CSE once hoisted one
    branch's vector indices out of its parallel launch for another's sake
    (:mod:`~scan_tir.transform.vector_indices`), LLVM promotes fewer accumulators in a
    large function (:func:`~scan_tir.tune.dispatch.dispatch_target`), and a function
    lowered without StorageRewrite keeps its accumulators arrays of scalars
    (:mod:`~scan_tir.transform.pipeline`). A wrong result
    raises; a median still over ``SLOWER`` times the chosen figure is logged."""
    served = {}
    for i in grid:
        ran = bench.check(lib, i)
        if ran > SLOWER * latency[i]:
            again = bench.check(lib, i)
            ran = again and min(ran, again)
        if not ran:
            raise ScanLoweringError(
                f"dynamic: the dispatching function built whole is wrong at {i}, where the "
                "kernel it dispatches to was right built alone: a miscompilation of the "
                "whole function; serve the kernels as separate functions"
            )
        served[i] = ran if ran <= SLOWER * latency[i] else bench.median_ms(lib, i)
        if served[i] > SLOWER * latency[i]:
            log(
                f"dynamic: the dispatching function runs {served[i]:.3g} ms at {i}, "
                f"{served[i] / latency[i]:.2f}x the {latency[i]:.3g} its kernel was chosen "
                "by: the whole function builds that branch slower than the kernel alone"
            )
    return served


def _dispatching(
    func: tirx.PrimFunc,
    names: list[str],
    step: list[int],
    instances: Mapping[str, Sequence[int]],
    picked: list[_Kernel],
    table: dict[Instance, int],
    anywhere: dict[Instance, int],
    unfixed: set[tuple[int, Instance]],
    pads: dict[int, tuple[int, dict[int, tirx.PrimFunc]]],
    beyond: tuple[int, dict[int, tirx.PrimFunc]] | None,
) -> tirx.PrimFunc:
    """``func`` branching to ``picked`` by ``table``: at listed values of the step's sizes
    to a kernel's body fixed at those values (:meth:`_Kernel.body`, held to the
    instance's length where its key says so; its generic body where ``unfixed`` says
    so, and where no size shapes the step and none is held); at a batch ``b`` with
    ``pads[B] = (t, bodies)``, t < b < B, to the padded body of the kernel that serves
    batch ``B``; at a batch above ``beyond``'s threshold, to its chunked body of the
    kernel serving the largest listed batch, where given; elsewhere to the generic
    kernel ``anywhere`` gives the instance the shape rounds up to."""
    grid = {n: instances[n] for n in names}
    generic = nearest_instance(func, grid, anywhere)
    bodies = [k.func for k in picked]
    variant: dict[tuple[int, tuple], int] = {}
    fixed_table = {}
    for i, k in table.items():
        sizes = {names[s]: i[s] for s in step}
        lengths = {n: v for s, (n, v) in enumerate(zip(names, i)) if s not in step}
        key = (k, picked[k].body_key(sizes, lengths))
        if key in unfixed or not key[1]:  # the generic body serves
            fixed_table[i] = k
            continue
        if key not in variant:
            variant[key] = len(bodies)
            bodies.append(picked[k].body(sizes, lengths))
        fixed_table[i] = variant[key]
    if not step:
        return dispatch(func, bodies, nearest_instance(func, grid, fixed_table))
    sizes = size_vars(func)
    listed = None
    for values in itertools.product(*(sorted(set(instances[names[s]])) for s in step)):
        here = None
        for s, v in zip(step, values):
            test = sizes[names[s]] == tirx.IntImm(sizes[names[s]].ty.dtype, v)
            here = test if here is None else tirx.And(here, test)
        listed = here if listed is None else tirx.Or(listed, here)
    if pads:
        batch = sizes[names[step[0]]]
        between = None
        for at, (below, _) in pads.items():
            test = tirx.And(batch > below, batch < at)
            between = test if between is None else tirx.Or(between, test)
        bodies_at = {i: pads[i[step[0]]][1][k] for i, k in table.items() if i[step[0]] in pads}
        pad_table = _joined(bodies_at, anywhere, bodies)
        generic = tirx.Select(between, nearest_instance(func, grid, pad_table), generic)
    if beyond:
        batch, top = sizes[names[step[0]]], max(instances[names[step[0]]])
        bodies_at = {i: beyond[1][k] for i, k in table.items() if i[step[0]] == top}
        chunk_table = _joined(bodies_at, anywhere, bodies)
        above = tirx.IntImm(batch.ty.dtype, beyond[0])
        generic = tirx.Select(batch > above, nearest_instance(func, grid, chunk_table), generic)
    choice = tirx.Select(listed, nearest_instance(func, grid, fixed_table), generic)
    return dispatch(func, bodies, choice)


def _joined(
    bodies_at: dict[Instance, tirx.PrimFunc],
    anywhere: dict[Instance, int],
    bodies: list[tirx.PrimFunc],
) -> dict[Instance, int]:
    """A table for :func:`nearest_instance`: each instance to its body in ``bodies_at``,
    appended to ``bodies`` once, the others to ``anywhere``'s (a branch never taken
    there, which the table must still cover)."""
    index: dict[int, int] = {}
    out = dict(anywhere)
    for i, body in bodies_at.items():
        if id(body) not in index:
            index[id(body)] = len(bodies)
            bodies.append(body)
        out[i] = index[id(body)]
    return out


def _pads(
    names: list[str],
    step: list[int],
    instances: Mapping[str, Sequence[int]],
    picked: list[_Kernel],
    table: dict[Instance, int],
    figures: list[dict[Instance, float]],
    generic_ms: dict[Instance, float],
    unfixed: set[tuple[int, Instance]],
    bench: _Bench,
) -> tuple[
    dict[int, tuple[int, dict[int, tirx.PrimFunc]]], tuple[int, dict[int, tirx.PrimFunc]] | None
]:
    """Where a batch below a listed one ``B`` runs faster on the body fixed at ``B``
    over padded copies (:func:`~scan_tir.tune.padding.padded`) than on the generic
    build: listed ``B`` -> (``t``, the padded body of each kernel serving ``B``), for the
    batches above ``t`` (and above the listed value before ``B``). With both timed at
    ``B``'s shortest instance and the generic build's cost taken as proportional to the
    batch, batch ``b`` pads where ``fixed(B) < generic(B) * b / B``. Each padded body is
    built and checked at the smallest batch it serves; one that does not build or is
    wrong leaves that interval to the generic build. Only one step size (a batch).

    Also, for the batches beyond the largest listed one ``T``: a threshold ``a >= T``
    and, for each kernel serving ``T``, its body there run in chunks of ``T``
    (``padded(..., chunked=True)``), for the batches above ``a``. With ``r`` the fixed
    body's time over the generic build's at ``T``, ``k`` chunks beat the generic build
    at batch ``b`` where ``k * r * T < b``: for ``b`` up to ``2T`` above ``2rT``, and
    for every ``b`` past ``2T`` where ``r <= 2/3``; so ``a = max(T, 2rT)``, and no
    chunks where ``r > 2/3``. Checked one and a half chunks past ``T``."""
    if len(step) != 1:
        return {}, None
    name, out, below = names[step[0]], {}, 0
    for at in sorted(set(instances[name])):
        rows = sorted(i for i in table if i[step[0]] == at)
        first, kernels = rows[0], sorted({table[i] for i in rows})
        lowest = below
        below = at
        if first not in generic_ms or any((k, (at,)) in unfixed for k in kernels):
            continue
        fixed_ms = figures[table[first]][first]
        start = max(lowest, math.floor(at * fixed_ms / generic_ms[first]))
        if start >= at - 1:
            continue
        probe = tuple(start + 1 if k == step[0] else v for k, v in enumerate(first))
        bodies = {
            k: _checked_padding(picked[k].body({name: at}), {name: at}, False, probe, bench)
            for k in kernels
        }
        if all(b is not None for b in bodies.values()):
            out[at] = (start, bodies)
            log(
                f"dynamic: {name} {start + 1} to {at - 1} run the body fixed at {at} on "
                f"padded copies ({fixed_ms:.3g} ms there, the generic build "
                f"{generic_ms[first]:.3g} ms)"
            )
    top = below  # the largest listed value
    if first not in generic_ms or any((k, (top,)) in unfixed for k in kernels):
        return out, None
    ratio = figures[table[first]][first] / generic_ms[first]
    if ratio > 2 / 3:
        return out, None
    above = max(top, math.floor(2 * top * ratio))
    probe = tuple(top + (top + 1) // 2 if k == step[0] else v for k, v in enumerate(first))
    beyond = {
        k: _checked_padding(picked[k].body({name: top}), {name: top}, True, probe, bench)
        for k in kernels
    }
    if any(b is None for b in beyond.values()):
        return out, None
    log(f"dynamic: {name} above {above} runs in chunks of {top}")
    return out, (above, beyond)


def _checked_padding(
    kernel: tirx.PrimFunc, sizes: dict[str, int], chunked: bool, probe: Instance, bench: _Bench
) -> tirx.PrimFunc | None:
    """:func:`~scan_tir.tune.padding.padded`, built and right at ``probe``; None (logged)
    where it is refused, does not build or is wrong."""
    try:
        body = padded(kernel, sizes, chunked)
        if not bench.check(_build(body, bench.target), probe):
            raise ScanLoweringError(f"wrong result at {probe}")
    except Exception as err:  # a refusal, TVM's codegen, or a wrong result
        log(f"dynamic: padded to {sizes}{' in chunks' if chunked else ''} not used ({_last(err)})")
        return None
    return body


def _checked_choice(
    pool: list[_Kernel],
    grid: list[Instance],
    weights: Mapping[Instance, float],
    k: int,
    bench: _Bench,
    skipped: list[str],
    widen: Callable[[list[int], list[Instance]], bool] | None = None,
) -> list[int]:
    """Choose by the estimates, check the chosen kernels at every instance, and choose
    again without a kernel where it is wrong, until every instance has a right one.
    Where the chosen cover no kernel at some instances, ``widen`` may time them there
    (it says whether it timed any). A checking run off the model's figure by more than
    ``SUSPECT``, and a second call after it too (a first call overstates), gets the
    kernel timed there: the model's extrapolation to long lengths misses their cache
    effects. Where the figure timed moves so, it is timed again after the other checks,
    the faster figure kept (a slowdown of the machine lasting a second once spoiled both
    calls and the timing, and the choice: notes.md), and if that one moves so too, the
    choice is made again; and so where a timed figure is far above both calls
    (:func:`_overstated`)."""
    while True:
        timed = [(p.func, p.estimate) for p in pool]
        chosen = _choose(timed, grid, weights, k, [p.lib is not None for p in pool])
        changed = False
        off: list[tuple[int, Instance, float]] = []  # timed off the model: (kernel, at, model)
        for c in chosen:
            for i in grid:
                if i in pool[c].checked or pool[c].estimate[i] == math.inf:
                    continue
                ran = bench.right(pool[c], i)
                if ran:
                    pool[c].checked.add(i)
                    if i in pool[c].measured:
                        changed |= _overstated(pool[c], i, ran, pool, bench)
                        continue
                    model = pool[c].estimate[i]
                    if any(model / SUSPECT <= ms_ <= model * SUSPECT
                           for ms_ in (ran, bench.right(pool[c], i))):  # a first call, a second
                        continue
                    figure = bench.time(pool[c], i, _best(pool, i))
                    pool[c].measured[i] = pool[c].estimate[i] = figure
                    if not model / SUSPECT <= figure <= model * SUSPECT:
                        off.append((c, i, model))
                    continue
                pool[c].estimate[i] = pool[c].measured[i] = math.inf
                skipped.append(f"{pool[c].where}: wrong result at {i}, not used there")
                log(f"dynamic: {pool[c].where} is wrong at {i}; not used there")
                changed = True
        for c, i, model in off:
            first = pool[c].measured[i]
            figure = min(first, bench.time(pool[c], i, _best(pool, i)))
            pool[c].measured[i] = pool[c].estimate[i] = figure
            if not model / SUSPECT <= figure <= model * SUSPECT:
                log(
                    f"dynamic: {pool[c].where} at {i}: {figure:.3g} ms (timed {first:.3g} "
                    f"first), predicted {model:.3g}; choosing again"
                )
                changed = True
        if changed or _ties_timed(pool, chosen, grid, bench):
            continue
        if _rivals_timed(pool, chosen, grid, bench, skipped):
            continue
        uncovered = [i for i in grid if min(pool[c].estimate[i] for c in chosen) == math.inf]
        if uncovered and widen is not None and widen(chosen, uncovered):
            continue
        if uncovered:
            raise ScanLoweringError(
                f"dynamic: no candidate is right at {uncovered[:3]}: " + "; ".join(skipped)
            )
        return chosen


def _built_bodies(
    kernel: _Kernel, serves: list[Instance], bench: _Bench, skipped: list[str]
) -> list[Instance]:
    """``serves`` less the instances where ``kernel``, a record replayed only with its
    body fixed (no generic build), has a body that does not build: a legality check or
    TVM's codegen at those step sizes (a persistent launch whose parallel loop batch 1
    removes is refused). Those step sizes are taken from its bodies, the reason kept;
    where none builds, the error is raised and the record skipped."""
    kept = []
    for i in serves:
        own = tuple(i[k] for k in bench.step)
        if own not in kernel.bodies:  # taken already
            continue
        try:
            bench.lib(kernel, i)
        except Exception as err:
            if len(kernel.bodies) == 1:
                raise
            del kernel.bodies[own]
            where = dict(zip((bench.names[k] for k in bench.step), own))
            skipped.append(f"{kernel.where}: does not build at {where} ({_last(err)})")
            log(f"dynamic: {skipped[-1]}; not used there")
            continue
        kept.append(i)
    return kept


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
    instances: Mapping[str, Sequence[int]], names: list[str], step: list[int], reach: int | None
) -> list[Instance]:
    """Listed values of the step's sizes, each at the shortest listed lengths where it
    has ``ROWS`` rows (a short length is cheap to measure and has the same step; fewer
    rows tile a hoisted product unlike any longer length's): every ``reach + 1``-th of
    each, its smallest and largest included, so that every listed value is within
    ``reach`` places of a tuned one, where that one's candidates are timed (all of them
    where ``reach`` is 0 or None). Each task tuned costs the search's fixed cost
    (sampling and evolving its population), more than its trials do. The grid's corners
    where there is no length or no step size."""
    if not step or len(step) == len(names):
        return _corners(instances, names)
    stride = reach + 1 if reach else 1

    def tuned(values: list[int]) -> list[int]:
        return sorted({*values[::stride], values[-1]})

    def at(sizes: tuple[int, ...]) -> Instance:
        fixed, rows = dict(zip(step, sizes)), math.prod(sizes)
        return tuple(
            fixed[k] if k in fixed else next(
                (v for v in sorted(set(instances[n])) if rows * v >= ROWS), max(instances[n]))
            for k, n in enumerate(names)
        )

    stepping = [tuned(sorted(set(instances[names[k]]))) for k in step]
    return [at(sizes) for sizes in itertools.product(*stepping)]


def _tuning_plan(
    reps: Sequence[Instance], step: list[int], budgets: Sequence[int]
) -> list[tuple[int, int]]:
    """(index in ``reps``, the records its task is tuned up to), in order: the task at
    the smallest step sizes in two halves, first and last, the others between them as
    given. The first run has no measurement to select by, so its trials are a random
    draw: a batch-1 task's are the cheapest to build and run, and they start the model;
    its records spread the widest (a batch-1 step's time is the order it streams the
    weights in), so its second half is selected by the model all the others trained.
    A large batch tuned first, at random, builds slowest (notes.md)."""
    smallest = min(range(len(reps)), key=lambda t: math.prod(reps[t][k] for k in step))
    others = [(t, budgets[t]) for t in range(len(reps)) if t != smallest]
    return [(smallest, math.ceil(budgets[smallest] / 2)), *others, (smallest, budgets[smallest])]


def _near(values: Sequence[int], centre: int, reach: int | None) -> set[int]:
    """The listed ``values`` at most ``reach`` places from ``centre`` on either side
    (``centre`` itself where listed); all of them where ``reach`` is None."""
    ordered = sorted(set(values))
    if reach is None:
        return set(ordered)
    lo, hi = bisect.bisect_left(ordered, centre), bisect.bisect_right(ordered, centre)
    return set(ordered[max(0, lo - reach) : hi + reach])


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
    """Measured where timed (inf where wrong); elsewhere :func:`fit_latency` over the
    lengths, fitted on the timings at the same values of the step's sizes (or on all,
    where none shapes the step). Each length is rounded up to the tile of the body that
    serves it there. A held body (:meth:`_Kernel.body_key`) is another program than the
    one the longer lengths run, so at step sizes where one was timed, the fit is on
    :func:`_line`'s figures of the body not held instead."""
    free = [k for k in range(len(sizes)) if k not in step]
    names = [str(v.name) for v in sizes]

    def padded(i: Instance) -> Instance:  # the lengths rounded up to the serving body's tiles
        if kernel.func is None:
            return tuple(i[k] for k in free)
        tiles = kernel.tiles({names[k]: i[k] for k in step}, {names[k]: i[k] for k in free})
        multiples = [tiles.get(names[k], 1) for k in free]
        return tuple(math.ceil(i[k] / m) * m for k, m in zip(free, multiples))

    lined = {tuple(i[k] for k in step) for i in kernel.line}
    groups: dict[Instance, dict[Instance, float]] = {}
    for i, ms_ in [*kernel.measured.items(), *kernel.line.items()]:
        g = tuple(i[k] for k in step)
        if ms_ == math.inf or (g in lined and i not in kernel.line):
            continue
        groups.setdefault(g, {})[tuple(i[k] for k in free) if g in lined else padded(i)] = ms_
    ones = [1] * len(free)
    models = {g: fit_latency(timed, ones) for g, timed in groups.items() if free}
    estimate = {}
    for i in grid:
        g = tuple(i[k] for k in step)
        if i in kernel.measured:
            estimate[i] = kernel.measured[i]
        elif g in models:
            estimate[i] = max(models[g](padded(i)), 0.0)
        else:  # never timed at these step sizes (representatives given by hand)
            estimate[i] = math.inf
    return estimate


def _task_name(names: list[str], instance: Instance) -> str:
    return "_".join(f"{n}{v}" for n, v in zip(names, instance))


class _Bench:
    """Inputs at each instance, the reference outputs on them (made when first needed),
    and the checks and timings of kernels there."""

    def __init__(
        self,
        func: tirx.PrimFunc,
        names: list[str],
        step: list[int],
        target: Target,
        repeat: int,
        reference: Reference | None = None,
    ):
        self.func, self.names, self.step, self.repeat = func, names, step, repeat
        self.target = target
        self.untuned = _build(func, target)
        self.reference = reference
        written = accesses(func)[1]
        self.outputs = [k for k, p in enumerate(func.params) if any(p.same_as(w) for w in written)]
        self.cases: dict[Instance, tuple[list[np.ndarray], list[np.ndarray]]] = {}
        self.reference_s = 0.0  # spent computing the reference outputs for the checks

    def case(self, instance: Instance) -> tuple[list[np.ndarray], list[np.ndarray]]:
        if instance not in self.cases:
            fixed = specialize(self.func, dict(zip(self.names, instance)))
            shapes = [(tuple(int(d) for d in p.ty.shape), str(p.ty.dtype)) for p in fixed.params]
            start = time.perf_counter()
            if self.reference is None:
                rng = np.random.default_rng(0)
                args = [rng.uniform(-1, 1, s).astype(d) for s, d in shapes]
                got = numerics.call(self.untuned.module, args)
                want = [got[k] for k in self.outputs]
            else:
                inputs, want = self.reference(dict(zip(self.names, instance)))
                given = iter(inputs)
                args = [
                    np.zeros(s, d) if k in self.outputs else np.asarray(next(given), d)
                    for k, (s, d) in enumerate(shapes)
                ]
                want = [np.asarray(a) for a in want]
            self.reference_s += time.perf_counter() - start
            self.cases[instance] = (args, want)
        return self.cases[instance]

    def lib(self, kernel: _Kernel, instance: Instance, hold: bool = True) -> _Built:
        """The build of ``kernel`` that serves ``instance`` from the dispatching
        function: its body fixed at the instance's step sizes, if any, and held to its
        lengths where :meth:`_Kernel.body_key` says so (and ``hold``)."""
        fixed, lengths = self.split(instance)
        if not hold:
            lengths = {}
        key = kernel.body_key(fixed, lengths) if lengths else tuple(fixed.values())
        if not key:
            return kernel.lib
        if not kernel.serves(tuple(fixed.values())):
            raise ScanLoweringError(f"dynamic: {kernel.where} does not serve {fixed}")
        if key not in kernel.fixed:
            try:
                kernel.fixed[key] = _build(kernel.body(fixed, lengths), self.target)
            except Exception as err:  # a legality check or TVM's codegen, at that size
                if kernel.lib is None:
                    raise
                log(
                    f"dynamic: {kernel.where} does not build with its body fixed at {fixed} "
                    f"({_last(err)}); its generic build serves there"
                )
                kernel.unfixed.add(key)
                kernel.fixed[key] = kernel.lib
        return kernel.fixed[key]

    def prebuild(self, kernels: list[tuple[_Kernel, list[Instance]]]) -> list[Exception | None]:
        """Builds each kernel's generic build, where it has one (``lib``), and the bodies
        that serve the instances listed with it, as :meth:`lib` would one by one, but
        :data:`BUILDS` at a time (:func:`_builds`) and before anything is timed. Returns,
        per kernel, the error its generic build raised, if any; a body that does not
        build is left to :meth:`lib`, which says why."""
        jobs: list[tuple[int, tuple | None, tirx.PrimFunc]] = []
        for k, (kernel, at) in enumerate(kernels):
            if not kernel.bodies and kernel.lib is None:  # it replays with symbolic sizes
                jobs.append((k, None, kernel.func))
            keys = set(kernel.fixed)
            for i in at:
                fixed, lengths = self.split(i)
                if not kernel.serves(tuple(fixed.values())):
                    continue
                key = kernel.body_key(fixed, lengths) if lengths else tuple(fixed.values())
                if not key or key in keys:
                    continue
                keys.add(key)
                try:
                    jobs.append((k, key, kernel.body(fixed, lengths)))
                except Exception:  # no body there: lib() says why
                    continue
        errors: list[Exception | None] = [None] * len(kernels)
        for (k, key, _), built in zip(jobs, _builds([body for *_, body in jobs], self.target)):
            if key is None and isinstance(built, Exception):
                errors[k] = built
            elif key is None:
                kernels[k][0].lib = built
            elif not isinstance(built, Exception):
                kernels[k][0].fixed[key] = built
        return errors

    def split(self, instance: Instance) -> tuple[dict[str, int], dict[str, int]]:
        """The instance's step sizes and its lengths, by name."""
        named = list(zip(self.names, instance))
        step = {n: v for k, (n, v) in enumerate(named) if k in self.step}
        return step, {n: v for n, v in named if n not in step}

    def right(self, kernel: _Kernel, instance: Instance, generic: bool = False) -> float:
        """The checking run's ms (one call, its inputs fresh in memory), or 0.0 where
        the result is wrong."""
        return self.check(kernel.lib if generic else self.lib(kernel, instance), instance)

    def check(self, lib: _Built, instance: Instance) -> float:
        """As :meth:`right`, of any build of the function."""
        args, expected = self.case(instance)
        tensors = lib.args(args)
        main = lib.module["main"]  # a module's first lookup generates its machine code: not timed
        start = time.perf_counter()
        main(*tensors)
        ran = max((time.perf_counter() - start) * 1e3, 1e-6)
        got = [t.numpy() for t in tensors]
        right = all(
            np.allclose(got[k], want, rtol=1e-4, atol=1e-4)
            for k, want in zip(self.outputs, expected)
        )
        return ran if right else 0.0

    def time(
        self,
        kernel: _Kernel,
        instance: Instance,
        best: float = math.inf,
        generic: bool = False,
        hold: bool = True,
    ) -> float:
        """Median ms of ``repeat`` runs of at least 20 ms each (of the ``generic`` build,
        else the one that serves ``instance``, as :meth:`lib` with ``hold``); or one run,
        where that run is long and ``RACE`` times ``best`` (the fastest at ``instance`` so
        far): such a kernel will not serve there, and at the largest instances one run
        takes seconds."""
        lib = kernel.lib if generic else self.lib(kernel, instance, hold)
        tensors = lib.args(self.case(instance)[0])
        if best < math.inf:  # nothing to race against before the first figure
            main = lib.module["main"]  # as in :meth:`check`
            start = time.perf_counter()
            main(*tensors)
            once = (time.perf_counter() - start) * 1e3
            if once >= RACE_MS and once > RACE * best:
                return once
        return self.median_ms(lib, instance, tensors)

    def median_ms(self, lib: _Built, instance: Instance, tensors: list | None = None) -> float:
        """Median ms of ``repeat`` runs of at least 20 ms each of any build at
        ``instance``: a run is one call where one call takes that long, as MetaSchedule's
        runner times the records (:func:`~scan_tir.tune.measure.local_runner`);
        ``time_evaluator``'s default of 10 calls a run makes a timing at the longest
        instances tens of seconds."""
        tensors = tensors if tensors is not None else lib.args(self.case(instance)[0])
        timer = lib.module.time_evaluator(
            "main", tvm.cpu(), number=1, repeat=self.repeat, min_repeat_ms=20
        )
        return statistics.median(timer(*tensors).results) * 1e3


def _fallbacks(
    kernels: list[_Kernel], figures: list[dict[Instance, float]], grid: list[Instance], bench
) -> tuple[dict[Instance, int], dict[Instance, float]]:
    """For each instance, the kernel whose generic build is fastest there: it serves the
    shapes off the grid that round up to the instance. Where the step's sizes are
    symbolic, the generic build is another program than the body fixed at the
    instance (a symbolic batch costs the step its constant bounds and vector code), so
    it is checked and timed itself, at the shortest listed length of the instance's step
    sizes (the length only repeats the step); elsewhere it is the kernel, and one wrong
    at the instance is not considered there. Also returns the fastest generic build's ms
    where timed (at those shortest instances)."""
    generic = [k for k, kernel in enumerate(kernels) if kernel.lib is not None]
    shortest: dict[Instance, Instance] = {}  # step sizes -> their instance timed
    for i in sorted(grid):
        shortest.setdefault(tuple(i[s] for s in bench.step), i)
    times: dict[Instance, dict[int, float]] = {}
    out: dict[Instance, int] = {}
    for i in grid:
        if not bench.step:
            right = [k for k in generic if figures[k][i] != math.inf]
            if not right:
                raise ScanLoweringError(f"dynamic: no generic kernel chosen is right at {i}")
            out[i] = min(right, key=lambda k: figures[k][i])
            continue
        at = shortest[tuple(i[s] for s in bench.step)]
        if at not in times:
            times[at] = {}
            for k in sorted(generic, key=lambda k: figures[k][at]):
                if not bench.right(kernels[k], at, True):
                    log(f"dynamic: {kernels[k].where} is wrong built generic at {at}")
                    continue
                best = min(times[at].values(), default=math.inf)
                times[at][k] = bench.time(kernels[k], at, best, True)
            log(
                f"dynamic: generic builds at {at}: "
                + ", ".join(f"{kernels[k].where} {ms:.3g} ms" for k, ms in times[at].items())
            )
        if not times[at]:
            raise ScanLoweringError(f"dynamic: no generic kernel chosen is right at {at}")
        out[i] = min(times[at], key=times[at].get)
    return out, {at: min(t.values()) for at, t in times.items()}


def _time(kernel: _Kernel, at: list[Instance], pool: list[_Kernel], bench: _Bench, model) -> None:
    """Time ``kernel`` at ``at`` (racing the best in ``pool``) and fit its estimates over
    the grid (``model``: :func:`_estimates`' grid, step sizes and size variables)."""
    kernel.measured = {}
    for i in at:
        kernel.measured[i] = _timed(kernel, i, pool, bench)
    _in_order(kernel, at, pool, bench)
    _line(kernel, at, bench)
    kernel.estimate = _estimates(kernel, *model)
    kernel.predicted = dict(kernel.estimate)


def _in_order(kernel: _Kernel, at: list[Instance], pool: list[_Kernel], bench: _Bench) -> None:
    """Time again, once, each of ``at`` whose figure is above the kernel's figure at a
    longer instance of the same step sizes, and keep the faster figure: more steps never
    cost less, so such a figure was inflated (the machine busy while it was timed; a
    persistent step whose thread lost its core waits at every barrier), and a line
    through it predicts the longer lengths low, even below zero."""
    step = set(bench.step)

    def shorter(i: Instance, j: Instance) -> bool:
        return i != j and all(a == b if k in step else a <= b for k, (a, b) in enumerate(zip(i, j)))

    timed = {i: ms_ for i, ms_ in kernel.measured.items() if ms_ < math.inf}
    for i in at:
        if i in timed and any(shorter(i, j) and timed[i] > ms_ for j, ms_ in timed.items()):
            again = _timed(kernel, i, pool, bench)
            log(
                f"dynamic: {kernel.where} at {i}: {timed[i]:.3g} ms, above a longer "
                f"length's; timed again: {again:.3g} ms"
            )
            kernel.measured[i] = min(timed[i], again)


def _ties_timed(pool: list[_Kernel], chosen: list[int], grid: list[Instance], bench) -> bool:
    """At each instance where chosen kernels' figures lie within ``SUSPECT`` of the
    fastest one's and some of them are the model's, those are timed there (each was
    checked there already): the model misses by up to that factor before a checking run
    calls it off, so it cannot tell them apart. Whether the fastest at some instance
    changed."""
    moved = False
    for i in grid:
        figures = {c: pool[c].estimate[i] for c in chosen}
        fastest = min(figures, key=figures.get)
        near = [c for c in chosen if figures[c] <= SUSPECT * figures[fastest] < math.inf]
        if len(near) < 2:
            continue
        for c in near:
            if i not in pool[c].measured:
                figure = bench.time(pool[c], i, _best(pool, i))
                pool[c].measured[i] = pool[c].estimate[i] = figure
        now = min(figures, key=lambda c: pool[c].estimate[i])
        if now != fastest:
            log(
                f"dynamic: at {i} the model's {figures[fastest]:.3g} ms for "
                f"{pool[fastest].where} and {figures[now]:.3g} for {pool[now].where} are "
                f"near; timed {pool[fastest].estimate[i]:.3g} and {pool[now].estimate[i]:.3g}"
            )
            moved = True
    return moved


def _rivals_timed(
    pool: list[_Kernel], chosen: list[int], grid: list[Instance], bench, skipped: list[str]
) -> bool:
    """At the longest listed lengths, where the model extrapolates farthest from the two
    short lengths timed, the kernels not chosen whose figure lies within ``SUSPECT`` of
    the serving kernel's are timed there (checked first), and the serving kernel too:
    two records of one task a few percent apart at the short lengths, in the order noise
    gave them, can be further apart, either way, at the long ones. Only where the
    serving kernel's figure is under ``RACE_MS``: longer runs time in seconds each, and
    average their noise out. Whether one of them is now the faster there."""
    longest = [max(i[k] for i in grid) for k in range(len(grid[0]))]
    moved = False
    for i in grid:
        if any(i[k] != longest[k] for k in range(len(i)) if k not in bench.step):
            continue
        serving = min(chosen, key=lambda c: pool[c].estimate[i])
        if pool[serving].estimate[i] >= RACE_MS:
            continue
        limit = SUSPECT * pool[serving].estimate[i]
        rivals = [
            r
            for r, kernel in enumerate(pool)
            if r not in chosen and i not in kernel.measured and kernel.estimate[i] <= limit
        ]
        if not rivals:
            continue
        for r in [serving, *rivals]:
            if i in pool[r].measured:
                continue
            if r == serving or bench.right(pool[r], i):
                pool[r].measured[i] = pool[r].estimate[i] = _timed(pool[r], i, pool, bench)
            else:
                pool[r].measured[i] = pool[r].estimate[i] = math.inf
                skipped.append(f"{pool[r].where}: wrong result at {i}, not used there")
        now = min([serving, *rivals], key=lambda r: pool[r].estimate[i])
        if now != serving:
            log(
                f"dynamic: at {i} {pool[now].where} timed {pool[now].estimate[i]:.3g} ms, "
                f"{pool[serving].where} {pool[serving].estimate[i]:.3g}; choosing again"
            )
            moved = True
    return moved


def _overstated(
    kernel: _Kernel, instance: Instance, ran: float, pool: list[_Kernel], bench: _Bench
) -> bool:
    """Whether the kernel's timed figure at ``instance`` was far above a checking run
    there (``ran``) and a second call, and timing it again moved it: a first call
    overstates, never understates, so the figure was inflated. The faster of the two
    figures replaces it."""
    figure = kernel.measured[instance]
    if ran * SUSPECT >= figure or bench.right(kernel, instance) * SUSPECT >= figure:
        return False
    again = bench.time(kernel, instance, _best(pool, instance))
    kernel.measured[instance] = kernel.estimate[instance] = min(figure, again)
    moved = again * SUSPECT < figure
    log(
        f"dynamic: {kernel.where} at {instance}: timed {figure:.3g} ms, its calls "
        f"{ran:.3g}; timed again {again:.3g}" + ("; choosing again" if moved else "")
    )
    return moved


def _timed(kernel: _Kernel, instance: Instance, pool: list[_Kernel], bench: _Bench) -> float:
    """The kernel's figure at ``instance`` (racing the best in ``pool``). Where its body
    there is held to the length (:meth:`_Kernel.body_key`), the body not held is checked
    and timed too, and where it is the faster it serves there instead (holding a tile
    is another program, not always a faster one)."""
    ms_ = bench.time(kernel, instance, _best(pool, instance))
    fixed, lengths = bench.split(instance)
    held = kernel.body_key(fixed, lengths)
    if held == tuple(fixed.values()):
        return ms_
    if not bench.check(bench.lib(kernel, instance, hold=False), instance):
        log(f"dynamic: {kernel.where} not held is wrong at {instance}; held there")
        return ms_
    unheld = bench.time(kernel, instance, ms_, hold=False)
    if unheld >= ms_:
        return ms_
    kernel.unheld.add(held)
    log(f"dynamic: {kernel.where} not held at {instance} ({unheld:.3g} ms, held {ms_:.3g})")
    return unheld


def _line(kernel: _Kernel, timed: list[Instance], bench: _Bench) -> None:
    """At each step size where ``timed`` had a held body (or one not held that pads the
    length), time the body not held at whole multiples of its tile over the length, one
    per instance timed there (the instance's length rounded up, or the next multiple
    where another took that one), into ``kernel.line``: the body the longer lengths run,
    where it computes no padded rows, so that :func:`_estimates`' line through the
    lengths is that body's steps. A padded length counts the steps it does not run."""
    if kernel.trace is None:  # the untuned function: no tiles
        return
    groups: dict[Instance, list[Instance]] = {}
    for i in sorted(timed):
        if kernel.measured.get(i, math.inf) < math.inf:
            groups.setdefault(tuple(i[k] for k in bench.step), []).append(i)
    free = [k for k in range(len(bench.names)) if k not in bench.step]
    for at in groups.values():
        fixed = bench.split(at[0])[0]
        tiles = kernel.tiles(fixed)  # the body not held's
        multiples = [tiles.get(bench.names[k], 1) for k in free]
        held = [i for i in at if kernel.body_key(*bench.split(i)) != tuple(fixed.values())]
        padding = any(i[k] % m for i in at for k, m in zip(free, multiples))
        if not free or (not held and not padding):
            continue
        points: list[Instance] = []
        for i in at:
            point = list(i)
            for k, m in zip(free, multiples):
                point[k] = math.ceil(i[k] / m) * m
            while tuple(point) in points:  # another instance's: the next multiple
                point[free[0]] += multiples[0]
            points.append(tuple(point))
        for point in points:  # at or past the tile: the body not held serves there
            if point in kernel.measured:
                kernel.line[point] = kernel.measured[point]
            elif bench.check(bench.lib(kernel, point, hold=False), point):
                kernel.line[point] = bench.time(kernel, point, hold=False)
            else:
                log(f"dynamic: {kernel.where} not held is wrong at {point}; not fitted on")
                kernel.line = {p: v for p, v in kernel.line.items() if p not in points}
                break


def _best(pool: list[_Kernel], instance: Instance) -> float:
    return min((k.measured[instance] for k in pool if instance in k.measured), default=math.inf)


@dataclass
class _Built:
    """A build of the function, and the weights it takes packed (after the function's
    parameters; filled by its ``prepack``, once per set of inputs, untimed: as a
    deployment packs them once)."""

    module: tvm.runtime.Module
    packed: list[tuple[tuple[int, ...], str]]

    def args(self, arrays: list[np.ndarray]) -> list:
        """Tensors of copies of ``arrays``, then the packed weights made from them."""
        tensors = [tvm.runtime.tensor(a.copy()) for a in arrays]
        if not self.packed:
            return tensors
        packed = [tvm.runtime.tensor(np.zeros(shape, dtype)) for shape, dtype in self.packed]
        self.module["prepack"](*tensors, *packed)
        return [*tensors, *packed]


def _compiled(func: tirx.PrimFunc, target: Target) -> tuple[tvm.runtime.Executable, list]:
    """``func`` built as ``main`` beside its ``prepack`` (:func:`prepack_module`), and the
    weights it takes packed."""
    mod, packed = prepack_module(func)
    return tvm.compile(mod, target=target, tir_pipeline=PIPELINE), packed


def _build(func: tirx.PrimFunc, target: Target) -> _Built:
    executable, packed = _compiled(func, target)
    return _Built(executable.jit(), packed)


def _builds(funcs: list[tirx.PrimFunc], target: Target) -> list[_Built | Exception]:
    """:func:`_build` of each, :data:`BUILDS` at a time, each with its machine code
    generated (a module's first lookup), or the error it raised. Threads, not processes:
    TVM's passes and LLVM run in C++, where the interpreter's lock is released, and a
    built module stays in this process, where it is timed."""

    def one(func: tirx.PrimFunc) -> _Built | Exception:
        try:
            built = _build(func, target)
            built.module["main"]
            return built
        except Exception as err:  # TVM's codegen
            return err

    with ThreadPoolExecutor(BUILDS) as threads:
        return list(threads.map(one, funcs))


def _replayed(
    record: ms.database.TuningRecord,
    func: tirx.PrimFunc,
    expected: list,
    where: str,
    around: list[dict[str, int]],
) -> _Kernel | str:
    """The record's schedule on the symbolic function (not built yet:
    :meth:`_Bench.prebuild`); where it does not replay there, on the function with the
    step's sizes fixed at each of ``around`` (its representative's first, which must
    take it) where it replays (a schedule may fuse a batch loop of extent 1 with
    another, or tile a loop by factors whose product only covers some extents, which a
    symbolic batch refuses), serving those sizes only; or why it is not a candidate."""
    try:
        kernel = replay_sized(record.trace, func)
    except Exception as err:  # ScheduleError, TVM's InternalError on a symbolic tile
        why = f"does not replay on the symbolic function ({_last(err)})"
        if not around or not around[0]:
            return why
        bodies = {}
        for k, at in enumerate(around):  # its own sizes must take it, the others may
            try:
                body = replay_sized(record.trace, specialize_body(func, at))
            except Exception as err2:
                if k == 0:
                    return f"{why}, nor at {at} ({_last(err2)})"
                continue
            broken = scan_violations(body, expected)
            if broken and k == 0:
                return f"breaks the scan: {'; '.join(broken)}"
            if not broken:
                bodies[tuple(at.values())] = body
        own = bodies[tuple(around[0].values())]
        return _Kernel(own, None, why, {}, bodies=bodies, trace=record.trace, base=func)
    broken = scan_violations(kernel, expected)
    if broken:
        return f"breaks the scan: {'; '.join(broken)}"
    return _Kernel(kernel, None, where, {}, trace=record.trace, base=func)


def _choose(
    timed: list[tuple[tirx.PrimFunc, dict[Instance, float]]],
    grid: list[Instance],
    weights: Mapping[Instance, float],
    k: int,
    generic: Sequence[bool] | None = None,
) -> list[int]:
    """Greedy: start from the best single kernel by weighted latency among the
    ``generic`` ones (those that serve every shape; default all), then add the one that
    lowers the weighted latency of the best-per-instance choice most, while any does.
    Instances no chosen kernel has a figure for (inf) count first: covering one beats
    any gain in latency."""
    chosen: list[int] = []
    generic = list(generic) if generic is not None else [True] * len(timed)

    def cost(ks: list[int]) -> tuple[float, float]:
        best = {i: min(timed[c][1][i] for c in ks) for i in grid}
        uncovered = sum(1 for i in grid if best[i] == math.inf)
        return uncovered, sum(weights[i] * best[i] for i in grid if best[i] != math.inf)

    while len(chosen) < k:
        rest = [c for c in range(len(timed)) if c not in chosen and (chosen or generic[c])]
        if not rest:
            break
        best = min(rest, key=lambda c: cost([*chosen, c]))
        if chosen and cost([*chosen, best]) >= cost(chosen):
            break
        chosen.append(best)
    return chosen


class _Clock:
    """Wall seconds of each phase, in order."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.start = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase], self.start = now - self.start, now


def _last(err: Exception) -> str:
    lines = [x for x in str(err).strip().splitlines() if x.strip()]
    return f"{type(err).__name__}: {lines[-1][:160] if lines else ''}"
