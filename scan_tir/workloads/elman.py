"""The Elman RNN of PyTorch's ``nn.RNN``: h' = act(Wi x + Bi + Wh h + Bh), act tanh or ReLU.

Two recurrences, ``rnn_tanh`` and ``rnn_relu`` (``nonlinearity='tanh'|'relu'``); weights as
``nn.RNN``'s weight_ih_l0 (Wi, (hidden, input)), weight_hh_l0 (Wh, (hidden, hidden)),
bias_ih_l0 (Bi) and bias_hh_l0 (Bh). The input projection is hoisted out of the scan.
Xs (seq, batch, input) -> hs (seq, batch, hidden).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from tvm import te, tirx

from ..lower.te_scan import scan
from .base import Arrays, Recurrence
from .parts import (
    drop_init,
    input_projection,
    load_weights,
    module_model,
    recurrent_projection,
    rnn_inputs,
)

ACTIVATIONS: dict[str, tuple[Callable, Callable]] = {
    "tanh": (te.tanh, np.tanh),
    "relu": (lambda x: tirx.max(x, tirx.const(0.0, "float32")), lambda x: np.maximum(x, 0.0)),
}


def _build(nonlinearity: str) -> Callable[..., list[te.Tensor]]:
    act = ACTIVATIONS[nonlinearity][0]

    def build(seq: int, batch: int, input: int, hidden: int) -> list[te.Tensor]:
        xs = te.placeholder((seq, batch, input), name="Xs")
        wi = te.placeholder((hidden, input), name="Wi")
        wh = te.placeholder((hidden, hidden), name="Wh")
        bi = te.placeholder((hidden,), name="Bi")
        bh = te.placeholder((hidden,), name="Bh")
        xw = input_projection(xs, wi, bi, "xw")
        h = te.placeholder((seq + 1, batch, hidden), name="h")
        h0 = te.compute((1, batch, hidden), lambda *_: te.const(0.0, "float32"), name="h0")
        hw = recurrent_projection(h, wh, bh, "hw")
        h_new = te.compute(
            (seq + 1, batch, hidden),
            lambda t, b, j: act(xw[t - 1, b, j] + hw[t, b, j]),
            name="h_new",
        )
        hs = drop_init(scan(h0, h_new, h, name=f"rnn_{nonlinearity}_scan"), "hidden_states")
        return [xs, wi, wh, bi, bh, hs]

    return build


def inputs(rng: np.random.Generator, seq: int, batch: int, input: int, hidden: int) -> Arrays:
    return rnn_inputs(rng, seq, batch, input, hidden, gates=1)


def _numpy(nonlinearity: str) -> Callable[..., Arrays]:
    act = ACTIVATIONS[nonlinearity][1]

    def numpy(xs, wi, wh, bi, bh, **_sizes: int) -> Arrays:
        """The recurrence step by step in float64."""
        xw = xs.astype("float64") @ wi.T.astype("float64") + bi
        wht = wh.T.astype("float64")
        h = np.zeros((xs.shape[1], wh.shape[0]))
        hs = []
        for t in range(xs.shape[0]):
            h = act(xw[t] + h @ wht + bh)
            hs.append(h)
        return [np.stack(hs)]

    return numpy


def _torch_module(nonlinearity: str) -> Callable[..., object]:
    def torch_module(xs, wi, wh, bi, bh, **_sizes: int) -> object:
        """``nn.RNN`` holding these weights, in eval mode."""
        import torch as th

        m = th.nn.RNN(xs.shape[2], wh.shape[0], nonlinearity=nonlinearity)
        weights = {"weight_ih_l0": wi, "weight_hh_l0": wh, "bias_ih_l0": bi, "bias_hh_l0": bh}
        load_weights(m, weights)
        return m.eval()

    return torch_module


def _torch(torch_model: Callable[..., Callable[[], object]]) -> Callable[..., Arrays]:
    def torch(xs, wi, wh, bi, bh, **_sizes: int) -> Arrays:
        """``nn.RNN``'s output with these weights: every step's hidden state."""
        return [torch_model(xs, wi, wh, bi, bh)().numpy()]

    return torch


def _recurrence(nonlinearity: str) -> Recurrence:
    torch_module = _torch_module(nonlinearity)
    torch_model = module_model(torch_module)
    return Recurrence(
        name=f"rnn_{nonlinearity}",
        summary=f"nn.RNN(nonlinearity='{nonlinearity}'), input projection hoisted: output hs",
        sizes={"seq": 80, "batch": 1, "input": 512, "hidden": 256},
        build=_build(nonlinearity),
        inputs=inputs,
        numpy=_numpy(nonlinearity),
        torch=_torch(torch_model),
        torch_model=torch_model,
        torch_module=torch_module,
        layout_free=("Wi", "Wh"),
    )


RNN_TANH = _recurrence("tanh")
RNN_RELU = _recurrence("relu")
