"""PyTorch eager and ``torch.compile`` latency of an ``nn.Module`` called on given inputs
(``torch_baselines`` does the same for a workload's PyTorch closure).

Every call runs under ``torch.no_grad()`` at a given ``torch.set_num_threads`` count, which
is restored afterwards; latencies come from the ``perf_counter`` loop of ``timing``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from .timing import loop_latency_ms


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """``torch.set_num_threads(n)`` and ``no_grad`` for the duration."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with torch.no_grad():
            yield
    finally:
        torch.set_num_threads(old)


def eager_ms(module: Any, args: Sequence[Any], threads: int, repeats: int) -> list[float]:
    """Per-call ms of each repeat of ``module(*args)`` at ``threads`` threads."""
    with torch_threads(threads):
        return loop_latency_ms(lambda: module(*args), repeats)


@dataclass
class CompiledRun:
    """``torch.compile``: its first call's seconds (the compile), output, per-call ms."""

    compile_s: float
    output: np.ndarray
    run_ms: list[float]


def compiled_run(module: Any, args: Sequence[Any], threads: int, repeats: int) -> CompiledRun:
    """``torch.compile(module)`` with ``allow_rnn`` (without it dynamo graph-breaks on RNN
    modules and compiles nothing), timed at ``threads`` threads; the module's output must
    be one tensor. The compile is cold: dynamo's state is reset and inductor's caches
    (in memory and on disk, which would make a rerun's compile take a fraction of the
    first's) are off for the first call."""
    import torch

    torch._dynamo.config.allow_rnn = True
    torch._dynamo.reset()
    with torch_threads(threads):
        fn = torch.compile(module)
        with torch._inductor.config.patch(force_disable_caches=True), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # that the caches are off
            t = time.perf_counter()
            out = fn(*args)
            compile_s = time.perf_counter() - t
        return CompiledRun(compile_s, out.numpy(), loop_latency_ms(lambda: fn(*args), repeats))
