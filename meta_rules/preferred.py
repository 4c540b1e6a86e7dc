"""``Preferred``: one rule alone on the blocks it claims, other rules elsewhere.

:class:`Alternatives` multiplies the design spaces: each tiled block doubles them. The
evolutionary search mutates the decisions sampled inside a design space, never the choice
between spaces, so every extra space thins the samples of the others. At D (batch 64)
the input GEMM and the recurrent product are both matrix-matrix products; in 64 trials
of ``Alternatives(MultiLevelTiling, RegisterTiling)`` one candidate register-tiled both
(notes.md, section 3, "Small hours of 2026-12-01"), and the best still ran the input
GEMM at half the rate of the register-tiled kernel. Where the register block is known to be the
right structure, the alternatives only cost trials; elsewhere (a batch-1 step, a
matrix-vector product that streams its weights) both stay in the space.

Touches: what ``rule`` or ``otherwise`` touches; it decides only which of them runs.
"""

from __future__ import annotations

from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule, ScheduleRule
from tvm.s_tir.schedule import SBlockRV

from .alternatives import rule_name


@derived_object
class Preferred(PyScheduleRule):
    """``rule`` alone where ``rule.claims(sch, block)``; ``otherwise`` everywhere else."""

    def __init__(self, rule: ScheduleRule, otherwise: ScheduleRule) -> None:
        super().__init__()
        self.rule = rule
        self.otherwise = otherwise

    def _initialize_with_tune_context(self, context) -> None:
        self.rule._initialize_with_tune_context(context)
        self.otherwise._initialize_with_tune_context(context)

    def apply(self, sch: Schedule, block: SBlockRV) -> list[Schedule]:
        chosen = self.rule if self.rule._inst.claims(sch, block) else self.otherwise
        return list(chosen.apply(sch, block))

    def clone(self) -> ScheduleRule:
        # Through TVM's FFI a clone comes back as a bare _PyScheduleRule, without the
        # ``claims`` of its Python instance: clone that instance itself.
        return Preferred(self.rule._inst.clone(), self.otherwise.clone())

    def __repr__(self) -> str:
        return f"Preferred({rule_name(self.rule)}, {rule_name(self.otherwise)})"
