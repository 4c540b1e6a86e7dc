"""Only the CPU tensor intrinsics, registered before MetaSchedule asks for all of them.

The first ``ms.TuneContext`` of a process imports ``tvm.s_tir.tensor_intrin``, whose
``__init__`` registers every target's tensor intrinsics by parsing their TVMScript, most
of the time going to CUDA's and ROCm's (notes.md has the figures), in every process that
tunes: each ``scan-tir tune``, each notebook kernel, ``db show``.
scan-tir's rules are for CPU targets only, so :func:`scan_rules` first registers the
package with the modules its ``__init__`` loads for LLVM minus the GPU and DSP ones (x86,
Arm, RISC-V), without running the ``__init__``; MetaSchedule's import then finds it
registered. A GPU's modules stay importable by name: ``import
tvm.s_tir.tensor_intrin.cuda`` registers CUDA's, as a process that also tunes for a GPU
needs to.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

PACKAGE = "tvm.s_tir.tensor_intrin"
CPU_MODULES = ("x86", "arm_cpu", "riscv_cpu")


def import_cpu_intrinsics() -> None:
    """Register the CPU tensor intrinsics, unless the package is imported already."""
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    package = importlib.util.module_from_spec(spec)  # __path__ set, __init__ not run
    sys.modules[PACKAGE] = package
    parent, _, name = PACKAGE.rpartition(".")
    setattr(sys.modules[parent], name, package)
    for module in CPU_MODULES:
        importlib.import_module(f"{PACKAGE}.{module}")
