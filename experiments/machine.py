"""What bounds a run on the machine it runs on: peak fp32 GEMM rate and cache sizes.

The machines of this project change kind between sessions (Xeon Emerald Rapids, AMD Zen 5),
so the bound is measured by the run that prints it rather than taken from FIELD_NOTES:
with FIELD_NOTES' Xeon peak (324 GFLOP/s), PyTorch ran config D on a Zen 5 faster than
the "bound" (notes.md, section 3). DRAM bandwidth is not measured here and stays
FIELD_NOTES' figure; it is used only for data larger than the last-level cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

#: Read bandwidth at 16 MiB working sets on the Xeon (FIELD_NOTES); beyond the L3 only.
DRAM_BYTES_PER_S = 27e9
GEMM_N = 2048


@cache
def peak_flops(threads: int = 2) -> float:
    """The best fp32 GEMM rate (FLOP/s) of the libraries at hand, 2048^3 on ``threads``
    threads, best of 10 calls each: PyTorch's MKL (``torch.mm``) and oneDNN (a linear
    layer through ``torch.utils.mkldnn``), and numpy. On the Zen 5 MKL ran 216 GFLOP/s
    and oneDNN 452 (MKL takes its slower paths on AMD CPUs), so taking one library's rate
    would understate the machine. A library's best, not the silicon's peak: PyTorch's LSTM
    can come slightly above it."""
    a = np.random.default_rng(0).standard_normal((GEMM_N, GEMM_N)).astype("float32")
    rates = [_rate(lambda: a @ a)]
    try:
        import torch
        import torch.utils.mkldnn
    except ImportError:
        return max(rates)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ta = torch.from_numpy(a)
        linear = torch.nn.Linear(GEMM_N, GEMM_N, bias=False).eval()
        onednn, x = torch.utils.mkldnn.to_mkldnn(linear), ta.to_mkldnn()
        with torch.no_grad():
            rates += [_rate(lambda: torch.mm(ta, ta)), _rate(lambda: onednn(x))]
    finally:
        torch.set_num_threads(before)
    return max(rates)


def _rate(matmul: Callable[[], object]) -> float:
    matmul()
    return 2 * GEMM_N**3 / min(_seconds(matmul) for _ in range(10))


def _seconds(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


@cache
def cache_bytes(level: int) -> int:
    """Total bytes of the level-``level`` data/unified caches over the CPUs (sysfs; 0 if
    unknown), each shared cache counted once."""
    seen: dict[str, int] = {}
    for index in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cache/index[0-9]*"):
        try:
            if int((index / "level").read_text()) != level:
                continue
            if (index / "type").read_text().strip() == "Instruction":
                continue
            size = (index / "size").read_text().strip()
            shared = (index / "shared_cpu_list").read_text().strip()
        except (OSError, ValueError):
            continue
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        seen[shared] = int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
    return sum(seen.values())
