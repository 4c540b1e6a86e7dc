"""The forms a linear recurrence can take, each tuned, the fastest kept.

A linear scan (:func:`scan_tir.lower.linear_form`: ``h[t] = a[t] * h[t-1] + b[t]``,
elementwise) has lowerings that compute the same values but are different functions, so
no schedule of one reaches the other: the sequential one (each step after the last; a
persistent schedule of it runs channel-parallel where ``MarkOwnedShares`` proves each
thread owns its channels) and the chunked ones (:func:`scan_tir.lower.chunked`: parallel
over chunks of time, about twice the work, for recurrences with too few channels to keep
every core busy). Which is faster depends on the sizes and the machine, so each form is
tuned as a workload of its own, in its own database under the work dir, and the form
whose best record ran fastest is the result. A graph without a linear scan has one form,
and tuning it is plain ``tune_module``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import tvm
from tvm import te, tirx
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target

from ..lower import chunked, linear_problem
from ..lower.convert import create_prim_func
from ..lower.graph import analyse
from ..lower.options import LoweringOptions
from ..transform.layout_free import layout_free
from .progress import log
from .target import default_target
from .tuner import records_of, tune_module

#: Chunk lengths offered by default: long enough that the carry pass is short, short
#: enough that a sequence of a thousand steps has a chunk per core and more.
DEFAULT_CHUNKS = (64,)
SEQUENTIAL = "sequential"


def linear_forms(
    tensors: Sequence[te.Tensor],
    chunks: Sequence[int] = DEFAULT_CHUNKS,
    options: LoweringOptions | None = None,
    weights: Sequence[str] = (),
) -> dict[str, tirx.PrimFunc]:
    """``{"sequential": f, "chunked 64": g, ...}``: the function of ``tensors`` (as for
    ``create_prim_func``), and, if any of its scans is linear, its chunked forms; the
    parameters named in ``weights`` layout-free in each (``scan_tir.transform.layout_free``)."""

    def lowered(graph: Sequence[te.Tensor]) -> tirx.PrimFunc:
        func = create_prim_func(list(graph), options=options)
        return layout_free(func, list(weights)) if weights else func

    forms = {SEQUENTIAL: lowered(tensors)}
    graph = analyse([t for t in tensors if isinstance(t, te.Tensor)])
    if not any(linear_problem(body) is None for body in graph.scans.values()):
        return forms
    for chunk in chunks:
        forms[f"chunked {chunk}"] = lowered(chunked(tensors, chunk))
    return forms


@dataclass(frozen=True)
class FormsResult:
    """Each form's best tuned latency (ms; NaN if no candidate ran) and that form
    scheduled by its best record; ``best`` labels the fastest."""

    latency_ms: dict[str, float]
    scheduled: dict[str, tirx.PrimFunc]
    best: str

    @property
    def fastest(self) -> tirx.PrimFunc:
        return self.scheduled[self.best]


def tune_forms(
    tensors: Sequence[te.Tensor],
    work_dir: str | Path,
    trials: int,
    *,
    target: Target | None = None,
    chunks: Sequence[int] = DEFAULT_CHUNKS,
    options: LoweringOptions | None = None,
    weights: Sequence[str] = (),
    population: int = 512,
) -> FormsResult:
    """Tune every form of ``tensors`` (:func:`linear_forms`) for ``trials`` trials each, in
    ``work_dir/<form>``, and keep the fastest. Records already there count, as for
    :func:`scan_tir.tune.tune`; ``options``, ``weights``: see :func:`linear_forms`."""
    target = target or default_target()
    work_dir = Path(work_dir)
    latency: dict[str, float] = {}
    scheduled: dict[str, tirx.PrimFunc] = {}
    for label, func in linear_forms(tensors, chunks, options, weights).items():
        mod = tvm.IRModule({"main": func})
        where = work_dir / label.replace(" ", "_")
        have = records_of(where, mod)
        if have < trials:
            tune_module(mod, where, trials - have, target, label=label, population=population)
        db = ms.database.JSONDatabase(work_dir=str(where))
        top = db.get_top_k(db.commit_workload(mod), 1)
        secs = [float(s) for s in top[0].run_secs] if top else []
        latency[label] = sum(secs) / len(secs) * 1e3 if secs else float("nan")
        log(f"{label}: best tuned {latency[label]:.3f} ms")
        if top:
            scheduled[label] = ms.tir_integration.compile_tir(db, mod, target).mod["main"]
    if not scheduled:
        raise RuntimeError(f"no form of the function has a candidate that ran ({work_dir})")
    best = min(scheduled, key=latency.get)
    return FormsResult(latency, scheduled, best)
