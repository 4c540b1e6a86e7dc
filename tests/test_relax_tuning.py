"""scan_tir.relax.tune and build: a model's kernels tuned with the scan space, the tuned
module built with its weights packed once, replayed and checked against PyTorch; and the
``scan-tir compile`` / ``run`` commands on an ONNX file. Symbolic sizes:
test_relax_symbolic.py.

Tolerance: rtol = atol = 1e-5, as in test_relax_torch.py (fast math, another summation
order). Budgets are tiny: what is tested is that tuned records replay into a correct
module, not their speed (experiments/relax_models.py measures that).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import tvm
from tvm import relax
from util import matches_torch

from scan_tir import ScanLoweringError
from scan_tir.cli import main as cli
from scan_tir.relax import build, from_exported_program, tune
from scan_tir.relax.build import prepacked_weights, scheduled
from scan_tir.relax.tuning import prepare, records_of_tasks, symbolic_sizes, tasks

TOL = {"rtol": 1e-5, "atol": 1e-5}
PREPROC = "meta_schedule.layout_rewrite_preproc"


class Tagger(torch.nn.Module):
    """An LSTM and a linear head: a scan kernel and TVM's own matmul."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8)
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
    tune(model[2], target, work_dir, 16, num_trials_per_iter=4, population=16)
    return work_dir


def test_untuned_build(model, target):
    m, x, mod = model
    matches_torch(build(mod, target), m, x, **TOL)


def test_static_module_needs_no_sizes(model, tmp_path):
    assert symbolic_sizes(model[2]) == []
    with pytest.raises(ScanLoweringError, match="not symbolic sizes of the module"):
        tune(model[2], None, tmp_path / "work", 1, sizes={"seq": 4})
    assert not (tmp_path / "work").exists()


@pytest.mark.slow
def test_tuned_model_replays_correct(model, target, tuned):
    m, x, mod = model
    matches_torch(build(mod, target, tuned), m, x, **TOL)


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
    records of the tasks there, not the fixture's: a task whose space ran out ends a run
    early, and a workload TVM committed in a scheduled form is no task's (records_of_tasks)."""
    records = tuned / "database_tuning_record.json"
    before = records.read_text()
    there = records_of_tasks(tuned, tasks(prepare(model[2], target), target, {}))
    tune(model[2], target, tuned, there, population=16)
    assert records.read_text() == before


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
