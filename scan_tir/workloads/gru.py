"""A GRU with PyTorch's ``nn.GRU`` conventions, so its weights load unchanged into it.

Gates r, z, n, stacked in that order in Wi (3 hidden, input) and Wh (3 hidden, hidden), with
biases Bi and Bh (3 hidden,); the reset gate scales the recurrent part of n *after* its bias,
n = tanh(Wi_n x + Bi_n + r * (Wh_n h + Bh_n)), which is why Bh cannot be folded into Bi.
As in topi's LSTM, the input projection (and Bi) is one compute over all steps before the
scan: only Wh's product is recurrent, one product of the three gates' rows per step, laid
out (batch, gate, hidden) so that the gate math can be fused into its tiles.
Xs (seq, batch, input) -> hs (seq, batch, hidden).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from tvm import te

from ..lower.te_scan import scan
from .base import Arrays, Recurrence
from .parts import (
    drop_init,
    input_projection,
    load_weights,
    module_model,
    recurrent_projection,
    rnn_inputs,
    sigmoid,
)


def step(
    xw: te.Tensor, h: te.Tensor, wh: te.Tensor, bh: te.Tensor, x_row: Callable = lambda t: t - 1
) -> te.Tensor:
    """h' of ``nn.GRU`` for every step t of a scan over state ``h`` (index 0 the init row),
    input projection ``xw`` (its row ``x_row(t)`` at step t: reversed, for a reverse layer)."""
    hidden = h.shape[2]
    hw = recurrent_projection(h, wh, bh, "hw", gates=3)

    def gate(t, b, j, g):
        """Gate g's pre-activation, input and recurrent parts summed (r: 0, z: 1)."""
        return xw[x_row(t), b, g * hidden + j] + hw[t, b, g, j]

    shape = h.shape
    r = te.compute(shape, lambda t, b, j: te.sigmoid(gate(t, b, j, 0)), name="r")
    z = te.compute(shape, lambda t, b, j: te.sigmoid(gate(t, b, j, 1)), name="z")
    n = te.compute(
        shape,
        lambda t, b, j: te.tanh(xw[x_row(t), b, 2 * hidden + j] + r[t, b, j] * hw[t, b, 2, j]),
        name="n",
    )
    return te.compute(
        shape,
        lambda t, b, j: (1.0 - z[t, b, j]) * n[t, b, j] + z[t, b, j] * h[t - 1, b, j],
        name="h_new",
    )


def build(seq: int, batch: int, input: int, hidden: int) -> list[te.Tensor]:
    xs = te.placeholder((seq, batch, input), name="Xs")
    wi = te.placeholder((3 * hidden, input), name="Wi")
    wh = te.placeholder((3 * hidden, hidden), name="Wh")
    bi = te.placeholder((3 * hidden,), name="Bi")
    bh = te.placeholder((3 * hidden,), name="Bh")
    xw = input_projection(xs, wi, bi, "xw")
    h = te.placeholder((seq + 1, batch, hidden), name="h")
    h0 = te.compute((1, batch, hidden), lambda *_: te.const(0.0, "float32"), name="h0")
    hs = drop_init(scan(h0, step(xw, h, wh, bh), h, name="gru_scan"), "hidden_states")
    return [xs, wi, wh, bi, bh, hs]


def inputs(rng: np.random.Generator, seq: int, batch: int, input: int, hidden: int) -> Arrays:
    return rnn_inputs(rng, seq, batch, input, hidden, gates=3)


def numpy(xs, wi, wh, bi, bh, **_sizes: int) -> Arrays:
    """The GRU step by step in float64 (the formulas of ``nn.GRU``'s documentation)."""
    xw = xs.astype("float64") @ wi.T.astype("float64") + bi
    hidden = wh.shape[1]
    wht = wh.T.astype("float64")
    h = np.zeros((xs.shape[1], hidden))
    hs = []
    for t in range(xs.shape[0]):
        hw = h @ wht + bh
        r, z, n = (slice(g * hidden, (g + 1) * hidden) for g in range(3))
        rt = sigmoid(xw[t, :, r] + hw[:, r])
        zt = sigmoid(xw[t, :, z] + hw[:, z])
        nt = np.tanh(xw[t, :, n] + rt * hw[:, n])
        h = (1 - zt) * nt + zt * h
        hs.append(h)
    return [np.stack(hs)]


def torch_module(xs, wi, wh, bi, bh, **_sizes: int) -> object:
    """``nn.GRU`` holding these weights, in eval mode."""
    import torch as th

    m = th.nn.GRU(xs.shape[2], wh.shape[1])
    load_weights(m, {"weight_ih_l0": wi, "weight_hh_l0": wh, "bias_ih_l0": bi, "bias_hh_l0": bh})
    return m.eval()


torch_model = module_model(torch_module)


def torch(xs, wi, wh, bi, bh, **_sizes: int) -> Arrays:
    """``nn.GRU``'s output with these weights: every step's hidden state."""
    return [torch_model(xs, wi, wh, bi, bh)().numpy()]


GRU = Recurrence(
    name="gru",
    summary="nn.GRU (gates r, z, n), input projection hoisted: output hs",
    sizes={"seq": 80, "batch": 1, "input": 512, "hidden": 256},
    build=build,
    inputs=inputs,
    numpy=numpy,
    torch=torch,
    torch_model=torch_model,
    torch_module=torch_module,
    layout_free=("Wi", "Wh"),
)
