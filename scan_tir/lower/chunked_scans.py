"""Chunked lowering of linear scans: a TE -> TE rewrite into three scans over chunks.

A linear recurrence ``h[t] = A[t] * h[t-1] + B[t]`` (linear_scans.py) split in time into C
chunks of L steps needs only C sequential steps, not C * L:

1. ``<scan>_chunk_local``, parallel over chunks: each chunk runs from zero, giving what it
   adds (``hl``), and multiplies its A's (the decay ``P``). Steps past the end of the
   sequence (the last chunk's padding) read the last step's A and B: only chunks before
   the last, which have no padding, are carried.
2. ``<scan>_carry``, sequential over chunks: ``carry[c] = P[c-1] * carry[c-1] + hl[c-1]``
   from the scan's own init row; ``carry[c]`` is the state at the start of chunk c.
3. ``<scan>_chunked``, parallel over chunks: the original body, every state and body op
   with a chunk axis, rerun over each chunk from its carry, so that every step's states
   (the output states too, such as a selective scan's y) come out; then one compute per
   state puts the rows back in time order, with the scan's original shape.

The chunk axis comes right after time in every new state, so the converter (convert.py,
unchanged) lowers each pass as an ordinary scan whose step is data-parallel over chunks.
Every op downstream is rebuilt to read the new tensors, and scans left sequential are
rebuilt around their new inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from tvm import te, tirx
from tvm.ir import Range
from tvm.sym import Analyzer

from ..errors import ScanLoweringError
from .graph import Graph, ScanBody, analyse
from .linear_scans import LinearScan, LinearState, linear_form, linear_problem
from .te_rewrite import (
    compute_op,
    load,
    map_attr_tensors,
    map_body,
    map_reads,
    tensor_key,
    with_inputs,
)
from .te_scan import scan as checked_scan
from .vocabulary import DATA_PAR

#: The scan attribute that asks :func:`chunk_marked` to chunk a scan: the chunk length.
CHUNK_ATTR = "scan_tir.chunk"

Outer = Callable[[te.Tensor], te.Tensor]


def _check_chunk(chunk: object, where: str) -> int:
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ScanLoweringError(f"{where}: the chunk length must be a positive int, got {chunk!r}.")
    return chunk


def chunked(
    outputs: Sequence[te.Tensor], chunk: int, scans: Sequence[str] | None = None
) -> list[te.Tensor]:
    """``outputs`` with each linear scan (all of them, or those named in ``scans``)
    computed in chunks of ``chunk`` steps; same shapes, same values up to rounding.

    A named scan that is not linear raises :class:`ScanLoweringError` with the reason
    (:func:`scan_tir.lower.linear_scans.linear_problem`); unnamed ones stay sequential.
    """
    _check_chunk(chunk, "chunked")
    graph = analyse(list(outputs))
    if scans is None:
        chosen = [op for op, body in graph.scans.items() if linear_problem(body) is None]
    else:
        by_name = {op.name: op for op in graph.scans}
        unknown = sorted(set(scans) - set(by_name))
        if unknown:
            raise ScanLoweringError(
                f"chunked: no scan named {unknown} in the graph; its scans are {sorted(by_name)}."
            )
        chosen = [by_name[name] for name in scans]
    return _rewrite(list(outputs), graph, {op: chunk for op in chosen})


def chunk_marked(outputs: Sequence[te.Tensor]) -> list[te.Tensor]:
    """``outputs`` with each scan whose attrs hold :data:`CHUNK_ATTR` (``scan(...,
    attrs={"scan_tir.chunk": 64})``) chunked at that length: the per-scan opt-in. A marked
    scan that is not linear raises :class:`ScanLoweringError` with the reason."""
    graph = analyse(list(outputs))
    lengths = {}
    for op in graph.scans:
        attrs = dict(op.attrs or {})
        if CHUNK_ATTR in attrs:
            value = attrs[CHUNK_ATTR]
            value = value.value if isinstance(value, tirx.IntImm) else value
            lengths[op] = _check_chunk(value, f"scan '{op.name}', attribute {CHUNK_ATTR}")
    return _rewrite(list(outputs), graph, lengths)


def _rewrite(
    outputs: list[te.Tensor], graph: Graph, lengths: dict[te.Operation, int]
) -> list[te.Tensor]:
    """``outputs`` rebuilt with the scans of ``lengths`` chunked."""
    mapping: dict[tuple, te.Tensor] = {}

    def outer(tensor: te.Tensor) -> te.Tensor:
        return mapping.get(tensor_key(tensor), tensor)

    for op in graph.order:
        if isinstance(op, te.ScanOp):
            body = graph.scans[op]
            if op in lengths:
                new = _Chunker(linear_form(body), lengths[op], outer).build()
            elif any(tensor_key(t) in mapping for t in [*op.init, *body.inputs]):
                new = _rebuilt_scan(body, outer)
            else:
                continue
        elif not any(tensor_key(t) in mapping for t in op.input_tensors):
            continue
        else:
            new_op = with_inputs(op, outer)
            new = [new_op.output(i) for i in range(op.num_outputs)]
        for i, tensor in enumerate(new):
            mapping[tensor_key(op.output(i))] = tensor
    return [outer(t) for t in outputs]


def _attrs_without_chunk(scan: te.ScanOp) -> dict:
    return {k: v for k, v in dict(scan.attrs or {}).items() if k != CHUNK_ATTR}


def _as_list(out: te.Tensor | list[te.Tensor]) -> list[te.Tensor]:
    return [out] if isinstance(out, te.Tensor) else list(out)


def _rebuilt_scan(body: ScanBody, outer: Outer) -> list[te.Tensor]:
    """A scan left sequential, its body and init reading the rewritten inputs."""
    new_ops: dict[te.Operation, te.Operation] = {}

    def on_load(tensor: te.Tensor, idx: list[tirx.Expr]) -> tirx.Expr:
        if body.state_index(tensor) is not None:
            return load(tensor, idx)
        if tensor.op in new_ops:
            return load(new_ops[tensor.op].output(tensor.value_index), idx)
        return load(outer(tensor), idx)

    for op in body.ops:
        new_ops[op] = with_inputs(op, outer, on_load)
    scan = body.op
    return _as_list(
        checked_scan(
            [outer(i) for i in scan.init],
            [new_ops[u.op].output(u.value_index) for u in body.updates],
            body.states,
            [outer(t) for t in scan.inputs],
            name=scan.name,
            tag=scan.tag,
            attrs=dict(scan.attrs or {}),
        )
    )


def _constant(value: int, dtype: str) -> Callable[..., tirx.Expr]:
    return lambda *_: tirx.const(value, dtype)


def _last_row(tensor: te.Tensor, last: int, name: str) -> te.Tensor:
    """``tensor[last]``: (C, ...)."""
    return te.compute(list(tensor.shape)[1:], lambda *i: tensor[(last, *i)], name=name)


def _carry_update(hl: te.Tensor, decay: te.Tensor, carry: te.Tensor) -> Callable[..., tirx.Expr]:
    """``carry[c] = P[c-1] * carry[c-1] + hl[c-1]``, P and hl each chunk's totals."""
    return lambda c, *i: decay[(c - 1, *i)] * carry[(c - 1, *i)] + hl[(c - 1, *i)]


