"""``ConcurrentLanes``: each group of scans marked to run concurrently as one parallel
loop, a lane per scan.

``postprocs.RewriteConcurrentScans`` marks the unit loop around each scan of a group with
its lane (:data:`~scan_tir.lower.vocabulary.LANE`); this pass, the first of the TIR
pipeline :data:`~scan_tir.transform.persistent_launch.PIPELINE`, moves the root
statements between the group's scans before the first of them and replaces the scans by

    for lane in T.parallel(n):
        if lane == 0: <scan 0>
        elif lane == 1: <scan 1> ...

Inside a lane every loop runs serially and a persistent time loop is an ordinary one:
the lane is the thread, and TVM's CPU codegen has no nested parallelism. It runs on
S-TIR, before lowering places allocations, so a buffer only one scan uses is allocated
inside its lane (each thread its own), and StorageRewrite, which plans each parallel
loop's body as a scope of its own, never gives two lanes the same memory. It checks the
marks itself (``lane_groups``: no scan of a group depends on another or on what is moved
before them) and refuses marks that fail, naming the scans.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.tirx import stmt as S

from ..errors import ScanLoweringError
from ..lower.vocabulary import (
    LANE,
    PERSISTENT,
    lane_groups,
    root_statements,
    with_root_statements,
)


def serial(stmt: S.Stmt) -> S.Stmt:
    """``stmt`` with every loop serial and without the scan-tir loop marks."""

    def post(node: S.For) -> S.For:
        kept = {k: v for k, v in node.annotations.items() if k not in (LANE, PERSISTENT)}
        kind = tirx.ForKind.SERIAL if node.kind == tirx.ForKind.PARALLEL else node.kind
        return S.For(node.loop_var, node.min, node.extent, kind, node.body,
                     node.thread_binding, kept)

    return tvm_ffi.structural_map(stmt, (S.For, post))


def _lanes(scans: list[S.For]) -> S.For:
    dtype = scans[0].loop_var.ty.dtype
    lane = tirx.Var("lane", dtype)
    body = serial(scans[-1])
    for k in reversed(range(len(scans) - 1)):
        body = S.IfThenElse(lane == tirx.IntImm(dtype, k), serial(scans[k]), body)
    return S.For(lane, tirx.IntImm(dtype, 0), tirx.IntImm(dtype, len(scans)),
                 tirx.ForKind.PARALLEL, body)


@tirx.transform.prim_func_pass(opt_level=0, name="scan_tir.ConcurrentLanes")
def ConcurrentLanes(func: tirx.PrimFunc, _mod: tvm.IRModule, _ctx) -> tirx.PrimFunc:  # noqa: N802
    """Rewrite each group of lanes (see the module)."""
    groups, problems = lane_groups(func)
    if problems:
        raise ScanLoweringError(
            f"scans marked {LANE} cannot run concurrently: {'; '.join(problems)}. Build the "
            "function without the marks (postprocs.RewriteConcurrentScans sets them only on "
            "independent scans)."
        )
    if not groups:
        return func
    stmts = root_statements(func)
    out: list[S.Stmt] = []
    i = 0
    for group in groups:
        out += stmts[i:group[0]]
        out += [stmts[j] for j in range(group[0] + 1, group[-1]) if j not in group]
        out.append(_lanes([stmts[j] for j in group]))
        i = group[-1] + 1
    out += stmts[i:]
    return with_root_statements(func, out)
