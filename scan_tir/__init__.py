"""scan-tir: lower TE scans to S-TIR and tune them with MetaSchedule."""

from .convert import create_prim_func
from .errors import ScanLoweringError
from .structure import SCAN_INIT, SCAN_STEP, ScanStep, find_scan_steps
from .te_scan import scan

__all__ = [
    "SCAN_INIT",
    "SCAN_STEP",
    "ScanLoweringError",
    "ScanStep",
    "create_prim_func",
    "find_scan_steps",
    "scan",
]
