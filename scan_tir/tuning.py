"""Tuning a workload into a work dir, resumably, with progress on stderr.

:func:`tune` is what the ``scan-tir tune`` command and the notebooks call: ``ms.tune_tir``
with :func:`scan_tir.scan_space`, a builder that skips MetaSchedule's slow import of tensor
intrinsics (:func:`build_candidate`), a local or RPC runner, and a progress line that
follows the database as it grows. The budget counts the records already in the work dir, so a run
that was killed continues where it stopped instead of starting over; the database is
repaired first (:func:`scan_tir.db.repair`), because TVM refuses one whose last line a
kill cut short.

A record reaches the database only as one whole line appended and flushed by TVM
(json_database.cc, ``JSONFileAppendLine``), after its batch was built and run: a kill at
any moment loses the batch in flight and at worst cuts the line being written.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target
from tvm.target.codegen import llvm_get_system_cpu

from .db.records import RECORDS_FILE, load, repair
from .prepacked import prepacked
from .space import scan_space
from .workloads import Workload

T0 = time.perf_counter()


def log(msg: str) -> None:
    """Progress to stderr (stdout holds only results), with clock time and elapsed time,
    so that a long tuning run can be followed and its stages timed from the log alone."""
    now = datetime.now().strftime("%H:%M:%S")
    print(f"[{now} +{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def default_target() -> Target:
    """llvm for this machine's CPU, with as many cores as TVM will use (TVM_NUM_THREADS, else
    all).

    The CPU matters: without ``mcpu`` TVM's llvm target compiles for LLVM's "generic" x86-64,
    i.e. SSE2 (4-wide vectors, no FMA); on this project's Zen 5 machines the same schedule
    runs about 20% faster for ``znver5`` (notes.md section 3). The target is stored in every
    record, so tools that rebuild a schedule use this same default.
    """
    cores = int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1)
    return Target({"kind": "llvm", "mcpu": llvm_get_system_cpu(), "num-cores": cores})


def records_file(work_dir: Path) -> Path:
    """Where ``ms.tune_tir``'s JSON database appends one line per measured candidate."""
    return Path(work_dir) / RECORDS_FILE


def count_lines(path: Path) -> int:
    """Records written so far; 0 before the database's first commit."""
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0


LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \[INFO\] (.*)$")
SOURCE_TAG = re.compile(r"^\[[^\]]+\]\s*")  # "[task_scheduler.cc:208] " before the message


def tuning_stage(work_dir: Path, tail_bytes: int = 65536) -> str:
    """The newest INFO message in MetaSchedule's logs under ``work_dir/logs``.

    Records reach the database only once a whole batch (up to 64 trials) is built and run, so
    the count alone stays flat for minutes; the log says whether the search is evolving, the
    builder is compiling or the runner is timing.
    """
    newest = ("", "")
    for path in (Path(work_dir) / "logs").glob("*.log"):
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - tail_bytes))
            lines = fh.read().decode("utf-8", "replace").splitlines()
        for line in reversed(lines):
            m = LOG_LINE.match(line)
            msg = SOURCE_TAG.sub("", m.group(2)).strip() if m else ""
            if msg:  # skip the header lines of the scheduler's tables
                newest = max(newest, (m.group(1), msg))
                break
    return newest[1][:100]


def progress_bar(done: int, total: int | None, width: int = 20) -> str:
    """``[#####---------------] 8/32`` (just the count when the total is unknown)."""
    if not total:
        return f"{done}"
    filled = min(width, width * done // total)
    return f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total}"


