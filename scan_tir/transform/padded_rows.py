"""``pad_rows``: products hoisted out of a scan computed over whole tiles at any length.

A scan's input projection is hoisted over every step (topi's ``Xi2h`` over seq x batch
rows, the GRU's ``xw`` over seq), and MetaSchedule tiles its rows with factors of the
length it was tuned at. Replayed at a symbolic length (``replay_sized``), the last tile
is partial, and TVM guards every row of every tile with a predicate inside the reduction
loop, which keeps LLVM from holding the register tile in registers. Padding the rows to
a multiple of the tile removes the remainder: the hoisted blocks compute
``ceildiv(extent, multiple) * multiple`` rows into intermediates grown to match, reading
their inputs at the last real row beyond the end; the scan still reads only rows below
``extent``, so the extra rows are computed and never read.

Legality, checked here rather than assumed (a block that fails a check keeps its
extent): the block is outside every scan and is realized at the root, the padded axis is
a data-parallel iterator bound to one loop of exactly ``extent`` iterations, every buffer
it writes is an intermediate allocated at the root and indexed there by the iterator
itself along an axis of ``extent`` rows, and every intermediate it reads along that
iterator is padded too. Inputs (parameters) are read with the index clamped, so no read
leaves its buffer; outputs are never padded. At a size that is a multiple of
``multiple`` (the representative a trace was tuned at) the function computes exactly what
it did.
"""

from __future__ import annotations

from collections.abc import Sequence

import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir import Range
from tvm.ir.expr import TensorLoad
from tvm.s_tir.analysis import get_sblock_read_write_region
from tvm.sym import Analyzer

from ..lower.vocabulary import SCAN, mentions, rebuilt


def pad_rows(func: tirx.PrimFunc, multiples: Sequence[tuple[tirx.Expr, int]]) -> tirx.PrimFunc:
    """``func`` with the root-level blocks iterating over each ``extent`` in ``multiples``
    padded to a multiple of its ``multiple`` (see the module's docstring for which)."""
    for extent, multiple in multiples:
        if multiple > 1 and not isinstance(extent, tirx.IntImm):
            func = _pad(func, extent, multiple)
    return func


def padded_extent(extent: tirx.Expr, multiple: int) -> tirx.Expr:
    """``extent`` rounded up to a multiple of ``multiple``."""
    dtype = extent.ty.dtype
    m = tirx.IntImm(dtype, multiple)
    return tirx.floordiv(extent + tirx.IntImm(dtype, multiple - 1), m) * m


class _Candidate:
    """A root-level block that iterates over the extent: its iterator, the loop bound to
    it, and the axis of each buffer it writes that the iterator indexes."""

    def __init__(self, realize: s_tir.SBlockRealize, var: tirx.Var, loop: tirx.Var) -> None:
        self.block = realize.block
        self.var = var
        self.loop = loop
        self.written: dict[tirx.Var, int] = {}


