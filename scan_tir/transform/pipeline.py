"""The TIR pipeline every scan-tir build uses: :data:`PIPELINE`.

``ConcurrentLanes``, ``PipelinedScans``, ``BoundTileBuffers`` and ``MarkOwnedShares`` on
S-TIR, TVM's S-TIR pipeline, then ``InlineVectorIndices`` (vector index bindings that
TVM's CSE may hoist out of a parallel launch, substituted back) and ``PersistentLaunch``
(before the host passes, which turn allocations into workspace calls). Builds name it:
``tvm.compile(..., tir_pipeline=PIPELINE)``; :func:`signature` names its passes, for
caches of built libraries to key on.

A function with two or more allocations of symbolic size goes through TVM's pipeline
with StorageRewrite's reuse off. The pass gives allocations whose lifetimes never overlap
one allocation of the largest size, counted in bits in the type of the extents
(src/tir/transforms/storage_rewrite.cc, "Build a merged allocation"): a constant count
too large for int32 is widened to int64, a symbolic one is not, and symbolic
allocations are merged only with each other (its ``FindAlloc``). A dispatching function
(:func:`scan_tir.tune.dispatch`) has such allocations in every branch (a sequence's
gates, steps x batch x 4 hidden), and branches never run together, so they are merged;
at 2**26 float32 elements (a batch of 64, 1024 steps, 1024 gates) the int32 bit count
overflows: the buffer is allocated too short, results are silently wrong and the heap is
corrupted. Any function with two such buffers of disjoint lifetimes is exposed the same
way. The extents cannot be widened to int64 before the pass, as CompactBufferAllocation
recomputes them in the indices' type.

Reuse off (``tirx.merge_static_smem``, which leaves merging to a pass for GPU shared
memory) each buffer keeps its own allocation, and the pass still does what the step's
speed depends on: it gives a local accumulator the vector type it is accessed with (a
dispatching function lowered without the pass ran its branches slower than the same
branches built alone; notes.md, issue 17). One merge is left, a buffer computed in
place of another (its ``InplaceOpVerifier``), sized the same way: where it merges two
symbolic allocations (their count drops across the pass, :class:`_SymbolicMerges`), the
function is lowered again without the pass.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir.pipeline import default_s_tir_pipeline
from tvm.tirx.compilation_pipeline import PIPELINE_MAP

from .concurrent_lanes import ConcurrentLanes
from .owned_shares import MarkOwnedShares
from .persistent_launch import PersistentLaunch
from .pipelined_scans import PipelinedScans
from .tile_buffers import BoundTileBuffers
from .vector_indices import InlineVectorIndices

#: The TIR pipeline every scan-tir build uses (``tvm.compile(..., tir_pipeline=PIPELINE)``).
PIPELINE = "scan_tir"
_STORAGE_REWRITE = "tirx.StorageRewrite"
_NO_REUSE = "tirx.merge_static_smem"
_NO_STORAGE_REWRITE = "tirx.disable_storage_rewrite"


def symbolic_allocations(func: tvm.ir.BaseFunc) -> list[tirx.Var]:
    """The buffers ``func`` allocates (in its blocks or as statements) whose shapes are
    not all constant."""
    found: list[tirx.Var] = []

    def visit(node: object) -> None:
        buffers = node.alloc_buffers if isinstance(node, s_tir.SBlock) else [node.buffer]
        found.extend(
            b for b in buffers if not all(isinstance(e, tirx.IntImm) for e in b.ty.shape)
        )

    if isinstance(func, tirx.PrimFunc):
        tvm_ffi.structural_walk(func.body, [(s_tir.SBlock, visit), (tirx.stmt.AllocBuffer, visit)])
    return found


def merged_unsafely(func: tvm.ir.BaseFunc) -> bool:
    """Whether StorageRewrite could merge allocations of ``func`` into one whose size
    overflows (two or more of symbolic size): such functions are lowered with its reuse
    off."""
    return len(symbolic_allocations(func)) >= 2


@tvm.instrument.pass_instrument
class _SymbolicMerges:
    """Whether StorageRewrite merged allocations of symbolic size (fewer after it than
    before), which it does with reuse off only for a buffer computed in place of
    another."""

    def __init__(self) -> None:
        self.before = 0
        self.merged = False

    def run_before_pass(self, mod: tvm.IRModule, info: tvm.transform.PassInfo) -> None:
        if info.name == _STORAGE_REWRITE:
            self.before = _symbolic_count(mod)

    def run_after_pass(self, mod: tvm.IRModule, info: tvm.transform.PassInfo) -> None:
        if info.name == _STORAGE_REWRITE and _symbolic_count(mod) < self.before:
            self.merged = True


def _symbolic_count(mod: tvm.IRModule) -> int:
    return sum(len(symbolic_allocations(f)) for f in mod.functions.values())


def _apart(lower: tvm.transform.Pass) -> tvm.transform.Pass:
    """``lower``, the functions of a module that StorageRewrite could merge unsafely
    lowered on their own, with its reuse off, or without it where it still merged
    allocations of symbolic size."""

    @tvm.transform.module_pass(opt_level=0, name="scan_tir.LowerApart")
    def apart(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        marked = [gv for gv, f in mod.functions.items() if merged_unsafely(f)]
        if not marked:
            return lower(mod)
        rest = [gv for gv in mod.functions if not any(gv.same_as(m) for m in marked)]
        merges = _SymbolicMerges()
        with _within(ctx, {_NO_REUSE: True}, merges):
            out = lower(_part(mod, marked))
        if merges.merged:
            with _within(ctx, {_NO_STORAGE_REWRITE: True}):
                out = lower(_part(mod, marked))
        if rest:
            out.update(lower(_part(mod, rest)))
        return out

    return apart


def _within(
    ctx: tvm.transform.PassContext, config: dict, *instruments: object
) -> tvm.transform.PassContext:
    """``ctx`` with ``config`` added and ``instruments`` after its own."""
    return tvm.transform.PassContext(
        opt_level=ctx.opt_level,
        required_pass=list(ctx.required_pass),
        disabled_pass=list(ctx.disabled_pass),
        instruments=[*ctx.instruments, *instruments],
        config={**ctx.config, **config},
    )


def _part(mod: tvm.IRModule, gvs: list[tvm.ir.GlobalVar]) -> tvm.IRModule:
    return tvm.IRModule({gv: mod[gv] for gv in gvs}, attrs=mod.attrs)


#: TVM's S-TIR pipeline as :func:`_apart` runs it, named in :func:`signature`.
_TVM_LOWERING = "s_tir (symbolic allocations: StorageRewrite without reuse)"
#: The passes around TVM's S-TIR pipeline, in order (``None``: TVM's own).
_AROUND = (ConcurrentLanes, PipelinedScans, BoundTileBuffers, MarkOwnedShares, None,
           InlineVectorIndices, PersistentLaunch)


def signature() -> str:
    """The TVM version and the passes of :data:`PIPELINE`: a library built under another
    signature was built by another pipeline, and a cache of built libraries builds it
    again (its records stay valid)."""
    names = [p.info.name if p is not None else _TVM_LOWERING for p in _AROUND]
    return f"tvm {tvm.__version__}: " + ", ".join(names)


def _pipeline(**kwargs):
    lower, host, device = default_s_tir_pipeline(**kwargs)
    passes = [p if p is not None else _apart(lower) for p in _AROUND]
    return tvm.transform.Sequential(passes), host, device


PIPELINE_MAP[PIPELINE] = _pipeline
