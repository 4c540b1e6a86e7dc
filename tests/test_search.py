"""scan_tir.tune.search: a run too short for the cost model to train does not evolve; a
model trained on earlier runs' records scores from the start."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.script import tirx as T

from meta_rules.intrinsics import import_cpu_intrinsics
from scan_tir import workloads
from scan_tir.tune import default_target
from scan_tir.tune.search import GENERATIONS, WARMUP, evolutionary_search, learned_model
from scan_tir.tune.symbolic import specialize

#: The packed LSTM grid's dynamic tuning, run 2 (notes.md): four tasks of 28 records, each
#: drawn at random (before the tasks shared a model).
LSTM_GRID = Path(__file__).parent / "data" / "grid_lstm_packed_run2_dynamic"


@T.prim_func(s_tir=True)
def _copy(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("b"):
            vi = T.axis.spatial(4, i)
            b[vi] = a[vi]


def test_the_default_cost_model_scores_at_random_before_its_warmup():
    """The premise: an untrained XGBModel gives identical candidates different scores, so
    selecting a generation by them selects nothing."""
    model = ms.cost_model.XGBModel(num_warmup_samples=WARMUP)
    import_cpu_intrinsics()  # else this first TuneContext imports every target's
    sch = tvm.s_tir.Schedule(_copy)
    same = [ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(_copy))] * 8
    scores = model.predict(
        ms.TuneContext(mod=tvm.IRModule({"main": _copy}), target=default_target()), same
    )
    assert len(set(np.round(scores, 12))) > 1


def test_generations_only_where_the_model_can_train_within_the_run():
    assert evolutionary_search(128, WARMUP - 1).genetic_num_iters == 0
    assert evolutionary_search(128, WARMUP).genetic_num_iters == GENERATIONS > 0
    assert evolutionary_search(16, 4).population_size == 16


@T.prim_func(s_tir=True)
def _add(a: T.Buffer((4096,), "float32"), b: T.Buffer((4096,), "float32")):
    for i in range(4096):
        with T.sblock("b"):
            vi = T.axis.spatial(4096, i)
            b[vi] = a[vi] + T.float32(1)


def _split(factor: int, vectorized: bool) -> ms.MeasureCandidate:
    sch = tvm.s_tir.Schedule(_add)
    (loop,) = sch.get_loops(sch.get_sblock("b"))
    _, inner = sch.split(loop, [None, factor])
    if vectorized:
        sch.vectorize(inner)
    return ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(_add))


def test_a_learned_model_ranks_by_the_records_it_was_trained_on(tmp_path):
    """Records where the vectorized splits ran ten times faster: the model trained on
    them scores unseen splits the same on every call, vectorized ones above; without a
    record it scores at random, as MetaSchedule's does before its warm-up."""
    mod, target = tvm.IRModule({"main": _add}), default_target()
    database = ms.database.JSONDatabase(work_dir=str(tmp_path))
    workload = database.commit_workload(mod)
    for factor in (4, 8, 16, 32):
        for vectorized in (False, True):
            c = _split(factor, vectorized)
            database.commit_tuning_record(
                ms.database.TuningRecord(
                    c.sch.trace, workload, [1e-6 if vectorized else 1e-5], target, c.args_info
                )
            )
    unseen = [_split(64, True), _split(64, False), _split(2, True), _split(2, False)]
    context = ms.TuneContext(mod=mod, target=target)

    model = learned_model(database, [mod], target)
    assert model.data_size == 8
    scores = model.predict(context, unseen)
    assert np.array_equal(scores, model.predict(context, unseen))
    assert min(scores[0], scores[2]) > max(scores[1], scores[3])

    (tmp_path / "empty").mkdir()
    empty = ms.database.JSONDatabase(work_dir=str(tmp_path / "empty"))
    untrained = learned_model(empty, [mod], target)
    assert untrained.data_size == 0
    assert not np.array_equal(
        untrained.predict(context, unseen), untrained.predict(context, unseen)
    )


@pytest.mark.slow
def test_the_learned_model_ranks_an_lstms_candidates_at_a_batch_it_was_not_trained_at(tmp_path):
    """Trained on the LSTM's records at batches 1 and 4, the model ranks those at batch 16
    by their speed. At MetaSchedule's learning rate its training diverged on these
    records, kept its first round and scored all of batch 16's alike."""
    for name in ("database_workload.json", "database_tuning_record.json"):
        shutil.copy(LSTM_GRID / name, tmp_path / name)
    database = ms.database.JSONDatabase(work_dir=str(tmp_path))
    lstm = workloads.get("lstm", seq=16, input=512, hidden=256)
    func = lstm.symbolic_func(["batch", "seq"], packed=True).with_attr("global_symbol", "main")
    mods = [tvm.IRModule({"main": specialize(func, {"batch": b, "seq": 16})}) for b in (1, 4, 16)]
    target = default_target()
    model = learned_model(database, mods[:2], target)
    assert model.data_size == 56
    records = database.get_top_k(database.commit_workload(mods[2]), 100)
    speed = [-float(np.mean([float(s) for s in r.run_secs])) for r in records]
    scores = model.predict(
        ms.TuneContext(mod=mods[2], target=target), [r.as_measure_candidate() for r in records]
    )
    assert len(records) == 28
    assert np.corrcoef(np.argsort(np.argsort(scores)), np.argsort(np.argsort(speed)))[0, 1] > 0.5
