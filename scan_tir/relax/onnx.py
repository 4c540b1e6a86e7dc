"""``from_onnx``: TVM's ONNX importer with ``LSTM``, ``GRU`` and ``RNN`` converted to scans.

TVM's importer (tvm/relax/frontend/onnx/onnx_frontend.py) has no converter for the three
ops and no argument to pass one: ``ONNXGraphImporter._check_for_unsupported_ops`` and
``_convert_operator`` both look the op type up in the module-level ``_get_convert_map()``
at call time. So :func:`from_onnx` replaces that function, for the duration of the call
only, with one that returns TVM's map plus the converters of ``onnx_emit`` (subclasses of
its ``OnnxOpConverter``), then calls TVM's own ``from_onnx``: the model checker, opset
detection, initializers, every other op and ``If`` subgraphs stay TVM's. Subclassing the
importer instead would mean copying its module-level ``from_onnx`` (which builds the
importer itself).

The replacement is process-wide while it lasts; a lock makes concurrent calls of this
function take turns. A TVM ``from_onnx`` running meanwhile in another thread would see the
extra converters, which only matters for a model with one of these ops (it would then
import instead of failing).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import tvm

from ..lower.options import LoweringOptions
from .onnx_node import OP_GATES, read_attributes

#: The ONNX op types converted here.
ONNX_RNN_OPS = tuple(OP_GATES)

_PATCH_LOCK = threading.RLock()


def from_onnx(
    model: Any,
    shape_dict: Mapping[str, Any] | None = None,
    *,
    options: LoweringOptions | None = None,
    **kwargs: Any,
) -> tvm.IRModule:
    """``tvm.relax.frontend.onnx.from_onnx(model, shape_dict, **kwargs)`` with every ONNX
    ``LSTM``, ``GRU`` and ``RNN`` node compiled as one ``call_tir`` per direction of a scan
    PrimFunc (lowered with ``options``, default ``LoweringOptions()``; marked opaque to
    fusion; one function per distinct size, kind and direction). A sequence length or batch
    that the model leaves symbolic (a ``dim_param`` such as "seq", which TVM's importer
    makes a shape variable of that name) stays so, and one function serves every value.

    ``kwargs`` are TVM's: ``dtype_dict``, ``opset``, ``keep_params_in_input``,
    ``sanitize_input_names``. Weights may be initializers or graph inputs. Raises
    :class:`scan_tir.ScanLoweringError` for a node the scans cannot compute exactly
    (``clip``, activations other than ONNX's defaults and RNN's Relu, ``input_forget=1``,
    ``sequence_lens`` shorter than the sequence or unknown at import, not float32,
    symbolic sizes other than the length and the batch); attribute refusals come before TVM
    parses the model.
    """
    from tvm.relax.frontend.onnx import onnx_frontend

    from .onnx_emit import converters

    check_nodes(model.graph.node)
    with _extended_convert_map(onnx_frontend, converters(options)):
        return onnx_frontend.from_onnx(model, shape_dict, **kwargs)


def check_nodes(nodes: Any) -> None:
    """Refuse, before anything is imported, an RNN node whose attributes the scans cannot
    honour (``nodes``: a GraphProto's ``node`` field; subgraphs are checked on import)."""
    from onnx import helper

    for node in nodes:
        if node.op_type in ONNX_RNN_OPS and node.domain in ("", "ai.onnx"):
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            read_attributes(node.op_type, node.name, attrs)


@contextmanager
def _extended_convert_map(
    module: ModuleType, extra: Mapping[str, type]
) -> Iterator[Callable[[], dict]]:
    """``module._get_convert_map`` returning its map updated with ``extra`` while inside."""
    with _PATCH_LOCK:
        original = module._get_convert_map

        def extended() -> dict:
            return {**original(), **extra}

        module._get_convert_map = extended
        try:
            yield extended
        finally:
            module._get_convert_map = original
