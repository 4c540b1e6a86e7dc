"""A multi-layer LSTM, PyTorch's ``nn.LSTM(num_layers=layers)``: layer l's scan consumes
layer l-1's hidden states, so the zoo has one scan per layer, in a chain.

Each layer is ``topi.nn.lstm`` (i, f, g, o gates, input projection hoisted out of its scan).
Inputs: Xs (seq, batch, input), then per layer l the weights Wi<l> (4 hidden, input for
l = 0, else hidden), Wh<l> (4 hidden, hidden), Bi<l> and Bh<l> (4 hidden,), which are
nn.LSTM's weight_ih_l<l>, weight_hh_l<l>, bias_ih_l<l> and bias_hh_l<l>. Outputs, as
``nn.LSTM`` returns them: hs (seq, batch, hidden), the last layer's hidden state at every
step, then h_n and c_n (layers, batch, hidden), every layer's hidden and cell state after
the last step.
"""

from __future__ import annotations

import numpy as np
from tvm import te, tirx, topi
from tvm.topi.testing import lstm_python

from .base import Arrays, Recurrence
from .parts import load_weights, module_model

WEIGHTS = ("Wi", "Wh", "Bi", "Bh")
TORCH_NAMES = ("weight_ih_l", "weight_hh_l", "bias_ih_l", "bias_hh_l")


def _final(per_layer: list[te.Tensor], name: str) -> te.Tensor:
    """(layers, batch, hidden): layer l's row is ``per_layer[l]`` at the last step."""
    last = per_layer[0].shape[0] - 1

    def pick(layer, b, j):
        value = per_layer[-1][last, b, j]
        for index in range(len(per_layer) - 2, -1, -1):
            value = tirx.Select(layer == index, per_layer[index][last, b, j], value)
        return value

    return te.compute((len(per_layer), *per_layer[0].shape[1:]), pick, name=name)


def layout_free_weights(layers: int, **_sizes: int) -> tuple[str, ...]:
    """Every layer's Wi and Wh."""
    return tuple(f"{name}{layer}" for layer in range(layers) for name in WEIGHTS[:2])


def build(seq: int, batch: int, input: int, hidden: int, layers: int) -> list[te.Tensor]:
    xs = te.placeholder((seq, batch, input), name="Xs")
    weights, hs, cs = [], [], []
    layer_input = xs
    for layer in range(layers):
        in_dim = input if layer == 0 else hidden
        shapes = ((4 * hidden, in_dim), (4 * hidden, hidden), (4 * hidden,), (4 * hidden,))
        wi, wh, bi, bh = (
            te.placeholder(shape, name=f"{name}{layer}") for name, shape in zip(WEIGHTS, shapes)
        )
        weights += [wi, wh, bi, bh]
        h, c = topi.nn.lstm(layer_input, wi, wh, Bi=bi, Bh=bh)
        hs.append(h)
        cs.append(c)
        layer_input = h
    return [xs, *weights, hs[-1], _final(hs, "h_n"), _final(cs, "c_n")]


def inputs(
    rng: np.random.Generator, seq: int, batch: int, input: int, hidden: int, layers: int
) -> Arrays:
    """PyTorch's initialisation, U(-1/sqrt(hidden), 1/sqrt(hidden)), and inputs in (-1, 1)."""
    k = 1.0 / np.sqrt(hidden)
    arrays = [rng.uniform(-1, 1, (seq, batch, input))]
    for layer in range(layers):
        in_dim = input if layer == 0 else hidden
        for shape in ((4 * hidden, in_dim), (4 * hidden, hidden), (4 * hidden,), (4 * hidden,)):
            arrays.append(rng.uniform(-k, k, shape))
    return arrays


def numpy(xs, *weights, **_sizes: int) -> Arrays:
    """``lstm_python`` layer after layer."""
    h_n, c_n = [], []
    for layer in range(len(weights) // 4):
        hs, cs = lstm_python(xs, *weights[4 * layer : 4 * layer + 4])
        h_n.append(hs[-1])
        c_n.append(cs[-1])
        xs = hs
    return [xs, np.stack(h_n), np.stack(c_n)]


def torch_module(xs, *weights, hidden: int, layers: int, **_sizes: int) -> object:
    """``nn.LSTM(num_layers=layers)`` holding these weights, in eval mode."""
    import torch as th

    m = th.nn.LSTM(xs.shape[2], hidden, num_layers=layers)
    names = [f"{name}{layer}" for layer in range(layers) for name in TORCH_NAMES]
    load_weights(m, dict(zip(names, weights)))
    return m.eval()


torch_model = module_model(torch_module)


def torch(xs, *weights, hidden: int, layers: int, **_sizes: int) -> Arrays:
    """``nn.LSTM(num_layers=layers)`` with these weights: output, h_n, c_n."""
    import torch as th

    m = torch_module(xs, *weights, hidden=hidden, layers=layers)
    with th.no_grad():
        out, (h_n, c_n) = m(th.from_numpy(np.asarray(xs, "float32")))
    return [out.numpy(), h_n.numpy(), c_n.numpy()]


LSTM_STACKED = Recurrence(
    name="lstm_stacked",
    summary="nn.LSTM(num_layers=layers), topi.nn.lstm per layer: outputs hs, h_n, c_n",
    sizes={"seq": 80, "batch": 1, "input": 512, "hidden": 256, "layers": 2},
    build=build,
    inputs=inputs,
    numpy=numpy,
    torch=torch,
    torch_model=torch_model,
    torch_module=torch_module,
    layout_free=layout_free_weights,
)
