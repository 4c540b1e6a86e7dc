"""Every committed tuning database still matches the function its tag describes.

A database is keyed by the tuned function's structure. A converter change that alters a
workload's function (an option's default, the order of a scan's inputs) orphans every
database tuned for it: ``compile_tir`` then finds no record, and the tables in notes.md can
no longer be replayed. Each database under ``experiments/results`` holds functions tagged
with their workload and lowering options (``scan_tir.workloads.workload_of``); this rebuilds
each from its tag alone and asks the database for it, and checks that the directory's name
says the same config and options (``parse_config``: a name without suffixes means the
default options, as ``experiments/tune.py`` names a work dir). A per-scan tuning's
segments are tagged with the function they were cut from, and are cut from it again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tvm
from tvm.s_tir import meta_schedule as ms

from scan_tir.transform.segments import SEGMENT_OF, segment_at
from scan_tir.workloads import get, parse_config, workload_from_tag, workload_of

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
        segment_of = str((func.attrs or {}).get(SEGMENT_OF, ""))
        workload = workload_from_tag(segment_of) if segment_of else workload_of(func)
        assert workload is not None, f"{work_dir}: an untagged function"
        assert workload == get(base, named), (
            f"{work_dir}: tagged {workload.name}"
        )
        rebuilt = workload.prim_func()
        if segment_of:  # a segment of a per-scan tuning: cut from the rebuilt function
            rebuilt = segment_at(func, rebuilt)
        assert db.has_workload(tvm.IRModule({"main": rebuilt})), (
            f"{work_dir}: {workload.name} no longer matches"
        )
