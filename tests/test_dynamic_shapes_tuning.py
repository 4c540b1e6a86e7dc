"""scan_tir.tune.dynamic_shapes, the tests that tune a work dir of their own: the order
the tasks are tuned in, records that replay at some batches only, where candidates are
timed, packed weights. In a file apart from test_dynamic_shapes.py so that the two run on
both pytest workers (the suite distributes by file)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tuning import SIZES, assert_right_at, symbolic_lstm, tune_dynamic
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from util import compile_func, outputs

from scan_tir import workloads
from scan_tir.lower.vocabulary import find_scans
from scan_tir.tune import default_target
from scan_tir.tune import dynamic_shapes as dyn
from scan_tir.tune.symbolic import specialize


@pytest.mark.slow
def test_candidates_are_built_before_any_is_timed_and_one_that_does_not_build_is_skipped(
    tmp_path, monkeypatch
):
    """Every candidate's generic build is made with the others (:data:`~dyn.BUILDS` at
    a time) before the first kernel runs, so nothing compiles during a timing; the first
    one is made to fail: that candidate is skipped with the reason, the others serve.
    Only the length is symbolic, so that every record replays generic: a record tuned at
    one batch may not replay where batch is symbolic, and in CI three of four did not."""
    replayed, build, events, generic = dyn._replayed, dyn._build, [], []

    def marked(*args):
        kernel = replayed(*args)
        if not isinstance(kernel, str) and not kernel.bodies:  # it has a generic build
            first = not generic
            kernel.func = kernel.func.with_attr("test.generic", "fails" if first else "builds")
            generic.append(kernel.func)
            events.append("test.generic")
        return kernel

    def failing_the_first(func, target):
        # the generic function itself, not a body derived from it (one specialized where
        # a replay fails, or padded), which keeps its attributes
        mark = any(func.same_as(g) for g in generic)
        events.append("generic build" if mark else "build")
        if mark and func.same_as(generic[0]):
            raise RuntimeError("no code for this one")
        return build(func, target)

    def check(self, lib, instance):
        events.append("run")
        return real_check(self, lib, instance)

    real_check = dyn._Bench.check
    monkeypatch.setattr(dyn, "_replayed", marked)
    monkeypatch.setattr(dyn, "_build", failing_the_first)
    monkeypatch.setattr(dyn._Bench, "check", check)
    result = dyn.dynamic(
        symbolic_lstm(["seq"]), tmp_path, {"seq": [4, 32]}, trials=4, population=8,
        candidates=4, kernels=2,
    )
    failed = [s for s in result.skipped if "no code for this one" in s]
    assert len(failed) == 1 and failed[0].endswith(
        ": does not build (RuntimeError: no code for this one)"
    )
    first_run = events.index("run")
    assert events.count("generic build") == events.count("test.generic") >= 2
    assert "generic build" not in events[first_run:]
    lib = compile_func(result.func)
    case = workloads.get("lstm", seq=7, **SIZES)
    got, want = outputs(case, lib, case.input_arrays())
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_record_that_replays_only_at_its_batch_serves_that_batch(tmp_path, monkeypatch):
    """A schedule tuned at batch 1 may fuse the batch loop (extent 1) with another, which
    the symbolic batch refuses: made to happen here, that record is replayed with the
    batch fixed and serves the batches it replays at only; shapes off the grid go to a
    generic kernel, and every shape is right."""
    real, refused = dyn.replay_sized, []

    def refuses_the_first_generic(trace, func, cap=None):
        if not refused and "batch" in str(func.body):
            refused.append(trace)
            raise ValueError("Merge loop's `extent` must be same")
        return real(trace, func, cap)

    monkeypatch.setattr(dyn, "replay_sized", refuses_the_first_generic)
    # Three records per batch: a record tuned at batch 4 may not replay where batch is
    # symbolic on its own either, and one generic kernel is needed off the grid.
    result = dyn.dynamic(
        symbolic_lstm(["batch", "seq"]), tmp_path, {"batch": [1, 4], "seq": [4, 32]},
        trials=6, population=8, candidates=3, kernels=2,
    )
    assert refused and any(
        "serves {'batch': 1}" in s and "(ValueError: Merge loop" in s
        for s in result.skipped
    )
    lib = compile_func(result.func)
    assert_right_at(lib, "lstm", [(1, 1), (1, 32), (1, 40), (2, 5), (4, 4), (5, 33)])


@pytest.mark.slow
@pytest.mark.parametrize("held_faster", [True, False])
def test_a_row_tile_longer_than_a_listed_length_is_held_to_it_there(
    tmp_path, monkeypatch, held_faster
):
    """A record tuned at 32 steps tiles the GRU's hoisted product by 32 steps: at the
    listed 4 steps its body is replayed with the tile held to 4 steps (a body of its
    own, keyed so) where that body is timed the faster, else the body not held serves
    there too; at 32 steps it keeps its tile; every shape right against numpy."""
    timed = dyn._Bench.time

    def time(self, kernel, instance, best=float("inf"), generic=False, hold=True):
        ms_ = timed(self, kernel, instance, best, generic, hold)  # built, run, timed
        if instance == (2, 4) and not generic:  # which body wins, made deterministic
            return 1.0 if hold == held_faster else 2.0
        return ms_

    monkeypatch.setattr(dyn._Bench, "time", time)
    func = workloads.get("gru", seq=32, **SIZES).symbolic_func(["batch", "seq"])
    func = func.with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": specialize(func, {"batch": 2, "seq": 32})})
    sch = s_tir.Schedule(mod)
    rows = sch.get_loops(sch.get_sblock("xw_dense"))[0]
    sch.split(rows, sch.sample_perfect_tile(rows, n=2, decision=[1, 32]))
    database = ms.database.JSONDatabase(work_dir=str(tmp_path))
    target = default_target()
    database.commit_tuning_record(
        ms.database.TuningRecord(sch.trace, database.commit_workload(mod), [1e-3], target)
    )
    result = dyn.dynamic(  # the record committed is the task's one trial: nothing tuned
        func, tmp_path, {"batch": [2], "seq": [4, 32]}, trials=1, candidates=1, kernels=1,
        representatives=[(2, 32)], target=target,
        reference=workloads.get("gru", seq=32, **SIZES).symbolic_case(),
    )
    held = (2, ("seq", 4)) if held_faster else (2,)
    assert result.keys == {(2, 4): held, (2, 32): (2,)}
    # generic, at 32 steps, held to 4 (if); padded below batch 2, in chunks of it beyond
    bodies = 2 + held_faster + len(result.padded) + bool(result.chunked)
    assert len(find_scans(result.func)) == bodies
    lib = compile_func(result.func)
    assert_right_at(lib, "gru", [(2, 1), (2, 4), (2, 5), (2, 32), (2, 33), (1, 3), (3, 40)])


@pytest.mark.slow
def test_each_task_selects_by_the_model_trained_on_the_tasks_before_it(tmp_path, monkeypatch):
    """The first run's model has no record and scores at random; each later one holds
    every record measured before it (a run this short never trains its own; a trial
    whose build failed or timed out, as under CI's load, is committed but not measured).
    The smallest batch's task is tuned in two halves, first and last."""
    seen = []
    tune_module = dyn.tune_module

    def measured() -> int:
        if not (tmp_path / "database_tuning_record.json").exists():
            return 0
        records = ms.database.JSONDatabase(work_dir=str(tmp_path)).get_all_tuning_records()
        return sum(r.run_secs[0].value < 1e9 for r in records)

    def recording(mod, work_dir, trials, target, **kwargs):
        seen.append((mod, trials, kwargs["cost_model"].data_size, measured()))
        return tune_module(mod, work_dir, trials, target, **kwargs)

    monkeypatch.setattr(dyn, "tune_module", recording)
    tune_dynamic(tmp_path, trials=8, representatives=[(4, 4), (1, 4)])
    database = ms.database.JSONDatabase(work_dir=str(tmp_path))
    batch_1 = database.commit_workload(seen[0][0])
    committed = [
        r for r in database.get_all_tuning_records()
        if tvm_ffi.structural_equal(r.workload.mod, batch_1.mod)]
    assert len(committed) == 4  # the budget split evenly
    assert [trials for _, trials, _, _ in seen] == [2, 4, 2]
    assert [size for _, _, size, _ in seen] == [have for *_, have in seen]
    assert 0 == seen[0][2] < seen[1][2] < seen[2][2]  # each run measured some
    assert seen[2][0] is seen[0][0] and seen[1][0] is not seen[0][0]
    batch_4 = specialize(symbolic_lstm(["batch", "seq"]), {"batch": 4, "seq": 4})
    assert tvm_ffi.structural_equal(
        seen[1][0]["main"].without_attr("global_symbol"), batch_4.without_attr("global_symbol"))


@pytest.mark.slow
def test_a_candidate_is_timed_where_its_task_was_tuned(tmp_path, monkeypatch):
    """Candidates are timed at the two shortest lengths, which fit the length's cost;
    one tuned at a longer length is timed there too, else its figure where it was
    tuned would be the line's extrapolation from the short lengths."""
    timed = []
    time_ = dyn._time
    monkeypatch.setattr(
        dyn, "_time", lambda kernel, at, *rest: (timed.append(list(at)), time_(kernel, at, *rest))
    )
    func = workloads.get("gru", seq=32, **SIZES).symbolic_func(["batch", "seq"])
    mod = tvm.IRModule({"main": specialize(func.with_attr("global_symbol", "main"),
                                           {"batch": 2, "seq": 32})})
    database = ms.database.JSONDatabase(work_dir=str(tmp_path))
    target = default_target()
    sch = s_tir.Schedule(mod)
    sch.get_sblock("xw_dense")  # the default schedule: get_top_k drops an empty trace
    database.commit_tuning_record(ms.database.TuningRecord(
        sch.trace, database.commit_workload(mod), [1e-3], target))
    dyn.dynamic(  # the record committed is the task's one trial: nothing tuned
        func, tmp_path, {"batch": [2], "seq": [4, 8, 32]}, trials=1, candidates=1,
        kernels=1, representatives=[(2, 32)], target=target,
        reference=workloads.get("gru", seq=32, **SIZES).symbolic_case(),
    )
    assert timed[0] == [(2, 4), (2, 8), (2, 32)]


@pytest.mark.slow
def test_weights_packed_once_serve_every_shape(tmp_path):
    """With the weights layout-free, the tasks are tuned on packed weights and the
    dispatching function takes them packed, one parameter per distinct layout of its
    kernels: one ``prepack``, then right at listed shapes, between and beyond them, at
    batch 1 and length 1 and at a long length, all on the same packed tensors."""
    wl = workloads.get("lstm", seq=16, **SIZES)
    func = wl.symbolic_func(["batch", "seq"], packed=True)
    result = dyn.dynamic(
        func, tmp_path, {"batch": [1, 4], "seq": [4, 32]}, trials=4, population=8,
        candidates=2, kernels=2, representatives=[(4, 32)], reference=wl.symbolic_case(),
    )
    assert result.packed, "no kernel packs a weight: the test checked nothing"
    lib = result.compile()
    weights = [int(i) for i in func.attrs["layout_free_buffers"]]
    given = wl.input_arrays(seed=5)
    packed = None
    for batch, seq in [(1, 1), (4, 32), (3, 5), (1, 3), (5, 33), (2, 1024)]:
        case = workloads.get("lstm", seq=seq, **{**SIZES, "batch": batch})
        inputs = [given[k] if k in weights else a for k, a in enumerate(case.input_arrays())]
        want = case.numpy(inputs)
        args = [tvm.runtime.tensor(a) for a in inputs]
        args += [tvm.runtime.tensor(np.zeros(w.shape, "float32")) for w in want]
        if packed is None:  # once, from the first call's weights
            packed = [tvm.runtime.tensor(np.zeros(s, d)) for s, d in result.packed]
            lib["prepack"](*args, *packed)
        lib["main"](*args, *packed)
        for got, w in zip(args[len(inputs):], want):
            np.testing.assert_allclose(got.numpy(), w, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{batch=} {seq=}")

