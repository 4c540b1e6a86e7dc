"""What the zoo knows about a recurrence: how to build it, feed it and check it.

A :class:`Recurrence` is a family (an LSTM, a GRU, ...); a :class:`Workload` is one member at
fixed sizes, lowered with given :class:`~scan_tir.LoweringOptions`. The sizes and options
travel with the lowered function (the ``scan_tir.workload`` attribute), so a tuning database
says by itself which workload each of its entries is, and tools can rebuild its function,
inputs and numpy reference from the database alone (:func:`workload_of`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from tvm import te, tirx

from ..errors import ScanLoweringError
from ..lower.convert import create_prim_func
from ..lower.options import LoweringOptions
from ..transform.layout_free import layout_free

WORKLOAD_ATTR = "scan_tir.workload"

Arrays = list[np.ndarray]


@dataclass(frozen=True)
class Recurrence:
    """One family of recurrences.

    ``build(**sizes)`` returns the TE tensors to lower, inputs first, then outputs (the
    argument list of ``create_prim_func``). ``inputs(rng, **sizes)`` draws input arrays in
    that order, in the ranges the recurrence is meant for (positive step sizes, decaying
    states, ...). ``numpy(*inputs, **sizes)`` and, where PyTorch has the module,
    ``torch(*inputs, **sizes)`` return the outputs in the order ``build`` lists them.
    ``layout_free`` names the weights MetaSchedule may repack (see :func:`layout_free`).
    ``torch_model(*inputs, **sizes)`` returns a function of no arguments that runs PyTorch's
    forward pass with the weights already loaded, so that benchmarks time only the call.
    Where PyTorch has the module (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``), ``torch_module(*inputs,
    **sizes)`` returns it, weights loaded and in eval mode, to be called on the first input
    (Xs): the one place its weights are copied, so that eager PyTorch, ``torch.compile`` and
    an ONNX export of it run the same module; ``torch_model`` then calls it.
    """

    name: str
    summary: str
    sizes: Mapping[str, int]
    build: Callable[..., list[te.Tensor]]
    inputs: Callable[..., Arrays]
    numpy: Callable[..., Arrays]
    torch: Callable[..., Arrays] | None = None
    torch_model: Callable[..., Callable[[], object]] | None = None
    torch_module: Callable[..., object] | None = None
    layout_free: tuple[str, ...] | Callable[..., tuple[str, ...]] = ()

    def __call__(self, options: LoweringOptions | None = None, **sizes: int) -> Workload:
        """This recurrence at ``sizes`` (missing ones take the defaults), lowered with
        ``options`` (default ``LoweringOptions()``)."""
        unknown = sorted(set(sizes) - set(self.sizes))
        if unknown:
            raise ScanLoweringError(
                f"workload '{self.name}': unknown size(s) {unknown}; its sizes are "
                f"{dict(self.sizes)}."
            )
        full = {**self.sizes, **sizes}
        bad = {k: v for k, v in full.items() if not isinstance(v, int) or v < 1}
        if bad:
            raise ScanLoweringError(
                f"workload '{self.name}': sizes must be positive integers, got {bad}."
            )
        return Workload(self, full, options if options is not None else LoweringOptions())


@dataclass(frozen=True)
class Workload:
    """A recurrence at fixed sizes: its lowered function, inputs and references."""

    recurrence: Recurrence
    sizes: dict[str, int] = field(default_factory=dict)
    options: LoweringOptions = field(default_factory=LoweringOptions)

    @property
    def name(self) -> str:
        """``lstm(seq=80, batch=1, ...)``, then the options unless they are the default:
        what tools print for it."""
        args = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        name = f"{self.recurrence.name}({args})"
        return name if self.options == LoweringOptions() else f"{name} [{self.options.label}]"

    def tensors(self) -> list[te.Tensor]:
        """The TE graph: inputs, then outputs."""
        return self.recurrence.build(**self.sizes)

    def prim_func(self, options: LoweringOptions | None = None) -> tirx.PrimFunc:
        """The lowered function, weights marked layout-free, tagged with the workload and
        its options (the tag is part of the function, so of the database's key).
        ``options`` replaces the workload's own."""
        options = options if options is not None else self.options
        func = create_prim_func(self.tensors(), options=options)
        if self.weights():
            func = layout_free(func, self.weights())
        return func.with_attr(WORKLOAD_ATTR, self.to_json(options))

    def weights(self) -> list[str]:
        """The parameters marked layout-free, at this workload's sizes."""
        weights = self.recurrence.layout_free
        return list(weights(**self.sizes) if callable(weights) else weights)

    def symbolic_func(self, names: Sequence[str], packed: bool = False) -> tirx.PrimFunc:
        """The function lowered with the named sizes symbolic (a ``te.var`` each) and the
        others this workload's, for :func:`scan_tir.tune.dynamic`. Untagged (a tag names
        fixed sizes).

        ``packed`` marks the weights layout-free, as :meth:`prim_func` does: each task is
        then tuned on weights packed for its tiles, and the dispatching function takes
        them packed in each kernel's layout, made once by its ``prepack``
        (:mod:`scan_tir.transform.weight_prepack`). Off by default: the weights are read
        where they lie, and the function takes nothing more than its parameters."""
        unknown = sorted(set(names) - set(self.sizes))
        if unknown:
            raise ScanLoweringError(
                f"workload '{self.recurrence.name}': unknown size(s) {unknown}; its sizes "
                f"are {dict(self.sizes)}."
            )
        sizes = {**self.sizes, **{n: te.var(n) for n in names}}
        func = create_prim_func(self.recurrence.build(**sizes), options=self.options)
        if packed and self.weights():
            func = layout_free(func, self.weights())
        return func

    def symbolic_case(
        self, seed: int = 0
    ) -> Callable[[dict[str, int]], tuple[Arrays, Arrays]]:
        """This workload's inputs and numpy reference outputs with some sizes given at
        each call, for :func:`symbolic_func`'s function (``dynamic``'s ``reference``):
        inputs in the recurrence's working range, where fast activations are as exact as
        the checks need (on inputs in (-1, 1) an approximate tanh saturates off by more)."""

        def at(sizes: dict[str, int]) -> tuple[Arrays, Arrays]:
            instance = Workload(self.recurrence, {**self.sizes, **sizes}, self.options)
            inputs = instance.input_arrays(seed)
            return inputs, instance.numpy(inputs)

        return at

    def input_arrays(self, seed: int = 0) -> Arrays:
        """Random inputs in the recurrence's intended ranges, in parameter order."""
        arrays = self.recurrence.inputs(np.random.default_rng(seed), **self.sizes)
        return [np.ascontiguousarray(a, dtype="float32") for a in arrays]

    def numpy(self, inputs: Sequence[np.ndarray]) -> Arrays:
        """The numpy reference outputs."""
        return [np.asarray(a) for a in self.recurrence.numpy(*inputs, **self.sizes)]

    def torch(self, inputs: Sequence[np.ndarray]) -> Arrays | None:
        """PyTorch's outputs for the same inputs, or None where PyTorch has no such module."""
        if self.recurrence.torch is None:
            return None
        return [np.asarray(a) for a in self.recurrence.torch(*inputs, **self.sizes)]

    def to_json(self, options: LoweringOptions | None = None) -> str:
        """The workload attribute's value (with the workload's own options by default)."""
        options = options if options is not None else self.options
        spec = {"name": self.recurrence.name, "sizes": self.sizes, "options": options.to_dict()}
        return json.dumps(spec, sort_keys=True)
