"""scan_tir.transform.pipeline: the TIR pipeline of every build, and the functions it
lowers without StorageRewrite."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import te
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


def test_buffers_of_symbolic_size_are_found():
    assert [b.name for b in symbolic_allocations(chain(te.var("n")))] == ["X", "Y", "Z"]
    assert merged_unsafely(chain(te.var("n")))
    assert symbolic_allocations(chain(8)) == [] and not merged_unsafely(chain(8))


def test_buffers_of_symbolic_size_keep_their_own_allocations():
    """Merged, the first and third intermediates would get one allocation sized with an
    int32 count of bits (src/tir/transforms/storage_rewrite.cc), which wraps at 2**26
    floats unless TVM's simplifier happens to cancel it (here it does; in a dispatching
    function it did not: tests/test_dispatch.py). The pipeline lowers any function with
    two such buffers without that pass: each keeps its own allocation. Right against
    numpy."""
    lowered = []

    @tvm.instrument.pass_instrument
    class Lowered:
        def run_after_pass(self, mod, info):
            if info.name == "scan_tir.LowerApart":
                lowered.append(mod)

    with tvm.transform.PassContext(instruments=[Lowered()]):
        lib = compile_func(chain(te.var("n")))
    allocated = [line.split("=")[0].strip() for line in str(lowered[0]).splitlines()
                 if "T.alloc_buffer" in line]
    assert allocated == ["X", "Y", "Z"]  # merged: X (X and Z) and Y
    a = np.arange(1000, dtype="float32")
    b = tvm.runtime.tensor(np.zeros(1000, "float32"))
    lib["main"](tvm.runtime.tensor(a), b)
    y = (a[::-1] + 1) * 2
    np.testing.assert_array_equal(b.numpy(), 2 * y[::-1] + 3)
