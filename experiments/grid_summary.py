"""The summary figures notes.md quotes for a grid run of ``dynamic_shapes.py`` (issue 17),
from its .json alone: against per-instance tuning (within 10%, worst, mean), tuning time,
dynamic over the single schedule, over the faster of PyTorch and onnxruntime (geomean
over the listed instances), and, per arm, the median of its first round of timings over
that of its third (a drift that falls on one arm: the timing order's bias). Since the
arms are timed in turn within each of the three rounds, the ratio of two arms' medians in
one round sees the same spell of the machine: a target counts as missed "in every round"
only where each round's ratio misses it, which a spell over part of one instance's
timings cannot make (the VM's speed moves by tens of percent between spells).

Run from the repo root: ``python experiments/grid_summary.py experiments/results/issue17/
dynamic_grid_gru_packed_run4.json [more .json]``.
"""

from __future__ import annotations

import json
import statistics as st
import sys

ARMS = ["dynamic", "single", "per-instance", "same-budget"]


def summary(path: str) -> None:
    run = json.load(open(path))
    ms = run["ms"]

    def med(at: str, arm: str) -> float:
        t = ms[at][arm]
        return st.median(t) if isinstance(t, list) else t

    listed = [k for k in ms if "per-instance" in ms[k]]
    unlisted = [k for k in ms if k not in listed]
    per = [med(k, "dynamic") / med(k, "per-instance") for k in listed]
    single = [med(k, "dynamic") / med(k, "single") for k in listed]
    beyond = [med(k, "dynamic") / med(k, "single") for k in unlisted]
    base = [med(k, "dynamic") / min(med(k, b) for b in ("PyTorch", "onnxruntime") if b in ms[k])
            for k in listed]
    dyn_s = run["arms"]["dynamic"]["seconds"]
    alone_s = sum(v["seconds"] for a, v in run["arms"].items() if a.startswith("per-instance"))
    print(f"{path}: within 10% at {sum(r <= 1.1 for r in per)}/{len(per)}, worst "
          f"{max(per):.3f}, mean {st.mean(per):.3f}; tuning {alone_s:.0f}/{dyn_s:.0f} s = "
          f"{alone_s / dyn_s:.2f}x; dyn/single listed at most {max(single):.3f} "
          f"({sum(r > 1 for r in single)} above 1), unlisted "
          + ", ".join(f"{k} {r:.2f}" for k, r in zip(unlisted, beyond))
          + f"; dyn/fastest baseline geomean {st.geometric_mean(base):.3f} "
          f"({sum(r <= 1 for r in base)} at or below 1)")
    print("  misses: " + " ".join(f"{k} {r:.2f}" for k, r in zip(listed, per) if r > 1.1))
    def rounds(at: str, arm: str) -> list[float]:
        t, n = ms[at][arm], len(ms[at][arm]) // 3
        return [st.median(t[r * n:(r + 1) * n]) for r in range(3)]

    def every_round(of: str, above: float) -> list[str]:
        return [f"{k} {min(d / o for d, o in zip(rounds(k, 'dynamic'), rounds(k, of))):.2f}"
                for k in listed
                if all(d > above * o for d, o in zip(rounds(k, "dynamic"), rounds(k, of)))]

    for of, above in (("per-instance", 1.1), ("single", 1.0)):
        missed = every_round(of, above)
        print(f"  dyn/{of} above {above} in every round at {len(missed)} listed"
              + (" (the least of the three: " + ", ".join(missed) + ")" if missed else ""))
    for arm in ARMS:
        drift = [st.median(ms[k][arm][:5]) / st.median(ms[k][arm][10:15])
                 for k in ms if isinstance(ms[k].get(arm), list) and len(ms[k][arm]) >= 15]
        print(f"  {arm}: round 1 / round 3 geomean {st.geometric_mean(drift):.3f}, max "
              f"{max(drift):.2f}, above 1.15 at {sum(r > 1.15 for r in drift)}/{len(drift)}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        summary(p)
