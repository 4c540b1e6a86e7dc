"""Tuning a function of symbolic sizes: tune a fixed-size copy, apply its best schedule.

MetaSchedule measures only static shapes (``ArgInfo.from_prim_func``), and sampled tile
sizes need constant extents, so a function whose length (or batch) is a ``te.var`` is
tuned at representative sizes (:func:`specialize`) and the best trace found is replayed on
the symbolic function (:func:`apply_best`). The time loop of a scan is never tiled, but
loops outside it may be: the input product hoisted over seq x batch is tiled with factors
of the representative length, which a symbolic extent does not have. :func:`replay_sized`
keeps such a tiling's inner factors and lets the outer one cover the rest, with the
product's rows padded to whole tiles (``scan_tir.transform.pad_rows``) so that no tile
carries a predicate, and the trace replays on every size; the replayed function is
checked for the scan invariants before it is returned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir.prim import expr as prim_expr
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.schedule import Instruction, Schedule, Trace
from tvm.sym import Analyzer
from tvm.target import Target

from ..errors import ScanLoweringError
from ..lower.vocabulary import expected_scans, scan_violations
from ..transform.padded_rows import pad_rows
from ..transform.pipeline import PIPELINE

_ARITH = (
    prim_expr.Add,
    prim_expr.Sub,
    prim_expr.Mul,
    prim_expr.FloorDiv,
    prim_expr.FloorMod,
    prim_expr.Min,
    prim_expr.Max,
)


def size_vars(func: tirx.PrimFunc) -> dict[str, tirx.Var]:
    """The symbolic sizes of ``func``'s parameters (in buffer shapes, or scalar parameters,
    as Relax passes a size its kernel cannot read from a shape), by name."""
    found: dict[str, tirx.Var] = {}
    for param in func.params:
        if not isinstance(param.ty, tirx.BufferType):
            if isinstance(param.ty, tvm.ir.PrimType):  # a size passed as a scalar
                found.setdefault(str(param.name), param)
            continue
        for dim in param.shape:
            if isinstance(dim, tirx.Var):
                found.setdefault(str(dim.name), dim)
    return found


def specialize(func: tirx.PrimFunc, sizes: Mapping[str, int]) -> tirx.PrimFunc:
    """``func`` with the named symbolic sizes fixed, e.g. ``{"seq": 80}``."""
    known = size_vars(func)
    for name in sizes:
        if name not in known:
            raise ScanLoweringError(
                f"specialize: the function has no symbolic size '{name}'; it has "
                f"{sorted(known) or 'none'}."
            )
    scalars = {
        p: tirx.IntImm(p.ty.dtype, sizes[str(p.name)])
        for p in func.params
        if not isinstance(p.ty, tirx.BufferType) and str(p.name) in sizes
    }
    if scalars:  # a scalar parameter is bound and dropped (TVM's PrimFunc.specialize)
        func = func.specialize(scalars)
    bound = [
        (known[name], tirx.IntImm(known[name].ty.dtype, v))
        for name, v in sizes.items()
        if not any(p.same_as(known[name]) for p in scalars)
    ]

    def on_var(var: tirx.Var) -> object:
        for old, new in bound:
            if var.same_as(old):
                return new
        return var

    analyzer = Analyzer()

    def fold(expr: tirx.Expr) -> tirx.Expr:
        folded = analyzer.simplify(expr)
        return folded if isinstance(folded, tirx.IntImm) else expr

    # Post-order, so that sizes like ``seq + 1`` (shapes, extents) become constants. Only
    # constant arithmetic is folded: the loops and blocks stay exactly as they are, which a
    # trace recorded on this function needs in order to replay on the symbolic one.
    return tvm_ffi.structural_map(func, [(tvm.ir.expr.Var, on_var), (_ARITH, fold)])


def specialize_body(func: tirx.PrimFunc, sizes: Mapping[str, int]) -> tirx.PrimFunc:
    """``func`` with the named sizes fixed in its body only: its parameters keep their
    symbolic shapes, so that the result is still a schedule of ``func`` (what
    :func:`~scan_tir.tune.dispatch` joins) and is right only where the sizes have those
    values (the branch that calls it tests them).

    A size inside the step (a batch) makes its tiles' bounds and predicates symbolic,
    which costs the step its constant loop bounds and its vector code; the body fixed at
    a listed value runs as fast as the function built at that shape.
    """
    fixed = specialize(func, sizes)  # a scalar size parameter is dropped there, kept here
    by_name = {str(p.name): p for p in func.params}
    own = [(p, by_name[str(p.name)]) for p in fixed.params]

    def on_var(var: tirx.Var) -> tirx.Var:  # a parameter, its shape symbolic again
        for new, old in own:
            if var.same_as(new):
                return old
        return var

    return func.with_body(tvm_ffi.structural_map(fixed.body, [(tvm.ir.expr.Var, on_var)]))


def apply_best(
    database: ms.Database,
    representative: tirx.PrimFunc,
    func: tirx.PrimFunc,
    target: Target,
    candidates: int = 5,
) -> tirx.PrimFunc:
    """Replay the best schedule ``database`` holds for ``representative`` on ``func``.

    The best ``candidates`` records are tried in order, and the first whose replay keeps
    the scan invariants and builds for ``target`` is returned: TVM 0.27's LLVM codegen
    rejects some vectorised schedules at symbolic length that it built at the fixed one
    ("Instruction does not dominate all uses"), so the best record alone is not enough.
    """
    mod = tvm.IRModule({"main": representative})
    if not database.has_workload(mod):
        raise ScanLoweringError(
            "apply_best: the database has no record for the representative function; tune "
            "specialize(func, sizes) first, with the same target."
        )
    records = database.get_top_k(database.commit_workload(mod), candidates)
    if not records:
        raise ScanLoweringError(
            "apply_best: the database has no record for the representative function; tune "
            "specialize(func, sizes) first, with the same target."
        )
    expected = expected_scans(tvm.IRModule({"main": func}))["main"]
    failures = []
    for rank, record in enumerate(records):
        try:
            scheduled = replay_sized(record.trace, func)
        except Exception as err:  # ScheduleError, or TVM's InternalError on a symbolic tile
            failures.append(f"#{rank}: replay: {_last_line(err)}")
            continue
        problems = scan_violations(scheduled, expected)
        if problems:
            failures.append(f"#{rank}: breaks the scan: {problems}")
            continue
        try:
            tvm.compile(
                tvm.IRModule({"main": scheduled.with_attr("global_symbol", "main")}),
                target=target,
                tir_pipeline=PIPELINE,
            )
        except Exception as err:  # TVM's codegen
            failures.append(f"#{rank}: build: {_last_line(err)}")
            continue
        return scheduled
    raise ScanLoweringError(
        "apply_best: none of the best schedules serves the symbolic function ("
        + "; ".join(failures)
        + "). Tune the representative function again with more trials, or build one module "
        "per size (specialize(func, sizes) and its own tuning)."
    )


def _last_line(err: Exception) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[-1][:160] if lines else ''}"


class _SymbolicTile(Exception):
    """Raised from the replay's decision provider at a tile sampled on a symbolic loop."""


