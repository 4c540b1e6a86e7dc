"""Recognising linear scans: states that follow ``h[t] = A[t] * h[t-1] + B[t]`` elementwise.

Such a recurrence is associative: a run of L steps composes into one step
``h[t+L] = (A[t+1] ... A[t+L]) * h[t] + (what the run adds from zero)``, so it can be split
in time into chunks computed in parallel (chunked_scans.py). Whether a scan qualifies is
read from its TE update expressions, never from names:

- a *recurrent* state is one that some body op reads. Its update must read it at
  ``[t - 1, i1, ..., in]`` with exactly the update's own axes (diagonal: each element reads
  only itself), read no other state and no body op (a read through another op hides the
  expression the chunked form needs), not be a reduction, and be affine in that read:
  ``update = A * h[t-1] + B`` with A and B free of every state;
- an *output* state is one no body op reads (the ``y`` of a selective scan): its update may
  read the current step's body ops, which the chunked form reruns unchanged;
- every other body op may read recurrent states, at ``t - 1`` only: the chunked form
  restarts each chunk from one carried row;
- the init gives one row (the recurrence is first-order).
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import te, tirx
from tvm.ir.expr import Call, Var
from tvm.sym import Analyzer

from ..errors import ScanLoweringError
from .graph import ScanBody, analyse
from .te_rewrite import is_tensor_load, load, map_reads, tensor_key


@dataclass(frozen=True)
class LinearState:
    """State ``state`` of its scan follows ``h[t, i...] = a * h[t-1, i...] + b``.

    ``a`` and ``b`` are expressions over ``axis`` (the update's axis vars, time first) and
    reads of tensors computed before the scan, never of a state: what the chunked form
    evaluates at any step it likes.
    """

    state: int
    a: tirx.Expr
    b: tirx.Expr
    axis: tuple[Var, ...]


@dataclass(frozen=True)
class LinearScan:
    """A scan whose recurrent states are all linear and diagonal; ``outputs`` are the
    indices of the states no body op reads."""

    body: ScanBody
    recurrent: tuple[LinearState, ...]
    outputs: tuple[int, ...]

    @property
    def op(self) -> te.ScanOp:
        return self.body.op


def _reads(expr: tirx.Expr) -> list[tuple[te.Tensor, list[tirx.Expr]]]:
    """Every read in ``expr`` (those in other reads' indices included)."""
    found: list[tuple[te.Tensor, list[tirx.Expr]]] = []

    def record(tensor: te.Tensor, idx: list[tirx.Expr]) -> tirx.Expr:
        found.append((tensor, idx))
        return load(tensor, idx)

    map_reads([expr], record)
    return found


def _body_of(scan: te.ScanOp | te.Tensor | ScanBody) -> ScanBody:
    if isinstance(scan, ScanBody):
        return scan
    op = scan.op if isinstance(scan, te.Tensor) else scan
    if not isinstance(op, te.ScanOp):
        raise ScanLoweringError(f"'{op.name}' is a {type(op).__name__}, not a te.scan.")
    return analyse([op.output(0)]).scans[op]


def _show(idx: list[tirx.Expr]) -> str:
    return "[" + ", ".join(str(i) for i in idx) + "]"


class _Affine:
    """Splits an update expression into ``A * s + B`` for the read ``s`` of its state."""

    def __init__(self, state: te.Tensor, where: str):
        self.key = tensor_key(state)
        self.where = where

    def is_state(self, expr: tirx.Expr) -> bool:
        return is_tensor_load(expr) and tensor_key(expr.args[0]) == self.key

    def has_state(self, expr: tirx.Expr) -> bool:
        return any(tensor_key(t) == self.key for t, _ in _reads(expr))

    def refuse(self, what: str) -> ScanLoweringError:
        return ScanLoweringError(
            f"{self.where} is not affine in the state: {what}. A chunked scan needs "
            "h[t] = A * h[t-1] + B with A and B free of the state."
        )

    def split(self, e: tirx.Expr) -> tuple[tirx.Expr | None, tirx.Expr | None]:
        """(A, B) with ``e == A * s + B``; None stands for zero."""
        if self.is_state(e):
            return tirx.const(1, _dtype(e)), None
        if not self.has_state(e):
            return None, e
        if isinstance(e, (tirx.Add, tirx.Sub)):
            (a1, b1), (a2, b2) = self.split(e.a), self.split(e.b)
            sign = 1 if isinstance(e, tirx.Add) else -1
            return _add(a1, a2, sign), _add(b1, b2, sign)
        if isinstance(e, tirx.Mul):
            if self.has_state(e.a) and self.has_state(e.b):
                raise self.refuse("state * state")
            factor, other = (e.b, e.a) if self.has_state(e.a) else (e.a, e.b)
            a, b = self.split(other)
            return _mul(a, factor), _mul(b, factor)
        if isinstance(e, tirx.Div):
            if self.has_state(e.b):
                raise self.refuse("a division by the state")
            a, b = self.split(e.a)
            return _div(a, e.b), _div(b, e.b)
        if isinstance(e, tirx.Cast):
            to, source = _dtype(e), _dtype(e.value)
            if not (to.startswith("float") and source.startswith("float")):
                raise self.refuse(f"a cast of the state from {source} to {to}")
            a, b = self.split(e.value)
            return _cast(to, a), _cast(to, b)
        if is_tensor_load(e):
            raise self.refuse(f"a read of '{e.args[0].op.name}' indexed by the state")
        if isinstance(e, Call):
            name = str(e.op.name).rsplit(".", 1)[-1]
            raise self.refuse(f"{name} of the state")
        raise self.refuse(f"{type(e).__name__} of the state")


def _dtype(expr: tirx.Expr) -> str:
    return str(expr.ty.dtype)


def _add(x: tirx.Expr | None, y: tirx.Expr | None, sign: int) -> tirx.Expr | None:
    if y is None:
        return x
    if x is None:
        return y if sign > 0 else y * tirx.const(-1, _dtype(y))
    return x + y if sign > 0 else x - y


def _is_one(x: tirx.Expr) -> bool:
    return isinstance(x, (tirx.IntImm, tirx.FloatImm)) and x.value == 1


def _mul(x: tirx.Expr | None, factor: tirx.Expr) -> tirx.Expr | None:
    if x is None:
        return None
    return factor if _is_one(x) else x * factor


def _div(x: tirx.Expr | None, divisor: tirx.Expr) -> tirx.Expr | None:
    return None if x is None else x / divisor


def _cast(dtype: str, x: tirx.Expr | None) -> tirx.Expr | None:
    return None if x is None else tirx.Cast(dtype, x)


def _dependences(body: ScanBody) -> dict[te.Operation, set[int]]:
    """For each body op, the states whose values it depends on: those it reads, those whose
    update it reads, and those of the body ops it reads."""
    updates = {u.op: j for j, u in enumerate(body.updates)}
    deps: dict[te.Operation, set[int]] = {}
    for op in body.ops:  # producers first
        found: set[int] = set()
        for t in op.input_tensors:
            j = body.state_index(t)
            if j is not None:
                found.add(j)
            elif t.op in deps:
                found |= deps[t.op]
                if t.op in updates:
                    found.add(updates[t.op])
        deps[op] = found
    return deps


def _recurrent(body: ScanBody) -> set[int]:
    read = set()
    for op in body.ops:
        for t in op.input_tensors:
            j = body.state_index(t)
            if j is not None:
                read.add(j)
    return read


def _linear_state(body: ScanBody, j: int, deps: dict[te.Operation, set[int]]) -> LinearState:
    scan, state, update = body.op, body.states[j], body.updates[j]
    op = update.op
    where = f"scan '{scan.name}': the update '{op.name}' of state '{state.op.name}'"
    expr = op.body[update.value_index]
    if isinstance(expr, tirx.Reduce):
        raise ScanLoweringError(
            f"{where} is a reduction; a chunked scan needs each element of a recurrent state "
            "to read only its own previous value (h[t] = A * h[t-1] + B elementwise)."
        )
    axis = tuple(iv.var for iv in op.axis)
    expected = [axis[0] - 1, *axis[1:]]
    analyzer = Analyzer()
    names = [s.op.name for s in body.states]
    for tensor, idx in _reads(expr):
        k = body.state_index(tensor)
        if tensor.op in deps:
            own = j in deps[tensor.op]
            if own:
                raise ScanLoweringError(
                    f"{where} reads its state through body op '{tensor.op.name}'; a chunked "
                    "scan needs the update to read the state directly, so that it can be "
                    "split into A * h[t-1] + B."
                )
            others = ", ".join(f"'{names[i]}'" for i in sorted(deps[tensor.op]))
            raise ScanLoweringError(
                f"{where} reads body op '{tensor.op.name}', which depends on state(s) "
                f"{others}: the states are coupled; a chunked scan needs each recurrent "
                "state's A and B to depend on inputs only."
            )
        if k is None:
            continue
        if k != j:
            raise ScanLoweringError(
                f"scan '{scan.name}': states '{names[j]}' and '{names[k]}' are coupled (the "
                f"update '{op.name}' of '{names[j]}' reads '{names[k]}'); a chunked scan "
                "needs each recurrent state to read only itself."
            )
        diagonal = len(idx) == len(expected) and all(
            analyzer.can_prove_equal(i, e) for i, e in zip(idx, expected)
        )
        if not diagonal:
            raise ScanLoweringError(
                f"{where} reads it at {_show(idx)}, not at {_show(expected)}; a chunked scan "
                "needs a first-order diagonal recurrence (each element reads its own value "
                "one step back)."
            )
    a, b = _Affine(state, where).split(expr)
    zero = tirx.const(0, _dtype(expr))
    return LinearState(j, a if a is not None else zero, b if b is not None else zero, axis)


def _check_other_reads(body: ScanBody, recurrent: set[int]) -> None:
    """Body ops other than the recurrent updates read states at t-1 only."""
    updates = {body.updates[j].op for j in recurrent}
    analyzer = Analyzer()
    for op in body.ops:
        if op in updates:
            continue
        t = op.axis[0].var
        for expr in op.body:
            for tensor, idx in _reads(expr):
                k = body.state_index(tensor)
                if k is not None and not analyzer.can_prove_equal(idx[0], t - 1):
                    raise ScanLoweringError(
                        f"scan '{body.op.name}': body op '{op.name}' reads state "
                        f"'{tensor.op.name}' at time index {idx[0]}, not {t - 1}; a chunked "
                        "scan restarts each chunk from one row, so states may be read only "
                        "one step back."
                    )


def linear_form(scan: te.ScanOp | te.Tensor | ScanBody) -> LinearScan:
    """The linear form of ``scan`` (the op, one of its outputs, or its analysed body);
    raises :class:`ScanLoweringError` saying why it has none."""
    body = _body_of(scan)
    recurrent = _recurrent(body)
    if not recurrent:
        raise ScanLoweringError(
            f"scan '{body.op.name}': no body op reads a state, so there is no recurrence to "
            "chunk; compute it with te.compute over all steps instead."
        )
    deps = _dependences(body)
    states = tuple(_linear_state(body, j, deps) for j in sorted(recurrent))
    _check_other_reads(body, recurrent)
    rows = body.op.init[0].shape[0]
    if not (isinstance(rows, tirx.IntImm) and rows.value == 1):
        raise ScanLoweringError(
            f"scan '{body.op.name}': its init gives {rows} rows; a chunked scan needs one (a "
            "first-order recurrence, restarted from one carried row per chunk)."
        )
    outputs = tuple(j for j in range(len(body.states)) if j not in recurrent)
    return LinearScan(body, states, outputs)


def linear_problem(scan: te.ScanOp | te.Tensor | ScanBody) -> str | None:
    """Why ``scan`` cannot be chunked, or None when it can."""
    try:
        linear_form(scan)
    except ScanLoweringError as err:
        return str(err)
    return None
