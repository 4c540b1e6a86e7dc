"""Latency of TVM modules and Python callables, measured the same way for every column.

Each repeat times ``number`` back-to-back calls, ``number`` chosen so that a repeat lasts at
least ``MIN_REPEAT_S`` (timer noise is then negligible), after an untimed warm-up call
(allocation, lazy code generation, thread-pool start are not latency). Tables report the
median over repeats.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import tvm

MIN_REPEAT_S = 0.01
#: A path slower than this per call is timed one call per repeat, without calibration: the
#: calibration's two extra calls would cost many seconds (Relax at C/D, untuned at D).
SLOW_CALL_S = 1.0


def median(xs: list[float]) -> float:
    """Median, or NaN for a path that did not run (keeps a table's shape fixed)."""
    return statistics.median(xs) if xs else math.nan


def calibrate_number(fn: Callable[[], Any]) -> int:
    """Calls per repeat so that one repeat lasts at least MIN_REPEAT_S."""
    fn()
    t = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t, 1e-7)
    return max(1, math.ceil(MIN_REPEAT_S / once))


def loop_latency_ms(fn: Callable[[], Any], repeats: int) -> list[float]:
    """Per-call ms of each repeat, by a perf_counter loop (numpy, PyTorch)."""
    number = calibrate_number(fn)
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t) / number * 1e3)
    return out


def evaluator_latency_ms(mod: Any, args: list[Any], repeats: int) -> list[float]:
    """Per-call ms of each repeat from TVM's ``time_evaluator`` (no Python call overhead)."""
    number = calibrate_number(lambda: mod["main"](*args))
    res = mod.time_evaluator("main", tvm.cpu(), number=number, repeat=repeats)(*args)
    return [r * 1e3 for r in res.results]


def one_call_s(mod: Any, args: list[Any]) -> float:
    """Seconds of one call. Made after a first (numerics) call, so it excludes the llvm
    module's lazy code generation; it decides whether a path counts as slow."""
    t = time.perf_counter()
    mod["main"](*args)
    return time.perf_counter() - t


def tvm_latency_ms(
    mod: Any, args: list[Any], once_s: float, repeats: int, slow_repeats: int
) -> list[float]:
    """:func:`evaluator_latency_ms`, or, for a path whose one call (``once_s``, from
    :func:`one_call_s`) took longer than SLOW_CALL_S, ``slow_repeats`` single calls."""
    if once_s <= SLOW_CALL_S:
        return evaluator_latency_ms(mod, args, repeats)
    timer = mod.time_evaluator("main", tvm.cpu(), number=1, repeat=slow_repeats)
    return [r * 1e3 for r in timer(*args).results]