def replay_sized(
    trace: Trace, func: tirx.PrimFunc, cap: Mapping[str, int] | None = None
) -> tirx.PrimFunc:
    """``func`` scheduled by ``trace`` (postprocessing included), where ``trace`` was
    recorded on a copy of ``func`` with its symbolic sizes fixed.

    A ``SamplePerfectTile`` on a loop whose extent is symbolic in ``func`` is dropped and
    its splits take its decision's inner factors as constants and ``None`` outermost, so
    the tile shape tuned at the representative size is kept and the outer loop covers any
    extent. Such tiles are found by replaying: the decision provider stops the replay at
    the first one, which is then fixed, until none is left. The blocks those loops drive
    are then padded to a multiple of their tiles (:func:`~scan_tir.transform.pad_rows`,
    where it applies), so that no tile is partial and none carries a predicate, and the
    trace is replayed on the padded function.

    ``cap`` (a size's name -> a value) holds each tile on a loop whose extent depends on
    that size to the rows the loop has at that value, the tile's outer inner factors
    divided first (the innermost, a register block, kept longest): a tile tuned at a long
    length would otherwise pad a short one's rows to its own (a product over 64 steps'
    rows computed for 16 steps, three quarters thrown away).
    """
    tiles: dict[int, tirx.Expr] = {}  # instruction index -> extent of the loop it tiled
    decisions: dict[int, list[int]] = {}  # instruction index -> its factors, as replayed
    while True:
        candidate, origin = _with_fixed_tiles(trace, decisions)
        sch = Schedule(tvm.IRModule({"main": func}))
        symbolic = _replay_until_symbolic_tile(candidate, sch)
        if symbolic is None:
            break
        index, extent = symbolic
        tiles[origin[index]] = extent
        tuned = [int(f) for f in trace.get_decision(trace.insts[origin[index]])]
        decisions[origin[index]] = _capped(tuned, extent, func, cap or {})
    multiples = _tile_multiples(tiles, decisions)
    if not multiples:
        return sch.mod["main"]
    sch = Schedule(tvm.IRModule({"main": pad_rows(func, multiples)}))
    if _replay_until_symbolic_tile(candidate, sch) is not None:
        raise ScanLoweringError(
            "replay_sized: the padded function has a symbolic tile the unpadded one lacks"
        )
    return sch.mod["main"]


