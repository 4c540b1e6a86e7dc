"""``ConcurrentScans``: whether a scan runs at the same time as the independent scans after
it, each on its own core.

The two directions of a bidirectional layer (or any scans with no dependence between
them) run one after the other by default, each step of each sharing the cores through a
fork/join or a barrier. Run side by side instead, each scan keeps one core for its whole
sequence: no synchronisation at all per step, and each core holds its own scan's
recurrent weights in its cache. Which is faster depends on how much each step gains from
two cores, so it is sampled, on machines with more than one core, for a scan that has an
independent scan after it (``scan_tir.lower.vocabulary.concurrent_group``).
``postprocs.RewriteConcurrentScans`` carries the decision out.

Touches: the scan block's annotations (:data:`~scan_tir.lower.vocabulary.CONCURRENT`).
"""

from __future__ import annotations

from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.schedule_rule import ScheduleRule
from tvm.s_tir.schedule import SBlockRV

from scan_tir.lower.vocabulary import (
    CONCURRENT,
    SCAN,
    concurrent_group,
    root_scans,
    root_statements,
)

from .multicore import MultiCoreRule


@derived_object
class ConcurrentScans(MultiCoreRule):
    """Sample, for each scan with an independent scan after it, concurrent (1) or not (0)."""

    def apply(self, sch: Schedule, block: SBlockRV) -> list[Schedule]:
        node = sch.get(block)
        if self.num_cores < 2 or SCAN not in node.annotations:
            return [sch]
        for func_name, position, scan in root_scans(sch):
            if scan.same_as(node):
                stmts = root_statements(sch.mod[func_name])
                if len(concurrent_group(stmts, position)) > 1:
                    sch.annotate(block, CONCURRENT, sch.sample_categorical([0, 1], [0.5, 0.5]))
        return [sch]

    def clone(self) -> ScheduleRule:
        return self.with_cores(ConcurrentScans())
