"""What a piece of a loop nest reads and writes, and whether two pieces may trade places.

A rewrite that changes the order in which parts of a function run (a scan a chunk behind
the one that feeds it, an elementwise nest merged into the tiles of the product it reads)
keeps the function's result when no two accesses to the same memory, one of them a write,
change order. Each piece's accesses are taken from its blocks' declared regions, bounded
over given loop ranges with ``sym.Analyzer`` interval sets: boxes, an over-approximation,
so a check that passes is never wrong; a region the analyzer cannot bound counts as the
whole buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import s_tir, tirx
from tvm.sym import Analyzer, IntervalSet

#: Per buffer, the box (lowest and highest index per dimension) of what a piece reads or
#: writes.
Boxes = dict[tirx.Buffer, list[tuple[int, int]]]


@dataclass
class Access:
    """What a piece of code reads and writes."""

    reads: Boxes
    writes: Boxes

    def include(self, more: Access) -> None:
        """Widen to also cover ``more``."""
        for mine, theirs in ((self.reads, more.reads), (self.writes, more.writes)):
            for buf, box in theirs.items():
                old = mine.get(buf)
                mine[buf] = box if old is None else _hull(old, box)


def realizes(stmt: tirx.Stmt, loops: list[tirx.For] | None = None) -> list:
    """Each outermost block realize under ``stmt``, with the loops above it within ``stmt``
    (after ``loops``)."""
    out: list = []
    _realizes(stmt, list(loops or []), out)
    return out


def _realizes(stmt: tirx.Stmt, loops: list[tirx.For], out: list) -> None:
    if isinstance(stmt, s_tir.SBlockRealize):
        out.append((stmt, list(loops)))
    elif isinstance(stmt, tirx.For):
        _realizes(stmt.body, [*loops, stmt], out)
    elif isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _realizes(s, loops, out)
    elif isinstance(stmt, tirx.IfThenElse):
        _realizes(stmt.then_case, loops, out)
        if stmt.else_case is not None:
            _realizes(stmt.else_case, loops, out)
    elif hasattr(stmt, "body"):
        _realizes(stmt.body, loops, out)


def _bounds(analyzer: Analyzer, expr: tirx.Expr, dom: dict) -> tuple[int, int] | None:
    s = analyzer.int_set(expr, dom)
    lo, hi = analyzer.simplify(s.min_value), analyzer.simplify(s.max_value)
    if isinstance(lo, tirx.IntImm) and isinstance(hi, tirx.IntImm):
        return int(lo), int(hi)
    return None


def _add(boxes: Boxes, region: object, binding: list, dom: dict) -> None:
    """Widen ``boxes`` by ``region`` of a block whose iterators are bound as ``binding``
    ((iterator, value) pairs), over the loop ranges ``dom``."""

    def bound(var: tirx.Var) -> tirx.Expr:
        return next((value for iv, value in binding if iv.same_as(var)), var)

    analyzer = Analyzer()
    box = []
    for dim, r in zip(region.source.shape, region.region):
        lo = _bounds(analyzer, tvm_ffi.structural_map(r.min, (tirx.Var, bound)), dom)
        last = tvm_ffi.structural_map(r.min + r.extent - 1, (tirx.Var, bound))
        hi = _bounds(analyzer, last, dom)
        if lo is not None and hi is not None:
            box.append((lo[0], hi[1]))
        elif isinstance(dim, tirx.IntImm):  # not bounded: the whole dimension
            box.append((0, int(dim) - 1))
        else:
            box.append((-(2**62), 2**62))
    old = boxes.get(region.source)
    boxes[region.source] = box if old is None else _hull(old, box)


def _hull(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(min(x[0], y[0]), max(x[1], y[1])) for x, y in zip(a, b)]


def access(realize: s_tir.SBlockRealize, dom: dict) -> Access:
    """What the block of ``realize`` reads and writes over the loop ranges ``dom``."""
    acc = Access({}, {})
    block = realize.block
    binding = [(iv.var, value) for iv, value in zip(block.iter_vars, realize.iter_values)]
    for r in block.reads:
        _add(acc.reads, r, binding, dom)
    for w in block.writes:
        _add(acc.writes, w, binding, dom)
    return acc


def loop_dom(loops: list[tirx.For]) -> dict:
    """Each loop's variable over its range."""
    return {loop.loop_var: IntervalSet(loop.min, loop.min + loop.extent - 1) for loop in loops}


def chunks_of(
    loop: tirx.For, chunks: int, stmts: list[tirx.Stmt] | None = None
) -> list[Access]:
    """What ``stmts`` (default: the loop's whole body), under ``loop``, touch in each of
    ``chunks`` equal runs of ``loop``'s iterations; the loop's extent must be a constant
    that ``chunks`` divides."""
    size = int(loop.extent) // chunks
    inner = [r for stmt in (stmts or [loop.body]) for r in realizes(stmt)]
    out = []
    for c in range(chunks):
        acc = Access({}, {})
        for realize, loops in inner:
            dom = loop_dom(loops)
            dom[loop.loop_var] = IntervalSet(c * size, c * size + size - 1)
            acc.include(access(realize, dom))
        out.append(acc)
    return out


def _overlap(a: Boxes, b: Boxes) -> tirx.Buffer | None:
    for buf, box in a.items():
        other = b.get(buf)
        if other is not None and all(x[0] <= y[1] and y[0] <= x[1] for x, y in zip(box, other)):
            return buf
    return None


def conflict(a: Access, b: Access) -> tirx.Buffer | None:
    """A buffer both touch where one of them writes (buffers are Vars: no ``or`` here)."""
    for mine, theirs in ((a.writes, b.reads), (a.reads, b.writes), (a.writes, b.writes)):
        buf = _overlap(mine, theirs)
        if buf is not None:
            return buf
    return None


def merge_problem(loop: tirx.For, tail: int = 1) -> str:
    """Why running the last ``tail`` statements of ``loop``'s body in each iteration, right
    after the others, may compute something else than running them as a loop of their own
    after all of ``loop``'s iterations, or race when the iterations run in parallel; ''
    when it cannot.

    ``Schedule.merge`` makes that change and checks no dependence between the nests it
    merges. It keeps the result when no iteration of the moved statements touches memory
    that another iteration (of the moved statements or of the others) touches, one of them
    writing.
    """
    if not isinstance(loop.extent, tirx.IntImm):
        return "the loop's extent is not a constant"
    body = loop.body
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    if len(stmts) <= tail:
        return "nothing in the loop's body before the merged statements"
    head, moved = stmts[:-tail], stmts[-tail:]
    n = int(loop.extent)
    before, after = chunks_of(loop, n, head), chunks_of(loop, n, moved)
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            for other, what in ((before[j], "the loop it joins"), (after[j], "the merged nest")):
                buf = conflict(after[i], other)
                if buf is not None:
                    return (
                        f"iteration {i} of the merged nest touches buffer '{buf.name}' where "
                        f"iteration {j} of {what} does, one of them writing"
                    )
    return ""
