"""``CacheStepWeights``: give recurrent weights a root-level copy, so they can be repacked once.

MetaSchedule's RewriteLayout repacks a layout-free weight with a cache_read placed in the
scope of the block that reads it. A weight read inside a scan step would be repacked inside
the step, at every step. RewriteLayout also follows a chain of plain copies from a
layout-free buffer to its reader (``GetCacheReadChain`` in
src/s_tir/meta_schedule/postproc/rewrite_layout.cc) and puts its rewrite block before the
first copy. So this rule makes that first copy at the root: a ``cache_read`` of each
layout-free parameter that a scan reads, made at the scan's block. RewriteLayout then
packs the copy for the tiled step and prepares the weight once per call, before the scan
(or never, when the caller prepacks it: MetaSchedule's builder measures it that way).

Touches: the scan block's read of a layout-free parameter (and nothing inside the scan).
"""

from __future__ import annotations

from tvm import tirx
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule, ScheduleRule
from tvm.s_tir.schedule import SBlockRV

from scan_tir.lower.vocabulary import SCAN


def _layout_free_params(sch: Schedule) -> list:
    params = []
    for func in sch.mod.functions.values():
        if isinstance(func, tirx.PrimFunc) and func.attrs is not None:
            for index in func.attrs.get("layout_free_buffers", []):
                params.append(func.params[int(index)])
    return params


@derived_object
class CacheStepWeights(PyScheduleRule):
    """cache_read each layout-free parameter a scan reads, at the scan's block."""

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def apply(self, sch: Schedule, block: SBlockRV) -> list[Schedule]:
        if SCAN not in sch.get(block).annotations:
            return [sch]
        weights = _layout_free_params(sch)
        # cache_read renumbers nothing before the index it replaces, so go backwards.
        reads = list(sch.get(block).reads)
        for index in reversed(range(len(reads))):
            if any(reads[index].source.same_as(w) for w in weights):
                sch.cache_read(block, index, "global")
        return [sch]

    def clone(self) -> ScheduleRule:
        return CacheStepWeights()
