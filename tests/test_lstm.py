"""tvm.topi.nn.lstm with every option, lowered by scan_tir and checked against lstm_python."""

from __future__ import annotations

import itertools

import pytest
from tvm import s_tir, te
from util import compile_func
from workloads import check_lstm, lstm_case, run_and_check_lstm

import scan_tir

CASES = [
    {},
    {"bias": False},
    {"init": False},
    {"bias": False, "init": False},
    {"proj": True},
    {"peephole": True},
    {"reverse": True},
    {"proj": True, "peephole": True, "reverse": True, "layout": "GOIF"},
]


@pytest.mark.parametrize("case", CASES, ids=lambda o: "-".join(o) or "default")
def test_lstm_options(case):
    func = check_lstm(23, **case)
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
        run_and_check_lstm(lib, args, length, peephole=True)
