"""``RewriteStepParallelVectorizeUnroll``: carry out the step's parallel/vector/unroll decisions.

The counterpart, inside scan steps, of MetaSchedule's RewriteParallelVectorizeUnroll (which
visits only the root's children; src/s_tir/meta_schedule/postproc/
rewrite_parallel_vectorize_unroll.cc). For each child block of a step, on the loops between
the step block and that child (never the time loop, which lies above the step block):

- parallel: fuse the longest prefix of serial, constant, spatial loops whose extent product
  stays within the decision, and mark it parallel (the outermost loop alone when it is
  longer than the decision);
- vectorize: fuse the longest suffix of such loops within the vector limit and vectorize it
  (an innermost loop longer than the limit is split, its inner part vectorized);
- unroll: ``pragma_auto_unroll_max_step`` on the outermost of those loops.

It may touch only loops under a step block. A primitive that TVM refuses leaves the loop as
it was (the schedule stays valid, just slower); the candidate is never rejected for that.
"""

from __future__ import annotations

from tvm import s_tir
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.postproc import Postproc, PyPostproc
from tvm.s_tir.schedule import LoopRV, SBlockRV

from scan_tir.lower.vocabulary import (
    STEP_PARALLEL,
    STEP_UNROLL,
    STEP_VECTORIZE,
    free_loops,
    nested_prefix,
    step_blocks,
)


def _extent(sch: Schedule, loop: LoopRV) -> int:
    return int(sch.get(loop).extent)


def _parallelize(sch: Schedule, loops: list[LoopRV], free: list[bool], limit: int) -> None:
    prefix, product = [], 1
    nested = nested_prefix(sch, loops, free)
    for loop in nested:
        if product * _extent(sch, loop) > limit:
            break
        prefix.append(loop)
        product *= _extent(sch, loop)
    if not prefix and nested:
        # The outermost loop alone is longer than the limit (at D, an LSTM's cell update
        # over 64 batch rows that FuseStepEpilogue could not move into the tiles): left
        # serial, it ran on one core after every step's parallel region.
        prefix, product = nested[:1], _extent(sch, nested[0])
    if product <= 1:
        return
    fused = sch.fuse(*prefix) if len(prefix) > 1 else prefix[0]
    try:
        sch.parallel(fused)
    except s_tir.ScheduleError:
        pass


def _vectorize(sch: Schedule, loops: list[LoopRV], free: list[bool], limit: int) -> None:
    suffix, product = [], 1
    for loop, ok in zip(reversed(loops), reversed(free)):
        if not ok or product * _extent(sch, loop) > limit:
            break
        if suffix and not sch.get(loop).body.same_as(sch.get(suffix[0])):
            break
        suffix.insert(0, loop)
        product *= _extent(sch, loop)
    if product <= 1:
        if not (free and free[-1] and _extent(sch, loops[-1]) > limit):
            return
        # The innermost loop alone is longer than the limit (an elementwise step over the
        # whole hidden size): vectorise its largest divisor within the limit.
        extent = _extent(sch, loops[-1])
        width = max(d for d in range(1, limit + 1) if extent % d == 0)
        if width <= 1:
            return
        suffix = [sch.split(loops[-1], [None, width])[1]]
    fused = sch.fuse(*suffix) if len(suffix) > 1 else suffix[0]
    try:
        sch.vectorize(fused)
    except s_tir.ScheduleError:
        pass


@derived_object
class RewriteStepParallelVectorizeUnroll(PyPostproc):
    """Carry out the STEP_* decisions on every step block's children."""

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def apply(self, sch: Schedule) -> bool:
        for step, scan in step_blocks(sch):
            if STEP_PARALLEL in scan.step.annotations:
                self._rewrite_step(sch, step)
        return True

    def _rewrite_step(self, sch: Schedule, step: SBlockRV) -> None:
        ann = sch.get(step).annotations
        parallel = int(ann[STEP_PARALLEL])
        vector = int(ann.get(STEP_VECTORIZE, 0))
        unroll = int(ann.get(STEP_UNROLL, 0))
        for key in (STEP_PARALLEL, STEP_VECTORIZE, STEP_UNROLL):
            if key in ann:
                sch.unannotate(step, key)
        # get_loops stops at the enclosing block, so a child's loops are all under the step.
        for child in sch.get_child_blocks(step):
            loops = sch.get_loops(child)
            if not loops:
                continue
            if parallel > 1:
                _parallelize(sch, loops, free_loops(sch, child, loops), parallel)
                loops = sch.get_loops(child)
            if vector > 1:
                _vectorize(sch, loops, free_loops(sch, child, loops), vector)
                loops = sch.get_loops(child)
            if unroll > 0:
                sch.annotate(loops[0], "pragma_auto_unroll_max_step", unroll)
                sch.annotate(loops[0], "pragma_unroll_explicit", 1)

    def clone(self) -> Postproc:
        return RewriteStepParallelVectorizeUnroll()
