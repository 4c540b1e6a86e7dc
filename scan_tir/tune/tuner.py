"""Tuning a workload into a work dir, resumably, with progress on stderr.

:func:`tune` is what the ``scan-tir tune`` command and the notebooks call: ``ms.tune_tir``
with :func:`scan_tir.scan_space`, the builder and runners of ``measure.py``, and a
progress line that follows the database as it grows (``progress.py``). The budget counts
the records already in the work dir, so a run that was killed continues where it stopped
instead of starting over; the database is repaired first (:func:`scan_tir.db.repair`),
because TVM refuses one whose last line a kill cut short. A kill at any moment loses the
batch in flight and at worst cuts the line being written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target

from ..db.records import load, repair
from ..lower.options import LoweringOptions
from ..workloads import Workload
from .measure import build_candidate, local_runner, rpc_runner
from .per_scan import tune_per_scan
from .pooled_builder import PooledBuilder
from .progress import count_lines, log, records_file, watch_records
from .search import evolutionary_search
from .space import scan_space
from .target import default_target


def tune_module(
    mod: tvm.IRModule,
    work_dir: Path,
    trials: int,
    target: Target,
    *,
    label: str = "tune",
    runner: ms.runner.Runner | None = None,
    trials_per_iter: int = 64,
    build_timeout_s: float = 30.0,
    population: int = 512,
    total: int | None = None,
    cost_model: ms.cost_model.CostModel | None = None,
) -> float:
    """``ms.tune_tir`` for ``trials`` more trials on the scan space; returns the wall time.

    ``population`` is the evolutionary search's (MetaSchedule's default 512); tiny budgets
    (tests, notebooks) pass less: sampling and evolving 512 candidates for 4 trials takes
    longer than measuring them. ``total`` is only for the progress bar (the record count
    the run should end at). ``cost_model``: MetaSchedule's default XGBoost model, fresh,
    unless given (:func:`~scan_tir.tune.search.learned_model`).
    """
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    log(
        f"{label}: tuning {trials} trials in {work_dir} "
        f"({count_lines(records_file(work_dir))} records there already)"
    )
    t = time.perf_counter()
    with watch_records(label, work_dir, period_s=5.0, total=total):
        ms.tune_tir(
            mod,
            target,
            str(work_dir),
            max_trials_global=trials,
            num_trials_per_iter=min(trials, trials_per_iter),
            space=scan_space(target),
            builder=PooledBuilder(timeout_sec=build_timeout_s, f_build=build_candidate),
            runner=runner if runner is not None else local_runner(),
            strategy=evolutionary_search(population, trials),
            cost_model=cost_model if cost_model is not None else "xgb",
        )
    seconds = time.perf_counter() - t
    log(f"{label}: tuning done in {seconds:.0f} s")
    return seconds


@dataclass(frozen=True)
class TuneResult:
    """What :func:`tune` did: record counts of the workload (per scan: of its tasks)
    before and after."""

    work_dir: Path
    records_before: int  # records of this workload already in the work dir
    records_after: int
    repaired: int  # unreadable lines dropped from the database before tuning
    seconds: float


def tune(
    workload: Workload,
    work_dir: str | Path,
    trials: int,
    *,
    target: Target | None = None,
    rpc: str | None = None,
    trials_per_iter: int = 64,
    build_timeout_s: float = 30.0,
    population: int = 512,
    options: LoweringOptions | None = None,
    per_scan: bool = False,
) -> TuneResult:
    """Tune ``workload`` until ``work_dir`` holds ``trials`` records of it.

    Records already there count toward the budget (a killed run resumes; a finished one
    is a no-op). ``rpc`` is ``HOST:PORT:KEY`` of an RPC tracker; without it candidates run
    locally. The database is repaired first, see the module docstring. ``population``:
    see :func:`tune_module`. ``options``: how the workload is lowered (default: the
    workload's own, ``LoweringOptions()`` unless its config name says otherwise); each
    combination is a function of its own in the database. ``per_scan``: each scan a
    task of its own, identical layers one task (:func:`scan_tir.tune.per_scan.tune_per_scan`);
    the budget then counts the tasks' records, and the composed schedules of the whole
    function are added to the database after them.
    """
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    target = target or default_target()
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    runner = rpc_runner(rpc) if rpc else None
    mod = tvm.IRModule({"main": workload.prim_func(options)})
    dropped = []
    if records_file(work_dir).exists():
        dropped = repair(work_dir)
        for problem in dropped:
            log(f"{workload.name}: dropped unreadable line {problem} (backup kept)")
    common = dict(
        label=workload.name,
        runner=runner,
        trials_per_iter=trials_per_iter,
        build_timeout_s=build_timeout_s,
        population=population,
    )
    if per_scan:
        done = tune_per_scan(mod["main"], work_dir, trials, target, **common)
        return TuneResult(
            work_dir, done.records_before, done.records_after, len(dropped), done.seconds
        )
    before = records_of(work_dir, mod)
    seconds = 0.0
    if before >= trials:
        log(f"{workload.name}: {before} records in {work_dir} already, budget {trials}: done")
    else:
        total = count_lines(records_file(work_dir)) + trials - before
        seconds = tune_module(mod, work_dir, trials - before, target, total=total, **common)
    return TuneResult(work_dir, before, records_of(work_dir, mod), len(dropped), seconds)


def records_of(work_dir: Path, mod: tvm.IRModule) -> int:
    """Records of ``mod``'s function in the database of ``work_dir`` (0 without one)."""
    return records_of_each(work_dir, [mod])[0]


def records_of_each(work_dir: Path, mods: list[tvm.IRModule]) -> list[int]:
    """:func:`records_of` for each of ``mods``, from one reading of the database."""
    if not records_file(work_dir).exists():
        return [0] * len(mods)
    db = load(work_dir)
    indices = [db.index_of(mod) for mod in mods]
    return [0 if k is None else len(db.of_workload(k)) for k in indices]
