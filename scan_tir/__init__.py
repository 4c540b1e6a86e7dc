"""scan-tir: lower TE scans to S-TIR and tune them with MetaSchedule.

The package is layered, and data flows one way through it::

    lower/       TE -> S-TIR: the converter, its options (fast math among them), and the
                 S-TIR vocabulary (annotations, roles, loop kinds, invariants) that rules
                 and postprocs read
    transform/   passes on lowered or tuned functions: layout-free weights, prepacked
                 weights
    tune/        target, search space, builders and runners, progress, symbolic replay
    relax/       models through TVM's Relax frontends, each recurrence one scan kernel
    db/          tuning databases: summary, verification, provenance, plots
    workloads/   the zoo of recurrences and the experiments' configs
    experimental/  ideas kept with their tests, off the main path

The names below are loaded on first use, so that ``meta_rules`` and ``postprocs``, which
read ``scan_tir.lower.vocabulary``, import nothing of the converter.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module that defines it.
_EXPORTS = {
    "LoweringOptions": "scan_tir.lower.options",
    "ScanLoweringError": "scan_tir.errors",
    "create_prim_func": "scan_tir.lower.convert",
    "scan": "scan_tir.lower.te_scan",
    "SCAN": "scan_tir.lower.vocabulary",
    "SCAN_INIT": "scan_tir.lower.vocabulary",
    "SCAN_STEP": "scan_tir.lower.vocabulary",
    "ScanNest": "scan_tir.lower.vocabulary",
    "find_scans": "scan_tir.lower.vocabulary",
    "scan_violations": "scan_tir.lower.vocabulary",
    "fast_math": "scan_tir.lower.fast_math",
    "layout_free": "scan_tir.transform.layout_free",
    "elide_param_copies": "scan_tir.transform.prepacked",
    "prepacked": "scan_tir.transform.prepacked",
    "scan_space": "scan_tir.tune.space",
    "apply_best": "scan_tir.tune.symbolic",
    "size_vars": "scan_tir.tune.symbolic",
    "specialize": "scan_tir.tune.symbolic",
}
_SUBPACKAGES = ("db", "experimental", "lower", "relax", "transform", "tune", "workloads")

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if name not in _EXPORTS:
        raise AttributeError(f"module 'scan_tir' has no attribute '{name}'")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS, *_SUBPACKAGES])
