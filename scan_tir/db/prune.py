"""Cutting a database down to its best records, for committing it or sharing it.

A tuning database grows by one line per measured candidate (20-60 KB each for an LSTM),
while what ``compile_tir``, ``apply_best`` and the tools use is its best records. Pruning
keeps, per workload, the ``keep`` fastest valid lines verbatim and in measurement order, so
the result is still a JSON database that TVM reads and that tuning can resume into (the
search then warm-starts from the best only). The original file is kept as a backup.
"""

from __future__ import annotations

from pathlib import Path

from .records import RECORDS_FILE, _rewrite, load


def prune(work_dir: str | Path, keep: int) -> tuple[int, int]:
    """Keep the ``keep`` best valid records of each workload; returns (before, after).

    Unreadable lines and failed candidates are dropped too. The workload file is untouched
    (records refer to workloads by line index).
    """
    if keep < 1:
        raise ValueError(f"prune: keep must be at least 1, got {keep}")
    db = load(work_dir)
    lines = {e.line for w in db.used_workloads() for e in db.top(keep, w)}
    _rewrite(Path(work_dir) / RECORDS_FILE, "prune", lambda n: n in lines)
    return len(db.entries) + len([p for p in db.problems if p.file == RECORDS_FILE]), len(lines)
