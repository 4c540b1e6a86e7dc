"""Compiling a function for the tuning target, and its arguments by parameter name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tvm
from tvm import tirx

from scan_tir.transform.pipeline import PIPELINE
from scan_tir.transform.weight_prepack import prepack_module
from scan_tir.tune import default_target


def target() -> tvm.target.Target:
    """The target of tuning and of every build: tuned records are looked up and compiled for
    the same one (this CPU, TVM_NUM_THREADS cores; :func:`report.start_run` sets 2)."""
    return default_target()


def build(func: tirx.PrimFunc) -> tvm.runtime.Module:
    """Compile one PrimFunc as ``main`` (whatever its global_symbol) and load it."""
    func = func.with_attr("global_symbol", "main")
    return tvm.compile(tvm.IRModule({"main": func}), target=target(), tir_pipeline=PIPELINE).jit()


def build_prepacked(func: tirx.PrimFunc) -> tuple[tvm.runtime.Module, list]:
    """:func:`build`, where the function packs weights with ``prepack`` beside ``main``
    (``scan_tir.transform.weight_prepack``): the module, and the [shape, dtype] of each
    packed weight both take after the function's parameters (empty: none)."""
    mod, packed = prepack_module(func)
    lib = tvm.compile(mod, target=target(), tir_pipeline=PIPELINE).jit()
    return lib, [[list(shape), dtype] for shape, dtype in packed]


def param_shape(param: tirx.Var) -> tuple[int, ...]:
    """The static shape of a PrimFunc buffer parameter."""
    return tuple(int(d) for d in param.ty.shape)


def param_names(func: tirx.PrimFunc) -> list[str]:
    """Parameter names in order: the key every argument is looked up by."""
    return [str(p.name) for p in func.params]


def fresh_tensors(func: tirx.PrimFunc, inputs: Sequence[np.ndarray]) -> dict[str, Any]:
    """``inputs`` by parameter name, and zeroed outputs for the remaining parameters.

    Fresh for every module measured, so that no module can pass by reading another's
    results."""
    names = param_names(func)
    out = {n: tvm.runtime.tensor(np.ascontiguousarray(a)) for n, a in zip(names, inputs)}
    for p in func.params[len(inputs) :]:
        out[str(p.name)] = tvm.runtime.tensor(np.zeros(param_shape(p), str(p.ty.dtype)))
    return out


def call_args(func: tirx.PrimFunc, names: list[str], tensors: dict[str, Any]) -> list[Any]:
    """Arguments of ``func`` by position, looked up by the ORIGINAL parameter names.

    RemoveWeightLayoutRewriteBlock renames the repacked parameters (Wi -> Wi_global) but keeps
    their positions. Shapes are checked, so a packed tensor can never land in the wrong slot.
    """
    args = [tensors[n] for n in names]
    for p, a, n in zip(func.params, args, names):
        want = param_shape(p)
        if tuple(a.shape) != want:
            raise ValueError(f"argument {n}: shape {tuple(a.shape)}, parameter wants {want}")
    return args
