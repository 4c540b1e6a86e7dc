"""``Scoped``: a schedule rule restricted to the blocks of some roles.

The guard between stock MetaSchedule and a scan. A stock rule sees only the blocks whose
:func:`scan_tir.lower.vocabulary.block_role` is among ``roles``; every other block is passed
through untouched, so no stock rule ever acts on a scan's block, its init copies, its step
block or its time loop: by construction, not because today's stock rules happen to leave
them alone (with the step block at the root, MultiLevelTiling reordered its ordered
iterator and aborted the design-space generation; see the field notes and notes.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from tvm import s_tir
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule, ScheduleRule
from tvm.s_tir.schedule import SBlockRV

from scan_tir.lower.vocabulary import block_role

from .alternatives import rule_name


@derived_object
class Scoped(PyScheduleRule):
    """Apply ``rule`` to the blocks whose role is in ``roles``; leave the others alone."""

    def __init__(
        self, rule: ScheduleRule, roles: Iterable[str], fallback: ScheduleRule | None = None
    ) -> None:
        super().__init__()
        self.rule = rule
        self.roles = frozenset(roles)
        self.fallback = fallback

    def _initialize_with_tune_context(self, context) -> None:
        self.rule._initialize_with_tune_context(context)
        if self.fallback is not None:
            self.fallback._initialize_with_tune_context(context)

    def apply(self, sch: Schedule, block: SBlockRV) -> list[Schedule]:
        if block_role(sch, block) not in self.roles:
            return [sch]
        # A stock rule that fails half-way would abort the whole design-space generation.
        # Inside steps it happens: MultiLevelTiling fuses a lone elementwise consumer into
        # the tile, and TVM's region solver gives up when that consumer reads the tile at
        # several offsets (a GRU's three gates). Then try the fallback, or leave the block.
        before = sch.copy()
        try:
            return list(self.rule.apply(sch, block))
        except (ValueError, s_tir.ScheduleError):
            if self.fallback is None:
                return [before]
            retry = before.copy()
            try:
                return list(self.fallback.apply(retry, block))
            except (ValueError, s_tir.ScheduleError):
                return [before]

    def clone(self) -> ScheduleRule:
        fallback = self.fallback.clone() if self.fallback is not None else None
        return Scoped(self.rule.clone(), self.roles, fallback)

    def __repr__(self) -> str:
        return f"Scoped({rule_name(self.rule)}, {sorted(self.roles)})"
