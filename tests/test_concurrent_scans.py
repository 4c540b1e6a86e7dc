"""Concurrent scans: ``meta_rules.ConcurrentScans`` (the sampled decision),
``postprocs.RewriteConcurrentScans`` (the lanes marked on independent scans) and the
build's ``ConcurrentLanes`` (one parallel loop, a lane per scan, each lane serial).

Correctness is checked at 4096 steps on 2 threads (conftest), against numpy: a lane that
started before the product it reads was computed, or two lanes given the same memory,
would show there.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir, te, tirx
from tvm.tirx import stmt as S
from util import assert_close, assert_scans_kept, compile_func, outputs, run
from workloads import with_seq

import scan_tir
from meta_rules import ConcurrentScans, scan_rules
from postprocs import RewriteConcurrentScans, scan_postprocs
from postprocs.concurrent_scans import side_by_side
from postprocs.persistent_step import shared_out
from scan_tir.lower.vocabulary import (
    CONCURRENT,
    LANE,
    PERSISTENT,
    concurrent_group,
    is_scan_statement,
    lane_groups,
    root_scans,
    root_statements,
    scan_violations,
)
from scan_tir.transform import ConcurrentLanes
from scan_tir.workloads import get


def bilstm(seq: int) -> scan_tir.workloads.Workload:
    return get("bilstm", **{**with_seq("bilstm", seq, 1), "input": 16, "hidden": 32})


def loops_under(stmt: S.Stmt) -> list[S.For]:
    found: list[S.For] = []
    tvm_ffi.structural_walk(stmt, (S.For, found.append))
    return found


@pytest.mark.parametrize("persistent", [False, True], ids=["forked", "persistent"])
def test_bidirectional_lanes_match_numpy_at_4096_steps(persistent, target):
    """The reverse direction's input product sits between the two scans: it is moved before
    the lanes, or the reverse lane would read it unwritten. Marked persistent first, the
    lanes must run their steps as ordinary loops (a launch inside a lane would nest)."""
    workload = bilstm(4096)
    func = workload.prim_func()
    scheduled = shared_out(func, 2) if persistent else func
    marked = side_by_side(scheduled)
    assert not isinstance(marked, str), marked
    assert_scans_kept(marked, func)
    inputs = workload.input_arrays(seed=3)
    got, ref = outputs(workload, compile_func(marked), inputs)
    assert np.abs(ref[0][-1]).max() > 1e-2, "the reference died out; the test would be weak"
    assert_close(got, ref)


def test_one_parallel_loop_of_serial_lanes_after_the_moved_product():
    func = side_by_side(shared_out(bilstm(8).prim_func(), 2))
    assert not isinstance(func, str), func
    out = ConcurrentLanes(tvm.IRModule({"main": func}))["main"]
    stmts = root_statements(out)
    (lanes,) = [s for s in stmts if isinstance(s, S.For) and s.kind == tirx.ForKind.PARALLEL]
    assert int(lanes.extent) == 2
    inner = loops_under(lanes.body)
    assert all(loop.kind != tirx.ForKind.PARALLEL for loop in inner)
    assert not any(LANE in loop.annotations or PERSISTENT in loop.annotations for loop in inner)
    assert isinstance(lanes.body, S.IfThenElse)
    # Both input products now come before the lanes; the concatenation after them.
    at = stmts.index(lanes)
    before = {b.name_hint for s in stmts[:at] for b in _blocks(s)}
    assert {"Xi2h", "Xi2h_1"} <= before
    assert at == len(stmts) - 2
    assert [b.name_hint for b in _blocks(stmts[-1])] == ["hidden_states_2"]


def _blocks(stmt: S.Stmt) -> list[s_tir.SBlock]:
    found: list[s_tir.SBlock] = []
    tvm_ffi.structural_walk(stmt, (s_tir.SBlock, found.append))
    return found


def test_dependent_scans_make_no_group():
    """Layer 2 of a stacked LSTM reads layer 1's outputs: never side by side."""
    func = get("lstm_stacked", **with_seq("lstm_stacked", 8, 1)).prim_func()
    stmts = root_statements(func)
    scans = [i for i, s in enumerate(stmts) if is_scan_statement(s)]
    assert len(scans) == 2
    assert [concurrent_group(stmts, i) for i in scans] == [[scans[0]], [scans[1]]]
    assert "no later scan is independent" in side_by_side(func)


