"""A kernel's latency at size instances it was not timed at, from those it was.

DietCode (MLSys 2022) measures a candidate on a few shapes and adapts its cost to the
others by the padding its tiles waste. A scan kernel's work is a product of its sizes:
every step costs the same, the hoisted input product has seq x batch rows, and a tile
over a size computes whole tiles (the last one predicated or padded). So the latency is
modelled as multilinear in the padded sizes: with each size ``s`` rounded up to the
kernel's tile over it, ``pad(s)``,

    T = sum over subsets S of the sizes of c_S * prod_{s in S} pad(s),

fitted by least squares on the instances timed, which determine it exactly at the
``2^n`` corners of a grid of ``n`` sizes (:func:`scan_tir.tune.dynamic` fits it over the
lengths alone, at each listed batch: two lengths fit ``a + b * pad(seq)``). It holds
while a step's cost is affine in its padded rows; it misses cache effects (weights that
stop fitting in cache as the batch grows) and core occupancy (a parallel loop over fewer
tiles than cores), so the kernels chosen by it are timed at every instance afterwards.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import tvm_ffi
from tvm import tirx
from tvm.ir.prim import expr as E
from tvm.tirx import stmt as S

from .symbolic import split_base

Instance = tuple[int, ...]


def tile_multiples(kernel: tirx.PrimFunc, sizes: Sequence[tirx.Var]) -> list[int]:
    """For each of ``sizes``, the largest tile ``kernel`` splits it by (a loop of extent
    ``ceildiv(size, c)``) or pads rows of it to (an extent ``ceildiv(size * c, m) * ...``,
    as :func:`~scan_tir.transform.pad_rows` leaves it: a multiple of ``m / gcd(m, c)`` of
    the size); 1 where it does neither."""
    found = [1] * len(sizes)

    def note(base: tirx.Expr, multiple: int) -> None:
        for k, size in enumerate(sizes):
            if isinstance(base, tirx.Var) and base.same_as(size):
                found[k] = max(found[k], multiple)
            elif isinstance(base, E.Mul) and isinstance(base.b, tirx.IntImm):
                if isinstance(base.a, tirx.Var) and base.a.same_as(size):
                    found[k] = max(found[k], multiple // math.gcd(multiple, int(base.b)))

    def on_for(loop: S.For) -> None:
        note(*split_base(loop.extent))
        tvm_ffi.structural_walk(loop.extent, (E.FloorDiv, on_div))

    def on_div(div: E.FloorDiv) -> None:
        if isinstance(div.b, tirx.IntImm) and isinstance(div.a, E.Add):
            if isinstance(div.a.b, tirx.IntImm) and int(div.a.b) == int(div.b) - 1:
                note(div.a.a, int(div.b))

    tvm_ffi.structural_walk(kernel.body, (S.For, on_for))
    return found


def fit_latency(
    timed: Mapping[Instance, float], multiples: Sequence[int]
) -> Callable[[Instance], float]:
    """The model of the module's docstring fitted to ``timed`` (instance -> ms), as a
    function of an instance. Terms the timed instances cannot tell apart are dropped,
    the highest-order first, so that two lengths alone fit ``a + b * seq``."""
    instances = list(timed)
    n = len(multiples)
    subsets = [s for r in range(n + 1) for s in itertools.combinations(range(n), r)]

    def row(instance: Instance, terms: list[tuple[int, ...]]) -> list[float]:
        padded = [math.ceil(v / m) * m for v, m in zip(instance, multiples, strict=True)]
        return [math.prod(padded[i] for i in s) for s in terms]

    terms: list[tuple[int, ...]] = []
    for subset in subsets:  # keep a term only while it adds rank
        trial = [*terms, subset]
        matrix = np.array([row(i, trial) for i in instances], dtype=float)
        if np.linalg.matrix_rank(matrix) == len(trial):
            terms = trial
    matrix = np.array([row(i, terms) for i in instances], dtype=float)
    coef, *_ = np.linalg.lstsq(matrix, np.array([timed[i] for i in instances]), rcond=None)

    def predict(instance: Instance) -> float:
        return float(np.dot(coef, row(instance, terms)))

    return predict
