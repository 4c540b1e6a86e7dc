"""``pad_rows``: which blocks are padded, how (TVMScript expected values), which are left
alone, and that a padded function computes what the original does at every size."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import s_tir, te
from tvm.script import tirx as T
from util import compile_func, outputs, run

import scan_tir
from scan_tir import workloads
from scan_tir.transform.padded_rows import pad_rows
from scan_tir.tune.symbolic import size_vars

RNG = np.random.default_rng(5)


@T.prim_func(private=True, s_tir=True)
def hoisted(x_h: T.handle, w: T.Buffer((8, 3), "float32"), y_h: T.handle):
    n = T.int64()
    x = T.match_buffer(x_h, (n, 3), "float32")
    y = T.match_buffer(y_h, (n, 8), "float32")
    P = T.sblock_alloc_buffer((n, 8))
    for i, j, k in T.grid(n, 8, 3):
        with T.sblock("proj"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                P[vi, vj] = T.float32(0)
            P[vi, vj] = P[vi, vj] + x[vi, vk] * w[vj, vk]
    for i, j in T.grid(n, 8):
        with T.sblock("out"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = P[vi, vj] * T.float32(2)


@T.prim_func(private=True, s_tir=True)
def hoisted_padded(x_h: T.handle, w: T.Buffer((8, 3), "float32"), y_h: T.handle):
    n = T.int64()
    x = T.match_buffer(x_h, (n, 3), "float32")
    y = T.match_buffer(y_h, (n, 8), "float32")
    P = T.sblock_alloc_buffer(((n + T.int64(7)) // T.int64(8) * T.int64(8), 8))
    for i, j, k in T.grid((n + T.int64(7)) // T.int64(8) * T.int64(8), 8, 3):
        with T.sblock("proj"):
            vi = T.axis.spatial((n + T.int64(7)) // T.int64(8) * T.int64(8), i)
            vj, vk = T.axis.remap("SR", [j, k])
            T.reads(x[T.min(vi, n - T.int64(1)), vk], w[vj, vk])
            T.writes(P[vi, vj])
            with T.init():
                P[vi, vj] = T.float32(0)
            P[vi, vj] = P[vi, vj] + x[T.min(vi, n - T.int64(1)), vk] * w[vj, vk]
    for i, j in T.grid(n, 8):
        with T.sblock("out"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = P[vi, vj] * T.float32(2)


@T.prim_func(private=True, s_tir=True)
def reversed_producer(x_h: T.handle, w: T.Buffer((8, 3), "float32"), y_h: T.handle):
    n = T.int64()
    x = T.match_buffer(x_h, (n, 3), "float32")
    y = T.match_buffer(y_h, (n, 8), "float32")
    Q = T.sblock_alloc_buffer((n, 3))
    P = T.sblock_alloc_buffer((n, 8))
    for i, k in T.grid(n, 3):
        with T.sblock("flip"):
            vi, vk = T.axis.remap("SS", [i, k])
            Q[n - T.int64(1) - vi, vk] = x[vi, vk]
    for i, j, k in T.grid(n, 8, 3):
        with T.sblock("proj"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                P[vi, vj] = T.float32(0)
            P[vi, vj] = P[vi, vj] + Q[vi, vk] * w[vj, vk]
    for i, j in T.grid(n, 8):
        with T.sblock("out"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = P[vi, vj] * T.float32(2)


def _n(func):
    return size_vars(func)["n"]


def test_a_hoisted_product_is_padded_and_reads_its_input_clamped():
    """The product's rows grow to a multiple of 8 and its input is read at the last real
    row beyond the end; the block writing the output keeps its extent."""
    padded = pad_rows(hoisted, [(_n(hoisted), 8)])
    tvm.ir.assert_structural_equal(padded, hoisted_padded, map_free_vars=True)


def test_a_block_reading_an_unpadded_intermediate_is_left_alone():
    """``flip`` writes Q along a reversed index, so it is not padded, and ``proj``, which
    reads Q row by row, may not read rows Q does not have: nothing changes."""
    func = pad_rows(reversed_producer, [(_n(reversed_producer), 8)])
    tvm.ir.assert_structural_equal(func, reversed_producer)


def test_nothing_to_pad_at_a_multiple_of_one_or_a_static_extent():
    assert pad_rows(hoisted, [(_n(hoisted), 1)]).same_as(hoisted)
    assert pad_rows(hoisted, [(tvm.tirx.IntImm("int64", 16), 8)]).same_as(hoisted)


@pytest.mark.parametrize("func", [hoisted, reversed_producer], ids=["hoisted", "reversed"])
def test_the_padded_function_computes_the_same(func):
    padded = pad_rows(func, [(_n(func), 8)])
    before, after = (compile_func(f.with_attr("global_symbol", "main")) for f in (func, padded))
    for n in (1, 5, 8, 13, 1000):
        x = RNG.standard_normal((n, 3)).astype("float32")
        w = RNG.standard_normal((8, 3)).astype("float32")
        want = run(before, [x, w], [(n, 8)])[0]
        np.testing.assert_array_equal(run(after, [x, w], [(n, 8)])[0], want)


def test_a_scan_reading_padded_rows_keeps_its_scope_a_stage_pipeline():
    """The scan reads the first seq x batch rows of the padded projection; TVM cannot prove
    them covered by the ``ceildiv(seq * 2, 32) * 32`` written, so the scan's read is
    widened to every row, and a trace may still inline the initial state into the scan
    (before: 'The scope ... is not a stage pipeline')."""
    wl = workloads.get("lstm", seq=16, batch=2, input=16, hidden=32)
    func = scan_tir.create_prim_func(
        wl.recurrence.build(**{**wl.sizes, "seq": te.var("seq")}), options=wl.options
    )
    padded = pad_rows(func, [(size_vars(func)["seq"] * 2, 32)])
    sch = s_tir.Schedule(tvm.IRModule({"main": padded}))
    scan = sch.get_sblock("lstm_scan")
    assert sch.state._get_cached_flags(sch.get_sref(scan)).region_cover
    read = next(r for r in sch.get(scan).reads if r.source.name == "Xi2h_bias")
    assert str(read.region[0].extent) == "(seq * 2 + 31) // 32 * 32"
    sch.compute_inline(sch.get_sblock("c_init"))
    lib = compile_func(sch.mod["main"])
    for seq in (1, 17):
        w = workloads.get("lstm", seq=seq, batch=2, input=16, hidden=32)
        got, want = outputs(w, lib, w.input_arrays())
        for g, r in zip(got, want):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
