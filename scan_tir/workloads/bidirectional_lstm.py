"""A bidirectional LSTM, PyTorch's ``nn.LSTM(bidirectional=True)``: two scans over the
same input, one forward and one that reads x[seq-1-t] at its step t.

Both directions are ``topi.nn.lstm`` (the reverse one with ``reverse=True``). The reverse
scan's step t holds the state after x[seq-1], ..., x[seq-1-t], which PyTorch reports at
position seq-1-t, so its hidden states are re-reversed in the concatenation.
Inputs: Xs (seq, batch, input); Wi, Wh, Bi, Bh as nn.LSTM's weight_ih_l0, weight_hh_l0,
bias_ih_l0, bias_hh_l0; Wi_reverse, ... as its weight_ih_l0_reverse, .... Output:
hs (seq, batch, 2 hidden), forward hidden states in [..., :hidden], reverse in the rest.
"""

from __future__ import annotations

import numpy as np
from tvm import te, topi
from tvm.topi.testing import lstm_python

from .base import Arrays, Recurrence
from .parts import load_weights, module_model

WEIGHTS = ("Wi", "Wh", "Bi", "Bh")
TORCH_NAMES = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
SUFFIXES = ("", "_reverse")


def build(seq: int, batch: int, input: int, hidden: int) -> list[te.Tensor]:
    xs = te.placeholder((seq, batch, input), name="Xs")
    shapes = ((4 * hidden, input), (4 * hidden, hidden), (4 * hidden,), (4 * hidden,))
    weights, directions = [], []
    for suffix in SUFFIXES:
        wi, wh, bi, bh = (te.placeholder(s, name=n + suffix) for n, s in zip(WEIGHTS, shapes))
        weights += [wi, wh, bi, bh]
        hs, _ = topi.nn.lstm(xs, wi, wh, Bi=bi, Bh=bh, reverse=bool(suffix))
        directions.append(hs)
    forward, backward = directions
    out = te.compute(
        (seq, batch, 2 * hidden),
        lambda t, b, j: te.if_then_else(
            j < hidden, forward[t, b, j], backward[seq - 1 - t, b, j - hidden]
        ),
        name="hidden_states",
    )
    return [xs, *weights, out]


def inputs(rng: np.random.Generator, seq: int, batch: int, input: int, hidden: int) -> Arrays:
    """PyTorch's initialisation, U(-1/sqrt(hidden), 1/sqrt(hidden)), and inputs in (-1, 1)."""
    k = 1.0 / np.sqrt(hidden)
    shapes = ((4 * hidden, input), (4 * hidden, hidden), (4 * hidden,), (4 * hidden,))
    weights = [rng.uniform(-k, k, shape) for _ in SUFFIXES for shape in shapes]
    return [rng.uniform(-1, 1, (seq, batch, input)), *weights]


def numpy(xs, *weights, **_sizes: int) -> Arrays:
    """``lstm_python`` forward, and on the time-reversed input, re-reversed."""
    forward, _ = lstm_python(xs, *weights[:4])
    backward, _ = lstm_python(xs[::-1], *weights[4:])
    return [np.concatenate((forward, backward[::-1]), axis=2)]


def torch_module(xs, *weights, hidden: int, **_sizes: int) -> object:
    """``nn.LSTM(bidirectional=True)`` holding these weights, in eval mode."""
    import torch as th

    m = th.nn.LSTM(xs.shape[2], hidden, bidirectional=True)
    names = [name + suffix for suffix in SUFFIXES for name in TORCH_NAMES]
    load_weights(m, dict(zip(names, weights)))
    return m.eval()


torch_model = module_model(torch_module)


def torch(xs, *weights, hidden: int, **_sizes: int) -> Arrays:
    """``nn.LSTM(bidirectional=True)``'s output with these weights."""
    return [torch_model(xs, *weights, hidden=hidden)().numpy()]


BILSTM = Recurrence(
    name="bilstm",
    summary="nn.LSTM(bidirectional=True), topi.nn.lstm each way: output hs (seq, batch, 2H)",
    sizes={"seq": 80, "batch": 1, "input": 512, "hidden": 256},
    build=build,
    inputs=inputs,
    numpy=numpy,
    torch=torch,
    torch_model=torch_model,
    torch_module=torch_module,
    layout_free=("Wi", "Wh", "Wi_reverse", "Wh_reverse"),
)
