"""Per-scan tuning: each scan of a function is a task of its own, identical layers one task.

A function with several scans (a stacked or bidirectional LSTM) tuned as one task makes
the evolutionary search vary every scan's decisions in every candidate, and spends each
trial running all of them. Here the function is cut into segments
(:mod:`scan_tir.transform.segments`: each scan with the statements that feed it, then the
rest), segments of the same shape are grouped, and ``ms.tune_tasks`` tunes each group as
a task with its own budget (its weight: how many segments it stands for; MetaSchedule's
gradient task scheduler shares out the trials). Each group's best schedule is then
replayed on every segment of the group inside the whole function (block names renamed
from the task's segment to each other), giving one schedule of the whole function; where
independent scans can run side by side (``postprocs.concurrent_scans``) the same schedule
with them marked concurrent is a second candidate, and where a scan can run a chunk
behind the scan that feeds it (``postprocs.pipelined_scans``) the same schedule
pipelined is another. The candidates are checked
(``scan_violations``), measured with the tuning's runner and committed to the same JSON
database as records of the whole function, so ``compile_tir``, ``scan-tir db`` and
``apply_best`` find them like the records of a one-task tuning.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.schedule import Trace
from tvm.target import Target

from postprocs.concurrent_scans import mark_all_concurrent
from postprocs.pipelined_scans import mark_all_pipelined

from ..db.records import load
from ..errors import ScanLoweringError
from ..lower.vocabulary import expected_scans, lane_groups, pipelines, scan_violations
from ..transform.segments import Segment, names, same_shape, scan_segments
from .measure import build_candidate, local_runner
from .pooled_builder import PooledBuilder
from .progress import count_lines, log, records_file, watch_records
from .search import evolutionary_search
from .space import scan_space

#: The pipelines tried on a composed schedule (the most chunks of each).
PIPELINE_CHUNKS = (16,)


@dataclass(frozen=True)
class ScanTask:
    """Segments of one shape: the first is tuned, every one replays its schedule."""

    members: tuple[Segment, ...]

    @property
    def mod(self) -> tvm.IRModule:
        return tvm.IRModule({"main": self.members[0].func})


def scan_tasks(func: tirx.PrimFunc) -> list[ScanTask]:
    """``func``'s segments grouped by shape, in program order of each group's first."""
    groups: list[list[Segment]] = []
    for segment in scan_segments(func):
        twin = next((g for g in groups if same_shape(g[0].func, segment.func)), None)
        if twin is None:
            groups.append([segment])
        else:
            twin.append(segment)
    return [ScanTask(tuple(g)) for g in groups]


#: Instructions whose outputs are the blocks around their input, which differ between a
#: segment's function and the whole function (the root's children, a block's producers or
#: consumers in other segments).
_CONTEXTUAL = ("GetChildBlocks", "GetProducers", "GetConsumers")
_PROBE = "scan_tir.probe"
#: What TVM raises when a trace does not replay (InternalError is a RuntimeError).
_TVM_ERRORS = (RuntimeError, ValueError, IndexError, TypeError)


class Renaming:
    """Names of one segment's function to those of another of the same shape; a name the
    schedule made (``Xi2h_1_update``, ``Wh1_global``) by its longest prefix that names a
    block or buffer there."""

    def __init__(self, source: tirx.PrimFunc, target: tirx.PrimFunc) -> None:
        self.known = dict(zip(names(source), names(target), strict=True))
        self.by_length = sorted(self.known, key=len, reverse=True)

    def __call__(self, name: str) -> str:
        if name in self.known:
            return self.known[name]
        prefix = next((p for p in self.by_length if name.startswith(p)), None)
        return name if prefix is None else self.known[prefix] + name[len(prefix):]


def _placed(trace_json: list, segment: tirx.PrimFunc, rename: Renaming) -> list:
    """A trace's JSON, recorded on a segment of the same shape as ``segment``, made to
    replay on the whole function: ``GetSBlock`` names renamed by ``rename``, the marks on
    the root block dropped, and each
    :data:`_CONTEXTUAL` instruction replaced by one ``GetSBlock`` per block it gave on
    ``segment`` (found by replaying the trace up to it there and marking its outputs)."""
    insts, decisions = trace_json
    decided = {int(i): d for i, d in decisions}
    out: list = []
    out_decisions: list = []
    roots: set[str] = set()
    for k, (kind, inputs, attrs, outputs) in enumerate(insts):
        if kind == "GetSBlock":
            attrs = [rename(attrs[0]), *attrs[1:]]
            if attrs[0] == "root":
                roots.update(outputs)
        if kind in ("Annotate", "Unannotate") and inputs[0] in roots:
            continue  # the root's parallel/vector/unroll marks: see compose
        if kind in _CONTEXTUAL:
            found = _probe(segment, [out, out_decisions], [kind, inputs, attrs, outputs])
            out += [["GetSBlock", [], [name, "main"], [rv]] for rv, name in zip(outputs, found)]
            continue
        if k in decided:
            out_decisions.append([len(out), decided[k]])
        out.append([kind, inputs, attrs, outputs])
    return [out, out_decisions]


def _probe(func: tirx.PrimFunc, prefix: list, inst: list) -> list[str]:
    """The names of the blocks ``inst`` gives after ``prefix`` on ``func``."""
    insts, decisions = prefix
    marks = [["Annotate", [rv, i], [_PROBE], []] for i, rv in enumerate(inst[3])]
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    Trace.apply_json_to_schedule([[*insts, inst, *marks], decisions], sch)
    found: dict[int, str] = {}

    def visit(block: s_tir.SBlock) -> None:
        if _PROBE in block.annotations:
            found[int(block.annotations[_PROBE])] = block.name_hint

    tvm_ffi.structural_walk(sch.mod["main"].body, (s_tir.SBlock, visit))
    return [found[i] for i in range(len(inst[3]))]


def _check_placed(
    record: ms.database.TuningRecord, source: tirx.PrimFunc, placed: list, target: tirx.PrimFunc
) -> None:
    """Refuse a placed trace that schedules ``target`` otherwise than ``record`` schedules
    ``source`` (a created block renamed to the wrong one)."""
    want = s_tir.Schedule(tvm.IRModule({"main": source}))
    record.trace.apply_to_schedule(want, remove_postproc=False)
    got = s_tir.Schedule(tvm.IRModule({"main": target}))
    Trace.apply_json_to_schedule(placed, got)
    if not tvm_ffi.structural_equal(want.mod, got.mod):
        raise ValueError("replayed on the segment, the renamed schedule differs from the record's")


def _halves(trace_json: list) -> tuple[list, list]:
    """A trace's JSON cut before ``EnterPostproc``: the rules' part and the postprocs'
    (whose instructions never use a random variable of the rules' part)."""
    insts, decisions = trace_json
    kinds = [inst[0] for inst in insts]
    cut = kinds.index("EnterPostproc") if "EnterPostproc" in kinds else len(insts)
    first = [[i, d] for i, d in decisions if int(i) < cut]
    second = [[int(i) - cut, d] for i, d in decisions if int(i) >= cut]
    return [insts[:cut], first], [insts[cut:], second]


def compose(
    func: tirx.PrimFunc, tasks: list[ScanTask], best: list[ms.database.TuningRecord | None]
) -> s_tir.Schedule:
    """A schedule of ``func``: each task's ``best`` record replayed on each of its segments
    (a task without one left unscheduled).

    Every segment's rules come first, then every segment's postprocs, as one tuning of the
    whole function orders them: the weights' layout rewrites (RewriteLayout, a postproc)
    then sit together at the start of the function, where a deployment splits them off
    (``SplitLayoutRewritePreproc``), and not each behind the copies the previous segments'
    rules put there. The root's parallel, vector and unroll marks (one per segment, all
    on the one root block) are dropped: what RewriteParallelVectorizeUnroll made of each
    segment's is in its postprocs' part, loop by loop. Raises :class:`ScanLoweringError`
    when a record does not replay or the result breaks a scan's structure."""
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    halves = []
    for k, (task, record) in enumerate(zip(tasks, best, strict=True)):
        for member in task.members if record is not None else ():
            try:
                placed = _placed(
                    record.trace.as_json(), member.func, Renaming(task.members[0].func, member.func)
                )
                _check_placed(record, task.members[0].func, placed, member.func)
            except _TVM_ERRORS as err:
                raise ScanLoweringError(
                    f"per-scan tuning: the best record of task {k} does not replay on the "
                    f"whole function at root statements {list(member.positions)}: "
                    f"{str(err).strip().splitlines()[-1]}"
                ) from None
            halves.append(_halves(placed))
    try:
        for half in [h[0] for h in halves] + [h[1] for h in halves]:
            Trace.apply_json_to_schedule(half, sch)
    except _TVM_ERRORS as err:
        raise ScanLoweringError(
            "per-scan tuning: the segments' schedules do not replay together on the whole "
            f"function: {str(err).strip().splitlines()[-1]}"
        ) from None
    expected = expected_scans(tvm.IRModule({"main": func}))["main"]
    problems = scan_violations(sch.mod["main"], expected)
    if problems:
        raise ScanLoweringError(
            "per-scan tuning: the segments' best schedules break the whole function's scans: "
            + "; ".join(problems)
        )
    return sch


@dataclass(frozen=True)
class PerScanResult:
    """What :func:`tune_per_scan` did."""

    tasks: int  # tasks tuned (segments of one shape share one)
    segments: int
    records_before: int  # records of the tasks already in the work dir
    records_after: int
    composed_ms: dict[str, float]  # candidate ("sequential", "concurrent", ...) -> runner mean;
    # empty when nothing was tuned and the database held the composed schedule already
    seconds: float


def tune_per_scan(
    func: tirx.PrimFunc,
    work_dir: str | Path,
    trials: int,
    target: Target,
    *,
    label: str = "per-scan",
    runner: ms.runner.Runner | None = None,
    trials_per_iter: int = 64,
    build_timeout_s: float = 30.0,
    population: int = 512,
) -> PerScanResult:
    """Tune ``func``'s scans as separate tasks until ``work_dir`` holds ``trials`` records
    of them, then compose, measure and commit the whole function's schedule (see the
    module). Records already there count toward the budget, so a killed run resumes; a
    finished one, its composed schedule measured, is a no-op."""
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    tasks = scan_tasks(func)
    segments = sum(len(t.members) for t in tasks)
    before = task_records(work_dir, tasks)
    builder = PooledBuilder(timeout_sec=build_timeout_s, f_build=build_candidate)
    runner = runner if runner is not None else local_runner()
    start = time.perf_counter()
    if before < trials:
        log(
            f"{label}: {segments} segments in {len(tasks)} tasks, tuning {trials - before} "
            f"trials in {work_dir} ({before} records of them there already)"
        )
        contexts = [
            ms.TuneContext(
                mod=task.mod,
                target=target,
                space_generator=scan_space(target),
                search_strategy=evolutionary_search(population, trials - before),
                task_name=f"{label}:segment{k}",
            )
            for k, task in enumerate(tasks)
        ]
        remaining = trials - before
        with watch_records(label, work_dir, period_s=5.0,
                           total=count_lines(records_file(work_dir)) + remaining):
            ms.tune_tasks(
                tasks=contexts,
                task_weights=[float(len(t.members)) for t in tasks],
                work_dir=str(work_dir),
                max_trials_global=remaining,
                num_trials_per_iter=min(remaining, trials_per_iter),
                builder=builder,
                runner=runner,
                database=ms.database.JSONDatabase(work_dir=str(work_dir)),
            )
    db = ms.database.JSONDatabase(work_dir=str(work_dir))
    whole = tvm.IRModule({"main": func})
    if before >= trials and db.has_workload(whole) and db.get_top_k(db.commit_workload(whole), 1):
        log(f"{label}: {before} records of its tasks in {work_dir} already, budget {trials}, "
            "and the composed schedule measured: done")
        return PerScanResult(len(tasks), segments, before, before, {}, 0.0)
    best = []
    for k, task in enumerate(tasks):
        top = db.get_top_k(db.commit_workload(task.mod), 1)
        if not top:
            log(f"{label}: no valid record of task {k} (root statements "
                f"{list(task.members[0].positions)}): left unscheduled; tune longer")
        best.append(top[0] if top else None)
    composed = _candidates(compose(func, tasks, best))
    measured = _measure_and_commit(db, func, composed, target, builder, runner)
    for name, ms_ in measured.items():
        log(f"{label}: composed schedule, {name}: {ms_:.4f} ms (runner)")
    return PerScanResult(
        len(tasks), segments, before, task_records(work_dir, tasks), measured,
        time.perf_counter() - start,
    )


def _candidates(sch: s_tir.Schedule) -> dict[str, s_tir.Schedule]:
    """The composed schedule, and the same with independent scans side by side and with
    stacked layers pipelined, where the schedule allows."""
    out = {"sequential": sch}
    concurrent = sch.copy()
    mark_all_concurrent(concurrent)
    if lane_groups(concurrent.mod["main"])[0]:
        out["concurrent"] = concurrent
    for most in PIPELINE_CHUNKS:
        piped = sch.copy()
        mark_all_pipelined(piped, most)
        if pipelines(piped.mod["main"])[0]:
            out[f"pipelined, at most {most} chunks"] = piped
    return out


def _measure_and_commit(
    db: ms.database.Database,
    func: tirx.PrimFunc,
    candidates: dict[str, s_tir.Schedule],
    target: Target,
    builder: ms.builder.Builder,
    runner: ms.runner.Runner,
) -> dict[str, float]:
    """Each candidate's runner mean in ms; each committed as a record of ``func``."""
    workload = db.commit_workload(tvm.IRModule({"main": func}))
    names = list(candidates)
    built = builder.build([ms.builder.BuilderInput(candidates[n].mod, target) for n in names])
    out = {}
    for name, result in zip(names, built, strict=True):
        if result.error_msg:
            raise ScanLoweringError(
                f"per-scan tuning: the composed {name} schedule does not build: "
                f"{result.error_msg}"
            )
        # As MetaSchedule's measure: the arguments of the candidate, weights prepacked.
        args_info = ms.arg_info.ArgInfo.from_entry_func(candidates[name].mod, remove_preproc=True)
        run = runner.run(
            [ms.runner.RunnerInput(result.artifact_path, "cpu", args_info)]
        )[0].result()
        if run.error_msg:
            raise ScanLoweringError(
                f"per-scan tuning: the composed {name} schedule fails to run: {run.error_msg}"
            )
        secs = [float(s) for s in run.run_secs]
        db.commit_tuning_record(
            ms.database.TuningRecord(candidates[name].trace, workload, secs, target, args_info)
        )
        out[name] = 1e3 * sum(secs) / len(secs)
    return out


def task_records(work_dir: str | Path, tasks: list[ScanTask]) -> int:
    """How many records of ``tasks``' functions ``work_dir`` holds."""
    if not records_file(Path(work_dir)).exists():
        return 0
    tdb = load(Path(work_dir))
    total = 0
    for task in tasks:
        index = tdb.index_of(task.mod)
        total += 0 if index is None else len(tdb.of_workload(index))
    return total
