"""``build``: a Relax VM executable from an imported module and its tuning database.

The second half of TVM's ``static_shape_tuning_pipeline`` (tvm/relax/pipeline.py), with
the symbolic kernels served by :func:`scan_tir.apply_best` and the weights packed once:

* static kernels take their best record (``MetaScheduleApplyDatabase``); a kernel with
  symbolic sizes takes the best record of its specialisation at the work dir's
  representative sizes, replayed with tiles that fit any size (``replay_sized``); a
  schedule that repacks a weight into less room than it holds is dropped (TVM's
  RewriteLayout can, see ``scan_tir.transform.layout_free``);
* MetaSchedule's RewriteLayout left each weight's repacking inside the kernel; it is split
  off (``SplitLayoutRewritePreproc``) and, the weights being constants of the module,
  evaluated at build time (``FoldConstant``), or lifted into ``main_transform_params``
  where the weights are parameters (``keep_params_as_input``; ``LiftTransformParams``);
* the same-layout copy of a packed weight that a scan kernel keeps is dropped
  (:func:`scan_tir.transform.prepacked.elide_param_copies`), as in the tuner's builder, so
  a call runs what was measured.

A kernel with no record (not tuned, or a budget that never reached it) is built as the
converter and TVM's legalisation wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import tvm
from tvm import relax, tirx
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target

from ..errors import ScanLoweringError
from ..transform.layout_free import lossy_repacks
from ..transform.pipeline import PIPELINE
from ..transform.prepacked import elide_param_copies
from ..tune.progress import log
from ..tune.symbolic import apply_best
from .tuning import checked_sizes, prepare, representatives, saved_sizes, workload_func


def build(
    mod: tvm.IRModule,
    target: Target,
    database: str | Path | ms.Database | None = None,
    *,
    sizes: Mapping[str, int] | None = None,
    prepack: bool = True,
) -> relax.VMExecutable:
    """``mod`` compiled for ``target`` with the schedules of ``database`` (a work dir of
    :func:`scan_tir.relax.tune`, or a database; None: untuned).

    ``sizes``: the representative sizes the symbolic kernels were tuned at; by default
    those :func:`~scan_tir.relax.tune` saved in the work dir. ``prepack=False`` leaves
    each weight's repacking inside its kernel, run at every call (MetaSchedule's own
    result; for comparison).
    """
    fused = prepare(mod, target)
    if database is not None:
        fused = scheduled(fused, target, database, sizes)
    return tvm.compile(
        prepacked_weights(fused) if prepack else fused, target=target, tir_pipeline=PIPELINE
    )


def scheduled(
    fused: tvm.IRModule,
    target: Target,
    database: str | Path | ms.Database,
    sizes: Mapping[str, int] | None = None,
) -> tvm.IRModule:
    """``fused`` (from :func:`~scan_tir.relax.tuning.prepare`) with every kernel that has a
    record in ``database`` scheduled."""
    if not isinstance(database, ms.Database):
        if sizes is None:
            sizes = saved_sizes(database)
        database = ms.database.JSONDatabase(work_dir=str(database))
    sizes = checked_sizes(fused, sizes)
    untuned = fused
    with target, database:
        fused = relax.transform.MetaScheduleApplyDatabase()(fused)
    updates = {}
    for gv, special in representatives(fused, sizes).items():
        representative = workload_func(special)
        workload = tvm.IRModule({"main": representative})
        if not database.has_workload(workload) or not database.get_top_k(
            database.commit_workload(workload), 1
        ):
            log(f"relax build: no record of kernel '{gv.name_hint}'; built untuned")
            continue
        try:
            tuned = apply_best(database, representative, fused[gv], target)
        except ScanLoweringError as err:
            log(f"relax build: kernel '{gv.name_hint}' built untuned: {err}")
            continue
        updates[gv] = tuned.with_attr("tirx.is_scheduled", True)
    for gv, func in updates.items():
        fused[gv] = func
    for gv, func in list(fused.functions.items()):
        lossy = lossy_repacks(func) if isinstance(func, tirx.PrimFunc) else []
        if lossy:  # a record of an older marking, or one RewriteLayout got wrong
            log(f"relax build: kernel '{gv.name_hint}' built untuned: its record repacks a "
                f"weight into less room ({'; '.join(lossy)})")
            fused[gv] = untuned[gv]
    return fused


def prepacked_weights(fused: tvm.IRModule) -> tvm.IRModule:
    """The weight repacking of every tuned kernel split off and run once (see the module
    docstring), and the kernels' same-layout copies of packed weights dropped."""
    mod = tvm.transform.Sequential(
        [
            relax.transform.SplitLayoutRewritePreproc(),
            relax.transform.LiftTransformParams(),
            relax.transform.FoldConstant(),
        ]
    )(fused)
    for gv, func in list(mod.functions.items()):
        if isinstance(func, tirx.PrimFunc):
            mod[gv] = elide_param_copies(func)
    return mod
