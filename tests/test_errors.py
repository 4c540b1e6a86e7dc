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


def _refused(pattern: str, update, state, name: str, init=None) -> None:
    """Lowering the scan of ``update`` over ``state`` raises an error matching ``pattern``."""
    res = scan_tir.scan(init if init is not None else _init(), update, state, name=name)
    with pytest.raises(ScanLoweringError, match=pattern):
        _lower(res)


@pytest.mark.parametrize(
    "row, update, scan, pattern",
    [
        (lambda t: t, "u_now", "now", r"'now'.*'u_now'.*t\+0.*earlier steps"),
        (lambda t: t + 1, "u_later", "later", r"'u_later'.*t\+1, a later step"),
        (lambda t: t - 2, "u_lag2", "short_init", r"'u_lag2'.*t-2.*only 1 row.*2 rows"),
        (lambda t: t // 2, "u_half", "halving", r"'u_half'.*not a constant lag.*t-k"),
    ],
    ids=["current step", "later step", "lag beyond init rows", "non-constant lag"],
)
def test_update_reads_a_row_it_cannot(row, update, scan, pattern):
    """With one init row: only t-1 can be read."""
    s = _state()
    u = te.compute((L, N), lambda t, i: s[row(t), i] + 1, name=update)
    _refused(pattern, u, s, scan, init=_init(rows=1))


@pytest.mark.parametrize(
    "body_op, length, row, init_rows, pattern",
    [
        ("a", L, lambda t: t - 1, 2, r"'u' reads 'a'.*Make 'a' a state"),
        ("short_a", L - 1, lambda t: t, 1, r"'short_a'.*runs over 16 time steps"),
    ],
    ids=["read at another step", "wrong time extent"],
)
def test_body_op_read_wrongly(body_op, length, row, init_rows, pattern):
    """The update reads a body op (not a state) at a step other than its own, or the body
    op runs over fewer steps than the scan."""
    s = _state()
    a = te.compute((length, N), lambda t, i: s[t - 1, i] * 2, name=body_op)
    u = te.compute((L, N), lambda t, i: a[row(t), i], name="u")
    _refused(pattern, u, s, "body", init=_init(rows=init_rows))


def test_scan_inside_scan_body():
    s_outer = _state("outer_state")
    s_inner = _state("inner_state")
    inner_init = te.compute((1, N), lambda _, i: s_outer[0, i], name="inner_init")
    inner_upd = te.compute(
        (L, N), lambda t, i: s_inner[t - 1, i] + s_outer[t - 1, i], name="inner_upd"
    )
    inner = te.scan(inner_init, inner_upd, s_inner, name="inner_scan")
    outer_upd = te.compute((L, N), lambda t, i: inner[t, i], name="outer_upd")
    _refused(r"'outer_scan'.*ScanOp 'inner_scan'.*inside", outer_upd, s_outer, "outer_scan")


def test_extern_inside_scan_body():
    s = _state()
    ext = te.extern(
        (L, N), [s], lambda ins, outs: tirx.Evaluate(0), name="opaque_ext", dtype="float32"
    )
    u = te.compute((L, N), lambda t, i: ext[t, i], name="u")
    _refused(r"ExternOp 'opaque_ext'.*only te.compute", u, s, "with_extern")


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
