"""Two databases side by side: for each workload either holds, the records, valid ones
and best latency in each, and the ratio of the bests. Workloads are matched structurally
(the same function, hence the same key MetaSchedule uses)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .records import TuningDB
from .summary import WorkloadSummary, summary


@dataclass(frozen=True)
class Side:
    records: int = 0
    valid: int = 0
    best_ms: float = math.nan


@dataclass(frozen=True)
class Row:
    name: str
    a: Side
    b: Side

    @property
    def ratio(self) -> float:
        """best A / best B: above 1, B's best is faster."""
        return self.a.best_ms / self.b.best_ms


def _side(s: WorkloadSummary) -> Side:
    return Side(s.records, s.valid, s.best_ms)


def compare(a: TuningDB, b: TuningDB) -> list[Row]:
    """A row per workload of ``a`` (in order), then those only ``b`` holds."""
    rows = []
    b_rows = {s.workload: s for s in summary(b)}
    for s in summary(a):
        j = b.index_of(a.workloads[s.workload].mod)
        other = b_rows.pop(j, None) if j is not None else None
        rows.append(Row(s.name, _side(s), _side(other) if other else Side()))
    rows += [Row(s.name, Side(), _side(s)) for s in b_rows.values()]
    return rows
