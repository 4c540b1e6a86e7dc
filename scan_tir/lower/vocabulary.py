"""The S-TIR vocabulary of scans: annotations, block roles, loop kinds, invariants.

Everything downstream of the converter (schedule rules, postprocessors, tuning, database
tools) finds a scan through what this module defines, never by guessing from loop shapes:
the converter writes the annotations, :func:`find_scans` reads them, :func:`block_role`
says which blocks a rule may touch, :func:`free_loops` which loops it may parallelise,
and :func:`scan_violations` checks that a schedule kept every scan intact. It imports
nothing else from the project, so ``meta_rules`` and ``postprocs`` depend on it alone.

A scan is one root-level block (annotated :data:`SCAN`) that reads the scan's inputs and
writes its state buffers, so that the root scope stays a stage pipeline and the ops around
the scan schedule as usual. Inside it: the init copies (:data:`SCAN_INIT`), then the serial
time loop whose body is the step block (:data:`SCAN_STEP`, an ordered iterator).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir import Schedule
from tvm.s_tir.schedule import LoopRV, SBlockRV

#: On the block that holds a whole scan: the name of the TE scan.
SCAN = "scan_tir.scan"
#: On each scan's per-step block: the name of the TE scan.
SCAN_STEP = "scan_tir.scan_step"
#: On the blocks that copy a scan's initial rows into its state buffer.
SCAN_INIT = "scan_tir.scan_init"

#: Decisions the scan rules leave on a step block for the scan postprocs to carry out:
#: the most iterations one parallel loop of the step may fuse (0: the step runs serially),
#: and the longest loop the step may vectorize. Unrolling uses MetaSchedule's own key
#: (``meta_schedule.unroll_explicit``) so that its MutateUnroll mutates the decision.
STEP_PARALLEL = "scan_tir.step_parallel"
STEP_VECTORIZE = "scan_tir.step_vectorize"
STEP_UNROLL = "meta_schedule.unroll_explicit"
#: Whether the step runs persistently (1) or forks the thread pool per parallel nest (0):
#: sampled by ``meta_rules.PersistentStep`` on the step block; carried out by
#: ``postprocs.RewritePersistentStep``, which makes every nest of the step a parallel loop
#: and then marks the time loop with :data:`PERSISTENT`, the one annotation a time loop may
#: carry. The build (``scan_tir.transform.persistent_launch``) runs a marked loop inside
#: one thread-pool launch with a barrier after each nest.
STEP_PERSISTENT = "scan_tir.step_persistent"
PERSISTENT = "scan_tir.persistent"
#: Whether a scan runs concurrently with the independent scans after it (1) or before them
#: (0): sampled by ``meta_rules.ConcurrentScans`` on the scan block; carried out by
#: ``postprocs.RewriteConcurrentScans``, which puts :data:`LANE` (the scan's lane in its
#: group, 0 for the first) on the unit loop above each scan of the group. The build
#: (``scan_tir.transform.concurrent_lanes``) runs a group as one parallel loop, a lane per
#: scan, each lane's own loops serial.
CONCURRENT = "scan_tir.concurrent"
LANE = "scan_tir.lane"

#: ``IterVar.iter_type`` values: data-parallel, and ordered (``T.axis.scan``).
DATA_PAR = 0
ORDERED = 3


@dataclass(frozen=True)
class ScanNest:
    """One scan as it appears in a PrimFunc."""

    name: str
    #: The block holding the whole scan (init copies and time loop).
    block: s_tir.SBlock
    #: The serial time loop.
    loop: tirx.For
    #: The per-step block directly under ``loop``.
    step: s_tir.SBlock


def find_scans(func: tirx.PrimFunc) -> list[ScanNest]:
    """Every annotated scan in ``func``, in program order."""
    scans: list[ScanNest] = []

    def visit(block: s_tir.SBlock) -> None:
        if SCAN not in block.annotations:
            return
        loops: list[tirx.For] = []

        def on_loop(loop: tirx.For) -> None:
            body = loop.body
            if isinstance(body, s_tir.SBlockRealize) and SCAN_STEP in body.block.annotations:
                loops.append(loop)

        tvm_ffi.structural_walk(block.body, (tirx.For, on_loop))
        for loop in loops:
            scans.append(ScanNest(str(block.annotations[SCAN]), block, loop, loop.body.block))

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, visit), order="pre")
    return scans


class Role:
    """Where a block sits relative to the scans of its function."""

    #: Not inside any scan: the stock rules schedule it as usual.
    OUTSIDE = "outside"
    #: Part of a scan's fixed structure (the scan block, an init copy, a step block): no rule
    #: may touch it.
    STRUCTURE = "structure"
    #: Inside a step block: one step's ordinary work, which the scan rules tune.
    IN_STEP = "in_step"


def block_role(sch: s_tir.Schedule, block: s_tir.schedule.SBlockRV) -> str:
    """The :class:`Role` of ``block`` in the schedule's current state."""
    sref = sch.get_sref(block)
    own = sref.stmt.annotations
    if SCAN in own or SCAN_STEP in own or SCAN_INIT in own:
        return Role.STRUCTURE
    parent = sref.parent
    while parent is not None:
        stmt = parent.stmt
        if isinstance(stmt, s_tir.SBlock):
            if SCAN_STEP in stmt.annotations:
                return Role.IN_STEP
            if SCAN in stmt.annotations:
                return Role.STRUCTURE
        parent = parent.parent
    return Role.OUTSIDE


