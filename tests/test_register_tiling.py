"""meta_rules.RegisterTiling: register blocks for dense blocks, and only for them; correct
at 1024 steps."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from test_workloads import _assert_close, _outputs, _with_seq
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from util import compile_func

import scan_tir
from meta_rules import RegisterTiling
from scan_tir.invariants import expected_scans
from scan_tir.structure import DATA_PAR
from scan_tir.workloads import get

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})
LANES = 4


def _context(func, space) -> ms.TuneContext:
    return ms.TuneContext(
        mod=tvm.IRModule({"main": func}), target=TARGET, space_generator=space, task_name="t"
    )


def _rule_only(func, rule) -> list[s_tir.Schedule]:
    space = ms.space_generator.PostOrderApply(sch_rules=[rule], postprocs=[], mutator_probs={})
    return _context(func, space).generate_design_space()


def _loops(sch: s_tir.Schedule, name: str) -> list:
    return [sch.get(loop) for loop in sch.get_loops(sch.get_sblock(name))]


def test_dense_blocks_get_a_register_block():
    """The input GEMM and the recurrent product: columns vectorised innermost (whole
    vectors, at most 4 of them), rows unrolled just above, reductions above the block."""
    func = get("lstm", **_with_seq("lstm", 16, 8)).prim_func()
    (space,) = _rule_only(func, RegisterTiling(lanes=LANES))
    for name in ("Xi2h", "s_h2h"):
        loops = _loops(space, name)
        inner = loops[-1]
        assert inner.kind == tvm.tirx.ForKind.VECTORIZED, name
        width = int(inner.extent)
        assert width % LANES == 0 and width <= 2 * LANES, (name, width)
        block = space.get(space.get_sblock(name))
        rows = len([iv for iv in block.iter_vars if iv.iter_type == DATA_PAR]) - 1
        assert all(lp.kind == tvm.tirx.ForKind.UNROLLED for lp in loops[-1 - rows : -1]), name
    # Elementwise blocks keep their loops.
    assert all(lp.kind == tvm.tirx.ForKind.SERIAL for lp in _loops(space, "gates"))


def test_rows_the_vector_does_not_divide_are_left_to_other_rules():
    """hidden 6: the recurrent product's output rows (6 wide) are no whole number of 4-lane
    vectors, so the rule leaves it; the input GEMM (24 wide) is still tiled."""
    func = get("lstm", seq=4, batch=2, input=5, hidden=6).prim_func()
    (space,) = _rule_only(func, RegisterTiling(lanes=LANES))
    assert _loops(space, "Xi2h")[-1].kind == tvm.tirx.ForKind.VECTORIZED
    assert all(lp.kind == tvm.tirx.ForKind.SERIAL for lp in _loops(space, "s_h2h"))


def test_lanes_come_from_the_target():
    from meta_rules.register_tiling import vector_lanes

    assert vector_lanes(tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512"})) == 16
    assert vector_lanes(tvm.target.Target({"kind": "llvm", "mcpu": "haswell"})) == 8
    assert vector_lanes(TARGET) == 4  # LLVM's generic x86-64: SSE2


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_register_tiled_candidates_are_correct_at_1024_steps(name):
    """Candidates of the scan space whose dense blocks the rule tiled, decisions sampled
    afresh and postprocs applied (parallel steps included), built and run at 1024 steps
    with 2 threads: outputs equal numpy's, scan invariants kept."""
    workload = get(name, **_with_seq(name, 1024, 8))
    func = scan_tir.layout_free(workload.prim_func(), ["Wi", "Wh"])
    context = _context(func, scan_tir.scan_space(TARGET))
    postprocs = context.space_generator.postprocs
    spaces = [
        space
        for space in context.generate_design_space()
        if any(inst.kind.name == "Vectorize" for inst in space.trace.insts)
    ]
    assert spaces, "no design space holds a register-tiled block"
    expected = expected_scans(tvm.IRModule({"main": func}))["main"]
    inputs = workload.input_arrays(seed=5)
    for seed, space in enumerate(spaces[:4]):
        sch = s_tir.Schedule(tvm.IRModule({"main": func}), seed=seed + 1)
        s_tir.Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
        assert all(postproc.apply(sch) for postproc in postprocs)
        scheduled = sch.mod["main"]
        assert scan_tir.scan_violations(scheduled, expected) == []
        got, ref = _outputs(workload, compile_func(scheduled), inputs)
        assert np.abs(ref[0][-1]).max() > 1e-2
        _assert_close(got, ref)
