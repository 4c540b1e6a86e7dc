"""scan_tir.transform.pipeline: the TIR pipeline of every build, and the functions it
lowers with StorageRewrite's reuse off (or without the pass)."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import s_tir, te
from util import compile_func

from scan_tir.transform import merged_unsafely
from scan_tir.transform.pipeline import symbolic_allocations


def chain(length) -> tvm.tirx.PrimFunc:
    """Four steps: the first intermediate (``length`` floats) dies before the third
    (twice as many) is born, so StorageRewrite would give both one allocation (the
    reversed reads keep it from computing the second in place of the first)."""
    a = te.placeholder((length,), name="A")
    x = te.compute((length,), lambda i: a[i] + 1.0, name="X")
    y = te.compute((length,), lambda i: x[length - 1 - i] * 2.0, name="Y")
    z = te.compute((length, 2), lambda i, j: y[length - 1 - i] + 3.0 * j, name="Z")
    return te.create_prim_func(
        [a, te.compute((length,), lambda i: z[i, 0] + z[i, 1], name="B")]
    )


def lowered_and_built(func: tvm.tirx.PrimFunc) -> tuple[tvm.IRModule, tvm.runtime.Module]:
    """``func`` as the pipeline's TIR lowering leaves it, and built."""
    lowered = []

    @tvm.instrument.pass_instrument
    class Lowered:
        def run_after_pass(self, mod, info):
            if info.name == "scan_tir.LowerApart":
                lowered.append(mod)

    with tvm.transform.PassContext(instruments=[Lowered()]):
        lib = compile_func(func)
    return lowered[0], lib


def allocated(mod: tvm.IRModule) -> list[str]:
    """The buffers ``mod`` allocates, in order."""
    return [line.split("=")[0].strip() for line in str(mod).splitlines()
            if "T.alloc_buffer" in line or "T.alloc_local" in line]


def test_buffers_of_symbolic_size_are_found():
    assert [b.name for b in symbolic_allocations(chain(te.var("n")))] == ["X", "Y", "Z"]
    assert merged_unsafely(chain(te.var("n")))
    assert symbolic_allocations(chain(8)) == [] and not merged_unsafely(chain(8))


def test_buffers_of_symbolic_size_keep_their_own_allocations():
    """Merged, the first and third intermediates would get one allocation sized with an
    int32 count of bits (src/tir/transforms/storage_rewrite.cc), which wraps at 2**26
    floats unless TVM's simplifier happens to cancel it (here it does; in a dispatching
    function it did not: tests/test_dispatch.py). The pipeline lowers any function with
    two such buffers with that pass's reuse off: each keeps its own allocation. Right
    against numpy."""
    lowered, lib = lowered_and_built(chain(te.var("n")))
    assert allocated(lowered) == ["X", "Y", "Z"]  # merged: X (X and Z) and Y
    a = np.arange(1000, dtype="float32")
    b = tvm.runtime.tensor(np.zeros(1000, "float32"))
    lib["main"](tvm.runtime.tensor(a), b)
    y = (a[::-1] + 1) * 2
    np.testing.assert_array_equal(b.numpy(), 2 * y[::-1] + 3)


def staged(length) -> tvm.tirx.PrimFunc:
    """Two intermediates of symbolic size (the second reads the first reversed, so that
    neither is computed in place of the other), and the output computed row by row in a
    local buffer of 16 floats, each row one vector."""
    a = te.placeholder((length, 16), name="A")
    x = te.compute((length, 16), lambda i, j: a[i, j] + 1.0, name="X")
    y = te.compute((length, 16), lambda i, j: x[length - 1 - i, j] * 2.0, name="Y")
    b = te.compute((length, 16), lambda i, j: y[i, j] + 3.0, name="B")
    sch = s_tir.Schedule(te.create_prim_func([a, b]))
    sch.cache_write(sch.get_sblock("B"), 0, "local")
    sch.reverse_compute_at(sch.get_sblock("B_local"), sch.get_loops(sch.get_sblock("B"))[0])
    for block in ("B", "B_local"):
        sch.vectorize(sch.get_loops(sch.get_sblock(block))[-1])
    return sch.mod["main"]


def test_beside_symbolic_allocations_a_local_buffer_gets_its_vector_type():
    """StorageRewrite runs with its reuse off: the symbolic buffers keep their own
    allocations, and the local one, accessed only as whole vectors, becomes one vector
    (what it did for a dispatching function's accumulators, which ran slower as float
    arrays written through ramps; notes.md, issue 17). Right against numpy."""
    lowered, lib = lowered_and_built(staged(te.var("n")))
    assert allocated(lowered) == ["X", "Y", "B_local"]
    assert 'B_local = T.alloc_local((1,), "float32x16")' in str(lowered)
    a = np.arange(37 * 16, dtype="float32").reshape(37, 16)
    b = tvm.runtime.tensor(np.zeros((37, 16), "float32"))
    lib["main"](tvm.runtime.tensor(a), b)
    np.testing.assert_array_equal(b.numpy(), (a[::-1] + 1) * 2 + 3)


def in_place(length) -> tvm.tirx.PrimFunc:
    """Three intermediates of symbolic size, each computed elementwise from the one
    before at its last use: StorageRewrite computes each in place of the one before,
    though the first is one float longer."""
    a = te.placeholder((length + 1,), name="A")
    x = te.compute((length + 1,), lambda i: a[i] + 1.0, name="X")
    y = te.compute((length,), lambda i: x[i] * 2.0, name="Y")
    z = te.compute((length,), lambda i: y[i] + 3.0, name="Z")
    return te.create_prim_func([a, te.compute((length,), lambda i: z[i] * z[i], name="B")])


def test_symbolic_buffers_computed_in_place_are_lowered_again_without_storage_rewrite():
    """With its reuse off StorageRewrite still computes a buffer in place of another and
    sizes the allocation they share as it sizes a merged one (an int32 count of bits);
    where it does so for buffers of symbolic size, the function is lowered again
    without the pass: each keeps its own allocation. Right against numpy."""
    lowered, lib = lowered_and_built(in_place(te.var("n")))
    assert allocated(lowered) == ["X", "Y", "Z"]  # in place: X alone
    a = np.arange(1001, dtype="float32")
    b = tvm.runtime.tensor(np.zeros(1000, "float32"))
    lib["main"](tvm.runtime.tensor(a), b)
    np.testing.assert_array_equal(b.numpy(), ((a[:-1] + 1) * 2 + 3) ** 2)
