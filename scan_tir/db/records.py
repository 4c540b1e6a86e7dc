"""Reading a MetaSchedule JSON database line by line, so that one bad line costs one record.

TVM's ``JSONDatabase`` parses both files in one go (src/s_tir/meta_schedule/database/
json_database.cc): a single unparseable line, such as the last line of a run killed while
writing, makes it refuse the whole database ("parallel_for_dynamic error with Unexpected end
of string", no line number), and a record pointing at a missing workload line does the same.
:func:`load` reads the two files itself, hands each line to TVM's own ``Workload.from_json``
and ``TuningRecord.from_json``, and keeps every record that parses, with a :class:`Problem`
naming each line that did not. :func:`repair` rewrites a database so that TVM accepts it
again (tuning resumes into it), keeping the original as a backup.

File format (json_database.cc): ``database_workload.json`` has one ``[shash, base64 module
JSON]`` per line; ``database_tuning_record.json`` one ``[workload line index, record JSON]``
per measured candidate, in the order they were measured.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import tvm
import tvm_ffi
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.database import TuningRecord

from ..errors import ScanLoweringError
from ..lower.vocabulary import find_scans
from ..transform.segments import SEGMENT_OF
from ..workloads import Workload, workload_from_tag, workload_of

WORKLOADS_FILE = "database_workload.json"
RECORDS_FILE = "database_tuning_record.json"
#: MetaSchedule's run_secs for a candidate that failed to build or run (kMaxMeanTime).
FAILED_S = 1e10


class DatabaseError(Exception):
    """No database to read at all: the path is wrong or holds no database files."""


@dataclass(frozen=True)
class Problem:
    """One line that could not be read, and why."""

    file: str
    line: int  # 1-based
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass(frozen=True)
class Entry:
    """One tuning record: its position in the database and what TVM parsed."""

    index: int  # 0-based among the records read, the ``--record`` of the tools
    line: int  # 1-based line in database_tuning_record.json
    workload: int  # line index in database_workload.json
    record: TuningRecord

    @property
    def run_secs(self) -> list[float]:
        return [float(s) for s in self.record.run_secs] if self.record.run_secs else []

    @property
    def valid(self) -> bool:
        """Measured successfully (a failed build or run is stored as 1e10 s)."""
        secs = self.run_secs
        return bool(secs) and all(s < FAILED_S for s in secs)

    @property
    def mean_ms(self) -> float:
        """Mean of the runs, what MetaSchedule ranks by; inf for a failed candidate."""
        return statistics.fmean(self.run_secs) * 1e3 if self.valid else math.inf


@dataclass
class TuningDB:
    """A database as read: workload modules by line, records in measurement order."""

    work_dir: Path
    workloads: list[ms.database.Workload | None]
    entries: list[Entry]
    problems: list[Problem] = field(default_factory=list)

    def workload(self, index: int) -> Workload | None:
        """The zoo workload of workload line ``index``, or None for one the zoo did not make
        (or one this version of the zoo does not know)."""
        if self.workloads[index] is None:
            return None
        try:
            return workload_of(self.func(index))
        except ScanLoweringError:  # tagged with a recurrence or size this zoo lacks
            return None

    def workload_name(self, index: int) -> str:
        zoo = self.workload(index)
        if zoo is not None:
            return zoo.name
        func = self.func(index) if self.workloads[index] is not None else None
        tag = str((func.attrs or {}).get(SEGMENT_OF, "")) if func is not None else ""
        if tag:
            scans = [s.block.name_hint for s in find_scans(func)]
            part = f"segment of {scans[0]}" if scans else "the statements after its scans"
            return f"{workload_from_tag(tag).name}: {part} (per-scan tuning)"
        return f"workload #{index} (not from the zoo)"

    def func(self, index: int) -> tvm.tirx.PrimFunc:
        """The untuned function of workload line ``index`` (``main``, as ``ms.tune_tir``
        names it, else the module's only function)."""
        mod = self.workloads[index].mod
        names = [gv.name_hint for gv in mod.get_global_vars()]
        return mod["main" if "main" in names else names[0]]

    def of_workload(self, index: int) -> list[Entry]:
        return [e for e in self.entries if e.workload == index]

    def used_workloads(self) -> list[int]:
        """The workload lines that have records, in order."""
        return sorted({e.workload for e in self.entries})

    def top(self, k: int, workload: int | None = None) -> list[Entry]:
        """The ``k`` fastest valid records (of one workload, or of all)."""
        pool = self.entries if workload is None else self.of_workload(workload)
        return sorted((e for e in pool if e.valid), key=lambda e: e.mean_ms)[:k]

    def index_of(self, mod: tvm.IRModule) -> int | None:
        """The workload line holding ``mod`` (structurally equal), or None."""
        for i, wl in enumerate(self.workloads):
            if wl is not None and tvm_ffi.structural_equal(wl.mod, mod):
                return i
        return None


def _paths(work_dir: Path) -> tuple[Path, Path]:
    return work_dir / WORKLOADS_FILE, work_dir / RECORDS_FILE


def _lines(path: Path) -> list[str]:
    """The file's lines; a last line without its newline is kept (it is checked later)."""
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def _why(err: Exception) -> str:
    lines = [s for s in str(err).strip().splitlines() if s.strip()]
    return f"{type(err).__name__}: {lines[-1][:200] if lines else ''}"


def _json(text: str, is_last: bool) -> tuple[object | None, str]:
    try:
        return json.loads(text), ""
    except json.JSONDecodeError as err:
        cut = " (cut short: a run killed while writing it?)" if is_last else ""
        return None, f"not JSON{cut}: {err.msg} at column {err.colno}"


def load(work_dir: str | Path) -> TuningDB:
    """Read the database in ``work_dir``; unreadable lines become :class:`Problem` entries.

    Raises :class:`DatabaseError` only when there is nothing to read: a missing directory
    or one without ``database_tuning_record.json``. An empty database loads with no
    entries.
    """
    work_dir = Path(work_dir)
    wl_path, rec_path = _paths(work_dir)
    if not work_dir.is_dir():
        raise DatabaseError(f"{work_dir}: no such directory")
    if not rec_path.is_file():
        raise DatabaseError(
            f"{work_dir}: no {RECORDS_FILE} here; is it a tuning work dir (scan-tir tune -d)?"
        )
    problems: list[Problem] = []
    workloads: list[ms.database.Workload | None] = []
    wl_lines = _lines(wl_path) if wl_path.is_file() else []
    for n, text in enumerate(wl_lines, 1):
        obj, why = _json(text, n == len(wl_lines))
        wl = None
        if obj is not None:
            try:
                wl = ms.database.Workload.from_json(obj)
            except Exception as err:  # TVM's ValueError/InternalError on a malformed entry
                why = f"not a workload: {_why(err)}"
        if wl is None:
            problems.append(Problem(WORKLOADS_FILE, n, why))
        workloads.append(wl)
    entries: list[Entry] = []
    rec_lines = _lines(rec_path)
    for n, text in enumerate(rec_lines, 1):
        obj, why = _json(text, n == len(rec_lines))
        if obj is None:
            problems.append(Problem(RECORDS_FILE, n, why))
            continue
        if not (isinstance(obj, list) and len(obj) == 2 and isinstance(obj[0], int)):
            problems.append(Problem(RECORDS_FILE, n, "not a [workload index, record] pair"))
            continue
        index, rec_json = obj
        if not 0 <= index < len(workloads) or workloads[index] is None:
            what = "missing" if not 0 <= index < len(workloads) else "unreadable"
            problems.append(
                Problem(RECORDS_FILE, n, f"its workload (line {index + 1} of {WORKLOADS_FILE}) "
                        f"is {what}")
            )
            continue
        try:
            record = TuningRecord.from_json(rec_json, workloads[index])
        except Exception as err:  # TVM's errors on a malformed record or a trace that fails
            problems.append(Problem(RECORDS_FILE, n, f"not a tuning record: {_why(err)}"))
            continue
        entries.append(Entry(len(entries), n, index, record))
    return TuningDB(work_dir, workloads, entries, problems)


def repair(work_dir: str | Path) -> list[Problem]:
    """Make ``work_dir``'s database loadable by TVM again; returns the lines dropped.

    Drops every record line :func:`load` cannot read (typically the last one, cut by a
    kill) and ends the file with a newline, so that the next record TVM appends starts on a
    line of its own. The original is kept as ``database_tuning_record.json.bak-<time>``.
    Unreadable lines at the end of ``database_workload.json`` (a kill while committing a new
    workload) are dropped the same way; one in the middle cannot be, since records refer to
    workloads by line index, and TVM will still refuse the database.
    """
    work_dir = Path(work_dir)
    db = load(work_dir)
    _, rec_path = _paths(work_dir)
    raw = rec_path.read_bytes()
    dropped = [p for p in db.problems if p.file == RECORDS_FILE]
    dropped_wl = [p for p in db.problems if p.file == WORKLOADS_FILE]
    if not dropped and not dropped_wl and (not raw or raw.endswith(b"\n")):
        return []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    keep = {e.line for e in db.entries}
    _rewrite(rec_path, stamp, lambda n: n in keep)
    if dropped_wl:
        wl_path, _ = _paths(work_dir)
        bad = {p.line for p in dropped_wl}
        last_ok = max((n for n in range(1, len(db.workloads) + 1) if n not in bad), default=0)
        # Only trailing bad lines can go: the records name workloads by line index.
        _rewrite(wl_path, stamp, lambda n: n <= last_ok)
    return dropped + dropped_wl


def _rewrite(path: Path, stamp: str, keep_line) -> None:
    shutil.copy2(path, path.with_name(f"{path.name}.bak-{stamp}"))
    lines = _lines(path)
    kept = [text for n, text in enumerate(lines, 1) if keep_line(n)]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(t + "\n" for t in kept), encoding="utf-8")
    tmp.replace(path)

