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
from .parts import load_weights, module_model, rnn_inputs


def build(seq: int, batch: int, input: int, hidden: int) -> list[te.Tensor]:
    xs = te.placeholder((seq, batch, input), name="Xs")
    wi = te.placeholder((4 * hidden, input), name="Wi")
    wh = te.placeholder((4 * hidden, hidden), name="Wh")
    bi = te.placeholder((4 * hidden,), name="Bi")
    bh = te.placeholder((4 * hidden,), name="Bh")
    hs, cs = topi.nn.lstm(xs, wi, wh, Bi=bi, Bh=bh)
    return [xs, wi, wh, bi, bh, hs, cs]


def inputs(rng: np.random.Generator, seq: int, batch: int, input: int, hidden: int) -> Arrays:
    return rnn_inputs(rng, seq, batch, input, hidden, gates=4)


def numpy(xs, wi, wh, bi, bh, **_sizes: int) -> Arrays:
    return list(lstm_python(xs, wi, wh, bi, bh))


def _weights(suffix: str, wi, wh, bi, bh) -> dict[str, np.ndarray]:
    """Our weights by a PyTorch LSTM module's parameter names (same gate order and shapes)."""
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    return {name + suffix: a for name, a in zip(names, (wi, wh, bi, bh))}


def torch_module(xs, wi, wh, bi, bh, **_sizes: int) -> object:
    """``nn.LSTM`` holding these weights, in eval mode."""
    import torch as th

    m = th.nn.LSTM(xs.shape[2], wh.shape[1])
    load_weights(m, _weights("_l0", wi, wh, bi, bh))
    return m.eval()


torch_model = module_model(torch_module)


def torch(xs, wi, wh, bi, bh, **_sizes: int) -> Arrays:
    """``nn.LSTM`` with these weights: hs from its output; cs is not exposed per step by
    PyTorch, so it is rebuilt from hs by one cell call per step."""
    import torch as th

    hidden = wh.shape[1]
    hs = torch_model(xs, wi, wh, bi, bh)()
    cell = th.nn.LSTMCell(xs.shape[2], hidden).eval()
    load_weights(cell, _weights("", wi, wh, bi, bh))
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
    torch_module=torch_module,
    layout_free=("Wi", "Wh"),
)
