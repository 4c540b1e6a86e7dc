"""The evolutionary search every tuning entry point uses (``tune``, per-scan, Relax).

MetaSchedule's default cost model, XGBoost, scores candidates uniformly at random until
it holds ``num_warmup_samples`` measurements (``XGBModel.predict`` in TVM's
``s_tir/meta_schedule/cost_model/xgb_model.py``), and the evolutionary search keeps
each generation's best by those scores. So in a run that measures fewer candidates than
that, every generation selects at random: its mutations cost a large share of a short
search's time (profiled in notes.md) and choose nothing a draw from the initial
population would not. Such a run measures from its sampled population directly
(``genetic_num_iters=0``); a longer one evolves as MetaSchedule does, since its model
trains during the run.

Several short runs over related workloads (one function at several shapes) need not each
select at random: :func:`learned_model` is MetaSchedule's model trained on what the
earlier ones measured, so that a later run measures the candidates it scores best among
those it sampled (DietCode's cost model shared across shapes, with MetaSchedule's own
features and per-workload normalisation).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target

from meta_rules.intrinsics import import_cpu_intrinsics

#: Measurements the default cost model needs before its scores mean anything.
WARMUP: int = inspect.signature(ms.cost_model.XGBModel).parameters["num_warmup_samples"].default

#: MetaSchedule's default number of generations, where they select by a trained model.
GENERATIONS: int = inspect.signature(ms.search_strategy.EvolutionarySearch).parameters[
    "genetic_num_iters"
].default


def evolutionary_search(population: int, trials: int) -> ms.search_strategy.EvolutionarySearch:
    """The search for a run of ``trials`` measurements over a population of ``population``:
    without generations where the cost model cannot train within the run (see the module)."""
    return ms.search_strategy.EvolutionarySearch(
        population_size=population,
        init_min_unmeasured=min(50, population),
        genetic_num_iters=GENERATIONS if trials >= WARMUP else 0,
    )


#: The learned model's learning rate, half MetaSchedule's default (0.2). Its XGBoost sums
#: one prediction per store of a candidate (``PackSum`` in TVM's ``xgb_model.py``), so a
#: round moves the score of a program with ten stores (an LSTM's step and products) by
#: ten steps: at 0.2, on a few dozen of an LSTM's records, the training diverges, keeps
#: its first round and scores every candidate of another batch alike. The largest rate
#: that ranked them in notes.md's test (0.05 ranked them no better; the GRU's, fewer
#: stores, rank best at 0.2).
LEARNED_ETA: float = 0.1


def learned_model(
    database: ms.database.Database, mods: Sequence[tvm.IRModule], target: Target
) -> ms.cost_model.XGBModel:
    """MetaSchedule's XGBoost model trained on every record ``database`` holds of ``mods``
    (the records' own workloads, one feature group each), with no warm-up: it scores at
    random only while it has no record at all, retrains on each run's results (not only
    when they add a fifth to its data, MetaSchedule's adaptive training: short runs never
    would), and learns at :data:`LEARNED_ETA`."""
    model = ms.cost_model.XGBModel(
        num_warmup_samples=0,
        adaptive_training=False,
        config=ms.cost_model.xgb_model.XGBConfig(eta=LEARNED_ETA),
    )
    import_cpu_intrinsics()  # before the first TuneContext imports every target's
    for mod in mods:
        if not database.has_workload(mod):
            continue
        records = database.get_top_k(database.commit_workload(mod), len(database))
        if records:
            model.update(
                ms.TuneContext(mod=mod, target=target),
                [r.as_measure_candidate() for r in records],
                [ms.runner.RunnerResult(run_secs=r.run_secs, error_msg=None) for r in records],
            )
    return model
