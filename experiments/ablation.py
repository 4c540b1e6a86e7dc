"""What each change does to one and the same schedule: a database's best record, varied.

The best record of a config's database is replayed (its sampled decisions unchanged, the
postprocs run again) and built several ways, so that the effect of each change is measured
on the same tiles, not through a new search:

- "as tuned": on prepacked weights with the per-call copy of a packed weight elided
  (``scan_tir.prepacked``), what the tuner timed;
- "copy kept": the copy left in (``RemoveWeightLayoutRewriteBlock`` alone);
- "fast_math after scheduling" (and with the copy kept): ``scan_tir.fast_math`` applied to
  the scheduled function, for a database tuned without it;
- "bias fused": the input GEMM's bias computed per register block (``reverse_compute_at``
  under the block's tiles, as ``meta_rules.RegisterTiling`` does outside scans), for the
  LSTM;
- "copies in step", and with the bias fused: the record replayed on the function lowered
  with ``copies_in_step`` (``LoweringOptions``), for a database tuned without it;
- "persistent step": every nest of each step shared out over the threads and the time
  loop run inside one thread-pool launch, a barrier after each nest
  (``postprocs.persistent_step.shared_out``, built through ``scan_tir.transform.
  PIPELINE``); "every nest forked": the same nests, each its own fork/join, as TVM's
  pipeline builds them, so that the launch and barriers are measured apart from the
  sharing out of nests that ran serially. A record tuned persistent is "as tuned" in the
  first and unmarked in the second;
- "concurrent scans": independent scans (a bidirectional layer's two directions) side by
  side, one thread each, their nests serial (``postprocs.concurrent_scans.side_by_side``,
  built through ``scan_tir.transform.ConcurrentLanes``).

A variant that does not apply (its option already on, a block it needs missing, a trace that
does not replay) is listed with the reason. Every variant runs on the workload's own inputs,
its weights packed once, and is checked against the numpy reference. Timing goes in rounds
(each variant once per round, ``time_evaluator``, median of ``--repeats``), so that a drift
of the machine's speed reaches every variant alike; the table gives the median over rounds.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/ablation.py --configs
D-FAST --results experiments/results/preferred``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import tvm
from bench.build import fresh_tensors, param_names, target
from bench.check import Checked, build_checked, max_err
from bench.database import add_database_arguments, best_record, database_dir, open_database
from bench.prepack import on_packed_weights
from bench.report import header, markdown_table, start_run
from bench.timing import evaluator_latency_ms, median
from tvm.s_tir import Schedule
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

import scan_tir
from postprocs.concurrent_scans import side_by_side
from postprocs.persistent_step import shared_out
from scan_tir import workloads
from scan_tir.lower.vocabulary import free_loops
from scan_tir.tune import log
from scan_tir.workloads import Workload


def fuse_input_bias(sch: Schedule) -> None:
    """The input GEMM's bias under its register block: at the loop above the reduction."""
    gemm = sch.get_sblock("Xi2h")
    loops = sch.get_loops(gemm)
    at = loops[free_loops(sch, gemm, loops).index(False) - 1]
    sch.reverse_compute_at(sch.get_sblock("Xi2h_bias"), at, preserve_unit_loops=True)


def replay(trace: tvm.s_tir.Trace, mod: tvm.IRModule, bias: bool) -> tvm.tirx.PrimFunc:
    """``trace``'s decisions on ``mod``, the bias optionally fused, postprocs run again."""
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


