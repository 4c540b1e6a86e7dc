"""Steps tiled by their outputs, experimental (``scan_tir.experimental``): the converter's
``LoweringOptions(merge_updates=True)`` (scan_tir/lower/update_merge.py) and the rule
``TileStepOutputs`` (step_outputs.py); numerics at 1024 steps on 2 threads.

Every test here is marked ``experimental``: off the main path, kept with its tests, run in
the full suite. The functions are lowered as the configs named ``-MERGED`` are, merged updates
and nothing else (``MERGED``), against the same without them (``PLAIN``): with the state copies
in the step (the default), the copies are the step's last loop nests, and the rule does not
tile those (test_copies_in_the_step_keep_the_step_untiled)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import tvm
import tvm_ffi
from tuning import tune_and_replay
from tvm import s_tir, tirx
from tvm.s_tir import meta_schedule as ms
from util import (
    assert_close,
    assert_scans_kept,
    block_names,
    compile_func,
    outputs,
    untagged,
)
from workloads import SMALL, check_long_sequence, with_seq

import scan_tir
from scan_tir import LoweringOptions
from scan_tir.experimental.step_outputs import TileStepOutputs
from scan_tir.lower.vocabulary import step_blocks
from scan_tir.workloads import get

pytestmark = pytest.mark.experimental

PLAIN = LoweringOptions.legacy()
MERGED = replace(PLAIN, merge_updates=True)


def _loop_nests(body: tirx.Stmt) -> list[tirx.Stmt]:
    """The statements directly under a step block: one per loop nest."""
    return list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]


def _names_under(stmt: tirx.Stmt) -> set[str]:
    return set(block_names(stmt))


def _steps(func: tirx.PrimFunc) -> list[s_tir.SBlock]:
    return [scan.step for scan in scan_tir.find_scans(func)]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_merged_updates_match_numpy_at_1024_steps(name):
    """Every recurrence of the zoo, lowered with merge_updates: same outputs as numpy."""
    check_long_sequence(name, seed=5, options=MERGED)


def test_lstm_updates_share_one_nest_and_keep_their_names():
    func = get("lstm", MERGED, **SMALL["lstm"]).prim_func()
    (step,) = _steps(func)
    last = _loop_nests(step.body)[-1]
    assert _names_under(last) == {"next_c", "next_h"}
    plain = get("lstm", PLAIN, **SMALL["lstm"]).prim_func()
    (plain_step,) = _steps(plain)
    assert [_names_under(n) for n in _loop_nests(plain_step.body)[-2:]] == [
        {"next_c"},
        {"next_h"},
    ]
    assert _names_under(step) == _names_under(plain_step)


def test_stacked_layers_merge_per_layer_not_across():
    """Layer 2's update reaches layer 1's h through its recurrent product: merging the four
    updates into one nest would compute layer 1's h and layer 2's input in one loop."""
    func = get("lstm_stacked", MERGED, **SMALL["lstm_stacked"]).prim_func()
    merged = []
    for step in _steps(func):
        for nest in _loop_nests(step.body):
            names = _names_under(nest)
            if len(names) > 1:
                merged.append(sorted(n.split("_")[1] for n in names))
    assert merged and all(pair == ["c", "h"] for pair in merged), merged


def test_single_state_recurrences_are_unchanged():
    for name in ("gru", "rnn_tanh", "mingru", "selective_scan"):
        workload = get(name, **SMALL[name])
        plain, merged = workload.prim_func(PLAIN), workload.prim_func(MERGED)
        # The tags differ (they record the options); the functions must not.
        assert not tvm_ffi.structural_equal(plain, merged), name
        assert tvm_ffi.structural_equal(untagged(plain), untagged(merged)), name


def _tile_step(func: tirx.PrimFunc) -> list[s_tir.Schedule]:
    sch = s_tir.Schedule(tvm.IRModule({"main": func}), seed=1)
    ((step, _),) = step_blocks(sch)
    last = list(sch.get_child_blocks(step))[-1]
    return TileStepOutputs().apply(sch, last)


def test_rule_puts_the_whole_step_under_one_nest():
    workload = get("lstm", MERGED, **with_seq("lstm", 1024, 2))
    func = workload.prim_func()
    tiled, untouched = _tile_step(func)
    assert tvm_ffi.structural_equal(untouched.mod["main"], func)
    scheduled = tiled.mod["main"]
    (step,) = _steps(scheduled)
    assert len(_loop_nests(step.body)) == 1, "one loop nest: one fork/join per step"
    assert_scans_kept(scheduled, func)
    inputs = workload.input_arrays(seed=6)
    got, ref = outputs(workload, compile_func(scheduled), inputs)
    assert_close(got, ref)


def test_rule_leaves_other_blocks_and_two_nest_steps_alone():
    workload = get("lstm", **SMALL["lstm"])
    sch = s_tir.Schedule(tvm.IRModule({"main": workload.prim_func(MERGED)}))
    rule = TileStepOutputs()
    for name in ("Xi2h", "lstm_scan_step", "s_h2h", "gates"):  # outside, structure, inner
        assert rule.apply(sch, sch.get_sblock(name)) == [sch]
    # Unmerged, the last nest (next_h) cannot take next_c, an output block of the step, so
    # its producers cannot follow: at most o_gate moves, and the step keeps several nests.
    tiled = _tile_step(workload.prim_func(PLAIN))
    for candidate in tiled:
        (step,) = _steps(candidate.mod["main"])
        assert len(_loop_nests(step.body)) > 1


def test_copies_in_the_step_keep_the_step_untiled():
    """A known limit: merged updates with the default options, state copies in the step.
    The copies (topi's hidden_states, cell_states) are nests of their own after the merged
    updates, so the last nest does not hold every consumer of the products, and the rule
    offers only the step as it was. When this fails, the rule tiles such steps: update the
    module docstring and test the tiled candidates' numerics."""
    workload = get("lstm", replace(LoweringOptions(), merge_updates=True), **SMALL["lstm"])
    func = workload.prim_func()
    (step,) = _steps(func)
    assert _names_under(_loop_nests(step.body)[-1]) == {"cell_states"}
    (untouched,) = _tile_step(func)
    assert tvm_ffi.structural_equal(untouched.mod["main"], func)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lstm", "lstm_stacked"])
def test_tuned_merged_records_replay_correct(name, builder, target, tmp_path):
    """scan_space on merged updates, a few trials: at least one design space holds a step
    of one nest, and every record replays correctly at 1024 steps."""
    workload = get(name, MERGED, **with_seq(name, 1024, 2))
    func = workload.prim_func()
    mod = tvm.IRModule({"main": func})
    space = scan_tir.scan_space(target, step_rules=[TileStepOutputs()])
    ctx = ms.TuneContext(mod=mod, target=target, space_generator=space, task_name="t")
    spaces = ctx.generate_design_space()
    nests = [min(len(_loop_nests(s.body)) for s in _steps(sp.mod["main"])) for sp in spaces]
    assert 1 in nests and max(nests) > 1, nests  # tiled by outputs, and as it was
    # Known limit (scan_tir/experimental/step_outputs.py): MultiLevelTiling leaves the moved product
    # untiled, and so does RegisterTiling (both need each iterator bound to one loop). When
    # this fails, one of them tiles it, and the rule's candidates should be re-timed.
    for design in spaces:
        sch = s_tir.Schedule(design.mod["main"])
        first = len(_loop_nests(_steps(design.mod["main"])[0].body))  # its product: "s_h2h"
        product = sch.get_sblock("s_h2h")
        tiled = "meta_schedule.tiling_structure" in sch.get(product).annotations or (
            sch.get(sch.get_loops(product)[-1]).kind == tvm.tirx.ForKind.VECTORIZED
        )
        assert tiled == (first > 1), (first, tiled)
    tune_and_replay(workload, func, space, builder, tmp_path, target)
