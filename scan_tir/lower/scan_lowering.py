"""Lowering one ``te.scan`` to S-TIR in the "step" encoding.

What one scan becomes (notes.md, section 1, says what else was tried and why not)::

    block <scan>:                           # SCAN; reads the inputs, writes the states
        for i...: block <state>_init        # SCAN_INIT: copy the init rows
        for t in range(length - init_rows): # serial, from 0
            block <scan>_step:              # SCAN_STEP
                v_t = T.axis.scan(...)      # kOrdered: TVM refuses to parallelise it
                <state>_prev = match_buffer(state[v_t + init_rows - 1, ...])
                <update>     = match_buffer(state[v_t + init_rows, ...])
                <input>_t    = match_buffer(input[f(v_t), ...])
                <copy>       = match_buffer(copy[v_t, ...])   # copies_in_step only
                ... ordinary spatial/reduce blocks of one step ...

The per-step blocks are made by ``te.create_prim_func`` itself, from a "step graph": each
body compute with its time axis fixed to the current step, reading per-step placeholders.
Those placeholders' buffers are then swapped for views (``match_buffer``) of the real
state and input slices, or for the whole input buffer where a read's time index cannot be
sliced (it also depends on a spatial index, as in topi's LSTM). So the inner blocks are
exactly what ``te.create_prim_func`` gives for a non-recurrent compute, and schedule
primitives treat them as such.

The outer block is a ``te.extern``'s: the outer ``te.create_prim_func`` call orders it among
the other ops and binds its buffers; convert.py gives it its access regions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tvm_ffi
from tvm import s_tir, te, tirx
from tvm.ir import Range
from tvm.ir.expr import Var
from tvm.s_tir.analysis import get_sblock_read_write_region
from tvm.sym import Analyzer

from ..errors import ScanLoweringError
from .graph import ScanBody
from .step_copies import StepCopy, copy_compute
from .te_rewrite import compute_op, load, map_attr_tensors, map_body, mentions, tensor_key
from .update_merge import merge_updates
from .vocabulary import ORDERED, SCAN, SCAN_INIT, SCAN_STEP, rebuilt


def _buffer_for(tensor: te.Tensor, name: str | None = None) -> Var:
    """A buffer declared as ``te.create_prim_func`` declares one for ``tensor``."""
    return tirx.decl_buffer(
        tensor.shape, tensor.dtype, name or tensor.op.name, scope="global", layout=None
    )


def _view_buffer(like: Var, name: str | None = None) -> Var:
    """A buffer shaped like ``like`` that a ``match_buffer`` can bind to any slice."""
    name = name or str(like.name)
    return tirx.decl_buffer(
        like.shape,
        like.dtype,
        name,
        elem_offset=tirx.Var(f"{name}_elem_offset", "int32"),
        scope="global",
        offset_factor=1,
        layout=None,
    )


def _slice(buffer: Var, leading: tirx.Expr) -> tirx.BufferRegion:
    """``buffer[leading, :, ..., :]``."""
    tail = [Range.from_min_extent(0, extent) for extent in list(buffer.shape)[1:]]
    return tirx.BufferRegion(buffer, [Range.from_min_extent(leading, 1), *tail])


def substitute_buffers(stmt: tirx.Stmt, mapping: list[tuple[Var, Var]]) -> tirx.Stmt:
    """``stmt`` with each ``(old, new)`` buffer of ``mapping`` swapped: a buffer is a Var in
    TVM 0.27, so one map over Vars reaches loads, stores, regions and match_buffers alike."""

    def on_var(var: Var) -> Var:
        for old, new in mapping:
            if var.same_as(old):
                return new
        return var

    return tvm_ffi.structural_map(stmt, (Var, on_var))


def _rename_blocks(stmt: tirx.Stmt, renames: dict[str, str]) -> tirx.Stmt:
    """``stmt`` with the blocks named in ``renames`` renamed."""
    if not renames:
        return stmt

    def rename(block: s_tir.SBlock) -> s_tir.SBlock:
        name = renames.get(block.name_hint)
        return rebuilt(block, name_hint=name) if name else block

    return tvm_ffi.structural_map(stmt, (s_tir.SBlock, rename), order="pre")


def _root_block(func: tirx.PrimFunc) -> s_tir.SBlock:
    return func.body.block


def state_buffer_names(scan: te.ScanOp) -> list[str]:
    """Names of a scan's state buffers: the scan's name, or ``<scan>_<state>`` for many."""
    states = list(scan.state_placeholder)
    if len(states) == 1:
        return [scan.name]
    return [f"{scan.name}_{s.op.name}" for s in states]


class _StepBuilder:
    """Builds one scan's nest; holds the per-scan tables that the read mapping fills."""

    def __init__(
        self,
        body: ScanBody,
        outer: Callable[[te.Tensor], te.Tensor],
        merge: bool = False,
        copies: Sequence[StepCopy] = (),
        private: Sequence[int] = (),
    ):
        self.body = body
        self.merge = merge
        self.copies = list(copies)
        self.private = list(private)
        self.folded: list[Var] = []  # state buffers of two rows (step_copies.py)
        self.copy_buffers = [_buffer_for(c.op.output(0)) for c in self.copies]
        self.scan = body.op
        self.outer = outer
        self.analyzer = Analyzer()
        states = body.states
        self.length = states[0].shape[0]
        index_type = self.length.ty
        self.init_rows = self.analyzer.simplify(
            tirx.Cast(index_type.dtype, self.scan.init[0].shape[0])
        )
        self.extent = self.analyzer.simplify(self.length - self.init_rows)
        self.loop_var = tirx.Var("t", index_type)
        self.step_var = tirx.Var("v_t", index_type)
        #: The TE time index of the step being computed.
        self.now = self.step_var + self.init_rows
        self.state_buffers = [
            _buffer_for(s, name) for s, name in zip(states, state_buffer_names(self.scan))
        ]
        self.body_ops = set(body.ops)
        self.inputs: list[te.Tensor] = []  # original tensors, in extern-input order
        self.input_buffers: dict[tuple, Var] = {}
        self.views: list[tuple[te.Tensor, Var, tirx.Expr]] = []  # (stand-in, src, t)
        self.view_index: dict[tuple, te.Tensor] = {}
        self.wholes: dict[tuple, te.Tensor] = {}  # input key -> stand-in placeholder
        self.steps: dict[tuple, te.Tensor] = {}  # body tensor key -> step tensor

    # -- buffers of the scan's te.extern ---------------------------------------------------
    def input_buffer(self, tensor: te.Tensor) -> Var:
        key = tensor_key(tensor)
        if key not in self.input_buffers:
            self.inputs.append(tensor)
            self.input_buffers[key] = _buffer_for(self.outer(tensor))
        return self.input_buffers[key]

    # -- per-step placeholders -------------------------------------------------------------
    def view(self, source: Var, leading: tirx.Expr, name: str, dtype: str) -> te.Tensor:
        leading = self.analyzer.simplify(leading)
        key = (source, tvm_ffi.StructuralKey(leading))
        if key not in self.view_index:
            stand_in = te.placeholder(list(source.shape)[1:], dtype, name)
            self.view_index[key] = stand_in
            self.views.append((stand_in, source, leading))
        return self.view_index[key]

    def whole(self, tensor: te.Tensor) -> te.Tensor:
        key = tensor_key(tensor)
        if key not in self.wholes:
            self.input_buffer(tensor)
            self.wholes[key] = te.placeholder(tensor.shape, tensor.dtype, tensor.op.name)
        return self.wholes[key]

    # -- the step graph --------------------------------------------------------------------
    def read(self, reader: te.Operation, tensor: te.Tensor, idx: list) -> tirx.Expr:
        j = self.body.state_index(tensor)
        if j is not None:
            return self.read_state(reader, j, idx)
        if tensor.op in self.body_ops:
            if not self.analyzer.can_prove_equal(idx[0], self.now):
                offset = self.analyzer.simplify(idx[0] - self.now)
                raise ScanLoweringError(
                    f"scan '{self.scan.name}': body op '{reader.name}' reads '{tensor.op.name}' "
                    f"of the same scan body at t + ({offset}), not at the current step t; "
                    f"only the states keep other steps. Make '{tensor.op.name}' a state of "
                    "the scan, or read it at t."
                )
            return load(self.step_tensor(tensor), idx[1:])
        # A slice view needs a leading index that moves with the step and nothing else.
        if (
            idx
            and mentions(idx[0], self.step_var)
            and not any(mentions(idx[0], v) for v in _axis_vars(reader))
        ):
            buffer = self.input_buffer(tensor)
            return load(self.view(buffer, idx[0], f"{tensor.op.name}_t", tensor.dtype), idx[1:])
        return load(self.whole(tensor), idx)

    def read_state(self, reader: te.Operation, j: int, idx: list) -> tirx.Expr:
        state = self.body.states[j]
        lag = self.analyzer.simplify(self.now - idx[0])
        rows = self.init_rows
        where = f"scan '{self.scan.name}': body op '{reader.name}' reads state '{state.op.name}'"
        if isinstance(lag, tirx.IntImm):
            if lag.value <= 0:
                when = "the step being computed" if lag.value == 0 else "a later step"
                raise ScanLoweringError(
                    f"{where} at t{-lag.value:+d}, {when}; a scan update may read its states "
                    "only at earlier steps (t-1, t-2, ...). To use the value of this step, read "
                    f"the update tensor '{self.body.updates[j].op.name}' at t instead."
                )
            if isinstance(rows, tirx.IntImm) and lag.value > rows.value:
                raise ScanLoweringError(
                    f"{where} at t-{lag.value}, but its init gives only {rows.value} row(s), "
                    f"so the first step would read before the start; give the init "
                    f"{lag.value} rows (init shape ({lag.value}, ...))."
                )
            name = f"{state.op.name}_prev" + (str(lag.value) if lag.value > 1 else "")
        elif not mentions(idx[0], self.step_var) and _provably_below(self.analyzer, idx[0], rows):
            name = f"{state.op.name}_init_row"
        else:
            raise ScanLoweringError(
                f"{where} at time index {idx[0]}, which is not a constant lag (t-1, t-2, ...) "
                "nor an init row; scan-tir cannot prove the read is of an earlier step. Index "
                "the state's first axis with t-k for a constant k."
            )
        return load(self.view(self.state_buffers[j], idx[0], name, state.dtype), idx[1:])

    def step_tensor(self, tensor: te.Tensor) -> te.Tensor:
        key = tensor_key(tensor)
        if key in self.steps:
            return self.steps[key]
        op = tensor.op
        axis = list(op.axis)
        if not axis or not self.analyzer.can_prove_equal(axis[0].dom.extent, self.length):
            raise ScanLoweringError(
                f"scan '{self.scan.name}': body op '{op.name}' has shape {list(op.output(0).shape)}"
                f" but the scan runs over {self.length} time steps; every op of a scan body "
                "needs the time axis first, with the states' length."
            )
        body = map_body(op, lambda t, idx: self.read(op, t, idx), [(axis[0].var, self.now)])
        attrs = map_attr_tensors(op.attrs, self.whole)
        step_op = compute_op(op, axis[1:], body, attrs)
        for i in range(op.num_outputs):
            self.steps[tensor_key(op.output(i))] = step_op.output(i)
        return self.steps[key]

    # -- folding -----------------------------------------------------------------------------
    def fold_private_states(self) -> None:
        """Give each private state read only at t-1 (and with one init row) two rows."""
        if not (isinstance(self.init_rows, tirx.IntImm) and self.init_rows.value == 1):
            return
        prev = self.analyzer.simplify(self.now - 1)
        for j in self.private:
            old = self.state_buffers[j]
            leads = [lead for _, src, lead in self.views if src.same_as(old)]
            if not all(tvm_ffi.structural_equal(lead, prev) for lead in leads):
                continue
            new = tirx.decl_buffer(
                [2, *list(old.shape)[1:]], old.dtype, old.name, scope="global", layout=None
            )
            self.state_buffers[j] = new
            self.folded.append(new)
            self.views = [(v, new if src.same_as(old) else src, t) for v, src, t in self.views]

    def row(self, buffer: Var, row: tirx.Expr) -> tirx.Expr:
        """Where row ``row`` of ``buffer`` lives: ``row % 2`` in a folded state."""
        if any(buffer.same_as(b) for b in self.folded):
            return tirx.floormod(row, 2)
        return row

    # -- assembly --------------------------------------------------------------------------
    def step_block(self) -> s_tir.SBlock:
        updates = [self.step_tensor(u) for u in self.body.updates]
        if len({tensor_key(u) for u in self.body.updates}) != len(updates):
            raise ScanLoweringError(
                f"scan '{self.scan.name}': the same tensor is the update of two states; give "
                "each state its own update compute."
            )
        renames: dict[str, str] = {}
        if self.merge:
            updates, renames = merge_updates(updates)
        self.fold_private_states()
        copies = [copy_compute(updates[c.state], c) for c in self.copies]
        stand_ins = [v for v, _, _ in self.views] + list(self.wholes.values())
        func = te.create_prim_func(stand_ins + updates + copies)
        params = list(func.params)
        mapping: list[tuple[Var, Var]] = []
        matches = []
        for param, (_, source, leading) in zip(params, self.views):
            view = _view_buffer(param)
            mapping.append((param, view))
            matches.append(s_tir.MatchBufferRegion(view, _slice(source, self.row(source, leading))))
        for param, key in zip(params[len(self.views) :], self.wholes):
            mapping.append((param, self.input_buffers[key]))
        # (buffer, row written by step v_t, view name): a copy's row v_t is state row now
        written = [(b, self.now, None) for b in self.state_buffers]
        written += [(b, self.step_var, f"{b.name}_t") for b in self.copy_buffers]
        for param, (buffer, row, name) in zip(params[len(stand_ins) :], written):
            view = _view_buffer(param, name or renames.get(str(param.name)))
            mapping.append((param, view))
            matches.append(s_tir.MatchBufferRegion(view, _slice(buffer, self.row(buffer, row))))
        root = _root_block(func)
        iter_var = tirx.IterVar(Range.from_min_extent(0, self.extent), self.step_var, ORDERED)
        body = _rename_blocks(substitute_buffers(root.body, mapping), renames)
        alloc = list(root.alloc_buffers)
        name = f"{self.scan.name}_step"
        unfilled = s_tir.SBlock([iter_var], [], [], name, body, None, alloc, matches)
        outside = [*self.state_buffers, *self.copy_buffers, *self.input_buffers.values()]
        reads, writes = get_sblock_read_write_region(unfilled, {b: b for b in outside})
        return rebuilt(
            unfilled, reads=reads, writes=writes, annotations={SCAN_STEP: self.scan.name}
        )

    def init_copies(self) -> list[tirx.Stmt]:
        copies = []
        for init, state_buffer in zip(self.scan.init, self.state_buffers):
            stand_in = te.placeholder(init.shape, init.dtype, init.op.name)
            copy = te.compute(
                init.shape,
                _identity(stand_in),
                name=f"{state_buffer.name}_init",
                attrs={SCAN_INIT: self.scan.name},
            )
            func = te.create_prim_func([stand_in, copy])
            src_param, dst_param = func.params
            mapping = [(src_param, self.input_buffer(init)), (dst_param, state_buffer)]
            copies.append(substitute_buffers(_root_block(func).body, mapping))
        return copies

    def build(self) -> list[te.Tensor]:
        for init in self.scan.init:
            self.input_buffer(init)  # the inits first among the extern's inputs
        step = self.step_block()  # before the init copies: it may fold the state buffers
        inits = self.init_copies()
        loop = tirx.For(
            self.loop_var,
            tirx.const(0, self.extent.ty.dtype),
            self.extent,
            tirx.ForKind.SERIAL,
            s_tir.SBlockRealize([self.loop_var], True, step),
        )
        nest = tirx.SeqStmt([*inits, loop])
        out_buffers = [*self.state_buffers, *self.copy_buffers]
        outputs = te.extern(
            [list(b.shape) for b in out_buffers],
            [self.outer(t) for t in self.inputs],
            lambda ins, outs: nest,
            name=self.scan.name,
            in_buffers=[self.input_buffers[tensor_key(t)] for t in self.inputs],
            out_buffers=out_buffers,
            attrs={SCAN: self.scan.name},
        )
        return [outputs] if isinstance(outputs, te.Tensor) else list(outputs)


def _identity(tensor: te.Tensor) -> Callable[..., tirx.Expr]:
    return lambda *i: tensor(*i)


def _axis_vars(op: te.Operation) -> list[Var]:
    return [iv.var for iv in list(op.axis)[1:]] + [iv.var for iv in op.reduce_axis]


def _provably_below(analyzer: Analyzer, index: tirx.Expr, rows: tirx.Expr) -> bool:
    return analyzer.can_prove(index >= 0) and analyzer.can_prove(index < rows)


def lower_scan(
    body: ScanBody,
    outer: Callable[[te.Tensor], te.Tensor],
    merge_updates: bool = False,
    copies: Sequence[StepCopy] = (),
    private: Sequence[int] = (),
) -> list[te.Tensor]:
    """The scan's outputs, then those of ``copies``, now produced by a ``te.extern`` that
    holds its S-TIR nest.

    ``outer`` maps a tensor of the original graph to its rewritten version;
    ``merge_updates``: see update_merge.py; ``copies``, ``private``
    (indices of states nothing outside the scan reads): step_copies.py.
    """
    return _StepBuilder(body, outer, merge_updates, copies, private).build()
