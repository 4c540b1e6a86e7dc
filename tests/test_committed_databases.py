"""Every committed tuning database still matches the function its config builds today.

A database is keyed by the tuned function's structure. A converter change that alters a
config's function (an option's default, the order of a scan's inputs) orphans every
database tuned for it: ``compile_tir`` then finds no record, and the tables in notes.md can
no longer be replayed. This builds, for each database under ``experiments/results``, the
function that experiments/tune_lstm.py (LSTM configs A-D with their variant suffixes) or
experiments/tune_zoo.py (zoo configs) builds for that directory's name.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import tvm
from tvm.s_tir import meta_schedule as ms

from scan_tir import workloads

RESULTS = Path(__file__).resolve().parents[1] / "experiments" / "results"
DATABASES = sorted(p.parent for p in RESULTS.rglob("database_workload.json"))
sys.path.insert(0, str(RESULTS.parent))  # experiments/: tune_lstm builds the LSTM configs

from tune_lstm import CONFIGS, config_base, config_module  # noqa: E402


def _function(config: str) -> tvm.IRModule:
    if config_base(config) in CONFIGS:
        return config_module(config)
    return tvm.IRModule({"main": workloads.get(config).prim_func()})


def test_there_are_databases():
    assert len(DATABASES) >= 10


@pytest.mark.parametrize("work_dir", DATABASES, ids=lambda p: str(p.relative_to(RESULTS)))
def test_database_matches_its_config(work_dir: Path):
    db = ms.database.JSONDatabase(
        path_workload=str(work_dir / "database_workload.json"),
        path_tuning_record=str(work_dir / "database_tuning_record.json"),
        allow_missing=False,
    )
    assert db.has_workload(_function(work_dir.name)), f"{work_dir} no longer matches"
