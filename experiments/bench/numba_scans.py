"""The fastest CPU forms of the linear recurrences that install here: numba, channel-parallel.

PyTorch has no selective-scan or minGRU kernel for CPU (Mamba's fused scan is CUDA; its
``selective_scan_ref`` is the Python loop of ``scan_tir.workloads``). What the fast CPU
kernels do (Intel's CPU selective scan in IPEX, Mamba's own kernel per channel) is one
parallel region over channels, each thread running the whole time loop for its channels
with the state in registers; numba compiles exactly that from Python (``prange`` over
channels, ``fastmath`` so that LLVM may vectorise and contract). minGRU's projections are
matrix products: numpy's BLAS does them, then the same channel-parallel loop.

numba is an optional extra (``.[benchmarks]``); without it these columns stay empty.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _selective_scan_kernel():
    from numba import njit, prange

    @njit(parallel=True, fastmath=True, cache=False)
    def kernel(x, delta, a, b, c, d, y):  # pragma: no cover - compiled by numba
        seq, batch, d_model = x.shape
        d_state = a.shape[1]
        for channel in prange(batch * d_model):
            row, ch = channel // d_model, channel % d_model
            h = np.zeros(d_state, np.float32)
            for t in range(seq):
                dt = delta[t, row, ch]
                xt = x[t, row, ch]
                acc = np.float32(0.0)
                for n in range(d_state):
                    h[n] = np.exp(dt * a[ch, n]) * h[n] + dt * b[t, row, n] * xt
                    acc += c[t, row, n] * h[n]
                y[t, row, ch] = acc + d[ch] * xt

    return kernel


def _mingru_kernel():
    from numba import njit, prange

    @njit(parallel=True, fastmath=True, cache=False)
    def kernel(z, candidate, hs):  # pragma: no cover - compiled by numba
        seq, batch, hidden = z.shape
        for channel in prange(batch * hidden):
            row, j = channel // hidden, channel % hidden
            h = np.float32(0.0)
            for t in range(seq):
                h = (np.float32(1.0) - z[t, row, j]) * h + z[t, row, j] * candidate[t, row, j]
                hs[t, row, j] = h

    return kernel


def numba_call(name: str, inputs: Sequence[np.ndarray]) -> Callable[[], np.ndarray] | None:
    """A call computing the recurrence ``name``'s output from ``inputs`` (the workload's own
    order) with numba, or None for a recurrence without one. Compiled on the first call."""
    arrays = [np.ascontiguousarray(v, dtype="float32") for v in inputs]
    if name == "selective_scan":
        kernel = _selective_scan_kernel()
        x = arrays[0]
        y = np.empty_like(x)
        return lambda: (kernel(*arrays, y), y)[1]
    if name == "mingru":
        kernel = _mingru_kernel()
        xs, wz, wh, bz, bh = arrays
        hs = np.empty((*xs.shape[:2], wz.shape[0]), np.float32)

        def call() -> np.ndarray:
            z = 1.0 / (1.0 + np.exp(-(xs @ wz.T + bz)))
            kernel(z, xs @ wh.T + bh, hs)
            return hs

        return call
    return None
