"""meta_rules: the scan rules build design spaces that tile the step and keep the scan."""

from __future__ import annotations

import gc

import pytest
import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.schedule_rule import ScheduleRule
from util import expected, loop_kinds
from workloads import gru, lstm

import scan_tir
from meta_rules import ConcurrentScans, PersistentStep, PipelinedScans, Scoped, scan_rules
from scan_tir.lower.vocabulary import STEP_PARALLEL, Role


def _spaces(func, rules, target):
    ctx = ms.TuneContext(
        mod=tvm.IRModule({"main": func}),
        target=target,
        space_generator=ms.space_generator.PostOrderApply(
            sch_rules=rules, postprocs=[], mutator_probs={}
        ),
        task_name="t",
    )
    return ctx.generate_design_space()


@pytest.mark.parametrize("workload", [lstm, gru], ids=["lstm", "gru"])
def test_design_spaces_tile_the_step_and_keep_the_scan(workload, target):
    func = scan_tir.layout_free(scan_tir.create_prim_func(workload(32, 8, 16)), ["Wi", "Wh"])
    dense = "s_h2h" if workload is lstm else "hw"
    spaces = _spaces(func, scan_rules(target), target)
    assert len(spaces) > 1
    tilings = set()
    for space in spaces:
        scheduled = space.mod["main"]
        assert scan_tir.scan_violations(scheduled, expected(func)) == []
        sch = s_tir.Schedule(scheduled)
        # The reduction inside the step was tiled, by MultiLevelTiling or by RegisterTiling
        # (whose register block ends in a vectorised loop)...
        block = sch.get_sblock(dense)
        if "meta_schedule.tiling_structure" in sch.get(block).annotations:
            tilings.add(str(sch.get(block).annotations["meta_schedule.tiling_structure"]))
        else:
            assert sch.get(sch.get_loops(block)[-1]).kind == tvm.tirx.ForKind.VECTORIZED
            tilings.add("register block")
        # ...the step carries its parallel decision, and the recurrent weight was given a
        # root-level copy for RewriteLayout to pack.
        (scan,) = scan_tir.find_scans(scheduled)
        assert STEP_PARALLEL in scan.step.annotations
        assert "Wh_global" in {str(r.source.name) for r in scan.block.reads}
    assert tilings == {"SSRSRS", "register block"}


def test_scoped_rule_never_sees_the_scan_structure(target):
    func = scan_tir.create_prim_func(lstm(16, 4, 4))
    (tiling,) = [r for r in ScheduleRule.create("llvm") if "MultiLevel" in type(r).__name__]
    rule = Scoped(tiling, {Role.OUTSIDE, Role.IN_STEP})
    rule._initialize_with_tune_context(ms.TuneContext(target=target))
    for name in ("lstm_scan", "lstm_scan_step", "lstm_scan_h_state_init"):
        sch = s_tir.Schedule(func)
        (out,) = rule.apply(sch, sch.get_sblock(name))
        tvm.ir.assert_structural_equal(out.mod["main"], func)
    sch = s_tir.Schedule(func)
    assert len(rule.apply(sch, sch.get_sblock("s_h2h"))) > 1  # inside the step: tiled


def _step_loop_kinds(func):
    (scan,) = scan_tir.find_scans(func)
    return set(loop_kinds(scan.step.body))


@pytest.mark.parametrize("space", ["stock", "scan"])
def test_only_the_scan_space_parallelises_and_vectorises_inside_steps(space, target):
    """Why the step rules exist: with the stock llvm rules and postprocs, the step's work
    is tiled but stays serial and scalar (parallel/vector loops are made only for the
    root's children)."""
    func = scan_tir.create_prim_func(lstm(16, 4, 64))
    generator = (
        scan_tir.scan_space(target) if space == "scan" else ms.space_generator.PostOrderApply()
    )
    ctx = ms.TuneContext(
        mod=tvm.IRModule({"main": func}), target=target, space_generator=generator, task_name="t"
    )
    kinds, raised = set(), []
    for design in ctx.generate_design_space():
        # Each design's trace replayed on a fresh schedule, as the search does: postprocs
        # applied to ``design.copy()`` of every space in turn raised from stale schedule
        # state (a different C++ check each time) on designs whose own replay was fine.
        sch = s_tir.Schedule(tvm.IRModule({"main": func}))
        design.trace.apply_to_schedule(sch, remove_postproc=True)
        sch.enter_postproc()
        try:
            if all(p.apply(sch) for p in ctx.space_generator.postprocs):
                kinds |= _step_loop_kinds(sch.mod["main"])
        except Exception as err:  # stock postprocs raise assorted errors on these designs
            raised.append(err)
    assert (tvm.tirx.ForKind.VECTORIZED in kinds) == (space == "scan")
    if space == "scan":
        assert raised == []


def test_rules_are_for_cpu_targets():
    with pytest.raises(ValueError, match="llvm"):
        scan_rules(tvm.target.Target({"kind": "cuda"}))


def test_space_holds_a_serial_and_a_parallel_root(target):
    """For small recurrences the fork/join around the scan costs more than the work: the
    stock rule always parallelises the root, the scan space also offers it serial."""
    func = scan_tir.create_prim_func(lstm(64, 16, 16))
    traces = [str(space.trace) for space in _spaces(func, scan_rules(target), target)]
    parallel = ['ann_key="meta_schedule.parallel", ann_val=32' in t for t in traces]
    assert any(parallel) and not all(parallel)


@pytest.mark.parametrize("rule", [ConcurrentScans, PersistentStep, PipelinedScans])
def test_multicore_rules_clone_through_their_handles(rule):
    """MetaSchedule clones a rule through its handle, after the Python object that made it
    may be gone (a clone that reached for it failed every tuning: notes.md)."""
    made = rule()
    made.num_cores = 2
    handle = ScheduleRule.clone(made)
    del made
    gc.collect()
    assert isinstance(ScheduleRule.clone(handle), ScheduleRule)
