"""A config's tuning database: where it is, whether it holds the config's function, its best.

Databases match functions structurally, and the lowering options change the function, so a
database holds the function of one spelling of a config (``A-LEGACY``, ``A-FAST``, ...) and
nothing else. A script handed the wrong spelling says what the database holds instead of
measuring nothing.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import tvm
from tvm import tirx
from tvm.s_tir import meta_schedule as ms

from scan_tir import workloads
from scan_tir.db.records import load
from scan_tir.errors import ScanLoweringError
from scan_tir.tune.progress import records_file

from .build import target

FAILED_RUN_S = 1e9  # MetaSchedule records failed builds/runs as run_secs = 1e10


def database_dir(root: Path, name: str) -> Path:
    """Where config ``name``'s database lives under ``root``: ``root/<canonical name>``
    (``workloads.config_name`` of what the name says: ``A-fast`` -> ``A-FAST``)."""
    return Path(root) / workloads.config_name(*workloads.parse_config(name))


def open_database(work_dir: Path) -> ms.database.JSONDatabase:
    """The saved database; refuses a missing one so that a replay never measures nothing."""
    if not records_file(work_dir).exists():
        root = Path(work_dir).parent
        there = sorted(d.name for d in root.glob("*") if records_file(d).exists())
        sys.exit(
            f"no tuning database in {work_dir}: run without --replay first"
            + (f" (databases in {root}: {', '.join(there)})" if there else "")
        )
    return ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=False)


def suggested_name(zoo: workloads.Workload) -> str | None:
    """The config name (suffixes spelled out) that builds ``zoo``'s function, or None."""
    for base, (recurrence, sizes) in workloads.CONFIGS.items():
        if recurrence == zoo.recurrence.name and sizes == zoo.sizes:
            return workloads.config_name(base, zoo.options)
    return None


def require_workload(
    db: ms.database.Database, work_dir: Path, mod: tvm.IRModule, name: str
) -> None:
    """Exit with what ``work_dir`` holds, and the config name to pass, unless it holds the
    function config ``name`` builds."""
    if db.has_workload(mod):
        return
    tdb = load(work_dir)
    held = []
    for index in tdb.used_workloads():
        zoo = tdb.workload(index)
        hint = suggested_name(zoo) if zoo is not None else None
        held.append(tdb.workload_name(index) + (f": pass {hint}" if hint else ""))
    sys.exit(
        f"{name}: {work_dir} holds no record of {name}'s function; it holds "
        + ("; ".join(held) if held else "no records")
    )


def database_stats(
    db: ms.database.Database, mod: tvm.IRModule | None = None
) -> tuple[int, int, float]:
    """(records, valid records, best mean latency in ms) over the whole database; the best
    over ``mod``'s records only where given (a per-scan database also holds its segments').

    The mean of run_secs is what MetaSchedule ranks by. Failed candidates are kept in the
    database with run_secs 1e10, so they count as trials but not as valid ones.
    """
    records = db.get_all_tuning_records()
    means = [statistics.fmean(float(s) for s in rec.run_secs) for rec in records if rec.run_secs]
    valid = [m for m in means if m < FAILED_RUN_S]
    if mod is not None:
        own = db.get_top_k(db.commit_workload(mod), 1)
        valid_own = [statistics.fmean(float(s) for s in r.run_secs) for r in own]
    else:
        valid_own = valid
    return len(records), len(valid), min(valid_own) * 1e3 if valid_own else math.nan


def best_record(
    db: ms.database.Database, work_dir: Path, mod: tvm.IRModule, name: str
) -> ms.database.TuningRecord:
    """The fastest record of config ``name``'s function (exits, saying why, without one)."""
    require_workload(db, work_dir, mod, name)
    top = db.get_top_k(db.commit_workload(mod), 1)
    if not top:
        sys.exit(f"{name}: the database in {work_dir} holds no successful candidate")
    return top[0]


def best_schedule(
    db: ms.database.Database, work_dir: Path, mod: tvm.IRModule, name: str
) -> tirx.PrimFunc:
    """Config ``name``'s function scheduled by its database's best record, as
    ``compile_tir`` gives it (weights repacked inside every call)."""
    require_workload(db, work_dir, mod, name)
    sch = ms.tir_integration.compile_tir(db, mod, target())
    if sch is None:
        sys.exit(f"{name}: the database in {work_dir} holds no successful candidate")
    return sch.mod["main"]


def config_list(text: str) -> list[str]:
    """``--configs``: comma-separated config names, each checked by ``scan_tir.workloads``
    (the one reader of config names) before anything runs."""
    names = [c.strip() for c in text.split(",") if c.strip()]
    for name in names:
        try:
            workloads.parse_config(name)
        except ScanLoweringError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    return names


def add_database_arguments(parser: argparse.ArgumentParser) -> None:
    """``--configs`` and ``--results`` of the scripts that read committed databases."""
    parser.add_argument(
        "--configs", required=True, type=config_list, help="comma-separated config names"
    )
    parser.add_argument(
        "--results",
        default=Path("experiments/results"),
        type=Path,
        help="root of the databases (config X: <results>/X/, as experiments/tune.py finds it)",
    )
