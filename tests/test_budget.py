"""scan_tir.tune.budget: a dynamic tuning's budget split evenly or by the work each task
stands for."""

from __future__ import annotations

import pytest

from scan_tir.tune.budget import SPLITS, by_work, even, split


@pytest.mark.parametrize(
    "trials, tasks, shares", [(8, 4, [2, 2, 2, 2]), (7, 3, [3, 2, 2]), (2, 4, [1, 1, 0, 0])]
)
def test_an_even_split_differs_by_at_most_one(trials, tasks, shares):
    assert even(trials, tasks) == shares


def test_each_instance_counts_for_its_nearest_task_by_its_work():
    """Batch 2 lies as near batch 1 as batch 4 (by ratio): each task stands for half of
    it. Task 1: batch 1 and half of batch 2, 2 per step; task 4: half of batch 2, batch 4
    and batch 8, 13 per step (the lengths scale both alike)."""
    grid = [(b, s) for b in (1, 2, 4, 8) for s in (16, 64)]
    weights = dict.fromkeys(grid, 1.0)
    assert by_work(15, [(1, 16), (4, 16)], grid, weights, [0]) == [2, 13]


def test_weights_count_and_an_instance_of_weight_zero_does_not():
    grid = [(1, 16), (4, 16)]
    weights = {(1, 16): 1.0, (4, 16): 0.0}
    assert by_work(6, [(1, 16), (4, 16)], grid, weights, [0]) == [6, 0]
    weights = {(1, 16): 4.0, (4, 16): 1.0}
    assert by_work(6, [(1, 16), (4, 16)], grid, weights, [0]) == [3, 3]


def test_sizes_not_compared_scale_the_work_but_pick_no_task():
    """The lengths (not compared) decide nothing about which task an instance belongs to;
    with no size compared, every task stands for every instance alike."""
    grid = [(1, 16), (1, 1024)]
    weights = dict.fromkeys(grid, 1.0)
    assert by_work(4, [(1, 16), (1, 1024)], grid, weights, []) == [2, 2]
    assert by_work(4, [(1, 16), (1, 1024)], grid, weights, [1]) == [0, 4]


def test_half_evenly_then_the_rest_by_work():
    grid = [(b, 16) for b in (1, 64)]
    weights = dict.fromkeys(grid, 1.0)
    assert split(112, [(1, 16), (64, 16)], grid, weights, [0], "work") == [28 + 1, 28 + 55]


def test_shares_are_whole_trials_summing_to_the_budget():
    grid = [(b, 16) for b in (1, 2, 3, 5, 8)]
    weights = dict.fromkeys(grid, 1.0)
    reps = [(1, 16), (3, 16), (8, 16)]
    for how in SPLITS:
        for trials in range(0, 12):
            shares = split(trials, reps, grid, weights, [0], how)
            assert sum(shares) == trials and min(shares) >= 0


def test_an_even_split_leaves_the_work_out():
    grid = [(b, 16) for b in (1, 64)]
    weights = dict.fromkeys(grid, 1.0)
    assert split(112, [(1, 16), (64, 16)], grid, weights, [0]) == [56, 56]  # the default


def test_an_unknown_split_is_refused_by_name():
    with pytest.raises(ValueError, match="budget split 'latency': expected one of even, work"):
        split(8, [(1, 16)], [(1, 16)], {(1, 16): 1.0}, [0], "latency")
