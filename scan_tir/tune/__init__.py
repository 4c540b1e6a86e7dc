"""Tuning: the target, the search space, builders and runners, progress, symbolic replay.

:func:`tune` tunes a zoo workload into a work dir (what ``scan-tir tune`` runs), one task
per function or (:func:`tune_per_scan`) one per scan, composed;
:func:`scan_space` is the space to pass to a plain ``ms.tune_tir`` (and
:func:`evolutionary_search` its search strategy); :func:`specialize`
and :func:`apply_best` serve a function of symbolic length from a fixed-length tuning;
:func:`dispatch` joins several schedules of one function into one that picks by shape
(with :func:`nearest_instance`, the schedule of the size instance a shape rounds up to),
and :func:`dynamic` tunes for a grid of size instances and returns such a function;
:func:`tune_forms` tunes a linear recurrence in each of its forms (:func:`linear_forms`:
sequential, chunked) and keeps the fastest.
"""

from .dispatch import dispatch, dispatch_target, nearest_instance
from .dynamic_shapes import Dynamic, dynamic
from .linear_forms import FormsResult, linear_forms, tune_forms
from .measure import build_candidate, local_runner, parse_rpc, rpc_runner
from .per_scan import PerScanResult, compose, scan_tasks, tune_per_scan
from .pooled_builder import PooledBuilder
from .progress import log
from .search import evolutionary_search
from .space import scan_space
from .symbolic import apply_best, size_vars, specialize
from .target import default_target
from .tuner import TuneResult, tune, tune_module

__all__ = [
    "Dynamic",
    "FormsResult",
    "PerScanResult",
    "PooledBuilder",
    "TuneResult",
    "apply_best",
    "build_candidate",
    "compose",
    "default_target",
    "dispatch",
    "dispatch_target",
    "dynamic",
    "evolutionary_search",
    "local_runner",
    "linear_forms",
    "log",
    "nearest_instance",
    "parse_rpc",
    "rpc_runner",
    "scan_space",
    "scan_tasks",
    "size_vars",
    "specialize",
    "tune",
    "tune_forms",
    "tune_module",
    "tune_per_scan",
]
