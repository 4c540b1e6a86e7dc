"""A schedule's body fixed at a listed batch, run at a smaller one on padded copies.

A batch between two listed ones is served either by a generic kernel (the batch symbolic
in the step: no constant tile bounds, no vector code) or by the body fixed at the next
listed batch, run on copies of the arguments padded to it: that batch's speed, on rows of
which some are padding. DietCode (MLSys 2022) pads so; its cost model weighs the padded
rows against the generic kernel's cost, as :func:`scan_tir.tune.dynamic` does with both
timed. :func:`padded` builds the padded form as a schedule of the function (its
parameters and sizes, so that :func:`~scan_tir.tune.dispatch.dispatch` can join it): the
fixed body's parameters whose shapes the fixed sizes change become buffers allocated
around it, filled from the caller's (zeros in the padding) and copied back for the rows
the caller has. Rows of a batch are independent in a recurrence, so the padding rows
change no real row; a size that is not a whole dimension of every parameter it shapes
(``seq * batch`` rows) cannot be padded so, and is refused. For the same reason a batch
beyond the largest listed one can run in chunks of it (``chunked``), the last one padded.
"""

from __future__ import annotations

from collections.abc import Mapping

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.tirx.stmt import ForKind

from ..errors import ScanLoweringError
from .symbolic import specialize


def padded(
    kernel: tirx.PrimFunc, sizes: Mapping[str, int], chunked: bool = False
) -> tirx.PrimFunc:
    """``kernel`` (a schedule of a function of symbolic ``sizes``) with its body fixed at
    ``sizes`` and run on copies of its arguments padded to them: right wherever each size
    is at most its value there; with ``chunked`` (one size only), at any value, the body
    run once per chunk of that many rows."""
    fixed = specialize(kernel, sizes)
    if chunked and len(sizes) != 1:
        raise ScanLoweringError(f"padded: chunks of one size only, not of {sorted(sizes)}")
    if len(fixed.params) != len(kernel.params):
        raise ScanLoweringError(
            f"padded: a size of {sorted(sizes)} is a scalar parameter, not a dimension"
        )
    read, written = accesses(kernel)
    pairs, allocated, copy_in, copy_out = [], [], [], []
    chunk = tirx.Var("chunk", "int32")
    chunks = None  # how many, where chunked: over the padded dimension's size
    for new, old in zip(fixed.params, kernel.params):
        if tvm_ffi.structural_equal(new.ty, old.ty):
            pairs.append((new, old))
            continue
        padding = [
            d for d, (at, given) in enumerate(zip(new.shape, old.shape))
            if not tvm_ffi.structural_equal(at, given)
        ]
        for d in padding:
            if not isinstance(old.shape[d], tirx.Var):
                raise ScanLoweringError(
                    f"padded: dimension {d} of parameter '{old.name}' is {old.shape[d]}: only "
                    "a size that is a whole dimension can be padded"
                )
        if chunked and len(padding) > 1:
            raise ScanLoweringError(
                f"padded: parameter '{old.name}' has the size in {len(padding)} dimensions; "
                "chunks would pair rows of one chunk with columns of another"
            )
        allocated.append(new)
        if chunked:
            d = padding[0]
            chunks = tirx.floordiv(old.shape[d] + new.shape[d] - 1, new.shape[d])
        offsets = {d: chunk * new.shape[d] if chunked else 0 for d in padding}
        if any(old.same_as(p) for p in read) or not any(old.same_as(p) for p in written):
            copy_in.append(_copy(new, old, offsets))
        if any(old.same_as(p) for p in written):
            copy_out.append(_copy(old, new, offsets, out=True))

    def on_var(var: tirx.Var) -> tirx.Var:
        for new, old in pairs:
            if var.same_as(new):
                return old
        return var

    body = tvm_ffi.structural_map(fixed.body, [(tvm.ir.expr.Var, on_var)])
    body = tirx.SeqStmt([*copy_in, body, *copy_out])
    if chunked and chunks is not None:
        body = tirx.For(chunk, tirx.const(0, "int32"), chunks, ForKind.SERIAL, body)
    block = s_tir.SBlock(  # a root block, as every S-TIR function has
        [], [], [], "root", body, alloc_buffers=allocated
    )
    return kernel.with_body(s_tir.SBlockRealize([], True, block))


def accesses(func: tirx.PrimFunc) -> tuple[list[tirx.Var], list[tirx.Var]]:
    """The buffers ``func``'s blocks read and those they write."""
    read: list[tirx.Var] = []
    written: list[tirx.Var] = []

    def on_block(block: s_tir.SBlock) -> None:
        read.extend(region.source for region in block.reads)
        written.extend(region.source for region in block.writes)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, on_block))
    return read, written


def _copy(
    dst: tirx.Var, src: tirx.Var, offsets: Mapping[int, tirx.Expr], out: bool = False
) -> tirx.Stmt:
    """Into the padded buffer (``dst``) the caller's rows from ``offsets`` on, zero beyond
    its extent (``if_then_else``: the load out of bounds is not made); or, ``out``, the
    padded buffer's rows back (``src``), those within the caller's extent."""
    padded_, caller = (src, dst) if out else (dst, src)
    shape = list(padded_.shape)
    index = [tirx.Var(f"i{d}", tvm.ir.PrimType(e.ty.dtype)) for d, e in enumerate(shape)]
    at = [index[d] + offsets[d] if d in offsets else index[d] for d in range(len(shape))]
    inside = None
    for d in offsets:
        test = at[d] < caller.shape[d]
        inside = test if inside is None else tirx.And(inside, test)
    if out:
        body = tirx.BufferStore(dst, tirx.BufferLoad(src, index), at)
        body = tirx.IfThenElse(inside, body, None)
    else:
        zero = tirx.const(0, str(dst.ty.dtype))
        body = tirx.BufferStore(dst, tirx.if_then_else(inside, tirx.BufferLoad(src, at), zero),
                                index)
    for d in reversed(range(len(shape))):
        kind = ForKind.PARALLEL if d == 0 else ForKind.SERIAL
        body = tirx.For(index[d], tirx.const(0, shape[d].ty.dtype), shape[d], kind, body)
    return body
