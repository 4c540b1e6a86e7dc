"""``PersistentLaunch``: a scan's whole time loop in one thread-pool launch, one barrier per
parallel nest of its step.

Built the usual way, every parallel loop of a step forks and joins TVM's thread pool, one
to three times per step. A time loop marked :data:`~scan_tir.lower.vocabulary.PERSISTENT`
(``postprocs.RewritePersistentStep`` marks it, once every nest of the step is a parallel
loop) is instead run by every thread of one launch: each thread walks all the steps, takes
its static share of each parallel nest (the same share at every step, so its slice of the
recurrent weights stays in its own cache), and waits at a barrier after each nest. This
is the CPU form of persistent RNNs (Baidu's persistent RNN, cuDNN's persistent
algorithms) and of DeepCPU's cache-aware partitioning.

The mechanism is the LLVM CPU codegen's own (src/target/llvm/codegen_cpu.cc):
``pragma_parallel_launch_point`` opens the launch, a parallel loop inside it is split
statically over the launch's tasks, and ``pragma_parallel_barrier_when_finish`` calls
``TVMBackendParallelBarrier`` after its loop. Two things the pragmas alone get wrong, and
this pass therefore does itself, after the S-TIR pipeline has placed every allocation:

- a buffer the step allocates outside its parallel loops would be allocated by every
  thread, each seeing its own copy: it is hoisted above the launch (its contents never
  outlive a step, so one copy for the whole loop is what the step meant);
- work outside a parallel loop would run on every thread at once: it is refused, naming
  the loop (``RewritePersistentStep`` never leaves any).

So what reaches the codegen is legal by construction, and the barriers separate every
nest's writes from the next nest's reads, including the last nest of step t from the
first of step t+1. Builds take this pass through the TIR pipeline
:data:`~scan_tir.transform.pipeline.PIPELINE`, after TVM's S-TIR pipeline. A loop
``MarkOwnedShares`` proved channel-parallel (every iteration of the nests' common parallel
loop reads only what that iteration writes: a diagonal recurrence, such as a selective
scan) gets no launch point and no barriers: the nests' parallel loops become one loop of
shares around the time loop, so each share runs its channels through the whole sequence,
its slice of the state staying in its core's L1 from step to step, and the threads never
meet until the end. A marked loop built with TVM's default pipeline runs as an ordinary
loop, one launch per parallel nest, with the same result.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.sym import Analyzer
from tvm.tirx import stmt as S

from ..errors import ScanLoweringError
from ..lower.vocabulary import PERSISTENT, is_parallel_loop
from .owned_shares import OWNED_SHARES

LAUNCH = "pragma_parallel_launch_point"
BARRIER = "pragma_parallel_barrier_when_finish"


def _seq(stmts: list[S.Stmt]) -> S.Stmt:
    return stmts[0] if len(stmts) == 1 else S.SeqStmt(stmts)


def _rebuilt_for(loop: S.For, body: S.Stmt, annotations: dict | None = None) -> S.For:
    return S.For(
        loop.loop_var,
        loop.min,
        loop.extent,
        loop.kind,
        body,
        loop.thread_binding,
        loop.annotations if annotations is None else annotations,
    )


def _has_parallel(stmt: S.Stmt) -> bool:
    loops: list[S.For] = []
    tvm_ffi.structural_walk(stmt, (S.For, loops.append))
    return any(is_parallel_loop(loop) for loop in loops)


class _Launch:
    """The rewrite of one marked time loop."""

    def __init__(self, loop: S.For) -> None:
        self.loop = loop
        self.hoisted: list[S.Stmt] = []
        self.owned = bool(loop.annotations.get(OWNED_SHARES, 0) == 1)
        self.inner_vars: list[tirx.Var] = [loop.loop_var]
        self.shares: list[S.For] = []
        self.share = tirx.Var("share", loop.loop_var.ty.dtype)

    def refuse(self, why: str) -> None:
        raise ScanLoweringError(
            f"persistent time loop '{self.loop.loop_var.name}': {why}. Every thread of the "
            "launch runs what is outside a parallel loop, so each nest of the step must be "
            "a parallel loop (postprocs.RewritePersistentStep makes them so), or build "
            "without the scan_tir.persistent annotation."
        )

    def region(self, stmt: S.Stmt, top: bool) -> S.Stmt | None:
        """``stmt`` of the launch body with a barrier after each parallel loop; None for
        an allocation hoisted out of it."""
        if is_parallel_loop(stmt):
            if not self.owned:
                return S.AttrStmt(stmt.loop_var, BARRIER, 1, stmt)
            self.shares.append(stmt)
            var = stmt.loop_var
            share = (
                self.share
                if var.ty.dtype == self.share.ty.dtype
                else tirx.Cast(var.ty.dtype, self.share)
            )
            return tvm_ffi.structural_map(
                stmt.body, (tirx.Var, lambda v: share if v.same_as(var) else v)
            )
        if isinstance(stmt, (S.AllocBuffer, S.DeclBuffer)):
            if not top:
                self.refuse(f"buffer '{stmt.buffer.name}' is allocated inside a serial loop")
            shape_vars = [
                v for dim in stmt.buffer.shape for v in tirx.analysis.undefined_vars(dim, [])
            ]
            if any(v.same_as(inner) for v in shape_vars for inner in self.inner_vars):
                self.refuse(f"buffer '{stmt.buffer.name}' has a size that changes per step")
            self.hoisted.append(stmt)
            return None
        if isinstance(stmt, S.Bind):
            self.inner_vars.append(stmt.var)
            return stmt
        if isinstance(stmt, S.SeqStmt):
            kept = [r for r in (self.region(s, top) for s in stmt.seq) if r is not None]
            return _seq(kept) if kept else None
        if isinstance(stmt, S.AttrStmt):
            body = self.region(stmt.body, top)
            return S.AttrStmt(stmt.node, stmt.attr_key, stmt.value, body)
        if isinstance(stmt, S.For) and _has_parallel(stmt.body):
            self.inner_vars.append(stmt.loop_var)
            return _rebuilt_for(stmt, self.region(stmt.body, False))
        self.refuse(f"a {type(stmt).__name__} runs outside any parallel loop:\n{stmt}"[:600])
        return None

    def rewrite(self) -> list[S.Stmt]:
        body = self.region(self.loop.body, True)
        rest = {
            k: v for k, v in self.loop.annotations.items() if k not in (PERSISTENT, OWNED_SHARES)
        }
        time = _rebuilt_for(self.loop, body, rest)
        if self.owned:
            return [*self.hoisted, self._share_loop(time)]
        return [*self.hoisted, S.AttrStmt(self.loop.loop_var, LAUNCH, 1, time)]

    def _share_loop(self, time: S.For) -> S.For:
        """The shares' loop, parallel, around the time loop: ``MarkOwnedShares`` proved that
        iteration ``i`` of every nest reads only what iteration ``i`` writes, over the whole
        sequence, so the iterations are independent and each runs all its steps in turn."""
        extent = self.shares[0].extent
        analyzer = Analyzer()
        if not all(analyzer.can_prove_equal(s.extent, extent) for s in self.shares):
            raise ScanLoweringError(
                f"time loop '{self.loop.loop_var.name}' was proved channel-parallel, but its "
                "nests' parallel loops differ in extent once lowered: "
                + ", ".join(str(s.extent) for s in self.shares)
            )
        dtype = self.share.ty.dtype
        if extent.ty.dtype != dtype:
            extent = tirx.Cast(dtype, extent)
        return S.For(self.share, tirx.IntImm(dtype, 0), extent, tirx.ForKind.PARALLEL, time)


def _visit(stmt: S.Stmt) -> list[S.Stmt]:
    """``stmt`` with each marked loop rewritten (a list: hoisted allocations come first)."""
    if isinstance(stmt, S.For):
        if PERSISTENT in stmt.annotations and int(stmt.annotations[PERSISTENT]):
            if stmt.kind != tirx.ForKind.SERIAL:
                name = stmt.loop_var.name
                raise ScanLoweringError(f"persistent time loop '{name}' is not serial")
            return _Launch(stmt).rewrite()
        return [_rebuilt_for(stmt, _seq(_visit(stmt.body)))]
    if isinstance(stmt, S.SeqStmt):
        return [_seq([x for s in stmt.seq for x in _visit(s)])]
    if isinstance(stmt, S.AttrStmt):
        return [S.AttrStmt(stmt.node, stmt.attr_key, stmt.value, _seq(_visit(stmt.body)))]
    if isinstance(stmt, S.IfThenElse):
        other = stmt.else_case
        return [
            S.IfThenElse(
                stmt.condition,
                _seq(_visit(stmt.then_case)),
                _seq(_visit(other)) if other is not None else None,
            )
        ]
    if isinstance(stmt, S.While):
        return [S.While(stmt.condition, _seq(_visit(stmt.body)))]
    return [stmt]


def _marked(func: tirx.PrimFunc) -> bool:
    found = []

    def on_loop(loop: S.For) -> None:
        if PERSISTENT in loop.annotations:
            found.append(loop)

    tvm_ffi.structural_walk(func.body, (S.For, on_loop))
    return bool(found)


@tirx.transform.prim_func_pass(opt_level=0, name="scan_tir.PersistentLaunch")
def PersistentLaunch(func: tirx.PrimFunc, _mod: tvm.IRModule, _ctx) -> tirx.PrimFunc:  # noqa: N802
    """Rewrite each time loop marked persistent into one launch (see the module)."""
    if not _marked(func):
        return func
    return func.with_body(_seq(_visit(func.body)))

