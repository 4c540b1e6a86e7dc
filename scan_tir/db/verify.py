"""Replaying every record and checking what it computes.

Each valid record's trace is applied to the untuned function (postprocs included, as the
tuner built it), checked for the scan invariants, built, run on the workload's inputs and
compared with its numpy reference (:mod:`.numerics`; the untuned function's own output
for a workload not from the zoo). Records that failed when tuned are skipped: MetaSchedule
already knows they do not build or run. With ``seq``, a zoo workload is rebuilt at that
sequence length and every record is replayed and checked there instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tvm
from tvm import tirx
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target

from ..errors import ScanLoweringError
from ..lower.vocabulary import Expected, expected_scans, scan_violations
from ..transform.segments import SEGMENT_OF, segment_at
from ..workloads import workload_from_tag
from . import numerics
from .records import TuningDB, _why
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
    seq: int | None = None,
) -> list[Verdict]:
    """A verdict per valid record; ``on_verdict(verdict, total)`` after each (progress).

    Parameters
    ----------
    seq
        Replay every record on its workload rebuilt at this sequence length (other sizes
        and lowering options as tuned) and compare with the numpy reference at that length,
        since a schedule can be right at the length it was tuned at and wrong over more
        steps (a race between steps showed at 4096 steps, not at 16). A tile sampled on
        rows over seq (a product hoisted over seq x batch) whose factors do not divide the
        new extent is re-derived by TVM's ``SamplePerfectTile`` on replay: a legal tiling,
        not the tuned one (``tune.symbolic.replay_sized`` keeps it only on a function of
        symbolic length). Only a zoo workload, or a segment of one (per-scan tuning,
        checked against the untuned segment's own output there), can be rebuilt; each
        record of another gets a verdict saying so.
        None: each record on its database's own function, at the tuned length.
    """
    valid = [e for e in db.entries if e.valid]
    subjects: dict[int, tuple[tirx.PrimFunc, numerics.Case, list[Expected]] | str] = {}
    for w in {e.workload for e in valid}:
        try:
            func, c = _subject(db, w, target, seq)
            subjects[w] = func, c, expected_scans(tvm.IRModule({"main": func}))["main"]
        except Exception as exc:  # not from the zoo, lowering at seq, TVM's errors
            subjects[w] = _why(exc)
    verdicts = []
    for e in valid:
        subject = subjects[e.workload]
        if isinstance(subject, str):
            verdicts.append(Verdict(e.index, float("nan"), subject))
        else:
            verdicts.append(_check(e.index, e.record, *subject, target, tol))
        if on_verdict is not None:
            on_verdict(verdicts[-1], len(valid))
    return verdicts


def _subject(
    db: TuningDB, workload: int, target: Target, seq: int | None
) -> tuple[tirx.PrimFunc, numerics.Case]:
    """The untuned function of workload line ``workload`` and its case: as stored, or
    rebuilt at ``seq`` steps."""
    if seq is None:
        return db.func(workload), numerics.case(db, workload, target)
    zoo = db.workload(workload)
    tag = str((db.func(workload).attrs or {}).get(SEGMENT_OF, ""))
    if zoo is None and tag:  # a segment of a per-scan tuning: cut from its whole at seq
        whole = workload_from_tag(tag)
        resized = whole.recurrence(whole.options, **{**whole.sizes, "seq": seq})
        func = segment_at(db.func(workload), resized.prim_func())
        return func, numerics.own_case(func, target, why=f"a segment of {resized.name}")
    if zoo is None:
        raise ScanLoweringError(
            f"{db.workload_name(workload)} cannot be rebuilt at {seq} steps: only a workload "
            "from the zoo can"
        )
    resized = zoo.recurrence(zoo.options, **{**zoo.sizes, "seq": seq})
    func = resized.prim_func()
    return func, numerics.zoo_case(resized, func)


def _check(
    index: int,
    record: ms.database.TuningRecord,
    untuned: tirx.PrimFunc,
    c: numerics.Case,
    expected: list[Expected],
    target: Target,
    tol: float,
) -> Verdict:
    err, problem = float("nan"), ""
    try:
        func = replay(record, untuned)
        broken = scan_violations(func, expected)
        # Numerics too when the scan is broken: says whether the break is harmful yet.
        err = numerics.max_error(numerics.call(numerics.build(func, target), c.args), c)
        found = [f"breaks the scan: {'; '.join(broken)}"] if broken else []
        if not err <= tol:
            found.append(f"wrong result: error {err:.3g} > {tol:g} vs {c.reference}")
        problem = "; ".join(found)
    except Exception as exc:  # TVM's errors: trace does not replay, codegen refuses
        problem = _why(exc)
    return Verdict(index, err, problem)
