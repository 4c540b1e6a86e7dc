"""scan_tir.db on a small real database and on damaged copies of it.

tests/data/lstm_tiny (util.FIXTURE) holds 4 records of ``lstm(seq=8, batch=1, input=4,
hidden=8)`` lowered with ``LoweringOptions.legacy()``; the ``tiny`` fixture is a copy.
"""

from __future__ import annotations

import csv
import json
import math
import shutil

import numpy as np
import pytest
import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target
from util import FIXTURE_SIZES, RECORDS, damage, raw_means_ms, untagged

from scan_tir import db as sdb
from scan_tir import scan_space, workloads
from scan_tir.db import numerics
from scan_tir.db.numerics import unrunnable_here
from scan_tir.db.plot import best_so_far
from scan_tir.workloads import Workload


def test_load_reads_every_record(tiny):
    db = sdb.load(tiny)
    assert not db.problems
    assert [e.line for e in db.entries] == [1, 2, 3, 4]
    assert [e.mean_ms for e in db.entries] == pytest.approx(raw_means_ms(tiny))
    assert db.workload_name(0) == "lstm(seq=8, batch=1, input=4, hidden=8) [legacy]"


def test_damaged_lines_are_named_and_the_others_read(tiny):
    good = damage(tiny)
    # TVM's own loader refuses the whole database for one cut line: why load() exists.
    with pytest.raises(Exception, match="Unexpected end"):
        ms.database.JSONDatabase(work_dir=str(tiny), allow_missing=False)
    db = sdb.load(tiny)
    assert len(db.entries) == len(good) == 4
    why = {p.line: p.reason for p in db.problems}
    assert set(why) == {5, 6}
    assert "line 8 of database_workload.json" in why[5] and "missing" in why[5]
    assert "cut short" in why[6]


def test_cut_workload_line(tiny):
    path = tiny / "database_workload.json"
    path.write_text(path.read_text()[:5000])
    db = sdb.load(tiny)
    assert db.entries == []
    assert db.problems[0].file == "database_workload.json" and "cut short" in db.problems[0].reason
    assert [p.line for p in db.problems[1:]] == [1, 2, 3, 4]
    assert all("is unreadable" in p.reason for p in db.problems[1:])


def test_repair_keeps_a_backup_and_tvm_loads_the_result(tiny):
    good = damage(tiny)
    original = (tiny / RECORDS).read_bytes()
    dropped = sdb.repair(tiny)
    assert sorted(p.line for p in dropped) == [5, 6]
    (backup,) = tiny.glob(RECORDS + ".bak-*")
    assert backup.read_bytes() == original
    assert (tiny / RECORDS).read_text().splitlines() == good
    assert len(ms.database.JSONDatabase(work_dir=str(tiny), allow_missing=False)) == 4
    assert sdb.repair(tiny) == []  # nothing left to repair: no second backup
    assert len(list(tiny.glob(RECORDS + ".bak-*"))) == 1


def test_prune_keeps_the_best_lines_verbatim(tiny):
    original = (tiny / RECORDS).read_text().splitlines()
    means = raw_means_ms(tiny)
    best_two = sorted(range(len(means)), key=means.__getitem__)[:2]
    assert sdb.prune(tiny, 2) == (4, 2)
    assert (tiny / RECORDS).read_text().splitlines() == [original[i] for i in sorted(best_two)]
    assert (tiny / (RECORDS + ".bak-prune")).read_text().splitlines() == original
    assert len(ms.database.JSONDatabase(work_dir=str(tiny), allow_missing=False)) == 2
    with pytest.raises(ValueError, match="at least 1"):
        sdb.prune(tiny, 0)


def test_empty_and_wrong_paths(tmp_path):
    (tmp_path / RECORDS).write_text("")
    db = sdb.load(tmp_path)
    assert db.entries == [] and db.problems == [] and sdb.summary(db) == []
    with pytest.raises(sdb.DatabaseError, match="no such directory"):
        sdb.load(tmp_path / "nope")
    with pytest.raises(sdb.DatabaseError, match="no database_tuning_record.json"):
        sdb.load(tmp_path.parent)


def test_summary_and_top_match_the_raw_file(tiny, host_target):
    db = sdb.load(tiny)
    means = raw_means_ms(tiny)
    (row,) = sdb.summary(db)
    assert (row.records, row.valid) == (4, 4)
    assert row.best_ms == pytest.approx(min(means))
    assert row.best_trial == means.index(min(means)) + 1
    rows = sdb.top(db, 3, host_target)
    assert [r.entry.mean_ms for r in rows] == pytest.approx(sorted(means)[:3])
    assert rows[0].untuned_ms > 0
    assert rows[0].speedup == pytest.approx(rows[0].untuned_ms / min(means))


