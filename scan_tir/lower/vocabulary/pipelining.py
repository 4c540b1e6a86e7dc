"""Pipelined scans: a scan run chunk by chunk, one chunk behind the scan that feeds it.

Stacked layers are a chain: layer l+1's scan reads what the root statements between the
two scans (its input projection, one product over every step) compute from layer l's
outputs. Run in order, each scan's steps share both cores, with a fork/join or a barrier
per step. Pipelined, the time axis is cut into C chunks of K steps and the two layers run
a wavefront, each on its own core, layer l+1 one chunk behind::

    for chunk in range(C + 1):
        for lane in T.parallel(2):
            if lane == 0:
                if chunk < C: the first scan's steps chunk*K .. chunk*K + K - 1
            elif chunk >= 1:
                each projection nest's piece chunk - 1; the second scan's steps
                (chunk - 1)*K .. chunk*K - 1

where a nest's piece c is its outermost loop over ``[c*E/C, (c+1)*E/C)`` (E: the loop's
extent), so each chunk's projection is still one product, over K steps' rows. The first
scan's initial copies run in its chunk 0; root statements between the scans that do not
depend on the first scan run before it.

Which schedules allow it is decided here, for any schedule, from the blocks' declared
regions: the pipelined order keeps every pair of accesses to the same memory, one of them
a write, in the original order. Among the parts (the first scan, the projection nests, the
second scan, in program order), part a's chunk i runs after part b's chunk j (a before b)
exactly when i > j, so no such pair may touch the same memory. Each chunk's regions are
bounded over its own loop ranges (:mod:`.regions`: an over-approximation, so a pass of the
check is never wrong): a projection nest whose outermost loop runs over the
hidden units rather than over time fails it and is refused, with the reason.

The mark is :data:`PIPELINE` on the second scan's unit loop, the most chunks as its value:
``postprocs.RewritePipelinedScans`` sets it where the check passes, and the build
(``scan_tir.transform.pipelined_scans``) carries out the plan with the most chunks, at
most the mark's, that the check passes on the function it builds (:func:`pipelines`). A
record replayed at another length may allow fewer chunks, or none (its projection's tiles
re-derived for the new extent); where none passes, the pair runs in program order, which
is always right, and :func:`pipelines` says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import s_tir, tirx
from tvm.sym import IntervalSet

from .independence import is_scan_statement, may_precede, root_statements
from .regions import Access, access, chunks_of, conflict, loop_dom, realizes
from .scans import LANE, SCAN_STEP

#: On the unit loop of a scan: run it in this many chunks, one chunk behind the scan before
#: it (the number of chunks, at least 2).
PIPELINE = "scan_tir.pipeline"
#: The decision ``meta_rules.PipelinedScans`` leaves on a scan block: at most this many
#: chunks (0: not pipelined).
PIPELINED = "scan_tir.pipelined"

@dataclass(frozen=True)
class Pipeline:
    """A pipelined pair of scans: root positions and chunking."""

    #: Root positions of the feeding scan and of the pipelined one.
    first: int
    second: int
    #: Root positions of the nests between them that depend on the first scan.
    feeds: tuple[int, ...]
    #: Root positions of the statements between them that run before the first scan.
    moved: tuple[int, ...]
    chunks: int
    #: Steps per chunk.
    steps: int


def time_loop(stmt: tirx.For) -> tuple[list[tirx.Stmt], tirx.For, list[tirx.Stmt]]:
    """A scan statement's statements before its time loop, the loop, and those after."""
    body = stmt.body.block.body
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    for i, s in enumerate(stmts):
        if isinstance(s, tirx.For) and isinstance(s.body, s_tir.SBlockRealize):
            if SCAN_STEP in s.body.block.annotations:
                return stmts[:i], s, stmts[i + 1:]
    raise ValueError("a scan statement without a time loop")


def _scan_chunks(stmt: tirx.For, chunks: int, steps: int) -> list[Access]:
    before, loop, _ = time_loop(stmt)
    prelude = [r for s in before for r in realizes(s)]
    out = []
    for c in range(chunks):
        acc = access(loop.body, {loop.loop_var: IntervalSet(c * steps, c * steps + steps - 1)})
        if c == 0:  # the initial copies run before the first chunk's steps
            for realize, loops in prelude:
                acc.include(access(realize, loop_dom(loops)))
        out.append(acc)
    return out


def _const(expr: tirx.Expr) -> int | None:
    return int(expr) if isinstance(expr, tirx.IntImm) else None


