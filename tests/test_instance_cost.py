"""scan_tir.tune.instance_cost: a kernel's latency predicted at instances it was not timed at."""

from __future__ import annotations

import math

import pytest
from tvm import te
from tvm.s_tir.schedule import Schedule

from scan_tir import workloads
from scan_tir.transform import pad_rows
from scan_tir.tune.instance_cost import fit_latency, tile_multiples
from scan_tir.tune.symbolic import size_vars, specialize_body


def cost(batch, seq, tile=4):
    """A made-up kernel: fixed cost, a per-step cost, and rows padded to ``tile``."""
    return 0.3 + 0.02 * seq + 0.001 * seq * math.ceil(batch / tile) * tile


CORNERS = [(1, 16), (1, 1024), (64, 16), (64, 1024)]


def test_a_multilinear_cost_is_predicted_exactly_from_the_corners():
    model = fit_latency({i: cost(*i) for i in CORNERS}, [4, 1])
    for batch, seq in [(2, 64), (8, 256), (32, 1024), (3, 37)]:
        assert model((batch, seq)) == pytest.approx(cost(batch, seq), rel=1e-9)


def test_padding_makes_batches_within_a_tile_cost_the_same():
    model = fit_latency({i: cost(*i) for i in CORNERS}, [4, 1])
    assert model((2, 256)) == pytest.approx(model((4, 256)), rel=1e-12)
    assert model((5, 256)) > model((4, 256))


def test_two_lengths_fit_a_line():
    """Only the fixed and per-step terms can be told apart from two instances of one size."""
    model = fit_latency({(16,): 1.0, (1024,): 64.0}, [1])
    assert model((520,)) == pytest.approx(32.5)


def test_the_tile_over_each_size_is_found():
    batch, seq = te.var("batch"), te.var("seq")
    a = te.placeholder((seq, batch, 8), name="A")
    b = te.compute((seq, batch, 8), lambda t, i, j: a[t, i, j] * 2.0, name="B")
    func = te.create_prim_func([a, b])
    sch = Schedule(func)
    _, rows, _ = sch.get_loops(sch.get_sblock("B"))
    sch.split(rows, [None, 4])
    sizes = [func.params[0].ty.shape[1], func.params[0].ty.shape[0]]
    assert tile_multiples(sch.mod["main"], sizes) == [4, 1]


def test_rows_padded_to_whole_tiles_count_as_a_tile_over_the_size():
    """``pad_rows`` pads the LSTM's seq x batch rows to 32, a multiple of 16 steps at
    batch 2; the GRU's rows (one a step) padded to 8 are 8 steps."""
    for name, rows, multiple, steps in [("lstm", 2, 32, 16), ("gru", 1, 8, 8)]:
        wl = workloads.get(name, seq=16, batch=2, input=16, hidden=32)
        func = specialize_body(wl.symbolic_func(["batch", "seq"]), {"batch": 2})
        seq = size_vars(func)["seq"]
        padded = pad_rows(func, [(seq * rows if rows > 1 else seq, multiple)])
        assert tile_multiples(func, [seq]) == [1]
        assert tile_multiples(padded, [seq]) == [steps]
