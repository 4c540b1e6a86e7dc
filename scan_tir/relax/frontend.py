"""``from_exported_program``: TVM's PyTorch importer with the RNN ops converted to scans.

TVM's importer (tvm/relax/frontend/torch/exported_program_translator.py) first runs torch's
default decompositions, which turn ``aten.lstm`` into per-step cell ops before any converter
sees it, and its own ``lstm.input``/``gru.input``/``rnn_tanh.input`` converters unroll the
sequence (single layer, output only). Here the decomposition runs first with the RNN
overloads kept, then TVM's importer runs with decomposition off and :class:`RnnConverter` in
``custom_convert_map`` (which it calls as ``conv(node, importer)``,
base_fx_graph_translator.py); every other op goes through TVM's converters unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import tvm

from ..errors import ScanLoweringError
from ..lower.options import LoweringOptions
from .aten import KINDS
from .emit import RnnConverter

#: The overloads converted here (convert-map names).
RNN_OPS = tuple(KINDS)

#: Overloads kept out of the decomposition: the converted ones, and the packed-sequence
#: ones, so that :func:`check_rnn_nodes` can name them instead of torch failing later.
_KEPT = (*RNN_OPS, "lstm.data", "gru.data", "rnn_tanh.data", "rnn_relu.data")

_RNN_NAME = re.compile(r"lstm|gru|rnn")


def from_exported_program(
    exported_program: Any, *, options: LoweringOptions | None = None, **kwargs: Any
) -> tvm.IRModule:
    """``tvm.relax.frontend.torch.from_exported_program(exported_program, **kwargs)`` with
    ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` compiled as scan PrimFuncs (lowered with
    ``options``, default ``LoweringOptions()``) called by ``call_tir``.

    ``kwargs`` are TVM's: ``keep_params_as_input``, ``unwrap_unit_return_tuple``,
    ``no_bind_return_tuple``, ``custom_convert_map`` (entries there override the RNN
    converters) and ``run_ep_decomposition`` (True: torch's default decompositions, the RNN
    ops excepted). Raises :class:`scan_tir.ScanLoweringError` for an RNN it cannot compile
    faithfully (training-mode dropout, not float32, symbolic sizes, another RNN variant).
    """
    from tvm.relax.frontend.torch import from_exported_program as tvm_import

    converter = RnnConverter(options)
    custom = dict.fromkeys(RNN_OPS, converter)
    custom.update(kwargs.pop("custom_convert_map", None) or {})
    if kwargs.pop("run_ep_decomposition", True):
        exported_program = exported_program.run_decompositions(decomposition_table())
    check_rnn_nodes(exported_program.graph.nodes, custom)
    return tvm_import(
        exported_program, custom_convert_map=custom, run_ep_decomposition=False, **kwargs
    )


def decomposition_table() -> dict:
    """torch's default decompositions (what TVM's importer runs) without the RNN ops."""
    import torch

    table = torch.export.default_decompositions()
    for name in _KEPT:
        op, overload = name.split(".")
        table.pop(getattr(getattr(torch.ops.aten, op), overload), None)
    return table


def check_rnn_nodes(nodes: Iterable[Any], custom: Iterable[str]) -> None:
    """Refuse, naming the node, any aten RNN-like op that neither these converters, TVM's
    nor the caller's ``custom_convert_map`` converts; TVM's importer would stop at it with
    a bare ``AssertionError: Unsupported function types``."""
    from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter

    known: set[str] | None = None
    for node in nodes:
        target = node.target
        if node.op != "call_function" or getattr(target, "namespace", None) != "aten":
            continue
        name = target.__name__
        if not _RNN_NAME.search(name.split(".")[0]):
            continue
        if known is None:
            known = {*ExportedProgramImporter().convert_map, *custom}
        if name in known:
            continue
        if name.endswith(".data"):
            fix = (
                "packed sequences (nn.utils.rnn.pack_padded_sequence) are not supported: pass "
                "the padded (seq, batch, features) tensor and mask or slice the result"
            )
        else:
            fix = (
                f"this RNN variant has no converter: use nn.LSTM, nn.GRU or nn.RNN (aten "
                f"{', '.join(RNN_OPS)}), keep run_ep_decomposition=True so that torch "
                f"decomposes it, or pass a converter for '{name}' in custom_convert_map"
            )
        raise ScanLoweringError(f"node '{node.name}' ({target}): {fix}.")
