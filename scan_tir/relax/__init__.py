"""PyTorch RNN modules into Relax as scan PrimFuncs (issue 15).

:func:`from_exported_program` is TVM's ``relax.frontend.torch.from_exported_program`` with
converters for ``aten.lstm``, ``aten.gru``, ``aten.rnn_tanh`` and ``aten.rnn_relu``: each
layer and direction becomes one call_tir of a scan PrimFunc lowered by
:func:`scan_tir.create_prim_func` (``layers``), where TVM's own importer unrolls the
sequence. Modules: ``frontend`` (the entry point and the decomposition table), ``aten``
(reading and checking an RNN node), ``emit`` (the Relax it becomes), ``layers`` (the
PrimFuncs). Nothing here is imported by the rest of scan_tir.

:func:`export` is ``torch.export.export`` with each RNN module kept whole as a
``scan_tir::`` custom op (``torch_export``), where torch.export would specialise its sequence
length: the imported module then takes any length and batch in the ranges declared with
``torch.export.Dim``, and checks them when called.

:func:`from_onnx` is the same for TVM's ONNX importer and the ONNX ``LSTM``, ``GRU`` and
``RNN`` ops, calling the same layer functions: ``onnx`` (the entry point and the hook into
TVM's convert map), ``onnx_node`` (reading and checking a node), ``onnx_emit`` (its Relax).

:func:`tune` tunes every kernel of an imported module with the scan space, symbolic ones
at representative sizes (``tuning``); :func:`build` compiles it with the tuned schedules
and the weights packed once (``build``); ``deploy`` goes from a model file to a library
(``scan-tir compile``, ``scan-tir run``). :func:`dynamic` tunes the symbolic kernels for a
grid of shapes instead, each becoming one kernel that dispatches by shape (``dynamic``).
"""

from __future__ import annotations

from .build import build
from .dynamic import DynamicModel, dynamic
from .frontend import RNN_OPS, from_exported_program
from .onnx import ONNX_RNN_OPS, from_onnx
from .torch_export import export
from .tuning import tune

__all__ = [
    "ONNX_RNN_OPS",
    "RNN_OPS",
    "DynamicModel",
    "build",
    "dynamic",
    "export",
    "from_exported_program",
    "from_onnx",
    "tune",
]
