"""tvm.topi.nn.lstm with every option, lowered by scan_tir and checked against lstm_python."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from tvm import s_tir, te, topi
from tvm.topi.testing import lstm_python
from util import compile_func, run

import scan_tir

BATCH, IN, HIDDEN, PROJ = 2, 6, 5, 3
RNG = np.random.default_rng(3)


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
    out_dim = PROJ if proj else HIDDEN
    args = {
        "Xs": te.placeholder((seq, BATCH, IN), name="Xs"),
        "Wi": te.placeholder((4 * HIDDEN, IN), name="Wi"),
        "Wh": te.placeholder((4 * HIDDEN, out_dim), name="Wh"),
    }
    if bias:
        args["Bi"] = te.placeholder((4 * HIDDEN,), name="Bi")
        args["Bh"] = te.placeholder((4 * HIDDEN,), name="Bh")
    if init:
        args["h_init"] = te.placeholder((BATCH, out_dim), name="h_init")
        args["c_init"] = te.placeholder((BATCH, HIDDEN), name="c_init")
    if proj:
        args["proj"] = te.placeholder((out_dim, HIDDEN), name="proj")
    if peephole:
        for key in ("p_i", "p_f", "p_o"):
            args[key] = te.placeholder((BATCH, HIDDEN), name=key)
    hs, cs = topi.nn.lstm(**args, reverse=reverse, weight_layout=layout, **(activations or {}))
    return args, hs, cs


def lstm_values(args, length):
    """Random inputs for ``args``, the symbolic length ``seq`` (if any) set to ``length``."""
    values = {}
    for key, ph in args.items():
        shape = [length if str(d) == "seq" else int(d) for d in ph.shape]
        values[key] = (RNG.standard_normal(shape) * 0.5).astype("float32")
    return values


def run_and_check(lib, args, length, **options):
    values = lstm_values(args, length)
    out_dim = PROJ if options.get("proj") else HIDDEN
    got_h, got_c = run(
        lib, list(values.values()), [(length, BATCH, out_dim), (length, BATCH, HIDDEN)]
    )
    ref_h, ref_c = lstm_python(
        **values,
        reverse=options.get("reverse", False),
        weight_layout=options.get("layout", "IFGO"),
    )
    np.testing.assert_allclose(got_h, ref_h, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(got_c, ref_c, rtol=1e-4, atol=2e-5)


def check_lstm(seq, **options):
    """Lower, build and run one LSTM; compare hidden and cell sequences with lstm_python."""
    args, hs, cs = lstm_case(seq, **options)
    func = scan_tir.create_prim_func([*args.values(), hs, cs])
    run_and_check(compile_func(func), args, seq, **options)
    return func


OPTIONS = [
    {},
    {"bias": False},
    {"init": False},
    {"bias": False, "init": False},
    {"proj": True},
    {"peephole": True},
    {"reverse": True},
    {"proj": True, "peephole": True, "reverse": True, "layout": "GOIF"},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(o) or "default")
def test_lstm_options(options):
    func = check_lstm(23, **options)
    steps = scan_tir.find_scans(func)
    assert [s.name for s in steps] == ["lstm_scan"]


@pytest.mark.parametrize("layout", ["".join(p) for p in itertools.permutations("IFGO")])
def test_lstm_every_gate_layout(layout):
    check_lstm(9, layout=layout)


def test_lstm_single_step():
    check_lstm(1, peephole=True, proj=True)


def test_lstm_symbolic_length_long_sequences_parallel_step():
    """One module for every length; the recurrent dense parallelised across 2 threads
    inside each step, checked up to 3000 steps."""
    seq = te.var("seq")
    args, hs, cs = lstm_case(seq, peephole=True)
    func = scan_tir.create_prim_func([*args.values(), hs, cs])
    sch = s_tir.Schedule(func)
    dense = sch.get_sblock("s_h2h")
    b, i, j, k = sch.get_loops(dense)[-4:]
    fused = sch.fuse(b, i, j)
    sch.parallel(fused)
    lib = compile_func(sch.mod["main"])
    for length in (1, 2, 17, 3000):
        run_and_check(lib, args, length, peephole=True)
