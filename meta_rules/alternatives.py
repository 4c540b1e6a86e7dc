"""``Alternatives``: a design space that holds each of several rules' results.

A stock rule makes one decision for every design space: MetaSchedule's llvm
ParallelizeVectorizeUnroll always lets the root's loops run in parallel. For a small
recurrence (config B: 256 steps of a 64x16 product) the fork/join of each parallel loop
around the scan costs more than the loop's work, so the search space must also hold the
serial choice. This rule returns the schedules of every alternative, each applied to its
own copy; the search then samples among them.
"""

from __future__ import annotations

from collections.abc import Sequence

from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule, ScheduleRule
from tvm.s_tir.schedule import SBlockRV


def rule_name(rule: ScheduleRule) -> str:
    """How provenance names ``rule``: a derived_object's own ``__repr__`` where its Python
    instance (``_inst``) has one, else the class name."""
    inner = getattr(rule, "_inst", None)
    if inner is not None and type(inner).__repr__ is not object.__repr__:
        return repr(inner)
    return type(rule).__name__


@derived_object
class Alternatives(PyScheduleRule):
    """The union of what each of ``rules`` makes of a block."""

    def __init__(self, rules: Sequence[ScheduleRule]) -> None:
        super().__init__()
        self.rules = list(rules)

    def _initialize_with_tune_context(self, context) -> None:
        for rule in self.rules:
            rule._initialize_with_tune_context(context)

    def apply(self, sch: Schedule, block: SBlockRV) -> list[Schedule]:
        before = len(sch.trace.insts)
        results = [out for rule in self.rules for out in rule.apply(sch.copy(), block)]
        # Where no alternative does anything (every block but the root, for the rule this
        # is used with), the space must not be multiplied by identical copies.
        changed = [out for out in results if len(out.trace.insts) > before]
        return changed or [sch]

    def clone(self) -> ScheduleRule:
        return Alternatives([rule.clone() for rule in self.rules])

    def __repr__(self) -> str:
        return f"Alternatives({', '.join(rule_name(rule) for rule in self.rules)})"
