"""scan_tir.tune.padding, and the dispatching function's padded branch: a batch between
listed ones run on the body fixed at the next listed batch, over padded copies."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import te, tirx
from tvm.script import tirx as T
from util import compile_func, outputs

import scan_tir
from scan_tir import workloads
from scan_tir.errors import ScanLoweringError
from scan_tir.tune import dynamic_shapes as dyn
from scan_tir.tune.padding import padded

m = tirx.Var("m", "int32")


def plus(c: float) -> tirx.PrimFunc:
    """``B = A + c`` over (m, 8), m symbolic."""
    rows = te.var("m")
    a = te.placeholder((rows, 8), name="A")
    return scan_tir.create_prim_func([a, te.compute((rows, 8), lambda i, j: a[i, j] + c, name="B")])


@T.prim_func(s_tir=True)
def plus_one_padded_to_four(A: T.Buffer((m, 8), "float32"), B: T.Buffer((m, 8), "float32")):
    T.func_attr({"tirx.noalias": True})
    A_1 = T.sblock_alloc_buffer((4, 8))
    B_1 = T.sblock_alloc_buffer((4, 8))
    for i0 in T.parallel(4):
        for i1 in range(8):
            A_1[i0, i1] = T.if_then_else(i0 < m, A[i0, i1], T.float32(0.0))
    with T.sblock("root"):
        T.reads()
        T.writes()
        for i, j in T.grid(4, 8):
            with T.sblock("B"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                T.reads(A_1[v_i, v_j])
                T.writes(B_1[v_i, v_j])
                B_1[v_i, v_j] = A_1[v_i, v_j] + T.float32(1.0)
    for i0 in T.parallel(4):
        for i1 in range(8):
            if i0 < m:
                B[i0, i1] = B_1[i0, i1]


def test_inputs_are_copied_in_zero_padded_and_outputs_copied_out():
    tvm.ir.assert_structural_equal(
        padded(plus(1.0), {"m": 4}),
        plus_one_padded_to_four.with_attr("global_symbol", "main"),
        map_free_vars=True,
    )


@pytest.mark.parametrize("batch, seq", [(1, 1), (3, 5), (7, 600), (8, 3)])
def test_an_lstm_padded_to_batch_8_is_right_below_it(batch, seq):
    """Rows are independent: the padding rows change no real one, at 600 steps too."""
    sizes = {"input": 16, "hidden": 32}
    func = workloads.get("lstm", seq=4, batch=2, **sizes).symbolic_func(["batch", "seq"])
    lib = compile_func(padded(func, {"batch": 8}))
    case = workloads.get("lstm", seq=seq, batch=batch, **sizes)
    got, want = outputs(case, lib, case.input_arrays())
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch, seq", [(1, 3), (8, 2), (20, 300)])
def test_an_lstm_in_chunks_of_batch_8_is_right_at_any_batch(batch, seq):
    """Batch 20: two whole chunks and one of 4 rows padded to 8."""
    sizes = {"input": 16, "hidden": 32}
    func = workloads.get("lstm", seq=4, batch=2, **sizes).symbolic_func(["batch", "seq"])
    lib = compile_func(padded(func, {"batch": 8}, chunked=True))
    case = workloads.get("lstm", seq=seq, batch=batch, **sizes)
    got, want = outputs(case, lib, case.input_arrays())
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_chunks_of_two_sizes_are_refused():
    func = workloads.get("lstm", seq=4, batch=2, input=16, hidden=32).symbolic_func(
        ["batch", "seq"])
    with pytest.raises(ScanLoweringError, match="chunks of one size only"):
        padded(func, {"batch": 8, "seq": 4}, chunked=True)


def test_chunks_of_a_size_in_two_dimensions_are_refused():
    rows = te.var("m")
    a = te.placeholder((rows, rows), name="A")
    square = scan_tir.create_prim_func([a, te.compute((rows, rows), lambda i, j: a[j, i])])
    padded(square, {"m": 4})  # padding both dimensions is right
    with pytest.raises(ScanLoweringError, match="'A' has the size in 2 dimensions"):
        padded(square, {"m": 4}, chunked=True)


def test_a_size_that_is_not_a_whole_dimension_is_refused():
    """Rows of ``m * 8`` (a hoisted product's layout): padding ``m`` would move them."""
    rows = te.var("m")
    a = te.placeholder((rows, 8), name="A")
    flat = te.compute((rows * 8,), lambda i: a[i // 8, i % 8], name="B")
    with pytest.raises(ScanLoweringError, match="dimension 0 of parameter 'B' is m \\* 8"):
        padded(scan_tir.create_prim_func([a, flat]), {"m": 4})


def two(c: float) -> tirx.PrimFunc:
    rows, cols = te.var("batch"), te.var("seq")
    a = te.placeholder((rows, cols), name="A")
    return scan_tir.create_prim_func(
        [a, te.compute((rows, cols), lambda i, j: a[i, j] + c, name="B")]
    )


def test_batches_between_listed_ones_take_the_padded_branch():
    """Listed batches 1 and 4, padding above batch 2 (so batch 3 only): the padded body
    (made to add 2) runs at batch 3; the fixed bodies (add 1) at 1 and 4; the generic
    kernel (add 1) at 2 and at 5, up to the chunks' threshold; the body in chunks of 4
    (made to add 3) above 5."""
    names, step, instances = ["batch", "seq"], [0], {"batch": [1, 4], "seq": [8]}
    table = {(1, 8): 0, (4, 8): 0}
    pads = {4: (2, {0: padded(two(2.0), {"batch": 4})})}
    beyond = (5, {0: padded(two(3.0), {"batch": 4}, chunked=True)})
    kernel = dyn._Kernel(two(1.0), None, "k", {})
    func = dyn._dispatching(two(0.0), names, step, instances, [kernel], table, table, set(),
                            pads, beyond)
    lib = compile_func(func)
    for rows, want in {1: 1.0, 2: 1.0, 3: 2.0, 4: 1.0, 5: 1.0, 6: 3.0, 11: 3.0}.items():
        a, b = (tvm.runtime.tensor(np.zeros((rows, 9), "float32")) for _ in range(2))
        lib["main"](a, b)
        assert np.all(b.numpy() == want), rows


def test_a_batch_pads_where_the_fixed_body_beats_the_generic_build_per_row():
    """Fixed body at batch 4 1 ms, generic 3 ms: batch b pads where 1 < 3 * b / 4, so 2
    and 3. At 16: 10 against 11 pads 15 only, and no chunks beyond 16 (two cost 20);
    at 5 against 11, chunks beyond 16; at 6.6, above 19 (two chunks, 13.2, against the
    generic build's 11 * b / 16). A padded body wrong where checked leaves its interval
    to the generic build."""
    class Bench:
        target = scan_tir.tune.default_target()
        wrong: set = set()

        def check(self, lib, instance):
            return 0.0 if instance in self.wrong else 1.0

    names, step, instances = ["batch", "seq"], [0], {"batch": [1, 4, 16], "seq": [8, 64]}
    grid = [(b, s) for b in (1, 4, 16) for s in (8, 64)]
    table = dict.fromkeys(grid, 0)
    figures = [{(1, 8): 0.5, (4, 8): 1.0, (16, 8): 10.0}]
    generic = {(1, 8): 0.6, (4, 8): 3.0, (16, 8): 11.0}
    bench = Bench()
    kernels = [dyn._Kernel(two(1.0), None, "k", {})]

    def pads(figures=figures, bench=bench, unfixed=frozenset()):
        return dyn._pads(names, step, instances, kernels, table, figures, generic,
                         set(unfixed), bench)

    within, beyond = pads()
    assert {at: start for at, (start, _) in within.items()} == {4: 1, 16: 14} and not beyond
    within, beyond = pads(figures=[{**figures[0], (16, 8): 5.0}])  # two chunks: 10 < 11
    assert beyond[0] == 16 and set(beyond[1]) == {0}
    assert pads(figures=[{**figures[0], (16, 8): 6.6}])[1][0] == 19
    bench.wrong = {(2, 8)}  # the batch-4 padding checked at its smallest batch
    assert set(pads()[0]) == {16}
    # a body that does not build fixed at 16 is not padded there either
    assert set(pads(bench=Bench(), unfixed={(0, (16,))})[0]) == {4}
