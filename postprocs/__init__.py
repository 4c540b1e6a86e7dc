"""Scan-aware MetaSchedule postprocessors.

``scan_postprocs(target)`` is MetaSchedule's llvm list with DisallowDynamicLoop replaced by
:class:`DisallowDynamicLoopOutsideScans`, :class:`FuseStepEpilogue` and
:class:`RewriteStepParallelVectorizeUnroll` carrying out the decisions inside steps,
:class:`RewritePersistentStep` once the step's nests are final,
:class:`RewriteConcurrentScans` (independent scans marked to run side by side),
:class:`RewritePipelinedScans` (first, before the root's loops are fused: a stacked layer
marked to run a chunk behind the one that feeds it), and
:class:`VerifyScanStructure` last, so that it checks the program as it will be built.
"""

from __future__ import annotations

from tvm.s_tir.meta_schedule.postproc import (
    Postproc,
    RewriteLayout,
    RewriteParallelVectorizeUnroll,
    RewriteReductionBlock,
)
from tvm.target import Target

from .concurrent_scans import RewriteConcurrentScans
from .dynamic_loop import DisallowDynamicLoopOutsideScans
from .persistent_step import RewritePersistentStep
from .pipelined_scans import RewritePipelinedScans
from .step_fusion import FuseStepEpilogue
from .step_parallel import RewriteStepParallelVectorizeUnroll
from .verify_scan import VerifyScanStructure


def scan_postprocs(target: Target) -> list[Postproc]:
    """The postprocessors for tuning functions with scans on ``target`` (llvm)."""
    if target.kind.name != "llvm":
        raise ValueError(
            f"scan-tir's postprocessors are for CPU targets (llvm), not '{target.kind.name}'."
        )
    return [
        DisallowDynamicLoopOutsideScans(),
        RewritePipelinedScans(),
        RewriteParallelVectorizeUnroll(),
        FuseStepEpilogue(),
        RewriteStepParallelVectorizeUnroll(),
        RewriteReductionBlock(),
        RewriteLayout(),
        RewritePersistentStep(),
        RewriteConcurrentScans(),
        VerifyScanStructure(),
    ]


__all__ = [
    "DisallowDynamicLoopOutsideScans",
    "FuseStepEpilogue",
    "RewriteConcurrentScans",
    "RewritePersistentStep",
    "RewritePipelinedScans",
    "RewriteStepParallelVectorizeUnroll",
    "VerifyScanStructure",
    "scan_postprocs",
]
