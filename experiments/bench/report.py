"""What every report prints besides its table: the command, threads, load, target; and the
table and JSON formatting.

The load average is printed because anything else running on the 2 cores inflates every
latency, and a table read later cannot show it otherwise.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

import tvm

from scan_tir.tune import log

from .build import target

THREAD_KEYS = ("TVM_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE")


def start_run() -> tuple[float, float, float]:
    """The load average before this run adds to it (for :func:`header`); then
    TVM_NUM_THREADS=2 unless set, before anything runs: it is read when TVM's thread pool
    starts and by tuning workers, and it sets the target's core count."""
    load = os.getloadavg()
    if os.environ.get("TVM_NUM_THREADS") is None:
        os.environ["TVM_NUM_THREADS"] = "2"
        log("TVM_NUM_THREADS was unset; set to 2")
    return load


def thread_settings() -> dict[str, str]:
    """Environment that decides thread counts (and BLAS kernels) of the measured libraries."""
    return {k: os.environ.get(k, "(unset)") for k in THREAD_KEYS}


def command_line() -> str:
    """The command as run, for the report's first line."""
    return " ".join(shlex.quote(a) for a in ["python", *sys.argv])


def target_json() -> dict[str, Any]:
    """The build target's own settings (kind, mcpu, num-cores), as JSON."""
    spec = target().export()
    return {k: v for k, v in spec.items() if isinstance(v, (int, str)) and v != "" and k != "tag"}


def header(load: tuple[float, float, float], extra: str = "") -> str:
    """Command, threads, target and the load average at start, one line each."""
    threads = ", ".join(f"{k}={v}" for k, v in thread_settings().items())
    return "\n".join(
        [
            f"Command: `{command_line()}`",
            f"Threads: {threads}" + extra,
            f"Target: {json.dumps(target_json())}.",
            "Load average (1, 5, 15 min) at start: "
            + ", ".join(f"{x:.2f}" for x in load)
            + " (anything else running on the 2 cores inflates the latencies below)",
        ]
    )


def fmt(x: float, digits: int = 3) -> str:
    """Numbers for the table; a dash for a path that did not run."""
    if math.isnan(x):
        return "-"
    return f"{x:.{digits}g}" if x < 1e-2 else f"{x:.{digits}f}"


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (what notes.md quotes)."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def json_safe(value: Any) -> Any:
    """NaN (a path that did not run) as null: strict JSON readers reject NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json(path: str | Path, payload: dict[str, Any]) -> None:
    """Raw numbers for later analysis, with what the run was: command, threads, machine,
    TVM, target."""
    full = {
        "command": command_line(),
        "threads": thread_settings(),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "tvm_version": tvm.__version__,
        "target": target_json(),
        **payload,
    }
    Path(path).write_text(json.dumps(json_safe(full), indent=2, allow_nan=False))
    log(f"wrote {path}")
