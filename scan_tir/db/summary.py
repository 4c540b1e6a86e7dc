"""What a database holds: per-workload counts and best latency, and the top records.

Latencies are MetaSchedule's own measurements (the mean of a record's ``run_secs``), taken
when the candidate was tuned; weights that a schedule repacks were passed prepacked
(tune_lstm.py's docstring explains). The speed-up of :func:`top` is over the untuned
function, timed now on this machine with the target the record was tuned for.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from tvm.target import Target

from . import numerics
from .records import Entry, TuningDB


@dataclass(frozen=True)
class WorkloadSummary:
    workload: int  # line index in database_workload.json
    name: str
    records: int
    valid: int
    best_ms: float  # NaN without a valid record
    median_ms: float
    best_trial: int  # 1-based position among this workload's records; 0 without one


def summary(db: TuningDB) -> list[WorkloadSummary]:
    """One row per workload that has records."""
    rows = []
    for w in db.used_workloads():
        entries = db.of_workload(w)
        valid = [e for e in entries if e.valid]
        best = min(valid, key=lambda e: e.mean_ms, default=None)
        rows.append(
            WorkloadSummary(
                w,
                db.workload_name(w),
                len(entries),
                len(valid),
                best.mean_ms if best else math.nan,
                statistics.median(e.mean_ms for e in valid) if valid else math.nan,
                entries.index(best) + 1 if best else 0,
            )
        )
    return rows


@dataclass(frozen=True)
class TopRow:
    rank: int
    entry: Entry
    name: str
    untuned_ms: float  # NaN when not measured
    speedup: float  # untuned / tuned, NaN when not measured


def untuned_ms(db: TuningDB, workload: int, target: Target) -> float:
    """The untuned function's latency now, on the database's inputs."""
    func = db.func(workload)
    c = numerics.case(db, workload, target)
    return numerics.latency_ms(numerics.build(func, target), c.args)


def top(db: TuningDB, k: int, target: Target | None = None) -> list[TopRow]:
    """The ``k`` fastest valid records of each workload; with ``target``, each workload's
    untuned function is timed for the speed-up column."""
    rows = []
    for w in db.used_workloads():
        base = untuned_ms(db, w, target) if target is not None else math.nan
        for rank, e in enumerate(db.top(k, w), 1):
            rows.append(TopRow(rank, e, db.workload_name(w), base, base / e.mean_ms))
    return rows
