"""The target every tuning, build and database tool uses by default."""

from __future__ import annotations

import os

from tvm.target import Target
from tvm.target.codegen import llvm_get_system_cpu


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

