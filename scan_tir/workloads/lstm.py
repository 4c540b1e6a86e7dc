"""The LSTM of ``tvm.topi.nn.lstm`` (PyTorch's i, f, g, o gate order, so weights load
unchanged into ``torch.nn.LSTM``).

Shapes: Xs (seq, batch, input), Wi (4 hidden, input), Wh (4 hidden, hidden), Bi and Bh
(4 hidden,); outputs hs and cs (seq, batch, hidden), the hidden and cell state of every step.
"""

from __future__ import annotations

import numpy as np
from tvm import te, topi
from tvm.topi.testing import lstm_python

from .base import Arrays, Recurrence


def build(seq: int, batch: int, input: int, hidden: int) -> list[te.Tensor]:
    xs = te.placeholder((seq, batch, input), name="Xs")
    wi = te.placeholder((4 * hidden, input), name="Wi")
    wh = te.placeholder((4 * hidden, hidden), name="Wh")
    bi = te.placeholder((4 * hidden,), name="Bi")
    bh = te.placeholder((4 * hidden,), name="Bh")
    hs, cs = topi.nn.lstm(xs, wi, wh, Bi=bi, Bh=bh)
    return [xs, wi, wh, bi, bh, hs, cs]


def inputs(rng: np.random.Generator, seq: int, batch: int, input: int, hidden: int) -> Arrays:
    """PyTorch's initialisation, U(-1/sqrt(hidden), 1/sqrt(hidden)), and inputs in (-1, 1)."""
    k = 1.0 / np.sqrt(hidden)
    return [
        rng.uniform(-1, 1, (seq, batch, input)),
        rng.uniform(-k, k, (4 * hidden, input)),
        rng.uniform(-k, k, (4 * hidden, hidden)),
        rng.uniform(-k, k, (4 * hidden,)),
        rng.uniform(-k, k, (4 * hidden,)),
    ]


def numpy(xs, wi, wh, bi, bh, **_sizes: int) -> Arrays:
    return list(lstm_python(xs, wi, wh, bi, bh))


def _load(module, suffix: str, wi, wh, bi, bh) -> None:
    """Copy our weights into a PyTorch LSTM module (same gate order, same shapes)."""
    import torch as th

    with th.no_grad():
        for name, a in (("weight_ih", wi), ("weight_hh", wh), ("bias_ih", bi), ("bias_hh", bh)):
            getattr(module, name + suffix).copy_(th.from_numpy(np.asarray(a, "float32")))


def torch_model(xs, wi, wh, bi, bh, **_sizes: int):
    """``nn.LSTM`` eager, weights loaded; the returned call computes hs."""
    import torch as th

    m = th.nn.LSTM(xs.shape[2], wh.shape[1]).eval()
    _load(m, "_l0", wi, wh, bi, bh)
    x = th.from_numpy(np.asarray(xs, "float32"))

    def call():
        with th.no_grad():
            return m(x)[0]

    return call


def torch(xs, wi, wh, bi, bh, **_sizes: int) -> Arrays:
    """``nn.LSTM`` with these weights: hs from its output; cs is not exposed per step by
    PyTorch, so it is rebuilt from hs by one cell call per step."""
    import torch as th

    hidden = wh.shape[1]
    hs = torch_model(xs, wi, wh, bi, bh)()
    cell = th.nn.LSTMCell(xs.shape[2], hidden).eval()
    _load(cell, "", wi, wh, bi, bh)
    with th.no_grad():
        h = th.zeros(xs.shape[1], hidden)
        c = th.zeros(xs.shape[1], hidden)
        cs = []
        for t in range(xs.shape[0]):
            h, c = cell(th.from_numpy(np.asarray(xs[t], "float32")), (h, c))
            cs.append(c)
        return [hs.numpy(), th.stack(cs).numpy()]


LSTM = Recurrence(
    name="lstm",
    summary="topi.nn.lstm with biases: outputs hs, cs",
    sizes={"seq": 80, "batch": 1, "input": 512, "hidden": 256},
    build=build,
    inputs=inputs,
    numpy=numpy,
    torch=torch,
    torch_model=torch_model,
    layout_free=("Wi", "Wh"),
)
