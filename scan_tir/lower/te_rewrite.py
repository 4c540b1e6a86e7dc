"""Rewriting TE expressions: redirect tensor reads, substitute variables, rebuild ops.

TE 0.27 has no Python expression mutator; ``tvm_ffi.structural_mutate`` serves. A read
is a ``te.tensor_load`` call whose first argument is the tensor itself, and the mutator
must never descend into that argument (it would walk the producer's whole graph).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tvm
import tvm_ffi
from tvm import te, tirx
from tvm.ir.expr import Call, Var

TENSOR_LOAD = tvm.ir.Op.get("te.tensor_load")

OnLoad = Callable[[te.Tensor, list[tirx.Expr]], tirx.Expr]


def tensor_key(tensor: te.Tensor) -> tuple[te.Operation, int]:
    """A hashable identity for a tensor (``te.Tensor.__eq__`` is not one: it builds
    expressions, and refuses rank-0 tensors)."""
    return (tensor.op, tensor.value_index)


def is_tensor_load(expr: object) -> bool:
    return isinstance(expr, Call) and expr.op.same_as(TENSOR_LOAD)


def load(tensor: te.Tensor, indices: Sequence[tirx.Expr]) -> tirx.Expr:
    return te._ffi_api.TensorLoad(tensor, list(indices))


def map_reads(
    exprs: Sequence[tirx.Expr],
    on_load: OnLoad,
    substitute: Sequence[tuple[Var, tirx.Expr]] = (),
) -> list[tirx.Expr]:
    """``exprs`` with each read replaced by ``on_load(tensor, indices)`` (indices already
    rewritten, innermost reads first) and each ``(var, value)`` of ``substitute`` applied."""

    # An exception raised in a callback crosses the FFI boundary as a RuntimeError; keep
    # the original so that the caller sees its own type and message.
    raised: list[BaseException] = []

    def on_call(call: Call, mutator: tvm_ffi.StructuralMutator) -> object:
        if not is_tensor_load(call):
            return mutator.default_mutate(call)
        try:
            return on_load(call.args[0], [mutator.mutate(i) for i in call.args[1:]])
        except Exception as err:
            raised.append(err)
            raise

    def on_var(var: Var, mutator: tvm_ffi.StructuralMutator) -> object:
        for old, new in substitute:
            if var.same_as(old):
                return new
        return var

    try:
        return list(tvm_ffi.structural_mutate(list(exprs), [(Call, on_call), (Var, on_var)]))
    except Exception:
        if raised:
            raise raised[0] from None
        raise


def map_body(
    op: te.ComputeOp,
    on_load: OnLoad,
    substitute: Sequence[tuple[Var, tirx.Expr]] = (),
) -> list[tirx.Expr]:
    """``map_reads`` over a compute's body. The outputs of a multi-value reduction (an
    argmax) must share one source array (src/te/operation/compute_op.cc checks identity),
    so such a body is mapped once and its Reduce nodes rebuilt around the shared result."""
    body = list(op.body)
    if len(body) < 2 or not isinstance(body[0], tirx.Reduce):
        return map_reads(body, on_load, substitute)
    first = body[0]
    source, condition, *init = map_reads(
        [tirx.convert(list(first.source)), first.condition, *first.init], on_load, substitute
    )
    return [
        tirx.Reduce(first.combiner, source, first.axis, condition, k, init or None)
        for k in range(len(body))
    ]


def vars_in(expr: tirx.Expr) -> list[Var]:
    """The variables ``expr`` mentions, reads' indices included."""
    found: list[Var] = []

    def on_call(call: Call, visitor: tvm_ffi.StructuralVisitor) -> None:
        if is_tensor_load(call):
            for index in call.args[1:]:
                visitor.visit(index)
        else:
            visitor.default_visit(call)

    def on_var(var: Var, visitor: tvm_ffi.StructuralVisitor) -> None:
        if not any(var.same_as(v) for v in found):
            found.append(var)

    tvm_ffi.structural_visit(expr, [(Call, on_call), (Var, on_var)])
    return found


def mentions(expr: tirx.Expr, var: Var) -> bool:
    return any(v.same_as(var) for v in vars_in(expr))


def map_attr_tensors(attrs: object, f: Callable[[te.Tensor], te.Tensor | None]) -> dict:
    """A compute's attrs with every tensor in them (topi's ``layout_free_placeholders``)
    passed through ``f``; a tensor ``f`` maps to None is dropped."""
    out: dict = {}
    for key, value in dict(attrs or {}).items():
        if isinstance(value, te.Tensor):
            mapped = f(value)
            if mapped is not None:
                out[key] = mapped
        elif isinstance(value, (list, tuple, tvm_ffi.Array)) and any(
            isinstance(v, te.Tensor) for v in value
        ):
            items = [f(v) if isinstance(v, te.Tensor) else v for v in value]
            out[key] = [v for v in items if v is not None]
        else:
            out[key] = value
    return out


def compute_op(
    op: te.ComputeOp,
    axis: Sequence[tirx.IterVar],
    body: Sequence[tirx.Expr],
    attrs: dict,
) -> te.ComputeOp:
    """A ComputeOp like ``op`` (name, tag) over ``axis`` computing ``body``."""
    return te._ffi_api.ComputeOp(op.name, op.tag, attrs, list(axis), list(body))


def with_inputs(
    op: te.Operation, outer: Callable[[te.Tensor], te.Tensor], on_load: OnLoad | None = None
) -> te.Operation:
    """``op`` (a compute or an extern) reading ``outer(t)`` wherever it read ``t``; a
    compute's reads go through ``on_load`` (default: ``outer(t)`` at the same indices). An
    extern's body speaks of its placeholders, so only its inputs change."""
    if isinstance(op, te.ComputeOp):
        body = map_body(op, on_load or (lambda t, idx: load(outer(t), idx)))
        return compute_op(op, op.axis, body, map_attr_tensors(op.attrs, outer))
    return te._ffi_api.ExternOp(
        op.name,
        op.tag,
        op.attrs,
        [outer(t) for t in op.inputs],
        list(op.input_placeholders),
        list(op.output_placeholders),
        op.body,
    )
