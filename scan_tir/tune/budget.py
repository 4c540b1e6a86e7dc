"""Splitting a dynamic tuning's budget among its tasks by the latency each stands for.

The dispatch minimises the grid's weighted latency (:func:`~scan_tir.tune.dynamic`), a sum
in which a batch-64 instance runs many times longer than a batch-1 one: a trial that makes
the large batches' kernel a few percent faster saves more of that sum than one spent on
batch 1. MetaSchedule's gradient task scheduler (``GradientBased`` in TVM's
``s_tir/meta_schedule/task_scheduler/``, after Ansor's) gives each next round to the task
whose weight times latency promises most; a dynamic tuning's few short tasks take the same
rule in one step: half the budget evenly (:func:`even`), so that every task's search has
sampled tiles for its own batch, then the rest in proportion to the weighted latency of the
instances each task stands for, estimated from its best record so far (:func:`by_latency`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Instance = tuple[int, ...]


def even(trials: int, tasks: int) -> list[int]:
    """``trials`` in ``tasks`` shares that differ by at most one, the larger ones first."""
    return [trials // tasks + (i < trials % tasks) for i in range(tasks)]


def by_latency(
    trials: int,
    representatives: Sequence[Instance],
    grid: Sequence[Instance],
    weights: Mapping[Instance, float],
    best_s: Sequence[float | None],
    compared: Sequence[int],
) -> list[int]:
    """``trials`` split among the tasks tuned at ``representatives`` in proportion to the
    weighted latency each stands for: every instance of ``grid`` belongs to the
    representatives nearest it in the sizes ``compared`` (by ratio; a tie shares it), and
    its latency is the task's best (``best_s``) scaled by the instance's sizes over the
    representative's (a recurrence's work is linear in its batch and its length). A task
    with no valid record yet (None) gets an even share, as it has no latency to weigh."""
    tasks = len(representatives)
    unknown = [t for t in range(tasks) if best_s[t] is None]
    stands_for = [0.0] * tasks
    for i in grid:
        distance = [
            sum(abs(math.log(i[k] / r[k])) for k in compared) for r in representatives
        ]
        nearest = [t for t, d in enumerate(distance) if math.isclose(d, min(distance))]
        for t in nearest:
            if best_s[t] is not None:
                scale = math.prod(i[k] / r for k, r in enumerate(representatives[t]))
                stands_for[t] += weights[i] * best_s[t] * scale / len(nearest)
    known = trials - trials * len(unknown) / tasks
    total = sum(stands_for)
    shares = [
        trials / tasks
        if best_s[t] is None
        else known * stands_for[t] / total
        if total > 0
        else known / (tasks - len(unknown))
        for t in range(tasks)
    ]
    return _rounded(shares, trials)


def _rounded(shares: list[float], trials: int) -> list[int]:
    """Whole trials summing to ``trials``: each share rounded down, the trials left to the
    largest remainders (the largest remainder method)."""
    whole = [math.floor(s) for s in shares]
    order = sorted(range(len(shares)), key=lambda t: whole[t] - shares[t])
    for t in order[: trials - sum(whole)]:
        whole[t] += 1
    return whole