@contextmanager
def watch_records(
    label: str, work_dir: Path, period_s: float = 10.0, total: int | None = None
) -> Iterator[None]:
    """Report the database's record count (a bar towards ``total``) and the tuner's stage
    while tuning runs.

    A daemon thread polls every ``period_s``; it prints when either changes, and at least once
    a minute so that a long silent phase (a batch being built) still shows signs of life.
    """
    stop = threading.Event()
    path = records_file(work_dir)
    start = count_lines(path)

    def poll() -> None:
        last, last_print = (start, ""), time.perf_counter()
        while not stop.wait(period_s):
            now = (count_lines(path), tuning_stage(work_dir))
            if now != last or time.perf_counter() - last_print >= 60:
                bar = progress_bar(now[0], total)
                log(f"{label}: {bar} records ({now[0] - start} new); {now[1]}")
                last, last_print = now, time.perf_counter()

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def build_candidate(mod: tvm.IRModule, target: Target, _params: object) -> tvm.runtime.Module:
    """The builder's build function: MetaSchedule's ``default_build``
    (tvm/s_tir/meta_schedule/builder/local_builder.py) without its import of
    ``tvm.s_tir.tensor_intrin``, and of :func:`scan_tir.prepacked` of the candidate (where
    MetaSchedule builds RemoveWeightLayoutRewriteBlock of it): the function a deployment runs,
    without the per-call copies of packed weights.

    That import takes 15-20 s on this machine, in every fresh worker, and LocalBuilder starts
    fresh workers for every batch (and once more for its sanity check): a 2-trial run spent
    most of its time there, and with the 30 s timeout builds of config C all timed out.
    A candidate reaches the builder already scheduled, so compiling it needs no registered
    tensor intrinsic (scan_space tensorizes nothing; a tensorized trace is applied in the
    tuning process, which has the intrinsics).
    """
    from tvm.driver import build as tvm_build

    return tvm_build(prepacked(mod), target=target)


#: Half-width of the uniform distribution the local runner fills inputs from.
INPUT_SCALE = 0.1


def alloc_small_inputs(device: tvm.runtime.Device, args_info: list, alloc_repeat: int) -> list:
    """The local runner's inputs: uniform in [-INPUT_SCALE, INPUT_SCALE] (zeros for ints).

    MetaSchedule fills them uniformly in [1, 10] (``random_fill_for_measure``,
    src/runtime/extra/contrib/random/mt_random_engine.cc). A recurrence then runs with
    every gate saturated (an LSTM gate sums hundreds of products of such numbers), and
    transcendental functions take other paths than on real data. With one repeat,
    besides, the runner's order of A-merged's ten best was not the order they run in: its
    first was 19% slower on small inputs than its second (notes.md, section 3). Small
    inputs keep the gates in their working range. Runs in the runner's
    worker process (LocalRunner's ``f_alloc_argument``).
    """
    rng = np.random.default_rng(0)
    repeated = []
    for _ in range(alloc_repeat):
        args = []
        for kind, dtype, shape in args_info:
            if kind != "TENSOR":
                raise NotImplementedError(f"runner argument of kind {kind}")
            if "float" in dtype:
                data = rng.uniform(-INPUT_SCALE, INPUT_SCALE, shape).astype(dtype)
            else:
                data = np.zeros(shape, dtype)
            args.append(tvm.runtime.tensor(data, device=device))
        repeated.append(args)
    return repeated


def local_runner() -> ms.runner.LocalRunner:
    """MetaSchedule's LocalRunner on small inputs, timed as the mean of 5 repeats of at
    least 20 ms each (its default is one repeat of at least 100 ms)."""
    config = ms.runner.EvaluatorConfig(number=1, repeat=5, min_repeat_ms=20)
    return ms.runner.LocalRunner(evaluator_config=config, f_alloc_argument=alloc_small_inputs)


def rpc_runner(spec: str, session_timeout_s: int = 60) -> ms.runner.RPCRunner:
    """An RPCRunner through the tracker ``HOST:PORT:KEY`` (the servers registered with KEY).

    The builder stays local: candidates are compiled here for the target and uploaded.
    """
    host, port, key = parse_rpc(spec)
    config = ms.runner.RPCConfig(
        tracker_host=host,
        tracker_port=port,
        tracker_key=key,
        session_timeout_sec=session_timeout_s,
    )
    return ms.runner.RPCRunner(rpc_config=config)


def parse_rpc(spec: str) -> tuple[str, int, str]:
    """``HOST:PORT:KEY`` -> (host, port, key); ValueError naming the expected form."""
    parts = spec.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[0] or not parts[2]:
        raise ValueError(f"--rpc wants HOST:PORT:KEY (a tracker and a device key), got {spec!r}")
    return parts[0], int(parts[1]), parts[2]


