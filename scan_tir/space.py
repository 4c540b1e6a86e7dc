"""``scan_space``: the design-space generator for ``ms.tune_tir`` on functions with scans."""

from __future__ import annotations

from tvm.s_tir.meta_schedule.space_generator import PostOrderApply
from tvm.target import Target


def scan_space(target: Target, tile_step_outputs: bool = False) -> PostOrderApply:
    """PostOrderApply with the scan rules and postprocs and MetaSchedule's llvm mutators.

    Usage: ``ms.tune_tir(mod, target, work_dir, max_trials_global,
    space=scan_tir.scan_space(target))``. ``tile_step_outputs``: also offer steps tiled by
    their outputs (meta_rules.TileStepOutputs; experimental, see there).
    """
    # Imported here: both packages import scan_tir.structure, so a module-level import
    # would be circular.
    from meta_rules import scan_rules
    from postprocs import scan_postprocs

    return PostOrderApply(
        sch_rules=scan_rules(target, tile_step_outputs),
        postprocs=scan_postprocs(target), mutator_probs="llvm"
    )
