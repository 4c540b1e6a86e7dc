"""``ParallelizeVectorizeUnrollStep``: parallel, vector and unroll decisions for a step.

MetaSchedule's ParallelizeVectorizeUnroll annotates the function's root block, and its
postprocessor rewrites only the loops of the root's children (see
src/s_tir/meta_schedule/postproc/rewrite_parallel_vectorize_unroll.cc), so the work inside
a scan step never gets parallel or vector loops. This rule makes the same decisions for each
step block and leaves them as annotations on it (scan_tir.lower.vocabulary.STEP_*); the postproc
``postprocs.RewriteStepParallelVectorizeUnroll`` carries them out on the loops under the
step, never on the time loop.

Unlike the stock rule, whether a step runs in parallel at all is sampled: a step of a small
recurrence is shorter than one fork/join of the thread pool.
"""

from __future__ import annotations

from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule, ScheduleRule
from tvm.s_tir.schedule import SBlockRV

from scan_tir.lower.vocabulary import SCAN_STEP, STEP_PARALLEL, STEP_UNROLL, STEP_VECTORIZE


@derived_object
class ParallelizeVectorizeUnrollStep(PyScheduleRule):
    """Sample a step's parallel extent (none or ``max_jobs_per_core`` x cores), set its
    vector limit, and sample its unroll depth from ``unroll_max_steps``."""

    def __init__(
        self,
        max_jobs_per_core: int = 16,
        max_vectorize_extent: int = 64,
        unroll_max_steps: tuple[int, ...] = (0, 16, 64, 512),
    ) -> None:
        super().__init__()
        self.max_jobs_per_core = max_jobs_per_core
        self.max_vectorize_extent = max_vectorize_extent
        self.unroll_max_steps = tuple(unroll_max_steps)
        self.num_cores = 1

    def _initialize_with_tune_context(self, context) -> None:
        self.num_cores = int(context.target.attrs.get("num-cores", 1))

    def apply(self, sch: Schedule, block: SBlockRV) -> list[Schedule]:
        if SCAN_STEP not in sch.get(block).annotations:
            return [sch]
        most = self.max_jobs_per_core * self.num_cores
        choices = [0, most] if self.num_cores > 1 else [0]
        parallel = sch.sample_categorical(choices, [1 / len(choices)] * len(choices))
        sch.annotate(block, STEP_PARALLEL, parallel)
        sch.annotate(block, STEP_VECTORIZE, self.max_vectorize_extent)
        steps = list(self.unroll_max_steps)
        unroll = sch.sample_categorical(steps, [1 / len(steps)] * len(steps))
        sch.annotate(block, STEP_UNROLL, unroll)
        return [sch]

    def clone(self) -> ScheduleRule:
        rule = ParallelizeVectorizeUnrollStep(
            self.max_jobs_per_core, self.max_vectorize_extent, self.unroll_max_steps
        )
        rule.num_cores = self.num_cores
        return rule
