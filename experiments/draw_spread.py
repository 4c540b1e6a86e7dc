"""How far apart independent tunings of one instance land: the spread carried by issue
17's per-instance reference, one search of a few trials per instance.

At each ``--at`` instance of a grid run's work dir (experiments/dynamic_shapes.py, run
with ``--batches``), the per-instance arm is tuned ``--draws`` times more, each a fresh
search with the arm's trials and population in a directory of its own
(``per_instance_BxS_draw2``, ...). Every draw, the grid's own per-instance draw and its
dispatched module are checked against numpy and timed side by side in rounds. Prints per
instance each kernel's median ms, the spread (slowest draw / fastest), and dynamic against
the fastest draw, the median draw and the grid's draw.

Run from the repo root, after the grid run: ``TVM_NUM_THREADS=2 python
experiments/draw_spread.py --work-dir build/grid_lstm_v8 --at 1x1024``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import tvm
from bench.report import fmt, header, markdown_table, start_run, write_json
from bench.timing import median
from dynamic_shapes import cached, side_by_side, tuned_alone

from scan_tir import workloads
from scan_tir.tune import default_target


def made_in(arm: Path) -> list:
    """The packed weights (their [shape, dtype]) the library an arm left in ``arm`` takes."""
    return json.loads((arm / "arm.json").read_text()).get("packed", [])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="lstm", help="the grid run's --workload")
    p.add_argument("--sizes", default="input=512,hidden=256", help="the grid run's --sizes")
    p.add_argument("--work-dir", type=Path, required=True, help="the grid run's --work-dir")
    p.add_argument("--at", required=True, help="listed instances, BATCHxSEQ, comma-separated")
    p.add_argument("--draws", type=int, default=3, help="tunings made besides the grid's")
    p.add_argument("--trials", type=int, default=16, help="the grid's --per-instance-trials")
    p.add_argument("--population", type=int, default=128, help="the grid's --population")
    p.add_argument("--packed", action="store_true", help="the grid run's --packed")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    load = start_run()
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in args.sizes.split(","))}
    func = workloads.get(args.workload, seq=16, **sizes).symbolic_func(
        ["batch", "seq"], packed=args.packed)
    dispatched = args.work_dir / "dynamic" / "arm.so"
    if not dispatched.exists():
        raise SystemExit(f"{dispatched}: no dispatched module; run the grid first")
    dynamic = tvm.runtime.load_module(str(dispatched))
    packed = {"dynamic": made_in(dispatched.parent)}
    rows, raw = [], {}
    for text in args.at.split(","):
        batch, seq = map(int, text.split("x"))
        grid_draw = args.work_dir / f"per_instance_{text}" / "arm.so"
        if not grid_draw.exists():
            raise SystemExit(f"{grid_draw}: the grid run has no per-instance draw at {text}")
        libs = {"dynamic": dynamic, "draw 1": tvm.runtime.load_module(str(grid_draw))}
        packed["draw 1"] = made_in(grid_draw.parent)
        for k in range(2, args.draws + 2):
            work = args.work_dir / f"per_instance_{text}_draw{k}"
            at, label = {"batch": batch, "seq": seq}, f"draw {k} {text}"
            libs[f"draw {k}"], facts = cached(
                work,
                lambda work=work, at=at, label=label: tuned_alone(
                    func, at, work, args.trials, args.population, label),
                default_target(),
            )
            packed[f"draw {k}"] = facts.get("packed", [])
        wl = workloads.get(args.workload, **{**sizes, "batch": batch, "seq": seq})
        values = wl.input_arrays(seed=1)
        ref = wl.numpy(values)
        times = side_by_side(libs, values, ref, text, args.rounds, args.repeats, packed)
        ms_of = {name: median(t) for name, t in times.items()}
        draws = sorted(v for name, v in ms_of.items() if name != "dynamic")
        raw[text] = times
        rows.append([
            text, fmt(ms_of["dynamic"]), *(fmt(ms_of[n]) for n in libs if n != "dynamic"),
            fmt(draws[-1] / draws[0]), fmt(ms_of["dynamic"] / draws[0]),
            fmt(ms_of["dynamic"] / median(draws)), fmt(ms_of["dynamic"] / ms_of["draw 1"]),
        ])
    draw_names = [f"draw {k} ms" for k in range(1, args.draws + 2)]
    print(header(load))
    print(f"{args.workload} {sizes}; {args.trials} trials a draw, population "
          f"{args.population}; draw 1 is the grid's ({args.work_dir})")
    print(markdown_table(
        ["instance", "dynamic ms", *draw_names, "slowest / fastest draw",
         "dyn / fastest", "dyn / median", "dyn / draw 1"], rows))
    if args.json:
        write_json(args.json, {"load": load, "rows": rows, "ms": raw})


if __name__ == "__main__":
    main()
