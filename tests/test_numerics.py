"""scan_tir.db.numerics.unrunnable_here: whether code built for a target runs here (with
scan_tir.tune.default_target, which must)."""

from __future__ import annotations

import platform

from tvm.target import Target

from scan_tir.db.numerics import unrunnable_here
from scan_tir.tune.target import default_target


def test_the_default_target_runs_here():
    assert unrunnable_here(default_target()) == ""
    assert unrunnable_here(Target({"kind": "llvm"})) == ""  # generic x86-64 runs anywhere


def test_another_architecture_is_named():
    arm = Target({"kind": "llvm", "mtriple": "aarch64-linux-gnu"})
    here = platform.machine()
    want = "" if here == "aarch64" else f"built for aarch64, this machine is {here}"
    assert unrunnable_here(arm) == want


def test_missing_extensions_are_named():
    """Every extension LLVM's feature list for an AVX-512 CPU has and this one lacks (the
    check of the verdict that replaces an illegal instruction; test_db runs it)."""
    have = Target({"kind": "llvm", "mcpu": "x86-64"})
    assert unrunnable_here(have) == ""
    why = unrunnable_here(Target({"kind": "llvm", "mcpu": "x86-64", "mattr": ["+avx512f"]}))
    lacks_avx512 = "avx512f" not in open("/proc/cpuinfo").read()
    cpu = default_target().attrs["mcpu"]
    assert (why == f"built for x86-64, whose avx512f this CPU ({cpu}) lacks") == lacks_avx512
