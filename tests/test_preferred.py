"""meta_rules.Preferred with RegisterTiling: the register block alone on matrix-matrix
products, both tilings on matrix-vector ones."""

from __future__ import annotations

import pytest
import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.schedule_rule import MultiLevelTiling

from meta_rules import Alternatives, Preferred, RegisterTiling
from scan_tir.workloads import get


def _register_or_mlt() -> Preferred:
    mlt = MultiLevelTiling(structure="SSRSRS", max_innermost_factor=64, reuse_write=None)
    return Preferred(RegisterTiling(), Alternatives([mlt, RegisterTiling()]))


def _spaces(func, rule, target) -> list[s_tir.Schedule]:
    space = ms.space_generator.PostOrderApply(sch_rules=[rule], postprocs=[], mutator_probs={})
    context = ms.TuneContext(
        mod=tvm.IRModule({"main": func}), target=target, space_generator=space, task_name="t"
    )
    return context.generate_design_space()


def _register_tiled(sch: s_tir.Schedule, name: str) -> bool:
    loops = sch.get_loops(sch.get_sblock(name))
    return sch.get(loops[-1]).kind == tvm.tirx.ForKind.VECTORIZED


@pytest.mark.parametrize(
    ("batch", "step_claimed"),
    # The test target (conftest): 4 lanes, 16 registers, so 5 rows.
    # batch 8: 4 rows of h reuse each vector of Wh (4 >= half of 5); batch 2: 2 rows do
    # not; batch 1: no row reuses it (a matrix-vector product, rows from the gate axis).
    [(8, True), (2, False), (1, False)],
)
def test_claims_matrix_matrix_products(batch, step_claimed, target):
    func = get("lstm", seq=40, batch=batch, input=8, hidden=8).prim_func()
    rule = RegisterTiling()
    rule._initialize_with_tune_context(ms.TuneContext(target=target))
    sch = s_tir.Schedule(func)
    assert rule.claims(sch, sch.get_sblock("s_h2h")) == step_claimed
    assert rule.claims(sch, sch.get_sblock("Xi2h"))  # 40 * batch rows of X
    assert not rule.claims(sch, sch.get_sblock("gates"))  # not a reduction


@pytest.mark.parametrize("clones", [0, 2])
def test_the_claimed_blocks_get_the_register_block_alone(clones, target):
    """Batch 8: both products claimed, one design space, both register-tiled. Batch 1: the
    step's product is offered both tilings. The same after cloning (as MetaSchedule does
    per task), which goes through TVM's FFI."""
    rule = _register_or_mlt()
    for _ in range(clones):
        rule = rule.clone()
    (space,) = _spaces(get("lstm", seq=40, batch=8, input=8, hidden=8).prim_func(), rule, target)
    assert _register_tiled(space, "Xi2h") and _register_tiled(space, "s_h2h")
    spaces = _spaces(get("lstm", seq=40, batch=1, input=8, hidden=8).prim_func(), rule, target)
    assert all(_register_tiled(space, "Xi2h") for space in spaces)
    assert sorted(_register_tiled(space, "s_h2h") for space in spaces) == [False, True]


def test_repr_names_both_sides():
    assert repr(_register_or_mlt()._inst) == (
        "Preferred(RegisterTiling, Alternatives(MultiLevelTiling, RegisterTiling))"
    )
