"""``LoweringOptions(copies_in_step=True)``: a copy of each step's new state, made inside the
step (scan_tir/lower/step_copies.py), and FuseStepEpilogue putting it under its update.

Each test names the options it lowers with: copies in the step against ``PLAIN``, the same
without them (fast math off in both, so that numerics compare as before the options)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tuning import tune_and_replay
from tvm import s_tir, te
from util import (
    assert_close,
    assert_scans_kept,
    block_names,
    compile_func,
    loop_kinds,
    outputs,
    run,
)
from workloads import SMALL, lstm_case, run_and_check_lstm, with_seq

import scan_tir
from postprocs import FuseStepEpilogue, RewriteStepParallelVectorizeUnroll
from scan_tir import LoweringOptions
from scan_tir.lower.vocabulary import STEP_PARALLEL, STEP_VECTORIZE
from scan_tir.workloads import get

IN_STEP = LoweringOptions(fast_math=False, copies_in_step=True)
PLAIN = LoweringOptions.legacy()


def _cumsum(n: int = 8):
    """A running sum whose output is its state at t + 1 (one copy), and two ops that are
    not copies: the state doubled, and the last row."""
    length = te.var("seq")
    x = te.placeholder((length, n), name="x")
    state = te.placeholder((length + 1, n), name="state")
    init = te.compute((1, n), lambda _, i: te.const(0, "float32"), name="init")
    update = te.compute((length + 1, n), lambda t, i: state[t - 1, i] + x[t - 1, i], name="add")
    scan = te.scan(init, update, state, name="sums")
    copy = te.compute((length, n), lambda t, i: scan[t + 1, i], name="out")
    doubled = te.compute((length, n), lambda t, i: scan[t + 1, i] * 2, name="doubled")
    last = te.compute((n,), lambda i: scan[length, i], name="last")
    return x, copy, doubled, last


def test_copies_move_into_the_step_and_others_stay_outside():
    func = scan_tir.create_prim_func(list(_cumsum()), options=IN_STEP)
    (scan,) = scan_tir.find_scans(func)
    inside = block_names(scan.step.body)
    assert "out" in inside
    assert "doubled" not in inside and "last" not in inside
    assert {"doubled", "last"} <= set(block_names(func.body))
    views = {str(m.buffer.name): m.source for m in scan.step.match_buffers}
    out_view = views["out_t"]
    assert str(out_view.source.name) == "out"
    assert out_view.region[0].min.same_as(scan.step.iter_vars[0].var)  # row v_t


def _rows(func, name: str):
    """The first extent of the root buffer ``name``: an int, or the expression if symbolic."""
    (buffer,) = [b for b in func.body.block.alloc_buffers if str(b.name) == name]
    rows = buffer.shape[0]
    return int(rows) if isinstance(rows, tvm.tirx.IntImm) else rows


def test_states_nothing_else_reads_keep_two_rows():
    """topi's LSTM: both states are read only by their copies (now in the step) and by the
    step at t-1, so each keeps two rows; the running sum's state, still read outside
    (doubled, last), keeps every row."""
    args, hs, cs = lstm_case(1024)
    func = scan_tir.create_prim_func([*args.values(), hs, cs], options=IN_STEP)
    assert _rows(func, "lstm_scan_h_state") == 2 and _rows(func, "lstm_scan_c_state") == 2
    plain = scan_tir.create_prim_func([*args.values(), hs, cs], options=PLAIN)
    assert _rows(plain, "lstm_scan_h_state") == 1025
    x, copy, doubled, last = _cumsum()
    func = scan_tir.create_prim_func([x, copy, doubled, last], options=IN_STEP)
    assert not isinstance(_rows(func, "sums"), int)  # seq + 1
    assert _rows(scan_tir.create_prim_func([x, copy], options=IN_STEP), "sums") == 2


@pytest.mark.parametrize("length", [1, 2, 7, 64])
def test_a_state_read_outside_at_its_last_row_alone_keeps_two_rows(length):
    """The last row (an RNN's h_n, a chunk's total) is where the last step left it, row
    ``last % 2``, at every parity of the length; without the copy the state is read at
    its last row alone, and is folded too."""
    x, copy, _, last = _cumsum()
    for outputs_ in ([x, copy, last], [x, last]):
        func = scan_tir.create_prim_func(outputs_, options=IN_STEP)
        assert _rows(func, "sums") == 2
        xs = np.random.default_rng(length).standard_normal((length, 8)).astype("float32")
        shapes = [(length, 8)] * (len(outputs_) - 2) + [(8,)]
        got = run(compile_func(func), [xs], shapes)
        np.testing.assert_allclose(got[-1], xs.astype("float64").sum(0), rtol=1e-5, atol=1e-5)


def test_a_selective_scan_writes_y_and_keeps_two_rows_of_h():
    """Mamba's state (batch, d_model, d_state per step) is read only by the step: two rows,
    not one per step; only y, the output, is written for every step."""
    func = get("selective_scan", IN_STEP, seq=1024, batch=1, d_model=8, d_state=4).prim_func()
    assert _rows(func, "selective_scan_h") == 2 and _rows(func, "selective_scan_y") == 2
    assert list(func.params[-1].ty.shape) == [1024, 1, 8]


def test_second_order_recurrence_keeps_every_row():
    """A state read at t-1 and t-2 (two init rows) is not folded; right at 1024 steps."""
    n, length = 4, 1024
    x = te.placeholder((length, n), name="x")
    state = te.placeholder((length + 2, n), name="state")
    init = te.compute((2, n), lambda _, i: te.const(1, "float32"), name="init")
    update = te.compute(
        (length + 2, n),
        lambda t, i: 0.5 * state[t - 1, i] + 0.25 * state[t - 2, i] + x[t - 2, i],
        name="upd",
    )
    scan = te.scan(init, update, state, name="second")
    out = te.compute((length, n), lambda t, i: scan[t + 2, i], name="out")
    func = scan_tir.create_prim_func([x, out], options=IN_STEP)
    assert _rows(func, "second") == length + 2
    (scan_nest,) = scan_tir.find_scans(func)
    assert "out" in block_names(scan_nest.step.body)
    xv = np.random.default_rng(2).standard_normal((length, n)).astype("float32")
    (got,) = run(compile_func(func), [xv], [(length, n)])
    want = np.ones((length + 2, n))
    for t in range(length):
        want[t + 2] = 0.5 * want[t + 1] + 0.25 * want[t] + xv[t]
    np.testing.assert_allclose(got, want[2:], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("length", [1, 7, 1024])
def test_symbolic_length_module_right_at_every_length(length):
    """One module, with the copy in the step, at every length (2 threads, conftest)."""
    lib = compile_func(scan_tir.create_prim_func(list(_cumsum()), options=IN_STEP))
    xv = np.random.default_rng(length).standard_normal((length, 8)).astype("float32")
    got, doubled, last = run(lib, [xv], [(length, 8), (length, 8), (8,)])
    want = np.cumsum(xv, axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(doubled, 2 * want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(last, want[-1], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "case",
    [{}, {"proj": True}, {"peephole": True, "reverse": True}, {"init": False, "bias": False}],
)
def test_topi_lstm_at_1024_steps(case):
    args, hs, cs = lstm_case(1024, **case)
    func = scan_tir.create_prim_func([*args.values(), hs, cs], options=IN_STEP)
    (scan,) = scan_tir.find_scans(func)
    assert {"hidden_states", "cell_states"} <= set(block_names(scan.step.body))
    run_and_check_lstm(compile_func(func), args, 1024, **case)


@pytest.mark.parametrize("merge", [False, pytest.param(True, marks=pytest.mark.experimental)])
def test_with_merged_updates(merge):
    args, hs, cs = lstm_case(1024)
    options = LoweringOptions(fast_math=False, copies_in_step=True, merge_updates=merge)
    func = scan_tir.create_prim_func([*args.values(), hs, cs], options=options)
    run_and_check_lstm(compile_func(func), args, 1024)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_recurrence_at_1024_steps(name):
    workload = get(name, IN_STEP, **with_seq(name, 1024, 2))
    got, ref = outputs(workload, compile_func(workload.prim_func()), workload.input_arrays(seed=5))
    assert_close(got, ref)


def _split_gates_and_fuse(func):
    """The step of topi's LSTM with its gate axis split above the product's fusion loop (as
    at config D), then FuseStepEpilogue and the step rewrite (limits 16)."""
    sch = s_tir.Schedule(func)
    step = sch.get_sblock("lstm_scan_step")
    sch.annotate(step, STEP_PARALLEL, 16)
    sch.annotate(step, STEP_VECTORIZE, 16)
    b, i, _, _ = sch.get_loops(sch.get_sblock("s_h2h"))
    gate_outer, _ = sch.split(i, [2, 2])
    sch.reorder(gate_outer, b)
    assert FuseStepEpilogue().apply(sch)
    return sch


def _parallel_loops_per_step(sch) -> int:
    assert RewriteStepParallelVectorizeUnroll().apply(sch)
    (scan,) = scan_tir.find_scans(sch.mod["main"])
    return loop_kinds(scan.step.body).count(tvm.tirx.ForKind.PARALLEL)


def test_fuse_step_epilogue_puts_each_copy_under_its_update():
    """The cell update stays out of the tiles (it reads the gates at constant indices);
    each copy goes under the loop of the update it copies, so the step forks as often as
    without the copies. Correct at 1024 steps."""
    workload = get("lstm", seq=1024, batch=8, input=6, hidden=32)
    func = workload.prim_func(IN_STEP)
    sch = _split_gates_and_fuse(func)
    for copy, update in (("hidden_states", "next_h"), ("cell_states", "next_c")):
        outer = sch.get_loops(sch.get_sblock(update))[0]
        assert sch.get(sch.get_loops(sch.get_sblock(copy))[0]).same_as(sch.get(outer))
    without = _split_gates_and_fuse(workload.prim_func(PLAIN))
    assert _parallel_loops_per_step(sch) == _parallel_loops_per_step(without)
    scheduled = sch.mod["main"]
    assert_scans_kept(scheduled, func)
    got, ref = outputs(workload, compile_func(scheduled), workload.input_arrays(seed=6))
    assert_close(got, ref)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_tuned_records_replay_correct(name, builder, target, tmp_path):
    """Tuned through scan_space with the copies in the step; every record replayed at 1024
    steps against numpy, with the scan invariants."""
    workload = get(name, IN_STEP, **with_seq(name, 1024, 2))
    space = scan_tir.scan_space(target)
    tune_and_replay(workload, workload.prim_func(), space, builder, tmp_path, target)
