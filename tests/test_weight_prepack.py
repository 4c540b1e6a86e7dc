"""``split_weight_prepack``: a function whose kernels each pack a weight their own way takes
each distinct packing as a parameter, filled once by ``prepack``; right in every branch."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import s_tir, tirx
from tvm.script import tirx as T

from scan_tir.transform import PIPELINE, prepack_module, split_weight_prepack
from scan_tir.tune.dispatch import dispatch

# fmt: off
# ruff: noqa: E501, F821


@T.prim_func(s_tir=True)
def packs_by_4(A: T.Buffer((4, 8), "float32"), W: T.Buffer((8, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    T.func_attr({"tirx.noalias": True})
    W_packed = T.sblock_alloc_buffer((2, 8, 4))
    W_copy = T.sblock_alloc_buffer((2, 8, 4))
    for i, j in T.grid(8, 8):
        with T.sblock("W_packed"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(W[vi, vj])
            T.writes(W_packed[vj // 4, vi, vj % 4])
            T.sblock_attr({"meta_schedule.layout_rewrite_preproc": 1})
            W_packed[vj // 4, vi, vj % 4] = W[vi, vj]
    for a, b, c in T.grid(2, 8, 4):
        with T.sblock("W_copy"):
            va, vb, vc = T.axis.remap("SSS", [a, b, c])
            T.reads(W_packed[va, vb, vc])
            T.writes(W_copy[va, vb, vc])
            W_copy[va, vb, vc] = W_packed[va, vb, vc]
    for i, j, k in T.grid(4, 8, 8):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], W_copy[vj // 4, vk, vj % 4])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * W_copy[vj // 4, vk, vj % 4]


@T.prim_func(s_tir=True)
def expected_main(A: T.Buffer((4, 8), "float32"), W: T.Buffer((8, 8), "float32"), C: T.Buffer((4, 8), "float32"), W_packed0: T.Buffer((2, 8, 4), "float32")):
    T.func_attr({"tirx.noalias": True})
    for i, j, k in T.grid(4, 8, 8):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], W_packed0[vj // 4, vk, vj % 4])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * W_packed0[vj // 4, vk, vj % 4]


@T.prim_func(s_tir=True)
def expected_prepack(A: T.Buffer((4, 8), "float32"), W: T.Buffer((8, 8), "float32"), C: T.Buffer((4, 8), "float32"), W_packed0: T.Buffer((2, 8, 4), "float32")):
    T.func_attr({"tirx.noalias": True, "global_symbol": "prepack"})
    for i, j in T.grid(8, 8):
        with T.sblock("W_packed"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(W[vi, vj])
            T.writes(W_packed0[vj // 4, vi, vj % 4])
            T.sblock_attr({"meta_schedule.layout_rewrite_preproc": 1})
            W_packed0[vj // 4, vi, vj % 4] = W[vi, vj]


@T.prim_func(s_tir=True)
def packs_transposed(A: T.Buffer((4, 8), "float32"), W: T.Buffer((8, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    T.func_attr({"tirx.noalias": True})
    W_t = T.sblock_alloc_buffer((8, 8))
    for i, j in T.grid(8, 8):
        with T.sblock("W_t"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(W[vi, vj])
            T.writes(W_t[vj, vi])
            T.sblock_attr({"meta_schedule.layout_rewrite_preproc": 1})
            W_t[vj, vi] = W[vi, vj]
    for i, j, k in T.grid(4, 8, 8):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], W_t[vj, vk])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * W_t[vj, vk]


@T.prim_func(s_tir=True)
def unpacked(A: T.Buffer((4, 8), "float32"), W: T.Buffer((8, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    T.func_attr({"tirx.noalias": True})
    for i, j, k in T.grid(4, 8, 8):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], W[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * W[vk, vj]


# fmt: on


def test_the_packing_moves_to_prepack_and_the_copy_of_the_packed_weight_goes():
    split = split_weight_prepack(packs_by_4.with_attr("global_symbol", "main"))
    tvm.ir.assert_structural_equal(split.main, expected_main.with_attr("global_symbol", "main"))
    tvm.ir.assert_structural_equal(split.prepack, expected_prepack)
    assert [str(p.name) for p in split.packed] == ["W_packed0"]


def test_a_function_that_packs_nothing_is_not_split():
    assert split_weight_prepack(unpacked) is None
    mod, packed = prepack_module(unpacked)
    assert packed == [] and [gv.name_hint for gv in mod.get_global_vars()] == ["main"]


def _run(lib, packed, a, w):
    out = np.zeros((4, 8), "float32")
    args = [tvm.runtime.tensor(a), tvm.runtime.tensor(w), tvm.runtime.tensor(out)]
    made = [tvm.runtime.tensor(np.zeros(s, d)) for s, d in packed]
    lib["prepack"](*args, *made)
    lib["main"](*args, *made)
    return args[2].numpy()


@pytest.mark.parametrize("choice", [0, 1, 2, 3])
def test_each_branch_reads_its_own_packing_and_alike_ones_share_one(choice):
    """Four kernels: two pack alike, one packs transposed, one reads the weight as given.
    Two packed parameters; whichever branch runs, after one ``prepack``, is right."""
    # An Add node, not a constant (``+`` would fold it): dispatch cannot read which kernels
    # it takes, so every kernel is in the function.
    index = tirx.Add(tirx.IntImm("int32", choice), tirx.IntImm("int32", 0))
    kernels = [packs_by_4, packs_transposed, packs_by_4, unpacked]
    joined = dispatch(unpacked, kernels, index)
    joined = joined.with_attr("global_symbol", "main")
    mod, packed = prepack_module(joined)
    assert packed == [((2, 8, 4), "float32"), ((8, 8), "float32")]
    for func in mod.functions.values():
        assert s_tir.analysis.verify_well_formed(func)
    lib = tvm.compile(mod, target="llvm", tir_pipeline=PIPELINE)
    rng = np.random.default_rng(choice)
    a = rng.standard_normal((4, 8)).astype("float32")
    w = rng.standard_normal((8, 8)).astype("float32")
    np.testing.assert_allclose(_run(lib, packed, a, w), a @ w, rtol=1e-5, atol=1e-5)