def step_blocks(sch: s_tir.Schedule) -> list[tuple[s_tir.schedule.SBlockRV, ScanNest]]:
    """Each scan's step block in ``sch``'s functions, as a block RV, with its scan."""
    found = []
    for gv, func in sch.mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            for scan in find_scans(func):
                found.append((sch.get_sblock(scan.step.name_hint, func_name=gv.name_hint), scan))
    return found


# ----------------------------------------------------------------------------- blocks

#: ``s_tir.SBlock``'s constructor arguments, in order.
_SBLOCK_FIELDS = (
    "iter_vars",
    "reads",
    "writes",
    "name_hint",
    "body",
    "init",
    "alloc_buffers",
    "match_buffers",
    "annotations",
)


def rebuilt(block: s_tir.SBlock, **changes: object) -> s_tir.SBlock:
    """``block`` with the named fields replaced (``rebuilt(b, name_hint="x")``); SBlocks are
    immutable, and their constructor takes all nine fields by position."""
    unknown = sorted(set(changes) - set(_SBLOCK_FIELDS))
    if unknown:
        raise TypeError(f"rebuilt: SBlock has no field(s) {unknown}; it has {_SBLOCK_FIELDS}")
    return s_tir.SBlock(*(changes.get(f, getattr(block, f)) for f in _SBLOCK_FIELDS))


# ----------------------------------------------------------------------------- loop kinds
# Which loops above a block may be parallelised, vectorised or fused at (shared by the step
# rules and postprocs): a loop qualifies when it is serial, unannotated, of constant extent,
# and bound only to data-parallel iterators of the block.


def block_realize(sch: Schedule, block: SBlockRV, innermost: LoopRV) -> s_tir.SBlockRealize:
    """The realize of ``block`` under ``innermost`` (a schedule exposes blocks, not their
    bindings, which say which loop drives which iterator)."""
    target = sch.get(block)
    found: list[s_tir.SBlockRealize] = []

    def visit(realize: s_tir.SBlockRealize) -> None:
        if realize.block.same_as(target):
            found.append(realize)

    tvm_ffi.structural_walk(sch.get(innermost), (s_tir.SBlockRealize, visit))
    return found[0]


def _mentions(expr: tirx.Expr, var: tirx.Var) -> bool:
    return any(v.same_as(var) for v in tirx.analysis.undefined_vars(expr, []))


def free_loops(sch: Schedule, block: SBlockRV, loops: list[LoopRV]) -> list[bool]:
    """For each of ``loops`` (above ``block``, outermost first): does it qualify?"""
    if not loops:
        return []
    realize = block_realize(sch, block, loops[-1])
    reduce_values = [
        value
        for iv, value in zip(realize.block.iter_vars, realize.iter_values)
        if iv.iter_type != DATA_PAR
    ]
    flags = []
    for loop in loops:
        node = sch.get(loop)
        flags.append(
            node.kind == tirx.ForKind.SERIAL
            and not node.annotations
            and isinstance(node.extent, tirx.IntImm)
            and not any(_mentions(v, node.loop_var) for v in reduce_values)
        )
    return flags


def nested_prefix(sch: Schedule, loops: list[LoopRV], flags: list[bool]) -> list[LoopRV]:
    """The longest prefix of qualifying loops, each directly the body of the one before
    (so that they can be fused)."""
    prefix: list[LoopRV] = []
    for loop, ok in zip(loops, flags):
        if not ok:
            break
        if prefix and not sch.get(prefix[-1]).body.same_as(sch.get(loop)):
            break
        prefix.append(loop)
    return prefix


