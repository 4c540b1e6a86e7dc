"""What the fused input bias and the copies made in the step each do to one schedule.

A database's best record is replayed, its sampled decisions unchanged and the postprocs run
again, on four functions: the config as tuned; with the input GEMM's bias computed per
register block (``reverse_compute_at`` under the block's tiles, as meta_rules.RegisterTiling
now does outside scans); on the ``-INSTEP`` function (``create_prim_func(...,
copies_in_step=True)``: hidden_states/cell_states copied inside the step, states folded to
two rows); and both. So the effect of each change is measured on the same tiles, not
through a new search. Each variant is checked against ``lstm_python``, then all are timed
in rounds (one round: each variant once, ``time_evaluator`` with 5 calls x 10 repeats,
median), on the same random inputs; the table gives the median over rounds.

Run: ``TVM_NUM_THREADS=2 python experiments/instep_ablation.py --config D-fast
--results experiments/results/preferred`` from the repo root.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import tvm
from bench_convert import lstm_python, make_weights
from tune_lstm import (
    build,
    call_args,
    config_module,
    config_shape,
    open_database,
    plain_tensors,
    prepack,
    target,
    weight_prepack_func,
)
from tvm.s_tir import Schedule
from tvm.s_tir import meta_schedule as ms

import scan_tir
from scan_tir.lower.vocabulary import free_loops


def fuse_input_bias(sch: Schedule) -> None:
    """The input GEMM's bias under its register block: at the loop above the reduction."""
    gemm = sch.get_sblock("Xi2h")
    loops = sch.get_loops(gemm)
    at = loops[free_loops(sch, gemm, loops).index(False) - 1]
    sch.reverse_compute_at(sch.get_sblock("Xi2h_bias"), at, preserve_unit_loops=True)


def replay(trace: tvm.s_tir.Trace, mod: tvm.IRModule, bias: bool) -> tvm.tirx.PrimFunc:
    """``trace``'s decisions on ``mod``, postprocs run again."""
    sch = Schedule(mod)
    trace.apply_to_schedule(sch, remove_postproc=True)
    if bias:
        fuse_input_bias(sch)
    space = scan_tir.scan_space(target())
    # A TuneContext initialises the space's postprocs with the target (RewriteLayout etc.).
    ms.TuneContext(mod=mod, target=target(), space_generator=space, task_name="ablation")
    for postproc in space.postprocs:
        if not postproc.apply(sch):
            raise RuntimeError(f"{postproc} rejected the replayed schedule")
    return sch.mod["main"]


def on_packed_weights(func: tvm.tirx.PrimFunc, tensors: dict) -> tvm.tirx.PrimFunc:
    """``func`` as the tuner timed it, its weights packed once into ``tensors``."""
    pre = weight_prepack_func(func, n_outputs=2)
    if pre is not None:
        tensors.update(prepack(pre, tensors, repeats=1)[0])
    return scan_tir.prepacked(tvm.IRModule({"main": func}))["main"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="D-fast")
    parser.add_argument("--results", default="experiments/results/preferred", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    name = args.config.upper()
    mod, instep = config_module(name), config_module(f"{name}-INSTEP")
    db = open_database(args.results / name)
    if not db.has_workload(mod):
        sys.exit(f"{args.results / name} holds no record of {name}'s function")
    (record,) = db.get_top_k(db.commit_workload(mod), 1)
    funcs = {
        "as tuned": replay(record.trace, mod, bias=False),
        "bias fused": replay(record.trace, mod, bias=True),
        "copies in step": replay(record.trace, instep, bias=False),
        "both": replay(record.trace, instep, bias=True),
    }
    w = make_weights(config_shape(name))
    ref = lstm_python(w.x, w.wi, w.wh, w.bi, w.bh)
    runs = {}
    names = [str(p.name) for p in mod["main"].params]
    for label, tuned in funcs.items():
        tensors = plain_tensors(mod["main"], w)
        func = on_packed_weights(tuned, tensors)
        lib = build(func)
        run_args = call_args(func, names, tensors)
        lib["main"](*run_args)
        err = max(float(np.abs(a.numpy() - r).max()) for a, r in zip(run_args[-2:], ref))
        runs[label] = (lib.time_evaluator("main", tvm.cpu(), number=5, repeat=10), run_args, err)
    times: dict[str, list[float]] = {label: [] for label in funcs}
    for _ in range(args.rounds):
        for label, (timer, run_args, _) in runs.items():
            times[label].append(float(np.median(timer(*run_args).results)) * 1e3)
    print(f"Command: `{' '.join([Path(sys.executable).name, *sys.argv])}`\n")
    print(f"Best record of {args.results / name} ({float(record.run_secs[0]) * 1e3:.2f} ms)\n")
    print("| variant | ms (median of rounds) | each round ms | max abs error vs lstm_python |")
    print("|---|---|---|---|")
    for label, xs in times.items():
        rounds = ", ".join(f"{x:.2f}" for x in xs)
        print(f"| {label} | {np.median(xs):.3f} | {rounds} | {runs[label][2]:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
