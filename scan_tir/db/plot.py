"""PNG figures of a database (matplotlib, Agg backend: no display needed).

``best_so_far.png``: the best latency found up to each trial, per workload, the curve that
says whether more trials would still pay. ``latency_hist.png``: the spread of the valid
candidates' latencies, which shows how much the search space's choices matter.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

from .records import TuningDB  # noqa: E402


def best_so_far(db: TuningDB, workload: int) -> list[float]:
    """Per trial of ``workload`` (measurement order), the best latency so far in ms (NaN
    until the first valid one)."""
    best, out = math.inf, []
    for e in db.of_workload(workload):
        best = min(best, e.mean_ms)
        out.append(best if best < math.inf else math.nan)
    return out


def plot(db: TuningDB, out_dir: str | Path) -> list[Path]:
    """Write the two figures into ``out_dir`` (created); returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for w in db.used_workloads():
        curve = best_so_far(db, w)
        ax.plot(range(1, len(curve) + 1), curve, marker=".", label=db.workload_name(w))
    ax.set(xlabel="trial", ylabel="best latency so far (ms)", yscale="log",
           title=f"tuning progress: {db.work_dir}")
    ax.legend(fontsize="small")
    paths = [out / "best_so_far.png", out / "latency_hist.png"]
    fig.tight_layout()
    fig.savefig(paths[0], dpi=100)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    for w in db.used_workloads():
        valid = [e.mean_ms for e in db.of_workload(w) if e.valid]
        ax.hist(valid, bins=min(30, max(1, len(valid))), alpha=0.6, label=db.workload_name(w))
    ax.set(xlabel="latency (ms)", ylabel="candidates", title="latency of valid candidates")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(paths[1], dpi=100)
    plt.close(fig)
    return paths
