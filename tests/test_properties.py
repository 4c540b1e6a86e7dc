"""Property-based: random linear and nonlinear recurrences (orders 1-3, 1-3 states, random
shapes, dense and elementwise terms, chains of body ops, reads of another state's fresh
value) lowered by scan_tir and compared with a numpy loop built from the same draw."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tvm import te
from util import lower_and_build, run

import scan_tir


@dataclass(frozen=True)
class Term:
    kind: str  # "elem": c*s_i[t-lag, col % d_i]; "dense": c*(s_i[t-lag] @ W); "fresh": c*u_i[t]
    src: int
    lag: int
    coef: float


@dataclass(frozen=True)
class Recurrence:
    dims: tuple[int, ...]
    order: int
    x_dim: int
    x_lag: int
    terms: tuple[tuple[Term, ...], ...]  # per state
    chain: tuple[int, ...]  # elementwise body ops between the sum and the update, per state
    activation: str  # "linear", "tanh" or "sigmoid"
    length: int
    symbolic: bool


@st.composite
def recurrences(draw) -> Recurrence:
    n = draw(st.integers(1, 3))
    order = draw(st.integers(1, 3))
    dims = tuple(draw(st.integers(1, 5)) for _ in range(n))
    terms = []
    for j in range(n):
        kinds = ["elem", "dense"] + (["fresh"] if j > 0 else [])
        count = draw(st.integers(1, 3))
        raw = [
            (
                draw(st.sampled_from(kinds)),
                draw(st.integers(0, n - 1)),
                draw(st.integers(1, order)),
                draw(st.floats(-1, 1, allow_nan=False).filter(lambda c: abs(c) > 0.05)),
            )
            for _ in range(count)
        ]
        if j == 0:  # make sure the drawn order is really used
            kind, src, _, coef = raw[0]
            raw[0] = ("elem" if kind == "fresh" else kind, src, order, coef)
        # Scale so that the recurrence is a contraction and values stay bounded.
        total = sum(abs(c) for *_, c in raw) / 0.9
        terms.append(
            tuple(
                Term(kind, src % j if kind == "fresh" else src, lag, coef / total)
                for kind, src, lag, coef in raw
            )
        )
    return Recurrence(
        dims=dims,
        order=order,
        x_dim=draw(st.integers(1, 4)),
        x_lag=draw(st.integers(0, order)),
        terms=tuple(terms),
        chain=tuple(draw(st.integers(0, 2)) for _ in range(n)),
        activation=draw(st.sampled_from(["linear", "tanh", "sigmoid"])),
        length=draw(st.integers(order, 40)),
        symbolic=draw(st.booleans()),
    )


_ACT = {
    "linear": (lambda e: e, lambda a: a),
    "tanh": (te.tanh, np.tanh),
    "sigmoid": (te.sigmoid, lambda a: 1 / (1 + np.exp(-a))),
}


def _term_expr(rec: Recurrence, j: int, q: int, term: Term, states, updates, weights):
    """The term's value as a function of (t, col), making its dense compute if it has one."""
    length, dj, di = states[j].shape[0], rec.dims[j], rec.dims[term.src]
    src, lag, coef = states[term.src], term.lag, term.coef
    if term.kind == "dense":
        w = weights[(j, q)] = te.placeholder((di, dj), name=f"W{j}_{q}")
        r = te.reduce_axis((0, di), name=f"r{j}_{q}")
        dense = te.compute(
            (length, dj), lambda t, c: te.sum(src[t - lag, r] * w[r, c], axis=r), name=f"d{j}_{q}"
        )
        return lambda t, c: dense[t, c] * coef
    if term.kind == "elem":
        return lambda t, c: src[t - lag, c % di] * coef
    fresh = updates[term.src]
    return lambda t, c: fresh[t, c % di] * coef


def _chain_op(value, j: int, step: int):
    return te.compute(value.shape, lambda t, c: value[t, c] * 0.75 + 0.1, name=f"chain{j}_{step}")


def build_te(rec: Recurrence):
    length = te.var("seq") if rec.symbolic else rec.length
    x = te.placeholder((length, rec.x_dim), name="X")
    states = [te.placeholder((length, d), name=f"s{j}") for j, d in enumerate(rec.dims)]
    inits = [te.placeholder((rec.order, d), name=f"init{j}") for j, d in enumerate(rec.dims)]
    weights: dict = {}
    updates: list = []
    act = _ACT[rec.activation][0]
    for j, dj in enumerate(rec.dims):
        parts = [
            _term_expr(rec, j, q, term, states, updates, weights)
            for q, term in enumerate(rec.terms[j])
        ]
        parts.append(lambda t, c: x[t - rec.x_lag, c % rec.x_dim] * 0.5)
        value = _sum_op(parts, (length, dj), f"pre{j}")
        for step in range(rec.chain[j]):
            value = _chain_op(value, j, step)
        updates.append(_activate(value, act, f"u{j}"))
    outs = scan_tir.scan(inits, updates, states, name="rec")
    outs = [outs] if isinstance(outs, te.Tensor) else outs
    return [x, *inits, *weights.values()], outs, list(weights)


def _sum_op(parts, shape, name):
    return te.compute(shape, lambda t, c: sum(p(t, c) for p in parts), name=name)


def _activate(value, act, name):
    return te.compute(value.shape, lambda t, c: act(value[t, c]), name=name)


def numpy_ref(rec: Recurrence, length, xv, init_vals, weight_vals):
    act = _ACT[rec.activation][1]
    s = [np.zeros((length, d)) for d in rec.dims]
    for j in range(len(rec.dims)):
        s[j][: rec.order] = init_vals[j]
    for t in range(rec.order, length):
        for j, dj in enumerate(rec.dims):
            cols = np.arange(dj)
            acc = np.zeros(dj)
            for q, term in enumerate(rec.terms[j]):
                di = rec.dims[term.src]
                if term.kind == "dense":
                    acc += (s[term.src][t - term.lag] @ weight_vals[(j, q)]) * term.coef
                elif term.kind == "elem":
                    acc += s[term.src][t - term.lag][cols % di] * term.coef
                else:
                    acc += s[term.src][t][cols % di] * term.coef
            acc += xv[t - rec.x_lag][cols % rec.x_dim] * 0.5
            for _ in range(rec.chain[j]):
                acc = acc * 0.75 + 0.1
            s[j][t] = act(acc)
    return s


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rec=recurrences(), seed=st.integers(0, 2**31 - 1))
def test_random_recurrence_matches_numpy(rec: Recurrence, seed: int):
    rng = np.random.default_rng(seed)
    ins, outs, weight_keys = build_te(rec)
    _, lib = lower_and_build([*ins, *outs])
    lengths = [rec.length] + ([rec.order, 1500] if rec.symbolic else [])
    for length in lengths:
        xv = rng.standard_normal((length, rec.x_dim)).astype("float32")
        init_vals = [rng.standard_normal((rec.order, d)).astype("float32") for d in rec.dims]
        weight_vals = {}
        for j, q in weight_keys:
            di = rec.dims[rec.terms[j][q].src]
            w = rng.uniform(-1, 1, (di, rec.dims[j])) / di
            weight_vals[(j, q)] = w.astype("float32")
        got = run(
            lib,
            [xv, *init_vals, *weight_vals.values()],
            [(length, d) for d in rec.dims],
        )
        ref = numpy_ref(rec, length, xv, init_vals, weight_vals)
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)
