"""Running a database's functions: inputs, reference outputs, builds, latencies, and
whether code built for a record's target runs on this machine at all.

A workload from the zoo (:func:`scan_tir.workloads.workload_of`) brings its inputs and
its numpy reference. For any other function there is no reference but the function
itself: every parameter is filled with random values, the untuned function is run, and
all parameters after the call are the reference (this needs no knowledge of which
parameters are outputs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tvm
from tvm import tirx
from tvm.target import Target
from tvm.target.codegen import llvm_get_cpu_features, llvm_get_system_cpu, llvm_get_system_triple

from ..transform.pipeline import PIPELINE
from ..workloads import Workload
from .records import TuningDB


@dataclass
class Case:
    """Arguments to call a function of the database with, and what it must produce."""

    args: list[np.ndarray]  # every parameter, in order (outputs zeroed)
    check: list[int]  # parameter positions compared with ``expected``
    expected: list[np.ndarray]
    reference: str  # where ``expected`` came from, for the report


def param_shapes(func: tirx.PrimFunc) -> list[tuple[tuple[int, ...], str]]:
    return [(tuple(int(d) for d in p.ty.shape), str(p.ty.dtype)) for p in func.params]


def case(db: TuningDB, workload: int, target: Target, seed: int = 0) -> Case:
    """Inputs and expected outputs for workload line ``workload`` of ``db``."""
    func = db.func(workload)
    zoo = db.workload(workload)
    if zoo is not None:
        return zoo_case(zoo, func, seed)
    return own_case(func, target, seed, "workload not from the zoo")


def own_case(func: tirx.PrimFunc, target: Target, seed: int = 0, why: str = "") -> Case:
    """Random inputs in (-1, 1) and the untuned ``func``'s own outputs on them."""
    shapes = param_shapes(func)
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-1, 1, s).astype(d) for s, d in shapes]
    expected = call(build(func, target), args)
    return Case(args, list(range(len(shapes))), expected,
                "the untuned function's own output" + (f" ({why})" if why else ""))


def zoo_case(zoo: Workload, func: tirx.PrimFunc, seed: int = 0) -> Case:
    """The inputs and numpy reference of ``zoo``, at its sizes, for ``func`` (its lowered
    function: the outputs' shapes and dtypes are taken from its parameters)."""
    inputs = zoo.input_arrays(seed)
    shapes = param_shapes(func)
    outs = [np.zeros(s, d) for s, d in shapes[len(inputs):]]
    n = len(inputs)
    return Case(inputs + outs, list(range(n, len(shapes))), zoo.numpy(inputs),
                f"numpy reference of {zoo.name}")


def build(func: tirx.PrimFunc, target: Target) -> tvm.runtime.Module:
    return tvm.compile(tvm.IRModule({"main": func}), target=target, tir_pipeline=PIPELINE).jit()


def build_unloaded(mod: tvm.IRModule, target: Target, _params: object) -> tvm.runtime.Module:
    """:func:`build` as a LocalBuilder build function (``tune.measure.build_candidate``
    without prepacking: verification runs the function as tuned, on unpacked weights)."""
    from tvm.driver import build as tvm_build

    return tvm_build(mod, target=target, pipeline=PIPELINE)


def call(lib: tvm.runtime.Module, args: list[np.ndarray]) -> list[np.ndarray]:
    """Call ``lib`` on copies of ``args``; every argument after the call."""
    tensors = [tvm.runtime.tensor(a.copy()) for a in args]
    lib["main"](*tensors)
    return [t.numpy() for t in tensors]


def max_error(got: list[np.ndarray], c: Case) -> float:
    """Largest error relative to max(1, |expected|), over the checked parameters."""
    worst = 0.0
    for pos, want in zip(c.check, c.expected):
        have = got[pos].astype("float64")
        err = np.abs(have - want) / np.maximum(1.0, np.abs(want))
        worst = max(worst, float(np.nanmax(err)) if err.size else 0.0)
        if np.isnan(have).any():
            return float("inf")
    return worst


def latency_ms(lib: tvm.runtime.Module, args: list[np.ndarray], repeat: int = 5) -> float:
    """Median ms per call, with TVM's time_evaluator (about 0.1 s per repeat: as many
    calls as fill it, from one; its default starts at 10)."""
    tensors = [tvm.runtime.tensor(a.copy()) for a in args]
    timer = lib.time_evaluator("main", tvm.cpu(), number=1, repeat=repeat, min_repeat_ms=100)
    return float(np.median(timer(*tensors).results)) * 1e3


#: LLVM's names of the instruction-set extensions vector code is built from; the rest of
#: its feature list tunes code generation and does not decide whether the code runs.
_ISA = ("avx", "amx", "fma", "sse", "f16c", "bmi")


def unrunnable_here(target: Target) -> str:
    """Why code built for ``target`` would not run on this machine's CPU ('' if it would).

    A record carries the target it was tuned for, and this project's machines change CPU
    between sessions: code for ``znver5`` dies of an illegal instruction on a Zen 3 (the
    process, not a Python error), so a foreign target is checked before its code is run.
    """
    if target.kind.name != "llvm":
        return ""
    system = llvm_get_system_cpu()
    arch = str(target.attrs.get("mtriple", "") or llvm_get_system_triple()).split("-")[0]
    if arch != llvm_get_system_triple().split("-")[0]:
        return f"built for {arch}, this machine is {llvm_get_system_triple().split('-')[0]}"
    host = Target({"kind": "llvm", "mcpu": system})
    lacks = sorted(
        f for f in set(llvm_get_cpu_features(target)) - set(llvm_get_cpu_features(host))
        if f.startswith(_ISA)
    )
    if not lacks:
        return ""
    cpu = str(target.attrs.get("mcpu", "") or "generic")
    shown = ", ".join(lacks[:4]) + (f" and {len(lacks) - 4} more" if len(lacks) > 4 else "")
    return f"built for {cpu}, whose {shown} this CPU ({system}) lacks"
