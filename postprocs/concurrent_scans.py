"""``RewriteConcurrentScans``: carry out a scan's concurrent decision.

A scan whose block says :data:`~scan_tir.lower.vocabulary.CONCURRENT` 1 (sampled by
``meta_rules.ConcurrentScans``) is grouped with the independent scans after it
(``concurrent_group``: none depends on another, and every root statement between them
can run before the first), and each scan of the group gets its lane on the unit loop the
converter put it in (:data:`~scan_tir.lower.vocabulary.LANE`: 0, 1, ...). A scan already
in a group, or one the schedule has made dependent since the rule sampled, keeps running
on its own: the candidate is kept, without marks. The build
(``scan_tir.transform.concurrent_lanes``) turns each group into one parallel loop with a
lane per scan. ``VerifyScanStructure`` checks the marks on every candidate
(``scan_violations``, through ``lane_groups``).

Touches: the annotations of the unit loops the converter puts scan blocks in (:data:`LANE`
only). Never a loop or block inside a scan.
"""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.postproc import Postproc, PyPostproc

from scan_tir.lower.vocabulary import (
    CONCURRENT,
    LANE,
    concurrent_group,
    group_problem,
    lane_groups,
    pipelines,
    root_scans,
    root_statements,
)


def mark_concurrent(sch: Schedule, func_name: str, first: int) -> str | None:
    """Mark the scan at root position ``first`` of ``func_name`` and the scans that can run
    with it as one group of lanes; None when done, else why not."""
    stmts = root_statements(sch.mod[func_name])
    group = concurrent_group(stmts, first)
    why = group_problem(stmts, group)
    if why:
        return why
    if any(LANE in stmts[i].annotations for i in group):
        return "a scan of the group is in another group already"
    pipelined = {i for p in pipelines(sch.mod[func_name])[0] for i in (p.first, p.second)}
    if pipelined & set(group):
        return "a scan of the group is pipelined with another"
    for lane, i in enumerate(group):
        block = sch.get_sblock(stmts[i].body.block.name_hint, func_name=func_name)
        sch.annotate(sch.get_loops(block)[0], LANE, lane)
    return None


def mark_all_concurrent(sch: Schedule, func_name: str = "main") -> list[str]:
    """Mark every group of independent scans of ``func_name`` to run side by side; why
    each scan that starts no group does not."""
    return [
        why
        for name, position, _ in root_scans(sch)
        if name == func_name and (why := mark_concurrent(sch, func_name, position))
    ]


def side_by_side(func: tirx.PrimFunc) -> tirx.PrimFunc | str:
    """``func`` (a scheduled function, e.g. a replayed record) with each group of
    independent scans marked to run side by side, or why it has none."""
    sch = Schedule(tvm.IRModule({"main": func}))
    reasons = mark_all_concurrent(sch)
    marked = sch.mod["main"]
    return marked if lane_groups(marked)[0] else "; ".join(reasons) or "no scans"


@derived_object
class RewriteConcurrentScans(PyPostproc):
    """Carry out the CONCURRENT decision on every scan block."""

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def apply(self, sch: Schedule) -> bool:
        decided = [
            (func_name, position, scan.name_hint, int(scan.annotations[CONCURRENT]))
            for func_name, position, scan in root_scans(sch)
            if CONCURRENT in scan.annotations
        ]
        for func_name, position, name, wanted in decided:
            sch.unannotate(sch.get_sblock(name, func_name=func_name), CONCURRENT)
            if wanted:
                mark_concurrent(sch, func_name, position)
        return True

    def clone(self) -> Postproc:
        return RewriteConcurrentScans()
