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
"""

from __future__ import annotations

import inspect

from tvm.s_tir import meta_schedule as ms

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
