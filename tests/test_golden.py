"""Golden lowerings: the S-TIR the converter emits for two small running sums, pinned as
TVMScript (as TVM pins expected modules in its own tests). Any change to the lowering, in a
block, an annotation, a region or a buffer view, fails here with the first difference; if
the change is meant, print the new function (``func.script()``) and update the script
below after reading it."""

# The expected functions are TVMScript, with the variables the printer names (a unit loop's
# variable, a 0-d block's iterator) even where Python sees them unused.
# ruff: noqa: B007, F841

from __future__ import annotations

import pytest
import tvm
import tvm_ffi
from tvm import te
from tvm.script import tirx as T
from util import block_names

import scan_tir
from scan_tir import LoweringOptions

LENGTH, WIDTH = 6, 4


def cumsum_graph():
    """s[0] = x[0]; s[t] = s[t-1] + x[t]: the scan's state is the output."""
    x = te.placeholder((LENGTH, WIDTH), name="X")
    s = te.placeholder((LENGTH, WIDTH), name="s")
    init = te.compute((1, WIDTH), lambda _, i: x[0, i], name="s_init")
    update = te.compute((LENGTH, WIDTH), lambda t, i: s[t - 1, i] + x[t, i], name="s_update")
    return [x, scan_tir.scan(init, update, s, name="cumsum")]


# One root-level block per scan (annotated scan_tir.scan) reading the scan's inputs whole
# and writing its state, in a loop of one iteration; inside it the init copy, then the
# serial time loop from 0 over the steps, one step block per iteration with an ordered
# iterator (T.axis.scan), views of the rows it reads and writes (offset_factor=1), and the
# update as an ordinary block on those views.
@T.prim_func(s_tir=True)
def cumsum_lowered(X: T.Buffer((6, 4), "float32"), cumsum: T.Buffer((6, 4), "float32")):
    T.func_attr({"global_symbol": "main", "tirx.noalias": True})
    s_init = T.sblock_alloc_buffer((1, 4))
    for _, i in T.grid(1, 4):
        with T.sblock("s_init"):
            v__, v_i = T.axis.remap("SS", [_, i])
            T.reads(X[0, v_i])
            T.writes(s_init[v__, v_i])
            s_init[v__, v_i] = X[0, v_i]
    for cumsum_once in range(1):
        with T.sblock("cumsum"):
            T.reads(s_init[0, 0:4], X[0:6, 0:4])
            T.writes(cumsum[0:6, 0:4])
            T.sblock_attr({"scan_tir.scan": "cumsum"})
            for i0, i1 in T.grid(1, 4):
                with T.sblock("cumsum_init"):
                    v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
                    T.reads(s_init[v_i0, v_i1])
                    T.writes(cumsum[v_i0, v_i1])
                    T.sblock_attr({"scan_tir.scan_init": "cumsum"})
                    cumsum[v_i0, v_i1] = s_init[v_i0, v_i1]
            for t in range(5):
                with T.sblock("cumsum_step"):
                    v_t = T.axis.scan(5, t)
                    T.reads(cumsum[v_t, 0:4], X[v_t + 1, 0:4])
                    T.writes(cumsum[v_t + 1, 0:4])
                    T.sblock_attr({"scan_tir.scan_step": "cumsum"})
                    s_prev = T.match_buffer(cumsum[v_t, 0:4], (4,), offset_factor=1)
                    X_t = T.match_buffer(X[v_t + 1, 0:4], (4,), offset_factor=1)
                    s_update = T.match_buffer(cumsum[v_t + 1, 0:4], (4,), offset_factor=1)
                    for i in range(4):
                        with T.sblock("s_update"):
                            v_i = T.axis.spatial(4, i)
                            T.reads(s_prev[v_i], X_t[v_i])
                            T.writes(s_update[v_i])
                            s_update[v_i] = s_prev[v_i] + X_t[v_i]


@pytest.mark.parametrize(
    "options",
    # The same function under both: no activation for fast math to rewrite, no copy of the
    # state to move into the step.
    [LoweringOptions.legacy(), LoweringOptions()],
    ids=lambda o: o.label,
)
def test_cumsum(options):
    func = scan_tir.create_prim_func(cumsum_graph(), options=options)
    tvm.ir.assert_structural_equal(func, cumsum_lowered)


