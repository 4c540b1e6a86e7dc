"""``create_prim_func``: ``te.create_prim_func`` that also lowers ``te.scan``.

The outer graph is rewritten so that each scan becomes a ``te.extern`` holding its S-TIR
nest (scan_lowering.py) and every op downstream reads the extern's outputs; TVM's own
``te.create_prim_func`` (src/te/operation/create_primfunc.cc) then lowers the result, so
ops outside scans come out exactly as TVM makes them. Finally each scan's block gets its
access regions, and block and buffer names are made unique (separate scans may repeat op
names, e.g. two layers from one builder; blocks a schedule creates are named after their
block or buffer, and are looked up by name when a schedule is replayed on a function with
several scans, ``scan_tir.tune.per_scan``).
"""

from __future__ import annotations

from collections.abc import Sequence

import tvm_ffi
from tvm import s_tir, te, tirx
from tvm.ir import Range
from tvm.s_tir.analysis import get_sblock_read_write_region
from tvm.sym import Analyzer

from ..errors import ScanLoweringError
from .chunked_scans import CHUNK_ATTR, chunk_marked
from .fast_math import fast_math
from .graph import Graph, analyse
from .options import LoweringOptions
from .scan_lowering import lower_scan, substitute_buffers
from .step_copies import StepCopy, find_step_copies, private_states
from .te_rewrite import load, tensor_key, with_inputs
from .vocabulary import SCAN, rebuilt


def create_prim_func(
    ops: Sequence[te.Tensor | tirx.Var],
    index_dtype_override: str | None = None,
    options: LoweringOptions | None = None,
) -> tirx.PrimFunc:
    """Lower a TE graph that may contain ``te.scan`` to an S-TIR PrimFunc.

    A drop-in for ``te.create_prim_func``: same arguments, and for a graph without scans
    the very same result. Each scan becomes one block (:data:`scan_tir.lower.vocabulary.SCAN`)
    holding a serial loop, starting at 0, over its steps; under the loop one block per step
    with an ordered (``T.axis.scan``) iterator (:data:`scan_tir.lower.vocabulary.SCAN_STEP`)
    holding the step's ordinary spatial and reduce blocks. Raises
    :class:`scan_tir.ScanLoweringError` for graphs it cannot lower.

    A scan whose attrs ask for chunks (``scan(..., attrs={"scan_tir.chunk": L})``, a
    linear recurrence) is first rewritten into its chunked form
    (:func:`scan_tir.lower.chunk_marked`).

    ``options`` (default ``LoweringOptions()``, the fast path): see
    :class:`scan_tir.LoweringOptions`. They concern scans: a graph without one is lowered
    by TVM alone, options or not.
    """
    options = options if options is not None else LoweringOptions()
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
    if any(CHUNK_ATTR in dict(scan.attrs or {}) for scan in graph.scans):
        rewritten = dict(zip((tensor_key(t) for t in tensors), chunk_marked(tensors)))
        ops = [rewritten[tensor_key(x)] if isinstance(x, te.Tensor) else x for x in ops]
        tensors = [x for x in ops if isinstance(x, te.Tensor)]
        graph = analyse(tensors)
    copies = find_step_copies(graph) if options.copies_in_step else {}
    private = private_states(graph, tensors, copies) if options.copies_in_step else {}
    mapping = _rewrite(graph, options.merge_updates, copies, private)
    new_ops = [mapping.get(tensor_key(x), x) if isinstance(x, te.Tensor) else x for x in ops]
    func = te.create_prim_func(new_ops, index_dtype_override)
    func = _unique_buffer_names(_unique_block_names(_complete_scan_blocks(func)))
    return fast_math(func) if options.fast_math else func


def _rewrite(
    graph: Graph,
    merge_updates: bool,
    copies: dict[te.ScanOp, list[StepCopy]],
    private: dict[te.ScanOp, list[int]],
) -> dict[tuple, te.Tensor]:
    """Map every tensor of the outer graph to its counterpart in the scan-free graph; a
    step copy's to the extra output of its scan's extern."""
    mapping: dict[tuple, te.Tensor] = {}

    def outer(tensor: te.Tensor) -> te.Tensor:
        return mapping.get(tensor_key(tensor), tensor)

    for op in graph.order:
        if isinstance(op, te.ScanOp):
            own = copies.get(op, [])
            outputs = lower_scan(graph.scans[op], outer, merge_updates, own, private.get(op, []))
            originals = [op.output(i) for i in range(op.num_outputs)]
            originals += [c.op.output(0) for c in own]
            for original, out in zip(originals, outputs, strict=True):
                mapping[tensor_key(original)] = out
            continue
        if tensor_key(op.output(0)) in mapping:  # a step copy, written by its scan
            continue
        if not any(tensor_key(t) in mapping for t in op.input_tensors):
            continue
        new_op = with_inputs(op, outer, lambda t, idx: _read(t, outer(t), idx))
        for i in range(op.num_outputs):
            mapping[tensor_key(op.output(i))] = new_op.output(i)
    return mapping


