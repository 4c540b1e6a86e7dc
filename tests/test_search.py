"""scan_tir.tune.search: a run too short for the cost model to train does not evolve."""

from __future__ import annotations

import numpy as np
import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.script import tirx as T

from scan_tir.tune.search import GENERATIONS, WARMUP, evolutionary_search


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
    sch = tvm.s_tir.Schedule(_copy)
    same = [ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(_copy))] * 8
    scores = model.predict(ms.TuneContext(), same)
    assert len(set(np.round(scores, 12))) > 1


def test_generations_only_where_the_model_can_train_within_the_run():
    assert evolutionary_search(128, WARMUP - 1).genetic_num_iters == 0
    assert evolutionary_search(128, WARMUP).genetic_num_iters == GENERATIONS > 0
    assert evolutionary_search(16, 4).population_size == 16
