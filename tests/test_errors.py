"""Bad input: every rejected graph raises ScanLoweringError naming the op and the fix."""

from __future__ import annotations

import pytest
from tvm import te, tirx

import scan_tir
from scan_tir import ScanLoweringError

L, N = 16, 4


def _state(name="s", shape=(L, N)):
    return te.placeholder(shape, name=name)


def _init(name="init", rows=1):
    return te.compute((rows, N), lambda r, i: 0.0, name=name)


def _lower(*outs, args=()):
    return scan_tir.create_prim_func([*args, *outs])


def test_update_reads_current_step():
    s = _state()
    u = te.compute((L, N), lambda t, i: s[t, i] + 1, name="u_now")
    res = scan_tir.scan(_init(), u, s, name="now")
    with pytest.raises(ScanLoweringError, match=r"'now'.*'u_now'.*t\+0.*earlier steps"):
        _lower(res)


def test_update_reads_later_step():
    s = _state()
    u = te.compute((L, N), lambda t, i: s[t + 1, i], name="u_later")
    res = scan_tir.scan(_init(), u, s, name="later")
    with pytest.raises(ScanLoweringError, match=r"'u_later'.*t\+1, a later step"):
        _lower(res)


def test_lag_beyond_init_rows():
    s = _state()
    u = te.compute((L, N), lambda t, i: s[t - 2, i], name="u_lag2")
    res = scan_tir.scan(_init(rows=1), u, s, name="short_init")
    with pytest.raises(ScanLoweringError, match=r"'u_lag2'.*t-2.*only 1 row.*2 rows"):
        _lower(res)


def test_non_constant_lag():
    s = _state()
    u = te.compute((L, N), lambda t, i: s[t // 2, i], name="u_half")
    res = scan_tir.scan(_init(), u, s, name="halving")
    with pytest.raises(ScanLoweringError, match=r"'u_half'.*not a constant lag.*t-k"):
        _lower(res)


def test_intermediate_read_at_other_step():
    s = _state()
    a = te.compute((L, N), lambda t, i: s[t - 1, i] * 2, name="a")
    u = te.compute((L, N), lambda t, i: a[t - 1, i], name="u_reads_a")
    res = scan_tir.scan(_init(rows=2), u, s, name="stale")
    with pytest.raises(ScanLoweringError, match=r"'u_reads_a' reads 'a'.*Make 'a' a state"):
        _lower(res)


def test_body_op_with_wrong_time_extent():
    s = _state()
    a = te.compute((L - 1, N), lambda t, i: s[t - 1, i] * 2, name="short_a")
    u = te.compute((L, N), lambda t, i: a[t, i], name="u")
    res = scan_tir.scan(_init(), u, s, name="ragged")
    with pytest.raises(ScanLoweringError, match=r"'short_a'.*runs over 16 time steps"):
        _lower(res)


def test_scan_inside_scan_body():
    s_outer = _state("outer_state")
    s_inner = _state("inner_state")
    inner_init = te.compute((1, N), lambda _, i: s_outer[0, i], name="inner_init")
    inner_upd = te.compute(
        (L, N), lambda t, i: s_inner[t - 1, i] + s_outer[t - 1, i], name="inner_upd"
    )
    inner = te.scan(inner_init, inner_upd, s_inner, name="inner_scan")
    outer_upd = te.compute((L, N), lambda t, i: inner[t, i], name="outer_upd")
    outer = scan_tir.scan(_init(), outer_upd, s_outer, name="outer_scan")
    with pytest.raises(ScanLoweringError, match=r"'outer_scan'.*ScanOp 'inner_scan'.*inside"):
        _lower(outer)


def test_extern_inside_scan_body():
    s = _state()
    ext = te.extern(
        (L, N), [s], lambda ins, outs: tirx.Evaluate(0), name="opaque_ext", dtype="float32"
    )
    u = te.compute((L, N), lambda t, i: ext[t, i], name="u")
    res = scan_tir.scan(_init(), u, s, name="with_extern")
    with pytest.raises(ScanLoweringError, match=r"ExternOp 'opaque_ext'.*only te.compute"):
        _lower(res)


def test_state_placeholder_read_outside_scan():
    s = _state()
    u = te.compute((L, N), lambda t, i: s[t - 1, i] + 1, name="u")
    res = scan_tir.scan(_init(), u, s, name="leaky")
    y = te.compute((L, N), lambda t, i: res[t, i] + s[t, i], name="y_reads_state")
    with pytest.raises(ScanLoweringError, match=r"'y_reads_state' reads 's', the state"):
        _lower(y)


def test_body_op_read_outside_scan():
    s = _state()
    a = te.compute((L, N), lambda t, i: s[t - 1, i] + 1, name="a_body")
    res = scan_tir.scan(_init(), a, s, name="sc")
    b = te.compute((L, N), lambda t, i: a[t, i] * 2, name="b")
    with pytest.raises(ScanLoweringError, match=r"'b' reads 'a_body'.*body of scan 'sc'"):
        _lower(res, b)


def test_other_scans_state_in_body():
    s1, s2 = _state("s1"), _state("s2")
    u1 = te.compute((L, N), lambda t, i: s1[t - 1, i], name="u1")
    r1 = scan_tir.scan(_init("i1"), u1, s1, name="first")
    u2 = te.compute((L, N), lambda t, i: s2[t - 1, i] + s1[t - 1, i], name="u2")
    r2 = scan_tir.scan(_init("i2"), u2, s2, name="second")
    with pytest.raises(ScanLoweringError, match=r"'u2' reads the state placeholder 's1'"):
        _lower(r1, r2)


def test_update_that_is_not_a_compute():
    s = _state()
    x = te.placeholder((L, N), name="X")
    res = te.scan(_init(), x, s, name="copy_scan")
    with pytest.raises(ScanLoweringError, match=r"'copy_scan'.*update PlaceholderOp 'X'"):
        _lower(res)


def test_argument_that_is_not_a_tensor():
    with pytest.raises(ScanLoweringError, match=r"argument 1.*str"):
        scan_tir.create_prim_func([te.placeholder((2,), name="a"), "oops"])


# --- scan_tir.scan: te.scan's preconditions, checked in Python ------------------------------


def _u(name="u", shape=(L, N), dtype="float32"):
    s = te.placeholder(shape, name="ref", dtype=dtype)
    return te.compute(shape, lambda *i: s(*i), name=name)


@pytest.mark.parametrize(
    "init, update, state, pattern",
    [
        ([_init()], [_u(shape=(L, N + 1))], [_state()], r"update 'u' has shape \[16, 5\]"),
        (
            [te.compute((1, N + 2), lambda *i: 0.0, name="wide")],
            [_u()],
            [_state()],
            r"init 'wide'.*trailing dims",
        ),
        ([_init(), _init("i2", rows=2)], [_u(), _u("u2")], [_state(), _state("t")], r"2 rows"),
        ([_init()], [_u()], [_state(), _state("t")], r"1 init, 1 update and 2 state"),
        ([_init()], [_u(shape=(L,))], [_state()], r"same rank"),
        ([_init()], [_u(dtype="float64")], [_state()], r"dtypes differ"),
        (
            [_init(), _init("i2")],
            [_u(), _u("u2", shape=(L + 1, N))],
            [_state(), _state("t", shape=(L + 1, N))],
            r"state 1 \('t'\): the state has length 17",
        ),
    ],
)
def test_scan_shape_mismatch(init, update, state, pattern):
    with pytest.raises(ScanLoweringError, match=r"scan 'bad'.*" + pattern):
        scan_tir.scan(init, update, state, name="bad")
