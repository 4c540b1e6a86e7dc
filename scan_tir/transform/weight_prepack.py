"""``split_weight_prepack``: weights packed once for a function whose kernels each pack their own.

A schedule tuned on layout-free weights repacks them at the start of every call, in blocks
marked ``meta_schedule.layout_rewrite_preproc`` (MetaSchedule's RewriteLayout). For one
schedule, a deployment packs once: :func:`~scan_tir.transform.prepacked.prepacked` drops
the blocks and retypes the weight to its packed layout, and Relax runs the split-off blocks
once (``SplitLayoutRewritePreproc``). A function that dispatches among schedules
(:func:`scan_tir.tune.dispatch`) holds one set of such blocks in each branch, each in its
kernel's layout, so no one retyping serves: the weight would need every layout at once.

So each distinct packing (its weight, its layout, its loop nest) becomes a parameter of its
own, appended after the function's; the main function reads it where the branch read the
buffer it packed, and a second function, of the same parameters, fills them. A caller runs
``prepack`` once on the weights and ``main`` at every call, both with the same arguments.
Where a branch then copies a packed weight into a buffer of the same layout
(``meta_rules.CacheStepWeights``' copy), the copy is elided as ``prepacked`` elides it.
Branches replayed from one schedule at several sizes pack alike and share a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir.expr import Var

from ..lower.scan_lowering import substitute_buffers
from ..lower.vocabulary import rebuilt
from .prepacked import elide_copies_in

PREPROC = "meta_schedule.layout_rewrite_preproc"


@dataclass(frozen=True)
class WeightPrepack:
    """A function split into its packing, done once, and the rest, done at every call."""

    main: tirx.PrimFunc  # the function's parameters, then ``packed``
    prepack: tirx.PrimFunc  # the same parameters; writes ``packed`` from the weights
    packed: list[Var]  # one per distinct packing, in the order of the parameters


def _packing(stmt: tirx.Stmt, params: list[Var]) -> s_tir.SBlock | None:
    """The packing block ``stmt`` is the loop nest of, if it is one: marked, writing one
    buffer from one parameter."""
    while isinstance(stmt, tirx.For):
        stmt = stmt.body
    if not isinstance(stmt, s_tir.SBlockRealize):
        return None
    block = stmt.block
    if PREPROC not in block.annotations or len(block.writes) != 1 or len(block.reads) != 1:
        return None
    return block if any(p.same_as(block.reads[0].source) for p in params) else None


def split_weight_prepack(func: tirx.PrimFunc) -> WeightPrepack | None:
    """``func`` split as the module docstring says, or None where it packs nothing."""
    params = list(func.params)
    # distinct packings: nest, the buffer it writes, the weight it reads, its parameter
    nests: list[tuple[tirx.Stmt, Var, Var, Var]] = []

    def parameter(nest: tirx.Stmt, block: s_tir.SBlock) -> Var:
        buffer, weight = block.writes[0].source, block.reads[0].source
        for seen, seen_buffer, seen_weight, packed in nests:
            if (
                seen_weight.same_as(weight)
                and tvm_ffi.structural_equal(seen_buffer.ty, buffer.ty)
                and tvm_ffi.structural_equal(seen, nest, map_free_vars=True)
            ):
                return packed
        packed = tirx.decl_buffer(
            buffer.shape, buffer.dtype, f"{weight.name}_packed{len(nests)}", layout=None
        )
        nests.append((nest, buffer, weight, packed))
        return packed

    def on_block(block: s_tir.SBlock) -> s_tir.SBlock:
        children = list(block.body.seq) if isinstance(block.body, tirx.SeqStmt) else [block.body]
        found = [(c, _packing(c, params)) for c in children]
        mapping = [(b.writes[0].source, parameter(c, b)) for c, b in found if b is not None]
        if not mapping:
            return block
        kept = [c for c, b in found if b is None]
        body = substitute_buffers(kept[0] if len(kept) == 1 else tirx.SeqStmt(kept), mapping)
        allocs = [a for a in block.alloc_buffers if not any(a.same_as(b) for b, _ in mapping)]
        packed = [p for _, p in mapping]
        return elide_copies_in(rebuilt(block, body=body, alloc_buffers=allocs), packed)

    body = tvm_ffi.structural_map(func.body, (s_tir.SBlock, on_block))
    if not nests:
        return None
    packed = [p for *_, p in nests]
    attrs = {k: v for k, v in (func.attrs or {}).items() if k != "layout_free_buffers"}
    main = tirx.PrimFunc([*params, *packed], body).with_attrs(attrs)
    fills = [substitute_buffers(nest, [(buffer, p)]) for nest, buffer, _, p in nests]
    root = s_tir.SBlock(
        [], [], [], "root", fills[0] if len(fills) == 1 else tirx.SeqStmt(fills)
    )
    prepack = tirx.PrimFunc([*params, *packed], s_tir.SBlockRealize([], True, root))
    prepack = prepack.with_attrs({**attrs, "global_symbol": "prepack"})
    return WeightPrepack(main, prepack, packed)


def prepack_module(func: tirx.PrimFunc) -> tuple[tvm.IRModule, list[tuple[tuple[int, ...], str]]]:
    """``func`` as ``main`` and, where it packs weights, its ``prepack`` beside it (see
    :func:`split_weight_prepack`), with the shape and dtype of each packed parameter that
    both take after ``func``'s (none where nothing is packed): what a caller allocates."""
    func = func.with_attr("global_symbol", "main")
    split = split_weight_prepack(func)
    if split is None:
        return tvm.IRModule({"main": func}), []
    shapes = [(tuple(int(d) for d in p.shape), str(p.dtype)) for p in split.packed]
    return tvm.IRModule({"main": split.main, "prepack": split.prepack}), shapes
