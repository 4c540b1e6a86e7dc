"""Small recurrences the MetaSchedule tests tune: an LSTM (topi) and a GRU-style scan."""

from __future__ import annotations

import numpy as np
from tvm import te, topi

import scan_tir


def lstm(seq, inp: int, hidden: int):
    """topi's LSTM; returns (args for create_prim_func, input names)."""
    xs = te.placeholder((seq, 1, inp), name="Xs")
    wi = te.placeholder((4 * hidden, inp), name="Wi")
    wh = te.placeholder((4 * hidden, hidden), name="Wh")
    hs, cs = topi.nn.lstm(xs, wi, wh)
    return [xs, wi, wh, hs, cs]


def gru(seq, inp: int, hidden: int, copy_out: bool = True, project_input: bool = True):
    """A GRU step as PyTorch writes it (r, z, n; reset applied to W_hn h + b_hn).

    Without ``copy_out`` the scan's state (seq + 1 rows, the first the zero init) is the
    output; without ``project_input`` the input X comes already multiplied by W_i (shape
    (seq, 3 * hidden), as cuDNN-style APIs take it), so no op outside the scan loops over
    the sequence.
    """
    h = te.placeholder((seq + 1, hidden), name="h")
    wh = te.placeholder((3 * hidden, hidden), name="Wh")
    bh = te.placeholder((3 * hidden,), name="Bh")
    if project_input:
        x = te.placeholder((seq, inp), name="X")
        wi = te.placeholder((3 * hidden, inp), name="Wi")
        k = te.reduce_axis((0, inp), name="k")
        xw = te.compute(
            (seq, 3 * hidden), lambda t, j: te.sum(x[t, k] * wi[j, k], axis=k), name="xw"
        )
        inputs = [x, wi, wh, bh]
    else:
        xw = te.placeholder((seq, 3 * hidden), name="XW")
        inputs = [xw, wh, bh]
    h0 = te.compute((1, hidden), lambda _, j: 0.0, name="h0")
    r_ = te.reduce_axis((0, hidden), name="r")
    hw_ = te.compute(
        (seq + 1, 3 * hidden), lambda t, j: te.sum(h[t - 1, r_] * wh[j, r_], axis=r_), name="hw"
    )
    hw = te.compute((seq + 1, 3 * hidden), lambda t, j: hw_[t, j] + bh[j], name="hw_bias")
    reset = te.compute(
        (seq + 1, hidden), lambda t, j: te.sigmoid(xw[t - 1, j] + hw[t, j]), name="reset"
    )
    update = te.compute(
        (seq + 1, hidden),
        lambda t, j: te.sigmoid(xw[t - 1, hidden + j] + hw[t, hidden + j]),
        name="update",
    )
    cand = te.compute(
        (seq + 1, hidden),
        lambda t, j: te.tanh(xw[t - 1, 2 * hidden + j] + reset[t, j] * hw[t, 2 * hidden + j]),
        name="cand",
    )
    h_new = te.compute(
        (seq + 1, hidden),
        lambda t, j: (1.0 - update[t, j]) * cand[t, j] + update[t, j] * h[t - 1, j],
        name="h_new",
    )
    hs = scan_tir.scan(h0, h_new, h, name="gru_scan")
    if not copy_out:
        return [*inputs, hs]
    out = te.compute((seq, hidden), lambda t, j: hs[t + 1, j], name="hidden_states")
    return [*inputs, out]


def gru_numpy_projected(xw, wh, bh):
    """The GRU recurrence from an already projected input ``xw`` (seq, 3 * hidden)."""
    hidden = wh.shape[1]
    h = np.zeros(hidden)
    out = []
    for t in range(xw.shape[0]):
        hw = wh @ h + bh
        r = 1 / (1 + np.exp(-(xw[t, :hidden] + hw[:hidden])))
        z = 1 / (1 + np.exp(-(xw[t, hidden : 2 * hidden] + hw[hidden : 2 * hidden])))
        n = np.tanh(xw[t, 2 * hidden :] + r * hw[2 * hidden :])
        h = (1 - z) * n + z * h
        out.append(h)
    return np.array(out)

