"""``PipelinedScans``: whether a scan runs as a wavefront with the scan that feeds it.

Stacked layers run one after the other by default, each step of each sharing the cores.
Pipelined, the layers run side by side, a core each, the later one a chunk of steps
behind (``scan_tir.lower.vocabulary``): no synchronisation inside a step, one fork/join
per chunk, and each core keeps its own layer's recurrent weights in its cache, at the
price of the steps' parallelism and of a start and an end where one core waits. Which is
faster depends on the layers, so it is sampled, on machines with more than one core, for
a scan of fixed length that depends on the scan before it; the value is the most chunks to cut the
sequence into. ``postprocs.RewritePipelinedScans`` carries the decision out, or drops it
where the schedule does not allow it.

Touches: the scan block's annotations (:data:`~scan_tir.lower.vocabulary.PIPELINED`).
"""

from __future__ import annotations

from tvm import tirx
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.schedule_rule import ScheduleRule
from tvm.s_tir.schedule import SBlockRV

from scan_tir.lower.vocabulary import (
    PIPELINED,
    SCAN,
    feeding_scan,
    root_scans,
    root_statements,
    time_loop,
)

from .multicore import MultiCoreRule

#: The most chunks the decision may ask for (0: not pipelined), and how likely each is.
CHUNKS = [0, 4, 8, 16]
PROBS = [0.4, 0.2, 0.2, 0.2]


@derived_object
class PipelinedScans(MultiCoreRule):
    """Sample, for each scan after another, the most chunks of a pipeline (0: none)."""

    def apply(self, sch: Schedule, block: SBlockRV) -> list[Schedule]:
        node = sch.get(block)
        if self.num_cores < 2 or SCAN not in node.annotations:
            return [sch]
        for func_name, position, scan in root_scans(sch):
            if not scan.same_as(node):
                continue
            stmts = root_statements(sch.mod[func_name])
            fixed = isinstance(time_loop(stmts[position])[1].extent, tirx.IntImm)
            if fixed and feeding_scan(stmts, position) is not None:
                sch.annotate(block, PIPELINED, sch.sample_categorical(CHUNKS, PROBS))
        return [sch]

    def clone(self) -> ScheduleRule:
        return self.with_cores(PipelinedScans())
