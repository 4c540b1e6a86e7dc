"""scan-tir: lower TE scans to S-TIR and tune them with MetaSchedule."""

from .convert import create_prim_func
from .errors import ScanLoweringError
from .fast_math import fast_math
from .invariants import scan_violations
from .layout_free import layout_free
from .prepacked import elide_param_copies, prepacked
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
    "elide_param_copies",
    "fast_math",
    "find_scans",
    "layout_free",
    "prepacked",
    "scan",
    "scan_space",
    "scan_violations",
    "size_vars",
    "specialize",
]
