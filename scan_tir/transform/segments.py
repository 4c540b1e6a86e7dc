"""A function with several scans, cut into one function per scan: what per-scan tuning
tunes (``scan_tir.tune.per_scan``).

Each root statement that is not a scan goes with the first scan that consumes what it
writes, directly or through other such statements (a layer's initial state and hoisted
input product go with its scan); the statements no scan consumes (the concatenation of a
bidirectional layer's directions, a stack's final states) make one segment more, without
a scan. A segment's function keeps the whole function's block names, so a schedule of it
replays on the whole function; its parameters are the root buffers it reads from other
segments or the caller, then those it writes that are read elsewhere or returned.
Segments whose functions are structurally equal (the layers of a stack after the first)
are one task and share one schedule: :func:`same_shape` with :func:`names` maps a
schedule of one onto the other.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import s_tir, tirx

from ..lower.vocabulary import is_scan_statement, root_statements, touched

#: Attribute of a segment's function: the whole function's workload tag, or "".
SEGMENT_OF = "scan_tir.segment_of"


@dataclass(frozen=True)
class Segment:
    """Root statements of a function that make one segment, and the segment as a function."""

    positions: tuple[int, ...]  # root positions, ascending
    func: tirx.PrimFunc

    @property
    def has_scan(self) -> bool:
        return any(is_scan_statement(s) for s in root_statements(self.func))


def scan_segments(func: tirx.PrimFunc) -> list[Segment]:
    """``func``'s segments: one per scan, in program order, then the rest (if any)."""
    stmts = root_statements(func)
    root_buffers = [*func.params, *func.body.block.alloc_buffers]
    at_root = {b for b in root_buffers}
    access = [tuple(s & at_root for s in touched(stmt)) for stmt in stmts]
    owner: list[int | None] = [None] * len(stmts)
    scans = [i for i, stmt in enumerate(stmts) if is_scan_statement(stmt)]
    for i in scans:
        owner[i] = i
    for i in reversed(range(len(stmts))):
        if owner[i] is not None:
            continue
        readers = [j for j in range(i + 1, len(stmts)) if access[j][0] & access[i][1]]
        owner[i] = next((owner[j] for j in readers if owner[j] is not None), None)
    groups = [tuple(i for i in range(len(stmts)) if owner[i] == s) for s in scans]
    rest = tuple(i for i in range(len(stmts)) if owner[i] is None)
    groups += [rest] if rest else []
    return [Segment(g, _segment_func(func, stmts, access, g, root_buffers)) for g in groups]


def _segment_func(
    func: tirx.PrimFunc,
    stmts: list[tirx.Stmt],
    access: list[tuple[set, set]],
    positions: tuple[int, ...],
    root_buffers: list[tirx.Var],
) -> tirx.PrimFunc:
    inside = set(positions)
    reads = set().union(*(access[i][0] for i in positions))
    writes = set().union(*(access[i][1] for i in positions))
    elsewhere = set().union(*(access[i][0] for i in range(len(stmts)) if i not in inside))
    returned = set(func.params)
    inputs = [b for b in root_buffers if b in reads - writes]
    outputs = [b for b in root_buffers if b in writes and (b in elsewhere or b in returned)]
    params = inputs + outputs
    allocs = [b for b in root_buffers if b in writes and b not in params]
    body = [stmts[i] for i in positions]
    root = s_tir.SBlock(
        [], [], [], "root", body[0] if len(body) == 1 else tirx.SeqStmt(body), None, allocs
    )
    whole = dict(func.attrs or {})
    free = {func.params[int(i)] for i in whole.get("layout_free_buffers", [])}
    attrs = {
        "global_symbol": "main",
        "tirx.noalias": True,
        "s_tir": True,
        SEGMENT_OF: str(whole.get("scan_tir.workload", "")),
    }
    indices = [k for k, p in enumerate(params) if p in free]
    if indices:
        attrs["layout_free_buffers"] = indices
    return tirx.PrimFunc(params, s_tir.SBlockRealize([], True, root)).with_attrs(attrs)


def segment_at(segment: tirx.PrimFunc, whole: tirx.PrimFunc) -> tirx.PrimFunc:
    """The segment of ``whole`` whose blocks and buffers bear ``segment``'s names (the
    same segment of the function at other sizes); raises ValueError without one."""
    own = names(segment)
    for candidate in scan_segments(whole):
        if names(candidate.func) == own:
            return candidate.func
    raise ValueError("no segment of the function has this segment's names")


def same_shape(a: tirx.PrimFunc, b: tirx.PrimFunc) -> bool:
    """Whether ``a`` and ``b`` are one task: equal up to names."""
    return bool(tvm_ffi.structural_equal(a, b))


def names(func: tirx.PrimFunc) -> list[str]:
    """``func``'s parameter, buffer and block names in program order (two functions of
    the same shape list corresponding names at the same index)."""
    found: list[str] = [p.name for p in func.params]
    buffers: list[tirx.Var] = list(func.params)

    def visit(node: object) -> None:
        if isinstance(node, s_tir.SBlock):
            found.append(node.name_hint)
        elif isinstance(node.ty, tirx.BufferType) and not any(node.same_as(b) for b in buffers):
            buffers.append(node)
            found.append(node.name)

    tvm_ffi.structural_walk(func.body.block.body, [(s_tir.SBlock, visit), (tirx.Var, visit)])
    return found
