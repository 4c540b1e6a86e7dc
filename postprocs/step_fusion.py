"""``FuseStepEpilogue``: compute a step's elementwise tail inside its tiled reduction.

After MultiLevelTiling has tiled a reduction inside a scan step (the recurrent GEMV/GEMM),
the elementwise blocks that consume it (bias, gate activations, cell update) are separate
loop nests, and each would become its own parallel region: one fork/join of the thread pool
per block per step. This postproc moves the step's later elementwise blocks, in program
order, under the reduction's outer spatial tile loops with ``reverse_compute_at``, at the
deepest loop that the step's parallel region will still include (the prefix whose extents
multiply to at most the step's parallel limit). The gate math is then fused into the
recurrent product's tiles, and RewriteStepParallelVectorizeUnroll forks once per step.

It is a postproc, not a schedule rule, because TVM 0.27 corrupts its heap when a Python
rule runs schedule primitives on the copies MultiLevelTiling forks inside PostOrderApply
(notes.md); its decision follows from the sampled tiles and parallel limit.

Touches: blocks inside one step only (the reduction's consumers in that step). Runs before
RewriteStepParallelVectorizeUnroll.
"""

from __future__ import annotations

from tvm import s_tir
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.postproc import Postproc, PyPostproc
from tvm.s_tir.schedule import LoopRV, SBlockRV

from scan_tir.loop_kinds import free_loops, nested_prefix
from scan_tir.structure import DATA_PAR, STEP_PARALLEL, step_blocks

#: Fusion point when the step runs serially: as deep as a parallel step would go.
_DEFAULT_LIMIT = 32


def _is_reduction(sch: Schedule, block: SBlockRV) -> bool:
    return any(iv.iter_type != DATA_PAR for iv in sch.get(block).iter_vars)


def _fusion_loop(sch: Schedule, block: SBlockRV, limit: int) -> LoopRV | None:
    loops = sch.get_loops(block)  # get_loops stops at the step block: these are all inside
    at, product = None, 1
    for loop in nested_prefix(sch, loops, free_loops(sch, block, loops)):
        product *= int(sch.get(loop).extent)
        if product > limit:
            break
        at = loop
    return at


def _fuse_consumers(sch: Schedule, step: SBlockRV, limit: int) -> None:
    children = list(sch.get_child_blocks(step))
    for position, block in enumerate(children):
        if not _is_reduction(sch, block):
            continue
        at = _fusion_loop(sch, block, limit)
        if at is None:
            continue
        at_node = sch.get(at)
        for consumer in children[position + 1 :]:
            if _is_reduction(sch, consumer):
                break
            if any(sch.get(lp).same_as(at_node) for lp in sch.get_loops(consumer)):
                continue  # already inside (MultiLevelTiling's cache-write block)
            try:
                sch.reverse_compute_at(consumer, at, preserve_unit_loops=True)
            except (s_tir.ScheduleError, ValueError):
                # Refused (the consumer needs more than one tile), or TVM's region solver
                # gave up (a constant index into the reduction's output): leave the rest.
                break
        return  # one fused region per step


@derived_object
class FuseStepEpilogue(PyPostproc):
    """reverse_compute_at each step's elementwise tail into its first tiled reduction."""

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def apply(self, sch: Schedule) -> bool:
        for step, scan in step_blocks(sch):
            limit = int(scan.step.annotations.get(STEP_PARALLEL, 0))
            _fuse_consumers(sch, step, limit if limit > 1 else _DEFAULT_LIMIT)
        return True

    def clone(self) -> Postproc:
        return FuseStepEpilogue()
