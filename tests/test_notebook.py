"""The notebooks run headless, top to bottom (their own asserts check the numerics against
numpy, PyTorch and onnxruntime): lstm_research.ipynb and relax_lstm_model.ipynb.

The notebook tunes ``workloads.get("lstm", **sizes)``, the default lowering options, so the
test database (tests/data/lstm_tiny, a legacy lowering) cannot stand in for its work dir:
it starts empty and the notebook tunes 4 trials of a small LSTM (a population of 16).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from util import FIXTURE_SIZES

NOTEBOOK = Path(__file__).parents[1] / "notebooks" / "lstm_research.ipynb"


@pytest.mark.slow
def test_notebook_runs(tmp_path, monkeypatch):
    env = {
        "SCAN_TIR_NB_TRIALS": "4",
        "SCAN_TIR_NB_POPULATION": "16",
        "SCAN_TIR_NB_SIZES": ",".join(f"{k}={v}" for k, v in FIXTURE_SIZES.items()),
        "SCAN_TIR_NB_WORK": str(tmp_path / "work"),
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)  # the kernel inherits this process's environment
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert "lstm(seq=8, batch=1, input=4, hidden=8) ->" in outputs  # the default options
    assert "4 records verified, 0 failed" in outputs
    if importlib.util.find_spec("torch") is not None:  # else the notebook says how to get it
        assert "max |scan-tir - nn.LSTM|" in outputs
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 2
    assert (tmp_path / "work" / "plots" / "best_so_far.png").exists()


RELAX_NOTEBOOK = NOTEBOOK.parent / "relax_lstm_model.ipynb"


@pytest.mark.slow
def test_relax_notebook_runs(tmp_path, monkeypatch):
    """The PyTorch-model notebook, export to inspection, with a tiny budget: its own asserts
    check the tuned module against PyTorch (and onnxruntime) at four lengths."""
    env = {
        "SCAN_TIR_NB_TRIALS": "8",
        "SCAN_TIR_NB_POPULATION": "16",
        "SCAN_TIR_NB_WORK": str(tmp_path / "work"),
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    nb = nbformat.read(RELAX_NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(RELAX_NOTEBOOK.parent)}}).execute()
    outputs = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    for length in (1, 17, 64, 300):
        assert f"length {length:4}: max |scan-tir - PyTorch|" in outputs
    assert "max |scan-tir - onnxruntime|" in outputs
    assert "the fastest baseline" in outputs
    assert "records," in outputs  # the database summary
    assert (tmp_path / "work" / "database_tuning_record.json").exists()
