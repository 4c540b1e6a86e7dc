"""ONNX export of a PyTorch module, and onnxruntime as a baseline.

The export is ``torch.onnx.export(..., dynamo=False)``: the TorchScript exporter, which
emits ONNX ``LSTM``/``GRU``/``RNN`` nodes (the dynamo exporter needs onnxscript).
onnxruntime then runs those nodes with its own CPU kernels, on the CPU execution provider
at a given ``intra_op_num_threads`` (``inter_op_num_threads`` 1), timed by the same
``perf_counter`` loop as PyTorch. :func:`measure_ort` does both for a workload of the zoo
(its ``torch_module``), at 2 and 1 threads, as ``torch_baselines`` does for PyTorch.

onnx and onnxruntime are optional extras (``.[benchmarks]``); without them, or for a
recurrence PyTorch has no module for, the columns stay empty with the reason.
"""

from __future__ import annotations

import importlib.util
import io
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scan_tir.workloads import Workload

from .check import max_err
from .frontends import brief
from .timing import loop_latency_ms

#: What the onnxruntime baseline needs installed: the exporter (torch, onnx) and the runtime.
ORT_PACKAGES = ("torch", "onnx", "onnxruntime")


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


@dataclass
class OrtTimes:
    """Raw numbers of the onnxruntime columns of a workload (every repeat, in ms)."""

    ort2_ms: list[float] = field(default_factory=list)  # intra_op_num_threads 2
    ort1_ms: list[float] = field(default_factory=list)  # intra_op_num_threads 1
    export_s: float = math.nan  # torch.onnx.export of the workload's module
    session2_s: float = math.nan  # session creation at 2 threads
    session1_s: float = math.nan
    skipped: str = ""  # why the columns are empty; "" when they ran
    errors: dict[str, float] = field(default_factory=dict)  # first output vs the reference


def ort_skip_reason(w: Workload) -> str:
    """Why onnxruntime cannot run ``w`` here, or "" when it can."""
    if w.recurrence.torch_module is None:
        return "no PyTorch module to export to ONNX"
    missing = [p for p in ORT_PACKAGES if importlib.util.find_spec(p) is None]
    if missing:
        return f"{', '.join(missing)} not installed (pip install .[benchmarks])"
    return ""


def measure_ort(
    w: Workload, inputs: Sequence[np.ndarray], ref: Sequence[np.ndarray], repeats: int
) -> OrtTimes:
    """The workload's PyTorch module (``torch_module``, the weights eager PyTorch runs)
    exported to ONNX, run by onnxruntime at 2 and 1 intra-op threads; the first output of
    both sessions checked against ``ref[0]``. An export or session that fails leaves the
    columns empty with the reason: a baseline that cannot run never stops the run."""
    out = OrtTimes(skipped=ort_skip_reason(w))
    if out.skipped:
        return out
    import torch

    xs = inputs[0]
    module = w.recurrence.torch_module(*inputs, **w.sizes)
    try:
        out.export_s, model = onnx_export(module, (torch.from_numpy(xs),), ["Xs"])
        runs = {n: ort_latency(model, {"Xs": xs}, n, repeats) for n in (2, 1)}
    except Exception as e:
        out.skipped = "failed: " + brief(e)
        return out
    out.ort2_ms, out.session2_s = runs[2].run_ms, runs[2].session_s
    out.ort1_ms, out.session1_s = runs[1].run_ms, runs[1].session_s
    out.errors["onnxruntime vs numpy"] = max(max_err(r.outputs[0], ref[0]) for r in runs.values())
    return out
