"""Symbolic sizes through Relax: a model exported with a symbolic length and batch, tuned
at one size and replayed on its symbolic kernels (``scan_tir.relax.tune`` with ``sizes``),
and tuned for a grid of lengths into kernels that dispatch by length
(``scan_tir.relax.dynamic``); each checked against PyTorch at listed, unlisted, unit and
long lengths.

Tolerance: rtol = atol = 1e-5, as in test_relax_torch.py. Budgets are tiny: what is tested
is that records replay into a correct module, not their speed.
"""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch
from torch.export import Dim
from util import matches_torch

from scan_tir.relax import build, dynamic, export, from_exported_program, tune
from scan_tir.relax.build import scheduled
from scan_tir.relax.layers import LAYER_ATTR
from scan_tir.relax.tuning import prepare

TOL = {"rtol": 1e-5, "atol": 1e-5}


class OneLayer(torch.nn.Module):
    """One LSTM layer, its outputs flat: one scan kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8)

    def forward(self, x: torch.Tensor):
        y, (h, c) = self.lstm(x)
        return y, h, c


@pytest.mark.slow
def test_symbolic_length_and_batch_tuned_replay(target, tmp_path):
    """A model exported with a symbolic length and batch, tuned at one size: every scan
    kernel replays its records on the symbolic kernel (none is built untuned, as when the
    final states were read after the scan, which left the root scope no stage pipeline),
    and the one module is right at every length and batch, PyTorch on one thread."""
    torch.manual_seed(2)
    m = OneLayer().eval()
    dims = {0: Dim("seq", min=1, max=2048), 1: Dim("batch", min=1, max=64)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = from_exported_program(export(m, (torch.randn(40, 2, 6),), dynamic_shapes=(dims,)))
    sizes = {"seq": 40, "batch": 2}
    tune(mod, target, tmp_path, 8, sizes=sizes, num_trials_per_iter=4, population=16)
    fused = scheduled(prepare(mod, target), target, tmp_path)
    scans = {gv.name_hint: f for gv, f in fused.functions.items() if LAYER_ATTR in (f.attrs or {})}
    assert len(scans) == 1
    assert [n for n, f in scans.items() if not f.attrs.get("tirx.is_scheduled", False)] == []
    executable = build(mod, target, tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for seq, batch in itertools.product((1, 17, 300, 2048), (1, 3)):
            matches_torch(executable, m, torch.randn(seq, batch, 6), **TOL)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_dynamic_kernels_dispatch_by_length(target, tmp_path):
    """``scan_tir.relax.dynamic`` over lengths (by their Dim name): every symbolic kernel
    tuned at the shortest and longest into one work dir and replaced by a kernel that
    branches by length; the module right at listed, unlisted and unit lengths. (Batch
    symbolic too goes the same way, one corner more per kernel: test_dynamic_shapes.py.)"""
    torch.manual_seed(3)
    m = OneLayer().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = from_exported_program(
            export(m, (torch.randn(8, 2, 6),), dynamic_shapes=({0: Dim("seq", max=2048)},))
        )
    model = dynamic(mod, target, tmp_path, {"seq": [4, 16]}, trials=2, kernels=2,
                    candidates=1, population=8)
    scans = [g.name_hint for g, f in model.mod.functions.items() if LAYER_ATTR in (f.attrs or {})]
    assert len(scans) == 1 and set(scans) <= set(model.kernels) and model.untuned == {}
    assert all(set(r.table) == {(4,), (16,)} for r in model.kernels.values())
    tasks = (tmp_path / "database_workload.json").read_text().splitlines()
    assert len(tasks) == 2 * len(model.kernels)  # one database: each kernel at two lengths
    executable = model.compile(target)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for seq in (1, 4, 5, 16, 300):
            matches_torch(executable, m, torch.randn(seq, 2, 6), **TOL)
    finally:
        torch.set_num_threads(threads)
