"""The TIR pipeline every scan-tir build uses: :data:`PIPELINE`.

``ConcurrentLanes``, ``PipelinedScans``, ``BoundTileBuffers`` and ``MarkOwnedShares`` on
S-TIR, TVM's S-TIR pipeline, then ``PersistentLaunch`` (before the host passes, which
turn allocations into workspace calls). Builds name it: ``tvm.compile(...,
tir_pipeline=PIPELINE)``.

A dispatching function (the attribute :data:`DISPATCHING`, which
:func:`scan_tir.tune.dispatch` sets) goes through TVM's pipeline without its
StorageRewrite. That pass gives allocations whose lifetimes never overlap one allocation
of the largest size, counted in bits in the type of the extents
(src/tir/transforms/storage_rewrite.cc, "Build a merged allocation"). The branches of a
dispatching function never run together, and each allocates symbolic buffers (a
sequence's gates, steps x batch x 4 hidden), so they are merged, and at 2**26 float32
elements (a batch of 64, 1024 steps, 1024 gates) the int32 bit count overflows: the
buffer is allocated too short, results are silently wrong and the heap is corrupted.
The extents cannot be widened to int64 before the pass, as CompactBufferAllocation
recomputes them in the indices' type. Without the pass each branch allocates its own
buffers inside the branch, as large as they need to be, and only when it runs.
"""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.s_tir.pipeline import default_s_tir_pipeline
from tvm.tirx.compilation_pipeline import PIPELINE_MAP

from .concurrent_lanes import ConcurrentLanes
from .owned_shares import MarkOwnedShares
from .persistent_launch import PersistentLaunch
from .pipelined_scans import PipelinedScans
from .tile_buffers import BoundTileBuffers

#: The TIR pipeline every scan-tir build uses (``tvm.compile(..., tir_pipeline=PIPELINE)``).
PIPELINE = "scan_tir"
#: On a function whose body branches to one of several schedules of itself by shape.
DISPATCHING = "scan_tir.dispatching"

_NO_STORAGE_REWRITE = "tirx.disable_storage_rewrite"


def dispatching(func: tvm.ir.BaseFunc) -> bool:
    """Whether ``func`` is a dispatching function (lowered without StorageRewrite)."""
    return isinstance(func, tirx.PrimFunc) and bool(func.attrs and DISPATCHING in func.attrs)


def _apart(lower: tvm.transform.Pass) -> tvm.transform.Pass:
    """``lower``, the dispatching functions of a module lowered on their own, without
    StorageRewrite."""

    @tvm.transform.module_pass(opt_level=0, name="scan_tir.LowerDispatchingApart")
    def apart(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        marked = [gv for gv, f in mod.functions.items() if dispatching(f)]
        if not marked:
            return lower(mod)
        rest = [gv for gv in mod.functions if not any(gv.same_as(m) for m in marked)]
        config = {**ctx.config, _NO_STORAGE_REWRITE: True}
        with tvm.transform.PassContext(
            opt_level=ctx.opt_level,
            required_pass=list(ctx.required_pass),
            disabled_pass=list(ctx.disabled_pass),
            config=config,
        ):
            out = lower(_part(mod, marked))
        if rest:
            out.update(lower(_part(mod, rest)))
        return out

    return apart


def _part(mod: tvm.IRModule, gvs: list[tvm.ir.GlobalVar]) -> tvm.IRModule:
    return tvm.IRModule({gv: mod[gv] for gv in gvs}, attrs=mod.attrs)


def _pipeline(**kwargs):
    lower, host, device = default_s_tir_pipeline(**kwargs)
    passes = [
        ConcurrentLanes,
        PipelinedScans,
        BoundTileBuffers,
        MarkOwnedShares,
        _apart(lower),
        PersistentLaunch,
    ]
    return tvm.transform.Sequential(passes), host, device


PIPELINE_MAP[PIPELINE] = _pipeline