def _pad(func: tirx.PrimFunc, extent: tirx.Expr, multiple: int) -> tirx.PrimFunc:
    root = func.body.block
    intermediates = list(root.alloc_buffers)
    analyzer = Analyzer()
    candidates = [
        c
        for c in (_candidate(r, extent, intermediates, analyzer) for r in _root_level(root))
        if c is not None
    ]
    while True:  # drop blocks that read an unpadded intermediate along the padded axis
        padded = {b for c in candidates for b in c.written}
        kept = [c for c in candidates if _reads_padded_only(c, intermediates, padded)]
        if len(kept) == len(candidates):
            break
        candidates = kept
    if not candidates:
        return func
    axes: dict[tirx.Var, int] = {}
    for c in candidates:
        for buffer, axis in c.written.items():
            if axes.setdefault(buffer, axis) != axis:  # written along two axes: leave it
                return func
    new_extent = padded_extent(extent, multiple)
    grown = {b: _grown(b, axes[b], new_extent) for b in axes}
    last = extent - tirx.IntImm(extent.ty.dtype, 1)
    params = list(func.params)
    by_block = {c.block: c for c in candidates}
    loops = {c.loop: c for c in candidates}

    def on_block(block: s_tir.SBlock) -> s_tir.SBlock:
        c = next((c for b, c in by_block.items() if b.same_as(block)), None)
        if c is None:
            return block
        return _padded_block(block, c, new_extent, tirx.min(c.var, last), params)

    def on_loop(loop: tirx.For) -> tirx.For:
        if not any(v.same_as(loop.loop_var) for v in loops):
            return loop
        return tirx.For(
            loop.loop_var, loop.min, new_extent, loop.kind, loop.body, None, loop.annotations
        )

    body = tvm_ffi.structural_map(func.body, [(s_tir.SBlock, on_block), (tirx.For, on_loop)])

    def on_var(var: tirx.Var) -> tirx.Var:
        for old, new in grown.items():
            if var.same_as(old):
                return new
        return var

    body = tvm_ffi.structural_map(body, (tirx.Var, on_var))
    padded_names = [c.block.name_hint for c in candidates]
    widened = {grown[b]: axes[b] for b in axes}
    return _with_regions(func.with_body(body), padded_names, widened, new_extent)


def _root_level(root: s_tir.SBlock) -> list[s_tir.SBlockRealize]:
    """The blocks realized directly under the root's loops, with no block inside, scans
    excluded."""
    return [
        realizes[0]
        for realizes in _realizes_per_statement(root)
        if len(realizes) == 1 and SCAN not in realizes[0].block.annotations
    ]


def _root_children(root: s_tir.SBlock) -> list[s_tir.SBlockRealize]:
    """The outermost block under each of the root's statements (a scan included; the
    walk visits a block after the blocks inside it)."""
    return [realizes[-1] for realizes in _realizes_per_statement(root) if realizes]


def _realizes_per_statement(root: s_tir.SBlock) -> list[list[s_tir.SBlockRealize]]:
    stmts = root.body.seq if isinstance(root.body, tirx.SeqStmt) else [root.body]
    found = []
    for stmt in stmts:
        realizes: list[s_tir.SBlockRealize] = []
        tvm_ffi.structural_walk(stmt, (s_tir.SBlockRealize, realizes.append))
        found.append(realizes)
    return found


def _candidate(
    realize: s_tir.SBlockRealize,
    extent: tirx.Expr,
    intermediates: list[tirx.Var],
    analyzer: Analyzer,
) -> _Candidate | None:
    block = realize.block
    for iv, value in zip(block.iter_vars, realize.iter_values, strict=True):
        if iv.iter_type != tirx.IterVar.DataPar or not isinstance(value, tirx.Var):
            continue
        if not analyzer.can_prove_equal(iv.dom.extent, extent):
            continue
        c = _Candidate(realize, iv.var, value)
        for region in block.writes:
            buffer = region.source
            if not any(buffer.same_as(b) for b in intermediates):
                return None  # writes a parameter: its rows end at the extent
            axis = _axis_of(region, iv.var)
            if axis is None or not analyzer.can_prove_equal(buffer.ty.shape[axis], extent):
                return None
            c.written[buffer] = axis
        return c
    return None


def _axis_of(region: tirx.BufferRegion, var: tirx.Var) -> int | None:
    """The axis of ``region`` indexed by exactly ``var`` (one row), if any."""
    for axis, r in enumerate(region.region):
        if isinstance(r.min, tirx.Var) and r.min.same_as(var):
            return axis
    return None


def _reads_padded_only(c: _Candidate, intermediates: list[tirx.Var], padded: set) -> bool:
    for region in c.block.reads:
        buffer = region.source
        if not any(buffer.same_as(b) for b in intermediates):
            continue  # a parameter: read clamped
        varies = any(mentions(r.min, c.var) or mentions(r.extent, c.var) for r in region.region)
        if varies and not any(buffer.same_as(p) for p in padded):
            return False
        if varies and _axis_of(region, c.var) is None:
            return False
    return True


