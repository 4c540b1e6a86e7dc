"""The S-TIR vocabulary of scans: annotations, block roles, loop kinds, invariants.

Everything downstream of the converter (schedule rules, postprocessors, tuning, database
tools) finds a scan through what this package defines, never by guessing from loop shapes:
the converter writes the annotations, :func:`find_scans` reads them, :func:`block_role`
says which blocks a rule may touch, :func:`free_loops` which loops it may parallelise,
and :func:`scan_violations` checks that a schedule kept every scan intact. It imports
nothing else from the project, so ``meta_rules`` and ``postprocs`` depend on it alone.

- ``scans``: the annotations, finding scans, block roles, loop kinds;
- ``independence``: which root statements may run before or beside which (concurrent
  groups of scans, their ``LANE`` marks);
- ``pipelining``: a scan run a chunk behind the scan that feeds it (``PIPELINE`` marks),
  and the check that the wavefront computes what program order does;
- ``regions``: what a piece of a nest reads and writes, and whether two pieces may trade
  places (the checks of pipelining and of merged nests);
- ``invariants``: what every schedule must keep (``scan_violations``).
"""

from .independence import (
    concurrent_group,
    group_problem,
    is_scan_statement,
    lane_groups,
    may_precede,
    root_scans,
    root_statements,
    touched,
    with_root_statements,
)
from .invariants import Expected, expected_scans, scan_violations
from .pipelining import (
    PIPELINE,
    PIPELINED,
    Pipeline,
    feeding_scan,
    pipeline_problem,
    pipelines,
    plan_pipeline,
    split_between,
    time_loop,
)
from .regions import merge_problem
from .scans import (
    CONCURRENT,
    DATA_PAR,
    LANE,
    ORDERED,
    PERSISTENT,
    SCAN,
    SCAN_INIT,
    SCAN_STEP,
    STEP_PARALLEL,
    STEP_PERSISTENT,
    STEP_UNROLL,
    STEP_VECTORIZE,
    Role,
    ScanNest,
    block_realize,
    block_role,
    find_scans,
    free_loops,
    is_parallel_loop,
    mentions,
    nested_prefix,
    rebuilt,
    step_blocks,
    step_nests,
)

__all__ = [
    "CONCURRENT",
    "DATA_PAR",
    "LANE",
    "ORDERED",
    "PERSISTENT",
    "PIPELINE",
    "PIPELINED",
    "SCAN",
    "SCAN_INIT",
    "SCAN_STEP",
    "STEP_PARALLEL",
    "STEP_PERSISTENT",
    "STEP_UNROLL",
    "STEP_VECTORIZE",
    "Expected",
    "Pipeline",
    "Role",
    "ScanNest",
    "block_realize",
    "block_role",
    "concurrent_group",
    "expected_scans",
    "feeding_scan",
    "find_scans",
    "free_loops",
    "group_problem",
    "is_parallel_loop",
    "is_scan_statement",
    "lane_groups",
    "may_precede",
    "mentions",
    "merge_problem",
    "nested_prefix",
    "pipeline_problem",
    "pipelines",
    "plan_pipeline",
    "rebuilt",
    "root_scans",
    "root_statements",
    "scan_violations",
    "split_between",
    "step_blocks",
    "step_nests",
    "time_loop",
    "touched",
    "with_root_statements",
]
