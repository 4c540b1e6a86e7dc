"""Tuning a scan of symbolic length: tune a fixed-length copy, apply its best schedule.

MetaSchedule measures only static shapes (``ArgInfo.from_prim_func``), and sampled tile
sizes need constant extents, so a module whose length is a ``te.var`` is tuned at a
representative length (:func:`specialize`) and the best trace found is replayed on the
symbolic module (:func:`apply_best`). The time loop is never tiled, so the trace fits
every length; the replayed function is checked for the scan invariants before it is
returned.
"""

from __future__ import annotations

from collections.abc import Mapping

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir.prim import expr as prim_expr
from tvm.s_tir import meta_schedule as ms
from tvm.sym import Analyzer
from tvm.target import Target

from ..db.replay import replay
from ..errors import ScanLoweringError
from ..lower.vocabulary import expected_scans, scan_violations

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
    """The symbolic sizes of ``func``'s parameters, by name."""
    found: dict[str, tirx.Var] = {}
    for param in func.params:
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
    bound = [(known[name], tirx.IntImm(known[name].ty.dtype, v)) for name, v in sizes.items()]

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
            scheduled = replay(record, func)
        except Exception as err:  # ScheduleError, or TVM's InternalError on a symbolic tile
            failures.append(f"#{rank}: replay: {_last_line(err)}")
            continue
        problems = scan_violations(scheduled, expected)
        if problems:
            failures.append(f"#{rank}: breaks the scan: {problems}")
            continue
        try:
            tvm.compile(tvm.IRModule({"main": scheduled}), target=target)
        except Exception as err:  # TVM's codegen
            failures.append(f"#{rank}: build: {_last_line(err)}")
            continue
        return scheduled
    raise ScanLoweringError(
        "apply_best: none of the best schedules serves the symbolic function ("
        + "; ".join(failures)
        + "). Loops of symbolic extent outside the scan (an input product hoisted over the "
        "sequence) were tiled at the representative length and cannot be tiled again; and "
        "TVM cannot prove region cover for ops after the scan at symbolic length. Pass the "
        "input already projected and return the scan's state, or build one module per length."
    )


def _last_line(err: Exception) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[-1][:160] if lines else ''}"
