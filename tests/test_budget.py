"""scan_tir.tune.budget: a dynamic tuning's budget split by the latency each task stands for."""

from __future__ import annotations

import pytest

from scan_tir.tune.budget import by_latency, even


@pytest.mark.parametrize(
    "trials, tasks, shares", [(8, 4, [2, 2, 2, 2]), (7, 3, [3, 2, 2]), (2, 4, [1, 1, 0, 0])]
)
def test_an_even_split_differs_by_at_most_one(trials, tasks, shares):
    assert even(trials, tasks) == shares


def test_each_instance_counts_for_its_nearest_task_scaled_by_its_sizes():
    """Batch 2 lies as near batch 1 as batch 4 (by ratio): each task stands for half of
    it. Task 1 (1 ms at batch 1): batch 1, 1 ms, and half of batch 2, 2 ms. Task 4 (8 ms
    at batch 4): batch 4, 8 ms, and half of batch 2, 4 ms. So 2 : 10, with the length
    scaling both alike."""
    grid = [(b, s) for b in (1, 2, 4) for s in (16, 64)]
    weights = dict.fromkeys(grid, 1.0)
    assert by_latency(12, [(1, 16), (4, 16)], grid, weights, [1e-3, 8e-3], [0]) == [2, 10]


def test_weights_count_and_an_instance_of_weight_zero_does_not():
    grid = [(1, 16), (4, 16)]
    weights = {(1, 16): 1.0, (4, 16): 0.0}
    assert by_latency(6, [(1, 16), (4, 16)], grid, weights, [1e-3, 8e-3], [0]) == [6, 0]
    weights = {(1, 16): 8.0, (4, 16): 1.0}
    assert by_latency(6, [(1, 16), (4, 16)], grid, weights, [1e-3, 8e-3], [0]) == [3, 3]


def test_a_task_without_a_valid_record_gets_an_even_share():
    grid = [(1, 16), (4, 16), (16, 16)]
    weights = dict.fromkeys(grid, 1.0)
    shares = by_latency(9, [(1, 16), (4, 16), (16, 16)], grid, weights, [1e-3, None, 2e-3], [0])
    assert shares == [2, 3, 4]


def test_shares_are_whole_trials_summing_to_the_budget():
    grid = [(b, 16) for b in (1, 2, 3, 5, 8)]
    weights = dict.fromkeys(grid, 1.0)
    reps = [(1, 16), (3, 16), (8, 16)]
    for trials in range(0, 12):
        shares = by_latency(trials, reps, grid, weights, [1e-3, 2.9e-3, 7.7e-3], [0])
        assert sum(shares) == trials and min(shares) >= 0