def test_verify_checks_numerics_against_numpy(tiny, host_target):
    db = sdb.load(tiny)
    verdicts = sdb.verify(db, host_target)
    assert len(verdicts) == 4 and all(v.ok for v in verdicts), verdicts
    assert all(0 <= v.max_error < 1e-4 for v in verdicts)


def test_verify_fails_on_wrong_reference(tiny, host_target, monkeypatch):
    """Able to fail: a reference off by 1e-2 makes every record fail."""
    right = Workload.numpy
    monkeypatch.setattr(Workload, "numpy", lambda self, xs: [a + 1e-2 for a in right(self, xs)])
    verdicts = sdb.verify(sdb.load(tiny), host_target)
    assert verdicts and not any(v.ok for v in verdicts)
    assert all("wrong result" in v.problem and v.max_error > 5e-3 for v in verdicts)


def test_verify_without_zoo_reference_uses_the_untuned_output(tiny, host_target, monkeypatch):
    monkeypatch.setattr(sdb.TuningDB, "workload", lambda self, index: None)
    db = sdb.load(tiny)
    c = numerics.case(db, 0, host_target)
    assert "untuned" in c.reference and len(c.check) == len(db.func(0).params)
    # The fallback reference is the real LSTM: the outputs equal numpy's.
    ref = workloads.get("lstm", **FIXTURE_SIZES).numpy(c.args[:5])
    np.testing.assert_allclose(c.expected[5], ref[0], rtol=1e-4, atol=1e-5)
    assert all(v.ok for v in sdb.verify(db, host_target))


def test_verify_at_another_length(tiny, host_target, monkeypatch):
    """The records tuned at 8 steps replayed at 37 (prime: TVM re-derives their tiles of
    the rows over seq) match numpy there. Able to fail: a reference wrong at 37 steps only
    fails every record, so they were run at 37, against the reference at 37."""
    db = sdb.load(tiny)
    verdicts = sdb.verify(db, host_target, seq=37)
    assert len(verdicts) == 4 and all(v.ok for v in verdicts), verdicts
    right = Workload.numpy
    monkeypatch.setattr(
        Workload, "numpy",
        lambda self, xs: [a + 1e-2 * (self.sizes["seq"] == 37) for a in right(self, xs)],
    )
    verdicts = sdb.verify(db, host_target, seq=37)
    assert len(verdicts) == 4 and not any(v.ok for v in verdicts)
    assert all("wrong result" in v.problem and "lstm(seq=37," in v.problem for v in verdicts)


def test_verify_gives_a_verdict_for_a_build_that_does_not_finish(tiny, host_target):
    """A build past its time is killed and failed, and the check goes on to the next; with
    time enough, the same builders' libraries pass."""
    db = sdb.load(tiny)
    verdicts = sdb.verify(db, host_target, build_timeout_s=0.01)
    assert len(verdicts) == 4 and not any(v.ok for v in verdicts)
    assert all("Timeout" in v.problem and math.isnan(v.max_error) for v in verdicts), verdicts
    verdicts = sdb.verify(db, host_target, build_timeout_s=120, own_targets=True)
    assert len(verdicts) == 4 and all(v.ok for v in verdicts), verdicts


def test_verify_does_not_run_code_for_a_cpu_this_one_is_not(tiny, host_target):
    """--own-targets on a machine of another CPU: a record tuned where AVX-512 was would
    kill the process with an illegal instruction (seen on a Zen 3 with Zen 5 records); it
    gets a verdict naming what this CPU lacks instead."""
    richer = next((c for c in ("znver5", "graniterapids", "sapphirerapids")
                   if unrunnable_here(Target({"kind": "llvm", "mcpu": c}))), None)
    if richer is None:
        pytest.skip("this CPU has every extension of the CPUs tried")
    path = tiny / "database_tuning_record.json"
    path.write_text(path.read_text().replace('"kind":"llvm",', f'"kind":"llvm","mcpu":"{richer}",'))
    verdicts = sdb.verify(sdb.load(tiny), host_target, own_targets=True)
    assert len(verdicts) == 4 and not any(v.ok for v in verdicts)
    assert all(v.problem.startswith(f"not run: built for {richer}, whose ") for v in verdicts)
    assert all("--own-targets" in v.problem and math.isnan(v.max_error) for v in verdicts)
    assert all(v.ok for v in sdb.verify(sdb.load(tiny), host_target))  # built for this CPU


def test_verify_at_another_length_needs_a_zoo_workload(tiny, host_target, monkeypatch):
    """A workload the zoo cannot rebuild: a verdict per record that says so, not a crash."""
    monkeypatch.setattr(sdb.TuningDB, "workload", lambda self, index: None)
    verdicts = sdb.verify(sdb.load(tiny), host_target, seq=37)
    assert len(verdicts) == 4 and all(math.isnan(v.max_error) for v in verdicts)
    assert all("not from the zoo) cannot be rebuilt at 37 steps" in v.problem for v in verdicts)


