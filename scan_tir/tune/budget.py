"""Splitting a dynamic tuning's budget among its tasks: evenly, or by the work each
stands for.

Every task the same share is the default. The dispatch must come within a ratio of
per-instance tuning at every instance, and a task's search needs its share to find its
batch's tiles: with a share by work, the batch-1 task's 15 of 112 trials missed at batch 1
(and the GRU's batch-4 task's 18 at batches 2-4) in the runs recorded in notes.md, where
the even split's 28 each did not. A share by work also costs more tuning time, not the
same: the large batches' candidates build slowest.

The split by work (:func:`by_work`, ``"work"``) stays a choice for a sum of latencies: the
dispatch minimises the grid's weighted latency (:func:`~scan_tir.tune.dynamic`), in which
a batch-64 instance runs many times longer than a batch-1 one, so a trial that makes the
large batches' kernel a few percent faster saves more of that sum than one spent on batch
1. MetaSchedule's gradient task scheduler (``GradientBased`` in TVM's
``s_tir/meta_schedule/task_scheduler/``, after Ansor's) gives each next round to the task
whose weight times latency promises most; this split takes that rule in one step, before
any task is tuned: half the budget evenly, so that every task's search samples tiles for
its own batch, and the rest in proportion to the weighted work of the instances each task
stands for. Work, not measured latency: a second round per task, after a first had
measured each, would pay each search's fixed cost (sampling and evolving its population)
twice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Instance = tuple[int, ...]
SPLITS = ("even", "work")  # the first is the default


def split(
    trials: int,
    representatives: Sequence[Instance],
    grid: Sequence[Instance],
    weights: Mapping[Instance, float],
    compared: Sequence[int],
    how: str = SPLITS[0],
) -> list[int]:
    """Each task's trials. ``how`` is one of :data:`SPLITS`: ``"even"``, all of
    ``trials`` :func:`even`; ``"work"``, half of it even and the rest :func:`by_work`."""
    if how not in SPLITS:
        raise ValueError(f"budget split {how!r}: expected one of {', '.join(SPLITS)}")
    if how == "even":
        return even(trials, len(representatives))
    half = (trials + 1) // 2
    first = even(half, len(representatives))
    rest = by_work(trials - half, representatives, grid, weights, compared)
    return [a + b for a, b in zip(first, rest)]


def even(trials: int, tasks: int) -> list[int]:
    """``trials`` in ``tasks`` shares that differ by at most one, the larger ones first."""
    return [trials // tasks + (i < trials % tasks) for i in range(tasks)]


def by_work(
    trials: int,
    representatives: Sequence[Instance],
    grid: Sequence[Instance],
    weights: Mapping[Instance, float],
    compared: Sequence[int],
) -> list[int]:
    """``trials`` split among the tasks tuned at ``representatives`` in proportion to the
    weighted work each stands for: every instance of ``grid`` belongs to the
    representatives nearest it in the sizes ``compared`` (by ratio; a tie shares it), and
    its work is the product of its sizes (a recurrence's is linear in its batch and its
    length)."""
    stands_for = [0.0] * len(representatives)
    for i in grid:
        distance = [sum(abs(math.log(i[k] / r[k])) for k in compared) for r in representatives]
        nearest = [t for t, d in enumerate(distance) if math.isclose(d, min(distance))]
        for t in nearest:
            stands_for[t] += weights[i] * math.prod(i) / len(nearest)
    total = sum(stands_for)
    if total == 0:
        return even(trials, len(representatives))
    return _rounded([trials * s / total for s in stands_for], trials)


def _rounded(shares: list[float], trials: int) -> list[int]:
    """Whole trials summing to ``trials``: each share rounded down, the trials left to the
    largest remainders (the largest remainder method)."""
    whole = [math.floor(s) for s in shares]
    order = sorted(range(len(shares)), key=lambda t: whole[t] - shares[t])
    for t in order[: trials - sum(whole)]:
        whole[t] += 1
    return whole