def test_marks_on_dependent_scans_are_refused():
    """Marked by hand (no postproc would): scan_violations names the problem, and the
    build refuses rather than run layer 2 beside the layer it reads."""
    func = get("lstm_stacked", **with_seq("lstm_stacked", 8, 1)).prim_func()
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    for lane, (_, _, scan) in enumerate(root_scans(sch)):
        sch.annotate(sch.get_loops(sch.get_sblock(scan.name_hint))[0], LANE, lane)
    marked = sch.mod["main"]
    (problem,) = lane_groups(marked)[1]
    assert "depends on the scan" in problem
    assert any("concurrent scans" in p for p in scan_violations(marked, _expected(func)))
    # Raised in the pass, it reaches the caller through TVM's FFI as a RuntimeError.
    with pytest.raises(RuntimeError, match="cannot run concurrently: root statement 7 depends"):
        ConcurrentLanes(tvm.IRModule({"main": marked}))


def _expected(func: tirx.PrimFunc) -> list:
    return scan_tir.lower.vocabulary.expected_scans(tvm.IRModule({"main": func}))["main"]


def three_scans(n: int, m: int) -> list[te.Tensor]:
    """Running sums of X and of Y (independent), and a running sum of the first's output
    (dependent on it), in that order."""
    x = te.placeholder((n, m), name="X")
    y = te.placeholder((n, m), name="Y")

    def cumsum(data: te.Tensor, name: str) -> te.Tensor:
        init = te.compute((1, m), lambda _, j: data[0, j], name=f"{name}_init")
        state = te.placeholder((n, m), name=f"{name}_state")
        update = te.compute((n, m), lambda t, j: state[t - 1, j] + data[t, j], name=f"{name}_up")
        return te.scan(init, update, state, inputs=[data], name=name)

    a = cumsum(x, "a")
    b = cumsum(y, "b")
    c = cumsum(a, "c")
    return [x, y, a, b, c]


def test_groups_take_independent_scans_and_stop_at_a_dependent_statement(target):
    tensors = three_scans(1000, 8)
    func = scan_tir.create_prim_func(tensors)
    stmts = root_statements(func)
    a, b, c = [i for i, s in enumerate(stmts) if is_scan_statement(s)]
    assert concurrent_group(stmts, a) == [a, b]
    assert concurrent_group(stmts, b) == [b, c]  # c reads only a: it may run beside b
    marked = side_by_side(func)
    assert not isinstance(marked, str), marked
    assert lane_groups(marked) == ([[a, b]], [])
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-1, 1, (1000, 8)).astype("float32") for _ in range(2)]
    got = run(compile_func(marked), xs, [(1000, 8)] * 3)
    want = [np.cumsum(xs[0], 0), np.cumsum(xs[1], 0), np.cumsum(np.cumsum(xs[0], 0), 0)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-3)


def test_the_space_samples_the_decision_and_the_postproc_carries_it_out(target):
    assert any(isinstance(r, ConcurrentScans) for r in scan_rules(target))
    kinds = [type(p).__name__ for p in scan_postprocs(target)]
    assert kinds[-3:] == ["RewritePersistentStep", "RewriteConcurrentScans", "VerifyScanStructure"]

    func = bilstm(8).prim_func()
    grouped = 0
    for decision in (0, 1):
        sch = s_tir.Schedule(tvm.IRModule({"main": func}))
        first = sch.get_sblock(root_scans(sch)[0][2].name_hint)
        sch.annotate(first, CONCURRENT, decision)
        assert RewriteConcurrentScans().apply(sch)
        assert CONCURRENT not in sch.get(first).annotations
        groups, problems = lane_groups(sch.mod["main"])
        assert problems == []
        grouped += len(groups)
        assert len(groups) == decision
    assert grouped == 1


@pytest.mark.parametrize("name, sampled", [("bilstm", 1), ("lstm", 0), ("lstm_stacked", 0)])
def test_the_rule_samples_only_where_a_scan_has_an_independent_one_after_it(name, sampled, target):
    func = get(name, **with_seq(name, 8, 1)).prim_func()
    rule = ConcurrentScans()
    rule.num_cores = 2
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    for _, _, scan in root_scans(sch):
        rule.apply(sch, sch.get_sblock(scan.name_hint))
    decided = [s for _, _, s in root_scans(sch) if CONCURRENT in s.annotations]
    assert len(decided) == sampled
    rule.num_cores = 1  # one core: nothing to run side by side
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    for _, _, scan in root_scans(sch):
        rule.apply(sch, sch.get_sblock(scan.name_hint))
    assert not [s for _, _, s in root_scans(sch) if CONCURRENT in s.annotations]
