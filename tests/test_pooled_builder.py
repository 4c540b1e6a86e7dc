"""scan_tir.tune.PooledBuilder: one pool of build workers for a whole run, each worker
replaced after its number of uses; its libraries right, its failures reported per
candidate as LocalBuilder reports them."""

from __future__ import annotations

import tvm
from tvm.s_tir import meta_schedule as ms
from util import assert_close, outputs

from scan_tir import workloads
from scan_tir.tune import PooledBuilder, build_candidate


def _case():
    w = workloads.get("lstm", seq=5, batch=1, input=4, hidden=8)
    mod = tvm.IRModule({"main": w.prim_func()})
    return w, ms.builder.BuilderInput(mod, tvm.target.Target("llvm"))


def _pids(builder: PooledBuilder) -> set[int]:
    return {worker._proc.pid for worker in builder.pool._worker_map.values()}


def test_workers_kept_across_batches_and_their_libraries_right():
    w, job = _case()
    builder = PooledBuilder(max_workers=1, f_build=build_candidate)
    seen = []
    for _ in range(2):
        (result,) = builder.build([job])
        assert result.error_msg is None
        got, want = outputs(w, tvm.runtime.load_module(result.artifact_path), w.input_arrays())
        for g, r in zip(got, want, strict=True):
            assert_close(g, r)
        seen.append(_pids(builder))
    assert len(seen[0]) == 1 and seen[0] == seen[1]


def test_a_worker_is_replaced_after_its_uses():
    _, job = _case()
    builder = PooledBuilder(max_workers=1, f_build=build_candidate, uses=1)
    seen = []
    for _ in range(2):
        (result,) = builder.build([job])
        assert result.error_msg is None
        seen.append(_pids(builder))
    assert seen[0] != seen[1]


def test_a_failed_build_is_that_candidate_s_error():
    _, job = _case()
    builder = PooledBuilder(max_workers=1, f_build="scan_tir.no_such_build")
    results = builder.build([job, job])
    assert [r.artifact_path for r in results] == [None, None]
    assert all("PooledBuilder: An exception occurred" in r.error_msg for r in results)
    assert all("no_such_build" in r.error_msg for r in results)
