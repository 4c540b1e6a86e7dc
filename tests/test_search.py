"""scan_tir.tune.search: a run too short for the cost model to train does not evolve; a
model trained on earlier runs' records scores from the start."""

from __future__ import annotations

import numpy as np
import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.script import tirx as T

from meta_rules.intrinsics import import_cpu_intrinsics
from scan_tir.tune import default_target
from scan_tir.tune.search import GENERATIONS, WARMUP, evolutionary_search, learned_model


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
