"""The workload zoo: recurrences people use, each with its numpy (and PyTorch) reference.

``get("lstm", seq=80)`` returns a :class:`Workload`; ``CONFIGS`` names the sizes the
experiments use; :func:`workload_of` recovers the workload from a lowered function (or a
tuning database's entry for it).
"""

from __future__ import annotations

import json
from functools import cache

import tvm_ffi
from tvm import tirx

from ..errors import ScanLoweringError
from .base import WORKLOAD_ATTR, Recurrence, Workload
from .bidirectional_lstm import BILSTM
from .elman import RNN_RELU, RNN_TANH
from .gru import GRU
from .lstm import LSTM
from .mingru import MINGRU
from .selective_scan import SELECTIVE_SCAN
from .stacked_lstm import LSTM_STACKED

RECURRENCES: dict[str, Recurrence] = {
    r.name: r for r in (LSTM, GRU, RNN_TANH, RNN_RELU, LSTM_STACKED, BILSTM, SELECTIVE_SCAN, MINGRU)
}

# The experiments' configs (issues 3 and 4): name -> (recurrence, sizes).
CONFIGS: dict[str, tuple[str, dict[str, int]]] = {
    "A": ("lstm", {"seq": 80, "batch": 1, "input": 512, "hidden": 256}),
    "B": ("lstm", {"seq": 256, "batch": 1, "input": 16, "hidden": 16}),
    "C": ("lstm", {"seq": 100, "batch": 1, "input": 1024, "hidden": 1024}),
    "D": ("lstm", {"seq": 50, "batch": 64, "input": 512, "hidden": 512}),
    "E": ("gru", {"seq": 80, "batch": 1, "input": 512, "hidden": 256}),
    "A2": ("lstm_stacked", {"seq": 80, "batch": 1, "input": 512, "hidden": 256, "layers": 2}),
    "Abi": ("bilstm", {"seq": 80, "batch": 1, "input": 512, "hidden": 256}),
    "S": ("selective_scan", {"seq": 1024, "batch": 1, "d_model": 768, "d_state": 16}),
    "M": ("mingru", {"seq": 1024, "batch": 1, "input": 768, "hidden": 768}),
}


def get(name: str, **sizes: int) -> Workload:
    """The recurrence ``name`` at ``sizes``, or the experiments' config ``name`` ("A")."""
    if name in CONFIGS and not sizes:
        name, sizes = CONFIGS[name]
    if name not in RECURRENCES:
        raise ScanLoweringError(
            f"unknown workload '{name}'; known: {sorted(RECURRENCES)} and configs "
            f"{sorted(CONFIGS)}."
        )
    return RECURRENCES[name](**sizes)


@cache
def _untagged_configs() -> tuple[tuple[tirx.PrimFunc, str], ...]:
    return tuple((get(c).prim_func(tag=False), c) for c in CONFIGS)


def workload_of(func: tirx.PrimFunc) -> Workload | None:
    """The workload a function was lowered from, or None for one the zoo did not make.

    Read from its ``scan_tir.workload`` attribute; a function without one (databases made
    before the tag, such as experiments/results/A) is matched structurally against the
    experiments' configs.
    """
    attrs = func.attrs
    if attrs is not None and WORKLOAD_ATTR in attrs:
        spec = json.loads(str(attrs[WORKLOAD_ATTR]))
        return get(spec["name"], **spec["sizes"])
    for known, config in _untagged_configs():
        if tvm_ffi.structural_equal(func, known):
            return get(config)
    return None


__all__ = ["CONFIGS", "RECURRENCES", "Recurrence", "Workload", "get", "workload_of"]
