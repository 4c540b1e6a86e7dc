"""The hardware bound a tuned function is held against, on the machine the run is on.

Peak and cache sizes are measured by the run (``experiments/machine.py``): the machines of
this project change kind between sessions, and a bound taken from another machine was
beaten by PyTorch. For topi's LSTM the bound is counted by hand (the GEMM FLOPs, and W_hh
streamed from DRAM once per step where it exceeds the last-level cache); for the other
recurrences from ``estimate_tir_flops`` and the parameters' bytes, which is loose for the
elementwise-heavy scans (a transcendental counts one, ``fast_math``'s polynomials count
as the dozens of operations they are).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
import tvm
import tvm_ffi
from machine import DRAM_BYTES_PER_S, cache_bytes, peak_flops
from tvm import s_tir, te, tirx

from scan_tir.lower.fast_math import fast_math
from scan_tir.workloads import Workload

from .build import build, param_shape


@dataclass(frozen=True)
class Bound:
    """Compute and memory time in ms; the bound is the larger."""

    compute_ms: float
    memory_ms: float
    flops: float

    @property
    def ms(self) -> float:
        return max(self.compute_ms, self.memory_ms)

    @property
    def kind(self) -> str:
        return "memory" if self.memory_ms > self.compute_ms else "compute"


def lstm_bound(seq: int, batch: int, input: int, hidden: int) -> Bound:
    """Every step multiplies [x_t, h_{t-1}] (in + H wide) by the 4H gate weights, at the
    measured peak; a W_hh larger than the last-level cache is streamed from DRAM once per
    step; one that fits in L2 or L3 counts 0 (L3 bandwidth is not measured)."""
    flops = 2 * seq * batch * 4 * hidden * (input + hidden)
    wh_bytes = 4 * hidden * hidden * 4
    last_level = max(cache_bytes(2), cache_bytes(3))
    mem = seq * wh_bytes / DRAM_BYTES_PER_S if wh_bytes > last_level else 0.0
    return Bound(flops / peak_flops() * 1e3, mem * 1e3, flops)


def estimated_bound(func: tirx.PrimFunc) -> Bound:
    """FLOPs of ``estimate_tir_flops`` at the peak, against every parameter's bytes read
    once from DRAM."""
    flops = float(s_tir.analysis.estimate_tir_flops(tvm.IRModule({"main": func})))
    param_bytes = sum(
        math.prod(param_shape(p)) * tvm.DataType(str(p.ty.dtype)).bits // 8 for p in func.params
    )
    return Bound(flops / peak_flops() * 1e3, param_bytes / DRAM_BYTES_PER_S * 1e3, flops)


#: The calls ``fast_math`` turns into polynomials (each a few dozen vector operations).
_TRANSCENDENTAL = ("tirx.exp", "tirx.tanh", "tirx.sigmoid")


def transcendentals(func: tirx.PrimFunc) -> int:
    """How many exp, tanh and sigmoid calls ``func`` (lowered without ``fast_math``, so
    that each is one call) makes: each store's calls times its loops' extents."""
    count = 0

    def visit(stmt: object, trips: int) -> None:
        nonlocal count
        if isinstance(stmt, tirx.stmt.For):
            visit(stmt.body, trips * int(stmt.extent))
        elif isinstance(stmt, tirx.stmt.BufferStore):
            calls: list = []
            tvm_ffi.structural_walk(stmt.value, (tvm.ir.expr.Call, calls.append))
            count += trips * sum(str(c.op.name) in _TRANSCENDENTAL for c in calls)
        else:
            for child in _children(stmt):
                visit(child, trips)

    visit(func.body, 1)
    return count


def _children(stmt: object) -> list:
    if isinstance(stmt, tirx.stmt.SeqStmt):
        return list(stmt.seq)
    if isinstance(stmt, s_tir.SBlockRealize):
        return [stmt.block]
    if isinstance(stmt, s_tir.SBlock):
        return [stmt.body]
    body = getattr(stmt, "body", None)
    return [body] if isinstance(body, tirx.stmt.Stmt) else []


@cache
def exp_rate(threads: int = 2) -> float:
    """Exps per second of ``fast_math``'s exp on this machine, vectorised 16 wide, 8
    independent vectors per thread, on ``threads`` threads, each exp's argument a product
    and its result accumulated (a linear scan's decay, ``exp(delta * A) * h``): the rate a
    scan made of exps cannot beat. Its kernel, ``y[i] = sum_r exp(x[i] * w[r])`` on
    cache-resident data, best of 10 calls."""
    size, steps = threads * 128, 1 << 15
    x = te.placeholder((size,), name="x")
    w = te.placeholder((steps,), name="w")
    r = te.reduce_axis((0, steps), name="r")
    y = te.compute((size,), lambda i: te.sum(te.exp(x[i] * w[r]), axis=r), name="y")
    sch = s_tir.Schedule(fast_math(te.create_prim_func([x, w, y])))
    block = sch.get_sblock("y")
    i, k = sch.get_loops(block)
    outer, lanes, vector = sch.split(i, [threads, 8, 16])
    sch.reorder(outer, k, lanes, vector)
    sch.parallel(outer)
    sch.unroll(lanes)
    sch.vectorize(vector)
    sch.decompose_reduction(block, k)
    lib = build(sch.mod["main"])
    rng = np.random.default_rng(0)
    args = [
        tvm.runtime.tensor(rng.uniform(0.1, 0.8, shape).astype("float32"))
        for shape in ((size,), (steps,))
    ] + [tvm.runtime.tensor(np.zeros(size, "float32"))]
    timer = lib.time_evaluator("main", tvm.cpu(), number=3, repeat=10)
    return size * steps / min(timer(*args).results)


def scan_bound(func: tirx.PrimFunc, exact: tirx.PrimFunc) -> Bound:
    """A compute bound for an elementwise scan: ``exact`` (the same function lowered
    without ``fast_math``) has its exps and other FLOPs counted, each exp at the measured
    :func:`exp_rate` and every other FLOP at the GEMM peak; memory as
    :func:`estimated_bound`. Fairer than ``estimated_bound`` of ``func``, which counts each
    polynomial's expression tree before LLVM shares its common subexpressions."""
    calls = transcendentals(exact)
    flops = float(s_tir.analysis.estimate_tir_flops(tvm.IRModule({"main": exact})))
    compute = (flops - calls) / peak_flops() + calls / exp_rate()
    return Bound(compute * 1e3, estimated_bound(func).memory_ms, flops)


def hardware_bound(w: Workload, func: tirx.PrimFunc) -> Bound:
    """The LSTM's counted bound, or the estimated one for every other recurrence."""
    if w.recurrence.name == "lstm":
        return lstm_bound(**w.sizes)
    return estimated_bound(func)


def bound_constants() -> dict[str, float]:
    """What the bounds of this run were computed from (for the JSON)."""
    return {
        "peak_flops": peak_flops(),
        "l2_bytes": cache_bytes(2),
        "l3_bytes": cache_bytes(3),
        "dram_bytes_per_s": DRAM_BYTES_PER_S,
    }


def footnote() -> str:
    """How the bound column was obtained."""
    return (
        f"Hardware bound = max(FLOPs / peak, memory), peak = {peak_flops():.3g} FLOP/s "
        "(measured in this run: the best fp32 2048^3 matmul of MKL, oneDNN and numpy on 2 "
        "threads). LSTM: FLOPs = 2*seq*batch*4H*(in + H); memory = seq * 4H*H*4 B / "
        f"{DRAM_BYTES_PER_S:.3g} B/s (DRAM, FIELD_NOTES), counted only when W_hh (4H*H*4 B) "
        f"exceeds the {cache_bytes(3) / 2**20:g} MiB L3 (L2: {cache_bytes(2) / 2**20:g} MiB "
        "in all); a W_hh held in L2 or L3 counts 0. Other recurrences: FLOPs from "
        "estimate_tir_flops (a transcendental counts one; fast_math's polynomials count as "
        "their operations), memory = parameter bytes / DRAM bandwidth: loose for the "
        "elementwise scans."
    )


#: The recurrent modules whose layers the model bound counts.
_RECURRENT = ("LSTM", "GRU", "RNN")


@dataclass(frozen=True)
class ModelBound:
    """A recurrent model's compute bound in ms: its products over whole sequences (input
    projections, linear layers) and its recurrent products, every FLOP at the peak. A
    lower bound only: it ignores memory, and a batch-1 step, a matrix-vector product whose
    W_hh streams from a cache level every step, runs far below the peak."""

    gemm_ms: float
    recurrent_ms: float

    @property
    def ms(self) -> float:
        return self.gemm_ms + self.recurrent_ms


def model_bound(module: object, seq: int, batch: int) -> ModelBound:
    """The compute bound of a time-major ``torch.nn`` model run on ``seq`` x ``batch``
    tokens: every ``nn.LSTM``/``nn.GRU``/``nn.RNN`` layer and direction, and every
    ``nn.Linear`` applied to every token (embeddings and elementwise work count nothing)."""
    gemm = recurrent = 0.0
    for sub in module.modules():
        kind = type(sub).__name__
        if kind == "Linear":
            gemm += 2 * seq * batch * sub.in_features * sub.out_features
        if kind not in _RECURRENT:
            continue
        dirs = 2 if sub.bidirectional else 1
        for layer in range(sub.num_layers):
            rows, width = getattr(sub, f"weight_ih_l{layer}").shape
            cols = getattr(sub, f"weight_hh_l{layer}").shape[1]
            gemm += dirs * 2 * seq * batch * rows * width
            recurrent += dirs * 2 * seq * batch * rows * cols
    peak = peak_flops()
    return ModelBound(gemm / peak * 1e3, recurrent / peak * 1e3)


def model_footnote() -> str:
    """How the model bound was obtained."""
    return (
        f"Bound = every FLOP of the model's products (input projections, recurrent "
        f"products, linear layers) at {peak_flops():.3g} FLOP/s, the best fp32 2048^3 "
        "matmul of MKL, oneDNN and numpy on 2 threads measured in this run; memory is not "
        "counted, so for batch 1, whose recurrent products stream W_hh every step, it is "
        "loose."
    )
