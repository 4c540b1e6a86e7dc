"""Replaying a tuning record's trace on a function."""

from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.s_tir import meta_schedule as ms


def replay(record: ms.database.TuningRecord, func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` scheduled by ``record``'s trace (postprocessing included)."""
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return sch.mod["main"]
