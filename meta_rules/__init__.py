"""Scan-aware MetaSchedule schedule rules.

``scan_rules(target)`` is the rule list for ``PostOrderApply``: MetaSchedule's own llvm
rules, each scoped (:class:`Scoped`) so that it sees the blocks outside scans and, for the
rules that tile and inline, the ordinary blocks inside scan steps, but never a scan's own
structure (the root's parallel/vector/unroll rule also offers a serial root, through
:class:`Alternatives`); plus the rules for what stock MetaSchedule cannot do inside a step:
:class:`ParallelizeVectorizeUnrollStep` (parallel, vector and unroll decisions, which the
stock rule makes only at the root), :class:`PersistentStep` (the whole time loop in one
thread-pool launch, a barrier per nest), :class:`ConcurrentScans` (independent scans side
by side, a core each), :class:`PipelinedScans` (a stacked layer a chunk of steps behind
the one that feeds it, a core each) and :class:`CacheStepWeights` (recurrent weights
packed once per call, not per step). Dense blocks are tiled by MultiLevelTiling
or :class:`RegisterTiling` (a register block of the CPU's size), the latter alone on
matrix-matrix products (:class:`Preferred`). The gate math is also fused into the recurrent
product's tiles by a postproc (postprocs.FuseStepEpilogue), where TVM's region solver
allows.
"""

from __future__ import annotations

from collections.abc import Sequence

from tvm.s_tir.meta_schedule.schedule_rule import (
    AddRFactor,
    AutoInline,
    InlineConstantScalars,
    MultiLevelTiling,
    ParallelizeVectorizeUnroll,
    RandomComputeLocation,
    ScheduleRule,
)
from tvm.target import Target

from scan_tir.lower.vocabulary import Role

from .alternatives import Alternatives
from .concurrent_scans import ConcurrentScans
from .intrinsics import import_cpu_intrinsics
from .persistent_step import PersistentStep
from .pipelined_scans import PipelinedScans
from .preferred import Preferred
from .register_tiling import RegisterTiling
from .scoped import Scoped
from .step_inputs import KeepStepInputs
from .step_parallel import ParallelizeVectorizeUnrollStep
from .step_weights import CacheStepWeights

#: Stock rules that also act inside steps; the others (the root-level parallel/vector
#: annotation, RandomComputeLocation, ApplyCustomRule) only make sense outside.
_ALSO_IN_STEPS = (InlineConstantScalars, AutoInline, AddRFactor, MultiLevelTiling)
#: Stock rules that can inline a block (RandomComputeLocation too: its sampled location -2
#: is compute_inline), never a step's input into the step (KeepStepInputs says why).
_INLINERS = (InlineConstantScalars, AutoInline, RandomComputeLocation)


def _tiling_without_write_reuse() -> ScheduleRule:
    """MetaSchedule's llvm MultiLevelTiling (schedule_rule.cc, ScheduleRuleDefaultLLVM)
    without its write-cache / consumer fusion, the step that can fail inside steps."""
    return MultiLevelTiling(structure="SSRSRS", max_innermost_factor=64, reuse_write=None)


def _register_tiling_or(tiling: ScheduleRule) -> ScheduleRule:
    """RegisterTiling alone on matrix-matrix products, beside ``tiling`` elsewhere."""
    return Preferred(RegisterTiling(), Alternatives([tiling, RegisterTiling()]))


def _serial_root() -> ScheduleRule:
    """MetaSchedule's llvm ParallelizeVectorizeUnroll without parallel loops (-1)."""
    return ParallelizeVectorizeUnroll(
        max_jobs_per_core=-1,
        max_vectorize_extent=64,
        unroll_max_steps=[0, 16, 64, 512],
        unroll_explicit=True,
    )


def scan_rules(target: Target, step_rules: Sequence[ScheduleRule] = ()) -> list[ScheduleRule]:
    """The schedule rules for tuning functions with scans on ``target`` (llvm).

    ``step_rules`` come right after the step's own decisions and before the stock rules
    (``scan_tir.experimental`` passes its step tiling there).
    """
    if target.kind.name != "llvm":
        raise ValueError(
            f"scan-tir's schedule rules are for CPU targets (llvm), not '{target.kind.name}'."
        )
    import_cpu_intrinsics()
    # The step's decisions come first: a Python rule that annotates a block after
    # MultiLevelTiling has forked the schedule corrupts the heap in TVM 0.27 (notes.md).
    rules: list[ScheduleRule] = [
        ParallelizeVectorizeUnrollStep(),
        PersistentStep(),
        ConcurrentScans(),
        PipelinedScans(),
        CacheStepWeights(),
    ]
    rules.extend(step_rules)
    for rule in ScheduleRule.create("llvm"):
        roles = {Role.OUTSIDE}
        if isinstance(rule, _ALSO_IN_STEPS):
            roles.add(Role.IN_STEP)
        fallback = None
        if isinstance(rule, MultiLevelTiling):
            fallback = _register_tiling_or(_tiling_without_write_reuse())
            rule = _register_tiling_or(rule)
        if isinstance(rule, ParallelizeVectorizeUnroll):
            rule = Alternatives([rule, _serial_root()])
        if isinstance(rule, _INLINERS):
            rule = KeepStepInputs(rule)
        rules.append(Scoped(rule, roles, fallback))
    return rules


__all__ = [
    "Alternatives",
    "CacheStepWeights",
    "ConcurrentScans",
    "KeepStepInputs",
    "ParallelizeVectorizeUnrollStep",
    "PersistentStep",
    "PipelinedScans",
    "Preferred",
    "RegisterTiling",
    "Scoped",
    "scan_rules",
]
