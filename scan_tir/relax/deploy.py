"""From a model file to a deployable library, and running it: what ``scan-tir compile`` and
``scan-tir run`` do.

A model file is an ONNX model (``.onnx``) or a saved ``torch.export`` program (``.pt2``,
from ``torch.export.save`` of :func:`scan_tir.relax.export`'s result or of a plain
export). It is imported with the scan frontends, tuned into a work dir (resumable: the
budget counts the records there) and built with the weights packed at build time; the
library is TVM's ``export_library`` of the Relax VM executable, which
``tvm.runtime.load_module`` and ``relax.VirtualMachine`` load back.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import tvm
from tvm import relax
from tvm.target import Target

from ..errors import ScanLoweringError
from ..tune.progress import log, records_file
from .build import build
from .frontend import from_exported_program
from .onnx import from_onnx
from .tuning import tune

#: Model files by suffix.
SUFFIXES = (".onnx", ".pt2")


def load_model(path: str | Path) -> tvm.IRModule:
    """The Relax module of the model at ``path`` (see the module docstring)."""
    path = Path(path)
    if path.suffix == ".onnx":
        import onnx

        return from_onnx(onnx.load(str(path)))
    if path.suffix == ".pt2":
        import torch

        return from_exported_program(torch.export.load(str(path)))
    raise ScanLoweringError(
        f"{path}: not a model file scan-tir reads; give an ONNX model (.onnx) or a saved "
        "torch.export program (.pt2, torch.export.save)."
    )


def compile_model(
    model: str | Path,
    out: str | Path,
    work_dir: str | Path,
    trials: int,
    *,
    target: Target,
    sizes: Mapping[str, int] | None = None,
    population: int = 512,
) -> tuple[Path, list[str]]:
    """Import ``model``, tune it for ``trials`` records in ``work_dir`` (0: no tuning;
    records already there are used), build, and write the library to ``out``; returns its
    path and the names of ``main``'s inputs, in order."""
    t = time.perf_counter()
    mod = load_model(model)
    log(f"compile: imported {model} in {time.perf_counter() - t:.2f} s")
    if trials > 0:
        tune(mod, target, work_dir, trials, sizes=sizes, population=population)
    t = time.perf_counter()
    tuned = records_file(Path(work_dir)).exists()
    executable = build(mod, target, work_dir if tuned else None, sizes=sizes)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    executable.export_library(str(out))
    seconds = time.perf_counter() - t
    log(f"compile: built {'tuned' if tuned else 'untuned'} {out} in {seconds:.2f} s")
    return out, [str(p.name) for p in mod["main"].params]


def run_library(
    library: str | Path, inputs: Sequence[np.ndarray], repeats: int = 0
) -> tuple[list[np.ndarray], float | None]:
    """``main`` of a library from :func:`compile_model` on ``inputs``; with ``repeats``,
    also its median time in ms over that many timed calls."""
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(library)), tvm.cpu())
    args = [tvm.runtime.tensor(np.ascontiguousarray(a)) for a in inputs]
    out = vm["main"](*args)
    outputs = [o.numpy() for o in _flat(out)]
    if repeats < 1:
        return outputs, None
    timer = vm.time_evaluator("main", tvm.cpu(), number=1, repeat=repeats)
    return outputs, float(np.median(timer(*args).results)) * 1e3


def _flat(value: object) -> list:
    if hasattr(value, "numpy"):
        return [value]
    return [leaf for item in value for leaf in _flat(item)]