def split_between(
    stmts: list[tirx.Stmt], first: int, second: int
) -> tuple[list[int], list[int]]:
    """The root statements between two scans that depend on the first (directly or through
    another such statement), and those that can run before it."""
    feeds: list[int] = []
    moved: list[int] = []
    for i in range(first + 1, second):
        if all(may_precede(stmts[i], stmts[j]) for j in [first, *feeds]):
            moved.append(i)
        else:
            feeds.append(i)
    return feeds, moved


def pipeline_problem(func: tirx.PrimFunc, second: int, chunks: int) -> Pipeline | str:
    """The pipeline of the scan at root position ``second`` with the scan before it in
    ``chunks`` chunks, or why it would compute something else."""
    stmts = root_statements(func)
    if not is_scan_statement(stmts[second]):
        return f"root statement {second} is not a scan"
    earlier = [i for i in range(second) if is_scan_statement(stmts[i])]
    if not earlier:
        return f"no scan before the scan at root statement {second}"
    first = earlier[-1]
    if any(LANE in stmts[i].annotations for i in (first, second)):
        return "a scan of the pair runs in a group of concurrent scans"
    extents = [_const(time_loop(stmts[i])[1].extent) for i in (first, second)]
    if None in extents or extents[0] != extents[1]:
        return f"the two scans run {extents[0]} and {extents[1]} steps, not one fixed length"
    if chunks < 2 or extents[0] % chunks:
        return f"{chunks} chunks do not divide the {extents[0]} steps"
    if time_loop(stmts[first])[2] or time_loop(stmts[second])[2]:
        return "a scan with work after its time loop"
    feeds, moved = split_between(stmts, first, second)
    for i in feeds:
        nest = stmts[i]
        extent = _const(nest.extent) if isinstance(nest, tirx.For) else None
        if extent is None or extent % chunks:
            return (
                f"root statement {i} (between the scans) is not a loop whose constant extent "
                f"{chunks} chunks divide"
            )
    steps = extents[0] // chunks
    parts = [
        (first, _scan_chunks(stmts[first], chunks, steps)),
        *[(i, chunks_of(stmts[i], chunks)) for i in feeds],
        (second, _scan_chunks(stmts[second], chunks, steps)),
    ]
    for a, (pa, ca) in enumerate(parts):
        later = [Access({}, {}) for _ in range(chunks)]  # hull of ca[j + 1:]
        for j in range(chunks - 2, -1, -1):
            later[j].include(later[j + 1])
            later[j].include(ca[j + 1])
        for pb, cb in parts[a + 1:]:
            for j in range(chunks - 1):
                buf = conflict(later[j], cb[j])
                if buf is not None:
                    return (
                        f"root statement {pa}'s chunks after chunk {j} touch buffer "
                        f"'{buf.name}' where root statement {pb}'s chunk {j} does, so it "
                        "cannot run ahead of it"
                    )
    return Pipeline(first, second, tuple(feeds), tuple(moved), chunks, steps)


def feeding_scan(stmts: list[tirx.Stmt], second: int) -> int | None:
    """Root position of the scan before the scan at ``second``, if the latter depends on
    it (through the statements between them or directly)."""
    earlier = [i for i in range(second) if is_scan_statement(stmts[i])]
    if not earlier:
        return None
    first = earlier[-1]
    feeds, _ = split_between(stmts, first, second)
    if feeds or not may_precede(stmts[second], stmts[first]):
        return first
    return None


def plan_pipeline(func: tirx.PrimFunc, second: int, most: int) -> Pipeline | str:
    """The pipeline of the scan at ``second`` with the most chunks, at most ``most``, that
    keeps the function's result; or why there is none."""
    stmts = root_statements(func)
    if not is_scan_statement(stmts[second]):
        return f"root statement {second} is not a scan"
    extent = _const(time_loop(stmts[second])[1].extent)
    if extent is None:
        return "the scan's length is symbolic"
    why = f"no number of chunks from 2 to {most} divides the {extent} steps"
    for chunks in range(min(most, extent), 1, -1):
        if extent % chunks == 0:
            plan = pipeline_problem(func, second, chunks)
            if isinstance(plan, Pipeline):
                return plan
            why = plan
    return why


def pipelines(func: tirx.PrimFunc) -> tuple[list[Pipeline], list[str]]:
    """The pipelines the build carries out for the :data:`PIPELINE` marks of ``func``, and
    why each other marked scan runs in program order."""
    stmts = root_statements(func)
    found: list[Pipeline] = []
    unmet: list[str] = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, tirx.For) and PIPELINE in stmt.annotations:
            plan = plan_pipeline(func, i, int(stmt.annotations[PIPELINE]))
            if isinstance(plan, str):
                unmet.append(f"scan at root statement {i}: {plan}")
            elif found and plan.first <= found[-1].second:
                unmet.append(f"scan at root statement {i}: its feeding scan is pipelined already")
            else:
                found.append(plan)
    return found, unmet
