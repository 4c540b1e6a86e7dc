"""``DisallowDynamicLoopOutsideScans``: MetaSchedule's DisallowDynamicLoop, except for the
time loops of scans.

A module whose scan length is symbolic has one loop of unknown extent per scan, and that
loop is never tiled, so it does not stop tuning; any other loop of non-constant extent
still rejects the candidate, as in src/s_tir/meta_schedule/postproc/disallow_dynamic_loop.cc.
"""

from __future__ import annotations

import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.postproc import Postproc, PyPostproc

from scan_tir.lower.vocabulary import SCAN_STEP


def _is_time_loop(loop: tirx.For) -> bool:
    body = loop.body
    return isinstance(body, s_tir.SBlockRealize) and SCAN_STEP in body.block.annotations


def dynamic_loops(func: tirx.PrimFunc) -> list[tirx.For]:
    """Loops of non-constant extent in ``func`` other than scan time loops."""
    found: list[tirx.For] = []

    def visit(loop: tirx.For) -> None:
        if not isinstance(loop.extent, tirx.IntImm) and not _is_time_loop(loop):
            found.append(loop)

    tvm_ffi.structural_walk(func.body, (tirx.For, visit))
    return found


@derived_object
class DisallowDynamicLoopOutsideScans(PyPostproc):
    """Reject candidates with a loop of non-constant extent that is not a scan's time loop."""

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def apply(self, sch: Schedule) -> bool:
        return not any(
            dynamic_loops(f) for f in sch.mod.functions.values() if isinstance(f, tirx.PrimFunc)
        )

    def clone(self) -> Postproc:
        return DisallowDynamicLoopOutsideScans()