# ----------------------------------------------------------------------------- invariants
# What every schedule of a function with scans must keep. Against the function before
# scheduling, each scan must still have:
#
# - its time loop: serial, no thread binding, no annotation but :data:`PERSISTENT`, from 0
#   over the whole range
#   (not split, not fused, not reordered), directly binding the step block;
# - its step block, with its ordered iterator bound to exactly that loop's variable;
# - if persistent, a step whose every nest is a parallel loop (the build puts a barrier
#   after each, so a serial nest would run on every thread and be followed by none);
# - every block that was inside the step, unless scheduled away (inlined), still inside it;
# - if marked to run concurrently with other scans (:data:`LANE`), no dependence on them
#   or on what lies between them (:func:`group_problem`);
# - and the whole function well-formed S-TIR: a primitive that mis-derives a block's
#   regions (TVM 0.27's compute_inline across a step, meta_rules/step_inputs.py) yields a
#   function that ``tvm.compile`` still builds, so nothing else would stop it being measured.
#
# The postproc ``postprocs.VerifyScanStructure`` rejects tuning candidates that break them;
# the tests, ``apply_best`` and ``scan-tir db verify`` check replayed schedules with the
# same code.


@dataclass(frozen=True)
class Expected:
    extent: tirx.Expr
    inner: frozenset[str]


def _block_names(stmt: tirx.Stmt) -> set[str]:
    names: set[str] = set()
    tvm_ffi.structural_walk(stmt, (s_tir.SBlock, lambda b: names.add(str(b.name_hint))))
    return names


def expected_scans(mod) -> dict[str, list[Expected]]:
    """What :func:`scan_violations` checks a candidate against, read off the original."""
    expected: dict[str, list[Expected]] = {}
    for gv, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            expected[gv.name_hint] = [
                Expected(s.step.iter_vars[0].dom.extent, frozenset(_block_names(s.step.body)))
                for s in find_scans(func)
            ]
    return expected


def _loop_violation(scan: ScanNest, want: Expected) -> str | None:
    loop, step = scan.loop, scan.step
    if loop.kind != tirx.ForKind.SERIAL or loop.thread_binding is not None:
        return f"time loop of scan '{scan.name}' is {loop.kind}, not serial"
    if set(loop.annotations) - {PERSISTENT}:
        return f"time loop of scan '{scan.name}' is annotated {dict(loop.annotations)}"
    if not (isinstance(loop.min, tirx.IntImm) and int(loop.min) == 0):
        return f"time loop of scan '{scan.name}' starts at {loop.min}"
    if not tvm_ffi.structural_equal(loop.extent, want.extent):
        return f"time loop of scan '{scan.name}' runs {loop.extent} steps, not {want.extent}"
    if PERSISTENT in loop.annotations:
        serial = [i for i, n in enumerate(step_nests(step)) if not is_parallel_loop(n)]
        if serial:
            return (
                f"persistent scan '{scan.name}': nests {serial} of its step are not parallel "
                "loops, so no barrier would follow them"
            )
    (iv,) = step.iter_vars
    realize = loop.body
    if iv.iter_type != ORDERED or not realize.iter_values[0].same_as(loop.loop_var):
        return f"step block of scan '{scan.name}' is no longer bound to its time loop in order"
    return None


def is_parallel_loop(stmt: tirx.Stmt) -> bool:
    return isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL


def step_nests(step: s_tir.SBlock) -> list[tirx.Stmt]:
    """The statements of a step block's body, in order: its loop nests."""
    body = step.body
    return list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]


def scan_violations(func: tirx.PrimFunc, expected: list[Expected]) -> list[str]:
    """Why ``func`` breaks the scans it should hold (empty: it keeps them all)."""
    scans = find_scans(func)
    if len(scans) != len(expected):
        return [f"{len(scans)} scan time loops found, {len(expected)} expected"]
    problems = []
    if not s_tir.analysis.verify_well_formed(func, assert_mode=False):
        problems.append("not well-formed S-TIR (s_tir.analysis.verify_well_formed)")
    everywhere = _block_names(func.body)
    for scan, want in zip(scans, expected):
        problem = _loop_violation(scan, want)
        if problem:
            problems.append(problem)
        left = (want.inner & everywhere) - _block_names(scan.step.body)
        if left:
            problems.append(f"blocks {sorted(left)} left the step of scan '{scan.name}'")
    problems += [f"concurrent scans: {why}" for why in lane_groups(func)[1]]
    return problems


