"""Replaying every record and checking what it computes.

Each valid record's trace is applied to the untuned function (postprocs included, as the
tuner built it), checked for the scan invariants, built, run on the workload's inputs and
compared with its numpy reference (:mod:`.numerics`; the untuned function's own output
for a workload not from the zoo). Records that failed when tuned are skipped: MetaSchedule
already knows they do not build or run. With ``seq``, a zoo workload is rebuilt at that
sequence length and every record is replayed and checked there instead.

With a build timeout, records are built by MetaSchedule's LocalBuilder, a few at a time, so
that a build that does not finish (one of S-LEGACY's sat in LLVM for over nine minutes,
notes.md) gets a verdict saying so instead of holding the whole check.
"""

from __future__ import annotations

import os
import shutil
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


#: Records built together (by LocalBuilder's workers, one per core) between verdicts.
BATCH = 8


def verify(
    db: TuningDB,
    target: Target,
    tol: float = 1e-4,
    on_verdict: Callable[[Verdict, int], None] | None = None,
    seq: int | None = None,
    build_timeout_s: float | None = None,
    own_targets: bool = False,
    records: range | None = None,
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
    build_timeout_s
        Build in LocalBuilder's worker processes, and fail a record whose build takes
        longer with a verdict saying so (``scan-tir db verify`` does, by default; the
        workers' start costs seconds per batch). None: build here, without a limit.
    own_targets
        Build each record for the target it was tuned for, not ``target`` (a record tuned
        for generic x86-64 may take LLVM far longer to compile for another CPU: two of
        S-LEGACY's did not finish in 300 s for znver5, and built in 11 s for their own).
        ``target`` still builds the untuned function of a workload outside the zoo. A
        record tuned for a CPU whose instructions this one lacks is not run (its code would
        die of an illegal instruction) and gets a verdict saying so.
    records
        Only the records of these indices: a large database checked at a long length (a
        D record at 1024 steps runs a 270 GFLOP call) is checked in pieces, a session each.
        None: every record.
    """
    valid = [e for e in db.entries if e.valid and (records is None or e.index in records)]
    subjects: dict[int, tuple[tirx.PrimFunc, numerics.Case, list[Expected]] | str] = {}
    for w in {e.workload for e in valid}:
        try:
            func, c = _subject(db, w, target, seq)
            subjects[w] = func, c, expected_scans(tvm.IRModule({"main": func}))["main"]
        except Exception as exc:  # not from the zoo, lowering at seq, TVM's errors
            subjects[w] = _why(exc)
    targets = {e.index: e.record.target if own_targets else target for e in valid}
    foreign = {str(t): numerics.unrunnable_here(t) for t in targets.values()}
    verdicts: list[Verdict] = []
    for start in range(0, len(valid), BATCH):
        scheduled = {}
        for e in valid[start:start + BATCH]:
            subject = subjects[e.workload]
            if foreign[str(targets[e.index])]:
                subject = (f"not run: {foreign[str(targets[e.index])]} (verify without "
                           "--own-targets, for this CPU, or on a machine with that CPU)")
            scheduled[e.index] = (
                _scheduled(e.record, *subject) if not isinstance(subject, str) else subject
            )
        built = _build(
            {i: (s[0], targets[i]) for i, s in scheduled.items() if not isinstance(s, str)},
            build_timeout_s,
        )
        for e in valid[start:start + BATCH]:
            s = scheduled[e.index]
            if isinstance(s, str):
                verdict = Verdict(e.index, float("nan"), s)
            else:
                verdict = _check(e.index, built[e.index], s[1], subjects[e.workload][1], tol)
            verdicts.append(verdict)
            if on_verdict is not None:
                on_verdict(verdict, len(valid))
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


def _scheduled(
    record: ms.database.TuningRecord,
    untuned: tirx.PrimFunc,
    _case: numerics.Case,
    expected: list[Expected],
) -> tuple[tirx.PrimFunc, list[str]] | str:
    """The record's function and how it breaks the scans; or why its trace does not apply."""
    try:
        func = replay(record, untuned)
        return func, scan_violations(func, expected)
    except Exception as exc:  # TVM's errors: the trace does not replay
        return _why(exc)


def _build(
    funcs: dict[int, tuple[tirx.PrimFunc, Target]], timeout_s: float | None
) -> dict[int, tvm.runtime.Module | str]:
    """Each function built for its target and loaded, or why it was not: here, or in
    LocalBuilder's worker processes (which kill a build after ``timeout_s``)."""
    built: dict[int, tvm.runtime.Module | str] = {}
    if timeout_s is None or not funcs:
        for index, (func, target) in funcs.items():
            try:
                built[index] = numerics.build(func, target)
            except Exception as exc:  # TVM's errors: codegen refuses
                built[index] = _why(exc)
        return built
    builder = ms.builder.LocalBuilder(timeout_sec=timeout_s, f_build=numerics.build_unloaded)
    inputs = [ms.builder.BuilderInput(tvm.IRModule({"main": f}), t) for f, t in funcs.values()]
    for index, result in zip(funcs, builder.build(inputs)):
        if result.error_msg:
            lines = [x for x in str(result.error_msg).splitlines() if x.strip()]
            built[index] = f"build failed: {lines[-1][:200] if lines else ''}"
            continue
        try:
            built[index] = tvm.runtime.load_module(result.artifact_path)
        except Exception as exc:  # the exported library does not load
            built[index] = _why(exc)
        finally:
            shutil.rmtree(os.path.dirname(result.artifact_path), ignore_errors=True)
    return built


def _check(
    index: int,
    built: tvm.runtime.Module | str,
    broken: list[str],
    c: numerics.Case,
    tol: float,
) -> Verdict:
    # Numerics too when the scan is broken: says whether the break is harmful yet.
    found = [f"breaks the scan: {'; '.join(broken)}"] if broken else []
    if isinstance(built, str):
        return Verdict(index, float("nan"), "; ".join([*found, built]))
    err = float("nan")
    try:
        err = numerics.max_error(numerics.call(built, c.args), c)
        if not err <= tol:
            found.append(f"wrong result: error {err:.3g} > {tol:g} vs {c.reference}")
    except Exception as exc:  # the call raises
        found.append(_why(exc))
    return Verdict(index, err, "; ".join(found))
