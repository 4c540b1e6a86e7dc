"""The target every tuning, build and database tool uses by default."""

from __future__ import annotations

import os

from tvm.target import Target
from tvm.target.codegen import (
    llvm_get_cpu_features,
    llvm_get_system_cpu,
    llvm_get_system_triple,
)


def default_target() -> Target:
    """llvm for this machine's CPU, with as many cores as TVM will use (TVM_NUM_THREADS, else
    all).

    The CPU matters: without ``mcpu`` TVM's llvm target compiles for LLVM's "generic" x86-64,
    i.e. SSE2 (4-wide vectors, no FMA); on this project's Zen 5 machines the same schedule
    runs about 20% faster for ``znver5`` (notes.md section 3). The target is stored in every
    record, so tools that rebuild a schedule use this same default.
    """
    cores = int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1)
    return Target({"kind": "llvm", "mcpu": llvm_get_system_cpu(), "num-cores": cores})


#: LLVM's names of the instruction-set extensions vector code is built from; the rest of
#: its feature list tunes code generation and does not decide whether the code runs.
_ISA = ("avx", "amx", "fma", "sse", "f16c", "bmi")


def unrunnable_here(target: Target) -> str:
    """Why code built for ``target`` would not run on this machine's CPU ('' if it would).

    A record carries the target it was tuned for, and this project's machines change CPU
    between sessions: code for ``znver5`` dies of an illegal instruction on a Zen 3 (the
    process, not a Python error), so a foreign target is checked before its code is run.
    """
    if target.kind.name != "llvm":
        return ""
    system = llvm_get_system_cpu()
    arch = str(target.attrs.get("mtriple", "") or llvm_get_system_triple()).split("-")[0]
    if arch != llvm_get_system_triple().split("-")[0]:
        return f"built for {arch}, this machine is {llvm_get_system_triple().split('-')[0]}"
    host = Target({"kind": "llvm", "mcpu": system})
    lacks = sorted(
        f for f in set(llvm_get_cpu_features(target)) - set(llvm_get_cpu_features(host))
        if f.startswith(_ISA)
    )
    if not lacks:
        return ""
    cpu = str(target.attrs.get("mcpu", "") or "generic")
    shown = ", ".join(lacks[:4]) + (f" and {len(lacks) - 4} more" if len(lacks) > 4 else "")
    return f"built for {cpu}, whose {shown} this CPU ({system}) lacks"
