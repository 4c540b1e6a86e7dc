"""scan_tir.tune.symbolic: a trace tuned at one size replayed on the symbolic function."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import s_tir, tirx
from util import compile_func, outputs

from scan_tir import workloads
from scan_tir.tune.instance_cost import tile_multiples
from scan_tir.tune.symbolic import _capped, replay_sized, size_vars, specialize, specialize_body

SIZES = {"batch": 2, "input": 16, "hidden": 32}


def symbolic_gru() -> tirx.PrimFunc:
    func = workloads.get("gru", seq=32, **SIZES).symbolic_func(["batch", "seq"])
    return func.with_attr("global_symbol", "main")


def test_a_tile_is_held_to_the_rows_of_a_length_outer_inner_factors_first():
    """The innermost factor (a register block) is kept while an outer one can give."""
    func = symbolic_gru()
    seq = size_vars(func)["seq"]
    assert _capped([1, 8, 8], seq, func, {"seq": 16}) == [1, 2, 8]
    assert _capped([1, 8, 8], seq, func, {"seq": 4}) == [1, 1, 4]
    by_8 = tirx.floordiv(seq + 7, 8)  # a loop of seq split by 8 first
    assert _capped([1, 8, 1], by_8, func, {"seq": 16}) == [1, 2, 1]
    assert _capped([1, 8, 8], seq * 2, func, {"seq": 16}) == [1, 4, 8]  # two rows a step
    assert _capped([1, 8, 8], seq, func, {"batch": 1}) == [1, 8, 8]  # not over the length
    assert _capped([1, 4, 2], seq, func, {"seq": 64}) == [1, 4, 2]  # already within


def test_a_row_tile_held_to_a_short_length_pads_to_it_and_is_right():
    """The GRU's hoisted product tiled by 32 steps at 32 steps: replayed on any length it
    pads the rows to 32 steps, held to 4 steps to 4; both right at lengths off both."""
    func = symbolic_gru()
    mod = tvm.IRModule({"main": specialize(func, {"batch": 2, "seq": 32})})
    sch = s_tir.Schedule(mod)
    rows = sch.get_loops(sch.get_sblock("xw_dense"))[0]
    sch.split(rows, sch.sample_perfect_tile(rows, n=2, decision=[1, 32]))
    body = specialize_body(func, {"batch": 2})
    seq = size_vars(func)["seq"]
    for cap, tile in [(None, 32), ({"seq": 4}, 4)]:
        kernel = replay_sized(sch.trace, body, cap)
        assert tile_multiples(kernel, [seq]) == [tile]
        lib = compile_func(kernel)
        for length in (1, 4, 5, 37):
            case = workloads.get("gru", seq=length, **SIZES)
            got, want = outputs(case, lib, case.input_arrays())
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{length=}")
