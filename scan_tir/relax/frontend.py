"""``from_exported_program``: TVM's PyTorch importer with the RNN ops converted to scans.

TVM's importer (tvm/relax/frontend/torch/exported_program_translator.py) first runs torch's
default decompositions, which turn ``aten.lstm`` into per-step cell ops before any converter
sees it, and its own ``lstm.input``/``gru.input``/``rnn_tanh.input`` converters unroll the
sequence (single layer, output only). Here the decomposition runs first with the RNN
overloads kept, then TVM's importer runs with decomposition off and :class:`RnnConverter` in
``custom_convert_map`` (which it calls as ``conv(node, importer)``,
base_fx_graph_translator.py); every other op goes through TVM's converters unchanged.

A program from ``scan_tir.relax.export`` holds the RNNs as ``scan_tir::`` custom ops, with a
symbolic sequence length and batch where ``dynamic_shapes`` declared them: the same
converter takes those. TVM's importer records each symbol's declared range only as the
``tir_var_lower_bound``/``tir_var_upper_bound`` attributes of ``main``, by which memory
planning sizes the intermediate buffers, and nothing checks it: a longer sequence stops in
the VM's allocator with an internal "storage allocation failure". :func:`check_ranges`
makes ``main`` check the ranges first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import tvm
from tvm import relax, tirx

from ..errors import ScanLoweringError
from ..lower.options import LoweringOptions
from .aten import EXPORTED_KINDS, KINDS
from .emit import RnnConverter

#: The aten overloads converted here (convert-map names).
RNN_OPS = tuple(KINDS)

#: ``scan_tir.relax.export``'s custom ops, converted too (convert-map names).
EXPORTED_OPS = tuple(EXPORTED_KINDS)

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
    faithfully (training-mode dropout, not float32, a symbolic size other than the sequence
    length and the batch, another RNN variant). A symbolic size of an input is checked
    against its declared range when ``main`` is called (:func:`check_ranges`).
    """
    from tvm.relax.frontend.torch import from_exported_program as tvm_import

    converter = RnnConverter(options)
    custom = dict.fromkeys((*RNN_OPS, *EXPORTED_OPS), converter)
    custom.update(kwargs.pop("custom_convert_map", None) or {})
    if kwargs.pop("run_ep_decomposition", True):
        exported_program = exported_program.run_decompositions(decomposition_table())
    check_rnn_nodes(exported_program.graph.nodes, custom)
    mod = tvm_import(
        exported_program, custom_convert_map=custom, run_ep_decomposition=False, **kwargs
    )
    return check_ranges(mod, _dim_names(exported_program))


#: ``main``'s attribute: its symbolic sizes' ``torch.export.Dim`` names, by symbol, so that
#: tools can take sizes by the names the user declared (``scan_tir.relax.tune``'s sizes).
DIM_NAMES_ATTR = "scan_tir.dim_names"


def check_ranges(mod: tvm.IRModule, names: Mapping[str, str] | None = None) -> tvm.IRModule:
    """``mod`` whose ``main`` first checks, with an ``assert_op``, each symbolic size of its
    inputs against the range in its ``tir_var_lower_bound``/``tir_var_upper_bound``
    attributes: the VM then raises a Python ``AssertionError`` naming the input, the axis,
    the dimension (``names``: symbol -> the name it was declared with) and the range.
    ``main`` becomes impure (a dataflow block cannot hold the check); ``names`` are kept in
    its attributes (``DIM_NAMES_ATTR``)."""
    main = mod["main"]
    attrs = dict(main.attrs or {})
    if names:
        attrs[DIM_NAMES_ATTR] = dict(names)
    lower = attrs.get("tir_var_lower_bound", {})
    upper = attrs.get("tir_var_upper_bound", {})
    checks, seen = [], set()
    for param in main.params:
        for axis, size in enumerate(getattr(param.ty, "shape", None) or ()):
            name = getattr(size, "name", None)
            if not isinstance(size, tirx.Var) or name in seen or name not in lower:
                continue
            seen.add(name)
            # No RNN takes an empty sequence or batch (PyTorch refuses one, and the final
            # states would be read at row -1), whatever the Dim's own minimum.
            low, high = max(int(lower[name]), 1), upper.get(name)
            declared = f"[{low}, {int(high)}]" if high is not None else f">= {low}"
            cond = size >= low if high is None else tirx.all(size >= low, size <= int(high))
            dim = f"'{names[name]}' (symbol {name})" if name in (names or {}) else name
            message = (
                f"{param.name}.shape[{axis}] = {{}} is outside the range {declared} of "
                f"dimension {dim} declared at export: pass a size in that range, or export "
                "again with a torch.export.Dim that covers it."
            )
            check = relax.op.assert_op(relax.prim_value(cond), [relax.prim_value(size)], message)
            checks.append(check)
    if not checks:
        if names:
            mod = tvm.IRModule(dict(mod.functions), attrs=mod.attrs, global_infos=mod.global_infos)
            mod[mod.get_global_var("main")] = main.with_attrs(attrs)
        return mod
    bb = relax.BlockBuilder()
    with bb.function("main", main.params, attrs=attrs, pure=False):
        for check in checks:
            bb.emit(check, name_hint="range_check")
        for block in main.body.blocks:
            if isinstance(block, relax.DataflowBlock):
                with bb.dataflow():
                    for binding in block.bindings:
                        bb.emit_normalized(binding)
            else:
                for binding in block.bindings:
                    bb.emit_normalized(binding)
        bb.emit_func_output(main.body.body)
    functions = dict(mod.functions)
    functions[mod.get_global_var("main")] = bb.get()["main"]
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)


def _dim_names(exported_program: Any) -> dict[str, str]:
    """Symbol -> the ``torch.export.Dim`` name it was declared with, for the inputs' sizes.
    The names live in the export's ShapeEnv (``source_name_to_debug_name``, a torch
    internal); a program saved and loaded again has lost them: {} then."""
    names = {}
    for node in exported_program.graph.nodes:
        value = node.meta.get("val") if node.op == "placeholder" else None
        env = getattr(getattr(value, "fake_mode", None), "shape_env", None)
        if env is None:
            continue
        debug = getattr(env, "source_name_to_debug_name", {})
        sources = getattr(env, "var_to_sources", {})
        for size in value.shape:
            symbol = getattr(getattr(size, "node", None), "expr", None)
            for source in sources.get(symbol, ()):
                if source.name in debug:
                    names[str(symbol)] = debug[source.name]
    return names


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
