"""The converter: a TE graph with ``te.scan`` ops -> one S-TIR PrimFunc.

``convert.create_prim_func`` is the entry point (``scan_tir.create_prim_func``);
``options.LoweringOptions`` the choices it makes; ``vocabulary`` what the lowered function
looks like to everything downstream. The other modules are its passes: ``graph`` (scan
bodies and their checks), ``scan_lowering`` (one scan's nest), ``step_copies`` (state
copies made inside the step), ``te_rewrite`` (TE expression rewriting), ``te_scan`` (the
checked ``scan``), ``fast_math`` (vectorisable activations, a pass on the lowered function).
Before it, by choice: ``linear_scans`` (which scans are linear recurrences) and
``chunked_scans`` (those scans rewritten in TE to run in parallel over chunks of time).

The names below are loaded on first use, as in ``scan_tir``: ``meta_rules`` and
``postprocs`` read ``vocabulary`` and must import nothing of the converter.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module that defines it.
_EXPORTS = {
    "chunk_marked": "scan_tir.lower.chunked_scans",
    "chunked": "scan_tir.lower.chunked_scans",
    "linear_form": "scan_tir.lower.linear_scans",
    "linear_problem": "scan_tir.lower.linear_scans",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'scan_tir.lower' has no attribute '{name}'")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
