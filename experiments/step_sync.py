"""What synchronising a step costs: one fork/join of TVM's thread pool per nest against one
barrier per nest inside a single launch (the persistent step).

A recurrence whose step does almost nothing (hidden size 2: every nest a handful of
flops) is run for ``--seq`` steps three ways, from one function:

- serial: the untuned function, every nest on one thread (no synchronisation);
- forked: every nest of the step a parallel loop (``postprocs.persistent_step.
  shared_out``, the mark then removed), so each nest forks and joins the pool;
- persistent: the same nests, the time loop one launch with a barrier after each nest
  (``scan_tir.transform.PIPELINE``).

Per step and per nest, the difference to serial is the cost of synchronisation (the work
shared out is too small to gain anything). Each is checked against numpy; timing goes in
rounds, each way once per round.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/step_sync.py``.
"""

from __future__ import annotations

import argparse
import sys

from bench.build import fresh_tensors, param_names, target
from bench.check import build_checked
from bench.report import header, markdown_table, start_run
from bench.timing import evaluator_latency_ms, median
from tvm import tirx

from postprocs.persistent_step import shared_out
from scan_tir.lower.vocabulary import find_scans, step_nests
from scan_tir.tune import log
from scan_tir.workloads import get


def sharing(func: tirx.PrimFunc, launch: bool) -> tirx.PrimFunc:
    """``func`` with every nest of its steps parallel, persistent if ``launch``."""
    out = shared_out(func, int(target().attrs["num-cores"]), launch)
    if isinstance(out, str):
        sys.exit(f"cannot be shared out: {out}")
    return out


def measure(name: str, args: argparse.Namespace) -> list[list[str]]:
    """The rows of recurrence ``name``."""
    sizes = {"seq": args.seq, "batch": 1, "input": 2, "hidden": 2}
    w = get(name, **sizes)
    func = w.prim_func()
    inputs = w.input_arrays()
    ref = w.numpy(inputs)
    names = param_names(func)
    nests = sum(len(step_nests(s.step)) for s in find_scans(func))
    ways = {
        "serial": func,
        "forked (a fork/join per nest)": sharing(func, launch=False),
        "persistent (a barrier per nest)": sharing(func, launch=True),
    }
    built = {}
    for label, f in ways.items():
        log(f"{name}: {label}: build")
        built[label] = build_checked(f, names, fresh_tensors(func, inputs), ref)
    rounds: dict[str, list[float]] = {label: [] for label in ways}
    for i in range(args.rounds):
        log(f"{name}: timing round {i + 1}/{args.rounds}")
        for label, checked in built.items():
            rounds[label].append(median(evaluator_latency_ms(checked.lib, checked.args, 5)))
    serial_us = median(rounds["serial"]) * 1e3 / args.seq
    rows = []
    for label, checked in built.items():
        step_us = median(rounds[label]) * 1e3 / args.seq
        sync = (step_us - serial_us) / nests if label != "serial" else 0.0
        rows.append(
            [
                f"{name} ({nests} nests per step)" if label == "serial" else "",
                label,
                f"{median(rounds[label]):.3f}",
                f"{step_us:.3f}",
                f"{sync:.3f}" if label != "serial" else "-",
                f"{checked.err:.1e}",
            ]
        )
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recurrences", default="rnn_tanh,lstm,gru")
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    load = start_run()
    rows = []
    for name in args.recurrences.split(","):
        rows += measure(name, args)
    print(header(load))
    print()
    head = [
        f"recurrence (seq {args.seq}, batch 1, input 2, hidden 2)",
        "how the step synchronises",
        "ms (median of rounds)",
        "us per step",
        "us per nest over serial",
        "max abs err vs numpy",
    ]
    print(markdown_table(head, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
