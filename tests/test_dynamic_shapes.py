"""scan_tir.tune.dynamic_shapes: one tuning for a grid of shapes, one dispatching function;
the choice and the dispatch on one shared tuning, or on no tuning at all.
(test_dynamic_shapes_tuning.py: the tests that tune a work dir of their own.)"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import tvm
from tuning import SIZES, assert_right_at, symbolic_lstm, tune_dynamic
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from tvm.script import tirx as T
from util import compile_func, outputs

from scan_tir import scan_space, workloads
from scan_tir.errors import ScanLoweringError
from scan_tir.lower.vocabulary import expected_scans, find_scans
from scan_tir.tune import default_target
from scan_tir.tune import dynamic_shapes as dyn
from scan_tir.tune.symbolic import replay_sized, specialize, specialize_body

#: Four records of the task at batch 4, length 32: ``tune_dynamic(work_dir, trials=4)`` in
#: a fresh work dir, logs removed. Tuning here drew records at random, and a draw whose
#: generic builds took 12 s each, not one, made this file run for 23 minutes (notes.md);
#: test_dynamic_shapes_tuning.py tunes.
TUNED = Path(__file__).parent / "data" / "dynamic_lstm_b4s32"


@pytest.fixture(scope="module")
def tuned_dir(tmp_path_factory):
    """A copy of :data:`TUNED`: the budgets the tests ask for (four trials at most) are
    spent already, so nothing here tunes."""
    out = tmp_path_factory.mktemp("dynamic") / "db"
    shutil.copytree(TUNED, out)
    return out


@pytest.mark.slow
def test_one_function_serves_every_batch_and_length(tuned_dir):
    """Listed shapes, shapes between and beyond them, batch 1 and length 1, and a long
    sequence, against numpy. The step's tiles over batch end in a partial tile at
    batches that are no multiple of theirs, and at batch 1 the only tile is partial."""
    result = tune_dynamic(tuned_dir)
    grid = {(1, 4), (1, 32), (4, 4), (4, 32)}
    assert set(result.table) == grid and set(result.latency_ms) == grid
    assert set(result.predicted_ms) == grid and set(result.served_ms) == grid
    assert all(0 < ms < float("inf") for ms in result.served_ms.values())
    assert 1 <= len(result.kernels) <= 2 and 1 <= result.candidates <= 2
    assert set(result.table.values()) <= set(range(len(result.kernels)))
    # each kernel generic where shapes off the grid or an unfixed body reach it (which
    # kernel's generic build is fastest is timed), fixed at every listed batch it serves,
    # padded there where batches below it run padded, and in chunks of batch 4 where
    # batches beyond it do
    assert set(result.generic) == grid
    fixed = {(k, result.keys[i]) for i, k in result.table.items()}  # as unfixed keys them
    generic = set(result.generic.values()) | {k for k, _ in fixed & result.unfixed}
    padded = {(k, batch) for (batch, _), k in result.table.items() if batch in result.padded}
    chunked = {k for (batch, _), k in result.table.items() if batch == 4 and result.chunked}
    assert len(find_scans(result.func)) == (
        len(generic) + len(fixed - result.unfixed) + len(padded) + len(chunked))
    lib = result.compile()
    assert lib is result.built[1]  # the build checked while choosing
    assert_right_at(lib, "lstm", [(1, 1), (1, 3), (4, 4), (3, 5), (4, 32), (5, 33), (2, 1024)])


@pytest.mark.slow
def test_a_batch_no_candidate_was_timed_at_gets_the_chosen_timed_there(tuned_dir):
    """With ``reach=0`` the candidates tuned at batch 4 are built and timed at batch 4
    only; batch 1 has no figure until the chosen kernels are timed there (without that
    the choice fails: no candidate at batch 1). Right at both batches."""
    result = tune_dynamic(tuned_dir, reach=0)
    assert {batch for batch, _ in result.table} == {1, 4}
    assert all(result.latency_ms[i] < float("inf") for i in result.table)
    lib = compile_func(result.func)
    for batch, seq in [(1, 4), (1, 33), (4, 32)]:
        case = workloads.get("lstm", seq=seq, **{**SIZES, "batch": batch})
        got, want = outputs(case, lib, case.input_arrays())
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_body_that_does_not_build_fixed_at_a_batch_is_served_generic_there(
    tuned_dir, monkeypatch
):
    """A schedule whose body fixed at batch 1 does not build (a persistent launch whose
    parallel loop batch 1 removes is refused so) runs its generic body at batch 1."""
    real = dyn.specialize_body

    def refusing_batch_1(func, sizes):
        if sizes == {"batch": 1}:
            raise RuntimeError("not at batch 1")
        return real(func, sizes)

    monkeypatch.setattr(dyn, "specialize_body", refusing_batch_1)
    result = tune_dynamic(tuned_dir)
    at_1 = {(k, (1,)) for (batch, _), k in result.table.items() if batch == 1}
    assert at_1 and at_1 <= result.unfixed
    lib = compile_func(result.func)
    for batch, seq in [(1, 4), (1, 33), (4, 32)]:
        case = workloads.get("lstm", seq=seq, **{**SIZES, "batch": batch})
        got, want = outputs(case, lib, case.input_arrays())
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_kernels_are_checked_against_the_reference_given(tuned_dir):
    """The workload's inputs and numpy reference in place of the untuned function's: the
    same kernels pass, and right; a reference one off everywhere leaves no kernel to
    serve."""
    numpy_at = workloads.get("lstm", seq=16, **SIZES).symbolic_case()
    result = tune_dynamic(tuned_dir, reference=numpy_at)
    assert "of which the reference outputs" in result.seconds
    lib = compile_func(result.func)
    case = workloads.get("lstm", seq=33, **{**SIZES, "batch": 3})
    got, want = outputs(case, lib, case.input_arrays())
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)

    def one_off(sizes):
        inputs, want = numpy_at(sizes)
        return inputs, [a + 1.0 for a in want]

    with pytest.raises(ScanLoweringError, match="wrong result at"):
        tune_dynamic(tuned_dir, reference=one_off)


@pytest.mark.slow
def test_a_record_that_does_not_replay_is_skipped_with_its_reason(tuned_dir, monkeypatch):
    """All four records are candidates; the first is made to fail to replay, generic
    and at its batch, and the result comes from the others."""
    real, calls = dyn.replay_sized, []

    def failing_for_the_first(trace, func, cap=None):
        calls.append(trace)
        if trace.same_as(calls[0]):
            raise RuntimeError("no replay here")
        return real(trace, func, cap)

    monkeypatch.setattr(dyn, "replay_sized", failing_for_the_first)
    # Four records, not two: one tuned record may not replay where batch is symbolic on its
    # own (below), and with the first made to fail none would be left.
    result = tune_dynamic(tuned_dir, trials=4, candidates=4)
    assert result.skipped[0] == (
        "batch4_seq32 #0: does not replay on the symbolic function (RuntimeError: no replay "
        "here), nor at {'batch': 4} (RuntimeError: no replay here)")
    # others may fail on their own: a fusion tuned at batch 1 ("Merge loop's extent must
    # be same") does not replay where batch is symbolic
    assert all("no replay here" not in s for s in result.skipped[1:])
    lib = compile_func(result.func)
    case = workloads.get("lstm", seq=7, **{**SIZES, "batch": 3})
    got, want = outputs(case, lib, case.input_arrays())
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_where_no_record_replays_generic_the_untuned_function_serves_off_the_grid(
    tuned_dir, monkeypatch
):
    """Every record made to refuse the symbolic batch (as a fusion tuned at one batch
    may): the records serve the batches they replay at, the untuned function every
    other shape."""
    real, seen = dyn.replay_sized, []

    def refuses_a_symbolic_batch(trace, func, cap=None):
        if not any(trace.same_as(t) for t in seen):  # a record's first replay is symbolic
            seen.append(trace)
            raise ValueError("Merge loop's `extent` must be same")
        return real(trace, func, cap)  # then on its body fixed at its batch and those near

    monkeypatch.setattr(dyn, "replay_sized", refuses_a_symbolic_batch)
    result = tune_dynamic(tuned_dir)
    assert result.skipped[-1].startswith("no tuned record replays on the symbolic function")
    assert any("batch" in str(k.body) for k in result.kernels)  # the untuned one
    lib = compile_func(result.func)
    for batch, seq in [(1, 1), (2, 5), (4, 32), (6, 40)]:
        case = workloads.get("lstm", seq=seq, **{**SIZES, "batch": batch})
        got, want = outputs(case, lib, case.input_arrays())
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


def test_a_record_with_no_generic_build_serves_the_batches_its_body_builds_at():
    """A record replayed only with its body fixed (at batches 1 and 4), whose body at
    batch 1 does not build (a persistent launch whose parallel loop batch 1 removes is
    refused so): it serves batch 4, the reason kept for batch 1; a record whose every
    body fails raises, and is skipped by the caller."""

    class Bench:
        step, names = [0], ["batch", "seq"]

        def lib(self, kernel, instance):
            if instance[0] == 1:
                raise RuntimeError("persistent time loop 't': a BufferStore runs outside")
            return object()

    at = [(1, 16), (1, 64), (4, 16), (4, 64)]
    kernel = dyn._Kernel(None, None, "r", {}, bodies={(1,): None, (4,): None})
    skipped = []
    assert dyn._built_bodies(kernel, at, Bench(), skipped) == [(4, 16), (4, 64)]
    assert list(kernel.bodies) == [(4,)] and not kernel.serves((1,))
    assert skipped == ["r: does not build at {'batch': 1} (RuntimeError: persistent time "
                       "loop 't': a BufferStore runs outside)"]
    only_1 = dyn._Kernel(None, None, "s", {}, bodies={(1,): None})
    with pytest.raises(RuntimeError, match="persistent time loop"):
        dyn._built_bodies(only_1, at[:2], Bench(), [])


def test_a_kernel_far_slower_than_the_best_is_timed_once():
    """Timing races: one long run far slower than the best at an instance is the kernel's
    figure there; a run near the best, or one too short to trust, is timed in full."""
    class Lib:
        def __init__(self, seconds):
            self.seconds, self.timed = seconds, 0

        def __getitem__(self, name):
            return lambda *args: time.sleep(self.seconds)

        def time_evaluator(self, name, dev, number, repeat, min_repeat_ms):
            def timer(*args):
                self.timed += 1
                return SimpleNamespace(results=[self.seconds] * repeat)
            return timer

    bench = dyn._Bench.__new__(dyn._Bench)
    bench.repeat, bench.step, bench.names = 3, [], ["seq"]
    bench.cases = {(1,): ([np.zeros(2, "float32")], [])}
    for seconds, best, timed in [(0.15, 0.05, 0), (0.15, 100.0, 1), (0.01, 0.001, 1)]:
        lib = Lib(seconds)
        ms = bench.time(dyn._Kernel(None, dyn._Built(lib, []), "k", {}), (1,), best * 1e3)
        assert lib.timed == timed, (seconds, best)
        assert ms >= seconds * 1e3


def test_a_timing_run_is_one_call_where_one_call_takes_20_ms():
    """A timing is ``repeat`` runs of at least 20 ms each, as MetaSchedule's runner times
    the records: where one call takes that long, a run is one call (TVM's evaluator
    makes it 10 calls unless told, and a timing at the longest instances tens of
    seconds). The kernel counts its calls: a chain of dependent multiply-adds, at least
    tens of ms on any machine, then one more in ``calls``."""

    @T.prim_func
    def main(calls: T.Buffer((1,), "float32"), x: T.Buffer((2,), "float32")):
        calls[0] = calls[0] + T.float32(1)
        for _ in range(100_000_000):
            x[0] = x[0] * x[1] + T.float32(1)

    lib = tvm.compile(tvm.IRModule({"main": main}), target="llvm").jit()
    bench = dyn._Bench.__new__(dyn._Bench)
    bench.repeat = 3
    tensors = [tvm.runtime.tensor(np.zeros(1, "float32")),
               tvm.runtime.tensor(np.array([0.0, 0.5], "float32"))]
    assert bench.median_ms(dyn._Built(lib, []), (1,), tensors) >= 20
    assert tensors[0].numpy()[0] == 1 + bench.repeat  # the evaluator's first call untimed


def test_a_modules_first_lookup_is_not_timed():
    """An LLVM module built in this process generates its machine code at its first
    function lookup. Neither a checking run nor a race's one run may count that: a
    kernel would be raced out, or taken for slower than its model, for its code
    generation."""
    class Lib:  # code generation at the first lookup, then a short call
        def __init__(self):
            self.generated, self.timed = False, 0

        def __getitem__(self, name):
            if not self.generated:
                time.sleep(0.15)
                self.generated = True
            return lambda *args: time.sleep(0.002)

        def time_evaluator(self, name, dev, number, repeat, min_repeat_ms):
            def timer(*args):
                self.timed += 1
                return SimpleNamespace(results=[0.002] * repeat)
            return timer

    bench = dyn._Bench.__new__(dyn._Bench)
    bench.repeat, bench.step, bench.names, bench.outputs = 3, [], ["seq"], []
    bench.cases = {(1,): ([np.zeros(2, "float32")], [])}
    assert 0 < bench.check(dyn._Built(Lib(), []), (1,)) < 100
    lib = Lib()
    assert bench.time(dyn._Kernel(None, dyn._Built(lib, []), "k", {}), (1,), 0.001) < 100
    assert lib.timed == 1


def test_the_whole_dispatching_function_is_checked_and_timed_at_every_instance(monkeypatch):
    """The function built whole, not only its kernels built alone: a checking run near the
    figure its kernel was chosen by is its figure; one slower gets a second call, and
    where that is slower too it is timed, and still slower is logged, naming the
    instance; wrong, at either call, raises."""
    logged, timed = [], []
    monkeypatch.setattr(dyn, "log", logged.append)
    latency = {(1,): 0.9, (2,): 2.0, (3,): 1.0}
    calls = {(1,): [1.0], (2,): [9.0, 8.0], (3,): [9.0, 1.1]}  # (3,): a slow first call only
    medians = {(2,): 2.0 * dyn.SLOWER + 0.1}

    def median_ms(lib, i):
        timed.append(i)
        return medians[i]

    bench = SimpleNamespace(check=lambda lib, i: calls[i].pop(0), median_ms=median_ms)
    served = dyn._served(None, [(1,), (2,), (3,)], latency, bench)
    assert served == {(1,): 1.0, **medians, (3,): 1.1} and timed == [(2,)]
    assert not any(calls.values())  # each call taken, none more
    assert len(logged) == 1 and "at (2,)" in logged[0]
    bench.check = lambda lib, i: 0.0 if i == (2,) else 0.5
    with pytest.raises(ScanLoweringError, match=r"wrong at \(2,\)"):
        dyn._served(None, [(1,), (2,), (3,)], latency, bench)
    calls[(1,)] = [9.0, 0.0]  # right at its first call, wrong at its second
    bench.check = lambda lib, i: calls[i].pop(0)
    with pytest.raises(ScanLoweringError, match=r"wrong at \(1,\)"):
        dyn._served(None, [(1,)], latency, bench)


def test_a_kernel_wrong_at_one_instance_is_not_used_there():
    """The chosen kernel is checked everywhere; where it is wrong another serves, and the
    reason is kept."""
    small, large = (1,), (2,)

    class Bench:
        step = [0]

        def right(self, kernel, instance):
            wrong = kernel.where == "fast" and instance == large
            return 0.0 if wrong else kernel.estimate[instance]  # as predicted

    pool = [
        dyn._Kernel(None, object(), "fast", {small: 1.0, large: 1.0}),
        dyn._Kernel(None, object(), "slow", {small: 3.0, large: 3.0}),
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


def test_the_batch_shapes_the_step_and_the_length_only_repeats_it():
    """Tuned at every listed batch at the shortest length where it has ROWS rows, timed
    at the two shortest lengths; a function of symbolic length alone is tuned and timed
    at its corners."""
    names, grid = ["batch", "seq"], {"batch": [4, 1, 2], "seq": [256, 16, 64]}
    step = dyn._step_sizes(symbolic_lstm(names), names)
    assert step == [0] and dyn.ROWS == 64
    assert dyn._representatives(grid, names, step, 0) == [(1, 64), (2, 64), (4, 16)]
    assert dyn._representatives(grid, names, step, 1) == [(1, 64), (4, 16)]
    batches = {"batch": [1, 2, 4, 8, 16, 32, 64], "seq": [16, 64]}  # every listed batch
    assert dyn._representatives(batches, names, step, 1) == [  # within one of a tuned one
        (1, 64), (4, 16), (16, 16), (64, 16)]
    batches["batch"].remove(64)  # the largest is tuned, whatever the stride
    assert dyn._representatives(batches, names, step, 1) == [
        (1, 64), (4, 16), (16, 16), (32, 16)]
    short = {"batch": [1, 4], "seq": [4, 32]}  # no length gives batch 1 ROWS: the longest
    assert dyn._representatives(short, names, step, 1) == [(1, 32), (4, 32)]
    assert dyn._timed_at(grid, names, step) == [
        (1, 16), (1, 64), (2, 16), (2, 64), (4, 16), (4, 64)]
    assert dyn._step_sizes(symbolic_lstm(["seq"]), ["seq"]) == []
    assert dyn._representatives({"seq": [16, 64, 256]}, ["seq"], [], 1) == [(16,), (256,)]


def test_a_record_refused_where_batch_is_symbolic_serves_each_batch_it_replays_at(
    monkeypatch,
):
    """A record tuned at batch 4 whose schedule the symbolic batch refuses (tiles whose
    product covers some batches only) is replayed with the body fixed at its own batch
    and at each nearby one: it serves those it replays at (here 4 and 1, not 2, made to
    fail), each with its own body, right against numpy."""
    func = symbolic_lstm(["batch", "seq"]).with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": specialize(func, {"batch": 4, "seq": 32})})
    target = default_target()
    ctx = ms.TuneContext(mod=mod, target=target, space_generator=scan_space(target),
                         task_name="refused", rand_state=0)
    for space in ctx.generate_design_space():  # the first that passes the postprocs
        sch = s_tir.Schedule(mod)
        space.trace.simplified(remove_postproc=True).apply_to_schedule(sch, remove_postproc=True)
        sch.enter_postproc()
        if all(pp.apply(sch) for pp in ctx.space_generator.postprocs):
            break
    record = ms.database.TuningRecord(sch.trace, ms.database.Workload(mod), [1e-3], target)
    real, calls = dyn.replay_sized, []

    def refuses_symbolic_and_batch_2(trace, body, cap=None):
        calls.append(body)
        if len(calls) in (1, 4):  # the symbolic function, then the body fixed at 2
            raise ValueError("The product of factors is not larger than or equal to the extent")
        return real(trace, body, cap)

    monkeypatch.setattr(dyn, "replay_sized", refuses_symbolic_and_batch_2)
    expected = expected_scans(tvm.IRModule({"main": func}))["main"]
    around = [{"batch": 4}, {"batch": 1}, {"batch": 2}]
    kernel = dyn._replayed(record, func, expected, "refused #0", around)
    assert len(calls) == 4 and kernel.lib is None
    assert sorted(kernel.bodies) == [(1,), (4,)]
    assert kernel.serves((1,)) and kernel.serves((4,)) and not kernel.serves((2,))
    assert kernel.where.startswith("does not replay on the symbolic function (ValueError")
    for batch in (1, 4):
        lib = compile_func(kernel.body({"batch": batch}))
        case = workloads.get("lstm", seq=9, **{**SIZES, "batch": batch})
        got, want = outputs(case, lib, case.input_arrays())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{batch=}")


def test_shapes_off_the_grid_fall_back_on_the_fastest_generic_build():
    """The fixed bodies' timings say kernel 0; the generic builds say kernel 1 at the
    large instance: off-grid shapes that round up to it get kernel 1. A kernel with no
    generic build, or one wrong at the instance, is never the fallback there."""
    small, large = (1, 4), (4, 4)

    class Bench:
        step = [0]
        wrong = set()

        def right(self, kernel, instance, generic):
            assert generic
            return 0.0 if (kernel.where, instance) in self.wrong else 1.0

        def time(self, kernel, instance, best, generic):
            assert generic
            return kernel.estimate[instance]

    generic_ms = {small: 1.0, large: 9.0}
    kernels = [
        dyn._Kernel(None, object(), "k0", generic_ms),
        dyn._Kernel(None, object(), "k1", {small: 2.0, large: 5.0}),
        dyn._Kernel(None, None, "fixed only", {small: 0.1, large: 0.1}),
    ]
    fixed_ms = [{small: 1.0, large: 1.0}, {small: 2.0, large: 2.0}, {small: 0.1, large: 0.1}]
    assert dyn._fallbacks(kernels, fixed_ms, [small, large], Bench())[0] == {small: 0, large: 1}
    bench = Bench()
    bench.wrong = {("k1", large)}  # k1's generic build wrong at the large instance
    assert dyn._fallbacks(kernels, fixed_ms, [small, large], bench)[0] == {small: 0, large: 0}
    bench.wrong = {("k0", large), ("k1", large)}
    with pytest.raises(ScanLoweringError, match=r"no generic kernel chosen is right at \(4, 4\)"):
        dyn._fallbacks(kernels, fixed_ms, [small, large], bench)


def test_generic_builds_are_timed_once_per_batch_at_its_shortest_length():
    """The length only repeats the step: a fallback timed at 2x4 serves 2x64 too."""
    timed = []

    class Bench:
        step = [0]

        def right(self, kernel, instance, generic):
            return 1.0

        def time(self, kernel, instance, best, generic):
            timed.append((kernel.where, instance))
            return {"k0": 1.0, "k1": 2.0}[kernel.where]

    grid = [(2, 4), (2, 64), (8, 4), (8, 64)]
    kernels = [dyn._Kernel(None, object(), w, {}) for w in ("k0", "k1")]
    figures = [{i: 1.0 for i in grid}, {i: 1.0 for i in grid}]
    assert dyn._fallbacks(kernels, figures, grid, Bench())[0] == {i: 0 for i in grid}
    assert sorted(timed) == [("k0", (2, 4)), ("k0", (8, 4)), ("k1", (2, 4)), ("k1", (8, 4))]


@pytest.mark.parametrize(
    "centre, reach, near",
    [(8, 1, {4, 8, 16}), (1, 1, {1, 2}), (64, 2, {16, 32, 64}), (3, 1, {2, 4}),
     (8, None, {1, 2, 4, 8, 16, 32, 64})],
)
def test_a_candidate_is_timed_at_the_batches_near_its_own(centre, reach, near):
    assert dyn._near([64, 1, 2, 4, 8, 16, 32], centre, reach) == near


def test_the_choice_covers_every_instance_before_it_saves_time():
    """Figures exist only near a kernel's own batch (inf elsewhere): the kernel that
    covers most comes first, then the one that covers the rest, however slow, and only
    then one that only saves time."""
    grid = [(1,), (2,), (4,), (8,)]
    inf = float("inf")
    timed = [
        (None, {(1,): 1.0, (2,): 1.0, (4,): inf, (8,): inf}),
        (None, {(1,): 9.0, (2,): 9.0, (4,): 9.0, (8,): inf}),
        (None, {(1,): inf, (2,): inf, (4,): 5.0, (8,): 5.0}),
    ]
    weights = {i: 1.0 for i in grid}
    assert dyn._choose(timed, grid, weights, 1) == [1]
    assert dyn._choose(timed, grid, weights, 2) == [1, 2]
    assert dyn._choose(timed, grid, weights, 3) == [1, 2, 0]
    assert dyn._choose(timed[:1], grid, weights, 2) == [0]  # 4 and 8 stay uncovered


def test_uncovered_instances_are_timed_and_checking_runs_are_not_figures():
    """The chosen kernel has no figure at batch 8: ``widen`` gives it one, and the choice
    is made again. A checking run is a first call: one far off the model, and a second
    call too, gets the kernel timed (the timed figure replaces the model's); one near it,
    long or short, or a second call near it, leaves the model's."""
    near, cold, mid, far = (1, 16), (2, 64), (4, 256), (8, 1024)

    class Bench:
        step = [0]
        ran = {near: [1.0], cold: [12.0, 4.1], mid: [1.2 * dyn.RACE_MS], far: [2 * dyn.RACE_MS]}
        timed = []

        def right(self, kernel, instance):
            calls = self.ran[instance]
            return calls.pop(0) if len(calls) > 1 else calls[0]

        def time(self, kernel, instance, best):
            self.timed.append(instance)
            return 60.0

    kernel = dyn._Kernel(
        None, object(), "k", {near: 1.0, cold: 4.0, mid: dyn.RACE_MS, far: float("inf")})
    kernel.predicted = dict(kernel.estimate)
    widened = []

    def widen(chosen, uncovered):
        widened.append(uncovered)
        kernel.estimate[far] = 50.0  # the model's, off the short lengths
        return True

    grid = [near, cold, mid, far]
    chosen = dyn._checked_choice([kernel], grid, dict.fromkeys(grid, 1), 1, Bench(), [], widen)
    assert chosen == [0] and widened == [[far]] and Bench.timed == [far]
    assert kernel.estimate[far] == kernel.measured[far] == 60.0
    assert kernel.estimate[mid] == dyn.RACE_MS and mid not in kernel.measured
    assert near not in kernel.measured
    assert kernel.estimate[cold] == 4.0 and cold not in kernel.measured


def test_a_checking_run_off_the_prediction_is_timed_and_the_choice_made_again():
    """The model predicts kernel A the faster at the long instance; A's checking run
    there is far slower than predicted, so A is timed there, twice (the second after
    the other checks), and the choice, made again, takes B, whose checking run agrees
    with its prediction."""
    short, long = (2, 16), (2, 256)

    class Bench:
        step = [0]
        ran = {("A", long): 30.0, ("B", long): 14.5}
        timed = []

        def right(self, kernel, instance):
            return self.ran.get((kernel.where, instance), 1.0)

        def time(self, kernel, instance, best):
            self.timed.append((kernel.where, instance))
            return self.ran[(kernel.where, instance)]

    a = dyn._Kernel(None, object(), "A", {short: 1.0, long: 10.0}, measured={short: 1.0})
    b = dyn._Kernel(None, object(), "B", {short: 1.2, long: 14.0}, measured={short: 1.2})
    chosen = dyn._checked_choice([a, b], [short, long], {short: 1, long: 1}, 1, Bench(), [])
    assert chosen == [1] and Bench.timed == [("A", long), ("A", long)]
    assert a.estimate[long] == a.measured[long] == 30.0
    assert b.estimate[long] == 14.0 and long not in b.measured  # within SUSPECT: kept


class _Retiming:
    """A bench whose timings of a kernel at an instance come from ``figures`` ((kernel
    name, instance) -> figures, taken in turn) and whose checking runs are ``calls``
    (the same keys -> ms); it logs each timing."""

    step, names = [0], ["batch", "seq"]
    split = dyn._Bench.split

    def __init__(self, figures, calls=None):
        self.figures, self.calls, self.timed = figures, calls or {}, []

    def time(self, kernel, instance, best=float("inf")):
        self.timed.append((kernel.where, instance))
        return self.figures[(kernel.where, instance)].pop(0)

    def right(self, kernel, instance):
        return self.calls[(kernel.where, instance)]


def test_a_figure_off_the_prediction_is_timed_again_after_the_other_checks():
    """A's checking runs and its timing at the long instance are all twice the model's
    figure (the machine slowed for a second, as in GRU 17's choice): it is timed again
    once the other instances are checked, agrees with the model this time, and stays
    chosen with the faster figure."""
    short, long, longest = (2, 16), (2, 256), (2, 1024)
    bench = _Retiming(
        {("A", long): [20.0, 10.5]},
        {("A", short): 1.0, ("A", long): 20.0, ("A", longest): 40.0,
         ("B", short): 1.2, ("B", long): 14.0, ("B", longest): 52.0},
    )
    a = dyn._Kernel(None, object(), "A", {short: 1.0, long: 10.0, longest: 40.0},
                    measured={short: 1.0})
    b = dyn._Kernel(None, object(), "B", {short: 1.2, long: 14.0, longest: 52.0},
                    measured={short: 1.2})  # taken on A's first figure (101 ms to 95.2)
    grid = [short, long, longest]
    weights = {short: 1, long: 3, longest: 1}
    chosen = dyn._checked_choice([a, b], grid, weights, 1, bench, [])
    assert chosen == [0] and bench.timed == [("A", long), ("A", long)]
    assert a.estimate[long] == a.measured[long] == 10.5


def test_a_shorter_length_timed_slower_than_a_longer_one_is_timed_again():
    """Batch 2 timed at 16 steps slower than at 64 (the machine busy during the first):
    more steps never cost less, so 16 steps are timed again and the faster figure kept,
    and the line through the lengths climbs; batch 4, in order, is timed once each."""
    at = [(2, 16), (2, 64), (4, 16), (4, 64)]
    figures = {(2, 16): [4.0, 0.2], (2, 64): [0.8], (4, 16): [0.3], (4, 64): [1.2]}
    bench = _Retiming({("k", i): f for i, f in figures.items()})
    kernel = dyn._Kernel(None, object(), "k", {})
    sizes = [tvm.tirx.Var("batch", "int64"), tvm.tirx.Var("seq", "int64")]
    dyn._time(kernel, at, [], bench, (at + [(2, 256)], [0], sizes))
    assert bench.timed == [("k", i) for i in [*at, (2, 16)]]
    assert kernel.measured == {(2, 16): 0.2, (2, 64): 0.8, (4, 16): 0.3, (4, 64): 1.2}
    assert kernel.estimate[(2, 256)] == pytest.approx(0.2 + 0.6 / 48 * 240)


def test_a_timed_figure_far_above_the_checking_runs_is_timed_again():
    """A's figure at the short instance was timed with the machine busy (five times its
    checking runs, first calls, which overstate if anything): timed again, A's figure
    there is its true one, and A serves there instead of B; B's figures, near its calls,
    are kept and B is not timed again."""
    short, long = (2, 16), (2, 64)
    bench = _Retiming(
        {("A", short): [1.0]},
        {("A", short): 1.1, ("A", long): 4.2, ("B", short): 1.5, ("B", long): 5.6},
    )
    a = dyn._Kernel(None, object(), "A", {short: 5.0, long: 4.0}, measured={short: 5.0, long: 4.0})
    b = dyn._Kernel(None, object(), "B", {short: 1.4, long: 5.5}, measured={short: 1.4, long: 5.5})
    chosen = dyn._checked_choice([a, b], [short, long], {short: 1, long: 1}, 2, bench, [])
    assert chosen == [0] and bench.timed == [("A", short)]
    assert a.estimate[short] == a.measured[short] == 1.0 and b.measured[short] == 1.4


def test_chosen_kernels_the_model_puts_near_each_other_are_timed_there():
    """At the long instance the model puts A (18 ms) and B (20) within SUSPECT of each
    other, and both checking runs agree with it: both are timed, A's 30 ms loses to B's
    20, and the choice, made again, is B alone (A served the short instance, where B is
    faster too)."""
    short, long = (2, 16), (2, 256)
    bench = _Retiming(
        {("A", long): [30.0], ("B", long): [20.0]},
        {("A", short): 1.0, ("B", short): 0.9, ("A", long): 18.5, ("B", long): 20.5},
    )
    a = dyn._Kernel(None, object(), "A", {short: 1.0, long: 18.0}, measured={short: 1.0})
    b = dyn._Kernel(None, object(), "B", {short: 0.9, long: 20.0}, measured={short: 0.9})
    chosen = dyn._checked_choice([a, b], [short, long], {short: 1, long: 1}, 2, bench, [])
    assert chosen == [1] and sorted(bench.timed) == [("A", long), ("B", long)]
    assert a.estimate[long] == a.measured[long] == 30.0 and b.measured[long] == 20.0


def test_kernels_not_chosen_near_the_serving_one_are_timed_at_the_longest_length():
    """A and B, two records of one task, are the model's near ties everywhere; A, a
    little faster at the short length, is chosen. At the longest length, where the model
    extrapolates farthest, B (within SUSPECT of A) is checked and timed, and A too: B is
    the faster there, so B is chosen. C, far slower, the middle length, where the model
    interpolates nearer its timings, and batch 2's longest, where a run takes RACE_MS
    or more, are not timed."""
    short, mid, long, big = (1, 16), (1, 256), (1, 1024), (2, 1024)
    slow = dyn.RACE_MS * 1.5
    figures = {"A": (1.0, 15.0, 60.0, slow), "B": (1.02, 15.2, 62.0, slow * 1.02),
               "C": (2.0, 31.0, 128.0, slow * 2)}
    calls = {(k, i): f * (1.01 if i == long else 1.0) for k, fs in figures.items()
             for i, f in zip((short, mid, long, big), fs)}
    bench = _Retiming({("A", long): [66.0], ("B", long): [60.0]}, calls)
    a, b, c = (dyn._Kernel(None, object(), k, dict(zip((short, mid, long, big), fs)),
                           measured={short: fs[0]}) for k, fs in figures.items())
    grid = [short, mid, long, big]
    chosen = dyn._checked_choice([a, b, c], grid, dict.fromkeys(grid, 1), 1, bench, [])
    assert chosen == [1] and bench.timed == [("A", long), ("B", long)]
    assert b.estimate[long] == b.measured[long] == 60.0 and mid not in b.measured
    assert long not in c.measured and big not in a.measured | b.measured


@pytest.mark.parametrize("ratio, above", [(0.4, 4), (0.65, 5), (0.7, None)])
def test_batches_past_the_largest_run_in_chunks_where_chunks_beat_the_generic_build(
    monkeypatch, ratio, above
):
    """The body fixed at batch 4 runs in ``ratio`` of the generic build's time there.
    Batch 5 in two chunks costs ``2 * ratio`` of batch 4's generic time against the
    generic build's 5/4: chunks from where ``2 * ratio * 4 < b``, and past batch 8 at
    every batch while ``ratio <= 2/3`` (three chunks against 8/4 at batch 9); no chunks
    above that."""
    monkeypatch.setattr(dyn, "_checked_padding", lambda body, sizes, chunked, probe, bench: body)
    kernel = SimpleNamespace(body=lambda sizes: f"body at {sizes}")
    first = (4, 16)
    _, beyond = dyn._pads(
        ["batch", "seq"], [0], {"batch": [4], "seq": [16, 64]}, [kernel],
        {first: 0, (4, 64): 0}, [{first: ratio * 10.0}], {first: 10.0}, set(), None,
    )
    assert beyond == (None if above is None else (above, {0: "body at {'batch': 4}"}))


def test_longer_lengths_are_fitted_on_the_body_not_held():
    """At 16 steps a held body served; the longer lengths run the body not held (a tile
    of 32 steps), so the line through the lengths is fitted on that body's figures at
    whole tiles (32 and 64 steps), not on the held body's (nor on its own at 16, which
    computes 32 steps' rows)."""
    kernel = dyn._Kernel(None, object(), "k", {}, measured={(2, 16): 1.2, (2, 64): 5.0})
    kernel.line = {(2, 32): 2.0, (2, 64): 5.0}
    grid = [(2, 16), (2, 64), (2, 256), (4, 256)]
    sizes = [tvm.tirx.Var("batch", "int64"), tvm.tirx.Var("seq", "int64")]
    estimate = dyn._estimates(kernel, grid, [0], sizes)
    assert estimate[(2, 16)] == 1.2  # measured, the held body's
    assert estimate[(2, 256)] == pytest.approx(2.0 + (5.0 - 2.0) / 32 * 224)
    assert estimate[(4, 256)] == float("inf")  # never timed at batch 4


def test_half_the_budget_goes_evenly_and_the_rest_by_the_work_each_task_stands_for(
    tmp_path, monkeypatch
):
    """13 trials: 7 evenly (4 and 3), 6 by work. Batch 1's task stands for batch 1 and
    half of batch 2 (work 2 per step), batch 4's for half of batch 2, 4 and 8 (13): one
    trial and five. Records already there count."""
    func = symbolic_lstm(["batch", "seq"])
    mod = tvm.IRModule(
        {"main": specialize(func.with_attr("global_symbol", "main"), {"batch": 1, "seq": 4})}
    )
    database = ms.database.JSONDatabase(work_dir=str(tmp_path))
    sch = s_tir.Schedule(mod)
    sch.get_sblock("cell_states")  # the default schedule: get_top_k drops an empty trace
    for _ in range(3):
        database.commit_tuning_record(ms.database.TuningRecord(
            sch.trace, database.commit_workload(mod), [1e-3], default_target()))
    asked = []
    monkeypatch.setattr(
        dyn, "tune_module", lambda mod, work_dir, trials, target, **kw: asked.append(
            (kw["label"], trials)))

    class Tuned(Exception):
        pass

    def stop(*args, **kwargs):
        raise Tuned

    monkeypatch.setattr(dyn, "_Bench", stop)
    with pytest.raises(Tuned):
        dyn.dynamic(func, tmp_path, {"batch": [1, 2, 4, 8], "seq": [4, 16]}, trials=13,
                    split_by="work", representatives=[(1, 4), (4, 4)], population=8)
    # batch 1's first half (3 of 5) is there already; its second half comes last
    assert asked == [("dynamic batch4_seq4", 8), ("dynamic batch1_seq4", 5 - 3)]


def test_a_body_at_a_smaller_batch_is_the_record_replayed_there():
    """A record tuned at batch 4 tiles the GRU's hoisted product by 4 rows of batch; its
    symbolic schedule fixed at batch 2 would keep the rows padded to 4 (twice the
    product's work), so the body at batch 2 is the record replayed there: 2 rows, and
    right against numpy."""
    func = workloads.get("gru", seq=8, **SIZES).symbolic_func(["batch", "seq"])
    func = func.with_attr("global_symbol", "main")
    sch = s_tir.Schedule(tvm.IRModule({"main": specialize(func, {"batch": 4, "seq": 8})}))
    rows = sch.get_loops(sch.get_sblock("xw_dense"))[1]
    sch.split(rows, sch.sample_perfect_tile(rows, n=2, decision=[1, 4]))
    kernel = dyn._Kernel(replay_sized(sch.trace, func), None, "test", {}, trace=sch.trace,
                         base=func)

    def product_rows(body):
        (buffer,) = [b for b in body.body.block.alloc_buffers if b.name == "xw_dense"]
        return int(buffer.shape[1])

    assert product_rows(specialize_body(kernel.func, {"batch": 2})) == 4
    body = kernel.body({"batch": 2})
    assert product_rows(body) == 2
    lib = compile_func(body)
    case = workloads.get("gru", seq=5, **{**SIZES, "batch": 2})
    got, want = outputs(case, lib, case.input_arrays())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


