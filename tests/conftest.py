"""Test-wide settings and the fixtures every module shares.

- Two worker threads, as on the target machine, so that a schedule that parallelises a
  step really runs concurrently (races hide on one thread).
- tests/ on ``sys.path`` for the helper modules (util.py, workloads.py, tuning.py): test
  modules import helpers from those, never from one another.
- Markers (pytest.ini): ``slow`` on every test that tunes (``ms.tune_tir``,
  ``scan_tir.tune``, the CLI's ``tune``, RPC, the notebook), so that
  ``pytest -m "not slow"`` is the fast tier; ``experimental`` on the tests of
  ``scan_tir.experimental``, which run in the full suite like any other.
"""

import os
import shutil
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TVM_NUM_THREADS", "2")
sys.path.insert(0, os.path.dirname(__file__))

from tvm.target import Target  # noqa: E402
from util import FIXTURE  # noqa: E402

from scan_tir.tune import PooledBuilder, build_candidate, default_target  # noqa: E402


@pytest.fixture(scope="session")
def target() -> Target:
    """What the tests schedule and tune for: llvm's generic x86-64 (SSE2: 4 float lanes,
    16 vector registers, which test_register_tiling counts on), 2 cores. Not the host's
    CPU, so that design spaces are the same on every machine."""
    return Target({"kind": "llvm", "num-cores": 2})


@pytest.fixture(scope="session")
def host_target() -> Target:
    """What the database tools use by default: this machine's CPU
    (``scan_tir.tune.default_target``)."""
    return default_target()


@pytest.fixture(scope="session")
def builder() -> PooledBuilder:
    """One builder for every tuning test, its worker process kept from test to test
    (PooledBuilder; LocalBuilder starts fresh workers for every batch). It builds with
    scan_tir.tune.build_candidate (MetaSchedule's build without the import of tensor_intrin
    in every fresh worker). One worker: two, each importing TVM on these 2 busy cores,
    were slower for 4 candidates."""
    return PooledBuilder(max_workers=1, f_build=build_candidate)


@pytest.fixture
def tiny(tmp_path) -> Path:
    """A copy of the test database (util.FIXTURE), free to damage."""
    out = tmp_path / "tiny"
    shutil.copytree(FIXTURE, out)
    return out
