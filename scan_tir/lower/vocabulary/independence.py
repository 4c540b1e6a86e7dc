"""Which root statements may run before, beside or behind which: the independence of
scans (concurrent groups, ``LANE`` marks)."""

from __future__ import annotations

import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir import Schedule

from .scans import LANE, SCAN, rebuilt

# Scans that run concurrently must not depend on each other, and whatever sits between
# them at the root must be able to run before the first of them. Judged on the buffers
# each root statement's blocks declare they read and write (S-TIR's regions, over-
# approximated to whole buffers): coarse, and so never wrong.


def root_statements(func: tirx.PrimFunc) -> list[tirx.Stmt]:
    """The statements directly in ``func``'s root block, in order."""
    body = func.body.block.body if isinstance(func.body, s_tir.SBlockRealize) else func.body
    return list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]


def with_root_statements(func: tirx.PrimFunc, stmts: list[tirx.Stmt]) -> tirx.PrimFunc:
    """``func`` with its root block's statements replaced by ``stmts``."""
    realize = func.body
    root = rebuilt(realize.block, body=tirx.SeqStmt(stmts))
    return func.with_body(s_tir.SBlockRealize(realize.iter_values, realize.predicate, root))


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
