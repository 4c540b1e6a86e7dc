"""Every committed tuning database still matches the function its tag describes.

A database is keyed by the tuned function's structure. A converter change that alters a
workload's function (an option's default, the order of a scan's inputs) orphans every
database tuned for it: ``compile_tir`` then finds no record, and the tables in notes.md can
no longer be replayed. Each database under ``experiments/results`` holds functions tagged
with their workload and lowering options (``scan_tir.workloads.workload_of``); this rebuilds
each from its tag alone and asks the database for it, and checks that the directory's name
says the same config and options (``parse_config``: a name without suffixes means the
default options, as ``experiments/tune.py`` names a work dir).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tvm
from tvm.s_tir import meta_schedule as ms

from scan_tir.workloads import get, parse_config, workload_of

RESULTS = Path(__file__).resolve().parents[1] / "experiments" / "results"
DATABASES = sorted(p.parent for p in RESULTS.rglob("database_workload.json"))


def _stored_functions(work_dir: Path) -> list[tvm.tirx.PrimFunc]:
    lines = (work_dir / "database_workload.json").read_text().splitlines()
    return [ms.database.Workload.from_json(json.loads(line)).mod["main"] for line in lines]


def test_there_are_databases():
    assert len(DATABASES) >= 10


@pytest.mark.parametrize("work_dir", DATABASES, ids=lambda p: str(p.relative_to(RESULTS)))
def test_database_matches_its_tag_and_its_name(work_dir: Path):
    db = ms.database.JSONDatabase(
        path_workload=str(work_dir / "database_workload.json"),
        path_tuning_record=str(work_dir / "database_tuning_record.json"),
        allow_missing=False,
    )
    base, named = parse_config(work_dir.name)
    stored = _stored_functions(work_dir)
    assert stored
    for func in stored:
        workload = workload_of(func)
        assert workload is not None, f"{work_dir}: an untagged function"
        assert workload == get(base, named), (
            f"{work_dir}: tagged {workload.name}"
        )
        rebuilt = tvm.IRModule({"main": workload.prim_func()})
        assert db.has_workload(rebuilt), f"{work_dir}: {workload.name} no longer matches"
