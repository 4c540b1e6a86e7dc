"""``export``: ``torch.export.export`` with every ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` kept
whole, so that the sequence length and the batch stay symbolic.

The modules' ``forward`` (torch/nn/modules/rnn.py) adds the batch axis to an unbatched
input, makes zero initial states if none are given, and then calls ``_VF.lstm`` (``gru``,
``rnn_tanh``, ``rnn_relu``): ``aten.lstm.input`` and its kin, composite ops whose kernel
torch.export traces through, one step at a time, and so specialises the length whatever
``dynamic_shapes`` declares. :func:`export` hands ``rnn.py`` another
``_VF`` for the duration of the export, in which those four calls (the unpacked overloads)
are the custom ops ``scan_tir::lstm``, ``scan_tir::gru``, ``scan_tir::rnn_tanh`` and
``scan_tir::rnn_relu``: aten's schemas under another namespace, run by aten's own op, with a
fake kernel that gives the outputs' shapes from the inputs' without tracing a step. Everything
the module does before and after the call (and so every option: h0/c0 given or not,
``batch_first``, unbatched input, ``proj_size``, dropout and the training flag) is traced as
usual, and the node keeps aten's arguments, so that ``scan_tir.relax.aten.read`` reads and
checks both alike. A subclass whose ``forward`` calls ``_VF`` from its own module is not
rerouted, and is exported as torch.export would.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: The custom ops' namespace: ``torch.ops.scan_tir.<kind>.default``.
NAMESPACE = "scan_tir"

#: The rerouted ``_VF`` functions; each is also its custom op's name and its aten op's.
OP_NAMES = ("lstm", "gru", "rnn_tanh", "rnn_relu")

_LOCK = threading.Lock()


def export(
    module: torch.nn.Module, args: tuple, dynamic_shapes: Any = None, **kwargs: Any
) -> torch.export.ExportedProgram:
    """``torch.export.export(module, args, dynamic_shapes=dynamic_shapes, **kwargs)`` with
    every RNN module's recurrence one ``scan_tir::<kind>`` node, so that the sequence length
    and the batch stay as symbolic as ``dynamic_shapes`` declares them (``torch.export.Dim``
    with the range the compiled model is to serve; ``scan_tir.relax.from_exported_program``
    checks it at run time).

    Returns the ``torch.export.ExportedProgram``. Before ``torch.export.load`` of a saved
    one, call :func:`custom_ops` (loading needs the ops defined).
    """
    import torch
    import torch.nn.modules.rnn as rnn

    ops = custom_ops()
    with _LOCK, _rerouted(rnn, ops):
        return torch.export.export(module, args, dynamic_shapes=dynamic_shapes, **kwargs)


@lru_cache(maxsize=1)
def custom_ops() -> dict[str, Any]:
    """The custom ops by kind (``torch.ops.scan_tir.<kind>.default``), defined on the first
    call (torch is an optional dependency of scan_tir, so not on import)."""
    import torch

    ops = {}
    for kind in OP_NAMES:
        aten = getattr(torch.ops.aten, kind).input
        schema = str(aten._schema)
        qualname = f"{NAMESPACE}::{kind}"
        torch.library.define(qualname, schema[schema.index("(") :])
        torch.library.impl(qualname, "default", aten)
        torch.library.register_fake(qualname, _fake)
        ops[kind] = getattr(getattr(torch.ops, NAMESPACE), kind).default
    return ops


def _fake(
    input: Any,
    hx: Any,
    params: list,
    has_biases: bool,
    num_layers: int,
    dropout: float,
    train: bool,
    bidirectional: bool,
    batch_first: bool,
) -> tuple:
    """The outputs' shapes, as aten's kernel makes them: the output sequence keeps the input's
    two leading axes (time and batch, in either order) with every direction's h side by side;
    h_n and c_n have the shapes of h0 and c0."""
    states = list(hx) if isinstance(hx, list | tuple) else [hx]
    width = states[0].shape[-1] * (2 if bidirectional else 1)
    return (input.new_empty((*input.shape[:2], width)), *(h.new_empty(h.shape) for h in states))


class _RoutedVF:
    """``rnn.py``'s ``_VF`` while exporting: the unpacked overloads of the RNN functions are
    the custom ops; everything else, the packed-sequence overloads included, is ``_VF``'s.
    An RNN module run meanwhile in another thread calls the custom op too, and so aten's
    kernel, as before; no thread test, which torch.export's ``strict=True`` (dynamo) could not
    trace."""

    def __init__(self, vf: Any, ops: dict[str, Any]) -> None:
        self._vf, self._ops = vf, ops

    def __getattr__(self, name: str) -> Any:
        original = getattr(self._vf, name)
        if name not in self._ops:
            return original
        op = self._ops[name]

        def call(*args: Any) -> Any:
            # (input, hx, params, has_biases, ...) unpacked; packed: (data, batch_sizes, hx,
            # params, has_biases, ...), so the fourth argument tells them apart.
            return op(*args) if isinstance(args[3], bool) else original(*args)

        return call


@contextmanager
def _rerouted(rnn: Any, ops: dict[str, Any]) -> Iterator[None]:
    """``rnn._VF`` a :class:`_RoutedVF` while inside, restored on the way out (also on
    error)."""
    original = rnn._VF
    rnn._VF = _RoutedVF(original, ops)
    try:
        yield
    finally:
        rnn._VF = original
