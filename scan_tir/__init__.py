"""scan-tir: lower TE scans to S-TIR and tune them with MetaSchedule."""

from .convert import create_prim_func
from .errors import ScanLoweringError
from .structure import SCAN, SCAN_INIT, SCAN_STEP, ScanNest, find_scans
from .te_scan import scan

__all__ = [
    "SCAN",
    "SCAN_INIT",
    "SCAN_STEP",
    "ScanLoweringError",
    "ScanNest",
    "create_prim_func",
    "find_scans",
    "scan",
]
