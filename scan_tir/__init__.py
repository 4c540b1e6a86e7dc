"""scan-tir: lower TE scans to S-TIR and tune them with MetaSchedule."""

from .convert import create_prim_func
from .errors import ScanLoweringError
from .invariants import scan_violations
from .layout_free import layout_free
from .space import scan_space
from .structure import SCAN, SCAN_INIT, SCAN_STEP, ScanNest, find_scans
from .symbolic import apply_best, size_vars, specialize
from .te_scan import scan

__all__ = [
    "apply_best",
    "SCAN",
    "SCAN_INIT",
    "SCAN_STEP",
    "ScanLoweringError",
    "ScanNest",
    "create_prim_func",
    "find_scans",
    "layout_free",
    "scan",
    "scan_space",
    "scan_violations",
    "size_vars",
    "specialize",
]
