"""scan_tir.relax.tune and build: a model's kernels tuned with the scan space, the tuned
module built with its weights packed once, replayed and checked against PyTorch; and the
``scan-tir compile`` / ``run`` commands on an ONNX file.

Tolerance: rtol = atol = 1e-5, as in test_relax_torch.py (fast math, another summation
order). Budgets are tiny: what is tested is that tuned records replay into a correct
module, not their speed (experiments/relax_models.py measures that).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch
import tvm
from torch.export import Dim
from tvm import relax

from scan_tir import ScanLoweringError
from scan_tir.cli import main as cli
from scan_tir.db.records import load
from scan_tir.relax import build, dynamic, export, from_exported_program, tune
from scan_tir.relax.build import prepacked_weights, scheduled
from scan_tir.relax.layers import LAYER_ATTR
from scan_tir.relax.tuning import prepare, symbolic_sizes

TOL = {"rtol": 1e-5, "atol": 1e-5}
PREPROC = "meta_schedule.layout_rewrite_preproc"


class Tagger(torch.nn.Module):
    """A 2-layer LSTM and a linear head: two scan kernels and TVM's own matmul."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8, num_layers=2)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor):
        y, (h, c) = self.lstm(x)
        return self.head(y), h, c


def exported(model: torch.nn.Module, x: torch.Tensor) -> tvm.IRModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return from_exported_program(torch.export.export(model.eval(), (x,)))


@pytest.fixture(scope="module")
def model() -> tuple[torch.nn.Module, torch.Tensor, tvm.IRModule]:
    torch.manual_seed(0)
    m, x = Tagger().eval(), torch.randn(24, 1, 6)
    return m, x, exported(m, x)


@pytest.fixture(scope="module")
def tuned(model, target, tmp_path_factory):
    """A work dir with a few records of every kernel."""
    work_dir = tmp_path_factory.mktemp("relax-tune")
    tune(model[2], target, work_dir, 20, num_trials_per_iter=4, population=16)
    return work_dir


def check(executable, m: torch.nn.Module, x: torch.Tensor) -> None:
    vm = relax.VirtualMachine(executable, tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x.numpy()))
    with torch.no_grad():
        ref = m(x)
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g.numpy(), r.numpy(), **TOL)


def test_untuned_build(model, target):
    m, x, mod = model
    check(build(mod, target), m, x)


def test_static_module_needs_no_sizes(model, tmp_path):
    assert symbolic_sizes(model[2]) == []
    with pytest.raises(ScanLoweringError, match="not symbolic sizes of the module"):
        tune(model[2], None, tmp_path / "work", 1, sizes={"seq": 4})
    assert not (tmp_path / "work").exists()


@pytest.mark.slow
def test_tuned_model_replays_correct(model, target, tuned):
    m, x, mod = model
    check(build(mod, target, tuned), m, x)


@pytest.mark.slow
def test_tuned_kernels_scheduled_and_weights_packed_once(model, target, tuned):
    """Every scan kernel took a record, and no call of ``main`` repacks a weight: the
    repacking blocks RewriteLayout left in the kernels were split off and folded into
    constants at build time."""
    fused = scheduled(prepare(model[2], target), target, tuned)
    scans = [f for f in fused.functions.values() if "scan_tir.rnn_layer" in (f.attrs or {})]
    assert scans and all(f.attrs.get("tirx.is_scheduled", False) for f in scans)
    assert any(PREPROC in f.script() for f in scans), "no weight was repacked: nothing tested"
    packed = prepacked_weights(fused)
    called = set()
    relax.analysis.post_order_visit(
        packed["main"],
        lambda e: isinstance(e, relax.Call)
        and e.op.same_as(tvm.ir.Op.get("relax.call_tir"))
        and called.add(e.args[0].name_hint),
    )
    for gv, func in packed.functions.items():
        if gv.name_hint in called and isinstance(func, tvm.tirx.PrimFunc):
            assert PREPROC not in func.script(), f"{gv.name_hint} repacks at every call"


@pytest.mark.slow
def test_tune_resumes(model, target, tuned):
    """A second run with the budget already met measures nothing. The budget is the
    records there that load, not the fixture's: a task whose space ran out ends a run
    early, and a record whose trace TVM cannot replay is dropped by the repair."""
    records = tuned / "database_tuning_record.json"
    before = set(records.read_text().splitlines())
    tune(model[2], target, tuned, len(load(tuned).entries), population=16)
    assert set(records.read_text().splitlines()) <= before


class Stacked(torch.nn.Module):
    """A 2-layer LSTM, its outputs flat: two scan kernels, no other model kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8, num_layers=2)

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
    m = Stacked().eval()
    dims = {0: Dim("seq", min=1, max=2048), 1: Dim("batch", min=1, max=64)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = from_exported_program(export(m, (torch.randn(40, 2, 6),), dynamic_shapes=(dims,)))
    sizes = {"seq": 40, "batch": 2}
    tune(mod, target, tmp_path, 12, sizes=sizes, num_trials_per_iter=6, population=16)
    fused = scheduled(prepare(mod, target), target, tmp_path)
    scans = {gv.name_hint: f for gv, f in fused.functions.items() if LAYER_ATTR in (f.attrs or {})}
    assert len(scans) == 2
    assert [n for n, f in scans.items() if not f.attrs.get("tirx.is_scheduled", False)] == []
    executable = build(mod, target, tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for seq, batch in itertools.product((1, 17, 300, 2048), (1, 3)):
            check(executable, m, torch.randn(seq, batch, 6))
    finally:
        torch.set_num_threads(threads)


class OneLayer(torch.nn.Module):
    """One LSTM layer, its outputs flat: one scan kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8)

    def forward(self, x: torch.Tensor):
        y, (h, c) = self.lstm(x)
        return y, h, c


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
            check(executable, m, torch.randn(seq, 2, 6))
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory):
    pytest.importorskip("onnx")
    torch.manual_seed(1)
    m, x = torch.nn.GRU(4, 8, num_layers=2).eval(), torch.randn(10, 1, 4)
    path = tmp_path_factory.mktemp("onnx") / "gru.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), str(path), dynamo=False, input_names=["x"])
    with torch.no_grad():
        y, h = m(x)
    return path, x.numpy(), [y.numpy(), h.numpy()]


def test_cli_compile_and_run(onnx_file, tmp_path, capsys):
    path, x, ref = onnx_file
    lib = tmp_path / "gru.so"
    code = cli(["compile", str(path), "--trials", "0", "-d", str(tmp_path / "wd"), "-o", str(lib)])
    assert code == 0
    assert f"scan-tir run {lib} x.npy" in capsys.readouterr().out
    np.save(tmp_path / "x.npy", x)
    saved = tmp_path / "out.npz"
    code = cli(["run", str(lib), str(tmp_path / "x.npy"), "--repeats", "2", "--save", str(saved)])
    assert code == 0
    outputs = np.load(saved)
    for i, r in enumerate(ref):
        np.testing.assert_allclose(outputs[f"arr_{i}"].reshape(r.shape), r, **TOL)


def test_cli_compile_refuses_other_files(tmp_path, capsys):
    other = tmp_path / "model.pkl"
    other.write_bytes(b"")
    assert cli(["compile", str(other), "--trials", "0", "-d", str(tmp_path), "-o", "x.so"]) == 2
    assert ".onnx, .pt2" in capsys.readouterr().err