def fresh_record(db: sdb.TuningDB, target: tvm.target.Target) -> ms.database.TuningRecord:
    """A record as the tuner makes one from the current rules, without measuring: a design
    space's trace, simplified, replayed, then postprocessed (the fixture's records may come
    from an older version of the rules)."""
    wl = db.workloads[0]
    ctx = ms.TuneContext(mod=wl.mod, target=target, space_generator=scan_space(target),
                         task_name="fresh")
    for space in ctx.generate_design_space():
        sch = s_tir.Schedule(wl.mod)
        space.trace.simplified(remove_postproc=True).apply_to_schedule(sch, remove_postproc=True)
        sch.enter_postproc()
        if all(pp.apply(sch) for pp in ctx.space_generator.postprocs):
            return ms.database.TuningRecord(sch.trace, wl, [1e-3], target, None)
    raise AssertionError("no design space passes the postprocs")


def test_provenance_names_a_maker_for_every_instruction(tiny, host_target):
    record = fresh_record(sdb.load(tiny), host_target)
    steps = sdb.provenance(record, host_target)
    assert [s.python for s in steps] == list(record.trace.as_python())
    makers = {s.made_by for s in steps}
    assert not any(m.startswith("?") or m.startswith("postproc (") for m in makers), makers
    tiling = "Scoped(Preferred(RegisterTiling, Alternatives(MultiLevelTiling, RegisterTiling))"
    assert any(m.startswith(tiling) for m in makers), makers
    assert {"ParallelizeVectorizeUnrollStep", "RewriteStepParallelVectorizeUnroll"} <= makers


def test_show(tiny):
    db = sdb.load(tiny)
    shown = sdb.show(db, 2)
    assert [s.python for s in shown.steps] == list(db.entries[2].record.trace.as_python())
    assert shown.violations == [] and shown.replay_error == ""
    text = sdb.render(shown)
    assert "scan invariants: kept" in text and "sch.sample_perfect_tile" in text
    unmatched = sum(s.made_by.startswith("?") for s in shown.steps)
    assert ("design space of the current rules" in text.splitlines()[-1]) == (unmatched > 0)
    with pytest.raises(IndexError, match="no record 9"):
        sdb.show(db, 9)


def test_export(tiny, tmp_path):
    db = sdb.load(tiny)
    sdb.to_csv(db, tmp_path / "r.csv")
    sdb.to_json(db, tmp_path / "r.json")
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert [float(r["mean_ms"]) for r in rows] == pytest.approx(raw_means_ms(tiny))
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [r["trial"] for r in doc["records"]] == [1, 2, 3, 4] and doc["problems"] == []


def test_plot(tiny, tmp_path):
    db = sdb.load(tiny)
    paths = sdb.plot(db, tmp_path / "png")
    assert [p.name for p in paths] == ["best_so_far.png", "latency_hist.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)
    curve = best_so_far(db, 0)
    assert curve == sorted(curve, reverse=True)
    assert curve[-1] == pytest.approx(min(raw_means_ms(tiny)))


def test_compare(tiny, tmp_path):
    half = tmp_path / "half"
    shutil.copytree(tiny, half)
    lines = (tiny / RECORDS).read_text().splitlines()
    (half / RECORDS).write_text("\n".join(lines[:2]) + "\n")
    (row,) = sdb.compare(sdb.load(half), sdb.load(tiny))
    assert (row.a.records, row.b.records) == (2, 4)
    assert row.ratio == pytest.approx(min(raw_means_ms(half)) / min(raw_means_ms(tiny)))
    # A database of a workload the zoo did not make: tiny's function without its tag (the
    # tag is part of the function, so this is another workload), one record.
    other = tmp_path / "b"
    other.mkdir()
    func = untagged(sdb.load(tiny).func(0))
    line = json.dumps(ms.database.Workload(tvm.IRModule({"main": func})).as_json())
    (other / "database_workload.json").write_text(line + "\n")
    (other / RECORDS).write_text((tiny / RECORDS).open().readline())
    rows = sdb.compare(sdb.load(tiny), sdb.load(other))
    assert [(r.a.records, r.b.records) for r in rows] == [(4, 0), (0, 1)]
    assert rows[1].name == "workload #0 (not from the zoo)"
    assert math.isnan(rows[0].ratio)


def test_numerics_of_the_untuned_function(tiny, host_target):
    db = sdb.load(tiny)
    lib = numerics.build(db.func(0), host_target)
    c = numerics.case(db, 0, host_target)
    out = numerics.call(lib, c.args)
    assert numerics.max_error(out, c) < 1e-4
    assert numerics.latency_ms(lib, c.args, repeat=2) > 0
