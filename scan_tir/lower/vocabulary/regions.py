"""What a piece of a loop nest reads and writes, and whether two pieces may trade places.

A rewrite that changes the order in which parts of a function run (a scan a chunk behind
the one that feeds it, an elementwise nest merged into the tiles of the product it reads)
keeps the function's result when no two accesses to the same memory, one of them a write,
change order. Each piece's accesses are taken from its blocks' declared regions, bounded
over given loop ranges: boxes, an over-approximation, so a check that passes is never
wrong. A region's bounds over the runs of a loop (:func:`chunks_of`) are its index
expressions' least and greatest values, found by evaluating them at every point of the
loops they use at once (numpy), where they use only those loops, few enough points and
integer arithmetic; elsewhere, and for :func:`access`, ``sym.Analyzer`` interval sets
bound them, run by run, and a region the analyzer cannot bound counts as the whole
buffer. The evaluation is what makes the check cheap enough to run on every candidate of
a tuning (``postprocs.FuseStepEpilogue`` checks each merge it makes): the interval sets
cost an analyzer call per run, dimension and bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tvm_ffi
from tvm import s_tir, tirx
from tvm.sym import Analyzer, IntervalSet

#: The most points (loop iterations) at which :func:`chunks_of` evaluates an index
#: expression to bound it; beyond, the analyzer's interval sets bound it.
MAX_POINTS = 1 << 16

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
    analyzer = Analyzer()
    box = [
        _analyzed(analyzer, lo, hi, extent, dom)
        for lo, hi, extent in _dims(region, binding)
    ]
    old = boxes.get(region.source)
    boxes[region.source] = box if old is None else _hull(old, box)


def _dims(region: object, binding: list) -> list[tuple[tirx.Expr, tirx.Expr, tirx.Expr]]:
    """Per dimension of ``region``: its first and last index with the block's iterators
    replaced by what ``binding`` binds them to, and the buffer's extent there."""

    def bound(var: tirx.Var) -> tirx.Expr:
        return next((value for iv, value in binding if iv.same_as(var)), var)

    return [
        (
            tvm_ffi.structural_map(r.min, (tirx.Var, bound)),
            tvm_ffi.structural_map(r.min + r.extent - 1, (tirx.Var, bound)),
            dim,
        )
        for dim, r in zip(region.source.shape, region.region)
    ]


def _analyzed(
    analyzer: Analyzer, first: tirx.Expr, last: tirx.Expr, extent: tirx.Expr, dom: dict
) -> tuple[int, int]:
    """The interval sets' bounds of indices from ``first`` to ``last`` over ``dom``; where
    they are not constants, the whole dimension (of ``extent``)."""
    lo, hi = _bounds(analyzer, first, dom), _bounds(analyzer, last, dom)
    if lo is not None and hi is not None:
        return lo[0], hi[1]
    if isinstance(extent, tirx.IntImm):
        return 0, int(extent) - 1
    return -(2**62), 2**62


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
    out = [Access({}, {}) for _ in range(chunks)]
    for realize, loops in inner:
        runs = _evaluated(realize, [loop, *loops], chunks)
        if runs is None:
            runs = []
            for c in range(chunks):
                dom = loop_dom(loops)
                dom[loop.loop_var] = IntervalSet(c * size, c * size + size - 1)
                runs.append(access(realize, dom))
        for acc, run in zip(out, runs):
            acc.include(run)
    return out


def _evaluated(
    realize: s_tir.SBlockRealize, loops: list[tirx.For], chunks: int
) -> list[Access] | None:
    """What the block of ``realize`` touches in each of ``chunks`` runs of ``loops[0]``,
    the loops above it being ``loops``: each index evaluated at every iteration; one that
    uses a variable from outside ``loops`` (a scan's time step, the same in every run)
    bounded by the analyzer, run by run. None where the loops' ranges are not constants or
    an index has too many points."""
    if not all(isinstance(x, tirx.IntImm) for lp in loops for x in (lp.min, lp.extent)):
        return None
    axes = {}
    for k, lp in enumerate(loops):
        shape = [1] * len(loops)
        shape[k] = int(lp.extent)
        start = int(lp.min)
        axes[lp.loop_var] = np.arange(start, start + int(lp.extent), dtype=np.int64).reshape(shape)
    first = int(loops[0].extent)
    size = first // chunks
    block = realize.block
    binding = [(iv.var, value) for iv, value in zip(block.iter_vars, realize.iter_values)]
    analyzer, doms = Analyzer(), []
    runs = [Access({}, {}) for _ in range(chunks)]
    for regions, side in ((block.reads, "reads"), (block.writes, "writes")):
        for region in regions:
            columns = []  # per dimension, (lowest, highest) per run
            for lo, hi, extent in _dims(region, binding):
                values = [_value(e, axes) for e in (lo, hi)]
                if any(v is None for v in values):
                    if not doms:
                        doms = [loop_dom(loops[1:]) for _ in range(chunks)]
                        for c, dom in enumerate(doms):
                            dom[loops[0].loop_var] = IntervalSet(c * size, c * size + size - 1)
                    columns.append([_analyzed(analyzer, lo, hi, extent, d) for d in doms])
                    continue
                full = [np.broadcast_to(v, (first, *v.shape[1:])) for v in values]
                if full[0].size > MAX_POINTS or full[1].size > MAX_POINTS:
                    return None
                lows = full[0].reshape(chunks, -1).min(axis=1)
                highs = full[1].reshape(chunks, -1).max(axis=1)
                columns.append(list(zip(lows.tolist(), highs.tolist())))
            for c, run in enumerate(runs):
                box = [column[c] for column in columns]
                mine = getattr(run, side)
                old = mine.get(region.source)
                mine[region.source] = box if old is None else _hull(old, box)
    return runs


def _floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a // b


def _truncdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))


#: Integer operations an index is evaluated through; any other node is not evaluated.
_OPS: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    tirx.Add: np.add,
    tirx.Sub: np.subtract,
    tirx.Mul: np.multiply,
    tirx.FloorDiv: _floordiv,
    tirx.FloorMod: np.mod,
    tirx.Div: _truncdiv,
    tirx.Mod: lambda a, b: a - b * _truncdiv(a, b),
    tirx.Min: np.minimum,
    tirx.Max: np.maximum,
}


def _value(expr: tirx.Expr, axes: dict) -> np.ndarray | None:
    """``expr`` at every point of the loops ``axes`` (loop variable -> its values along an
    axis of its own), broadcast; None where it uses another variable or operation."""
    if isinstance(expr, tirx.IntImm):
        return np.full((1,) * len(next(iter(axes.values())).shape), int(expr), dtype=np.int64)
    if isinstance(expr, tirx.Var):
        return next((v for var, v in axes.items() if var.same_as(expr)), None)
    if isinstance(expr, tirx.Cast) and "int" in str(expr.dtype):
        return _value(expr.value, axes)
    op = _OPS.get(type(expr))
    if op is None:
        return None
    a, b = _value(expr.a, axes), _value(expr.b, axes)
    if a is None or b is None:
        return None
    if op in (_floordiv, np.mod, _truncdiv) and np.any(b == 0):
        return None
    return op(a, b)


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
