"""One record in full: its latency, its trace as Python with the rule or postproc that
made each instruction (:mod:`.provenance`), and the scan invariants of its schedule."""

from __future__ import annotations

from dataclasses import dataclass

import tvm

from ..lower.vocabulary import expected_scans, scan_violations
from .provenance import UNMATCHED, Step, provenance
from .records import TuningDB
from .replay import replay


@dataclass(frozen=True)
class Shown:
    header: str
    steps: list[Step]
    violations: list[str]  # empty: the schedule keeps every scan
    replay_error: str  # non-empty when the trace does not replay on the function


def show(db: TuningDB, index: int) -> Shown:
    """Record ``index`` (0-based, in measurement order) of ``db``; IndexError if none."""
    if not 0 <= index < len(db.entries):
        raise IndexError(f"no record {index}: the database has {len(db.entries)} readable ones")
    e = db.entries[index]
    func = db.func(e.workload)
    runs = ", ".join(f"{s * 1e3:.4g}" for s in e.run_secs)
    status = f"mean {e.mean_ms:.4g} ms (runs: {runs} ms)" if e.valid else "failed to build/run"
    header = (
        f"record {index} (line {e.line} of {db.work_dir}/database_tuning_record.json)\n"
        f"workload: {db.workload_name(e.workload)}\n"
        f"latency: {status}\n"
        f"target: {e.record.target}"
    )
    violations, error = [], ""
    try:
        violations = scan_violations(
            replay(e.record, func), expected_scans(tvm.IRModule({"main": func}))["main"]
        )
    except Exception as err:  # ScheduleError: the trace no longer applies
        error = f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:200]}"
    return Shown(header, provenance(e.record, e.record.target), violations, error)


def render(shown: Shown) -> str:
    """Text for a terminal: the header, the invariants, then ``made by | instruction``."""
    width = max((len(s.made_by) for s in shown.steps), default=0)
    if shown.replay_error:
        scans = f"scan invariants: not checked, the trace does not replay ({shown.replay_error})"
    elif shown.violations:
        scans = "scan invariants: VIOLATED\n" + "\n".join(f"  - {v}" for v in shown.violations)
    else:
        scans = "scan invariants: kept"
    lines = [f"  {s.made_by:<{width}}  {s.python}" for s in shown.steps]
    unmatched = sum(s.made_by == UNMATCHED for s in shown.steps)
    if unmatched:
        lines.append(f"note: {unmatched} instructions are in no design space of the current "
                     "rules: the record was made by another version of them")
    return "\n".join([shown.header, scans, "trace (made by | instruction):", *lines])
