"""``MarkOwnedShares``: a persistent launch without barriers where each thread reads only
what it writes itself (a diagonal recurrence), with barriers everywhere else; such a
launch is built as one parallel loop of shares around the time loop.

A missing barrier shows as a wrong result only when a thread reads another's writes; so
the diagonal recurrences are checked against numpy at 4096 steps on 2 threads, and the
check itself on small functions whose nests do and do not cross.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm.script import tirx as T
from tvm.tirx import stmt as S
from util import assert_close, outputs
from workloads import with_seq

from postprocs.persistent_step import shared_out
from scan_tir.transform import PIPELINE, PersistentLaunch
from scan_tir.transform.owned_shares import MarkOwnedShares, verdicts
from scan_tir.transform.persistent_launch import BARRIER, LAUNCH
from scan_tir.tune import linear_forms
from scan_tir.workloads import get


def lowered(func, target) -> tvm.tirx.PrimFunc:
    bind = tvm.tirx.transform.BindTarget(target.with_host(target))
    mod = bind(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}))
    lower, _, _ = tvm.tirx.get_tir_pipeline(PIPELINE)
    return lower(mod)["main"]


def lowered_attrs(func, target, key: str) -> int:
    found: list = []
    tvm_ffi.structural_walk(
        lowered(func, target).body,
        (S.AttrStmt, lambda a: found.append(a) if a.attr_key == key else None),
    )
    return len(found)


def time_loops_inside_parallel(func, target) -> int:
    """How many loops over the sequence run inside a parallel loop (the shares' loop)."""
    found: list = []

    def on_loop(loop: S.For) -> None:
        if loop.kind == tvm.tirx.ForKind.PARALLEL:
            tvm_ffi.structural_walk(
                loop.body,
                (S.For, lambda t: found.append(t) if t.loop_var.name == "t" else None),
            )

    tvm_ffi.structural_walk(lowered(func, target).body, (S.For, on_loop))
    return len(found)


@pytest.mark.parametrize(
    "name, sizes",
    [
        ("selective_scan", {"batch": 1, "d_model": 32, "d_state": 4}),
        ("selective_scan", {"batch": 3, "d_model": 16, "d_state": 4}),
        ("mingru", {"batch": 2, "input": 16, "hidden": 32}),
    ],
)
def test_diagonal_recurrences_run_without_barriers_and_match_numpy(name, sizes, target):
    workload = get(name, **{**with_seq(name, 4096, sizes["batch"]), **sizes})
    marked = shared_out(workload.prim_func(), 2)
    assert verdicts(marked) == [1]
    assert lowered_attrs(marked, target, LAUNCH) == 0
    assert lowered_attrs(marked, target, BARRIER) == 0
    assert time_loops_inside_parallel(marked, target) == 1
    inputs = workload.input_arrays(seed=3)
    lib = tvm.compile(tvm.IRModule({"main": marked}), target=target, tir_pipeline=PIPELINE)
    got, ref = outputs(workload, lib, inputs)
    assert np.abs(ref[0][-1]).max() > 1e-2, "the reference died out; the test would be weak"
    assert_close(got, ref)


def test_an_lstm_keeps_its_barriers(target):
    """Its recurrent product reads every unit of h: no thread owns what it reads."""
    workload = get("lstm", **{**with_seq("lstm", 8, 1), "input": 16, "hidden": 32})
    marked = shared_out(workload.prim_func(), 2)
    (why,) = verdicts(marked)
    assert isinstance(why, str) and why
    assert lowered_attrs(marked, target, BARRIER) > 0


@T.prim_func
def _shifted(A: T.Buffer((8,), "float32")):
    for _t in T.serial(4, annotations={"scan_tir.persistent": 1}):
        tmp = T.alloc_buffer((8,), "float32")
        for i in T.parallel(8):
            tmp[i] = A[i] + T.float32(1)
        for i in T.parallel(8):
            A[i] = tmp[(i + 1) % 8]


@T.prim_func
def _own_rows(A: T.Buffer((2, 8, 4), "float32"), X: T.Buffer((4, 8, 4), "float32")):
    for t in T.serial(4, annotations={"scan_tir.persistent": 1}):
        tmp = T.alloc_buffer((8,), "float32")
        for i in T.parallel(8):
            for n in range(4):
                A[(t + 1) % 2, i, n] = A[t % 2, i, n] * X[t, i, n]
        for i in T.parallel(8):
            tmp[i] = A[(t + 1) % 2, i, 0]


@T.prim_func
def _shared_writes(A: T.Buffer((4,), "float32")):
    for _t in T.serial(4, annotations={"scan_tir.persistent": 1}):
        for i in T.parallel(8):
            A[i // 2] = A[i // 2] + T.float32(1)


@T.prim_func
def _unequal_nests(A: T.Buffer((8,), "float32")):
    for _t in T.serial(4, annotations={"scan_tir.persistent": 1}):
        for i in T.parallel(8):
            A[i] = A[i] + T.float32(1)
        for j in T.parallel(4):
            A[j] = A[j] * T.float32(2)


@T.prim_func
def _tiles(A: T.Buffer((2, 64), "float32")):
    for t in T.serial(4, annotations={"scan_tir.persistent": 1}):
        for i in T.parallel(4):
            for j in T.vectorized(16):
                A[(t + 1) % 2, i * 16 + j] = A[t % 2, i * 16 + j] + T.float32(1)


@T.prim_func
def _history(A: T.Buffer((5, 8), "float32")):
    # Row 0 (the init) is read and written by nobody in the launch.
    for t in T.serial(4, annotations={"scan_tir.persistent": 1}):
        for i in T.parallel(8):
            A[t + 1, i] = A[t, i] * T.float32(0.5)


@pytest.mark.parametrize(
    "func, expected",
    [
        (_shifted, "buffer 'tmp': an iteration reads outside what it writes"),
        (_own_rows, 1),
        (_shared_writes, "buffer 'A': iterations' writes may overlap"),
        (_unequal_nests, "the nests' parallel loops differ in extent: 8, 4"),
        (_tiles, 1),
        (_history, 1),
    ],
)
def test_the_check(func, expected):
    assert verdicts(func) == [expected]


@T.prim_func
def _own_rows_in_shares(A: T.Buffer((2, 8, 4), "float32"), X: T.Buffer((4, 8, 4), "float32")):
    tmp = T.alloc_buffer((8,), "float32")
    for share in T.parallel(8):
        for t in range(4):
            for n in range(4):
                A[(t + 1) % 2, share, n] = A[t % 2, share, n] * X[t, share, n]
            tmp[share] = A[(t + 1) % 2, share, 0]


def test_an_owned_launch_becomes_a_loop_of_shares_around_the_time_loop():
    marked = MarkOwnedShares(tvm.IRModule({"main": _own_rows}))
    after = PersistentLaunch(marked)["main"]
    expected = _own_rows_in_shares.with_attr("global_symbol", "_own_rows")
    tvm.ir.assert_structural_equal(after, expected, map_free_vars=True)


def test_owned_launch_computes_what_the_serial_loop_does():
    a = np.random.default_rng(0).standard_normal((2, 8, 4)).astype("float32")
    x = np.random.default_rng(1).standard_normal((4, 8, 4)).astype("float32")
    want = a.copy()
    for t in range(4):
        want[(t + 1) % 2] = want[t % 2] * x[t]
    args = [tvm.runtime.tensor(a.copy()), tvm.runtime.tensor(x)]
    tvm.compile(tvm.IRModule({"main": _own_rows}), target="llvm", tir_pipeline=PIPELINE)(*args)
    np.testing.assert_allclose(args[0].numpy(), want, rtol=1e-6)


def test_chunked_selective_scan_runs_every_pass_without_barriers(target):
    """Each pass of the chunked form (chunk-local scans, the carry, the rerun) is diagonal
    over chunks and channels."""
    workload = get("selective_scan", seq=4096, batch=1, d_model=8, d_state=4)
    func = linear_forms(workload.tensors(), chunks=(64,))["chunked 64"]
    marked = shared_out(func, 2)
    assert verdicts(marked) == [1, 1, 1]
    assert lowered_attrs(marked, target, BARRIER) == 0
    lib = tvm.compile(tvm.IRModule({"main": marked}), target=target, tir_pipeline=PIPELINE)
    got, ref = outputs(workload, lib, workload.input_arrays(seed=4))
    assert_close(got, ref)
