"""``PersistentStep``: whether a step runs inside one thread-pool launch for the whole
sequence.

A step that forks and joins the thread pool for each parallel nest pays that cost at
every step, and nothing ties a core to the same slice of the recurrent weights across
steps but the pool's static chunking. The persistent form launches once and puts a
barrier after each nest (``postprocs.RewritePersistentStep`` makes every nest parallel
and marks the time loop; ``scan_tir.transform.persistent_launch`` builds it). Which is
faster depends on the step: a barrier is cheaper than a fork/join, but every nest must
then be shared out, including those that ran serially. So it is sampled, like the
step's parallel extent, on machines with more than one core.

Touches: the step block's annotations (:data:`~scan_tir.lower.vocabulary.STEP_PERSISTENT`).
"""

from __future__ import annotations

from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.schedule_rule import ScheduleRule
from tvm.s_tir.schedule import SBlockRV

from scan_tir.lower.vocabulary import SCAN_STEP, STEP_PERSISTENT

from .multicore import MultiCoreRule


@derived_object
class PersistentStep(MultiCoreRule):
    """Sample, for each step block, persistent (1) or fork-and-join (0)."""

    def apply(self, sch: Schedule, block: SBlockRV) -> list[Schedule]:
        if self.num_cores < 2 or SCAN_STEP not in sch.get(block).annotations:
            return [sch]
        sch.annotate(block, STEP_PERSISTENT, sch.sample_categorical([0, 1], [0.5, 0.5]))
        return [sch]

    def clone(self) -> ScheduleRule:
        return self.with_cores(PersistentStep())
