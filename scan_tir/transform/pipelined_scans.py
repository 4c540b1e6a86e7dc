"""``PipelinedScans``: a scan marked :data:`~scan_tir.lower.vocabulary.PIPELINE` run as a
wavefront with the scan that feeds it, each on its own core, one chunk behind.

The plan (which statements are the projection between the scans, how many chunks, and
whether the wavefront computes the same thing) is ``scan_tir.lower.vocabulary.
pipelining``'s, asked again on the function being built: a build never runs a pipeline
the check has not passed, and a marked pair the check refuses here (a record replayed at
a length its tiles do not divide) runs in program order, with a warning naming the scan
and the reason. It rewrites S-TIR, after ``ConcurrentLanes`` and before TVM's S-TIR
pipeline, into::

    <statements between the scans that do not depend on the first, moved before it>
    for chunk in range(C + 1):
        for lane in T.parallel(2):
            if lane == 0:
                if chunk < C:
                    <first scan: initial copies if chunk == 0; steps chunk*K + s, s < K>
            elif 1 <= chunk:
                <each projection nest, its outermost loop over piece chunk - 1>
                <second scan, the same for chunk - 1>

Inside a lane every loop runs serially (as in ``ConcurrentLanes``: the lane is the
thread). The chunk loop costs one fork/join of TVM's pool per chunk.
"""

from __future__ import annotations

import logging

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.tirx import stmt as S

from ..lower.vocabulary import (
    PIPELINE,
    Pipeline,
    pipelines,
    rebuilt,
    root_statements,
    time_loop,
    with_root_statements,
)
from .concurrent_lanes import serial

_LOG = logging.getLogger(__name__)


def _substituted(stmt: S.Stmt, var: tirx.Var, value: tirx.Expr) -> S.Stmt:
    return tvm_ffi.structural_map(stmt, (tirx.Var, lambda v: value if v.same_as(var) else v))


def _seq(stmts: list[S.Stmt]) -> S.Stmt:
    return stmts[0] if len(stmts) == 1 else S.SeqStmt(stmts)


def _loop_piece(loop: S.For, start: tirx.Expr, extent: int, name: str) -> S.For:
    """``loop`` over ``[start, start + extent)`` only (a loop from 0 over ``extent``)."""
    var = tirx.Var(name, loop.loop_var.ty.dtype)
    body = _substituted(loop.body, loop.loop_var, start + var)
    zero = tirx.IntImm(loop.loop_var.ty.dtype, 0)
    return S.For(var, zero, tirx.IntImm(loop.loop_var.ty.dtype, extent), loop.kind, body,
                 None, loop.annotations)


def _scan_piece(stmt: S.For, chunk: tirx.Expr, steps: int) -> S.Stmt:
    """The scan statement ``stmt`` doing only chunk ``chunk``'s steps (and its initial
    copies at chunk 0)."""
    before, loop, _ = time_loop(stmt)
    piece = _loop_piece(loop, chunk * steps, steps, f"{loop.loop_var.name}_in_chunk")
    body = [S.IfThenElse(chunk == 0, _seq(before), None), piece] if before else [piece]
    realize = stmt.body
    block = rebuilt(realize.block, body=_seq(body))
    inner = s_tir.SBlockRealize(realize.iter_values, realize.predicate, block)
    annotations = {k: v for k, v in stmt.annotations.items() if k != PIPELINE}
    return S.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, inner, None, annotations)


def _wavefront(stmts: list[S.Stmt], plan: Pipeline) -> S.Stmt:
    first = stmts[plan.first]
    dtype = time_loop(first)[1].loop_var.ty.dtype
    chunk = tirx.Var("chunk", dtype)
    lane = tirx.Var("lane", dtype)
    behind = chunk - 1
    feeds = []
    for i in plan.feeds:
        nest = stmts[i]
        size = int(nest.extent) // plan.chunks
        feeds.append(_loop_piece(nest, behind * size, size, f"{nest.loop_var.name}_in_chunk"))
    second = _scan_piece(stmts[plan.second], behind, plan.steps)
    ahead = S.IfThenElse(chunk < plan.chunks, serial(_scan_piece(first, chunk, plan.steps)), None)
    following = S.IfThenElse(chunk >= 1, serial(_seq([*feeds, second])), None)
    lanes = S.For(lane, tirx.IntImm(dtype, 0), tirx.IntImm(dtype, 2), tirx.ForKind.PARALLEL,
                  S.IfThenElse(lane == 0, ahead, following))
    return S.For(chunk, tirx.IntImm(dtype, 0), tirx.IntImm(dtype, plan.chunks + 1),
                 tirx.ForKind.SERIAL, lanes)


@tirx.transform.prim_func_pass(opt_level=0, name="scan_tir.PipelinedScans")
def PipelinedScans(func: tirx.PrimFunc, _mod: tvm.IRModule, _ctx) -> tirx.PrimFunc:  # noqa: N802
    """Rewrite each pipelined pair of scans (see the module)."""
    plans, unmet = pipelines(func)
    for why in unmet:
        _LOG.warning("a scan marked %s runs in program order: %s", PIPELINE, why)
    if not plans:
        return func
    stmts = root_statements(func)
    out: list[S.Stmt] = []
    i = 0
    for plan in plans:
        out += stmts[i:plan.first]
        out += [stmts[j] for j in plan.moved]
        out.append(_wavefront(stmts, plan))
        i = plan.second + 1
    out += stmts[i:]
    return with_root_statements(func, out)