def running_sum_graph():
    """A running sum of scalars whose output is a copy of the state's rows 1.. (the state has
    one row more, its init row): topi's LSTM's form, where ``copies_in_step`` applies."""
    x = te.placeholder((LENGTH - 1,), name="X")
    s = te.placeholder((LENGTH,), name="s")
    init = te.compute((1,), lambda _: te.const(0, "float32"), name="s_init")
    update = te.compute((LENGTH,), lambda t: s[t - 1] + x[t - 1], name="s_update")
    scan = te.scan(init, update, s, name="cumsum")
    return [x, te.compute((LENGTH - 1,), lambda t: scan[t + 1], name="out")]


# With the default options the copy ``out`` is computed inside the step from the row just
# written, the scan writes ``out`` too, and the state, read by nothing else, keeps two rows
# used in turn (t % 2). A scalar state's rows are 0-d views; the step's read region of the
# state is the hull of both rows.
@T.prim_func(s_tir=True)
def running_sum_lowered(X: T.Buffer((5,), "float32"), out: T.Buffer((5,), "float32")):
    T.func_attr({"global_symbol": "main", "tirx.noalias": True})
    s_init = T.sblock_alloc_buffer((1,))
    cumsum = T.sblock_alloc_buffer((2,))
    for _ in range(1):
        with T.sblock("s_init"):
            v__ = T.axis.spatial(1, _)
            T.reads()
            T.writes(s_init[v__])
            s_init[v__] = T.float32(0.0)
    for cumsum_once in range(1):
        with T.sblock("cumsum"):
            T.reads(s_init[0], X[0:5])
            T.writes(cumsum[0:2], out[0:5])
            T.sblock_attr({"scan_tir.scan": "cumsum"})
            for i0 in range(1):
                with T.sblock("cumsum_init"):
                    v_i0 = T.axis.spatial(1, i0)
                    T.reads(s_init[v_i0])
                    T.writes(cumsum[v_i0])
                    T.sblock_attr({"scan_tir.scan_init": "cumsum"})
                    cumsum[v_i0] = s_init[v_i0]
            for t in range(5):
                with T.sblock("cumsum_step"):
                    v_t = T.axis.scan(5, t)
                    T.reads(
                        cumsum[
                            T.min(v_t % 2, (v_t + 1) % 2) : T.min(v_t % 2, (v_t + 1) % 2)
                            + (T.max(v_t % 2, (v_t + 1) % 2) + 1 - T.min(v_t % 2, (v_t + 1) % 2))
                        ],
                        X[v_t],
                    )
                    T.writes(cumsum[(v_t + 1) % 2], out[v_t])
                    T.sblock_attr({"scan_tir.scan_step": "cumsum"})
                    s_prev = T.match_buffer(cumsum[v_t % 2], (), offset_factor=1)
                    X_t = T.match_buffer(X[v_t], (), offset_factor=1)
                    s_update = T.match_buffer(cumsum[(v_t + 1) % 2], (), offset_factor=1)
                    out_t = T.match_buffer(out[v_t], (), offset_factor=1)
                    with T.sblock("s_update"):
                        vi = T.axis.spatial(1, 0)
                        T.reads(s_prev[()], X_t[()])
                        T.writes(s_update[()])
                        s_update[()] = s_prev[()] + X_t[()]
                    with T.sblock("out"):
                        vi = T.axis.spatial(1, 0)
                        T.reads(s_update[()])
                        T.writes(out_t[()])
                        out_t[()] = s_update[()]


def test_running_sum_with_its_copy_in_the_step():
    func = scan_tir.create_prim_func(running_sum_graph(), options=LoweringOptions())
    tvm.ir.assert_structural_equal(func, running_sum_lowered)


def test_the_copy_stays_outside_without_the_option():
    """Legacy: the same graph keeps its whole state and copies it after the scan."""
    func = scan_tir.create_prim_func(running_sum_graph(), options=LoweringOptions.legacy())
    assert not tvm_ffi.structural_equal(func, running_sum_lowered)
    (scan,) = scan_tir.find_scans(func)
    assert "out" in block_names(func) and "out" not in block_names(scan.step.body)
