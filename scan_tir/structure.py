"""Annotations that mark the scan structure in emitted S-TIR, and a reader for them.

Schedule rules and postprocessors must find the scan axis without guessing from loop
shapes, so the converter writes these annotations and everything downstream reads them
through :func:`find_scan_steps`.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import s_tir, tirx

#: On every per-step block: the name of the TE scan it implements.
SCAN_STEP = "scan_tir.scan_step"
#: On the blocks that copy a scan's initial rows into its state buffer.
SCAN_INIT = "scan_tir.scan_init"

#: ``IterVar.iter_type`` of an ordered (``T.axis.scan``) block iterator.
ORDERED = 3


@dataclass(frozen=True)
class ScanStep:
    """One scan as it appears in a PrimFunc: its serial time loop and its step block."""

    name: str
    loop: tirx.For
    block: s_tir.SBlock


def find_scan_steps(func: tirx.PrimFunc) -> list[ScanStep]:
    """Every annotated scan step in ``func``, outermost first, in program order."""
    steps: list[ScanStep] = []

    def visit(node: tirx.For) -> None:
        body = node.body
        if isinstance(body, s_tir.SBlockRealize) and SCAN_STEP in body.block.annotations:
            steps.append(ScanStep(str(body.block.annotations[SCAN_STEP]), node, body.block))

    tvm_ffi.structural_walk(func.body, (tirx.For, visit), order="pre")
    return steps
