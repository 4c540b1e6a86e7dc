"""``scan_tir.fast_math``: what it rewrites, how accurate the result is, and that every
recurrence of the zoo stays correct (1024 steps, 2 threads) before and after tuning."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tuning import tune_and_replay
from tvm import te, tirx
from tvm.ir.expr import Call
from util import compile_func
from workloads import SMALL, check_long_sequence, with_seq

import scan_tir
from scan_tir import LoweringOptions
from scan_tir.workloads import get

#: Fast math alone, the option these tests are about.
FAST_MATH = LoweringOptions(fast_math=True, copies_in_step=False)

OPS = {"exp": tirx.exp, "tanh": tirx.tanh, "sigmoid": tirx.sigmoid}
REFERENCE = {
    "exp": np.exp,
    "tanh": np.tanh,
    "sigmoid": lambda x: 0.5 * (1 + np.tanh(x / 2)),  # = 1 / (1 + e^-x), no overflow
}


def _calls(func: tirx.PrimFunc) -> list[tuple[str, str]]:
    """(op name, result type) of every intrinsic call in ``func``."""
    found: list[tuple[str, str]] = []

    def on_call(call: Call) -> None:
        found.append((str(getattr(call.op, "name", "")), str(call.ty)))

    tvm_ffi.structural_walk(func.body, (Call, on_call))
    return found


def _elementwise(op, n: int, dtype: str = "float32") -> tirx.PrimFunc:
    a = te.placeholder((n,), dtype, "a")
    b = te.compute(a.shape, lambda i: op(a[i]), "b")
    return te.create_prim_func([a, b])


def _apply(func: tirx.PrimFunc, x: np.ndarray) -> np.ndarray:
    out = tvm.runtime.tensor(np.zeros_like(x))
    compile_func(func)["main"](tvm.runtime.tensor(x), out)
    return out.numpy()


@pytest.mark.parametrize("name", sorted(OPS))
def test_float32_calls_are_replaced_and_float64_kept(name):
    assert (f"tirx.{name}", "float32") in _calls(_elementwise(OPS[name], 8))
    rewritten = _calls(scan_tir.fast_math(_elementwise(OPS[name], 8)))
    assert not [c for c in rewritten if c[0] in ("tirx.exp", "tirx.tanh", "tirx.sigmoid")]
    f64 = _elementwise(OPS[name], 8, "float64")
    assert tvm_ffi.structural_equal(scan_tir.fast_math(f64), f64)


#: Bounds on the relative error on [-20, 20] (an LSTM's gates stay well inside), from the
#: errors measured on llvm's generic x86-64, no FMA: exp 1.07e-6, tanh 3.3e-7, sigmoid
#: 1.13e-6. With FMA (mcpu=znver5): 1.2e-7, 3.1e-7, 1.9e-7. Without the rewrite, with FMA:
#: 5.9e-8, 7.2e-5 (TVM legalises tanh as (1 - e^-2x) / (1 + e^-2x), which cancels near 0)
#: and 1.4e-7. Exp's error grows with |x| (it reduces x by n*ln2 with one constant):
#: 4.1e-6 near +-87 without FMA.
MAX_REL_ERROR = {"exp": 1.5e-6, "tanh": 5e-7, "sigmoid": 1.5e-6}


@pytest.mark.parametrize("name", sorted(OPS))
def test_relative_error_on_a_gates_range(name):
    x = np.linspace(-20, 20, 1 << 18, dtype="float32")
    got = _apply(scan_tir.fast_math(_elementwise(OPS[name], x.size)), x).astype("float64")
    want = REFERENCE[name](x.astype("float64"))
    rel = np.abs(got - want) / np.abs(want)
    assert rel.max() < MAX_REL_ERROR[name], (rel.max(), x[rel.argmax()])


def test_saturation_far_outside_the_range():
    x = np.array([-1e4, -200, -88, 88, 200, 1e4], "float32")
    for name in ("tanh", "sigmoid"):
        got = _apply(scan_tir.fast_math(_elementwise(OPS[name], x.size)), x)
        np.testing.assert_allclose(got, REFERENCE[name](x.astype("float64")), atol=1e-7)
    exp = _apply(scan_tir.fast_math(_elementwise(tirx.exp, x.size)), x)
    assert (exp[:2] == 0).all() and np.isinf(exp[-2:]).all()


def test_the_rewrite_is_what_lets_llvm_vectorise():
    """The reason for the pass: llvm.exp on a vector becomes one libm call per lane."""
    a = te.placeholder((64,), "float32", "a")
    b = te.compute(a.shape, lambda i: tirx.sigmoid(a[i]), "b")

    def assembly(func: tirx.PrimFunc) -> str:
        sch = tvm.s_tir.Schedule(func)
        sch.vectorize(sch.get_loops(sch.get_sblock("b"))[0])
        target = tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512"})
        return tvm.compile(sch.mod, target=target).mod.inspect_source("asm")

    plain = te.create_prim_func([a, b])
    assert "expf" in assembly(plain)
    assert "expf" not in assembly(scan_tir.fast_math(plain))


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_recurrence_matches_numpy_at_1024_steps(name):
    check_long_sequence(name, seed=5, options=FAST_MATH)


def test_the_converter_applies_it_as_an_option():
    """``LoweringOptions.fast_math`` is this pass on the lowered function, nothing more."""
    workload = get("gru", **SMALL["gru"])
    off = scan_tir.create_prim_func(workload.tensors(), options=LoweringOptions.legacy())
    on = scan_tir.create_prim_func(workload.tensors(), options=FAST_MATH)
    assert ("tirx.tanh", "float32") in _calls(off)
    tvm.ir.assert_structural_equal(on, scan_tir.fast_math(off))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_tuned_records_replay_correct(name, builder, target, tmp_path):
    workload = get(name, FAST_MATH, **with_seq(name, 1024, 2))
    space = scan_tir.scan_space(target)
    tune_and_replay(workload, workload.prim_func(), space, builder, tmp_path, target)
