"""Per-scan tuning: a function cut into segments (``scan_tir.transform.segments``), one task
per shape of segment, and the tasks' schedules composed on the whole function
(``scan_tir.tune.per_scan``).

The composition tests use schedules sampled from the scan space with its postprocs
applied, as tuning measures them, without tuning; they check the composed function
against numpy at 512 steps on 2 threads (conftest). The end-to-end test tunes.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir import meta_schedule as ms
from util import assert_close, assert_scans_kept, compile_func, outputs
from workloads import with_seq

from scan_tir.db import load, verify
from scan_tir.db.replay import replay
from scan_tir.errors import ScanLoweringError
from scan_tir.lower.vocabulary import is_scan_statement, lane_groups, root_statements
from scan_tir.transform.segments import SEGMENT_OF, names, scan_segments, segment_at
from scan_tir.tune import per_scan as ps
from scan_tir.tune import scan_space, tune
from scan_tir.workloads import get


def stacked(seq: int, layers: int = 3):
    return get("lstm_stacked", **{**with_seq("lstm_stacked", seq, 1), "hidden": 8,
                                  "layers": layers})


def bilstm(seq: int):
    return get("bilstm", **{**with_seq("bilstm", seq, 1), "hidden": 8})


@pytest.mark.parametrize("make", [stacked, bilstm], ids=["stacked", "bidirectional"])
def test_segments_cover_each_root_statement_once(make):
    func = make(8).prim_func()
    segments = scan_segments(func)
    positions = sorted(p for s in segments for p in s.positions)
    assert positions == list(range(len(root_statements(func))))
    scans = [sum(map(is_scan_statement, root_statements(s.func))) for s in segments]
    assert scans == [1] * (len(segments) - 1) + [0]  # then the rest, without a scan
    for segment in segments:
        assert s_tir.analysis.verify_well_formed(segment.func)
        assert str(segment.func.attrs[SEGMENT_OF]) == str(func.attrs["scan_tir.workload"])


def test_a_layer_with_its_hoisted_product_and_initial_state():
    """Layer 2's segment reads layer 1's hidden states and writes its own; its weights
    stay layout-free."""
    func = stacked(8, layers=2).prim_func()
    second = scan_segments(func)[1]
    params = [p.name for p in second.func.params]
    assert params == ["Wi1", "Wh1", "Bi1", "Bh1", "hidden_states_1", "hidden_states",
                      "cell_states_1"]
    assert [int(i) for i in second.func.attrs["layout_free_buffers"]] == [0, 1]
    roots = [_blocks(s)[-1].name_hint for s in root_statements(second.func)]
    assert [n.rstrip("_1") for n in roots] == ["h_init", "c_init", "Xi2h", "Xi2h_bias",
                                               "lstm_scan"]


def test_a_segment_found_again_at_another_length():
    """``db verify --seq`` checks a segment's records on the same segment at that length."""
    short, long = stacked(8).prim_func(), stacked(32).prim_func()
    second = scan_segments(short)[1].func
    found = segment_at(second, long)
    assert names(found) == names(second)
    assert int(found.params[-1].ty.shape[0]) == 32
    with pytest.raises(ValueError, match="no segment"):
        segment_at(second, bilstm(8).prim_func())


def test_identical_layers_are_one_task():
    """Layers 2 and 3 of a stack have the same shape; a bidirectional layer's reverse
    direction reads its input backwards, so it is a task of its own."""
    assert [len(t.members) for t in ps.scan_tasks(stacked(8).prim_func())] == [1, 2, 1]
    assert [len(t.members) for t in ps.scan_tasks(bilstm(8).prim_func())] == [1, 1, 1]


