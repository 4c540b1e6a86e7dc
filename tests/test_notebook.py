"""notebooks/lstm_research.ipynb runs headless, top to bottom (its own asserts check the
numerics against numpy and PyTorch).

Its work dir starts as a copy of the test database (4 records of the notebook's workload at
the sizes given here) and the budget is 4, so the tuning cell takes the resume path and
measures nothing new: tuning itself is tested in test_tuning.py and test_rpc.py, and costs
minutes here.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from test_db import FIXTURE

NOTEBOOK = Path(__file__).parents[1] / "notebooks" / "lstm_research.ipynb"


def test_notebook_runs(tmp_path, monkeypatch):
    shutil.copytree(FIXTURE, tmp_path / "work")
    env = {
        "SCAN_TIR_NB_TRIALS": "4",
        "SCAN_TIR_NB_POPULATION": "16",
        "SCAN_TIR_NB_SIZES": "seq=8,batch=1,input=4,hidden=8",
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
    assert "4 records verified, 0 failed" in outputs
    if importlib.util.find_spec("torch") is not None:  # else the notebook says how to get it
        assert "max |scan-tir - nn.LSTM|" in outputs
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 2
    assert (tmp_path / "work" / "plots" / "best_so_far.png").exists()
