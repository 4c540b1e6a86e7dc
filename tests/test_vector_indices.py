"""scan_tir.transform.vector_indices: vector index bindings that TVM's CSE hoists out of
parallel loops, substituted back into their uses."""

from __future__ import annotations

import numpy as np
import tvm
from tvm.script import tirx as T
from tvm.tirx import stmt as S

from scan_tir.transform.pipeline import PIPELINE
from scan_tir.transform.vector_indices import inline_vector_indices
from scan_tir.tune import default_target


@T.prim_func
def two_branches(A: T.Buffer((4, 256), "float32"), B: T.Buffer((4, 256), "float32"), n: T.int32):
    # two branches with one lane pattern (two runs of 16), as a dispatching function's
    # kernels share their tiles' patterns
    if n == 1:
        for p in T.parallel(4):
            for i in T.vectorized(32):
                B[p, i // 16 * 128 + i % 16] = A[p, i // 16 * 128 + i % 16] * T.float32(2)
    else:
        for p in T.parallel(4):
            for i in T.vectorized(32):
                B[p, i // 16 * 128 + i % 16] = A[p, i // 16 * 128 + i % 16] + T.float32(1)


def lowered(pipeline: str) -> tvm.tirx.PrimFunc:
    target = default_target()
    passes, _, _ = tvm.tirx.get_tir_pipeline(pipeline)
    mod = tvm.IRModule({"main": two_branches})
    with tvm.transform.PassContext(opt_level=3):
        return passes(tvm.tirx.transform.BindTarget(target.with_host(target))(mod))["main"]


def vector_binds_outside_parallel_loops(func: tvm.tirx.PrimFunc) -> list[str]:
    found: list[str] = []

    def visit(stmt: S.Stmt, inside: bool) -> None:
        if isinstance(stmt, S.Bind) and not inside:
            dtype = getattr(stmt.var.ty, "dtype", None)
            if dtype is not None and tvm.DataType(str(dtype)).lanes > 1:
                found.append(str(stmt.var.name))
        children: list[S.Stmt] = []
        if isinstance(stmt, S.SeqStmt):
            children = list(stmt.seq)
        elif isinstance(stmt, S.IfThenElse):
            children = [stmt.then_case] + ([stmt.else_case] if stmt.else_case else [])
        elif isinstance(stmt, (S.For, S.AttrStmt, S.While, S.DeclBuffer, S.AllocBuffer)):
            children = [stmt.body] if getattr(stmt, "body", None) is not None else []
        parallel = isinstance(stmt, S.For) and stmt.kind == tvm.tirx.ForKind.PARALLEL
        for child in children:
            visit(child, inside or parallel)

    visit(func.body, False)
    return found


def test_tvm_hoists_the_shared_lane_pattern_out_of_both_parallel_loops():
    """What the pass is for: TVM's own pipeline binds the lane pattern above the branch,
    where the parallel launches receive it in memory (if TVM stops doing this, the pass
    has nothing left to do and this test says so)."""
    assert vector_binds_outside_parallel_loops(lowered("default"))


def test_the_pipeline_keeps_the_lane_pattern_inside_each_access():
    assert vector_binds_outside_parallel_loops(lowered(PIPELINE)) == []


def test_the_built_function_is_right():
    lib = tvm.compile(tvm.IRModule({"main": two_branches}), target=default_target(),
                      tir_pipeline=PIPELINE)
    a = np.random.default_rng(0).standard_normal((4, 256)).astype("float32")
    cols = np.r_[0:16, 128:144]
    for n, want in ((1, a[:, cols] * 2), (2, a[:, cols] + 1)):
        b = tvm.runtime.tensor(np.zeros((4, 256), "float32"))
        lib["main"](tvm.runtime.tensor(a), b, n)
        np.testing.assert_array_equal(b.numpy()[:, cols], want)
        assert not b.numpy()[:, 16:128].any()


@T.prim_func
def bound(
    A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "int32")
):
    lanes: T.let[T.int32x16] = T.Ramp(0, 1, 16) % T.Broadcast(8, 16) * T.Broadcast(2, 16)
    read: T.let[T.int32x16] = C[T.Ramp(0, 1, 16)] + lanes  # reads a buffer: kept
    base: T.let[T.int32] = 4  # a scalar: kept
    for p in T.parallel(2):
        B[lanes + T.Broadcast(p * 32 + base, 16)] = A[read]


@T.prim_func
def substituted(
    A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "int32")
):
    read: T.let[T.int32x16] = (
        C[T.Ramp(0, 1, 16)] + T.Ramp(0, 1, 16) % T.Broadcast(8, 16) * T.Broadcast(2, 16)
    )
    base: T.let[T.int32] = 4
    for p in T.parallel(2):
        B[
            T.Ramp(0, 1, 16) % T.Broadcast(8, 16) * T.Broadcast(2, 16)
            + T.Broadcast(p * 32 + base, 16)
        ] = A[read]


def test_index_arithmetic_is_substituted_and_nothing_else():
    expected = substituted.with_attr("global_symbol", "bound")
    tvm.ir.assert_structural_equal(inline_vector_indices(bound), expected)
    assert inline_vector_indices(substituted).same_as(substituted)