def test_segments_run_in_sequence_compute_the_whole_function():
    """Each segment built alone and run in program order, its buffers passed from one to
    the next, gives the stack's outputs: the parameters are what crosses segments."""
    workload = stacked(64)
    func = workload.prim_func()
    inputs = workload.input_arrays(seed=1)
    ref = workload.numpy(inputs)
    values = {p: np.asarray(a, "float32") for p, a in zip(func.params, inputs)}
    for segment in scan_segments(func):
        args = [
            tvm.runtime.tensor(values.get(p, np.zeros([int(d) for d in p.ty.shape], "float32")))
            for p in segment.func.params
        ]
        compile_func(segment.func)["main"](*args)
        values.update({p: a.numpy() for p, a in zip(segment.func.params, args)})
    got = [values[p] for p in func.params[len(inputs):]]
    assert_close(got, ref)


def test_converter_names_every_buffer_once():
    """Blocks a schedule creates are named after their buffer (``s_h2h_global``), and
    composed schedules look them up by name: two layers' buffers must differ by name."""
    func = stacked(8).prim_func()
    buffers: list = []

    def visit(var) -> None:
        if isinstance(var.ty, tirx.BufferType) and not any(var.same_as(b) for b in buffers):
            buffers.append(var)

    tvm_ffi.structural_walk(func.body, (tirx.Var, visit))
    assert len(buffers) > 40
    assert len({b.name for b in buffers}) == len(buffers)
    assert {"s_h2h", "s_h2h_1", "s_h2h_2"} <= {b.name for b in buffers}


def test_renaming_maps_names_a_schedule_made_by_their_prefix():
    tasks = ps.scan_tasks(stacked(8).prim_func())
    first, second = tasks[1].members
    rename = ps.Renaming(first.func, second.func)
    assert rename("Xi2h_1") == "Xi2h_2"
    assert rename("Xi2h_1_update") == "Xi2h_2_update"
    assert rename("Wh1_global") == "Wh2_global"
    assert rename("root") == "root"


def sampled(mod: tvm.IRModule, target, seed: int) -> ms.database.TuningRecord:
    """A candidate of the scan space, postprocessed as tuning measures it."""
    context = ms.TuneContext(mod=mod, target=target, space_generator=scan_space(target),
                             rand_state=seed)
    sch = context.generate_design_space()[0]
    sch.enter_postproc()  # as MetaSchedule's search does: where the postprocs' part begins
    for postproc in context.space_generator.postprocs:
        assert postproc.apply(sch), postproc
    return ms.database.TuningRecord(sch.trace, ms.database.Workload(mod), [1e-3], target)


@pytest.mark.parametrize("seed", [1])
def test_composed_stack_matches_numpy_at_512_steps(target, seed):
    workload = stacked(512)
    func = workload.prim_func()
    tasks = ps.scan_tasks(func)
    best = [sampled(t.mod, target, seed + k) for k, t in enumerate(tasks)]
    composed = ps.compose(func, tasks, best).mod["main"]
    assert_scans_kept(composed, func)
    # The weights' layout rewrites, every layer's, lead the function, where a deployment
    # splits them off; after each layer's weight copies they would not be split off.
    preproc = ["meta_schedule.layout_rewrite_preproc" in _blocks(s)[-1].annotations
               for s in root_statements(composed)]
    assert sum(preproc) >= 2 and preproc == sorted(preproc, reverse=True)
    inputs = workload.input_arrays(seed=seed)
    got, ref = outputs(workload, compile_func(composed), inputs)
    assert np.abs(ref[0][-1]).max() > 1e-2, "the reference died out; the test would be weak"
    assert_close(got, ref)


def test_composed_bidirectional_layer_side_by_side_matches_numpy_at_512_steps(target):
    workload = bilstm(512)
    func = workload.prim_func()
    tasks = ps.scan_tasks(func)
    best = [sampled(t.mod, target, 7 + k) for k, t in enumerate(tasks)]
    candidates = ps._candidates(ps.compose(func, tasks, best))
    assert sorted(candidates) == ["concurrent", "sequential"]
    groups, problems = lane_groups(candidates["concurrent"].mod["main"])
    assert [len(g) for g in groups] == [2] and not problems
    inputs = workload.input_arrays(seed=4)
    for sch in candidates.values():
        got, ref = outputs(workload, compile_func(sch.mod["main"]), inputs)
        assert_close(got, ref)


