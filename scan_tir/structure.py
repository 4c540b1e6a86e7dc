"""Annotations that mark the scan structure in emitted S-TIR, and a reader for them.

Schedule rules and postprocessors must find the scan axis without guessing from loop
shapes, so the converter writes these annotations and everything downstream reads them
through :func:`find_scans`.

A scan is one root-level block (annotated :data:`SCAN`) that reads the scan's inputs and
writes its state buffers, so that the root scope stays a stage pipeline and the ops around
the scan schedule as usual. Inside it: the init copies (:data:`SCAN_INIT`), then the serial
time loop whose body is the step block (:data:`SCAN_STEP`, an ordered iterator).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import s_tir, tirx

#: On the block that holds a whole scan: the name of the TE scan.
SCAN = "scan_tir.scan"
#: On each scan's per-step block: the name of the TE scan.
SCAN_STEP = "scan_tir.scan_step"
#: On the blocks that copy a scan's initial rows into its state buffer.
SCAN_INIT = "scan_tir.scan_init"

#: ``IterVar.iter_type`` of an ordered (``T.axis.scan``) block iterator.
ORDERED = 3


@dataclass(frozen=True)
class ScanNest:
    """One scan as it appears in a PrimFunc."""

    name: str
    #: The block holding the whole scan (init copies and time loop).
    block: s_tir.SBlock
    #: The serial time loop.
    loop: tirx.For
    #: The per-step block directly under ``loop``.
    step: s_tir.SBlock


def find_scans(func: tirx.PrimFunc) -> list[ScanNest]:
    """Every annotated scan in ``func``, in program order."""
    scans: list[ScanNest] = []

    def visit(block: s_tir.SBlock) -> None:
        if SCAN not in block.annotations:
            return
        loops: list[tirx.For] = []

        def on_loop(loop: tirx.For) -> None:
            body = loop.body
            if isinstance(body, s_tir.SBlockRealize) and SCAN_STEP in body.block.annotations:
                loops.append(loop)

        tvm_ffi.structural_walk(block.body, (tirx.For, on_loop))
        for loop in loops:
            scans.append(ScanNest(str(block.annotations[SCAN]), block, loop, loop.body.block))

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, visit), order="pre")
    return scans
