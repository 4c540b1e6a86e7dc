"""``scan_tir.lower.vocabulary.regions``: what a piece of a nest touches, and the check
that a nest merged into another loop (``Schedule.merge``, which checks nothing) keeps the
result."""

from __future__ import annotations

import numpy as np
import pytest
from tvm import s_tir, te
from util import compile_func, run

from scan_tir.lower.vocabulary import merge_problem

N = 64


def merged(consumer_reads) -> tuple[s_tir.Schedule, object]:
    """B = A * 2 and C = f(B), each loop split into 8 runs of 8, the runs merged."""
    a = te.placeholder((N,), name="A")
    b = te.compute((N,), lambda i: a[i] * 2.0, name="B")
    c = te.compute((N,), lambda i: consumer_reads(b, i) + 1.0, name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, c]))
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
