"""``VerifyScanStructure``: reject any candidate that no longer computes the scan in order.

The legality check of the scan structure, in the spirit of Exo's per-primitive checks: the
rules promise not to touch a scan's time loop or to move work out of its steps, and this
postproc verifies the promise on every candidate before it is measured, against the
function the tuning started from (the invariants: scan_tir/lower/vocabulary/invariants.py).
"""

from __future__ import annotations

from tvm import tirx
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.postproc import Postproc, PyPostproc

from scan_tir.lower.vocabulary import Expected, expected_scans, scan_violations


@derived_object
class VerifyScanStructure(PyPostproc):
    """Reject a candidate whose scans are not those of the tuned function."""

    def __init__(self) -> None:
        super().__init__()
        self.expected: dict[str, list[Expected]] = {}

    def _initialize_with_tune_context(self, context) -> None:
        self.expected = expected_scans(context.mod)

    def apply(self, sch: Schedule) -> bool:
        for gv, func in sch.mod.functions.items():
            if isinstance(func, tirx.PrimFunc):
                if scan_violations(func, self.expected.get(gv.name_hint, [])):
                    return False
        return True

    def clone(self) -> Postproc:
        twin = VerifyScanStructure()
        twin.expected = dict(self.expected)
        return twin
