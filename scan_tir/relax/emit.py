"""The Relax an RNN node becomes: one ``call_tir`` of a scan PrimFunc per layer and direction.

Between the calls only plain Relax ops, which TVM legalises as usual: the batch-first
transposes, the slices of h0/c0 each layer takes, the concatenation of a bidirectional layer's
two outputs, and the stacking of every layer's final states into PyTorch's h_n and c_n (at a
symbolic length also the final states' slices and a reverse output's flip,
``LayerFunctions.call``).
The node's value is a Python tuple ``(output, h_n[, c_n])``, so the importer's ``getitem``
picks the element itself (TVM's own RNN converters return the output alone, and a
``getitem`` of 1 or 2 then yields the output again, not h_n or c_n).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tvm import relax

from ..lower.options import LoweringOptions
from .aten import RnnCall, read
from .layers import DTYPE, LayerFunctions


class RnnConverter:
    """A ``custom_convert_map`` entry (called as ``conv(node, importer)``) for the four RNN
    overloads. One per import: it remembers the GlobalVar of every function it added, so
    identical layers of the module (or of several modules) call one function."""

    def __init__(self, options: LoweringOptions | None = None) -> None:
        self.function = LayerFunctions(options)

    def __call__(self, node: Any, importer: Any) -> tuple[relax.Expr, ...]:
        call = read(node, importer.env)
        bb: relax.BlockBuilder = importer.block_builder
        x = call.x
        if call.batch_first:
            x = bb.emit(relax.op.permute_dims(x, [1, 0, 2]))
        finals: list[list[relax.Expr]] = [[] for _ in call.hx]
        for layer in range(call.num_layers):
            outputs = []
            for direction in range(call.directions):
                y, *states = self._layer(bb, call, x, layer, direction)
                outputs.append(y)
                for final, state in zip(finals, states, strict=True):
                    final.append(state)
            x = outputs[0] if len(outputs) == 1 else bb.emit(relax.op.concat(outputs, axis=2))
        if call.batch_first:
            x = bb.emit(relax.op.permute_dims(x, [1, 0, 2]))
        return (x, *(bb.emit(relax.op.stack(final, axis=0)) for final in finals))

    def _layer(
        self, bb: relax.BlockBuilder, call: RnnCall, x: relax.Expr, layer: int, direction: int
    ) -> list[relax.Expr]:
        """One call of the layer-direction's function: its output sequence and final
        states."""
        spec = call.spec(layer, direction)
        weights = call.weights(layer, direction)
        if spec.bias and not call.has_biases:  # a bias-free GRU or Elman layer
            rows = weights[0].ty.shape[0]
            weights += [relax.const(np.zeros(int(rows), DTYPE)) for _ in range(2)]
        index = relax.const(layer * call.directions + direction, "int64")
        states = [bb.emit(relax.op.take(h, index, axis=0, mode="clip")) for h in call.hx]
        return self.function.call(bb, spec, [x, *weights, *states], call.seq, call.batch)
