"""postprocs: the verifier rejects broken scans; the step rewrites keep results right."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import s_tir, te
from util import assert_close, compile_func, expected, loop_kinds, outputs, run
from workloads import rnn, rnn_ref, with_seq

import scan_tir
from postprocs import (
    DisallowDynamicLoopOutsideScans,
    FuseStepEpilogue,
    RewriteStepParallelVectorizeUnroll,
    VerifyScanStructure,
)
from scan_tir.lower.vocabulary import (
    STEP_PARALLEL,
    STEP_UNROLL,
    STEP_VECTORIZE,
    expected_scans,
)
from scan_tir.workloads import get

RNG = np.random.default_rng(13)


def rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype("float32")


def _verifier(func):
    verify = VerifyScanStructure()
    verify.expected = expected_scans(tvm.IRModule({"main": func}))
    return verify


def test_verifier_accepts_work_scheduled_inside_the_step():
    func = scan_tir.create_prim_func(rnn(64, 16))
    sch = s_tir.Schedule(func)
    sch.compute_inline(sch.get_sblock("bias"))
    i, k = sch.get_loops(sch.get_sblock("dense"))[-2:]
    sch.parallel(sch.split(i, [2, None])[0])
    assert _verifier(func).apply(sch)


def test_verifier_rejects_a_touched_time_loop():
    func = scan_tir.create_prim_func(rnn(64, 16))
    for touch in ("split", "unroll", "annotate"):
        sch = s_tir.Schedule(func)
        (t,) = sch.get_loops(sch.get_sblock("rnn_step"))
        if touch == "split":
            sch.split(t, [None, 4])
        elif touch == "unroll":
            sch.unroll(t)
        else:
            sch.annotate(t, "pragma_auto_unroll_max_step", 16)
        assert not _verifier(func).apply(sch), touch
        assert scan_tir.scan_violations(sch.mod["main"], expected(func))


def test_verifier_rejects_a_block_that_left_its_step():
    """The same names, but 'bias' computed outside the scan: not the tuned function."""
    func = scan_tir.create_prim_func(rnn(32, 8))
    x = te.placeholder((32, 8), name="X")
    w = te.placeholder((8, 8), name="W")
    bias = te.compute((32, 8), lambda t, i: x[t, i] + 1.0, name="bias")
    s = te.placeholder((32, 8), name="s")
    init = te.compute((1, 8), lambda _, i: 0.0, name="s_init")
    k = te.reduce_axis((0, 8), name="k")
    d = te.compute((32, 8), lambda t, i: te.sum(s[t - 1, k] * w[k, i], axis=k), name="dense")
    u = te.compute((32, 8), lambda t, i: te.tanh(d[t, i] + bias[t, i]), name="s_update")
    moved = scan_tir.create_prim_func([x, w, scan_tir.scan(init, u, s, name="rnn")])
    problems = scan_tir.scan_violations(moved, expected(func))
    assert problems == ["blocks ['bias'] left the step of scan 'rnn'"]


def test_verifier_rejects_an_ill_formed_candidate():
    """TVM's compute_inline of a step input into the step (topi's LSTM bias) mis-derives the
    step's regions; the result still builds, so only the verifier stops it."""
    func = get("lstm", seq=4, batch=2, input=3, hidden=2).prim_func()
    sch = s_tir.Schedule(func)
    sch.compute_inline(sch.get_sblock("Xi2h_bias"))
    assert not _verifier(func).apply(sch)
    problems = scan_tir.scan_violations(sch.mod["main"], expected(func))
    assert problems == ["not well-formed S-TIR (s_tir.analysis.verify_well_formed)"]
    assert _verifier(func).apply(s_tir.Schedule(func))


def test_dynamic_loops_allowed_only_for_time_loops():
    m = te.var("m")
    symbolic = s_tir.Schedule(scan_tir.create_prim_func(rnn(m, 8)))
    # _rnn's X is (m, n) and read per step: only the time loop and the copy-free outer ops
    # depend on m; the scan's time loop is allowed, nothing else is dynamic here.
    assert DisallowDynamicLoopOutsideScans().apply(symbolic)
    n = te.var("n")
    x = te.placeholder((m, n), name="X")
    s = te.placeholder((m, n), name="s")
    init = te.compute((1, n), lambda _, i: x[0, i], name="init")
    u = te.compute((m, n), lambda t, i: s[t - 1, i] + x[t, i], name="u")
    width = s_tir.Schedule(scan_tir.create_prim_func([x, scan_tir.scan(init, u, s, name="c")]))
    assert not DisallowDynamicLoopOutsideScans().apply(width)


