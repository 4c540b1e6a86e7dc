"""``InlineVectorIndices``: a vector access's lane offsets kept in the access, where LLVM
sees them.

TVM's ``CommonSubexprElim`` (the last rewrite of its S-TIR pipeline) binds a repeated
expression to a variable, vector index arithmetic included (a tile's lane offsets, such
as ``(ramp(0, 1, 32) // 16) * 128 + ramp(0, 1, 32) % 16``), and places a binding that
two statements share at their common ancestor. Where that ancestor lies outside a
parallel loop or a persistent launch (two branches of a dispatching function, two nests
of one step), the LLVM codegen (src/target/llvm/codegen_cpu.cc, the parallel launch's
closure) hands the bound vector to the launched function in memory: LLVM no longer knows
its lanes, and each load or store through it becomes one scalar access and one
insertelement or extractelement per lane. Nothing is wrong in the results; the step is
many times slower, in one branch of a function and not in the same body built alone.

This pass substitutes every integer vector binding whose value reads no buffer and calls
nothing back into its uses. Such a value is a few vector adds and shifts, which LLVM
folds to constants where the lanes are constant and merges again within each function.
Builds take it through :data:`~scan_tir.transform.pipeline.PIPELINE`, after TVM's
pipeline.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir.expr import Call, TensorLoad
from tvm.tirx import stmt as S


def _index_arithmetic(value: tirx.Expr) -> bool:
    """Whether ``value`` is integer vector arithmetic that reads no buffer and calls
    nothing (so that computing it at each use is free and changes nothing)."""
    if not hasattr(value.ty, "dtype"):  # a handle
        return False
    dtype = tvm.DataType(str(value.ty.dtype))
    if dtype.lanes <= 1 or dtype.type_code not in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT):
        return False
    found: list[object] = []
    tvm_ffi.structural_walk(value, [(TensorLoad, found.append), (Call, found.append)])
    return not found


def _without(stmt: S.Stmt, dropped: set) -> S.Stmt:
    """``stmt`` without the bindings of the variables in ``dropped``."""

    def drop(seq: S.SeqStmt) -> S.Stmt:
        kept = [s for s in seq.seq if not (isinstance(s, S.Bind) and s.var in dropped)]
        if not kept:
            return S.Evaluate(tirx.const(0, "int32"))
        return kept[0] if len(kept) == 1 else S.SeqStmt(kept)

    def lone(bind: S.Bind) -> S.Stmt:  # a binding no statement follows: nothing reads it
        return S.Evaluate(tirx.const(0, "int32")) if bind.var in dropped else bind

    return tvm_ffi.structural_map(stmt, [(S.SeqStmt, drop), (S.Bind, lone)], order="pre")


def inline_vector_indices(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with its vector index bindings substituted into their uses."""
    binds: list[S.Bind] = []
    tvm_ffi.structural_walk(func.body, (S.Bind, binds.append))
    values: dict[tirx.Var, tirx.Expr] = {}

    def resolved(var: tirx.Var) -> tirx.Expr:
        return values.get(var, var)

    for bind in binds:  # in program order: a value reads only the bindings before it
        if _index_arithmetic(bind.value):
            values[bind.var] = tvm_ffi.structural_map(bind.value, (tirx.Var, resolved))
    if not values:
        return func
    body = _without(func.body, set(values))
    return func.with_body(tvm_ffi.structural_map(body, (tirx.Var, resolved)))


@tirx.transform.prim_func_pass(opt_level=0, name="scan_tir.InlineVectorIndices")
def InlineVectorIndices(func: tirx.PrimFunc, _mod: tvm.IRModule, _ctx) -> tirx.PrimFunc:  # noqa: N802
    """Substitute each vector index binding into its uses (see the module)."""
    return inline_vector_indices(func)
