"""The recurrences the tests build: TE graphs (an RNN, topi's LSTM with every option, a
GRU-style scan) with their numpy references, and the zoo's workloads at small sizes."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import te, topi
from tvm.topi.testing import lstm_python
from util import assert_close, assert_scans_kept, compile_func, outputs, run

import scan_tir
from scan_tir import LoweringOptions
from scan_tir.workloads import get

# --- the zoo at small sizes -----------------------------------------------------------------

#: Small sizes with batch > 1, per recurrence of the zoo.
SMALL: dict[str, dict[str, int]] = {
    "lstm": {"seq": 9, "batch": 3, "input": 5, "hidden": 4},
    "gru": {"seq": 9, "batch": 3, "input": 5, "hidden": 4},
    "rnn_tanh": {"seq": 9, "batch": 3, "input": 5, "hidden": 4},
    "rnn_relu": {"seq": 9, "batch": 3, "input": 5, "hidden": 4},
    "lstm_stacked": {"seq": 9, "batch": 3, "input": 5, "hidden": 4, "layers": 2},
    "bilstm": {"seq": 9, "batch": 3, "input": 5, "hidden": 4},
    "selective_scan": {"seq": 9, "batch": 3, "d_model": 5, "d_state": 4},
    "mingru": {"seq": 9, "batch": 3, "input": 5, "hidden": 4},
}


def with_seq(name: str, seq: int, batch: int) -> dict[str, int]:
    """SMALL[name] at another length and batch (feature sizes stay small)."""
    return {**SMALL[name], "seq": seq, "batch": batch}


def check_long_sequence(name: str, seed: int, options: LoweringOptions | None = None) -> None:
    """Recurrence ``name`` at 1024 steps, batch 2, lowered with ``options``: scan
    invariants kept, outputs equal to numpy's (2 threads: conftest)."""
    workload = get(name, options, **with_seq(name, 1024, 2))
    func = workload.prim_func()
    assert_scans_kept(func, func)
    inputs = workload.input_arrays(seed=seed)
    got, ref = outputs(workload, compile_func(func), inputs)
    assert np.abs(ref[0][-1]).max() > 1e-2, "the reference died out; the test would be weak"
    assert_close(got, ref)


# --- TE graphs ------------------------------------------------------------------------------


def rnn(length=32, n=16):
    """An Elman RNN, h[t] = tanh(h[t-1] @ W + X[t]), its state the output: [X, W, h]."""
    x = te.placeholder((length, n), name="X")
    w = te.placeholder((n, n), name="W")
    s = te.placeholder((length, n), name="s")
    init = te.compute((1, n), lambda _, i: 0.0, name="s_init")
    k = te.reduce_axis((0, n), name="k")
    d = te.compute((length, n), lambda t, i: te.sum(s[t - 1, k] * w[k, i], axis=k), name="dense")
    b = te.compute((length, n), lambda t, i: d[t, i] + x[t, i], name="bias")
    u = te.compute((length, n), lambda t, i: te.tanh(b[t, i]), name="s_update")
    return [x, w, scan_tir.scan(init, u, s, name="rnn")]


def rnn_ref(xv, wv):
    h = np.zeros(xv.shape)
    for t in range(1, xv.shape[0]):
        h[t] = np.tanh(h[t - 1] @ wv + xv[t])
    return h


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



# --- topi's LSTM, every option, against tvm.topi.testing.lstm_python -------------------------

LSTM_BATCH, LSTM_IN, LSTM_HIDDEN, LSTM_PROJ = 2, 6, 5, 3
LSTM_RNG = np.random.default_rng(3)


def lstm_case(
    seq,
    proj=False,
    peephole=False,
    bias=True,
    init=True,
    reverse=False,
    layout="IFGO",
    activations=None,
):
    """(input placeholders by lstm_python keyword, hidden, cell) for one configuration."""
    out_dim = LSTM_PROJ if proj else LSTM_HIDDEN
    args = {
        "Xs": te.placeholder((seq, LSTM_BATCH, LSTM_IN), name="Xs"),
        "Wi": te.placeholder((4 * LSTM_HIDDEN, LSTM_IN), name="Wi"),
        "Wh": te.placeholder((4 * LSTM_HIDDEN, out_dim), name="Wh"),
    }
    if bias:
        args["Bi"] = te.placeholder((4 * LSTM_HIDDEN,), name="Bi")
        args["Bh"] = te.placeholder((4 * LSTM_HIDDEN,), name="Bh")
    if init:
        args["h_init"] = te.placeholder((LSTM_BATCH, out_dim), name="h_init")
        args["c_init"] = te.placeholder((LSTM_BATCH, LSTM_HIDDEN), name="c_init")
    if proj:
        args["proj"] = te.placeholder((out_dim, LSTM_HIDDEN), name="proj")
    if peephole:
        for key in ("p_i", "p_f", "p_o"):
            args[key] = te.placeholder((LSTM_BATCH, LSTM_HIDDEN), name=key)
    hs, cs = topi.nn.lstm(**args, reverse=reverse, weight_layout=layout, **(activations or {}))
    return args, hs, cs


def lstm_values(args, length):
    """Random inputs for ``args``, the symbolic length ``seq`` (if any) set to ``length``."""
    values = {}
    for key, ph in args.items():
        shape = [length if str(d) == "seq" else int(d) for d in ph.shape]
        values[key] = (LSTM_RNG.standard_normal(shape) * 0.5).astype("float32")
    return values


def run_and_check_lstm(lib, args, length, **case):
    """Run ``lib`` (an lstm_case lowered) at ``length``; compare with lstm_python."""
    values = lstm_values(args, length)
    out_dim = LSTM_PROJ if case.get("proj") else LSTM_HIDDEN
    got_h, got_c = run(
        lib,
        list(values.values()),
        [(length, LSTM_BATCH, out_dim), (length, LSTM_BATCH, LSTM_HIDDEN)],
    )
    ref_h, ref_c = lstm_python(
        **values,
        reverse=case.get("reverse", False),
        weight_layout=case.get("layout", "IFGO"),
    )
    np.testing.assert_allclose(got_h, ref_h, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(got_c, ref_c, rtol=1e-4, atol=2e-5)


def check_lstm(seq, options: LoweringOptions | None = None, **case) -> tvm.tirx.PrimFunc:
    """Lower (with ``options``), build and run one lstm_case; compare hidden and cell
    sequences with lstm_python."""
    args, hs, cs = lstm_case(seq, **case)
    func = scan_tir.create_prim_func([*args.values(), hs, cs], options=options)
    run_and_check_lstm(compile_func(func), args, seq, **case)
    return func
