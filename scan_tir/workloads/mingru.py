"""minGRU (Feng et al. 2024, "Were RNNs All We Needed?"): a GRU whose gates do not read
the state, so the recurrence left is linear and elementwise:

    z_t = sigmoid(Wz x_t + Bz),  h~_t = Wh x_t + Bh,  h_t = (1 - z_t) * h_{t-1} + z_t * h~_t

with h_0 = 0. Both projections are computed for every step before the scan (as the paper's
parallel mode does); the scan's step is then hidden-sized elementwise work, no product.
Shapes: Xs (seq, batch, input), Wz and Wh (hidden, input), Bz and Bh (hidden,); output hs
(seq, batch, hidden). PyTorch has no module for it: ``torch`` and ``torch_model`` run the
sequential mode, a loop.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from tvm import te

from ..lower.te_scan import scan
from .base import Arrays, Recurrence
from .parts import drop_init, input_projection, sigmoid


def build(seq: int, batch: int, input: int, hidden: int) -> list[te.Tensor]:
    xs = te.placeholder((seq, batch, input), name="Xs")
    wz = te.placeholder((hidden, input), name="Wz")
    wh = te.placeholder((hidden, input), name="Wh")
    bz = te.placeholder((hidden,), name="Bz")
    bh = te.placeholder((hidden,), name="Bh")
    zx = input_projection(xs, wz, bz, "zx")
    z = te.compute(zx.shape, lambda *i: te.sigmoid(zx(*i)), name="z")
    candidate = input_projection(xs, wh, bh, "candidate")
    h = te.placeholder((seq + 1, batch, hidden), name="h")
    h0 = te.compute((1, batch, hidden), lambda *_: te.const(0.0, "float32"), name="h0")
    h_new = te.compute(
        (seq + 1, batch, hidden),
        lambda t, b, j: (
            (1.0 - z[t - 1, b, j]) * h[t - 1, b, j] + z[t - 1, b, j] * candidate[t - 1, b, j]
        ),
        name="h_new",
    )
    hs = drop_init(scan(h0, h_new, h, name="mingru_scan"), "hidden_states")
    return [xs, wz, wh, bz, bh, hs]


def inputs(rng: np.random.Generator, seq: int, batch: int, input: int, hidden: int) -> Arrays:
    """nn.Linear's initialisation, U(-1/sqrt(input), 1/sqrt(input)), and inputs in (-1, 1)."""
    k = 1.0 / np.sqrt(input)
    return [
        rng.uniform(-1, 1, (seq, batch, input)),
        rng.uniform(-k, k, (hidden, input)),
        rng.uniform(-k, k, (hidden, input)),
        rng.uniform(-k, k, (hidden,)),
        rng.uniform(-k, k, (hidden,)),
    ]


def numpy(xs, wz, wh, bz, bh, **_sizes: int) -> Arrays:
    """The sequential mode in float64."""
    xs = xs.astype("float64")
    z = sigmoid(xs @ wz.T + bz)
    candidate = xs @ wh.T + bh
    h = np.zeros(candidate.shape[1:])
    hs = []
    for t in range(xs.shape[0]):
        h = (1 - z[t]) * h + z[t] * candidate[t]
        hs.append(h)
    return [np.stack(hs)]


def torch_model(xs, wz, wh, bz, bh, **_sizes: int) -> Callable[[], object]:
    """The sequential mode in PyTorch (float32), a loop over time after the two projections;
    the returned call computes hs."""
    import torch as th

    xs, wz, wh, bz, bh = (th.from_numpy(np.asarray(v, "float32")) for v in (xs, wz, wh, bz, bh))

    def call():
        z = th.sigmoid(th.nn.functional.linear(xs, wz, bz))
        candidate = th.nn.functional.linear(xs, wh, bh)
        h = th.zeros(candidate.shape[1:])
        hs = []
        for t in range(xs.shape[0]):
            h = (1 - z[t]) * h + z[t] * candidate[t]
            hs.append(h)
        return th.stack(hs)

    return call


def torch(xs, wz, wh, bz, bh, **_sizes: int) -> Arrays:
    """The PyTorch loop's hs."""
    return [torch_model(xs, wz, wh, bz, bh)().numpy()]


MINGRU = Recurrence(
    name="mingru",
    summary="minGRU (Feng et al. 2024), projections hoisted: output hs",
    sizes={"seq": 1024, "batch": 1, "input": 768, "hidden": 768},
    build=build,
    inputs=inputs,
    numpy=numpy,
    torch=torch,
    torch_model=torch_model,
    layout_free=("Wz", "Wh"),
)
