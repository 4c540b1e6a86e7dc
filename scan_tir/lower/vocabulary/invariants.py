"""The scan invariants: what every schedule of a function with scans must keep."""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import s_tir, tirx

from .independence import lane_groups
from .scans import ORDERED, PERSISTENT, ScanNest, find_scans, is_parallel_loop, step_nests

# What every schedule of a function with scans must keep. Against the function before
# scheduling, each scan must still have:
#
# - its time loop: serial, no thread binding, no annotation but ``PERSISTENT``, from 0
#   over the whole range
#   (not split, not fused, not reordered), directly binding the step block;
# - its step block, with its ordered iterator bound to exactly that loop's variable;
# - if persistent, a step whose every nest is a parallel loop (the build puts a barrier
#   after each, so a serial nest would run on every thread and be followed by none);
# - every block that was inside the step, unless scheduled away (inlined), still inside it;
# - if marked to run concurrently with other scans (``LANE``), no dependence on them
#   or on what lies between them (``independence.group_problem``);
# - and the whole function well-formed S-TIR: a primitive that mis-derives a block's
#   regions (TVM 0.27's compute_inline across a step, meta_rules/step_inputs.py) yields a
#   function that ``tvm.compile`` still builds, so nothing else would stop it being measured.
#
# (A scan marked to run a chunk behind the scan that feeds it breaks nothing: the build
# pipelines it only where ``pipelining`` proves the wavefront right, else it runs in
# program order.)
#
# The postproc ``postprocs.VerifyScanStructure`` rejects tuning candidates that break them;
# the tests, ``apply_best`` and ``scan-tir db verify`` check replayed schedules with the
# same code.


@dataclass(frozen=True)
class Expected:
    extent: tirx.Expr
    inner: frozenset[str]


def _block_names(stmt: tirx.Stmt) -> set[str]:
    names: set[str] = set()
    tvm_ffi.structural_walk(stmt, (s_tir.SBlock, lambda b: names.add(str(b.name_hint))))
    return names


def expected_scans(mod) -> dict[str, list[Expected]]:
    """What :func:`scan_violations` checks a candidate against, read off the original."""
    expected: dict[str, list[Expected]] = {}
    for gv, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            expected[gv.name_hint] = [
                Expected(s.step.iter_vars[0].dom.extent, frozenset(_block_names(s.step.body)))
                for s in find_scans(func)
            ]
    return expected


def _loop_violation(scan: ScanNest, want: Expected) -> str | None:
    loop, step = scan.loop, scan.step
    if loop.kind != tirx.ForKind.SERIAL or loop.thread_binding is not None:
        return f"time loop of scan '{scan.name}' is {loop.kind}, not serial"
    if set(loop.annotations) - {PERSISTENT}:
        return f"time loop of scan '{scan.name}' is annotated {dict(loop.annotations)}"
    if not (isinstance(loop.min, tirx.IntImm) and int(loop.min) == 0):
        return f"time loop of scan '{scan.name}' starts at {loop.min}"
    if not tvm_ffi.structural_equal(loop.extent, want.extent):
        return f"time loop of scan '{scan.name}' runs {loop.extent} steps, not {want.extent}"
    if PERSISTENT in loop.annotations:
        serial = [i for i, n in enumerate(step_nests(step)) if not is_parallel_loop(n)]
        if serial:
            return (
                f"persistent scan '{scan.name}': nests {serial} of its step are not parallel "
                "loops, so no barrier would follow them"
            )
    (iv,) = step.iter_vars
    realize = loop.body
    if iv.iter_type != ORDERED or not realize.iter_values[0].same_as(loop.loop_var):
        return f"step block of scan '{scan.name}' is no longer bound to its time loop in order"
    return None


def scan_violations(func: tirx.PrimFunc, expected: list[Expected]) -> list[str]:
    """Why ``func`` breaks the scans it should hold (empty: it keeps them all)."""
    scans = find_scans(func)
    if len(scans) != len(expected):
        return [f"{len(scans)} scan time loops found, {len(expected)} expected"]
    problems = []
    if not s_tir.analysis.verify_well_formed(func, assert_mode=False):
        problems.append("not well-formed S-TIR (s_tir.analysis.verify_well_formed)")
    everywhere = _block_names(func.body)
    for scan, want in zip(scans, expected):
        problem = _loop_violation(scan, want)
        if problem:
            problems.append(problem)
        left = (want.inner & everywhere) - _block_names(scan.step.body)
        if left:
            problems.append(f"blocks {sorted(left)} left the step of scan '{scan.name}'")
    problems += [f"concurrent scans: {why}" for why in lane_groups(func)[1]]
    return problems

