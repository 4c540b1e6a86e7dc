"""TVM's own path for an ``nn.LSTM``, the only other way TVM 0.27 compiles one:
``torch.export`` -> ``relax.frontend.torch.from_exported_program`` -> ``tvm.compile`` with
the default pipeline, run on the Relax VM. The frontend unrolls the LSTM over time, so
compile takes seconds to minutes; no tuning is applied.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import tvm

from scan_tir.workloads import Workload
from scan_tir.workloads.lstm import LSTM

from .build import target


def has_relax_path(w: Workload) -> bool:
    """Only topi's LSTM has a PyTorch module exported this way (``nn.LSTM``, one layer)."""
    return w.recurrence.name == "lstm"


def relax_import(inputs: Sequence[np.ndarray]) -> tuple[float, float, tvm.IRModule]:
    """torch.export then the Relax frontend; returns (export s, import s, module).

    The frontend bakes the weights in as constants, so ``main`` takes only the input sequence.
    """
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    m = LSTM.torch_module(*inputs)
    x = torch.from_numpy(np.ascontiguousarray(inputs[0]))
    with warnings.catch_warnings():
        # torch.export warns that nn.LSTM's _flat_weights are plain attributes; harmless here.
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        ep = torch.export.export(m, (x,))
        t1 = time.perf_counter()
        mod = from_exported_program(ep)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1, mod


def relax_build(mod: tvm.IRModule) -> tuple[float, float, Any]:
    """``tvm.compile`` with the default Relax pipeline, then the VM; returns (compile s,
    load s, VM).

    The VM's construction is timed as "load": its initialisation is where the llvm module's
    functions are first looked up (machine code generated), seconds for the unrolled LSTM.
    """
    from tvm import relax

    t0 = time.perf_counter()
    ex = tvm.compile(mod, target=target())
    t1 = time.perf_counter()
    vm = relax.VirtualMachine(ex, tvm.cpu())
    return t1 - t0, time.perf_counter() - t1, vm