def _grown(buffer: tirx.Var, axis: int, extent: tirx.Expr) -> tirx.Var:
    return with_shape(buffer, [extent if i == axis else d for i, d in enumerate(buffer.ty.shape)])


def with_shape(buffer: tirx.Var, shape: Sequence[tirx.Expr]) -> tirx.Var:
    """A buffer like ``buffer`` (same name, dtype, scope, layout) of shape ``shape``."""
    ty = buffer.ty
    new_ty = tirx.BufferType(
        ty.dtype,
        ty.storage_scope,
        shape,
        ty.strides,
        ty.elem_offset,
        ty.data_alignment,
        ty.offset_factor,
        ty.layout,
        ty.allocated_addr,
    )
    return tirx.Var(str(buffer.name), new_ty)


def _padded_block(
    block: s_tir.SBlock,
    c: _Candidate,
    extent: tirx.Expr,
    clamped: tirx.Expr,
    params: list[tirx.Var],
) -> s_tir.SBlock:
    """The block over ``extent`` rows, reading parameters at ``clamped`` for its row."""
    iter_vars = [
        tirx.IterVar(
            Range.from_min_extent(tirx.IntImm(extent.ty.dtype, 0), extent),
            iv.var,
            iv.iter_type,
            iv.thread_tag,
        )
        if iv.var.same_as(c.var)
        else iv
        for iv in block.iter_vars
    ]

    def on_load(load: TensorLoad) -> TensorLoad:
        if not any(load.source.same_as(p) for p in params):
            return load
        indices = [
            tvm_ffi.structural_map(i, (tirx.Var, lambda v: clamped if v.same_as(c.var) else v))
            for i in load.indices
        ]
        return tirx.BufferLoad(load.source, indices)

    body = tvm_ffi.structural_map(block.body, (TensorLoad, on_load))
    return rebuilt(block, iter_vars=iter_vars, body=body)


def _with_regions(
    func: tirx.PrimFunc, names: list[str], widened: dict[tirx.Var, int], extent: tirx.Expr
) -> tirx.PrimFunc:
    """Recompute the access regions of the padded blocks (their buffers and reads
    changed), and widen the regions in which the root's other blocks (the scan) read
    several rows of a grown buffer to all its rows. A read of the first ``E`` rows of
    ``ceildiv(E, m) * m`` written is covered, but TVM's region cover check does not
    prove it; a scope that fails the check is no stage pipeline, and ``compute_inline``
    there (of a scan's initial state, by a replayed trace) is refused. Declaring more
    rows read than are is conservative: the rows exist and are written."""
    root = func.body.block
    buffers = {b: b for b in [*func.params, *root.alloc_buffers]}
    children = {r.block.name_hint for r in _root_children(root)}

    def on_block(block: s_tir.SBlock) -> s_tir.SBlock:
        if block.name_hint in names:
            reads, writes = get_sblock_read_write_region(block, buffers)
            return rebuilt(block, reads=reads, writes=writes)
        if block.name_hint not in children:
            return block
        return rebuilt(block, reads=[_widened(r, widened, extent) for r in block.reads])

    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlock, on_block)))


def _widened(
    region: tirx.BufferRegion, widened: dict[tirx.Var, int], extent: tirx.Expr
) -> tirx.BufferRegion:
    axis = next((a for b, a in widened.items() if region.source.same_as(b)), None)
    if axis is None or _is_one(region.region[axis].extent):  # a row at a time: left alone
        return region
    zero = tirx.IntImm(extent.ty.dtype, 0)
    ranges = [
        Range.from_min_extent(zero, extent) if i == axis else r
        for i, r in enumerate(region.region)
    ]
    return tirx.BufferRegion(region.source, ranges)


def _is_one(expr: tirx.Expr) -> bool:
    return isinstance(expr, tirx.IntImm) and int(expr) == 1
