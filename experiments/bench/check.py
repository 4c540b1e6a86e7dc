"""Whether a module computed the right thing: every output against the reference, before
anything is timed (a fast wrong module must never reach a table)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import tirx

from .build import build, call_args


def max_err(a: np.ndarray, b: np.ndarray) -> float:
    """Max absolute difference; shapes must agree exactly (no silent broadcasting)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a.astype("float64") - b.astype("float64"))))


def outputs_error(args: Sequence[Any], ref: Sequence[np.ndarray]) -> tuple[list, float]:
    """The outputs (the last ``len(ref)`` arguments, after a call) and their worst error."""
    outputs = [a.numpy() for a in args[len(args) - len(ref) :]]
    return outputs, max(max_err(o, r) for o, r in zip(outputs, ref))


@dataclass
class Checked:
    """A built module, the arguments it ran on, its outputs and their error."""

    lib: tvm.runtime.Module
    args: list[Any]
    outputs: list[np.ndarray]
    err: float


def build_checked(
    func: tirx.PrimFunc, names: list[str], tensors: dict[str, Any], ref: Sequence[np.ndarray]
) -> Checked:
    """Build ``func``, call it once on ``tensors`` (by original parameter name), and compare
    its outputs with ``ref``. The call also pays the llvm module's lazy code generation."""
    lib = build(func)
    args = call_args(func, names, tensors)
    lib["main"](*args)
    outputs, err = outputs_error(args, ref)
    return Checked(lib, args, outputs, err)
