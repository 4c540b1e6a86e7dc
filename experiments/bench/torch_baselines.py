"""PyTorch baselines of a workload: eager at 2 and 1 threads, then ``torch.compile``.

PyTorch is an optional extra (``.[benchmarks]``); without it these columns stay empty.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scan_tir.workloads import Workload

from .check import max_err
from .timing import loop_latency_ms, median


def torch_available() -> bool:
    """Whether PyTorch can be imported at all."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class TorchTimes:
    """Raw numbers of the PyTorch columns (every repeat, in ms)."""

    kind: str = ""  # "module", or "Python loop" where PyTorch has no such module
    eager2_ms: list[float] = field(default_factory=list)
    eager1_ms: list[float] = field(default_factory=list)
    compiled_ms: list[float] = field(default_factory=list)
    compile_s: float = math.nan  # first call of the compiled function
    compile_threads: int = 0
    errors: dict[str, float] = field(default_factory=dict)  # first output vs the reference


def measure_torch(
    w: Workload,
    inputs: Sequence[np.ndarray],
    ref: Sequence[np.ndarray],
    repeats: int,
    compile_too: bool,
) -> TorchTimes:
    """PyTorch eager at 2 and 1 threads, then (where PyTorch has the module and
    ``compile_too``) ``torch.compile`` with ``allow_rnn`` at the faster thread count; every
    output checked against ``ref[0]``. Without ``allow_rnn`` dynamo graph-breaks on RNN
    modules and compiles nothing. A recurrence without a module (``torch_module`` None) is
    timed as its Python loop over steps, never compiled: dynamo would unroll a loop over
    1024 steps (minutes of compile)."""
    import torch

    call = w.recurrence.torch_model(*inputs, **w.sizes)
    module = w.recurrence.torch_module is not None
    out = TorchTimes("module" if module else "Python loop")
    out.errors["PyTorch vs numpy"] = max_err(np.asarray(call()), ref[0])
    old = torch.get_num_threads()
    try:
        for n, dest in ((2, out.eager2_ms), (1, out.eager1_ms)):
            torch.set_num_threads(n)
            dest.extend(loop_latency_ms(call, repeats))
        if module and compile_too:
            out.compile_threads = 2 if median(out.eager2_ms) <= median(out.eager1_ms) else 1
            torch.set_num_threads(out.compile_threads)
            torch._dynamo.config.allow_rnn = True
            compiled = torch.compile(call)
            t = time.perf_counter()
            first = compiled()
            out.compile_s = time.perf_counter() - t
            out.errors["torch.compile vs numpy"] = max_err(np.asarray(first), ref[0])
            out.compiled_ms = loop_latency_ms(compiled, repeats)
    finally:
        torch.set_num_threads(old)
    return out
