"""Tuning through an RPC tracker with two servers on 127.0.0.1 (``scan-tir tune --rpc``), and
losing one server mid-run: only the measurements it held are lost, the run finishes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import tvm.rpc

from scan_tir import cli
from scan_tir import db as sdb
from scan_tir.tune import default_target, tune
from scan_tir.workloads import get

pytestmark = pytest.mark.slow

KEY = "scan-tir-test"
SIZES = {"seq": 8, "batch": 1, "input": 4, "hidden": 8}
SCRIPT = Path(sys.executable).parent / "scan-tir"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)  # the server and the session it forked
    proc.wait()


def _free_servers(port: int) -> int:
    try:  # connect_tracker itself retries for minutes: probe the port first
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return 0
    summary = tvm.rpc.connect_tracker("127.0.0.1", port).summary()
    return summary["queue_info"].get(KEY, {}).get("free", 0)


@pytest.fixture
def cluster():
    """A tracker and two servers; yields (tracker port, server processes)."""
    port = _free_port()
    procs = [_start("tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port),
                    "--port-end", str(port + 1))]
    try:
        for _ in range(2):
            server_port = _free_port()
            procs.append(_start(
                "tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(server_port),
                "--port-end", str(server_port + 1), "--tracker", f"127.0.0.1:{port}",
                "--key", KEY,
            ))
        deadline = time.monotonic() + 90
        while _free_servers(port) < 2:
            assert time.monotonic() < deadline, "the RPC servers did not register"
            time.sleep(0.5)
        yield port, procs[1:]
    finally:
        for proc in procs:
            _stop(proc)


def test_tune_through_tracker(cluster, tmp_path):
    port, _ = cluster
    result = tune(get("lstm", **SIZES), tmp_path, 2, rpc=f"127.0.0.1:{port}:{KEY}",
                  trials_per_iter=2, population=16)
    assert result.records_after == 2
    db = sdb.load(tmp_path)
    assert all(e.valid for e in db.entries), [e.run_secs for e in db.entries]
    verdicts = sdb.verify(db, default_target())
    assert len(verdicts) == 2 and all(v.ok for v in verdicts), verdicts


def _in_session(server: subprocess.Popen) -> bool:
    """The server holds a session: ``rpc_server`` listens in a worker process and forks one
    more process per session."""
    try:
        return len(psutil.Process(server.pid).children(recursive=True)) >= 2
    except psutil.NoSuchProcess:
        return False


def test_losing_a_server_loses_only_its_measurements(cluster, tmp_path):
    """Server 0 is killed as soon as it opens a session: the candidate it held is lost
    (recorded as failed, run_secs 1e10, with the runner's error in the log) unless TVM's
    tracker client was still connecting, in which case it retries on the survivor
    (tvm/rpc/client.py, TrackerSession.request, max_retry). Either way the others of the
    batch and all later ones are measured by the survivor, the run finishes, and every
    measured record replays correctly."""
    port, servers = cluster
    proc = subprocess.Popen(
        [SCRIPT, "tune", "lstm", "--sizes", ",".join(f"{k}={v}" for k, v in SIZES.items()),
         "--trials", "4", "--trials-per-iter", "2", "--population", "16",
         "-d", str(tmp_path), "--rpc", f"127.0.0.1:{port}:{KEY}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    records = tmp_path / "database_tuning_record.json"
    deadline = time.monotonic() + 400
    try:
        while not _in_session(servers[0]):
            assert proc.poll() is None, "the run ended and server 0 never measured"
            assert time.monotonic() < deadline, "server 0 got no session within 400 s"
            time.sleep(0.01)
        _stop(servers[0])
        before = records.read_text().splitlines() if records.exists() else []
        output, _ = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == cli.OK, output
    db = sdb.load(tmp_path)
    assert len(db.entries) == 4 and not db.problems
    n = len(before)
    in_flight, later = db.entries[n : n + 2], db.entries[n + 2 :]
    assert all(e.valid for e in db.entries[:n])
    lost = sum(not e.valid for e in in_flight)
    assert lost <= 1, [e.run_secs for e in in_flight]
    assert all(e.valid for e in later)
    task_log = (tmp_path / "logs" / "tvm.s_tir.meta_schedule.logging.task_0_main.log").read_text()
    assert task_log.count("RPCRunner: An exception occurred") == lost
    verdicts = sdb.verify(db, default_target())
    assert len(verdicts) == 4 - lost and all(v.ok for v in verdicts), verdicts
