"""The Relax an ONNX RNN node becomes: one ``call_tir`` of a scan PrimFunc per direction.

The functions are the PyTorch path's (``layers``), so a recurrence tuned once serves both
frontends: ONNX's operands are brought to PyTorch's conventions here, not in the kernel.
Gate rows are reordered (LSTM i,o,f,c -> i,f,g,o; GRU z,r,h -> r,z,n; peepholes i,o,f ->
i,f,o) and B split into the input and recurrent biases: in numpy at import for constants
(weights are initializers in nearly every model, and then cost nothing at run time), by a
Relax ``take`` of the permuted rows for graph inputs. Around the calls only plain Relax ops,
which TVM legalises as usual: the batch-major transposes of ``layout=1`` and the stacking
of the directions into ONNX's Y, Y_h and Y_c (at a symbolic length also the final states'
slices and a reverse output's flip, ``LayerFunctions.call``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from ..lower.options import LoweringOptions
from .layers import DTYPE, LayerFunctions
from .onnx_node import OP_GATES, RnnNode, constant, read, read_attributes

#: Per op type, ONNX's gate rows in PyTorch's gate order (the layer functions').
GATE_ORDER = {"LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2), "RNN": (0,)}

#: ONNX's peephole rows (i, o, f) in the layer functions' order (i, f, o).
PEEPHOLE_ORDER = (0, 2, 1)


class Session:
    """One import: the lowering options and the GlobalVar of every function added, so that
    nodes of the same sizes (and kind, direction) call one function."""

    def __init__(self, options: LoweringOptions | None = None) -> None:
        self.function = LayerFunctions(options)

    def emit(self, bb: relax.BlockBuilder, node: RnnNode) -> relax.Tuple:
        """(Y, Y_h[, Y_c]) of ``node``, in ONNX's shapes for its layout."""
        x = node.x
        if node.attrs.layout == 1:
            x = bb.emit(relax.op.permute_dims(x, [1, 0, 2]))
        per_direction = [self._direction(bb, node, x, d) for d in range(len(node.attrs.reverse))]
        ys, *finals = (list(outs) for outs in zip(*per_direction, strict=True))
        if node.attrs.layout == 0:  # Y (seq, D, batch, hidden), finals (D, batch, hidden)
            y = _stack(bb, ys, 1)
            states = [_stack(bb, f, 0) for f in finals]
        else:  # Y (batch, seq, D, hidden), finals (batch, D, hidden)
            y = bb.emit(relax.op.permute_dims(_stack(bb, ys, 2), [1, 0, 2, 3]))
            states = [_stack(bb, f, 1) for f in finals]
        return relax.Tuple([y, *states])

    def _direction(
        self, bb: relax.BlockBuilder, node: RnnNode, x: relax.Expr, d: int
    ) -> list[relax.Expr]:
        """One call of direction ``d``'s function: its output sequence (seq, batch, hidden)
        and final states (batch, hidden)."""
        spec = node.spec(d)
        rows = _gate_rows(GATE_ORDER[node.attrs.op_type], node.hidden)
        args = [x, _rows(bb, node.w, d, rows), _rows(bb, node.r, d, rows)]
        if node.b is not None:
            args += [_rows(bb, node.b, d, rows), _rows(bb, node.b, d, rows + len(rows))]
        elif spec.bias:  # a GRU or RNN without B: zero biases, as nn.GRU(bias=False) gets
            args += [relax.const(np.zeros(len(rows), DTYPE)) for _ in range(2)]
        if node.p is not None:
            args.append(_rows(bb, node.p, d, _gate_rows(PEEPHOLE_ORDER, node.hidden)))
        for state in (node.initial_h, node.initial_c)[: len(spec.state_shapes(node.batch))]:
            args.append(_state(bb, node, state, d))
        return self.function.call(bb, spec, args, node.seq, node.batch)


def _gate_rows(order: tuple[int, ...], hidden: int) -> np.ndarray:
    """The row indices that put gate blocks of ``hidden`` rows in ``order``."""
    return np.concatenate([np.arange(g * hidden, (g + 1) * hidden) for g in order])


def _rows(bb: relax.BlockBuilder, value: relax.Expr, d: int, rows: np.ndarray) -> relax.Expr:
    """``value[d][rows]``: direction ``d``'s weight, gates reordered."""
    array = constant(value)
    if array is not None:
        return relax.const(np.ascontiguousarray(array[d][rows]))
    one = bb.emit(relax.op.take(value, relax.const(d, "int64"), axis=0, mode="clip"))
    return bb.emit(relax.op.take(one, relax.const(rows.astype("int64")), axis=0, mode="clip"))


def _state(bb: relax.BlockBuilder, node: RnnNode, value: relax.Expr | None, d: int) -> relax.Expr:
    """Direction ``d``'s initial state (batch, hidden): zeros if absent (made at run time
    for a symbolic batch)."""
    if value is None and not isinstance(node.batch, int):
        return bb.emit(relax.op.zeros(relax.ShapeExpr([node.batch, node.hidden]), DTYPE))
    if value is None:
        return relax.const(np.zeros((node.batch, node.hidden), DTYPE))
    axis = 0 if node.attrs.layout == 0 else 1
    array = constant(value)
    if array is not None:
        return relax.const(np.ascontiguousarray(np.take(array, d, axis=axis)))
    return bb.emit(relax.op.take(value, relax.const(d, "int64"), axis=axis, mode="clip"))


def _stack(bb: relax.BlockBuilder, values: list[relax.Expr], axis: int) -> relax.Expr:
    """The directions stacked on ``axis`` (a single one gains the axis)."""
    if len(values) == 1:
        return bb.emit(relax.op.expand_dims(values[0], axis))
    return bb.emit(relax.op.stack(values, axis=axis))


class RnnOpConverter(OnnxOpConverter):
    """The importer's converter protocol (``get_converter(opset)`` then
    ``_impl_vN(bb, inputs, attr, params)``, onnx_frontend.py), for one op type and one
    import: :func:`converters` makes a subclass per op type bound to a :class:`Session`."""

    op_type: ClassVar[str]
    session: ClassVar[Session]

    @classmethod
    def _impl_v7(cls, bb: relax.BlockBuilder, inputs: Any, attr: dict, params: Any):
        """Opset 7 on (opset 14 added ``layout``, read with its default 0 before). Older
        opsets fall back to this too (the importer picks the lowest version then)."""
        attributes = read_attributes(cls.op_type, attr["tvm_custom"]["name"], attr)
        node = read(attributes, list(inputs), params[1])
        return cls.session.emit(bb, node)


def converters(options: LoweringOptions | None = None) -> dict[str, type[RnnOpConverter]]:
    """Convert-map entries for LSTM, GRU and RNN sharing one :class:`Session`."""
    session = Session(options)
    return {op: type(op, (RnnOpConverter,), {"op_type": op, "session": session}) for op in OP_GATES}
