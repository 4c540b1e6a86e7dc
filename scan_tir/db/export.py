"""A database as a table: one row per record, for spreadsheets and pandas (CSV) or
scripts (JSON). Traces are not exported: ``scan-tir db show`` prints them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from .records import TuningDB

COLUMNS = ["index", "line", "workload", "trial", "valid", "mean_ms", "runs_ms", "instructions"]


def rows(db: TuningDB) -> list[dict]:
    """Per record: its index, file line, workload name, trial number within its workload
    (1-based, measurement order), validity, mean and individual latencies in ms."""
    out, trial = [], {}
    for e in db.entries:
        trial[e.workload] = trial.get(e.workload, 0) + 1
        out.append(
            {
                "index": e.index,
                "line": e.line,
                "workload": db.workload_name(e.workload),
                "trial": trial[e.workload],
                "valid": e.valid,
                "mean_ms": e.mean_ms if e.valid else None,
                "runs_ms": [s * 1e3 for s in e.run_secs] if e.valid else [],
                "instructions": len(e.record.trace.insts),
            }
        )
    return out


def to_csv(db: TuningDB, path: str | Path) -> None:
    with Path(path).open("w", newline="") as fh:
        writer = csv.DictWriter(fh, COLUMNS)
        writer.writeheader()
        for row in rows(db):
            writer.writerow({**row, "runs_ms": " ".join(f"{r:.6g}" for r in row["runs_ms"])})


def to_json(db: TuningDB, path: str | Path) -> None:
    """Records plus the lines that could not be read (``problems``)."""
    doc = {
        "work_dir": str(db.work_dir),
        "records": rows(db),
        "problems": [str(p) for p in db.problems],
    }
    Path(path).write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
