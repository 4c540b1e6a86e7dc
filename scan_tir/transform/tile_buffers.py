"""``BoundTileBuffers``: a buffer allocated per tile sized by its tile at a symbolic size.

A step tiled over a symbolic batch guards its last tile with a predicate (``b < batch``),
and TVM 0.27's ``CompactBufferAllocation`` then sizes the tile's own buffers (the product
tile ``s_h2h`` of an LSTM step) 2147483647 rows: compact_buffer_region.cc narrows the
region by the predicate, finds an extent that depends on a loop variable, and takes its
constant upper bound, which for an extent involving the unbounded ``batch`` is the
largest int32 (its ``kPosInf`` check is for int64). ``FlattenBuffer`` overflows that to
a negative size and the build dies in ``LowerTVMBuiltin`` ("cannot make uint from
negative value"). The region the tile touches without the predicate is the tile's, a
constant: predicates only narrow it.

This pass runs before TVM's lowering. It places allocations as TVM does (TVM's
``PlanAndUpdateBufferAllocationLocation``, after the passes it needs; the lowering runs
them again, with no further effect), and each buffer allocated in a block under loops
whose shape is symbolic, but whose accesses inside that block span a constant extent
over the loops there, is shrunk to that extent, every access offset by the span's start.
Legal because a buffer allocated in a block is fresh in each instance of it (TVM placed
it at the innermost scope holding every access), and the new extent covers every access
relaxed over every loop inside the block. Functions without a symbolic allocation are
returned unchanged, so fixed-size builds are what they were.
"""

from __future__ import annotations

import functools

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir import Range
from tvm.ir.expr import TensorLoad, TensorRegion
from tvm.sym import Analyzer
from tvm.tirx import stmt as S

from ..lower.vocabulary import mentions, rebuilt
from .padded_rows import with_shape

_PLACE = [
    s_tir.transform.CanonicalizeLoop(),
    s_tir.transform.LowerCrossThreadReduction(),
    s_tir.transform.LowerInitBlock(),
    s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
    s_tir.transform.ConvertBlocksToOpaque(),
]


@tirx.transform.prim_func_pass(opt_level=0, name="scan_tir.BoundTileBuffers")
def BoundTileBuffers(func: tirx.PrimFunc, _mod: tvm.IRModule, _ctx) -> tirx.PrimFunc:  # noqa: N802
    """Shrink each per-tile buffer of symbolic shape to its tile (see the module)."""
    if not _allocates_symbolic(func):
        return func
    placed = tvm.transform.Sequential(_PLACE)(tvm.IRModule({"main": func}))["main"]
    ranges = _loops(placed.body)  # every loop's range, for the loops around a block

    def on_block(block: s_tir.SBlock) -> s_tir.SBlock:
        return _bounded(block, ranges)

    return placed.with_body(tvm_ffi.structural_map(placed.body, (s_tir.SBlock, on_block)))


def _allocates_symbolic(func: tirx.PrimFunc) -> bool:
    found: list[bool] = []

    def on_block(block: s_tir.SBlock) -> None:
        found.extend(not _constant(b.ty.shape) for b in block.alloc_buffers)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, on_block))
    return any(found)


def _constant(shape: list[tirx.Expr]) -> bool:
    return all(isinstance(d, tirx.IntImm) for d in shape)


def _bounded(block: s_tir.SBlock, ranges: dict[tirx.Var, Range]) -> s_tir.SBlock:
    """``block`` with each symbolic buffer it allocates shrunk to the span of its
    accesses, where that span is constant (``ranges``: every loop's, the loops around
    ``block`` among them)."""
    loops = _loops(block.body)
    if not loops:
        return block
    analyzer = Analyzer()
    for var, extent in ranges.items():
        if var not in loops:  # a loop around the block: fixed in it, its range known
            analyzer.bind(var, extent)
    matched = {m.source.source for m in block.match_buffers}
    body, allocs = block.body, []
    for buffer in block.alloc_buffers:
        start = None
        symbolic = not _constant(buffer.ty.shape) and not buffer.ty.strides
        if symbolic and not any(buffer.same_as(m) for m in matched):
            start = _span_start(buffer, body, loops, analyzer)
        if start is None:
            allocs.append(buffer)
            continue
        starts, shape = start
        new = with_shape(buffer, shape)
        body = _offset(body, buffer, new, starts)
        allocs.append(new)
    if all(a.same_as(b) for a, b in zip(allocs, block.alloc_buffers)):
        return block
    return rebuilt(block, body=body, alloc_buffers=allocs)


