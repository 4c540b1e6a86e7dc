"""``scan_tir.lower.vocabulary.regions``: what a piece of a nest touches, and the check
that a nest merged into another loop (``Schedule.merge``, which checks nothing) keeps the
result."""

from __future__ import annotations

import numpy as np
import pytest
from tvm import s_tir, te
from util import compile_func, run

from scan_tir.lower.vocabulary import merge_problem
from scan_tir.lower.vocabulary.regions import chunks_of

N = 64


def merged(consumer_reads, scalars=()) -> tuple[s_tir.Schedule, object]:
    """B = A * 2 and C = f(B), each loop split into 8 runs of 8, the runs merged."""
    a = te.placeholder((N,), name="A")
    b = te.compute((N,), lambda i: a[i] * 2.0, name="B")
    c = te.compute((N,), lambda i: consumer_reads(b, i) + 1.0, name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, c, *scalars]))
    outers = [sch.split(sch.get_loops(sch.get_sblock(x))[0], [8, None])[0] for x in "BC"]
    return sch, sch.merge(*outers)


def test_a_consumer_of_its_own_run_merges():
    sch, loop = merged(lambda b, i: b[i])
    assert merge_problem(sch.get(loop)) == ""
    x = np.arange(N, dtype="float32")
    (got,) = run(compile_func(sch.mod["main"]), [x], [(N,)])
    np.testing.assert_allclose(got, x * 2 + 1)


@pytest.mark.parametrize(
    "reads", [lambda b, i: b[N - 1 - i], lambda b, i: b[(i + 8) % N], lambda b, i: b[i // 2]]
)
def test_a_consumer_of_another_run_is_refused(reads):
    """Each reads, in some run, what a later (or another) run of B writes: merged, it
    would read it before it is written, or race with it in parallel. The merge itself
    goes through (TVM checks nothing), and so would the wrong result."""
    sch, loop = merged(reads)
    why = merge_problem(sch.get(loop))
    assert "touches buffer 'B'" in why and "of the loop it joins" in why, why


def test_nothing_to_merge_into():
    a = te.placeholder((N,), name="A")
    b = te.compute((N,), lambda i: a[i] * 2.0, name="B")
    sch = s_tir.Schedule(te.create_prim_func([a, b]))
    loop = sch.get(sch.get_loops(sch.get_sblock("B"))[0])
    assert "nothing in the loop's body" in merge_problem(loop)


def _named(boxes) -> dict:
    return {buf.name: box for buf, box in boxes.items()}


def test_each_run_touches_its_own_rows():
    """Run 3 of 8 (iterations 24-31) reads and writes what those iterations index."""
    sch, loop = merged(lambda b, i: b[i // 2])
    run = chunks_of(sch.get(loop), 8)[3]
    assert _named(run.reads) == {"A": [(24, 31)], "B": [(12, 15)]}
    assert _named(run.writes) == {"B": [(24, 31)], "C": [(24, 31)]}
    pair = chunks_of(sch.get(loop), 4)[1]  # runs of two iterations: 16-31
    assert _named(pair.reads) == {"A": [(16, 31)], "B": [(8, 15)]}


def test_an_index_the_interval_sets_cannot_bound_is_bounded_by_its_values():
    """``k * (7 - k)`` over k in 0..7: the analyzer's interval sets give up on the product
    of two terms in k (the whole of B), its values reach 12 at most."""
    sch, loop = merged(lambda b, i: b[i % 8 * (7 - i % 8)])
    assert _named(chunks_of(sch.get(loop), 8)[3].reads)["B"] == [(0, 12)]


def test_an_index_of_a_variable_outside_the_loops_is_bounded_by_the_analyzer():
    """``n`` is the same in every run; whatever its value, B is read somewhere in 0..63,
    which is all that an index of unknown sign can be said to touch."""
    n = te.var("n")
    sch, loop = merged(lambda b, i: b[i % 8 + n % 2], scalars=[n])
    runs = chunks_of(sch.get(loop), 8)
    assert all(_named(r.reads)["B"] == [(0, N - 1)] for r in runs)
    assert _named(runs[3].reads)["A"] == [(24, 31)]
