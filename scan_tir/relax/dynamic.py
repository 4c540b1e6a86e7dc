"""``dynamic``: every symbolic kernel of an imported Relax module tuned for a grid of shapes,
each replaced by one function that dispatches by shape (DietCode on the Relax path).

:func:`scan_tir.relax.tune` tunes a symbolic kernel at one representative shape and
:func:`~scan_tir.relax.build` replays that schedule at every shape. Here each kernel with
symbolic sizes goes through :func:`scan_tir.tune.dynamic` instead: the module's grid of
shapes (by its size names or ``torch.export.Dim`` names) is carried to each kernel's own
sizes through the calls that pass them, the kernel is tuned for that grid (at every
listed batch at the shortest length; see :mod:`scan_tir.tune.dynamic_shapes`) into the
one work dir, and the chosen schedules are joined into one kernel that branches by shape
(a TIR branch inside the kernel, so the Relax program is unchanged). Weights stay as given
(no layout-free repacking: a kernel chosen at run time reads the weights its caller
holds). A kernel that no tuned record serves is left as imported, with the reason logged.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import tvm
from tvm import relax, tirx
from tvm.target import Target

from ..errors import ScanLoweringError
from ..transform.pipeline import PIPELINE
from ..tune.dispatch import dispatch_target
from ..tune.dynamic_shapes import Dynamic
from ..tune.dynamic_shapes import dynamic as dynamic_kernel
from ..tune.progress import log
from ..tune.symbolic import size_vars
from .tuning import bound_at_call, checked_sizes, prepare

Instance = tuple[int, ...]


@dataclass
class DynamicModel:
    """The module with its symbolic kernels dispatching by shape, and what each chose."""

    mod: tvm.IRModule  # legalised and fused (``scan_tir.relax.tuning.prepare``)
    kernels: dict[str, Dynamic] = field(default_factory=dict)  # by kernel name
    untuned: dict[str, str] = field(default_factory=dict)  # kernel name -> why

    def compile(self, target: Target) -> relax.VMExecutable:
        """Built for ``target`` with the options of a dispatching function's
        (:func:`~scan_tir.tune.dispatch.dispatch_target`)."""
        return tvm.compile(self.mod, target=dispatch_target(target), tir_pipeline=PIPELINE)


def dynamic(
    mod: tvm.IRModule,
    target: Target,
    work_dir: str | Path,
    instances: Mapping[str, Sequence[int]],
    *,
    weights: Mapping[Instance, float] | None = None,
    trials: int = 64,
    kernels: int = 4,
    candidates: int = 4,
    population: int = 512,
) -> DynamicModel:
    """Tune ``mod``'s symbolic kernels for the grid ``instances`` (every symbolic size of
    the module, by its name or its ``Dim`` name, with its values); ``weights`` per
    instance of that grid (tuples in ``instances``' order), default equal. ``trials`` is
    each kernel's budget; the other arguments are :func:`scan_tir.tune.dynamic`'s."""
    names = list(instances)
    symbols = list(checked_sizes(mod, {n: int(instances[n][0]) for n in names}))
    grid = list(itertools.product(*(sorted({int(v) for v in instances[n]}) for n in names)))
    weights = dict(weights) if weights is not None else {i: 1.0 for i in grid}
    fused = prepare(mod, target)
    symbolic = [
        (gv, f)
        for gv, f in fused.functions.items()
        if isinstance(f, tirx.PrimFunc) and size_vars(f)
    ]
    if not symbolic:
        raise ScanLoweringError(
            "relax dynamic: the module has no kernel of symbolic size; tune it with "
            "scan_tir.relax.tune"
        )
    model = DynamicModel(fused)
    for gv, func in symbolic:
        kernel = func.without_attr("layout_free_buffers")
        own = list(size_vars(kernel))
        per_instance: dict[Instance, float] = {}
        for point in grid:
            bound = bound_at_call(fused, gv, func, dict(zip(symbols, point)))
            at = tuple(bound[n] for n in own)
            per_instance[at] = per_instance.get(at, 0.0) + weights.get(point, 0.0)
        own_grid = {n: sorted({at[k] for at in per_instance}) for k, n in enumerate(own)}
        own_weights = {
            at: per_instance.get(at, 0.0) for at in itertools.product(*own_grid.values())
        }
        try:
            result = dynamic_kernel(
                kernel, work_dir, own_grid, weights=own_weights, trials=trials,
                kernels=kernels, candidates=candidates, target=target, population=population,
            )
        except ScanLoweringError as err:
            log(f"relax dynamic: kernel '{gv.name_hint}' left untuned: {err}")
            model.untuned[gv.name_hint] = str(err)
            continue
        served = result.func.with_attr("tirx.is_scheduled", True).without_attr("global_symbol")
        symbol = (func.attrs or {}).get("global_symbol")  # as the module had it
        fused[gv] = served if symbol is None else served.with_attr("global_symbol", symbol)
        model.kernels[gv.name_hint] = result
    return model
