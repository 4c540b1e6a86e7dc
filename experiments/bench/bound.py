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

import tvm
from machine import DRAM_BYTES_PER_S, cache_bytes, peak_flops
from tvm import s_tir, tirx

from scan_tir.workloads import Workload

from .build import param_shape


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
