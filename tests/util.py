"""Helpers shared by the tests: build a PrimFunc, run it on numpy arrays."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import s_tir

import scan_tir


def compile_func(func: tvm.tirx.PrimFunc) -> tvm.runtime.Module:
    assert s_tir.analysis.verify_well_formed(func)
    return tvm.compile(tvm.IRModule({"main": func}), target="llvm")


def lower_and_build(args: list) -> tuple[tvm.tirx.PrimFunc, tvm.runtime.Module]:
    func = scan_tir.create_prim_func(args)
    return func, compile_func(func)


def run(lib, inputs: list[np.ndarray], out_shapes: list[tuple], dtype="float32"):
    """Call ``lib`` on ``inputs`` plus zeroed outputs; return the outputs as numpy."""
    outs = [tvm.runtime.tensor(np.zeros(s, dtype)) for s in out_shapes]
    lib["main"](*[tvm.runtime.tensor(x) for x in inputs], *outs)
    return [o.numpy() for o in outs]

