"""``prepacked``: a tuned function as it runs on prepacked weights.

MetaSchedule's RewriteLayout leaves the repacking of each layout-free weight in the tuned
function, in blocks marked ``meta_schedule.layout_rewrite_preproc``; its builder, and a
deployment, drop them and pass the weights packed (``RemoveWeightLayoutRewriteBlock``;
Relax runs the split-off blocks once, ``SplitLayoutRewritePreproc``). :func:`prepacked`
does that and then :func:`elide_param_copies`, below.

Why the copies: ``meta_rules.CacheStepWeights`` gives each recurrent weight a root-level
copy, so that RewriteLayout repacks it before the scan instead of at every step. With the
repacking dropped, the copy is left: the packed parameter copied, element for element,
into a buffer of the same shape, at every call. At config A that is 1 MiB per call, and
the best schedule of A-FAST ran 0.66 / 0.53 ms without it, 0.85 / 0.68 ms with it, in two
runs (experiments/ablation.py; notes.md, section 3).

The copy cannot be removed by a schedule primitive: ``compute_inline`` into a scan step
leaves the step's regions ill-formed in TVM 0.27 (meta_rules/step_inputs.py), and
``reverse_compute_inline`` wants the copy's indices to be its block variables, which
RewriteLayout's packed indices are not. So this is a pass over the function, run where the
weights are known to be prepacked (:func:`prepacked`): in
:func:`scan_tir.tune.build_candidate`, so that the runner times what a deployment runs,
and before building a prepacked function.

What counts as such a copy: a root-level loop nest holding one block whose body is
``B[idx] = P[idx]``, with the same index expressions on both sides, where ``P`` is a
parameter no block writes and ``B`` a root buffer of ``P``'s shape and dtype that no
other block writes. Every read of ``B`` then reads the value ``P`` holds at the same
place, so ``B`` is replaced by ``P`` and the nest is dropped.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir.expr import TensorLoad, Var
from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

from ..lower.scan_lowering import substitute_buffers
from ..lower.vocabulary import rebuilt


def _only_block(stmt: tirx.Stmt) -> s_tir.SBlock | None:
    while isinstance(stmt, tirx.For):
        stmt = stmt.body
    return stmt.block if isinstance(stmt, s_tir.SBlockRealize) else None


def _writers(stmt: tirx.Stmt) -> dict[Var, int]:
    """How many blocks write each buffer."""
    counts: dict[Var, int] = {}

    def on_block(block: s_tir.SBlock) -> None:
        for region in block.writes:
            counts[region.source] = counts.get(region.source, 0) + 1

    tvm_ffi.structural_walk(stmt, (s_tir.SBlock, on_block))
    return counts


def _copied_param(block: s_tir.SBlock, params: list[Var], allocs: list[Var]) -> Var | None:
    """The parameter ``block`` copies into a root buffer of its own layout, else None."""
    store = block.body
    if block.init is not None or block.alloc_buffers or block.match_buffers:
        return None
    if not isinstance(store, tirx.BufferStore) or not isinstance(store.value, TensorLoad):
        return None
    load = store.value
    param = next((p for p in params if p.same_as(load.source)), None)
    if param is None or not any(a.same_as(store.buffer) for a in allocs):
        return None
    same_layout = (
        str(param.dtype) == str(store.buffer.dtype)
        and len(param.shape) == len(store.buffer.shape)
        and all(int(a) == int(b) for a, b in zip(param.shape, store.buffer.shape))
        and len(load.indices) == len(store.indices)
        and all(tvm_ffi.structural_equal(a, b) for a, b in zip(load.indices, store.indices))
    )
    return param if same_layout else None


def elide_param_copies(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` without its same-layout copies of parameters (see the module docstring)."""
    if not isinstance(func.body, s_tir.SBlockRealize):
        return func
    root = func.body.block
    writers = _writers(root)
    params = [p for p in func.params if writers.get(p, 0) == 0]
    new_root = elide_copies_in(root, params)
    if new_root.same_as(root):
        return func
    realize = s_tir.SBlockRealize(func.body.iter_values, func.body.predicate, new_root)
    return func.with_body(realize)


def elide_copies_in(block: s_tir.SBlock, params: list[Var]) -> s_tir.SBlock:
    """``block`` without the loop nests of its body that copy one of ``params`` (buffers
    nothing writes) into a buffer ``block`` allocates, in the same layout: the copy's
    readers read the parameter."""
    nests = list(block.body.seq) if isinstance(block.body, tirx.SeqStmt) else [block.body]
    writers = _writers(block)
    kept, mapping = [], []
    for nest in nests:
        inner = _only_block(nest)
        param = None
        if inner is not None and len(inner.writes) == 1 and writers[inner.writes[0].source] == 1:
            param = _copied_param(inner, params, list(block.alloc_buffers))
        if param is None:
            kept.append(nest)
        else:
            mapping.append((inner.writes[0].source, param))
    if not mapping:
        return block
    copies = [copy for copy, _ in mapping]
    body = substitute_buffers(tirx.SeqStmt(kept) if len(kept) > 1 else kept[0], mapping)
    allocs = [a for a in block.alloc_buffers if not any(a.same_as(c) for c in copies)]
    return rebuilt(block, body=body, alloc_buffers=allocs)


def prepacked(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with its weight-repacking blocks dropped (each such parameter now takes the
    packed weight) and its same-layout copies of parameters elided."""
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    funcs = {
        gv: elide_param_copies(f) if isinstance(f, tirx.PrimFunc) else f
        for gv, f in mod.functions.items()
    }
    return tvm.IRModule(funcs, attrs=mod.attrs)
