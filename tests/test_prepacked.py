"""``scan_tir.prepacked`` / ``elide_param_copies``: which copies go, which stay, and that
tuned LSTMs compute the same outputs with and without them (1024 steps, 2 threads)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tuning import quick_search, tune_records
from tvm import s_tir, te
from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
from util import assert_scans_kept, block_names, compile_func
from workloads import lstm

import scan_tir


def _copy_then_use(index) -> tvm.tirx.PrimFunc:
    p = te.placeholder((4, 6), "float32", "p")
    copy = te.compute(index(p.shape), lambda i, j: p[index((i, j))], "copy")
    out = te.compute(copy.shape, lambda i, j: copy[i, j] * 2, "out")
    return te.create_prim_func([p, out])


def test_a_same_layout_copy_of_a_parameter_is_elided():
    func = _copy_then_use(lambda ij: ij)
    elided = scan_tir.elide_param_copies(func)
    assert "copy" in block_names(func) and "copy" not in block_names(elided)
    assert s_tir.analysis.verify_well_formed(elided)
    p = np.random.default_rng(0).standard_normal((4, 6)).astype("float32")
    out = tvm.runtime.tensor(np.zeros((4, 6), "float32"))
    compile_func(elided)["main"](tvm.runtime.tensor(p), out)
    np.testing.assert_array_equal(out.numpy(), p * 2)


def test_a_copy_to_another_layout_is_kept():
    func = _copy_then_use(lambda ij: (ij[1], ij[0]))  # a transpose, not the identity
    assert tvm_ffi.structural_equal(scan_tir.elide_param_copies(func), func)


@pytest.mark.slow
def test_prepacked_tuned_lstms_drop_the_weight_copy_and_compute_the_same(
    target, builder, tmp_path
):
    """Against the prepacked function with the copy (RemoveWeightLayoutRewriteBlock only),
    on the same packed weights: bit for bit the same outputs."""
    seq, inp, hidden = 1024, 8, 16
    func = scan_tir.layout_free(scan_tir.create_prim_func(lstm(seq, inp, hidden)), ["Wi", "Wh"])
    _, records = tune_records(func, tmp_path, target, builder=builder, **quick_search())
    rng = np.random.default_rng(3)
    elided_any = False
    for record in records:
        sch = s_tir.Schedule(func)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        with_copy = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)["main"]
        without = scan_tir.prepacked(sch.mod)["main"]
        assert s_tir.analysis.verify_well_formed(without)
        assert_scans_kept(without, func)
        elided_any |= len(block_names(without)) < len(block_names(with_copy))
        args = [
            (rng.standard_normal([int(d) for d in p.ty.shape]) * 0.3).astype("float32")
            for p in with_copy.params
        ]
        outs = []
        for f in (with_copy, without):
            tensors = [tvm.runtime.tensor(a) for a in args]
            compile_func(f)["main"](*tensors)
            outs.append([t.numpy() for t in tensors[-2:]])
        for a, b in zip(*outs):
            np.testing.assert_array_equal(a, b)
    assert elided_any, "no record had a weight copy to elide: the test checked nothing"
