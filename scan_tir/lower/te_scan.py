"""``scan``: ``te.scan`` with its preconditions checked in Python first.

``te.scan`` checks shapes and dtypes in C++ (src/te/operation/scan_op.cc) and reports a
failure as an ``InternalError`` naming neither the scan nor the tensor at fault. This
wrapper checks the same preconditions and raises :class:`ScanLoweringError` instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from tvm import te
from tvm.sym import Analyzer

from ..errors import ScanLoweringError


def _as_list(x: te.Tensor | Sequence[te.Tensor] | None) -> list[te.Tensor]:
    if x is None:
        return []
    return [x] if isinstance(x, te.Tensor) else list(x)


def _shape(t: te.Tensor) -> list:
    return list(t.shape)


def scan(
    init: te.Tensor | Sequence[te.Tensor],
    update: te.Tensor | Sequence[te.Tensor],
    state_placeholder: te.Tensor | Sequence[te.Tensor],
    inputs: te.Tensor | Sequence[te.Tensor] | None = None,
    name: str = "scan",
    tag: str = "",
    attrs: dict | None = None,
) -> te.Tensor | list[te.Tensor]:
    """``te.scan(init, update, state_placeholder, inputs, name, tag, attrs)``, checked.

    Every state ``j`` needs ``init[j]`` of shape ``(k, *tail_j)``, with the same ``k`` rows
    for all states, and ``update[j]`` and ``state_placeholder[j]`` of shape ``(L, *tail_j)``
    with the same ``L`` for all states, all of one dtype per state.
    """
    inits, updates, states = _as_list(init), _as_list(update), _as_list(state_placeholder)
    where = f"scan '{name}'"
    if not states:
        raise ScanLoweringError(f"{where}: no states given; pass at least one state.")
    if not len(inits) == len(updates) == len(states):
        raise ScanLoweringError(
            f"{where}: got {len(inits)} init, {len(updates)} update and {len(states)} state "
            "tensors; pass one of each per state, in the same order."
        )
    analyzer = Analyzer()

    def same(a: object, b: object) -> bool:
        return analyzer.can_prove_equal(a, b)

    rows, length = inits[0].shape[0] if inits[0].shape else None, states[0].shape[0]
    for j, (i, u, s) in enumerate(zip(inits, updates, states)):
        label = f"{where}, state {j} ('{s.op.name}')"
        if not (i.dtype == u.dtype == s.dtype):
            raise ScanLoweringError(
                f"{label}: dtypes differ (init '{i.op.name}' {i.dtype}, update '{u.op.name}' "
                f"{u.dtype}, state {s.dtype}); make them one dtype."
            )
        if not (len(i.shape) == len(u.shape) == len(s.shape)) or not s.shape:
            raise ScanLoweringError(
                f"{label}: init '{i.op.name}' {_shape(i)}, update '{u.op.name}' {_shape(u)} and "
                f"state {_shape(s)} must have the same rank, at least 1 (time first)."
            )
        if not all(same(a, b) for a, b in zip(u.shape, s.shape)):
            raise ScanLoweringError(
                f"{label}: update '{u.op.name}' has shape {_shape(u)} but the state has "
                f"{_shape(s)}; give the update the state's shape."
            )
        if not all(same(a, b) for a, b in zip(list(i.shape)[1:], list(s.shape)[1:])):
            raise ScanLoweringError(
                f"{label}: init '{i.op.name}' has shape {_shape(i)}, whose trailing dims differ "
                f"from the state's {_shape(s)}; init must be (rows, *state_shape[1:])."
            )
        if not same(i.shape[0], rows):
            raise ScanLoweringError(
                f"{label}: init '{i.op.name}' has {i.shape[0]} rows but state 0's init has "
                f"{rows}; every state's init must give the same number of rows."
            )
        if not same(s.shape[0], length):
            raise ScanLoweringError(
                f"{label}: the state has length {s.shape[0]} but state 0 has {length}; all "
                "states of a scan share its time axis."
            )
    return te.scan(inits, updates, states, inputs=_as_list(inputs), name=name, tag=tag, attrs=attrs)