def tune_module(
    mod: tvm.IRModule,
    work_dir: Path,
    trials: int,
    target: Target,
    *,
    label: str = "tune",
    runner: ms.runner.Runner | None = None,
    trials_per_iter: int = 64,
    build_timeout_s: float = 30.0,
    population: int = 512,
    total: int | None = None,
) -> float:
    """``ms.tune_tir`` for ``trials`` more trials on the scan space; returns the wall time.

    ``population`` is the evolutionary search's (MetaSchedule's default 512); tiny budgets
    (tests, notebooks) pass less: sampling and evolving 512 candidates for 4 trials takes
    longer than measuring them. ``total`` is only for the progress bar (the record count
    the run should end at).
    """
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    log(
        f"{label}: tuning {trials} trials in {work_dir} "
        f"({count_lines(records_file(work_dir))} records there already)"
    )
    t = time.perf_counter()
    with watch_records(label, work_dir, period_s=5.0, total=total):
        ms.tune_tir(
            mod,
            target,
            str(work_dir),
            max_trials_global=trials,
            num_trials_per_iter=min(trials, trials_per_iter),
            space=scan_space(target),
            builder=ms.builder.LocalBuilder(timeout_sec=build_timeout_s, f_build=build_candidate),
            runner=runner if runner is not None else local_runner(),
            strategy=ms.search_strategy.EvolutionarySearch(
                population_size=population, init_min_unmeasured=min(50, population)
            ),
        )
    seconds = time.perf_counter() - t
    log(f"{label}: tuning done in {seconds:.0f} s")
    return seconds


@dataclass(frozen=True)
class TuneResult:
    """What :func:`tune` did: record counts of the workload before and after."""

    work_dir: Path
    records_before: int  # records of this workload already in the work dir
    records_after: int
    repaired: int  # unreadable lines dropped from the database before tuning
    seconds: float


def tune(
    workload: Workload,
    work_dir: str | Path,
    trials: int,
    *,
    target: Target | None = None,
    rpc: str | None = None,
    trials_per_iter: int = 64,
    build_timeout_s: float = 30.0,
    population: int = 512,
    fast_math: bool = False,
) -> TuneResult:
    """Tune ``workload`` until ``work_dir`` holds ``trials`` records of it.

    Records already there count toward the budget (a killed run resumes; a finished one
    is a no-op). ``rpc`` is ``HOST:PORT:KEY`` of an RPC tracker; without it candidates run
    locally. The database is repaired first, see the module docstring. ``population``:
    see :func:`tune_module`. ``fast_math``: tune the workload with vectorisable
    exp/sigmoid/tanh (:func:`scan_tir.fast_math`), a function of its own in the database.
    """
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    target = target or default_target()
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    runner = rpc_runner(rpc) if rpc else None
    mod = tvm.IRModule({"main": workload.prim_func(fast_math=fast_math)})
    dropped = []
    if records_file(work_dir).exists():
        dropped = repair(work_dir)
        for problem in dropped:
            log(f"{workload.name}: dropped unreadable line {problem} (backup kept)")
    before = _records_of(work_dir, mod)
    seconds = 0.0
    if before >= trials:
        log(f"{workload.name}: {before} records in {work_dir} already, budget {trials}: done")
    else:
        seconds = tune_module(
            mod,
            work_dir,
            trials - before,
            target,
            label=workload.name,
            runner=runner,
            trials_per_iter=trials_per_iter,
            build_timeout_s=build_timeout_s,
            population=population,
            total=count_lines(records_file(work_dir)) + trials - before,
        )
    return TuneResult(work_dir, before, _records_of(work_dir, mod), len(dropped), seconds)


def _records_of(work_dir: Path, mod: tvm.IRModule) -> int:
    if not records_file(work_dir).exists():
        return 0
    db = load(work_dir)
    index = db.index_of(mod)
    return 0 if index is None else len(db.of_workload(index))
