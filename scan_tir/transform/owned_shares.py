"""``MarkOwnedShares``: a persistent time loop whose threads never read each other's writes
needs no barriers.

A persistent launch (``persistent_launch``) puts a barrier after each parallel nest of the
step, because in general a thread's next nest (or next step) reads what other threads
wrote. A diagonal recurrence does not: in Mamba's selective scan or minGRU each channel's
state depends on that channel's state alone, so when every nest of the step is a parallel
loop over the channels with the same extent, the launch gives each thread the same
iterations of every nest (its static share, ``codegen_cpu.cc``), and a thread only ever
reads elements it wrote itself, or that nobody in the launch writes. Each share can then
run its channels through the whole sequence without waiting for the others
(``persistent_launch`` moves the shares' loop outside the time loop): the
channel-parallel form of the linear-recurrence kernels (Mamba's fused scan; Intel's CPU
selective scan), reached from the ordinary tuned step.

Legality is checked here, on the function as it will be built, not assumed from the
recurrence: a copy is taken through the S-TIR lowering passes up to (not including)
buffer flattening, so that accesses are plain loads and stores with their own
multi-dimensional indices, and for every buffer written inside the launch, with each
nest's parallel loop variable renamed to one ``i``:

- every nest's parallel loop has the same extent, and nothing else in the step (the
  launch refuses the rest anyway) runs outside one;
- the box that iteration ``i`` writes (per dimension, the hull of every write's
  interval, with the time loop and every inner loop relaxed) is disjoint from the box of
  any other iteration: along one dimension it advances past itself (``min(i+1) >
  max(i)``), or the dimensions that vary with ``i`` are single points whose tuple is a
  bijective affine map of ``i`` (``detect_iter_map``);
- every read of the buffer by iteration ``i`` lies inside iteration ``i``'s box along the
  dimensions that separate the boxes (elsewhere it may read rows nobody in the launch
  writes, such as a state's init row).

Together these say that no element is read by one thread and written by another, nor
written by two: the iterations are independent over the whole sequence, so dropping the
barriers and running each iteration's steps in turn changes no value. Where the check fails the
launch keeps its barriers; the reason is kept in the loop's annotation so a test or a
profile can say why. Opaque accesses (pointers passed to calls) fail it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir import Range
from tvm.ir.expr import Call, TensorLoad
from tvm.sym import Analyzer, IntervalSet, detect_iter_map
from tvm.tirx import stmt as S

from ..lower.vocabulary import PERSISTENT, is_parallel_loop, mentions

#: On a persistent time loop after this pass: 1 when its threads own their shares (the
#: launch needs no barriers), else the reason they do not.
OWNED_SHARES = "scan_tir.owned_shares"

#: The S-TIR passes the build runs before flattening buffers (tvm/s_tir/pipeline.py),
#: those that change where and how buffers are accessed.
_UNFLATTENED = (
    s_tir.transform.CanonicalizeLoop,
    s_tir.transform.LowerInitBlock,
    s_tir.transform.PlanAndUpdateBufferAllocationLocation,
    s_tir.transform.ConvertBlocksToOpaque,
    s_tir.transform.CompactBufferAllocation,
    s_tir.transform.LowerMatchBuffer,
    s_tir.transform.LowerOpaqueBlock,
)
_OPAQUE = (tvm.ir.Op.get("tirx.address_of"), tvm.ir.Op.get("tirx.tvm_access_ptr"))


@dataclass
class _Access:
    write: bool
    indices: list[tirx.Expr]
    domain: dict[tirx.Var, IntervalSet]


@dataclass
class _Nest:
    loop: S.For
    accesses: dict[tirx.Var, list[_Access]] = field(default_factory=dict)
    private: list[tirx.Var] = field(default_factory=list)
    opaque: bool = False


class _NotOwned(Exception):
    pass


def _collect(nest: _Nest, stmt: S.Stmt, domain: dict) -> None:
    """Record every load and store under ``stmt``, with the loops around it relaxed."""

    def on_expr(expr: tirx.Expr) -> None:
        def on_load(load: TensorLoad) -> None:
            nest.accesses.setdefault(load.source, []).append(
                _Access(False, list(load.indices), dict(domain))
            )

        def on_call(call: Call) -> None:
            if any(call.op.same_as(op) for op in _OPAQUE):
                nest.opaque = True

        tvm_ffi.structural_walk(expr, [(TensorLoad, on_load), (Call, on_call)])

    if isinstance(stmt, S.For):
        on_expr(stmt.min)
        on_expr(stmt.extent)
        inner = dict(domain)
        inner[stmt.loop_var] = IntervalSet(stmt.min, stmt.min + stmt.extent - 1)
        _collect(nest, stmt.body, inner)
    elif isinstance(stmt, S.BufferStore):
        on_expr(stmt.value)
        for index in stmt.indices:
            on_expr(index)
        nest.accesses.setdefault(stmt.buffer, []).append(
            _Access(True, list(stmt.indices), dict(domain))
        )
    elif isinstance(stmt, S.SeqStmt):
        for s in stmt.seq:
            _collect(nest, s, domain)
    elif isinstance(stmt, S.IfThenElse):
        on_expr(stmt.condition)
        _collect(nest, stmt.then_case, domain)
        if stmt.else_case is not None:
            _collect(nest, stmt.else_case, domain)
    elif isinstance(stmt, (S.AllocBuffer, S.DeclBuffer)):
        nest.private.append(stmt.buffer)
        if getattr(stmt, "body", None) is not None:
            _collect(nest, stmt.body, domain)
    elif isinstance(stmt, S.AttrStmt):
        _collect(nest, stmt.body, domain)
    elif isinstance(stmt, (S.Bind, S.Evaluate)):
        on_expr(stmt.value)
    else:
        raise _NotOwned(f"a {type(stmt).__name__} in a nest")


def _nests(body: S.Stmt, domain: dict, nests: list[_Nest]) -> None:
    """The parallel nests of a launch body, with the serial loops above them relaxed."""
    if is_parallel_loop(body):
        nest = _Nest(body)
        _collect(nest, body.body, domain)
        nests.append(nest)
    elif isinstance(body, S.SeqStmt):
        for s in body.seq:
            _nests(s, domain, nests)
    elif isinstance(body, S.AttrStmt):
        _nests(body.body, domain, nests)
    elif isinstance(body, (S.AllocBuffer, S.DeclBuffer)):
        if getattr(body, "body", None) is not None:
            _nests(body.body, domain, nests)
    elif isinstance(body, S.For) and body.kind == tirx.ForKind.SERIAL:
        inner = dict(domain)
        inner[body.loop_var] = IntervalSet(body.min, body.min + body.extent - 1)
        _nests(body.body, inner, nests)
    else:
        raise _NotOwned(f"a {type(body).__name__} outside every parallel nest")


def _renamed(exprs: list[tirx.Expr], old: tirx.Var, new: tirx.Var) -> list[tirx.Expr]:
    def swap(var: tirx.Var) -> tirx.Var:
        return new if var.same_as(old) else var

    return [tvm_ffi.structural_map(e, (tirx.Var, swap)) for e in exprs]


def _box(analyzer: Analyzer, access: _Access) -> list[tuple[tirx.Expr, tirx.Expr]]:
    box = []
    for index in access.indices:
        span = analyzer.int_set(index, access.domain)
        box.append((analyzer.simplify(span.min_value), analyzer.simplify(span.max_value)))
    return box


def _separating(
    analyzer: Analyzer, hull: list[tuple[tirx.Expr, tirx.Expr]], i: tirx.Var, extent: tirx.Expr
) -> list[int] | None:
    """Dimensions along which the boxes ``hull`` of different values of ``i`` never meet
    (so that a read inside iteration ``i``'s box along them alone meets no other
    iteration's writes), or None where that cannot be shown."""
    step = _renamed([lo for lo, _ in hull], i, i + 1)
    with analyzer.constraint_scope(i + 1 < extent):
        for k, (nxt, (_, hi)) in enumerate(zip(step, hull)):
            if analyzer.can_prove(nxt > hi):
                return [k]
    varying = [k for k, (lo, hi) in enumerate(hull) if mentions(lo, i) or mentions(hi, i)]
    if not varying or not all(analyzer.can_prove_equal(*hull[k]) for k in varying):
        return None
    points = [hull[k][0] for k in varying]
    mapped = detect_iter_map(points, {i: Range(0, extent)}, check_level="bijective")
    return varying if mapped.indices else None


def _inside(analyzer: Analyzer, box: list, hull: list, dims: list[int]) -> bool:
    return all(
        analyzer.can_prove(box[k][0] >= hull[k][0]) and analyzer.can_prove(box[k][1] <= hull[k][1])
        for k in dims
    )


def owned_shares_problem(loop: S.For) -> str | None:
    """Why the threads of a persistent launch over ``loop`` (unflattened) may read each
    other's writes, or None when each owns what it reads and writes."""
    domain = {loop.loop_var: IntervalSet(loop.min, loop.min + loop.extent - 1)}
    nests: list[_Nest] = []
    try:
        _nests(loop.body, domain, nests)
    except _NotOwned as err:
        return str(err)
    if not nests:
        return "no parallel nest"
    if any(n.opaque for n in nests):
        return "a nest passes a buffer's address to a call"
    extent = nests[0].loop.extent
    analyzer = Analyzer()
    if not all(analyzer.can_prove_equal(n.loop.min, 0) for n in nests):
        return "a nest's parallel loop does not start at 0"
    if not all(analyzer.can_prove_equal(n.loop.extent, extent) for n in nests):
        return "the nests' parallel loops differ in extent: " + ", ".join(
            str(n.loop.extent) for n in nests
        )
    i = tirx.Var("i", nests[0].loop.loop_var.ty)
    analyzer.bind(i, Range(0, extent))
    per_buffer: dict[tirx.Var, list[_Access]] = {}
    for nest in nests:
        for buffer, accesses in nest.accesses.items():
            if any(buffer.same_as(p) for p in nest.private):
                continue
            for a in accesses:
                renamed = _renamed(a.indices, nest.loop.loop_var, i)
                per_buffer.setdefault(buffer, []).append(_Access(a.write, renamed, a.domain))
    for buffer, accesses in per_buffer.items():
        writes = [_box(analyzer, a) for a in accesses if a.write]
        if not writes:
            continue
        hull = [
            (
                analyzer.simplify(functools.reduce(tirx.Min, [w[k][0] for w in writes])),
                analyzer.simplify(functools.reduce(tirx.Max, [w[k][1] for w in writes])),
            )
            for k in range(len(writes[0]))
        ]
        dims = _separating(analyzer, hull, i, extent)
        if dims is None:
            return f"buffer '{buffer.name}': iterations' writes may overlap"
        for a in accesses:
            if not a.write and not _inside(analyzer, _box(analyzer, a), hull, dims):
                return f"buffer '{buffer.name}': an iteration reads outside what it writes"
    return None


def _persistent_loops(stmt: S.Stmt) -> list[S.For]:
    found: list[S.For] = []

    def on_loop(loop: S.For) -> None:
        if PERSISTENT in loop.annotations:
            found.append(loop)

    tvm_ffi.structural_walk(stmt, (S.For, on_loop))
    return found


@tirx.transform.prim_func_pass(opt_level=0, name="scan_tir.MarkOwnedShares")
def MarkOwnedShares(func: tirx.PrimFunc, _mod: tvm.IRModule, _ctx) -> tirx.PrimFunc:  # noqa: N802
    """Annotate each persistent time loop with :data:`OWNED_SHARES` (see the module)."""
    marked = _persistent_loops(func.body)
    if not marked:
        return func
    copy = tvm.transform.Sequential([p() for p in _UNFLATTENED])(tvm.IRModule({"main": func}))
    unflattened = _persistent_loops(copy["main"].body)
    if len(unflattened) != len(marked):
        verdicts = ["the lowered function's time loops could not be matched"] * len(marked)
    else:
        verdicts = [owned_shares_problem(loop) for loop in unflattened]
    verdict_of = dict(zip(marked, verdicts))

    def annotate(loop: S.For) -> S.For:
        if loop not in verdict_of:
            return loop
        why = verdict_of[loop]
        annotations = dict(loop.annotations)
        annotations[OWNED_SHARES] = 1 if why is None else why
        return S.For(
            loop.loop_var,
            loop.min,
            loop.extent,
            loop.kind,
            loop.body,
            loop.thread_binding,
            annotations,
        )

    return func.with_body(tvm_ffi.structural_map(func.body, (S.For, annotate), order="pre"))


def verdicts(func: tirx.PrimFunc) -> list[int | str]:
    """What :func:`MarkOwnedShares` says of each persistent time loop of ``func``, in
    program order: 1, or why its threads do not own their shares."""
    out = MarkOwnedShares(tvm.IRModule({"main": func}))["main"]
    return [
        v if isinstance(v, str) else int(v)
        for v in (loop.annotations[OWNED_SHARES] for loop in _persistent_loops(out.body))
    ]
