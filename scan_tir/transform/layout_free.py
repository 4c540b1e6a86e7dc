"""``layout_free``: let MetaSchedule repack weights (RewriteLayout) for a tuned function.

MetaSchedule's RewriteLayout postproc (src/s_tir/meta_schedule/postproc/rewrite_layout.cc)
repacks a parameter into the layout its reader's tiled loops want, but only a parameter
listed in the function's ``layout_free_buffers`` attribute: only the caller knows which
inputs are weights that can be packed ahead of time. TE marks them with a compute's
``layout_free_placeholders`` attribute, which topi's LSTM does not set; this marks them on
the lowered function instead. A recurrent weight is read at every step, so packing it once
pays for itself many times over.
"""

from __future__ import annotations

from collections.abc import Iterable

import tvm_ffi
from tvm import s_tir, tirx

from ..errors import ScanLoweringError


def layout_free(func: tirx.PrimFunc, params: Iterable[str]) -> tirx.PrimFunc:
    """``func`` with the parameters named in ``params`` marked layout-free."""
    names = [str(p.name) for p in func.params]
    indices = set(int(i) for i in func.attrs.get("layout_free_buffers", []) if func.attrs)
    for name in params:
        if name not in names:
            raise ScanLoweringError(
                f"layout_free: the function has no parameter '{name}'; its parameters are {names}."
            )
        indices.add(names.index(name))
    return func.with_attr("layout_free_buffers", sorted(indices))


#: The annotation RewriteLayout puts on the block that repacks a weight.
PREPROC = "meta_schedule.layout_rewrite_preproc"


def _leaf_readers(func: tirx.PrimFunc) -> dict[tirx.Var, int]:
    """How many leaf blocks (blocks holding no block: the ones that compute) read each
    buffer; a scan's and a step's blocks only summarise their children's reads."""
    counts: dict[tirx.Var, int] = {}

    def on_block(block: s_tir.SBlock) -> None:
        inner: list[s_tir.SBlock] = []
        tvm_ffi.structural_walk(block.body, (s_tir.SBlock, inner.append))
        if inner:
            return
        for region in block.reads:
            counts[region.source] = counts.get(region.source, 0) + 1

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, on_block))
    return counts


def safe_layout_free(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with only the layout-free parameters MetaSchedule can repack without loss.

    RewriteLayout (src/s_tir/meta_schedule/postproc/rewrite_layout.cc) takes a weight's
    packed layout from one read of it and assumes that read covers the whole buffer. A
    weight read by two blocks (ONNX's GRU reads rows [0, 2H) and [2H, 3H) of W_hh in two
    products), or a bias whose add AutoInline merges into a block that reads it at three
    offsets, is then packed into a buffer that holds a third of it, and the tuned kernel
    computes wrong numbers. So a parameter stays layout-free only if it has two or more
    dimensions and one leaf block reads it; :func:`lossy_repacks` checks the result.
    """
    indices = [int(i) for i in (func.attrs or {}).get("layout_free_buffers", [])]
    if not indices:
        return func
    readers = _leaf_readers(func)
    keep = [
        i
        for i in indices
        if isinstance(func.params[i].ty, tirx.BufferType)
        and len(func.params[i].ty.shape) >= 2
        and readers.get(func.params[i], 0) == 1
    ]
    return func if keep == indices else func.with_attr("layout_free_buffers", keep)


def lossy_repacks(func: tirx.PrimFunc) -> list[str]:
    """The weight repackings of a scheduled ``func`` that write fewer elements than they
    read (see :func:`safe_layout_free`), as 'block: shape -> shape'."""
    found: list[str] = []

    def size(shape) -> int | None:
        total = 1
        for d in shape:
            if not isinstance(d, tirx.IntImm):
                return None
            total *= int(d)
        return total

    def on_block(block: s_tir.SBlock) -> None:
        if PREPROC not in (block.annotations or {}) or not block.reads or not block.writes:
            return
        src, dst = block.reads[0].source.ty.shape, block.writes[0].source.ty.shape
        if size(src) is not None and size(dst) is not None and size(dst) < size(src):
            found.append(f"{block.name_hint}: {list(src)} -> {list(dst)}")

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, on_block))
    return found
