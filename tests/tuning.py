"""Tuning for the tests (every test that calls these is marked ``slow``): a few trials of
``ms.tune_tir`` on a scan space, then every record replayed, checked for the scan
invariants and against a reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tvm
from tvm import tirx
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.space_generator import SpaceGenerator
from tvm.target import Target
from util import assert_close, assert_scans_kept, compile_func, outputs

import scan_tir
from scan_tir.db.replay import replay
from scan_tir.tune import build_candidate, dynamic_shapes
from scan_tir.workloads import get


def quick_search() -> dict:
    """``ms.tune_tir`` arguments for a search that only samples: candidates drawn and mutated
    once (a population of 32, a random cost model). The stock search (a population of 2048,
    XGBoost) took 36 s of search per workload, for tests that need only a few candidates."""
    return {
        "strategy": ms.search_strategy.EvolutionarySearch(population_size=32, genetic_num_iters=1),
        "cost_model": "random",
    }


def tune_records(
    func: tirx.PrimFunc,
    work_dir: Path,
    target: Target,
    trials: int = 8,
    space: SpaceGenerator | None = None,
    builder: ms.builder.Builder | None = None,
    **search,
):
    """``ms.tune_tir`` of ``func`` for ``trials`` trials in one batch, on ``space`` (default
    ``scan_space``), built by ``build_candidate``; ``search``: more of tune_tir's arguments
    (default: MetaSchedule's own search, population and cost model). Returns (database,
    records)."""
    db = ms.tune_tir(
        tvm.IRModule({"main": func}),
        target,
        str(work_dir),
        max_trials_global=trials,
        num_trials_per_iter=trials,
        space=space if space is not None else scan_tir.scan_space(target),
        builder=builder or ms.builder.LocalBuilder(f_build=build_candidate),
        **search,
    )
    records = db.get_all_tuning_records()
    assert records, "tuning measured nothing"
    return db, records


def tune_and_replay(
    workload,
    func: tirx.PrimFunc,
    space: SpaceGenerator,
    builder: ms.builder.Builder,
    work_dir: Path,
    target: Target,
    trials: int = 4,
) -> None:
    """Tune ``func`` (a lowering of the zoo's ``workload``) on ``space`` for a few trials of
    the quick search; then every record replayed at its length: scan invariants kept,
    outputs equal to numpy's."""
    _, records = tune_records(func, work_dir, target, trials, space, builder, **quick_search())
    assert len(records) == trials, "tuning measured fewer candidates than asked"
    inputs = workload.input_arrays(seed=4)
    for record in records:
        scheduled = replay(record, func)
        assert_scans_kept(scheduled, func)
        got, ref = outputs(workload, compile_func(scheduled), inputs)
        assert_close(got, ref)


# --- dynamic shapes: one small LSTM, batch and length symbolic ------------------------------

#: The LSTM's sizes in the dynamic-shape tests; ``batch`` is the default where it stays fixed.
SIZES = {"batch": 2, "input": 16, "hidden": 32}


def symbolic_lstm(names=("seq",)) -> tirx.PrimFunc:
    return get("lstm", seq=16, **SIZES).symbolic_func(list(names))


def tune_dynamic(work_dir: Path, **kwargs) -> dynamic_shapes.Dynamic:
    """Batch and length symbolic, tuned at one instance (two trials unless ``kwargs``
    say more); its records timed at the four corners and predicted at none other (the
    grid is its corners)."""
    args = dict(trials=2, population=8, candidates=2, kernels=2, representatives=[(4, 32)])
    return dynamic_shapes.dynamic(
        symbolic_lstm(["batch", "seq"]), work_dir, {"batch": [1, 4], "seq": [4, 32]},
        **{**args, **kwargs},
    )


def assert_right_at(lib, recurrence: str, shapes: list[tuple[int, int]]) -> None:
    """``lib`` against numpy at each (batch, length) of ``shapes``, ``recurrence`` (a zoo
    name) at :data:`SIZES`."""
    for batch, seq in shapes:
        case = get(recurrence, seq=seq, **{**SIZES, "batch": batch})
        got, want = outputs(case, lib, case.input_arrays())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{batch=} {seq=}")