# ----------------------------------------------------------------------------- independence
# Scans that run concurrently must not depend on each other, and whatever sits between
# them at the root must be able to run before the first of them. Judged on the buffers
# each root statement's blocks declare they read and write (S-TIR's regions, over-
# approximated to whole buffers): coarse, and so never wrong.


def root_statements(func: tirx.PrimFunc) -> list[tirx.Stmt]:
    """The statements directly in ``func``'s root block, in order."""
    body = func.body.block.body if isinstance(func.body, s_tir.SBlockRealize) else func.body
    return list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]


def touched(stmt: tirx.Stmt) -> tuple[set[tirx.Buffer], set[tirx.Buffer]]:
    """The buffers the blocks under ``stmt`` read, and those they write."""
    reads: set[tirx.Buffer] = set()
    writes: set[tirx.Buffer] = set()

    def visit(block: s_tir.SBlock) -> None:
        reads.update(r.source for r in block.reads)
        writes.update(w.source for w in block.writes)

    tvm_ffi.structural_walk(stmt, (s_tir.SBlock, visit))
    return reads, writes


def may_precede(later: tirx.Stmt, earlier: tirx.Stmt) -> bool:
    """Can ``later`` run before (or beside) ``earlier`` with the same result? Neither
    reads what the other writes, nor do they write the same buffer."""
    r1, w1 = touched(earlier)
    r2, w2 = touched(later)
    return not (r2 & w1 or w2 & (r1 | w1))


def is_scan_statement(stmt: tirx.Stmt) -> bool:
    """A root statement that is a scan: the unit loop the converter puts each scan in."""
    return (
        isinstance(stmt, tirx.For)
        and isinstance(stmt.body, s_tir.SBlockRealize)
        and SCAN in stmt.body.block.annotations
    )


def root_scans(sch: Schedule) -> list[tuple[str, int, s_tir.SBlock]]:
    """(function name, root position, scan block) of each scan at the root of ``sch``'s
    functions, in program order."""
    found = []
    for gv, func in sch.mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            for i, stmt in enumerate(root_statements(func)):
                if is_scan_statement(stmt):
                    found.append((gv.name_hint, i, stmt.body.block))
    return found


def concurrent_group(stmts: list[tirx.Stmt], first: int) -> list[int]:
    """Positions of the scans that can run concurrently with the scan at ``first``: each
    later scan that depends on none taken before it, while every statement passed over
    can run before them (else the group ends there). ``[first]`` when there is none."""
    group = [first]
    for i in range(first + 1, len(stmts)):
        if not all(may_precede(stmts[i], stmts[g]) for g in group):
            break
        if is_scan_statement(stmts[i]):
            group.append(i)
    return group


def group_problem(stmts: list[tirx.Stmt], members: list[int]) -> str | None:
    """Why the scans at ``members`` (root positions, ascending) cannot run concurrently,
    with the statements between them moved before the first; None when they can."""
    if len(members) < 2:
        return (
            f"no later scan is independent of the scan at root statement {members[0]} "
            "(and of what lies between them)"
        )
    taken = [members[0]]
    for i in range(members[0] + 1, members[-1] + 1):
        clash = [g for g in taken if not may_precede(stmts[i], stmts[g])]
        if clash:
            return f"root statement {i} depends on the scan at root statement {clash[0]}"
        if i in members:
            if not is_scan_statement(stmts[i]):
                return f"root statement {i} is not a scan"
            taken.append(i)
    return None


def lane_groups(func: tirx.PrimFunc) -> tuple[list[list[int]], list[str]]:
    """The groups the :data:`LANE` marks of ``func`` make (root positions of each group's
    scans: lane 0, then lanes 1, 2, ... in order), and what is wrong with the marks."""
    stmts = root_statements(func)
    groups: list[list[int]] = []
    problems: list[str] = []
    for i, stmt in enumerate(stmts):
        if not (isinstance(stmt, tirx.For) and LANE in stmt.annotations):
            continue
        lane = int(stmt.annotations[LANE])
        if lane == 0:
            groups.append([i])
        elif groups and lane == len(groups[-1]):
            groups[-1].append(i)
        else:
            problems.append(f"root statement {i} is marked lane {lane} out of order")
    problems += [why for g in groups if (why := group_problem(stmts, g))]
    return groups, problems
