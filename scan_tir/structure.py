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

#: Decisions the scan rules leave on a step block for the scan postprocs to carry out:
#: the most iterations one parallel loop of the step may fuse (0: the step runs serially),
#: and the longest loop the step may vectorize. Unrolling uses MetaSchedule's own key
#: (``meta_schedule.unroll_explicit``) so that its MutateUnroll mutates the decision.
STEP_PARALLEL = "scan_tir.step_parallel"
STEP_VECTORIZE = "scan_tir.step_vectorize"
STEP_UNROLL = "meta_schedule.unroll_explicit"

#: ``IterVar.iter_type`` values: data-parallel, and ordered (``T.axis.scan``).
DATA_PAR = 0
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


class Role:
    """Where a block sits relative to the scans of its function."""

    #: Not inside any scan: the stock rules schedule it as usual.
    OUTSIDE = "outside"
    #: Part of a scan's fixed structure (the scan block, an init copy, a step block): no rule
    #: may touch it.
    STRUCTURE = "structure"
    #: Inside a step block: one step's ordinary work, which the scan rules tune.
    IN_STEP = "in_step"


def block_role(sch: s_tir.Schedule, block: s_tir.schedule.SBlockRV) -> str:
    """The :class:`Role` of ``block`` in the schedule's current state."""
    sref = sch.get_sref(block)
    own = sref.stmt.annotations
    if SCAN in own or SCAN_STEP in own or SCAN_INIT in own:
        return Role.STRUCTURE
    parent = sref.parent
    while parent is not None:
        stmt = parent.stmt
        if isinstance(stmt, s_tir.SBlock):
            if SCAN_STEP in stmt.annotations:
                return Role.IN_STEP
            if SCAN in stmt.annotations:
                return Role.STRUCTURE
        parent = parent.parent
    return Role.OUTSIDE


def step_blocks(sch: s_tir.Schedule) -> list[tuple[s_tir.schedule.SBlockRV, ScanNest]]:
    """Each scan's step block in ``sch``'s functions, as a block RV, with its scan."""
    found = []
    for gv, func in sch.mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            for scan in find_scans(func):
                found.append((sch.get_sblock(scan.step.name_hint, func_name=gv.name_hint), scan))
    return found