def copy_elided(tuned: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    return scan_tir.prepacked(tvm.IRModule({"main": tuned}))["main"]


def copy_kept(tuned: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    mod = tvm.IRModule({"main": tuned})
    return RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)["main"]


@dataclass(frozen=True)
class Variant:
    """How one variant is made: which function the record is replayed on, whether the bias
    is fused, how the packed weights are read, and fast math after scheduling."""

    label: str
    in_step: bool = False
    bias: bool = False
    read: Callable[[tvm.tirx.PrimFunc], tvm.tirx.PrimFunc] = copy_elided
    fast_math: bool = False
    #: None: the steps as tuned; True: persistent; False: every nest its own fork/join.
    launch: bool | None = None
    concurrent: bool = False

    def skip_reason(self, w: Workload) -> str:
        """Why the variant does not apply to ``w``'s database, or ""."""
        if self.fast_math and w.options.fast_math:
            return "fast_math is on already"
        if self.in_step and w.options.copies_in_step:
            return "copies_in_step is on already"
        if self.bias and w.recurrence.name != "lstm":
            return "no input bias block (LSTM only)"
        return ""


VARIANTS = (
    Variant("as tuned"),
    Variant("copy kept", read=copy_kept),
    Variant("fast_math after scheduling", fast_math=True),
    Variant("copy kept, fast_math after scheduling", read=copy_kept, fast_math=True),
    Variant("bias fused", bias=True),
    Variant("copies in step", in_step=True),
    Variant("bias fused, copies in step", in_step=True, bias=True),
    Variant("every nest forked", launch=False),
    Variant("persistent step", launch=True),
    Variant("concurrent scans", concurrent=True),
)


@dataclass
class Run:
    """One built variant, ready to time, or why there is none."""

    label: str
    skipped: str = ""
    checked: Checked | None = None
    rounds_ms: list[float] = field(default_factory=list)


def build_variant(
    v: Variant, record: ms.database.TuningRecord, w: Workload, inputs: list, ref: list
) -> Run:
    """Replay, pack, build and check one variant."""
    skipped = v.skip_reason(w)
    if skipped:
        return Run(v.label, skipped)
    func = w.prim_func(replace(w.options, copies_in_step=True) if v.in_step else None)
    base = w.prim_func()
    try:
        tuned = replay(record.trace, tvm.IRModule({"main": func}), v.bias)
    except Exception as err:  # TVM's errors: a block missing, a trace that does not replay
        lines = [s for s in str(err).strip().splitlines() if s.strip()]
        return Run(v.label, f"does not replay: {lines[-1][:120] if lines else type(err)}")
    tensors = fresh_tensors(base, inputs)
    on_packed_weights(tuned, tensors, len(ref), repeats=1)
    compute = v.read(tuned)
    if v.fast_math:
        compute = scan_tir.fast_math(compute)
    if v.launch is not None:
        compute = shared_out(compute, int(target().attrs["num-cores"]), v.launch)
        if isinstance(compute, str):
            return Run(v.label, compute)
    if v.concurrent:
        compute = side_by_side(compute)
        if isinstance(compute, str):
            return Run(v.label, compute)
    checked = build_checked(compute, param_names(base), tensors, ref)
    return Run(v.label, checked=checked)


def ablate(name: str, args: argparse.Namespace) -> tuple[list[list[str]], bool]:
    """The table rows of config ``name``, and whether every variant computed right."""
    w = workloads.get(name)
    mod = tvm.IRModule({"main": w.prim_func()})
    work_dir = database_dir(args.results, name)
    record = best_record(open_database(work_dir), work_dir, mod, name)
    inputs = w.input_arrays()
    ref = w.numpy(inputs)
    runs = []
    for v in VARIANTS:
        log(f"{name}: {v.label}")
        runs.append(build_variant(v, record, w, inputs, ref))
    built = [r for r in runs if not r.skipped]
    for i in range(args.rounds):
        log(f"{name}: timing round {i + 1}/{args.rounds}")
        for r in built:
            timed = evaluator_latency_ms(r.checked.lib, r.checked.args, args.repeats)
            r.rounds_ms.append(median(timed))
    if runs[0].skipped:
        sys.exit(f"{name}: its best record does not replay as tuned ({runs[0].skipped})")
    runner_ms = float(np.mean([float(s) for s in record.run_secs])) * 1e3
    first = runs[0]
    rows = []
    for i, r in enumerate(runs):
        cell = f"{name} (DB best {runner_ms:.4g} ms, {work_dir})" if i == 0 else ""
        if r.skipped:
            rows.append([cell, r.label, f"- ({r.skipped})", "", "", "", ""])
            continue
        diff = max(max_err(a, b) for a, b in zip(r.checked.outputs, first.checked.outputs))
        rows.append(
            [
                cell,
                r.label,
                f"{median(r.rounds_ms):.4g}",
                ", ".join(f"{x:.4g}" for x in r.rounds_ms),
                f"{median(r.rounds_ms) / median(first.rounds_ms):.3f}",
                f"{r.checked.err:.1e}",
                f"{diff:.1e}",
            ]
        )
    ok = all(r.checked.err <= args.tol for r in built)
    return rows, ok


def main(argv: list[str]) -> int:
    """Ablate every config given, then print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_arguments(parser)
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds")
    parser.add_argument("--repeats", type=int, default=10, help="time_evaluator repeats a round")
    parser.add_argument("--tol", type=float, default=1e-4, help="max abs error vs numpy")
    args = parser.parse_args(argv)
    load = start_run()
    rows, ok = [], True
    for name in args.configs:
        config_rows, config_ok = ablate(name, args)
        rows += config_rows
        ok = ok and config_ok
    print(header(load))
    print()
    head = [
        "config (its database's best)",
        "variant",
        "ms (median of rounds)",
        "each round ms",
        "vs as tuned",
        "max abs err vs numpy",
        "max abs diff vs as tuned",
    ]
    print(markdown_table(head, rows))
    if not ok:
        print(f"FAIL: a variant is off by more than --tol {args.tol:g}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
