"""scan_tir.tune.dispatch: one function choosing among schedules of itself by shape."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir, te
from tvm.s_tir import meta_schedule as ms
from tvm.script import tirx as T
from tvm.target import Target
from util import ATOL, RTOL, compile_func, outputs

import scan_tir
from scan_tir import scan_space, workloads
from scan_tir.errors import ScanLoweringError
from scan_tir.transform import merged_unsafely
from scan_tir.transform.pipeline import PIPELINE
from scan_tir.tune.dispatch import LLVM_OPTIONS, dispatch, dispatch_target, nearest_instance
from scan_tir.tune.symbolic import replay_sized, size_vars, specialize, specialize_body

n = te.var("n")


def plus(c: float, length=n) -> tvm.tirx.PrimFunc:
    a = te.placeholder((length,), name="A")
    return scan_tir.create_prim_func([a, te.compute((length,), lambda i: a[i] + c, name="B")])


def ran(lib, length: int) -> float:
    """Which kernel ran: each adds its own constant."""
    a, b = (tvm.runtime.tensor(np.zeros(length, "float32")) for _ in range(2))
    lib["main"](a, b)
    assert np.all(b.numpy() == b.numpy()[0])
    return float(b.numpy()[0])


def test_a_shape_takes_the_kernel_of_the_instance_it_rounds_up_to():
    """Between instances: the next one up; beyond the last: the last; at 1 the first."""
    func = plus(0.0)
    choice = nearest_instance(func, {"n": [16, 4, 64]}, {(4,): 0, (16,): 1, (64,): 2})
    lib = compile_func(dispatch(func, [plus(1.0), plus(2.0), plus(3.0)], choice))
    got = {length: ran(lib, length) for length in (1, 4, 5, 16, 17, 64, 65, 1000)}
    assert got == {1: 1.0, 4: 1.0, 5: 2.0, 16: 2.0, 17: 3.0, 64: 3.0, 65: 3.0, 1000: 3.0}


def test_a_kernel_the_choice_never_takes_is_left_out():
    """The table sends no shape to kernel 1: the function is the one dispatching to
    kernels 0 and 2 alone (its body never built), and each shape runs its kernel."""
    func = plus(0.0)
    grid = {"n": [4, 16]}
    dispatched = dispatch(func, [plus(1.0), plus(2.0), plus(3.0)],
                          nearest_instance(func, grid, {(4,): 0, (16,): 2}))
    two = dispatch(func, [plus(1.0), plus(3.0)], nearest_instance(func, grid, {(4,): 0, (16,): 1}))
    tvm.ir.assert_structural_equal(dispatched, two)
    lib = compile_func(dispatched)
    got = {length: ran(lib, length) for length in (1, 4, 5, 100)}
    assert got == {1: 1.0, 4: 1.0, 5: 3.0, 100: 3.0}


def test_two_sizes_one_table():
    m = te.var("m")

    def two(c: float) -> tvm.tirx.PrimFunc:
        a = te.placeholder((m, n), name="A")
        return scan_tir.create_prim_func(
            [a, te.compute((m, n), lambda i, j: a[i, j] + c, name="B")]
        )

    table = {(1, 8): 0, (1, 64): 1, (4, 8): 1, (4, 64): 2}
    choice = nearest_instance(two(0.0), {"m": [1, 4], "n": [8, 64]}, table)
    lib = compile_func(dispatch(two(0.0), [two(1.0), two(2.0), two(3.0)], choice))
    for (rows, cols), want in {(1, 3): 1, (1, 9): 2, (2, 8): 2, (3, 100): 3, (9, 9): 3}.items():
        a, b = (tvm.runtime.tensor(np.zeros((rows, cols), "float32")) for _ in range(2))
        lib["main"](a, b)
        assert np.all(b.numpy() == want), (rows, cols)


def lstm_kernels(count: int) -> tuple[tvm.tirx.PrimFunc, list[tvm.tirx.PrimFunc]]:
    """An LSTM of symbolic length and ``count`` schedules of it: design spaces drawn at
    length 16 (seeded), each replayed on the symbolic function."""
    wl = workloads.get("lstm", seq=16, batch=2, input=16, hidden=32)
    sizes = {**wl.sizes, "seq": te.var("seq")}
    func = scan_tir.create_prim_func(wl.recurrence.build(**sizes), options=wl.options)
    mod = tvm.IRModule({"main": specialize(func, {"seq": 16})})
    target = scan_tir.tune.default_target()
    kernels = []
    for seed in range(8):
        ctx = ms.TuneContext(mod=mod, target=target, space_generator=scan_space(target),
                             task_name="dispatch", rand_state=seed)
        for space in ctx.generate_design_space():
            sch = s_tir.Schedule(mod)
            space.trace.simplified(remove_postproc=True).apply_to_schedule(
                sch, remove_postproc=True
            )
            sch.enter_postproc()
            if all(pp.apply(sch) for pp in ctx.space_generator.postprocs):
                kernels.append(replay_sized(sch.trace, func))
            if len(kernels) == count:
                return func, kernels
    raise AssertionError("too few design spaces pass the postprocs")


def test_a_grid_of_28_instances_branches_on_plain_comparisons():
    """The choice is a decision tree on each size (a condition each, ``size <= value``),
    not a chain on one expression of every size, which TVM's simplifier took minutes over
    (it takes every condition as a constraint on its branches); right at every instance,
    between them and beyond."""
    m = te.var("m")

    def two(c: float) -> tvm.tirx.PrimFunc:
        a = te.placeholder((m, n), name="A")
        return scan_tir.create_prim_func(
            [a, te.compute((m, n), lambda i, j: a[i, j] + c, name="B")]
        )

    grid = {"m": [1, 2, 4, 8, 16, 32, 64], "n": [16, 64, 256, 1024]}
    table = {(r, c): k for k, (r, c) in enumerate(
        (r, c) for r in grid["m"] for c in grid["n"])}
    choice = nearest_instance(two(0.0), grid, table)
    conditions = []
    tvm_ffi.structural_walk(choice, (tvm.tirx.Select, lambda s: conditions.append(s.condition)))
    assert len(conditions) == 27  # 6 on m, 3 on n under each of m's 7 branches
    assert all(isinstance(c, tvm.tirx.LE) and isinstance(c.b, tvm.tirx.IntImm)
               for c in conditions)
    dispatched = dispatch(two(0.0), [two(float(k)) for k in range(28)], choice)
    binds = []  # the index is kept in a buffer: a bound value would be substituted into
    tvm_ffi.structural_walk(dispatched.body, (tvm.tirx.Bind, binds.append))  # every branch
    assert not binds
    lib = compile_func(dispatched)
    for (rows, cols), at in {(1, 16): (1, 16), (3, 17): (4, 64), (64, 1024): (64, 1024),
                             (100, 2000): (64, 1024), (9, 1): (16, 16)}.items():
        a, b = (tvm.runtime.tensor(np.zeros((rows, cols), "float32")) for _ in range(2))
        lib["main"](a, b)
        assert np.all(b.numpy() == table[at]), (rows, cols)


def test_dispatched_lstm_is_right_at_every_length():
    """Lengths listed, between, beyond, and 1, each against numpy (a race between steps
    shows at long lengths: 1024 is here)."""
    func, kernels = lstm_kernels(2)
    choice = nearest_instance(func, {"seq": [8, 64]}, {(8,): 0, (64,): 1})
    mod = tvm.IRModule({"main": dispatch(func, kernels, choice)})
    lib = tvm.compile(mod, target=dispatch_target(Target("llvm")), tir_pipeline=PIPELINE)
    for seq in (1, 7, 8, 9, 64, 65, 1024):
        wl = workloads.get("lstm", seq=seq, batch=2, input=16, hidden=32)
        got, want = outputs(wl, lib, wl.input_arrays())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"seq={seq}")


def test_the_dispatch_target_adds_its_llvm_options_once_and_keeps_the_others():
    """A user's own LLVM options stay; building twice for it adds nothing; a target
    other than llvm is left alone."""
    own = Target({"kind": "llvm", "cl-opt": ["-unroll-threshold:int=100"]})
    once = dispatch_target(own)
    assert list(once.attrs["cl-opt"]) == ["-unroll-threshold:int=100", *LLVM_OPTIONS]
    assert list(dispatch_target(once).attrs["cl-opt"]) == list(once.attrs["cl-opt"])
    assert str(dispatch_target(Target("c"))) == str(Target("c"))


def test_a_kernel_that_is_not_a_schedule_of_the_function_is_refused():
    with pytest.raises(ScanLoweringError, match="kernel 1: parameter 'A' is"):
        dispatch(plus(0.0), [plus(1.0), plus(1.0, length=8)], tvm.tirx.IntImm("int32", 0))
    a = te.placeholder((n,), name="A")
    three = scan_tir.create_prim_func(
        [a, te.compute((n,), lambda i: a[i], name="B"), te.compute((n,), lambda i: a[i])]
    )
    with pytest.raises(ScanLoweringError, match="kernel 0 has 3 parameters, the function 2"):
        dispatch(plus(0.0), [three], tvm.tirx.IntImm("int32", 0))
    with pytest.raises(ScanLoweringError, match="no kernel to dispatch to"):
        dispatch(plus(0.0), [], tvm.tirx.IntImm("int32", 0))


def test_a_table_that_does_not_cover_the_grid_is_refused():
    with pytest.raises(ScanLoweringError, match=r"no kernel for 1 instance\(s\).*'n': 16"):
        nearest_instance(plus(0.0), {"n": [4, 16]}, {(4,): 0})
    with pytest.raises(ScanLoweringError, match=r"no symbolic size \['batch'\]; it has \['n'\]"):
        nearest_instance(plus(0.0), {"batch": [4]}, {(4,): 0})


@T.prim_func(s_tir=True)
def plus_one_at_four(A: T.Buffer(("n",), "float32"), B: T.Buffer(("n",), "float32")):
    n = T.int32()  # noqa: F841 (the size, as TVMScript prints it)
    T.func_attr({"tirx.noalias": True})
    for i in range(4):
        with T.sblock("B"):
            v_i = T.axis.spatial(4, i)
            T.reads(A[v_i])
            T.writes(B[v_i])
            B[v_i] = A[v_i] + T.float32(1.0)


def test_a_body_fixed_at_a_size_keeps_the_symbolic_parameters():
    """The body loops over 4 elements; the parameters are the function's own, so the
    result is still a schedule of it that dispatch joins, and a branch picks it at 4."""
    func = plus(1.0)
    fixed = specialize_body(func, {"n": 4})
    tvm.ir.assert_structural_equal(fixed, plus_one_at_four.with_attr("global_symbol", "main"))
    assert all(a.same_as(b) for a, b in zip(func.params, fixed.params))
    lib = compile_func(dispatch(func, [fixed, plus(2.0)], tvm.tirx.Select(n == 4, 0, 1)))
    assert ran(lib, 4) == 1.0 and ran(lib, 5) == 2.0


def test_branches_that_each_allocate_2_to_the_26_floats_are_right():
    """Bodies fixed at batches 512 and 1024, and the generic one for other batches, each
    allocate the gates of every step (steps x batch x 4 hidden floats). TVM's
    StorageRewrite would merge them into one allocation sized with an int32 count of
    bits, which overflows at 1024 x 1024 x 64 floats: the buffer too short, a wrong result
    and a corrupt heap. The function is lowered without that pass."""
    func = workloads.get("lstm", seq=4, batch=2, input=16, hidden=16).symbolic_func(
        ["batch", "seq"])
    batch = size_vars(func)["batch"]
    bodies = [specialize_body(func, {"batch": b}) for b in (512, 1024)]
    choice = tvm.tirx.Select(batch == 512, 0, tvm.tirx.Select(batch == 1024, 1, 2))
    dispatched = dispatch(func, [*bodies, func], choice)
    assert merged_unsafely(dispatched)
    lib = compile_func(dispatched)
    wl = workloads.get("lstm", seq=1024, batch=1024, input=16, hidden=16)
    got, want = outputs(wl, lib, wl.input_arrays())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