def _capped(
    decision: list[int], extent: tirx.Expr, func: tirx.PrimFunc, cap: Mapping[str, int]
) -> list[int]:
    """``decision`` (a tile's factors, outermost first) with its inner factors divided
    until the tile, times the constant splits under ``extent``, covers at most the rows
    ``extent``'s base has at the sizes ``cap`` names; unchanged where ``cap`` names none
    of its sizes or they leave the base symbolic."""
    base, factor = split_base(extent)
    sizes = {n: v for n, v in size_vars(func).items() if n in cap}

    def on_var(var: tirx.Var) -> object:
        for n, v in sizes.items():
            if var.same_as(v):
                return tirx.IntImm(v.ty.dtype, cap[n])
        return var

    at = Analyzer().simplify(tvm_ffi.structural_map(base, [(tvm.ir.expr.Var, on_var)]))
    if not isinstance(at, tirx.IntImm):
        return decision
    factors = list(decision)
    for k in range(1, len(factors)):  # outer inner factors first
        while factor * math.prod(factors[1:]) > int(at) and factors[k] > 1:
            factors[k] //= _least_prime(factors[k])
    return factors


def _least_prime(n: int) -> int:
    return next(p for p in range(2, n + 1) if n % p == 0)


def _tile_multiples(
    tiles: dict[int, tirx.Expr], decisions: dict[int, list[int]]
) -> list[tuple[tirx.Expr, int]]:
    """For each symbolic extent tiled, the least multiple of every tile on it: the inner
    factors of the tile, times the factors of the constant splits that made the tiled loop
    (an extent ``ceildiv(E, c)``, as ``split`` leaves it, is E split by c)."""
    multiples: list[tuple[tirx.Expr, int]] = []
    analyzer = Analyzer()
    for index, extent in tiles.items():
        base, factor = split_base(extent)
        inner = math.prod(decisions[index][1:])
        for k, (known, m) in enumerate(multiples):
            if analyzer.can_prove_equal(known, base):
                multiples[k] = (known, math.lcm(m, factor * inner))
                break
        else:
            multiples.append((base, factor * inner))
    return multiples


def split_base(extent: tirx.Expr) -> tuple[tirx.Expr, int]:
    """``(E, c)`` for an extent ``(E + c - 1) // c`` (nested: c the product), else
    ``(extent, 1)``."""
    factor = 1
    while (
        isinstance(extent, prim_expr.FloorDiv)
        and isinstance(extent.b, tirx.IntImm)
        and isinstance(extent.a, prim_expr.Add)
        and isinstance(extent.a.b, tirx.IntImm)
        and int(extent.a.b) == int(extent.b) - 1
    ):
        factor *= int(extent.b)
        extent = extent.a.a
    return extent, factor


def _replay_until_symbolic_tile(trace: Trace, sch: Schedule) -> tuple[int, tirx.Expr] | None:
    """Apply ``trace`` to ``sch``; stop at its first tile sampled on a loop of symbolic
    extent and return that instruction's index and the loop's extent, or None when the
    whole trace applied."""
    found: list[tuple[int, tirx.Expr]] = []

    def provider(inst: Instruction, inputs: list, _attrs: list, decision: object) -> object:
        loop = sch.get(inputs[0]) if inst.kind.name == "SamplePerfectTile" else None
        if loop is not None and not isinstance(loop.extent, tirx.IntImm):
            index = next(i for i, x in enumerate(trace.insts) if x.same_as(inst))
            found.append((index, loop.extent))
            raise _SymbolicTile
        return decision

    try:
        trace.apply_to_schedule(sch, remove_postproc=False, decision_provider=provider)
    except Exception:  # _SymbolicTile, through TVM's FFI; anything else is re-raised
        if not found:
            raise
        return found[0]
    return None


def _with_fixed_tiles(trace: Trace, fixed: dict[int, list[int]]) -> tuple[Trace, list[int]]:
    """``trace`` without the tile samplings at ``fixed`` (instruction index -> the factors
    to use), their outputs replaced by constants as :func:`replay_sized` says; and, for
    each kept instruction, its index in ``trace``."""
    insts: list[Instruction] = []
    origin: list[int] = []
    decisions: dict[Instruction, object] = {}
    constants: dict[tirx.Var, tirx.IntImm | None] = {}
    for index, inst in enumerate(trace.insts):
        decision = trace.get_decision(inst)
        if index in fixed:
            for k, (rv, factor) in enumerate(zip(inst.outputs, fixed[index], strict=True)):
                constants[rv] = None if k == 0 else tirx.IntImm("int32", int(factor))
            continue
        if any(isinstance(x, tirx.Var) and x in constants for x in inst.inputs):
            inputs = [
                constants[x] if isinstance(x, tirx.Var) and x in constants else x
                for x in inst.inputs
            ]
            inst = Instruction(inst.kind, inputs, inst.attrs, inst.outputs)
        if decision is not None:
            decisions[inst] = decision
        insts.append(inst)
        origin.append(index)
    return Trace(insts, decisions), origin
