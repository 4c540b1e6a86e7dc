"""The ``scan-tir`` command: output, and the documented exit codes on good and bad input.

Most cases call ``scan_tir.cli.main`` in-process (fast); the installed console script is run
as a subprocess where it matters that the process itself exits cleanly (a damaged database
must give exit code 3, never a C++ abort).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from util import RECORDS, damage, raw_means_ms

from scan_tir import cli
from scan_tir.workloads import Workload

SCRIPT = Path(sys.executable).parent / "scan-tir"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_summary_top_show(tiny, capsys):
    code, out, _ = run(capsys, "db", "summary", tiny)
    assert code == cli.OK
    assert "lstm(seq=8, batch=1, input=4, hidden=8) [legacy]" in out
    assert f"{min(raw_means_ms(tiny)):.4g}" in out
    code, out, _ = run(capsys, "db", "top", tiny, "-k", "2", "--no-baseline")
    assert code == cli.OK and len(out.strip().splitlines()) == 3
    code, out, _ = run(capsys, "db", "show", tiny, "--record", "0")
    assert code == cli.OK and "scan invariants: kept" in out and "Scoped(" in out


def test_export_plot_compare(tiny, tmp_path, capsys):
    code, _, _ = run(capsys, "db", "export", tiny, "--json", tmp_path / "r.json")
    assert code == cli.OK
    assert len(json.loads((tmp_path / "r.json").read_text())["records"]) == 4
    code, out, _ = run(capsys, "db", "plot", tiny, "--out", tmp_path / "png")
    assert code == cli.OK and out.count(".png") == 2
    code, out, _ = run(capsys, "db", "compare", tiny, tiny)
    assert code == cli.OK and out.strip().splitlines()[1].split()[-1] == "1"
    code, out, _ = run(capsys, "db", "prune", tiny, "--keep", "3")
    assert code == cli.OK and "kept 3 of 4 records" in out
    code, out, _ = run(capsys, "db", "summary", tiny)
    assert code == cli.OK and out.strip().splitlines()[1].split()[-4] == "3"


def test_verify_exit_codes(tiny, capsys, monkeypatch):
    code, out, _ = run(capsys, "db", "verify", tiny)
    assert code == cli.OK and "4 ok, 0 failed" in out
    right = Workload.numpy
    monkeypatch.setattr(Workload, "numpy", lambda self, xs: [a * 1.01 for a in right(self, xs)])
    code, out, _ = run(capsys, "db", "verify", tiny)
    assert code == cli.VERIFY_FAILED and "0 ok, 4 failed" in out and "wrong result" in out


def test_verify_at_another_length(tiny, capsys):
    code, out, err = run(capsys, "db", "verify", tiny, "--seq", "24")
    assert code == cli.OK and "verified 4 records at 24 steps: 4 ok, 0 failed" in out
    assert err.count("verify: record") == 4


def test_verify_some_records(tiny, capsys):
    """A long check split in pieces: only the records asked for, counted as such."""
    code, out, err = run(capsys, "db", "verify", tiny, "--records", "1-2")
    assert code == cli.OK and "verified 2 records (records 1-2): 2 ok, 0 failed" in out
    assert "verify: record 1 (1/2)" in err and "verify: record 2 (2/2)" in err
    code, out, err = run(capsys, "db", "verify", tiny, "--records", "3-")
    assert code == cli.OK and "verified 1 records (records 3-): 1 ok" in out


@pytest.mark.parametrize("text", ["3-1", "x-2", "2", "-1"])
def test_verify_refuses_a_malformed_range(tiny, capsys, text):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["db", "verify", str(tiny), "--records", text])
    assert exit_.value.code == cli.BAD_INPUT and "--records" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["db", "summary", "/nonexistent/dir"], "no such directory"),
        (["db", "show", "{tiny}", "--record", "4"], "no record 4"),
        (["db", "export", "{tiny}"], "--csv FILE and/or --json FILE"),
        (["tune", "gru3000", "--trials", "1", "-d", "{tmp}"], "unknown workload"),
        (["tune", "lstm", "--sizes", "seq=x", "--trials", "1", "-d", "{tmp}"], "--sizes"),
        (["tune", "lstm", "--sizes", "depth=2", "--trials", "1", "-d", "{tmp}"], "unknown size"),
        (["tune", "lstm", "--trials", "0", "-d", "{tmp}"], "at least 1"),
        (["tune", "lstm", "--trials", "1", "-d", "{tmp}", "--rpc", "host:key"], "HOST:PORT:KEY"),
        (["tune", "lstm", "--trials", "1", "-d", "{tiny}/{records}"], "File exists"),
        (["db", "export", "{tiny}", "--csv", "/nonexistent/r.csv"], "No such file"),
        (["db", "prune", "{tiny}", "--keep", "0"], "at least 1"),
        (["db", "verify", "{tiny}", "--seq", "0"], "--seq must be at least 1"),
        (["db", "verify", "{tiny}", "--records", "9-"], "no record in 9-; the database has 4"),
        (["tune", "lstm", "--trials", "1", "-d", "{tmp}", "--out", "{tmp}/x.so"],
         "--out goes with --dynamic"),
        (["tune", "lstm", "--trials", "1", "-d", "{tmp}", "--time-everywhere"],
         "--time-everywhere goes with --dynamic"),
        (["tune", "lstm", "--trials", "1", "-d", "{tmp}", "--packed"],
         "--packed goes with --dynamic"),
        (["tune", "lstm", "--trials", "1", "-d", "{tmp}", "--dynamic", "seq=4,x"],
         "expected SIZE=V,V,..., got 'seq=4,x'"),
        (["tune", "lstm", "--trials", "1", "-d", "{tmp}", "--dynamic", "seq=4", "--per-scan"],
         "drop --per-scan and --rpc"),
        (["tune", "lstm", "--trials", "1", "-d", "{tmp}", "--dynamic", "depth=4"],
         r"unknown size(s) ['depth']"),
        (["tune", "lstm", "--trials", "1", "-d", "{tmp}", "--dynamic", "seq=0,4"],
         "every size needs positive instances"),
        (["tune", "lstm", "--trials", "1", "-d", "{tmp}", "--chunks", "4", "--per-scan"],
         "--per-scan does not go with --chunks"),
    ],
)
def test_bad_input_exits_2(tiny, tmp_path, capsys, argv, message):
    argv = [a.format(tiny=tiny, tmp=tmp_path / "w", records=RECORDS) for a in argv]
    code, _, err = run(capsys, *argv)
    assert code == cli.BAD_INPUT and message in err


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["db", "frobnicate"])
    assert exc.value.code == cli.BAD_INPUT


def test_empty_database(tmp_path, capsys):
    (tmp_path / RECORDS).write_text("")
    code, out, err = run(capsys, "db", "summary", tmp_path)
    assert code == cli.OK and "no readable tuning records" in err
    code, out, _ = run(capsys, "db", "verify", tmp_path)
    assert code == cli.OK and "verified 0 records" in out


def test_damaged_database_via_console_script(tiny):
    """A subprocess, so that an abort would show as a signal: exit 3, lines named, rest read."""
    damage(tiny)
    for argv in (["db", "summary", tiny], ["db", "verify", tiny]):
        proc = subprocess.run(
            [SCRIPT, *map(str, argv)], capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == cli.SKIPPED_LINES, proc.stderr
        assert f"{RECORDS}:5: its workload (line 8" in proc.stderr
        assert f"{RECORDS}:6: not JSON (cut short" in proc.stderr
    assert "4 ok, 0 failed" in proc.stdout


def test_help_lists_exit_codes():
    proc = subprocess.run([SCRIPT, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "exit codes:" in proc.stdout and "verification" in proc.stdout


@pytest.mark.parametrize(
    "workload, sizes, forms",
    [
        ("selective_scan", "seq=16,batch=1,d_model=8,d_state=4", ["sequential", "chunked 4"]),
        ("lstm", "seq=8,batch=1,input=4,hidden=4", ["sequential"]),
    ],
)
def test_tune_offers_the_chunked_form_of_a_linear_scan(tmp_path, capsys, workload, sizes, forms):
    argv = ["tune", workload, "--sizes", sizes, "--trials", "2", "--population", "8",
            "-d", tmp_path, "--chunks", "4"]
    code, out, _ = run(capsys, *argv)
    assert code == cli.OK
    assert re.findall(r"\[([^\]]+)\]: best [0-9.e+-]+ ms", out) == forms
    assert ("no scan is linear in its state" in out) == (forms == ["sequential"])
    assert out.splitlines()[-1].startswith("fastest: ")
