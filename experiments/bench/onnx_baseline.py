"""ONNX export of a PyTorch module, and onnxruntime as a baseline.

The export is ``torch.onnx.export(..., dynamo=False)``: the TorchScript exporter, which
emits ONNX ``LSTM``/``GRU``/``RNN`` nodes (the dynamo exporter needs onnxscript).
onnxruntime then runs those nodes with its own CPU kernels, on the CPU execution provider
at a given ``intra_op_num_threads`` (``inter_op_num_threads`` 1), timed by the same
``perf_counter`` loop as PyTorch.
"""

from __future__ import annotations

import io
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .timing import loop_latency_ms


def onnx_export(
    module: Any, args: tuple[Any, ...], input_names: Sequence[str]
) -> tuple[float, Any]:
    """Export ``module`` called on ``args``, inputs named ``input_names``; returns (seconds,
    ``onnx.ModelProto``). The exporter's warnings (deprecation, nn.RNN's flat weights) are
    silenced."""
    import onnx
    import torch

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        torch.onnx.export(module, args, buf, dynamo=False, input_names=list(input_names))
        seconds = time.perf_counter() - t
    return seconds, onnx.load_from_string(buf.getvalue())


@dataclass
class OrtRun:
    """One onnxruntime session: creation seconds, its first outputs, per-call ms per repeat."""

    session_s: float
    outputs: list[np.ndarray]
    run_ms: list[float]


def ort_latency(model: Any, feeds: Mapping[str, np.ndarray], threads: int, repeats: int) -> OrtRun:
    """Create a session for ``model`` (a ModelProto) at ``threads`` intra-op threads, run it
    once on ``feeds`` (the outputs to check), then time ``repeats`` repeats."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    data = model.SerializeToString()
    t = time.perf_counter()
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    session_s = time.perf_counter() - t
    inputs = dict(feeds)
    outputs = sess.run(None, inputs)
    run_ms = loop_latency_ms(lambda: sess.run(None, inputs), repeats)
    return OrtRun(session_s, outputs, run_ms)
