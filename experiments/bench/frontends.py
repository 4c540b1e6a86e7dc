"""A PyTorch module into Relax, the three ways the Relax benchmarks compare: ``torch.export``
then ``scan_tir.relax.from_exported_program`` or TVM's own
``tvm.relax.frontend.torch.from_exported_program`` (which unrolls the recurrences), and an
ONNX model (``onnx_baseline.onnx_export``) through ``scan_tir.relax.from_onnx``; and the
outputs of the VM they build. Warnings the frontends print on every call and that say
nothing about the model are silenced.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import tvm


def torch_export(module: Any, args: tuple[Any, ...]) -> tuple[float, Any]:
    """``torch.export.export(module, args)``; returns (seconds, program). Its warning that
    nn.RNN's flat weights are plain attributes is harmless and silenced."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        ep = torch.export.export(module, args)
        return time.perf_counter() - t, ep


def import_scan(ep: Any) -> tvm.IRModule:
    """scan-tir's importer: each recurrence one scan kernel."""
    from scan_tir.relax import from_exported_program

    return from_exported_program(ep)


def import_tvm(ep: Any) -> tvm.IRModule:
    """TVM's own importer, default decomposition: the recurrences unrolled over time."""
    from tvm.relax.frontend.torch import from_exported_program

    return from_exported_program(ep)


def import_onnx(model: Any) -> tvm.IRModule:
    """scan-tir's ONNX importer on a ModelProto."""
    from scan_tir.relax import from_onnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TVM's ONNX importer warns about renamed inputs
        return from_onnx(model)


def vm_outputs(vm: Any, *inputs: tvm.runtime.Tensor) -> list[np.ndarray]:
    """``vm["main"](*inputs)`` as a list of arrays (a lone tensor or a tuple of them)."""
    out = vm["main"](*inputs)
    return [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]


def brief(e: BaseException) -> str:
    """An exception in one line, for a path that did not run."""
    lines = str(e).strip().splitlines() or [""]
    return f"{type(e).__name__}: {lines[0][:200]}"