def test_step_rewrites_parallelise_vectorise_fuse_and_stay_correct():
    """The step postprocs on a tiled step, run to 2048 steps on 2 threads."""
    length, n = 2048, 64
    func = scan_tir.create_prim_func(rnn(length, n))
    sch = s_tir.Schedule(func)
    sch.compute_inline(sch.get_sblock("bias"))
    step = sch.get_sblock("rnn_step")
    sch.annotate(step, STEP_PARALLEL, 32)
    sch.annotate(step, STEP_VECTORIZE, 64)
    sch.annotate(step, STEP_UNROLL, 16)
    dense = sch.get_sblock("dense")
    i, k = sch.get_loops(dense)[-2:]
    io, ii = sch.split(i, [4, None])
    sch.reorder(io, k, ii)
    assert FuseStepEpilogue().apply(sch)
    assert RewriteStepParallelVectorizeUnroll().apply(sch)
    scheduled = sch.mod["main"]
    (scan,) = scan_tir.find_scans(scheduled)
    kinds = loop_kinds(scan.step.body)
    assert tvm.tirx.ForKind.PARALLEL in kinds
    assert kinds.count(tvm.tirx.ForKind.PARALLEL) == 1  # one fork/join per step
    assert STEP_PARALLEL not in scan.step.annotations
    assert scan_tir.scan_violations(scheduled, expected(func)) == []
    xv, wv = rand(length, n), rand(n, n, scale=0.15)
    (got,) = run(compile_func(scheduled), [xv, wv], [(length, n)])
    np.testing.assert_allclose(got, rnn_ref(xv, wv), rtol=1e-4, atol=1e-4)


def test_step_vectorize_splits_a_loop_longer_than_the_limit():
    """A step-wide elementwise loop (256) longer than the vector limit (64) is split and its
    inner 64 vectorised, as the stock postproc does at the root."""
    length, n = 300, 256
    func = scan_tir.create_prim_func(rnn(length, n))
    sch = s_tir.Schedule(func)
    step = sch.get_sblock("rnn_step")
    sch.annotate(step, STEP_PARALLEL, 0)
    sch.annotate(step, STEP_VECTORIZE, 64)
    assert RewriteStepParallelVectorizeUnroll().apply(sch)
    update = sch.get_sblock("s_update")
    kinds = [sch.get(loop).kind for loop in sch.get_loops(update)]
    assert kinds == [tvm.tirx.ForKind.SERIAL, tvm.tirx.ForKind.VECTORIZED]
    assert int(sch.get(sch.get_loops(update)[-1]).extent) == 64
    xv, wv = rand(length, n), rand(n, n, scale=0.05)
    (got,) = run(compile_func(sch.mod["main"]), [xv, wv], [(length, n)])
    np.testing.assert_allclose(got, rnn_ref(xv, wv), rtol=1e-4, atol=1e-4)


def test_step_parallel_takes_an_outer_loop_longer_than_the_limit():
    """An LSTM's cell update over 64 batch rows, with a parallel limit of 32: the 64-row
    loop is made parallel, not left to one core; correct at 1024 steps on 2 threads."""
    workload = get("lstm", **with_seq("lstm", 1024, 64))
    func = workload.prim_func()
    sch = s_tir.Schedule(func)
    step = sch.get_sblock("lstm_scan_step")
    sch.annotate(step, STEP_PARALLEL, 32)
    assert RewriteStepParallelVectorizeUnroll().apply(sch)
    for name in ("next_c", "next_h", "s_h2h"):
        outer = sch.get(sch.get_loops(sch.get_sblock(name))[0])
        assert outer.kind == tvm.tirx.ForKind.PARALLEL and int(outer.extent) == 64, name
    scheduled = sch.mod["main"]
    assert scan_tir.scan_violations(scheduled, expected(func)) == []
    inputs = workload.input_arrays(seed=3)
    got, ref = outputs(workload, compile_func(scheduled), inputs)
    assert_close(got, ref)


