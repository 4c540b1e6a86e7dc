"""Replaying every record and checking what it computes.

Each valid record's trace is applied to the untuned function (postprocs included, as the
tuner built it), checked for the scan invariants, built, run on the workload's inputs and
compared with its numpy reference (:mod:`.numerics`; the untuned function's own output
for a workload not from the zoo). Records that failed when tuned are skipped: MetaSchedule
already knows they do not build or run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tvm
from tvm.target import Target

from ..lower.vocabulary import expected_scans, scan_violations
from . import numerics
from .records import TuningDB
from .replay import replay


@dataclass(frozen=True)
class Verdict:
    index: int
    max_error: float  # relative to max(1, |reference|); NaN when not run
    problem: str  # empty: the record passed

    @property
    def ok(self) -> bool:
        return not self.problem


def verify(
    db: TuningDB,
    target: Target,
    tol: float = 1e-4,
    on_verdict: Callable[[Verdict, int], None] | None = None,
) -> list[Verdict]:
    """A verdict per valid record; ``on_verdict(verdict, total)`` after each (progress)."""
    valid = [e for e in db.entries if e.valid]
    cases = {w: numerics.case(db, w, target) for w in {e.workload for e in valid}}
    expected = {w: expected_scans(tvm.IRModule({"main": db.func(w)}))["main"] for w in cases}
    verdicts = []
    for e in valid:
        c, err, problem = cases[e.workload], float("nan"), ""
        try:
            func = replay(e.record, db.func(e.workload))
            broken = scan_violations(func, expected[e.workload])
            # Numerics too when the scan is broken: says whether the break is harmful yet.
            err = numerics.max_error(numerics.call(numerics.build(func, target), c.args), c)
            found = [f"breaks the scan: {'; '.join(broken)}"] if broken else []
            if not err <= tol:
                found.append(f"wrong result: error {err:.3g} > {tol:g} vs {c.reference}")
            problem = "; ".join(found)
        except Exception as exc:  # TVM's errors: trace does not replay, codegen refuses
            lines = str(exc).strip().splitlines()
            problem = f"{type(exc).__name__}: {lines[-1][:200] if lines else ''}"
        verdicts.append(Verdict(e.index, err, problem))
        if on_verdict is not None:
            on_verdict(verdicts[-1], len(valid))
    return verdicts
