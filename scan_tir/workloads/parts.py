"""TE, numpy and PyTorch pieces the zoo's recurrences share.

The input projection of an RNN layer does not depend on the state, so, as topi's LSTM does,
it is one compute over all steps before the scan (a GEMM MetaSchedule tiles as such); only
the recurrent product stays inside the scan's step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from tvm import te


def input_projection(xs: te.Tensor, wi: te.Tensor, bi: te.Tensor, name: str) -> te.Tensor:
    """``xs @ wi.T + bi`` over every step at once: (seq, batch, rows of wi)."""
    k = te.reduce_axis((0, xs.shape[2]), name="k")
    shape = (xs.shape[0], xs.shape[1], wi.shape[0])
    xw = te.compute(
        shape, lambda t, b, j: te.sum(xs[t, b, k] * wi[j, k], axis=k), name=name + "_dense"
    )
    return te.compute(shape, lambda t, b, j: xw[t, b, j] + bi[j], name=name)


def recurrent_projection(
    state: te.Tensor, wh: te.Tensor, bh: te.Tensor, name: str, gates: int = 1
) -> te.Tensor:
    """``state[t-1] @ wh.T + bh`` for every step t of a scan (index 0 is the init row).

    With ``gates`` > 1 the rows of ``wh`` are that many gates stacked, and the product is
    (steps, batch, gates, hidden), as topi's LSTM lays out its own: a tile over hidden units
    then holds every gate of those units, so a cell update that reads all the gates can be
    fused into the product's tiles (``FuseStepEpilogue``) instead of running as a pass of
    its own after it.
    """
    k = te.reduce_axis((0, wh.shape[1]), name="kh")
    rows = wh.shape[0]
    if gates == 1:
        shape, row = (state.shape[0], state.shape[1], rows), (lambda j: j)
    else:
        hidden = rows // gates
        shape = (state.shape[0], state.shape[1], gates, hidden)
        row = lambda g, j: g * hidden + j  # noqa: E731
    hw = te.compute(
        shape,
        lambda t, b, *g: te.sum(state[t - 1, b, k] * wh[row(*g), k], axis=k),
        name=name + "_dense",
    )
    return te.compute(shape, lambda t, b, *g: hw[(t, b, *g)] + bh[row(*g)], name=name)


def drop_init(states: te.Tensor, name: str) -> te.Tensor:
    """The scan's states without the init row: step t's state at index t."""
    return te.compute(
        (states.shape[0] - 1, *states.shape[1:]), lambda t, *i: states[(t + 1, *i)], name=name
    )


def rnn_inputs(
    rng: np.random.Generator, seq: int, batch: int, input: int, hidden: int, gates: int
) -> list[np.ndarray]:
    """Xs in (-1, 1) and one layer's Wi, Wh, Bi, Bh with ``gates`` gates stacked, drawn as
    PyTorch initialises its RNN modules, U(-1/sqrt(hidden), 1/sqrt(hidden))."""
    k = 1.0 / np.sqrt(hidden)
    return [
        rng.uniform(-1, 1, (seq, batch, input)),
        rng.uniform(-k, k, (gates * hidden, input)),
        rng.uniform(-k, k, (gates * hidden, hidden)),
        rng.uniform(-k, k, (gates * hidden,)),
        rng.uniform(-k, k, (gates * hidden,)),
    ]


def sigmoid(x: np.ndarray) -> np.ndarray:
    """The logistic function, for the numpy references."""
    return 1.0 / (1.0 + np.exp(-x))


def load_weights(module, weights: Mapping[str, np.ndarray]) -> None:
    """Set every parameter of ``module`` from the array of that name (float32).

    Names and shapes must match exactly (``copy_`` alone would broadcast, and a parameter
    left at its random initialisation would make a comparison with PyTorch test nothing).
    """
    import torch as th

    params = dict(module.named_parameters())
    if set(weights) != set(params):
        raise KeyError(
            f"{type(module).__name__} has parameters {sorted(params)}, got {sorted(weights)}"
        )
    with th.no_grad():
        for name, array in weights.items():
            if tuple(params[name].shape) != np.shape(array):
                raise ValueError(f"{name}: shape {np.shape(array)}, expected {params[name].shape}")
            params[name].copy_(th.from_numpy(np.asarray(array, "float32")))


def module_call(module, xs: np.ndarray) -> Callable[[], object]:
    """A call of a PyTorch RNN module on ``xs`` that returns its output (every step's last
    layer hidden state) without autograd: what a ``torch_model`` hands to benchmarks."""
    import torch as th

    x = th.from_numpy(np.asarray(xs, "float32"))
    module.eval()

    def call():
        with th.no_grad():
            return module(x)[0]

    return call


def module_model(torch_module: Callable[..., object]) -> Callable[..., Callable[[], object]]:
    """The ``torch_model`` of a recurrence PyTorch has a module for: the module that
    ``torch_module`` builds, called on Xs (the first input), so that the weights are copied
    in one place only."""

    def torch_model(xs, *weights, **sizes: int) -> Callable[[], object]:
        return module_call(torch_module(xs, *weights, **sizes), xs)

    return torch_model
