"""``create_prim_func``: ``te.create_prim_func`` that also lowers ``te.scan``.

The outer graph is rewritten so that each scan becomes a ``te.extern`` holding its S-TIR
nest (scan_lowering.py) and every op downstream reads the extern's outputs; TVM's own
``te.create_prim_func`` (src/te/operation/create_primfunc.cc) then lowers the result, so
ops outside scans come out exactly as TVM makes them. Finally the extern wrappers are
dissolved, leaving each scan's loop nest directly under the root block, and block names
are made unique (separate scans may repeat op names, e.g. two layers from one builder).
"""

from __future__ import annotations

from collections.abc import Sequence

import tvm_ffi
from tvm import s_tir, te, tirx

from .errors import ScanLoweringError
from .graph import Graph, analyse
from .scan_lowering import SCAN_WRAPPER, lower_scan
from .te_rewrite import compute_op, load, map_attr_tensors, map_body, tensor_key


def create_prim_func(
    ops: Sequence[te.Tensor | tirx.Var], index_dtype_override: str | None = None
) -> tirx.PrimFunc:
    """Lower a TE graph that may contain ``te.scan`` to an S-TIR PrimFunc.

    A drop-in for ``te.create_prim_func``: same arguments, and for a graph without scans
    the very same result. Each scan becomes a serial loop, starting at 0, over its steps;
    under it one block per step with an ordered (``T.axis.scan``) iterator, annotated with
    :data:`scan_tir.structure.SCAN_STEP`, holding the step's ordinary spatial and reduce
    blocks. Raises :class:`scan_tir.ScanLoweringError` for graphs it cannot lower.
    """
    ops = list(ops) if isinstance(ops, (list, tuple, tvm_ffi.Array)) else [ops]
    for i, x in enumerate(ops):
        if not isinstance(x, (te.Tensor, tirx.Var)):
            raise ScanLoweringError(
                f"create_prim_func: argument {i} is a {type(x).__name__}; pass the TE tensors "
                "(inputs and outputs) and, optionally, tirx.Var size parameters."
            )
    tensors = [x for x in ops if isinstance(x, te.Tensor)]
    graph = analyse(tensors)
    if not graph.has_scan:
        return te.create_prim_func(ops, index_dtype_override)
    mapping = _rewrite(graph)
    new_ops = [mapping.get(tensor_key(x), x) if isinstance(x, te.Tensor) else x for x in ops]
    func = te.create_prim_func(new_ops, index_dtype_override)
    return _unique_block_names(_dissolve_wrappers(func))


def _rewrite(graph: Graph) -> dict[tuple, te.Tensor]:
    """Map every tensor of the outer graph to its counterpart in the scan-free graph."""
    mapping: dict[tuple, te.Tensor] = {}

    def outer(tensor: te.Tensor) -> te.Tensor:
        return mapping.get(tensor_key(tensor), tensor)

    for op in graph.order:
        if isinstance(op, te.ScanOp):
            outputs = lower_scan(graph.scans[op], outer)
            for i, out in enumerate(outputs):
                mapping[tensor_key(op.output(i))] = out
            continue
        if not any(tensor_key(t) in mapping for t in op.input_tensors):
            continue
        if isinstance(op, te.ComputeOp):
            body = map_body(op, lambda t, idx: load(outer(t), idx))
            new_op = compute_op(op, op.axis, body, map_attr_tensors(op.attrs, outer))
        else:  # te.ExternOp: only its inputs change, its body speaks of placeholders
            new_op = te._ffi_api.ExternOp(
                op.name,
                op.tag,
                op.attrs,
                [outer(t) for t in op.inputs],
                list(op.input_placeholders),
                list(op.output_placeholders),
                op.body,
            )
        for i in range(op.num_outputs):
            mapping[tensor_key(op.output(i))] = new_op.output(i)
    return mapping


def _dissolve_wrappers(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Replace each scan's te.extern block by the nest it holds."""
    root = func.body.block
    if SCAN_WRAPPER in root.annotations:  # the scan was the only op: its block is the root
        root = s_tir.SBlock([], [], [], "root", root.body, alloc_buffers=list(root.alloc_buffers))
    stmts = list(root.body) if isinstance(root.body, tirx.SeqStmt) else [root.body]
    flat: list[tirx.Stmt] = []
    allocs = list(root.alloc_buffers)
    for stmt in stmts:
        if isinstance(stmt, s_tir.SBlockRealize) and SCAN_WRAPPER in stmt.block.annotations:
            allocs.extend(stmt.block.alloc_buffers)
            inner = stmt.block.body
            flat.extend(inner if isinstance(inner, tirx.SeqStmt) else [inner])
        else:
            flat.append(stmt)
    body = flat[0] if len(flat) == 1 else tirx.SeqStmt(flat)
    new_root = s_tir.SBlock(
        [], [], [], root.name_hint, body, alloc_buffers=allocs, annotations=root.annotations
    )
    return func.with_body(s_tir.SBlockRealize([], True, new_root))


def _unique_block_names(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Rename repeated block names ``name_1``, ``name_2``... in program order."""
    taken: set[str] = set()
    counts: dict[str, int] = {}

    def first_seen(block: s_tir.SBlock) -> None:
        taken.add(block.name_hint)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, first_seen))
    seen: set[str] = set()

    def rename(block: s_tir.SBlock) -> s_tir.SBlock:
        name = block.name_hint
        if name not in seen:
            seen.add(name)
            return block
        while True:
            counts[name] = counts.get(name, 0) + 1
            fresh = f"{name}_{counts[name]}"
            if fresh not in taken:
                break
        taken.add(fresh)
        seen.add(fresh)
        return s_tir.SBlock(
            block.iter_vars,
            block.reads,
            block.writes,
            fresh,
            block.body,
            block.init,
            block.alloc_buffers,
            block.match_buffers,
            block.annotations,
        )

    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlock, rename), order="pre"))
