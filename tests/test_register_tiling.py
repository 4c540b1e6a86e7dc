"""meta_rules.RegisterTiling: register blocks for dense blocks, and only for them; correct
at 1024 steps."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from util import assert_close, assert_scans_kept, compile_func, outputs
from workloads import with_seq

import scan_tir
from meta_rules import RegisterTiling
from meta_rules.register_tiling import vector_lanes, vector_registers
from scan_tir.workloads import get

LANES = 4  # the test target's (conftest): llvm's generic x86-64, SSE2


def _context(func, space, target) -> ms.TuneContext:
    return ms.TuneContext(
        mod=tvm.IRModule({"main": func}), target=target, space_generator=space, task_name="t"
    )


def _rule_only(func, rule, target) -> list[s_tir.Schedule]:
    space = ms.space_generator.PostOrderApply(sch_rules=[rule], postprocs=[], mutator_probs={})
    return _context(func, space, target).generate_design_space()


def _loops(sch: s_tir.Schedule, name: str) -> list:
    return [sch.get(loop) for loop in sch.get_loops(sch.get_sblock(name))]


def test_dense_blocks_get_a_register_block(target):
    """The input GEMM and the recurrent product end in the register block: 2 vectors of
    columns (vectorised) under one unrolled row loop, 10 accumulators at most for the 16
    registers of this target; the reduction whole, just above the block."""
    func = get("lstm", **with_seq("lstm", 16, 8)).prim_func()  # hidden 4: Xi2h 16 wide
    (space,) = _rule_only(func, RegisterTiling(lanes=LANES), target)
    # (columns, rows): Xi2h 2 vectors x 4 of its 128 rows (tb), s_h2h 1 vector (4 wide)
    # x 4 of its 8 batch rows (b, which indexes h; not the gate axis, which indexes W).
    for name, width, rows in (("Xi2h", 8, 4), ("s_h2h", 4, 4)):
        loops = _loops(space, name)
        assert loops[-1].kind == tvm.tirx.ForKind.VECTORIZED, name
        assert (int(loops[-1].extent), int(loops[-2].extent)) == (width, rows), name
        assert loops[-2].kind == tvm.tirx.ForKind.UNROLLED, name
        reductions = [lp for lp in loops if lp.loop_var.name.startswith("k")]
        assert len(reductions) == 1 and reductions[0].same_as(loops[-3]), name
    # Elementwise blocks keep their loops; outside the scan, the input GEMM's bias is
    # computed per register block (4 x 8), under the GEMM's tile loops.
    assert all(lp.kind == tvm.tirx.ForKind.SERIAL for lp in _loops(space, "gates"))
    gemm, bias = _loops(space, "Xi2h"), _loops(space, "Xi2h_bias")
    assert [int(lp.extent) for lp in bias[-2:]] == [4, 8]
    assert len(bias) == len(gemm) - 1 and all(a.same_as(b) for a, b in zip(gemm, bias[:-2]))
    assert len(_loops(space, "s_h2h_bias")) == 3  # inside the step: FuseStepEpilogue's


def test_the_block_follows_the_register_file(target):
    """AVX-512's 32 registers: 10 rows x 2 vectors; 16 registers: 5 rows x 2 vectors."""
    func = get("lstm", seq=100, batch=1, input=32, hidden=32).prim_func()
    for registers, rows in ((32, 10), (16, 5)):
        (space,) = _rule_only(func, RegisterTiling(lanes=16, registers=registers), target)
        loops = _loops(space, "Xi2h")
        assert (int(loops[-1].extent), int(loops[-2].extent)) == (32, rows)


def test_rows_the_vector_does_not_divide_are_left_to_other_rules(target):
    """hidden 6: the recurrent product's output rows (6 wide) are no whole number of 4-lane
    vectors, so the rule leaves it; the input GEMM (24 wide) is still tiled."""
    func = get("lstm", seq=4, batch=2, input=5, hidden=6).prim_func()
    (space,) = _rule_only(func, RegisterTiling(lanes=LANES), target)
    assert _loops(space, "Xi2h")[-1].kind == tvm.tirx.ForKind.VECTORIZED
    assert all(lp.kind == tvm.tirx.ForKind.SERIAL for lp in _loops(space, "s_h2h"))


def test_lanes_come_from_the_target(target):
    assert vector_lanes(tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512"})) == 16
    assert vector_lanes(tvm.target.Target({"kind": "llvm", "mcpu": "haswell"})) == 8
    assert vector_lanes(target) == LANES  # LLVM's generic x86-64: SSE2
    assert vector_registers(tvm.target.Target({"kind": "llvm", "mcpu": "znver5"})) == 32
    assert vector_registers(target) == 16


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_register_tiled_candidates_are_correct_at_1024_steps(name, target):
    """Candidates of the scan space whose dense blocks the rule tiled, decisions sampled
    afresh and postprocs applied (parallel steps included), built and run at 1024 steps
    with 2 threads: outputs equal numpy's, scan invariants kept."""
    workload = get(name, **with_seq(name, 1024, 8))
    func = scan_tir.layout_free(workload.prim_func(), ["Wi", "Wh"])
    context = _context(func, scan_tir.scan_space(target), target)
    postprocs = context.space_generator.postprocs
    spaces = [
        space
        for space in context.generate_design_space()
        if any(inst.kind.name == "Vectorize" for inst in space.trace.insts)
    ]
    assert spaces, "no design space holds a register-tiled block"
    inputs = workload.input_arrays(seed=5)
    for seed, space in enumerate(spaces[:4]):
        sch = s_tir.Schedule(tvm.IRModule({"main": func}), seed=seed + 1)
        s_tir.Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
        assert all(postproc.apply(sch) for postproc in postprocs)
        scheduled = sch.mod["main"]
        assert_scans_kept(scheduled, func)
        got, ref = outputs(workload, compile_func(scheduled), inputs)
        assert np.abs(ref[0][-1]).max() > 1e-2
        assert_close(got, ref)