def test_a_stack_has_no_concurrent_candidate(target):
    func = stacked(8).prim_func()
    tasks = ps.scan_tasks(func)
    best = [sampled(t.mod, target, 3) for t in tasks]
    assert list(ps._candidates(ps.compose(func, tasks, best))) == ["sequential"]


def test_a_task_without_a_record_stays_unscheduled(target):
    func = stacked(8).prim_func()
    tasks = ps.scan_tasks(func)
    best = [sampled(t.mod, target, 3) for t in tasks]
    best[-1] = None
    rest = root_statements(ps.compose(func, tasks, best).mod["main"])[-2:]
    assert tvm_ffi.structural_equal(rest, root_statements(func)[-2:])


def test_a_schedule_renamed_wrongly_is_refused(target, monkeypatch):
    """Without the renaming, layer 3 would get layer 2's block names: refused, naming the
    task and the statements, never applied to the wrong blocks."""
    func = stacked(8).prim_func()
    tasks = ps.scan_tasks(func)
    best = [sampled(t.mod, target, 5) for t in tasks]
    monkeypatch.setattr(ps.Renaming, "__call__", lambda self, name: name)
    with pytest.raises(ScanLoweringError, match=r"task 1 does not replay .* root statements"):
        ps.compose(func, tasks, best)


@pytest.mark.slow
def test_tune_per_scan_commits_a_schedule_of_the_whole_function(tmp_path, target):
    """Tuned per scan, the database holds each task's records and the whole function's
    composed one, which compile_tir finds; a second run with the same budget is a no-op;
    the records, the segments' and the composed one, replay right at another length."""
    workload = stacked(16, layers=2)
    func = workload.prim_func()
    first = ps.tune_per_scan(func, tmp_path, 6, target, population=8, trials_per_iter=2)
    assert (first.tasks, first.segments, first.records_before) == (3, 3, 0)
    assert first.records_after >= 6
    # A stack has no concurrent candidate; the pipelined ones where its schedule allows.
    candidates = list(first.composed_ms)
    assert candidates[0] == "sequential"
    assert set(candidates[1:]) <= {f"pipelined, at most {k} chunks" for k in ps.PIPELINE_CHUNKS}
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    mod = tvm.IRModule({"main": func})
    sch = ms.tir_integration.compile_tir(db, mod, target)
    composed = db.get_top_k(db.commit_workload(mod), 1)[0]
    assert tvm_ffi.structural_equal(sch.mod["main"], replay(composed, func))
    again = tune(workload, tmp_path, 6, target=target, per_scan=True, population=8)
    assert again.records_before == again.records_after == first.records_after
    assert again.seconds == 0.0
    # The best record of each task and every composed one at 128 steps, the whole
    # function's against numpy.
    tdb = load(tmp_path)
    best = {}
    for entry in sorted((e for e in tdb.entries if e.valid), key=lambda e: e.mean_ms):
        best.setdefault(entry.workload, entry)
    (whole,) = [w for w in tdb.used_workloads() if SEGMENT_OF not in tdb.func(w).attrs]
    chosen = [e for w, e in best.items() if w != whole] + tdb.of_workload(whole)
    verdicts = verify(dataclasses.replace(tdb, entries=chosen), target, seq=128)
    assert len(verdicts) == 3 + len(candidates)
    assert all(v.ok for v in verdicts), [v.problem for v in verdicts if not v.ok]


def _blocks(stmt) -> list[s_tir.SBlock]:
    found: list[s_tir.SBlock] = []
    tvm_ffi.structural_walk(stmt, (s_tir.SBlock, found.append))
    return found
