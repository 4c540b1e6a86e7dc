"""Scans in S-TIR: their annotations, block roles, loop kinds, and how to find them.

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


def mentions(expr: tirx.Expr, var: tirx.Var) -> bool:
    """Does ``expr`` use ``var``?"""
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
            and not any(mentions(v, node.loop_var) for v in reduce_values)
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


def is_parallel_loop(stmt: tirx.Stmt) -> bool:
    return isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL


def step_nests(step: s_tir.SBlock) -> list[tirx.Stmt]:
    """The statements of a step block's body, in order: its loop nests."""
    body = step.body
    return list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
