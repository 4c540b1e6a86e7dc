"""Tuning: the target, the search space, builders and runners, progress, symbolic replay.

:func:`tune` tunes a zoo workload into a work dir (what ``scan-tir tune`` runs), one task
per function or (:func:`tune_per_scan`) one per scan, composed;
:func:`scan_space` is the space to pass to a plain ``ms.tune_tir``; :func:`specialize`
and :func:`apply_best` serve a function of symbolic length from a fixed-length tuning.
"""

from .measure import build_candidate, local_runner, parse_rpc, rpc_runner
from .per_scan import PerScanResult, compose, scan_tasks, tune_per_scan
from .progress import log
from .space import scan_space
from .symbolic import apply_best, size_vars, specialize
from .target import default_target
from .tuner import TuneResult, tune, tune_module

__all__ = [
    "PerScanResult",
    "TuneResult",
    "apply_best",
    "build_candidate",
    "compose",
    "default_target",
    "local_runner",
    "log",
    "parse_rpc",
    "rpc_runner",
    "scan_space",
    "scan_tasks",
    "size_vars",
    "specialize",
    "tune",
    "tune_module",
    "tune_per_scan",
]
