"""Which loops above a block may be parallelised, vectorised or fused at.

Shared by the step rules and postprocs: a loop qualifies when it is serial, unannotated,
of constant extent, and bound only to data-parallel iterators of the block.
"""

from __future__ import annotations

import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir import Schedule
from tvm.s_tir.schedule import LoopRV, SBlockRV

from .structure import DATA_PAR


def block_realize(sch: Schedule, block: SBlockRV, innermost: LoopRV) -> s_tir.SBlockRealize:
    """The realize of ``block`` under ``innermost`` (a schedule exposes blocks, not their
    bindings, which say which loop drives which iterator)."""
    target = sch.get(block)
    found: list[s_tir.SBlockRealize] = []

    def visit(realize: s_tir.SBlockRealize) -> None:
        if realize.block.same_as(target):
            found.append(realize)

    tvm_ffi.structural_walk(sch.get(innermost), (s_tir.SBlockRealize, visit))
    return found[0]


def _mentions(expr: tirx.Expr, var: tirx.Var) -> bool:
    return any(v.same_as(var) for v in tirx.analysis.undefined_vars(expr, []))


def free_loops(sch: Schedule, block: SBlockRV, loops: list[LoopRV]) -> list[bool]:
    """For each of ``loops`` (above ``block``, outermost first): does it qualify?"""
    if not loops:
        return []
    realize = block_realize(sch, block, loops[-1])
    reduce_values = [
        value
        for iv, value in zip(realize.block.iter_vars, realize.iter_values)
        if iv.iter_type != DATA_PAR
    ]
    flags = []
    for loop in loops:
        node = sch.get(loop)
        flags.append(
            node.kind == tirx.ForKind.SERIAL
            and not node.annotations
            and isinstance(node.extent, tirx.IntImm)
            and not any(_mentions(v, node.loop_var) for v in reduce_values)
        )
    return flags


def nested_prefix(sch: Schedule, loops: list[LoopRV], flags: list[bool]) -> list[LoopRV]:
    """The longest prefix of qualifying loops, each directly the body of the one before
    (so that they can be fused)."""
    prefix: list[LoopRV] = []
    for loop, ok in zip(loops, flags):
        if not ok:
            break
        if prefix and not sch.get(prefix[-1]).body.same_as(sch.get(loop)):
            break
        prefix.append(loop)
    return prefix
