"""Copies of a scan's new states, written inside the step (``LoweringOptions.copies_in_step``).

topi's LSTM returns ``hidden_states[t] = scan_h[t + 1]``: a te.compute that copies each
step's new state out of the scan's state buffer, whose first row is the init. Lowered as
written it is a pass after the scan over the whole state buffer, reading back rows the
steps wrote long before: at config D two copies of 6.5 MB, about 0.5 ms of a 28 ms call
(notes.md, section 3). Inside the step, the copy reads the new rows while they are in
cache; the step then writes row ``v_t`` of the copy through a ``match_buffer`` view, as it
writes row ``v_t + init_rows`` of the state.

A state that nothing outside the scan reads any more (its copies are inside, and it is not
an output of the function), or reads only at its last row (a chunk's final state, an
RNN's h_n), and that the step reads only at ``t - 1`` then needs only two rows, the one a
step reads and the one it writes: the scan lowering folds it to ``(2, ...)``, row
``t % 2`` (:func:`private_states`), so that the steps write into the same two cached rows
instead of a fresh row each; a read of the last row then reads row ``last % 2``.

What counts as such a copy: a te.compute outside every scan whose whole body is one read
of a scan output at ``[t + init_rows, i1, ..., in]`` (its own axes, in order, the first
shifted by the scan's init rows), over exactly the scan's steps and the state's other
extents, of the state's dtype. Anything else (the last state alone, a transpose, a copy
with arithmetic) stays outside the scan, as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import te
from tvm.sym import Analyzer

from .graph import Graph
from .te_rewrite import is_tensor_load, load, map_body, tensor_key


@dataclass(frozen=True)
class StepCopy:
    """``op`` copies every computed row of state ``state`` of its scan."""

    op: te.ComputeOp
    state: int


def _copied_state(op: te.Operation, analyzer: Analyzer) -> tuple[te.ScanOp, int] | None:
    """(scan, state index) if ``op`` is a step copy of one of the scan's states."""
    if not isinstance(op, te.ComputeOp) or op.num_outputs != 1 or list(op.reduce_axis):
        return None
    read = op.body[0]
    if not is_tensor_load(read):
        return None
    source, index = read.args[0], list(read.args[1:])
    if not isinstance(source.op, te.ScanOp):
        return None
    scan, j = source.op, source.value_index
    state = scan.state_placeholder[j]
    axes = list(op.axis)
    shape = list(state.shape)
    if not (len(index) == len(axes) == len(shape)) or op.output(0).dtype != state.dtype:
        return None
    rows = scan.init[j].shape[0]
    if not analyzer.can_prove_equal(index[0], axes[0].var + rows):
        return None
    if not analyzer.can_prove_equal(axes[0].dom.extent, shape[0] - rows):
        return None
    for k in range(1, len(axes)):
        if not index[k].same_as(axes[k].var):
            return None
        if not analyzer.can_prove_equal(axes[k].dom.extent, shape[k]):
            return None
    return scan, j


def find_step_copies(graph: Graph) -> dict[te.ScanOp, list[StepCopy]]:
    """The step copies of each scan of ``graph``, in the graph's order."""
    analyzer = Analyzer()
    copies: dict[te.ScanOp, list[StepCopy]] = {}
    for op in graph.order:
        found = _copied_state(op, analyzer)
        if found is not None and found[0] in graph.scans:
            copies.setdefault(found[0], []).append(StepCopy(op, found[1]))
    return copies


def private_states(
    graph: Graph, outputs: list[te.Tensor], copies: dict[te.ScanOp, list[StepCopy]]
) -> dict[te.ScanOp, list[int]]:
    """For each scan, the states that no function output reads and no op outside the scan
    reads (its copies aside) except at the state's last row: the scan lowering may fold
    them (and ``convert`` then reads a folded state's last row where the last step left it)."""
    read = {tensor_key(t) for t in outputs}
    copy_ops = {c.op for cs in copies.values() for c in cs}
    analyzer = Analyzer()

    def on_load(tensor: te.Tensor, index: list) -> object:
        at_last_row = isinstance(tensor.op, te.ScanOp) and analyzer.can_prove_equal(
            index[0], tensor.shape[0] - 1
        )
        if not at_last_row:
            read.add(tensor_key(tensor))
        return load(tensor, index)

    for op in graph.order:
        if op in copy_ops:
            continue
        if isinstance(op, te.ScanOp):
            read.update(tensor_key(t) for t in list(op.init) + graph.scans[op].inputs)
        elif isinstance(op, te.ComputeOp):
            map_body(op, on_load)
        else:
            read.update(tensor_key(t) for t in op.input_tensors)
    return {
        scan: [j for j in range(scan.num_outputs) if tensor_key(scan.output(j)) not in read]
        for scan in graph.scans
    }


def copy_compute(update: te.Tensor, copy: StepCopy) -> te.Tensor:
    """The copy of one step: the update of that step, under the copy's name."""
    return te.compute(update.shape, lambda *i: update(*i), name=copy.op.name)
