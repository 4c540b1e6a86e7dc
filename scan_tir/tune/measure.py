"""How tuning candidates are built and timed: the builder's build function and the runners.

The builder compiles each candidate as a deployment would run it (on prepacked weights),
without MetaSchedule's per-worker import of tensor intrinsics; the local runner feeds
inputs in a recurrence's working range; the RPC runner measures on the servers of a
tracker.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target

from ..transform.pipeline import PIPELINE
from ..transform.prepacked import prepacked


def build_candidate(mod: tvm.IRModule, target: Target, _params: object) -> tvm.runtime.Module:
    """The builder's build function: MetaSchedule's ``default_build``
    (tvm/s_tir/meta_schedule/builder/local_builder.py) without its import of
    ``tvm.s_tir.tensor_intrin``, and of :func:`scan_tir.prepacked` of the candidate (where
    MetaSchedule builds RemoveWeightLayoutRewriteBlock of it): the function a deployment runs,
    without the per-call copies of packed weights.

    That import takes 15-20 s on this machine, in every fresh worker, and LocalBuilder starts
    fresh workers for every batch (and once more for its sanity check): a 2-trial run spent
    most of its time there, and with the 30 s timeout builds of config C all timed out.
    A candidate reaches the builder already scheduled, so compiling it needs no registered
    tensor intrinsic (scan_space tensorizes nothing; a tensorized trace is applied in the
    tuning process, which has the intrinsics).
    """
    from tvm.driver import build as tvm_build

    return tvm_build(prepacked(mod), target=target, pipeline=PIPELINE)


#: Half-width of the uniform distribution the local runner fills inputs from.
INPUT_SCALE = 0.1


def alloc_small_inputs(device: tvm.runtime.Device, args_info: list, alloc_repeat: int) -> list:
    """The local runner's inputs: uniform in [-INPUT_SCALE, INPUT_SCALE] (zeros for ints).

    MetaSchedule fills them uniformly in [1, 10] (``random_fill_for_measure``,
    src/runtime/extra/contrib/random/mt_random_engine.cc). A recurrence then runs with
    every gate saturated (an LSTM gate sums hundreds of products of such numbers), and
    transcendental functions take other paths than on real data. With one repeat,
    besides, the runner's order of A-merged's ten best was not the order they run in: its
    first was 19% slower on small inputs than its second (notes.md, section 3). Small
    inputs keep the gates in their working range. Runs in the runner's
    worker process (LocalRunner's ``f_alloc_argument``).
    """
    rng = np.random.default_rng(0)
    repeated = []
    for _ in range(alloc_repeat):
        args = []
        for kind, dtype, shape in args_info:
            if kind != "TENSOR":
                raise NotImplementedError(f"runner argument of kind {kind}")
            if "float" in dtype:
                data = rng.uniform(-INPUT_SCALE, INPUT_SCALE, shape).astype(dtype)
            else:
                data = np.zeros(shape, dtype)
            args.append(tvm.runtime.tensor(data, device=device))
        repeated.append(args)
    return repeated


def local_runner() -> ms.runner.LocalRunner:
    """MetaSchedule's LocalRunner on small inputs, timed as the mean of 5 repeats of at
    least 20 ms each (its default is one repeat of at least 100 ms)."""
    config = ms.runner.EvaluatorConfig(number=1, repeat=5, min_repeat_ms=20)
    return ms.runner.LocalRunner(evaluator_config=config, f_alloc_argument=alloc_small_inputs)


def rpc_runner(spec: str, session_timeout_s: int = 60) -> ms.runner.RPCRunner:
    """An RPCRunner through the tracker ``HOST:PORT:KEY`` (the servers registered with KEY).

    The builder stays local: candidates are compiled here for the target and uploaded.
    """
    host, port, key = parse_rpc(spec)
    config = ms.runner.RPCConfig(
        tracker_host=host,
        tracker_port=port,
        tracker_key=key,
        session_timeout_sec=session_timeout_s,
    )
    return ms.runner.RPCRunner(rpc_config=config)


def parse_rpc(spec: str) -> tuple[str, int, str]:
    """``HOST:PORT:KEY`` -> (host, port, key); ValueError naming the expected form."""
    parts = spec.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[0] or not parts[2]:
        raise ValueError(f"--rpc wants HOST:PORT:KEY (a tracker and a device key), got {spec!r}")
    return parts[0], int(parts[1]), parts[2]