def _from_carry(carry: te.Tensor) -> Callable[..., tirx.Expr]:
    return lambda _, c, *i: carry[(c, *i)]


def _from_init(init: te.Tensor) -> Callable[..., tirx.Expr]:
    return lambda _, c, *i: init[(0, *i)]


class _Chunker:
    """Builds the three passes of one linear scan and the computes that undo the chunking."""

    def __init__(self, form: LinearScan, chunk: int, outer: Outer):
        self.form = form
        self.body = form.body
        self.scan = form.op
        self.outer = outer
        self.chunk = chunk
        self.length = self.body.states[0].shape[0]  # rows of each state, the init row first
        analyzer = Analyzer()
        self.last = analyzer.simplify(self.length - 1)  # the last step's row
        #: C, the number of chunks: ceil(steps / chunk), symbolic with the length.
        self.count = analyzer.simplify(tirx.floordiv(self.last + (chunk - 1), chunk))

    def clamped(self, j: tirx.Expr, c: tirx.Expr) -> tirx.Expr:
        """The original row computed by local step ``j`` (from 1) of chunk ``c``, clamped to
        the last real one: the last chunk's padding steps read in bounds."""
        return tirx.min(c * self.chunk + j, self.last)

    def chunk_shape(self, state: te.Tensor) -> list[tirx.Expr]:
        return [self.chunk + 1, self.count, *list(state.shape)[1:]]

    # -- pass 1 ------------------------------------------------------------------------------
    def coefficients(
        self, ls: LinearState, j: tirx.Expr, c: tirx.Expr, i: Sequence[tirx.Expr]
    ) -> tuple[tirx.Expr, tirx.Expr]:
        """A and B at local step ``j`` of chunk ``c``, element ``i``.

        Past the end (the last chunk's padding) they are read at the last step instead:
        only the clamp keeps those reads in bounds. The padding's values reach nothing,
        since the carry pass reads the totals of every chunk but the last. Guarding them
        with a Select to give A = 1, B = 0 would not help: TVM's simplifier assumes the
        Select's condition in its branch and drops the clamp (an out-of-bounds read).
        """
        sub = [(ls.axis[0], self.clamped(j, c)), *zip(ls.axis[1:], i)]
        a, b = map_reads([ls.a, ls.b], lambda t, idx: load(self.outer(t), idx), sub)
        return a, b

    def local_update(
        self, ls: LinearState, hl: te.Tensor, decay: te.Tensor
    ) -> Callable[..., list[tirx.Expr]]:
        """``hl[j] = A * hl[j-1] + B`` (what chunk c adds to its state from zero) and
        ``P[j] = A * P[j-1]`` (how it scales the state it starts from): one compute with two
        outputs, lowered to one loop nest, where the compiler can share A (an exp, in a
        selective scan) between them. ``P`` is flushed to zero once it falls below the
        dtype's smallest normal number: a decaying recurrence's products underflow within
        a chunk (a selective scan's, over 64 steps, mostly do), and arithmetic on subnormal
        numbers runs many times slower on x86; what a flushed product would add to a state
        is below that state's float resolution unless the state is itself near the
        smallest normal."""
        tiny = tirx.const(float(np.finfo(str(hl.dtype)).tiny), hl.dtype)
        zero = tirx.const(0.0, hl.dtype)

        def update(j, c, *i):
            a, b = self.coefficients(ls, j, c, i)
            p = a * decay[(j - 1, c, *i)]
            return [a * hl[(j - 1, c, *i)] + b, tirx.Select(tirx.abs(p) < tiny, zero, p)]

        return update

    def local_pass(self) -> list[te.Tensor]:
        """(hl, P) of each recurrent state, over (chunk + 1, C, ...)."""
        inits, updates, states = [], [], []
        for ls in self.form.recurrent:
            state = self.body.states[ls.state]
            name, dtype = state.op.name, state.dtype
            shape = self.chunk_shape(state)
            hl = te.placeholder(shape, dtype, f"{name}_local")
            decay = te.placeholder(shape, dtype, f"{name}_decay")
            for start, tag in ((0, "local"), (1, "decay")):
                inits.append(
                    te.compute([1, *shape[1:]], _constant(start, dtype), name=f"{name}_{tag}_init")
                )
            update = te.compute(
                shape, self.local_update(ls, hl, decay), name=f"{name}_local_update"
            )
            updates += [update[0], update[1]]
            states += [hl, decay]
        name = f"{self.scan.name}_chunk_local"
        return _as_list(checked_scan(inits, updates, states, name=name))

    # -- pass 2 ------------------------------------------------------------------------------
    def carry_pass(self, local: list[te.Tensor]) -> list[te.Tensor]:
        """The state at the start of each chunk (C rows: the init row, then the end of each
        chunk but the last), per recurrent state."""
        inits, updates, states = [], [], []
        last = self.chunk
        for k, ls in enumerate(self.form.recurrent):
            state = self.body.states[ls.state]
            # Each chunk's totals, read outside pass 1 at its last row alone, so that the
            # converter keeps two rows of pass 1's states, not one per step (step_copies.py).
            hl, decay = (
                _last_row(local[2 * k + n], last, f"{state.op.name}_{kind}_total")
                for n, kind in enumerate(("local", "decay"))
            )
            carry = te.placeholder(
                [self.count, *list(state.shape)[1:]], state.dtype, f"{state.op.name}_carry"
            )
            inits.append(self.outer(self.scan.init[ls.state]))
            updates.append(
                te.compute(
                    carry.shape,
                    _carry_update(hl, decay, carry),
                    name=f"{state.op.name}_carry_update",
                )
            )
            states.append(carry)
        return _as_list(checked_scan(inits, updates, states, name=f"{self.scan.name}_carry"))

    # -- pass 3 ------------------------------------------------------------------------------
    def chunked_pass(self, carries: list[te.Tensor]) -> list[te.Tensor]:
        """Every state of the scan over (chunk + 1, C, ...), each chunk started from its
        carry (an output state from the init row: nothing reads its previous value)."""
        states = [
            te.placeholder(self.chunk_shape(s), s.dtype, f"{s.op.name}_chunked")
            for s in self.body.states
        ]
        carry_of = {ls.state: carries[k] for k, ls in enumerate(self.form.recurrent)}
        inits = []
        for j, s in enumerate(self.body.states):
            init = self.outer(self.scan.init[j])
            carry = carry_of.get(j)
            start = _from_carry(carry) if carry is not None else _from_init(init)
            inits.append(te.compute([1, *states[j].shape[1:]], start, name=f"{s.op.name}_start"))
        new_ops: dict[te.Operation, te.Operation] = {}
        for op in self.body.ops:
            new_ops[op] = self.chunked_op(op, states, new_ops)
        updates = [new_ops[u.op].output(u.value_index) for u in self.body.updates]
        name = f"{self.scan.name}_chunked"
        attrs = _attrs_without_chunk(self.scan)
        return _as_list(checked_scan(inits, updates, states, name=name, attrs=attrs))

    def chunked_op(
        self,
        op: te.ComputeOp,
        states: list[te.Tensor],
        new_ops: dict[te.Operation, te.Operation],
    ) -> te.Operation:
        """Body op ``op`` with a chunk axis after time, its time mapped to the original
        step, its reads of states and body ops redirected to their chunked versions."""
        dtype = str(op.axis[0].var.ty.dtype)
        j = tirx.IterVar(Range.from_min_extent(0, self.chunk + 1), tirx.Var("j", dtype), DATA_PAR)
        c = tirx.IterVar(Range.from_min_extent(0, self.count), tirx.Var("c", dtype), DATA_PAR)
        now = self.clamped(j.var, c.var)
        analyzer = Analyzer()

        def on_load(tensor: te.Tensor, idx: list[tirx.Expr]) -> tirx.Expr:
            k = self.body.state_index(tensor)
            if k is not None:  # at t - 1 (linear_form checked it)
                return load(states[k], [j.var - 1, c.var, *idx[1:]])
            if tensor.op in new_ops:
                if not analyzer.can_prove_equal(idx[0], now):
                    raise ScanLoweringError(
                        f"scan '{self.scan.name}': body op '{op.name}' reads "
                        f"'{tensor.op.name}' of the same body at another step than its own; "
                        "only the states keep other steps."
                    )
                new = new_ops[tensor.op].output(tensor.value_index)
                return load(new, [j.var, c.var, *idx[1:]])
            return load(self.outer(tensor), idx)

        body = map_body(op, on_load, [(op.axis[0].var, now)])
        attrs = map_attr_tensors(op.attrs, self.outer)
        return compute_op(op, [j, c, *list(op.axis)[1:]], body, attrs)

    # -- back to time order ------------------------------------------------------------------
    def unchunked(self, state: te.Tensor, chunked: te.Tensor) -> te.Tensor:
        """``chunked`` as a tensor of the state's shape: row t (t >= 1) is local step
        ``t - c * chunk`` of chunk ``c = (t - 1) // chunk``; row 0, the init row, is chunk 0's
        start."""

        def row(t, *i):
            c = tirx.floordiv(tirx.max(t, 1) - 1, self.chunk)
            return chunked[(t - c * self.chunk, c, *i)]

        return te.compute(state.shape, row, name=f"{self.scan.name}_{state.op.name}")

    def build(self) -> list[te.Tensor]:
        """The scan's outputs, computed in chunks."""
        carries = self.carry_pass(self.local_pass())
        chunked = self.chunked_pass(carries)
        return [self.unchunked(s, o) for s, o in zip(self.body.states, chunked, strict=True)]
