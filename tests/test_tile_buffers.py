"""scan_tir.transform.tile_buffers: a tile's own buffer sized by the tile at a symbolic size."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir, te
from tvm.s_tir.schedule import Schedule
from util import compile_func

from scan_tir.transform.tile_buffers import BoundTileBuffers


def product(batch):
    """``C = A W^T`` over ``batch`` rows, its rows tiled by 4, each tile computed into a
    buffer of its own (``C_global``) under the predicate ``row < batch``."""
    a = te.placeholder((batch, 16), name="A")
    w = te.placeholder((8, 16), name="W")
    k = te.reduce_axis((0, 16), name="k")
    c = te.compute((batch, 8), lambda i, j: te.sum(a[i, k] * w[j, k], axis=k), name="C")
    sch = Schedule(te.create_prim_func([a, w, c]))
    block = sch.get_sblock("C")
    rows, _, _ = sch.get_loops(block)
    tiles, _ = sch.split(rows, [None, 4])
    sch.reverse_compute_at(sch.cache_write(block, 0, "global"), tiles)
    return sch.mod["main"]


def allocated(func):
    shapes = {}

    def on_block(block):
        shapes.update({str(b.name): [d for d in b.ty.shape] for b in block.alloc_buffers})

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, on_block))
    return shapes


def test_tvm_sizes_the_tile_buffer_int_max_at_a_symbolic_batch():
    """The bug the pass works around: TVM's own pipeline cannot build the tiled product
    of symbolic batch (the day it can, the pass may go)."""
    with pytest.raises(Exception, match="negative value"):
        tvm.compile(tvm.IRModule({"main": product(te.var("batch"))}), target="llvm")


def test_the_tile_buffer_holds_one_tile():
    bounded = BoundTileBuffers(tvm.IRModule({"main": product(te.var("batch"))}))["main"]
    assert [int(d) for d in allocated(bounded)["C_global"]] == [4, 8]


@pytest.mark.parametrize("batch", [1, 3, 4, 5, 13])
def test_the_product_is_right_at_every_batch(batch):
    lib = compile_func(product(te.var("batch")))
    rng = np.random.default_rng(batch)
    a = rng.uniform(-1, 1, (batch, 16)).astype("float32")
    w = rng.uniform(-1, 1, (8, 16)).astype("float32")
    c = tvm.runtime.tensor(np.full((batch, 8), np.nan, "float32"))
    lib["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(w), c)
    np.testing.assert_allclose(c.numpy(), a @ w.T, rtol=1e-5, atol=1e-5)


def test_a_fixed_size_function_is_left_as_it_is():
    func = product(12)
    assert BoundTileBuffers(tvm.IRModule({"main": func}))["main"].same_as(func)
