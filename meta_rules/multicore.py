"""``MultiCoreRule``: the base of the rules whose decisions only matter on several cores.

Running scans side by side, pipelining stacked layers and a persistent step all share the
cores out; on one core there is nothing to decide. Such a rule reads the target's core
count once per tuning and clones with it (MetaSchedule clones rules per search thread).
"""

from __future__ import annotations

from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule, ScheduleRule


class MultiCoreRule(PyScheduleRule):
    """A rule with the target's core count (``num_cores``); a subclass's ``clone`` is
    ``return self.with_cores(Subclass())``."""

    def __init__(self) -> None:
        super().__init__()
        self.num_cores = 1

    def _initialize_with_tune_context(self, context) -> None:
        self.num_cores = int(context.target.attrs.get("num-cores", 1))

    def with_cores(self, rule: ScheduleRule) -> ScheduleRule:
        """``rule`` (a new instance of the subclass, which ``clone`` must name: the
        derived object is not reachable from here once MetaSchedule holds only its handle)
        with this rule's core count."""
        rule.num_cores = self.num_cores
        return rule
