"""``scan_space``: the design-space generator for ``ms.tune_tir`` on functions with scans."""

from __future__ import annotations

from collections.abc import Sequence

from tvm.s_tir.meta_schedule.schedule_rule import ScheduleRule
from tvm.s_tir.meta_schedule.space_generator import PostOrderApply
from tvm.target import Target

from meta_rules import scan_rules
from postprocs import scan_postprocs


def scan_space(target: Target, step_rules: Sequence[ScheduleRule] = ()) -> PostOrderApply:
    """PostOrderApply with the scan rules and postprocs and MetaSchedule's llvm mutators.

    Usage: ``ms.tune_tir(mod, target, work_dir, max_trials_global,
    space=scan_tir.scan_space(target))``. ``step_rules``: more rules for the blocks inside
    steps, applied right after the step's own decisions (see ``meta_rules.scan_rules``;
    ``scan_tir.experimental`` passes one).
    """
    return PostOrderApply(
        sch_rules=scan_rules(target, step_rules),
        postprocs=scan_postprocs(target),
        mutator_probs="llvm",
    )
