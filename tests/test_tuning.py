"""scan_tir.tune: the budget counts the records already there; a run killed with -9 loses
no record already written and resumes to finish."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm.target.codegen import llvm_get_system_cpu
from util import FIXTURE, FIXTURE_OPTIONS, FIXTURE_SIZES, RECORDS

from scan_tir import LoweringOptions, cli
from scan_tir import db as sdb
from scan_tir.tune import default_target, tune
from scan_tir.tune.measure import INPUT_SCALE, alloc_small_inputs
from scan_tir.workloads import get

SCRIPT = Path(sys.executable).parent / "scan-tir"
TUNE = ["tune", "lstm", "--sizes", ",".join(f"{k}={v}" for k, v in FIXTURE_SIZES.items()),
        "--population", "16"]


def test_default_target_is_this_cpu(monkeypatch):
    """Without mcpu, llvm compiles for a "generic" x86-64 (SSE2, no FMA): tuning and every
    rebuild must name this machine's CPU, and use TVM_NUM_THREADS cores."""
    monkeypatch.setenv("TVM_NUM_THREADS", "3")
    target = default_target()
    assert str(target.attrs["mcpu"]) == llvm_get_system_cpu()
    assert int(target.attrs["num-cores"]) == 3


def test_budget_counts_existing_records(tmp_path):
    """4 records there, budget 4: nothing to tune (and no builder started)."""
    work = tmp_path / "w"
    shutil.copytree(FIXTURE, work)
    t = time.perf_counter()
    result = tune(get("lstm", FIXTURE_OPTIONS, **FIXTURE_SIZES), work, 4)
    assert (result.records_before, result.records_after, result.repaired) == (4, 4, 0)
    assert result.seconds == 0 and time.perf_counter() - t < 30


@pytest.mark.slow
def test_killed_run_loses_nothing_and_resumes(tmp_path):
    work = tmp_path / "w"
    argv = [str(SCRIPT), *TUNE, "-d", str(work)]
    proc = subprocess.Popen(
        [*argv, "--trials", "3", "--trials-per-iter", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    records = work / RECORDS
    deadline = time.monotonic() + 400
    try:
        while not (records.exists() and records.read_bytes().count(b"\n") >= 1):
            assert proc.poll() is None, "the tuning run ended before writing a record"
            assert time.monotonic() < deadline, "no record within 400 s"
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the run and its builder/runner workers
        proc.wait()
    written = records.read_text().splitlines()
    # A kill can also land inside TVM's write of a line: simulate that too.
    with records.open("a") as fh:
        fh.write(written[0][:100])
    db = sdb.load(work)
    assert [e.line for e in db.entries] == list(range(1, len(written) + 1))
    assert [p.line for p in db.problems] == [len(written) + 1]

    done = subprocess.run([*argv, "--trials", "3", "--trials-per-iter", "2"],
                          capture_output=True, text=True, timeout=400)
    assert done.returncode == cli.SKIPPED_LINES, done.stderr  # 3: a cut line was dropped
    assert "dropped unreadable line" in done.stderr
    assert "3 records" in done.stdout and f"({len(written)} before this run" in done.stdout
    after = records.read_text().splitlines()
    assert after[: len(written)] == written  # the earlier records, untouched
    assert len(list(work.glob(RECORDS + ".bak-*"))) == 1
    db = sdb.load(work)
    assert not db.problems and len(db.entries) == 3
    verdicts = sdb.verify(db, default_target())
    assert verdicts and all(v.ok for v in verdicts), verdicts
    # Timed by local_runner: five repeats per candidate, not MetaSchedule's one.
    assert all(len(json.loads(line)[1][1]) == 5 for line in after)


def test_runner_inputs_are_small():
    """MetaSchedule's [1, 10] inputs saturate a recurrence's gates; local_runner's do not."""
    info = [["TENSOR", "float32", [64, 32]], ["TENSOR", "int32", [3]]]
    (floats, ints), (again, _) = alloc_small_inputs(tvm.cpu(), info, 2)
    assert np.abs(floats.numpy()).max() <= INPUT_SCALE and floats.numpy().std() > INPUT_SCALE / 4
    assert not ints.numpy().any() and again.shape == (64, 32)


@pytest.mark.slow
def test_fast_math_tunes_the_rewritten_function(tmp_path):
    """``scan-tir tune --legacy --fast-math``: the database's workload has no libm activation
    left, and its record replays to the numpy reference (``db verify``)."""
    work = tmp_path / "w"
    argv = [*TUNE, "--trials", "1", "--trials-per-iter", "1", "-d", str(work), "--legacy",
            "--fast-math"]
    assert cli.main(argv) == cli.OK
    db = sdb.load(work)
    (workload,) = [w for w in db.workloads if w is not None]
    assert db.workload(0).options == LoweringOptions(fast_math=True, copies_in_step=False)
    script = workload.mod.script()
    assert "T.reinterpret" in script
    assert not any(f"T.{op}(" in script for op in ("exp", "tanh", "sigmoid"))
    verdicts = sdb.verify(db, default_target())
    assert verdicts and all(v.ok for v in verdicts), verdicts
