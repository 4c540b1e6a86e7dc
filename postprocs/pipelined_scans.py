"""``RewritePipelinedScans``: carry out a scan's pipelined decision.

A scan block that says :data:`~scan_tir.lower.vocabulary.PIPELINED` d > 0 (sampled by
``meta_rules.PipelinedScans``) is to run a chunk of steps behind the scan that feeds it,
each on its own core. A chunk of each projection nest between the two scans is a range of
the nest's outermost loop (``scan_tir.lower.vocabulary``), so the loops over time (those
that drive only the rows of what the nest writes) are first moved to the top of the
loops nested alone at the head of the nest, and fused into one. Then the pipeline with
the most chunks, at most d, that the check passes is marked on the scan's unit loop
(:data:`~scan_tir.lower.vocabulary.PIPELINE`). All of it is tried on a copy first: where
no pipeline passes (a nest whose head has no loop over time, a length no number of
chunks divides), the candidate is kept as it was, without the mark. It runs before
MetaSchedule's RewriteParallelVectorizeUnroll, which may fuse the head further (a range
of the fused loop is still a range of time); the build checks the pipeline again on the
function as it is built (``PipelinedScans``), so a later postproc can cost a candidate
its pipeline, never its result.

Touches: the loops nested alone at the head of the root statements between a pipelined
scan and the scan before it (reordered, fused), and the annotations of the scan's unit
loop (:data:`PIPELINE` only). Never a loop or block inside a scan.
"""

from __future__ import annotations

import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.postproc import Postproc, PyPostproc

from scan_tir.lower.vocabulary import (
    PIPELINE,
    PIPELINED,
    Pipeline,
    feeding_scan,
    mentions,
    plan_pipeline,
    root_scans,
    root_statements,
    split_between,
)


def _head(nest: tirx.For) -> list[tirx.For]:
    """The loops nested alone at the head of ``nest``, outermost first."""
    chain = [nest]
    while isinstance(chain[-1].body, tirx.For):
        chain.append(chain[-1].body)
    return chain


def _over_time(loop: tirx.For, realizes: list[s_tir.SBlockRealize]) -> bool:
    """Does ``loop`` drive only the first iterator (the rows) of every block under it?"""
    var = loop.loop_var
    return all(
        mentions(r.iter_values[0], var)
        and not any(mentions(v, var) for v in r.iter_values[1:])
        for r in realizes
    )


def _lead_with_time(sch: Schedule, func_name: str, nest: tirx.For) -> None:
    """Reorder and fuse the head of ``nest`` so that one loop over time leads it."""
    realizes: list[s_tir.SBlockRealize] = []
    tvm_ffi.structural_walk(nest, (s_tir.SBlockRealize, realizes.append))
    head = _head(nest)
    timed = [k for k, loop in enumerate(head) if _over_time(loop, realizes)]
    if not timed:
        return
    block = sch.get_sblock(realizes[0].block.name_hint, func_name=func_name)
    loops = sch.get_loops(block)[: len(head)]
    order = timed + [k for k in range(len(head)) if k not in timed]
    if order != list(range(len(head))):
        sch.reorder(*[loops[k] for k in order])
    if len(timed) > 1:
        sch.fuse(*[loops[k] for k in timed])


def pipeline(sch: Schedule, func_name: str, position: int, most: int) -> Pipeline | str:
    """Make the scan at root ``position`` of ``func_name`` run a chunk behind the scan
    that feeds it, in at most ``most`` chunks (as this module says); or why it cannot,
    with ``sch`` unchanged."""
    stmts = root_statements(sch.mod[func_name])
    first = feeding_scan(stmts, position)
    if first is None:
        return "it does not depend on the scan before it"
    if PIPELINE in stmts[first].annotations:
        return "the scan that feeds it is pipelined with its own feeding scan already"
    trial = sch.copy()
    feeds, _ = split_between(stmts, first, position)
    try:
        for i in feeds:
            if isinstance(stmts[i], tirx.For):
                _lead_with_time(trial, func_name, stmts[i])
    except (s_tir.ScheduleError, ValueError) as err:
        return f"the projection's loops over time cannot lead: {str(err).splitlines()[0]}"
    plan = plan_pipeline(trial.mod[func_name], position, most)
    if isinstance(plan, str):
        return plan
    for i in feeds:
        if isinstance(stmts[i], tirx.For):
            _lead_with_time(sch, func_name, stmts[i])
    scan = stmts[position].body.block
    sch.annotate(sch.get_loops(sch.get_sblock(scan.name_hint, func_name=func_name))[0],
                 PIPELINE, plan.chunks)
    return plan


def mark_all_pipelined(sch: Schedule, most: int, func_name: str = "main") -> list[str]:
    """Pipeline every scan of ``func_name`` with the scan that feeds it where the schedule
    allows, in at most ``most`` chunks; what was done or why not, per scan."""
    said = []
    for name, position, scan in root_scans(sch):
        if name == func_name and position > 0:
            plan = pipeline(sch, func_name, position, most)
            done = plan if isinstance(plan, str) else f"{plan.chunks} chunks of {plan.steps} steps"
            said.append(f"{scan.name_hint}: {done}")
    return said


@derived_object
class RewritePipelinedScans(PyPostproc):
    """Carry out the PIPELINED decision on every scan block."""

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def apply(self, sch: Schedule) -> bool:
        decided = [
            (func_name, position, scan.name_hint, int(scan.annotations[PIPELINED]))
            for func_name, position, scan in root_scans(sch)
            if PIPELINED in scan.annotations
        ]
        for func_name, position, name, most in decided:
            sch.unannotate(sch.get_sblock(name, func_name=func_name), PIPELINED)
            if most:
                pipeline(sch, func_name, position, most)
        return True

    def clone(self) -> Postproc:
        return RewritePipelinedScans()
