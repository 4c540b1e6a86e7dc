"""scan_tir.tune.dynamic_shapes: one tuning for a grid of lengths, one dispatching function."""

from __future__ import annotations

import numpy as np
import pytest
from tvm import te
from util import compile_func, outputs

import scan_tir
from scan_tir import workloads
from scan_tir.errors import ScanLoweringError
from scan_tir.tune import dynamic_shapes as dyn

SIZES = {"batch": 2, "input": 16, "hidden": 32}


def symbolic_lstm():
    wl = workloads.get("lstm", seq=16, **SIZES)
    seq = te.var("seq")
    return scan_tir.create_prim_func(
        wl.recurrence.build(**{**wl.sizes, "seq": seq}), options=wl.options
    )


@pytest.fixture(scope="module")
def tuned_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("dynamic")


def tune(work_dir, **kwargs):
    return dyn.dynamic(
        symbolic_lstm(), work_dir, {"seq": [4, 32]}, trials=4, population=8, candidates=2,
        kernels=2, **kwargs,
    )


@pytest.mark.slow
def test_one_function_serves_every_length(tuned_dir):
    """Listed lengths, lengths between and beyond them, and 1, against numpy."""
    result = tune(tuned_dir)
    assert set(result.table) == {(4,), (32,)} and set(result.latency_ms) == set(result.table)
    assert 1 <= len(result.kernels) <= 2 and result.candidates >= len(result.kernels)
    assert set(result.table.values()) <= set(range(len(result.kernels)))
    lib = compile_func(result.func)
    for seq in (1, 3, 4, 5, 32, 33, 1024):
        wl = workloads.get("lstm", seq=seq, **SIZES)
        got, want = outputs(wl, lib, wl.input_arrays())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"seq={seq}")


@pytest.mark.slow
def test_a_record_that_does_not_replay_is_skipped_with_its_reason(tuned_dir, monkeypatch):
    """The second run finds its budget spent (no tuning) and replays the same records;
    the first replay is made to fail, and the result comes from the others."""
    real, calls = dyn.replay_sized, []

    def failing_once(trace, func):
        calls.append(trace)
        if len(calls) == 1:
            raise RuntimeError("no replay here")
        return real(trace, func)

    monkeypatch.setattr(dyn, "replay_sized", failing_once)
    result = tune(tuned_dir)
    assert result.skipped == [
        "seq4 #0: does not replay on the symbolic function (RuntimeError: no replay here)"
    ]
    lib = compile_func(result.func)
    wl = workloads.get("lstm", seq=7, **SIZES)
    got, want = outputs(wl, lib, wl.input_arrays())
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_one_function_serves_every_batch_and_length(tmp_path):
    """Batch symbolic too: the step's tiles over batch end in a partial tile at batches
    that are no multiple of theirs (3, 5), and at batch 1 the only tile is partial."""
    wl = workloads.get("lstm", seq=4, **SIZES)
    result = dyn.dynamic(
        wl.symbolic_func(["batch", "seq"]), tmp_path, {"batch": [1, 4], "seq": [4, 16]},
        trials=4, population=8, candidates=2, kernels=2,
    )
    assert set(result.table) == {(1, 4), (1, 16), (4, 4), (4, 16)}
    lib = compile_func(result.func)
    for batch, seq in [(1, 1), (3, 5), (4, 16), (5, 17), (8, 3)]:
        sizes = {**SIZES, "batch": batch}
        case = workloads.get("lstm", seq=seq, **sizes)
        got, want = outputs(case, lib, case.input_arrays())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{batch=} {seq=}")


def test_greedy_choice_covers_the_instances_by_weighted_latency():
    small, large = (1,), (2,)
    timed = [
        ("fast small", {small: 1.0, large: 10.0}),
        ("fast large", {small: 5.0, large: 2.0}),
        ("dominated", {small: 6.0, large: 11.0}),
    ]
    weights = {small: 1.0, large: 1.0}
    assert dyn._choose(timed, [small, large], weights, 1) == [1]  # 7 against 11
    assert dyn._choose(timed, [small, large], weights, 3) == [1, 0]  # nothing gains on 3 ms
    assert dyn._choose(timed, [small, large], {small: 10.0, large: 1.0}, 1) == [0]


def test_a_kernel_wrong_at_one_instance_is_not_used_there():
    """The chosen kernel is checked everywhere; where it is wrong another serves, and the
    reason is kept."""
    small, large = (1,), (2,)

    class Bench:
        def right(self, kernel, instance):
            return not (kernel.where == "fast" and instance == large)

    pool = [
        dyn._Kernel(None, None, "fast", {small: 1.0, large: 1.0}),
        dyn._Kernel(None, None, "slow", {small: 3.0, large: 3.0}),
    ]
    skipped = []
    chosen = dyn._checked_choice(pool, [small, large], {small: 1, large: 1}, 2, Bench(), skipped)
    assert sorted(chosen) == [0, 1] and pool[0].estimate[large] == float("inf")
    assert skipped == ["fast: wrong result at (2,), not used there"]
    with pytest.raises(ScanLoweringError, match=r"no candidate is right at \[\(2,\)\]"):
        dyn._checked_choice(pool[:1], [small, large], {small: 1, large: 1}, 2, Bench(), [])


@pytest.mark.parametrize(
    "instances, message",
    [
        ({"seq": [4], "batch": [1]}, r"no symbolic size \['batch'\]"),
        ({}, r"no instances given for the size\(s\) \['seq'\]"),
        ({"seq": [0, 4]}, "positive instances"),
    ],
)
def test_bad_instances_are_refused_before_tuning(tmp_path, instances, message):
    with pytest.raises(ScanLoweringError, match=message):
        dyn.dynamic(symbolic_lstm(), tmp_path, instances, trials=1)
    assert not any(tmp_path.iterdir())
