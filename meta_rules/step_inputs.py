"""``KeepStepInputs``: an inlining rule that leaves alone the blocks a scan's step reads.

TVM 0.27's ``compute_inline`` re-derives the read/write regions of every block, other than
the scope root, that lists the inlined buffer (``BaseInliner::UpdateBuffersInBlockSignature``
in src/s_tir/schedule/primitive/compute_inline.cc), from its body, with a buffer map that
still holds the buffers that block allocates itself. Inlining a block outside a scan into a
consumer inside the step (topi's LSTM: its input bias ``Xi2h_bias`` into ``gates``, which
reads it through the whole buffer) therefore lists the step's own temporaries (``s_h2h``,
``gates``, ...) in the step block's regions and, from there, the scan block's: ill-formed
S-TIR ("buffer s_h2h is used ... without a prior DeclBuffer") that ``tvm.compile`` still
builds, so tuning measured and recorded it. AutoInline does it, and so does
RandomComputeLocation (location -2 is compute_inline, and MutateComputeLocation may pick it
later); meta_rules wraps both, and InlineConstantScalars. Such blocks are passed through
untouched: they are whole-sequence elementwise ops (a bias add) that stay outside, as a
step's inputs do.
A step's reads through slice views never inline (TVM refuses a buffer under match_buffer);
inlining inside a step, where the step is the scope root, is unaffected.
"""

from __future__ import annotations

from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule, ScheduleRule
from tvm.s_tir.schedule import SBlockRV

from scan_tir.lower.vocabulary import step_blocks


def read_by_a_step(sch: Schedule, block: SBlockRV) -> bool:
    """Whether a scan's step block lists a buffer that ``block`` writes among its reads."""
    written = [w.source for w in sch.get(block).writes]
    return any(
        r.source.same_as(buffer)
        for _, scan in step_blocks(sch)
        for r in scan.step.reads
        for buffer in written
    )


@derived_object
class KeepStepInputs(PyScheduleRule):
    """``rule``, except on blocks whose output a scan's step reads (left as they are)."""

    def __init__(self, rule: ScheduleRule) -> None:
        super().__init__()
        self.rule = rule

    def _initialize_with_tune_context(self, context) -> None:
        self.rule._initialize_with_tune_context(context)

    def apply(self, sch: Schedule, block: SBlockRV) -> list[Schedule]:
        if read_by_a_step(sch, block):
            return [sch]
        return list(self.rule.apply(sch, block))

    def clone(self) -> ScheduleRule:
        return KeepStepInputs(self.rule.clone())
