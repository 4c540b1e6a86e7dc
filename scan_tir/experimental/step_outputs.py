"""``TileStepOutputs``: tile a step by its outputs, and compute the whole step per tile.

The persistent-RNN structure: each core owns a slice of the new state (a tile of the hidden
units) and computes, for that slice only, everything the slice needs: its rows of the
recurrent product, its gates, its state update. One fork/join per step, and each core
reads the same slice of the recurrent weights at every step, so the slice stays in that
core's cache.

MultiLevelTiling cannot build this. It tiles the recurrent product and fuses consumers
into the tile with ``reverse_compute_at``, whose region solver fails when a consumer reads
the product at a constant index (topi's LSTM reads ``gates[b, 1, j]``; a GRU reads its
gates at three offsets: notes.md, section 3). This rule works from the other end: it
splits the spatial loops of the step's last loop nest (the blocks writing the new states)
into sampled outer and inner tiles, and moves every other block of the step under the
outer tiles with ``compute_at``, which asks only for the region each tile reads: rows of
the product for all gates at once. MultiLevelTiling was to tile the product inside each
output tile (it does not yet: below). Both the tiled step and the step as it was are
returned: which is faster depends on the sizes, and tuning decides.

The last loop nest must hold all blocks that read the products (compute_at moves a block
only when all its consumers are under the target loop). A scan with two states written by
separate computes (topi's LSTM: ``next_c``, ``next_h``) has two nests, and then only the
blocks the last one alone consumes move; ``LoweringOptions(merge_updates=True,
copies_in_step=False)`` writes such updates in one nest (scan_tir/lower/update_merge.py)
and leaves them the step's last (copies in the step would come after them).

Experimental, off by default (``scan_space(target, step_rules=[TileStepOutputs()])``): in the
design spaces where this rule moved the recurrent product, MultiLevelTiling leaves the
product untiled (tests/test_step_outputs.py checks it), so it runs as a plain, unvectorised
reduction: at A, every such candidate ran 8 ms or more, 7x the best (notes.md, section 3).
Suspected cause, not confirmed: MultiLevelTiling tiles only blocks whose iterators are each
bound to one loop (``IsTrivialBinding`` in ``NeedsMultiLevelTiling``), and ``compute_at``
binds the moved block to the tile loop plus its own. What would fix it: tile the moved
product in this rule (hidden units innermost, as oneDNN packs W_hh).

Touches: the loops of one step's last loop nest (split, reorder) and the placement of the
step's other blocks (compute_at, inside the same step). Never the time loop or a block
outside the step.
"""

from __future__ import annotations

from tvm import s_tir
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule, ScheduleRule
from tvm.s_tir.schedule import LoopRV, SBlockRV

from ..lower.vocabulary import SCAN_STEP, Role, block_role, free_loops


def _step_of(sch: Schedule, block: SBlockRV) -> SBlockRV | None:
    """The step block directly enclosing ``block`` (None if another block is in between)."""
    parent = sch.get_sref(block).parent
    while parent is not None and not isinstance(parent.stmt, s_tir.SBlock):
        parent = parent.parent
    if parent is None or SCAN_STEP not in parent.stmt.annotations:
        return None
    return sch.get_sblock(parent.stmt.name_hint)


def _split_outer(sch: Schedule, loops: list[LoopRV], max_inner: int) -> LoopRV | None:
    """Split each loop of extent > 1 into (outer, inner) with sampled perfect tiles, put
    the outer ones first, and return the innermost outer loop."""
    outers, inners = [], []
    for loop in loops:
        if int(sch.get(loop).extent) == 1:
            outers.append(loop)
            continue
        factors = sch.sample_perfect_tile(loop, n=2, max_innermost_factor=max_inner)
        outer, inner = sch.split(loop, factors)
        outers.append(outer)
        inners.append(inner)
    if not inners:
        return None
    sch.reorder(*outers, *inners)
    return outers[-1]


@derived_object
class TileStepOutputs(PyScheduleRule):
    """At the last block of a step: tile the step's last loop nest and compute_at the rest."""

    def __init__(self, max_innermost_factor: int = 64) -> None:
        super().__init__()
        self.max_innermost_factor = max_innermost_factor

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def apply(self, sch: Schedule, block: SBlockRV) -> list[Schedule]:
        if block_role(sch, block) != Role.IN_STEP:
            return [sch]
        step = _step_of(sch, block)
        if step is None:
            return [sch]
        children = list(sch.get_child_blocks(step))
        if len(children) < 2 or not sch.get(children[-1]).same_as(sch.get(block)):
            return [sch]
        loops = sch.get_loops(block)
        if not loops or not all(free_loops(sch, block, loops)):
            return [sch]  # a reduction or an annotated loop: not an elementwise output nest
        nest = sch.get(loops[0])
        outputs = [c for c in children if _inside(sch, c, nest)]
        others = [c for c in children if not _inside(sch, c, nest)]
        if not others:
            return [sch]
        shared = [lp for lp in loops if all(_inside(sch, c, sch.get(lp)) for c in outputs)]
        tiled = sch.copy()  # the copy keeps the RVs
        anchor = _split_outer(tiled, shared, self.max_innermost_factor)
        if anchor is None:
            return [sch]
        moved = 0
        for other in reversed(others):
            try:
                tiled.compute_at(other, anchor, preserve_unit_loops=True)
                moved += 1
            except (s_tir.ScheduleError, ValueError):
                continue  # a consumer outside the tile; its producers then stay too
        return [tiled, sch] if moved else [sch]

    def clone(self) -> ScheduleRule:
        return TileStepOutputs(self.max_innermost_factor)


def _inside(sch: Schedule, block: SBlockRV, loop: object) -> bool:
    return any(sch.get(lp).same_as(loop) for lp in sch.get_loops(block))

