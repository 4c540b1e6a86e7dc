"""Mamba's selective scan (Gu and Dao 2023), the diagonal recurrence of its S6 layer:

    h_t = exp(delta_t A) * h_{t-1} + (delta_t B_t) x_t,    y_t = C_t . h_t + D x_t

per batch row b and channel d, with state h_t[b, d] of d_state entries (h_0 = 0). Shapes:
x and delta (seq, batch, d_model), delta > 0 (a softplus in Mamba); A (d_model, d_state),
negative, so the state decays; B and C (seq, batch, d_state), the "selective" (input
dependent) parameters; D (d_model,). Output y (seq, batch, d_model).

The scan has two states: h (seq + 1, batch, d_model, d_state) and y (seq + 1, batch,
d_model), y's update reading the step's new h, so y_t is contracted while h_t is hot in
cache rather than by a pass over every step's h afterwards. The discretised exp(delta A)
and delta B x are computed inside the step, as Mamba's fused kernel does, not materialised
over all steps (each would be as large as the state buffer). PyTorch has no module for it:
``torch`` and ``torch_model`` run a plain loop over time, the shape of Mamba's
``selective_scan_ref``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from tvm import te

from ..lower.te_scan import scan
from .base import Arrays, Recurrence
from .parts import drop_init


def build(seq: int, batch: int, d_model: int, d_state: int) -> list[te.Tensor]:
    x = te.placeholder((seq, batch, d_model), name="x")
    delta = te.placeholder((seq, batch, d_model), name="delta")
    a = te.placeholder((d_model, d_state), name="A")
    b_ = te.placeholder((seq, batch, d_state), name="B")
    c = te.placeholder((seq, batch, d_state), name="C")
    d_ = te.placeholder((d_model,), name="D")
    h = te.placeholder((seq + 1, batch, d_model, d_state), name="h")
    y = te.placeholder((seq + 1, batch, d_model), name="y")
    zero = te.const(0.0, "float32")
    h0 = te.compute((1, batch, d_model, d_state), lambda *_: zero, name="h0")
    y0 = te.compute((1, batch, d_model), lambda *_: zero, name="y0")
    h_new = te.compute(
        (seq + 1, batch, d_model, d_state),
        lambda t, b, d, n: (
            te.exp(delta[t - 1, b, d] * a[d, n]) * h[t - 1, b, d, n]
            + delta[t - 1, b, d] * b_[t - 1, b, n] * x[t - 1, b, d]
        ),
        name="h_new",
    )
    n = te.reduce_axis((0, d_state), name="n")
    ch = te.compute(
        (seq + 1, batch, d_model),
        lambda t, b, d: te.sum(c[t - 1, b, n] * h_new[t, b, d, n], axis=n),
        name="ch",
    )
    y_new = te.compute(
        (seq + 1, batch, d_model),
        lambda t, b, d: ch[t, b, d] + d_[d] * x[t - 1, b, d],
        name="y_new",
    )
    _, ys = scan([h0, y0], [h_new, y_new], [h, y], name="selective_scan")
    return [x, delta, a, b_, c, d_, drop_init(ys, "outputs")]


def inputs(rng: np.random.Generator, seq: int, batch: int, d_model: int, d_state: int) -> Arrays:
    """x, B, C standard normal; delta = softplus(N(-1, 0.5)), about 0.1 to 0.8; A negative,
    -U(0.5, d_state) as Mamba's S4D-real initialisation -(1..d_state); D in (-1, 1)."""
    return [
        rng.standard_normal((seq, batch, d_model)),
        np.log1p(np.exp(rng.normal(-1.0, 0.5, (seq, batch, d_model)))),
        -rng.uniform(0.5, d_state, (d_model, d_state)),
        rng.standard_normal((seq, batch, d_state)),
        rng.standard_normal((seq, batch, d_state)),
        rng.uniform(-1, 1, (d_model,)),
    ]


def numpy(x, delta, a, b, c, d, **_sizes: int) -> Arrays:
    """The recurrence step by step in float64."""
    h = np.zeros((*x.shape[1:], a.shape[1]))
    ys = []
    for t in range(x.shape[0]):
        dt = delta[t].astype("float64")[..., None]
        h = np.exp(dt * a) * h + dt * b[t][:, None, :] * x[t][..., None]
        ys.append(np.einsum("bn,bdn->bd", c[t], h) + d * x[t])
    return [np.stack(ys)]


def torch_model(x, delta, a, b, c, d, **_sizes: int) -> Callable[[], object]:
    """The recurrence as a PyTorch loop over time (float32; PyTorch has no selective-scan
    module); the returned call computes y."""
    import torch as th

    x, delta, a, b, c, d = (th.from_numpy(np.asarray(v, "float32")) for v in (x, delta, a, b, c, d))

    def call():
        h = th.zeros(*x.shape[1:], a.shape[1])
        ys = []
        for t in range(x.shape[0]):
            dt = delta[t].unsqueeze(-1)
            h = th.exp(dt * a) * h + dt * b[t].unsqueeze(1) * x[t].unsqueeze(-1)
            ys.append(th.einsum("bn,bdn->bd", c[t], h) + d * x[t])
        return th.stack(ys)

    return call


def torch(x, delta, a, b, c, d, **_sizes: int) -> Arrays:
    """The PyTorch loop's y."""
    return [torch_model(x, delta, a, b, c, d)().numpy()]


SELECTIVE_SCAN = Recurrence(
    name="selective_scan",
    summary="Mamba's diagonal selective scan (S6): states h and y, output y",
    sizes={"seq": 1024, "batch": 1, "d_model": 768, "d_state": 16},
    build=build,
    inputs=inputs,
    numpy=numpy,
    torch=torch,
    torch_model=torch_model,
)