@pytest.mark.parametrize("gate_outer_first", [True, False])
def test_epilogue_fusion_never_splits_a_constant_index_read(gate_outer_first):
    """The LSTM's gate blocks read ``gates[b, k, j]`` at constant k. With the gate axis split
    above the fusion loop, TVM 0.27's reverse_compute_at fuses them anyway and the step
    computes wrong values; FuseStepEpilogue must leave them out (and fuse them when the
    whole gate axis is inside the loop). Correct at 1024 steps on 2 threads either way."""
    workload = get("lstm", seq=1024, batch=8, input=6, hidden=32)
    func = workload.prim_func()
    sch = s_tir.Schedule(func)
    sch.annotate(sch.get_sblock("lstm_scan_step"), STEP_PARALLEL, 16)
    b, i, _, _ = sch.get_loops(sch.get_sblock("s_h2h"))
    if gate_outer_first:
        gate_outer, _ = sch.split(i, [2, 2])
        sch.reorder(gate_outer, b)
    assert FuseStepEpilogue().apply(sch)
    tiles = sch.get(sch.get_loops(sch.get_sblock("s_h2h"))[0])
    for name, fused in (("gates", True), ("o_gate", not gate_outer_first)):
        outer = sch.get(sch.get_loops(sch.get_sblock(name))[0])
        assert outer.same_as(tiles) == fused, name
    got, ref = outputs(workload, compile_func(sch.mod["main"]), workload.input_arrays(seed=7))
    assert_close(got, ref)


#: The product, the gate blocks AutoInline inlines, and the cell update that then reads
#: several gates of the product at constant indices (which TVM's region solver cannot
#: place under the tiles: reverse_compute_at gives up).
PRODUCTS = {
    "lstm": ("s_h2h", ("i_gate", "f_gate", "g_gate", "o_gate"), ("next_c", "next_h")),
    "gru": ("hw_dense", ("r", "z", "n"), ("h_new",)),
}


@pytest.mark.parametrize("kind", sorted(PRODUCTS))
def test_gate_math_is_merged_into_the_product_tiles(kind):
    """With the gates inlined, the cell update reads several gates of the product at
    constant indices; its nest is merged into the product's tile loop (checked by
    ``merge_problem``), so the whole step is one parallel loop: one fork per step. Correct
    at 1024 steps on 2 threads."""
    workload = get(kind, seq=1024, batch=1, input=6, hidden=64)
    func = workload.prim_func()
    product, gates, cell = PRODUCTS[kind]
    sch = s_tir.Schedule(func)
    for gate in gates:
        sch.compute_inline(sch.get_sblock(gate))
    sch.annotate(sch.get_sblock(f"{kind}_scan_step"), STEP_PARALLEL, 16)
    b, gate, j, _ = sch.get_loops(sch.get_sblock(product))
    tile, inner = sch.split(j, [8, None])
    sch.reorder(b, tile, gate, inner)
    assert FuseStepEpilogue().apply(sch)
    assert RewriteStepParallelVectorizeUnroll().apply(sch)
    scheduled = sch.mod["main"]
    (scan,) = scan_tir.find_scans(scheduled)
    assert loop_kinds(scan.step.body).count(tvm.tirx.ForKind.PARALLEL) == 1
    # One nest: every block of the step (the state copies too) in the one parallel loop.
    body = scan.step.body
    assert isinstance(body, tvm.tirx.For), type(body)
    assert body.kind == tvm.tirx.ForKind.PARALLEL and int(body.extent) == 8
    tiles = sch.get(sch.get_loops(sch.get_sblock(product))[0])
    for name in cell:
        assert sch.get(sch.get_loops(sch.get_sblock(name))[0]).same_as(tiles), name
    assert scan_tir.scan_violations(scheduled, expected(func)) == []
    got, ref = outputs(workload, compile_func(scheduled), workload.input_arrays(seed=5))
    assert_close(got, ref)
