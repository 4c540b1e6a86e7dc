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

A consumer that reads the product at a constant index (a gate: topi's LSTM reads
``gates[b, 2, j]``, the GRU ``hw[b, 1, j]``) cannot go there: TVM's region solver gives
up on the constant. Its nest, and every later one, is then merged whole into the tile
loops instead: the loops down to the fusion point fused into one, the consumer's loops
fused and split into as many runs, the two merged with ``Schedule.merge``. That primitive
checks no dependence, so each merge is first made on a copy and kept only where
``merge_problem`` shows that no iteration of the merged nest touches what another
iteration writes or reads (each tile's gate math reads only that tile's products). The
cell update then runs inside the product's parallel region: one fork per step.

An elementwise block left at the step's top level after that goes under the outermost loop
of the earlier nest that holds all its producers in the step, when that is one nest: a copy
of the new state (``LoweringOptions.copies_in_step``) is made row by row, right after the
update computes the row, in the update's parallel region instead of one of its own.

Touches: blocks inside one step only (the reduction's consumers in that step and the
consumers of those left unfused). Runs before RewriteStepParallelVectorizeUnroll.
"""

from __future__ import annotations

from math import prod

from tvm import s_tir, tirx
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.postproc import Postproc, PyPostproc
from tvm.s_tir.schedule import LoopRV, SBlockRV

from scan_tir.lower.vocabulary import (
    DATA_PAR,
    STEP_PARALLEL,
    block_realize,
    free_loops,
    merge_problem,
    nested_prefix,
    step_blocks,
)

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


def _vars(expr: tirx.Expr) -> list[tirx.Var]:
    return list(tirx.analysis.undefined_vars(expr, []))


def _moves_with(sch: Schedule, producer: SBlockRV, buffer, dims: list[int], loops: list) -> bool:
    """Does ``producer`` write one of ``dims`` of ``buffer`` at an index bound to ``loops``?"""
    written = sch.get(producer)
    own_loops = sch.get_loops(producer)
    if not own_loops:
        return False
    realize = block_realize(sch, producer, own_loops[-1])
    bound = [sch.get(loop).loop_var for loop in loops]
    moving = [
        iv.var
        for iv, value in zip(written.iter_vars, realize.iter_values)
        if any(v.same_as(b) for v in _vars(value) for b in bound)
    ]
    for write in written.writes:
        if write.source.same_as(buffer):
            for d in dims:
                if any(v.same_as(m) for v in _vars(write.region[d].min) for m in moving):
                    return True
    return False


def _splits_a_constant_read(sch: Schedule, consumer: SBlockRV, outer: list[LoopRV]) -> bool:
    """Does ``consumer`` read, at an index none of its iterators move (topi's
    ``gates[b, 3, j]``), a dimension that its producer writes in pieces across the loops
    ``outer`` (the fusion loop and those above it)?

    TVM 0.27's reverse_compute_at does not refuse that: it ignores such an index and puts the
    consumer under every iteration, where it reads gates that iteration has not computed
    (and CompactBufferAllocation then shrinks the buffer to one iteration's piece): wrong
    results, found by tests/test_step_copies.py. Such a consumer is left unfused.
    """
    block = sch.get(consumer)
    own = [iv.var for iv in block.iter_vars]
    for read in block.reads:
        fixed = [
            d
            for d, r in enumerate(read.region)
            if not any(v.same_as(o) for v in _vars(r.min) for o in own)
        ]
        if fixed and any(
            _moves_with(sch, p, read.source, fixed, outer) for p in sch.get_producers(consumer)
        ):
            return True
    return False


def _tiled(sch: Schedule, consumer: SBlockRV, n: int) -> LoopRV | None:
    """The nest of ``consumer`` (a block alone in it) as one loop of ``n`` iterations over
    equal runs of its iterations, in order: its loops fused, then split."""
    loops = sch.get_loops(consumer)
    if not loops or len(sch.get_child_blocks(loops[0])) != 1:
        return None
    extents = [sch.get(lp).extent for lp in loops]
    if not all(isinstance(e, tirx.IntImm) for e in extents) or prod(map(int, extents)) % n:
        return None
    whole = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    return sch.split(whole, [n, None])[0]


def _merged(sch: Schedule, head: list[LoopRV], consumer: SBlockRV) -> LoopRV | None:
    """The loop that ``head`` (nested loops) fuse into, with the nest of ``consumer`` merged
    into it, iteration by iteration; None, leaving ``sch`` as it was, where the merge would
    change the result (:func:`merge_problem`, checked on a copy first) or TVM refuses it."""
    trial = sch.copy()
    for attempt in (trial, sch):
        try:
            loop = attempt.fuse(*head) if len(head) > 1 else head[0]
            n = attempt.get(loop).extent
            tail = _tiled(attempt, consumer, int(n)) if isinstance(n, tirx.IntImm) else None
            if tail is None:
                return None
            merged = attempt.merge(loop, tail)
        except (s_tir.ScheduleError, ValueError):
            return None
        if attempt is trial and merge_problem(trial.get(merged)):
            return None
    return merged


def _fuse_consumers(sch: Schedule, step: SBlockRV, limit: int) -> None:
    children = list(sch.get_child_blocks(step))
    for position, block in enumerate(children):
        if not _is_reduction(sch, block):
            continue
        at = _fusion_loop(sch, block, limit)
        if at is None:
            continue
        at_node = sch.get(at)
        loops = sch.get_loops(block)
        outer = loops[: [sch.get(lp).same_as(at_node) for lp in loops].index(True) + 1]
        merged = None
        for consumer in children[position + 1 :]:
            if _is_reduction(sch, consumer):
                break
            if merged is None:
                if any(sch.get(lp).same_as(at_node) for lp in sch.get_loops(consumer)):
                    continue  # already inside (MultiLevelTiling's cache-write block)
                if not _splits_a_constant_read(sch, consumer, outer):
                    try:
                        sch.reverse_compute_at(consumer, at, preserve_unit_loops=True)
                        continue
                    except (s_tir.ScheduleError, ValueError):
                        pass  # the region solver gave up (a constant index: a gate)
                head = outer
            else:
                head = [merged]
            merged = _merged(sch, head, consumer)
            if merged is None:
                break
        return  # one fused region per step


def _fuse_into_producers(sch: Schedule, step: SBlockRV) -> None:
    for block in sch.get_child_blocks(step):
        loops = sch.get_loops(block)
        if _is_reduction(sch, block) or not loops:
            continue
        roots = [sch.get_loops(p) for p in sch.get_producers(block)]
        if not roots or any(not r for r in roots):
            continue
        root = roots[0][0]
        if any(not sch.get(r[0]).same_as(sch.get(root)) for r in roots):
            continue  # producers in several nests (the LSTM's h: the gates and next_c)
        if sch.get(loops[0]).same_as(sch.get(root)) or _splits_a_constant_read(sch, block, [root]):
            continue
        try:
            sch.reverse_compute_at(block, root, preserve_unit_loops=True)
        except (s_tir.ScheduleError, ValueError):
            pass  # the block needs more of its producer than one iteration of the root gives


@derived_object
class FuseStepEpilogue(PyPostproc):
    """reverse_compute_at each step's elementwise tail into its first tiled reduction."""

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def apply(self, sch: Schedule) -> bool:
        for step, scan in step_blocks(sch):
            limit = int(scan.step.annotations.get(STEP_PARALLEL, 0))
            _fuse_consumers(sch, step, limit if limit > 1 else _DEFAULT_LIMIT)
            _fuse_into_producers(sch, step)
        return True

    def clone(self) -> Postproc:
        return FuseStepEpilogue()
