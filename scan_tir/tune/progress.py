"""Progress of a long tuning run on stderr, read from the database and MetaSchedule's logs.

Records reach the database only as one whole line appended and flushed by TVM
(json_database.cc, ``JSONFileAppendLine``) after a batch was built and run, so the record
count alone stays flat for minutes; :func:`watch_records` pairs it with the newest line of
MetaSchedule's own log.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from ..db.records import RECORDS_FILE

T0 = time.perf_counter()


def log(msg: str) -> None:
    """Progress to stderr (stdout holds only results), with clock time and elapsed time,
    so that a long tuning run can be followed and its stages timed from the log alone."""
    now = datetime.now().strftime("%H:%M:%S")
    print(f"[{now} +{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def records_file(work_dir: Path) -> Path:
    """Where ``ms.tune_tir``'s JSON database appends one line per measured candidate."""
    return Path(work_dir) / RECORDS_FILE


def count_lines(path: Path) -> int:
    """Records written so far; 0 before the database's first commit."""
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0


LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \[INFO\] (.*)$")
SOURCE_TAG = re.compile(r"^\[[^\]]+\]\s*")  # "[task_scheduler.cc:208] " before the message


def tuning_stage(work_dir: Path, tail_bytes: int = 65536) -> str:
    """The newest INFO message in MetaSchedule's logs under ``work_dir/logs``.

    Records reach the database only once a whole batch (up to 64 trials) is built and run, so
    the count alone stays flat for minutes; the log says whether the search is evolving, the
    builder is compiling or the runner is timing.
    """
    newest = ("", "")
    for path in (Path(work_dir) / "logs").glob("*.log"):
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - tail_bytes))
            lines = fh.read().decode("utf-8", "replace").splitlines()
        for line in reversed(lines):
            m = LOG_LINE.match(line)
            msg = SOURCE_TAG.sub("", m.group(2)).strip() if m else ""
            if msg:  # skip the header lines of the scheduler's tables
                newest = max(newest, (m.group(1), msg))
                break
    return newest[1][:100]


def progress_bar(done: int, total: int | None, width: int = 20) -> str:
    """``[#####---------------] 8/32`` (just the count when the total is unknown)."""
    if not total:
        return f"{done}"
    filled = min(width, width * done // total)
    return f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total}"


@contextmanager
def watch_records(
    label: str, work_dir: Path, period_s: float = 10.0, total: int | None = None
) -> Iterator[None]:
    """Report the database's record count (a bar towards ``total``) and the tuner's stage
    while tuning runs.

    A daemon thread polls every ``period_s``; it prints when either changes, and at least once
    a minute so that a long silent phase (a batch being built) still shows signs of life.
    """
    stop = threading.Event()
    path = records_file(work_dir)
    start = count_lines(path)

    def poll() -> None:
        last, last_print = (start, ""), time.perf_counter()
        while not stop.wait(period_s):
            now = (count_lines(path), tuning_stage(work_dir))
            if now != last or time.perf_counter() - last_print >= 60:
                bar = progress_bar(now[0], total)
                log(f"{label}: {bar} records ({now[0] - start} new); {now[1]}")
                last, last_print = now, time.perf_counter()

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