def _loops(stmt: S.Stmt) -> dict[tirx.Var, Range]:
    found: dict[tirx.Var, Range] = {}

    def on_for(loop: S.For) -> None:
        found[loop.loop_var] = Range.from_min_extent(loop.min, loop.extent)

    tvm_ffi.structural_walk(stmt, (S.For, on_for))
    return found


def _accesses(buffer: tirx.Var, stmt: S.Stmt) -> list[list[tuple[tirx.Expr, tirx.Expr]]]:
    """Every access of ``buffer`` in ``stmt``, as (first, last) per axis: loads, stores,
    and the regions nested blocks declare."""
    found: list[list[tuple[tirx.Expr, tirx.Expr]]] = []

    def on_load(load: TensorLoad) -> None:
        if load.source.same_as(buffer):
            found.append([(i, i) for i in load.indices])

    def on_store(store: S.BufferStore) -> None:
        if store.buffer.same_as(buffer):
            found.append([(i, i) for i in store.indices])

    def on_block(block: s_tir.SBlock) -> None:
        for region in [*block.reads, *block.writes]:
            if region.source.same_as(buffer):
                found.append([(r.min, r.min + r.extent - 1) for r in region.region])

    tvm_ffi.structural_walk(
        stmt, [(TensorLoad, on_load), (S.BufferStore, on_store), (s_tir.SBlock, on_block)]
    )
    return found


def _span_start(
    buffer: tirx.Var, body: S.Stmt, loops: dict[tirx.Var, Range], analyzer: Analyzer
) -> tuple[list[tirx.Expr], list[tirx.Expr]] | None:
    """Per axis, the first element any access in ``body`` touches (over every loop in
    it) and the new extent; None unless every symbolic axis spans a constant."""
    accesses = _accesses(buffer, body)
    if not accesses:
        return None
    dom = {v: tvm.sym.IntervalSet(r.min, r.min + r.extent - 1) for v, r in loops.items()}
    starts, shape = [], []
    for axis, dim in enumerate(buffer.ty.shape):
        zero = tirx.IntImm(dim.ty.dtype, 0)
        if isinstance(dim, tirx.IntImm):
            starts.append(zero)
            shape.append(dim)
            continue
        lows = [analyzer.int_set(a[axis][0], dom).min_value for a in accesses]
        highs = [analyzer.int_set(a[axis][1], dom).max_value for a in accesses]
        low = analyzer.simplify(functools.reduce(tirx.min, lows))
        extent = analyzer.simplify(functools.reduce(tirx.max, highs) - low + 1)
        if not isinstance(extent, tirx.IntImm) or int(extent) < 1:
            return None
        if any(mentions(low, v) for v in loops):  # a start that moves inside the block
            return None
        starts.append(low)
        shape.append(extent)
    return starts, shape


def _offset(stmt: S.Stmt, old: tirx.Var, new: tirx.Var, starts: list[tirx.Expr]) -> S.Stmt:
    """``stmt`` reading and writing ``new`` where it did ``old``, at indices less
    ``starts``."""

    def shifted(indices: list[tirx.Expr]) -> list[tirx.Expr]:
        return [i - s for i, s in zip(indices, starts, strict=True)]

    def on_load(load: TensorLoad) -> TensorLoad:
        if not load.source.same_as(old):
            return load
        return tirx.BufferLoad(new, shifted(load.indices))

    def on_store(store: S.BufferStore) -> S.BufferStore:
        if not store.buffer.same_as(old):
            return store
        return S.BufferStore(new, store.value, shifted(store.indices))

    def on_region(region: TensorRegion) -> TensorRegion:
        if not region.source.same_as(old):
            return region
        ranges = [
            Range.from_min_extent(r.min - s, r.extent)
            for r, s in zip(region.region, starts, strict=True)
        ]
        return tirx.BufferRegion(new, ranges)

    return tvm_ffi.structural_map(
        stmt, [(TensorLoad, on_load), (S.BufferStore, on_store), (TensorRegion, on_region)]
    )