def _read(original: te.Tensor, lowered: te.Tensor, index: list) -> tirx.Expr:
    """A read of ``original`` at ``index``, from ``lowered``, the extern output standing for
    it: a scan state folded to two rows (step_copies.py; read outside only at its last
    row) keeps row ``r`` at ``r % 2``."""
    if isinstance(original.op, te.ScanOp) and not Analyzer().can_prove_equal(
        lowered.shape[0], original.shape[0]
    ):
        index = [tirx.floormod(index[0], 2), *index[1:]]
    return load(lowered, index)


def _complete_scan_blocks(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Give each scan's block its access regions: it writes its state buffers and reads its
    inputs, whole (a read region inside may depend on values loaded in the step, which do
    not exist at this level). Reads of the states themselves stay inside the block (every
    row is written there before it is read), so the root scope remains a stage pipeline."""
    root = func.body.block
    if SCAN in root.annotations:  # the scan was the only op: its block became the root
        scan = s_tir.SBlock([], [], [], root.name_hint, root.body, annotations=root.annotations)
        root = s_tir.SBlock(
            [], [], [], "root", s_tir.SBlockRealize([], True, scan), None, root.alloc_buffers
        )
    buffers = {b: b for b in [*func.params, *root.alloc_buffers]}

    def complete(block: s_tir.SBlock) -> s_tir.SBlock:
        if SCAN not in block.annotations:
            return block
        reads, writes = get_sblock_read_write_region(block, buffers)
        written = [w.source for w in writes]
        read = []
        for region in reads:
            if not any(region.source.same_as(b) for b in [*written, *read]):
                read.append(region.source)
        return rebuilt(block, reads=[_whole(b) for b in read], writes=[_whole(b) for b in written])

    body = tvm_ffi.structural_map(root, (s_tir.SBlock, complete))
    body = tvm_ffi.structural_map(body, (s_tir.SBlockRealize, _in_unit_loop))
    return func.with_body(s_tir.SBlockRealize([], True, body))


def _in_unit_loop(realize: s_tir.SBlockRealize) -> tirx.Stmt:
    """A scan block, put in a serial loop of one iteration; any other block as it is.

    Not for the generated code (the loop is removed when lowering) but for TVM's schedule
    state: ``ScheduleState::Replace`` (src/s_tir/schedule/state.cc) decides whether it may
    mutate the tree in place by the reference counts of the loops and blocks on the path to
    the root only. A block realized directly in the root's statement list is reached through
    an SBlockRealize that an earlier copy of the root still shares, while the block itself
    is referenced once: after one primitive on another root-level op, a primitive inside a
    step changed the scan in the function being tuned, and in every schedule sharing it
    (tuning candidates, the database's copy of the workload). A loop at the root is counted
    where it is shared, as for every ordinary op at the root.
    """
    if SCAN not in realize.block.annotations:
        return realize
    loops: list[tirx.For] = []
    tvm_ffi.structural_walk(realize.block.body, (tirx.For, loops.append))
    dtype = loops[0].loop_var.ty.dtype  # the index type: the time loop's
    unit = tirx.Var(f"{realize.block.name_hint}_once", dtype)
    one = tirx.IntImm(dtype, 1)
    return tirx.For(unit, tirx.IntImm(dtype, 0), one, tirx.ForKind.SERIAL, realize)


def _whole(buffer: tirx.Var) -> tirx.BufferRegion:
    return tirx.BufferRegion(buffer, [Range.from_min_extent(0, d) for d in buffer.shape])


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
        return rebuilt(block, name_hint=fresh)

    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlock, rename), order="pre"))


def _unique_buffer_names(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Rename repeated names of buffers (not parameters) ``name_1``, ``name_2``... in
    program order. Names are not part of a function's structural hash, so databases of
    the function before the renaming still hold it."""
    buffers: list[tirx.Var] = []

    def collect(var: tirx.Var) -> None:
        if isinstance(var.ty, tirx.BufferType) and not any(var.same_as(b) for b in buffers):
            buffers.append(var)

    tvm_ffi.structural_walk(func.body, (tirx.Var, collect))
    taken = {p.name for p in func.params} | {b.name for b in buffers}
    seen = {p.name for p in func.params}
    renamed: dict[tirx.Var, tirx.Var] = {}
    for buffer in buffers:
        if any(buffer.same_as(p) for p in func.params):
            continue
        if buffer.name not in seen:
            seen.add(buffer.name)
            continue
        k = 1
        while f"{buffer.name}_{k}" in taken:
            k += 1
        fresh = f"{buffer.name}_{k}"
        taken.add(fresh)
        renamed[buffer] = tirx.Var(fresh, buffer.ty)
    if not renamed:
        return func
    return func.with_body(substitute_buffers(func.body, list(renamed.items())))
