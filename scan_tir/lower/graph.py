"""Reading a TE graph: which ops sit outside every scan, and what each scan's body is.

``te.scan`` never lists its body. As in TE's own ScanOp (src/te/operation/scan_op.cc and
the old ``ScanGetBody``), the body of a scan is every compute that its update tensors
reach and that depends on one of its state placeholders (or on another update); all the
other tensors the body reads are inputs, computed in full before the time loop starts.
This module finds those sets and rejects, with a :class:`ScanLoweringError`, every graph
that cannot be lowered faithfully.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvm import te

from ..errors import ScanLoweringError


def _kind(op: te.Operation) -> str:
    return type(op).__name__


def _describe(op: te.Operation) -> str:
    return f"{_kind(op)} '{op.name}'"


@dataclass
class ScanBody:
    """A scan op with the ops of its body and the tensors its body reads from outside."""

    op: te.ScanOp
    #: Body compute ops, producers before consumers.
    ops: list[te.Operation] = field(default_factory=list)
    #: Tensors from outside the body (not states) read by body ops, in first-read order.
    inputs: list[te.Tensor] = field(default_factory=list)

    @property
    def states(self) -> list[te.Tensor]:
        return list(self.op.state_placeholder)

    @property
    def updates(self) -> list[te.Tensor]:
        return list(self.op.update)

    def state_index(self, tensor: te.Tensor) -> int | None:
        for i, state in enumerate(self.op.state_placeholder):
            if state.same_as(tensor):
                return i
        return None


@dataclass
class Graph:
    """The outer graph in producer-first order, with the body of every scan in it."""

    order: list[te.Operation]
    scans: dict[te.Operation, ScanBody]

    @property
    def has_scan(self) -> bool:
        return bool(self.scans)


def _find_body(scan: te.ScanOp, all_states: dict[te.Operation, te.ScanOp]) -> ScanBody:
    body = ScanBody(scan)
    own_states = {s.op for s in scan.state_placeholder}
    update_ops = {u.op for u in scan.update}
    for update in scan.update:
        if not isinstance(update.op, te.ComputeOp):
            raise ScanLoweringError(
                f"scan '{scan.name}': its update {_describe(update.op)} is not a te.compute; "
                "write the update as a te.compute over (time, ...) that reads the state "
                "placeholders at earlier steps."
            )
    depends: dict[te.Operation, bool] = {}

    def reads_state(op: te.Operation) -> bool:
        if op in depends:
            return depends[op]
        if op in own_states:
            return True
        depends[op] = False  # the TE graph is acyclic; this only guards re-entry
        result = op in update_ops or any(reads_state(t.op) for t in op.input_tensors)
        depends[op] = result
        return result

    seen: set[te.Operation] = set()
    seen_inputs: set[te.Tensor] = set()

    def visit(op: te.Operation, reader: te.Operation | None) -> None:
        if op in seen:
            return
        seen.add(op)
        if isinstance(op, te.ScanOp):
            raise ScanLoweringError(
                f"scan '{scan.name}': its body contains {_describe(op)}, read by "
                f"'{reader.name if reader else scan.name}'. A scan inside a scan's body is "
                "not supported; unroll the inner recurrence into the outer one as extra "
                "states, or run it as a separate scan before or after."
            )
        if not isinstance(op, te.ComputeOp):
            raise ScanLoweringError(
                f"scan '{scan.name}': its body contains {_describe(op)}; only te.compute "
                "ops may depend on scan states. Compute it outside the scan if it does not "
                "need the state, or express it with te.compute."
            )
        for t in op.input_tensors:
            if t.op in own_states:
                continue
            if t.op in all_states and all_states[t.op] is not scan:
                raise ScanLoweringError(
                    f"scan '{scan.name}': body op '{op.name}' reads the state placeholder "
                    f"'{t.op.name}' of another scan '{all_states[t.op].name}'; read that "
                    "scan's output tensor instead."
                )
            if reads_state(t.op):
                visit(t.op, op)
            elif t not in seen_inputs:
                seen_inputs.add(t)
                body.inputs.append(t)
        body.ops.append(op)

    for update in scan.update:
        visit(update.op, None)
    return body


def analyse(outputs: list[te.Tensor]) -> Graph:
    """Order the ops that ``outputs`` need and find the body of every scan among them."""
    # Pass 1: every op reachable through TE's own edges (a scan's edges are its init and
    # update tensors), in discovery order, so that an outer scan comes before any scan
    # nested in its body and is the one reported.
    all_states: dict[te.Operation, te.ScanOp] = {}
    found: list[te.Operation] = []
    seen: set[te.Operation] = set()
    stack = [t.op for t in reversed(outputs)]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        found.append(op)
        if isinstance(op, te.ScanOp):
            for s in op.state_placeholder:
                all_states[s.op] = op
        stack.extend(t.op for t in reversed(op.input_tensors))

    scans: dict[te.Operation, ScanBody] = {}
    body_owner: dict[te.Operation, te.ScanOp] = {}
    for op in found:
        if isinstance(op, te.ScanOp) and op not in body_owner:
            scans[op] = _find_body(op, all_states)
            for body_op in scans[op].ops:
                body_owner[body_op] = op

    def outer_inputs(op: te.Operation) -> list[te.Tensor]:
        if isinstance(op, te.ScanOp):
            return list(op.init) + scans[op].inputs
        return list(op.input_tensors)

    def check_outer(op: te.Operation, reader: str) -> None:
        if op in all_states:
            raise ScanLoweringError(
                f"{reader} reads '{op.name}', the state placeholder of scan "
                f"'{all_states[op].name}', outside that scan's body; read the scan's output "
                "tensor instead."
            )
        if op in body_owner:
            raise ScanLoweringError(
                f"{reader} reads '{op.name}', which belongs to the body of scan "
                f"'{body_owner[op].name}' and exists only one step at a time; read the "
                "scan's output tensor instead (add the value as an extra scan state if it "
                "must be kept)."
            )
        if not isinstance(op, (te.PlaceholderOp, te.ComputeOp, te.ScanOp, te.ExternOp)):
            raise ScanLoweringError(
                f"{reader} reads {_describe(op)}: unsupported operation type. scan-tir lowers "
                "te.placeholder, te.compute, te.extern and te.scan."
            )

    # Pass 2: the outer graph (scans as single nodes) in producer-first order. Iterative,
    # so that long chains of computes cannot hit Python's recursion limit.
    order: list[te.Operation] = []
    done: set[te.Operation] = set()
    for out in outputs:
        check_outer(out.op, "the argument list")
        work: list[tuple[te.Operation, bool]] = [(out.op, False)]
        while work:
            op, expanded = work.pop()
            if op in done:
                continue
            if expanded:
                done.add(op)
                order.append(op)
                continue
            work.append((op, True))
            for t in reversed(outer_inputs(op)):
                check_outer(t.op, _describe(op))
                if t.op not in done:
                    work.append((t.op, False))
    return Graph(order, scans)
