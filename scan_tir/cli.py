"""``scan-tir``: tune a workload, inspect and check a tuning database.

    scan-tir tune WORKLOAD [--sizes k=v,...] --trials N --work-dir D [--rpc HOST:PORT:KEY]
                  [--per-scan | --dynamic SIZE=V,V,... [--kernels K] [--packed] [--out LIB.so]]
                  [--legacy] [--[no-]fast-math] [--[no-]copies-in-step] [--[no-]merge-updates]
    scan-tir db summary D | top D -k K | show D --record I
    scan-tir db verify D [--seq N] [--build-timeout S] [--own-targets] [--records A-B]
    scan-tir db export D [--csv F] [--json F] | plot D --out DIR | compare D1 D2
    scan-tir db prune D --keep K
    scan-tir compile MODEL.onnx|MODEL.pt2 --trials N --work-dir D --out LIB.so [--sizes k=v,...]
    scan-tir run LIB.so INPUT.npy ... [--repeats R] [--save OUT.npz]

Exit codes (also in ``scan-tir --help``): 0 ok; 1 verification failed; 2 usage or bad
input (wrong path, unknown workload, no such record); 3 done, but some database lines
could not be read and were skipped (each is named on stderr); 4 TVM failed (tuning or
a build), message on stderr. Results go to stdout, progress and warnings to stderr.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from .lower.options import LoweringOptions

OK, VERIFY_FAILED, BAD_INPUT, SKIPPED_LINES, TVM_FAILED = 0, 1, 2, 3, 4

EPILOG = """exit codes:
  0  ok
  1  verification failed (db verify: a record breaks a scan or computes wrongly)
  2  usage or bad input (wrong path, unknown workload or size, no such record)
  3  done, but database lines could not be read and were skipped (named on stderr)
  4  TVM failed (tuning, or building a schedule); the message is on stderr
"""


class UsageError(Exception):
    """Bad input from the command line: exit code 2 with the message."""


def _sizes(text: str) -> dict[str, int]:
    sizes = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise UsageError(f"--sizes wants k=v,... with integer values, got {item!r}")
        sizes[key.strip()] = int(value)
    return sizes


def _lengths(text: str) -> list[int]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values or not all(v.isdigit() and int(v) > 0 for v in values):
        raise argparse.ArgumentTypeError(f"want positive integers L,L,..., got {text!r}")
    return [int(v) for v in values]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scan-tir",
        description="Tune recurrences and models with scan-tir's search space; inspect tuning "
        "databases.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tune", help="tune a workload of the zoo into a work dir (resumes)")
    t.add_argument("workload", help="a recurrence (lstm, ...) or a config name (A, B, ...)")
    t.add_argument("--sizes", default="", type=str, help="k=v,... e.g. seq=16,hidden=8")
    t.add_argument("--trials", type=int, required=True,
                   help="records of this workload the work dir should hold at the end")
    t.add_argument("--work-dir", "-d", required=True, type=Path)
    t.add_argument("--rpc", help="HOST:PORT:KEY of an RPC tracker (default: run locally)")
    t.add_argument("--trials-per-iter", type=int, default=64)
    t.add_argument("--population", type=int, default=512,
                   help="evolutionary search population (less for tiny budgets)")
    t.add_argument("--build-timeout", type=float, default=30.0)
    t.add_argument("--per-scan", action="store_true",
                   help="tune each scan as its own task, identical layers once, then "
                   "compose the whole function's schedule")
    t.add_argument("--dynamic", action="append", metavar="SIZE=V,V,...",
                   help="tune for these instances of a size, which stays symbolic (e.g. "
                   "seq=16,64,256,1024; repeat for more sizes) and build one function that "
                   "dispatches by shape among at most --kernels schedules")
    t.add_argument("--chunks", type=_lengths, metavar="L,L,...",
                   help="where a scan is linear in its state, also tune its chunked forms "
                   "of these chunk lengths (scan_tir.tune.tune_forms), each in "
                   "WORK_DIR/<form>, and say which form is fastest")
    t.add_argument("--kernels", type=int, default=4, help="with --dynamic (default 4)")
    t.add_argument("--packed", action="store_true",
                   help="with --dynamic: tune on weights packed for each kernel's tiles; the "
                   "library's 'prepack' packs them once, and 'main' takes them after its "
                   "parameters")
    t.add_argument("--out", "-o", type=Path, help="with --dynamic: write the library here")
    t.add_argument("--time-everywhere", action="store_true",
                   help="with --dynamic: time every candidate at every instance instead of "
                   "at the tuned ones and predicting the rest")
    lowering = t.add_argument_group(
        "lowering options",
        "default: the config name's suffixes (A-FAST-INSTEP), else scan_tir.LoweringOptions(); "
        "--legacy turns every option off, then the flags below apply",
    )
    lowering.add_argument("--legacy", action="store_true",
                          help="every option off (the older committed databases)")
    for name in LoweringOptions.names():
        lowering.add_argument(f"--{name.replace('_', '-')}", action=argparse.BooleanOptionalAction,
                              default=None, help=f"LoweringOptions.{name}")
    c = sub.add_parser("compile", help="tune a model file (.onnx, .pt2) and write a library")
    c.add_argument("model", type=Path, help="an ONNX model or a torch.export.save'd program")
    c.add_argument("--trials", type=int, required=True,
                   help="records the work dir should hold at the end (0: build untuned)")
    c.add_argument("--work-dir", "-d", required=True, type=Path)
    c.add_argument("--out", "-o", required=True, type=Path, help="the library to write (.so)")
    c.add_argument("--sizes", default="", type=str,
                   help="representative values of the model's symbolic sizes, e.g. seq=64,batch=1")
    c.add_argument("--population", type=int, default=512,
                   help="evolutionary search population (less for tiny budgets)")
    r = sub.add_parser("run", help="run a library from 'scan-tir compile' on .npy inputs")
    r.add_argument("library", type=Path)
    r.add_argument("inputs", type=Path, nargs="+", help="one .npy file per input, in order")
    r.add_argument("--repeats", type=int, default=10, help="timed calls (0: no timing)")
    r.add_argument("--save", type=Path, help="write the outputs to this .npz")
    db = sub.add_parser("db", help="inspect a tuning database").add_subparsers(
        dest="action", required=True
    )
    db.add_parser("summary", help="records, valid ones, best latency per workload")
    top = db.add_parser("top", help="the fastest records, with speed-up over untuned")
    top.add_argument("-k", type=int, default=5)
    top.add_argument("--no-baseline", action="store_true", help="do not time the untuned")
    show = db.add_parser("show", help="one record: trace, rule per instruction, invariants")
    show.add_argument("--record", "-r", type=int, required=True)
    verify = db.add_parser("verify", help="replay every record, check numerics and scans")
    verify.add_argument("--tol", type=float, default=1e-4)
    verify.add_argument("--build-timeout", type=float, default=120.0, metavar="S",
                        help="a record whose build takes longer fails (default 120)")
    verify.add_argument("--own-targets", action="store_true",
                        help="build each record for the target it was tuned for "
                        "(default: this machine's)")
    verify.add_argument("--seq", type=int, help="replay at this sequence length instead of "
                        "the tuned one (zoo workloads only)")
    verify.add_argument("--records", metavar="A-B", type=_index_range,
                        help="only records A to B (0-based, both included; 'A-' to the end)")
    export = db.add_parser("export", help="records as CSV and/or JSON")
    export.add_argument("--csv", type=Path)
    export.add_argument("--json", type=Path)
    plot = db.add_parser("plot", help="best-so-far and latency histogram PNGs")
    plot.add_argument("--out", type=Path, required=True)
    compare = db.add_parser("compare", help="two databases side by side")
    compare.add_argument("other", type=Path)
    prune = db.add_parser("prune", help="keep the K best records per workload (backup kept)")
    prune.add_argument("--keep", type=int, required=True)
    for action in db.choices.values():
        action.add_argument("dir", type=Path, help="the tuning work dir")
    return p


def _warn(msg: str) -> None:
    print(f"scan-tir: {msg}", file=sys.stderr, flush=True)


def _load(path: Path):
    from .db import load

    db = load(path)  # DatabaseError: main turns it into exit code 2
    for problem in db.problems:
        _warn(f"skipped {problem}")
    if not db.entries:
        _warn(f"{path}: no readable tuning records")
    return db


def _ms(x: float) -> str:
    return "-" if math.isnan(x) or math.isinf(x) else f"{x:.4g}"


def _options(args: argparse.Namespace, named: LoweringOptions) -> LoweringOptions:
    """The workload's options (``named``), or every option off with --legacy, then the
    flags given one by one."""
    options = LoweringOptions.legacy() if args.legacy else named
    flags = {k: getattr(args, k) for k in LoweringOptions.names() if getattr(args, k) is not None}
    return replace(options, **flags)


def _tune(args: argparse.Namespace) -> int:
    from . import workloads
    from .errors import ScanLoweringError
    from .tune import parse_rpc, tune

    if args.trials < 1:
        raise UsageError(f"--trials must be at least 1, got {args.trials}")
    if args.rpc:
        try:
            parse_rpc(args.rpc)
        except ValueError as err:
            raise UsageError(str(err)) from None
    try:
        workload = workloads.get(args.workload, **_sizes(args.sizes))
    except ScanLoweringError as err:
        raise UsageError(str(err)) from None
    workload = replace(workload, options=_options(args, workload.options))
    if args.dynamic:
        return _tune_dynamic(args, workload)
    if args.chunks:
        return _tune_forms(args, workload)
    alone = [f for f, given in [("--out", args.out), ("--time-everywhere", args.time_everywhere),
                                ("--packed", args.packed)] if given]
    if alone:
        raise UsageError(f"{alone[0]} goes with --dynamic")
    result = tune(
        workload,
        args.work_dir,
        args.trials,
        rpc=args.rpc,
        trials_per_iter=args.trials_per_iter,
        build_timeout_s=args.build_timeout,
        population=args.population,
        per_scan=args.per_scan,
    )
    print(
        f"{workload.name}: {result.records_after} records in {result.work_dir} "
        f"({result.records_before} before this run, {result.seconds:.0f} s)"
    )
    return SKIPPED_LINES if result.repaired else OK


def _tune_forms(args: argparse.Namespace, workload) -> int:
    from .lower import linear_problem
    from .lower.graph import analyse
    from .tune import tune_forms

    for flag in ("rpc", "per_scan", "out", "time_everywhere"):
        if getattr(args, flag):
            raise UsageError(f"--{flag.replace('_', '-')} does not go with --chunks")
    tensors = workload.tensors()
    problems = [linear_problem(body) for body in analyse(tensors).scans.values()]
    if all(problems):
        print(f"{workload.name}: no scan is linear in its state ({'; '.join(problems)}); "
              "tuning the sequential form only")
    forms = tune_forms(tensors, args.work_dir, args.trials, chunks=args.chunks,
                       options=workload.options, weights=workload.weights(),
                       population=args.population)
    for form, ms in forms.latency_ms.items():
        where = args.work_dir / form.replace(" ", "_")
        print(f"{workload.name} [{form}]: best {_ms(ms)} ms ({where})")
    print(f"fastest: {forms.best}")
    return OK


def _tune_dynamic(args: argparse.Namespace, workload) -> int:
    from .tune import default_target, dynamic

    if args.per_scan or args.rpc:
        raise UsageError("--dynamic tunes locally, one task per representative instance: "
                         "drop --per-scan and --rpc")
    if args.kernels < 1:
        raise UsageError(f"--kernels must be at least 1, got {args.kernels}")
    instances = {}
    for text in args.dynamic:
        name, _, values = text.partition("=")
        try:
            instances[name] = [int(v) for v in values.split(",")]
        except ValueError:
            raise UsageError(f"--dynamic: expected SIZE=V,V,..., got {text!r}") from None
    func = workload.symbolic_func(list(instances), packed=args.packed)
    result = dynamic(func, args.work_dir, instances, trials=args.trials, kernels=args.kernels,
                     population=args.population, predict=not args.time_everywhere,
                     reference=workload.symbolic_case())
    print(f"{workload.recurrence.name}: {len(result.kernels)} kernels from "
          f"{result.candidates} timed records ({len(result.skipped)} skipped)")
    for instance, kernel in sorted(result.table.items()):
        shape = ", ".join(f"{n}={v}" for n, v in zip(result.names, instance))
        print(f"  {shape}: kernel {kernel}, {result.latency_ms[instance]:.4g} ms "
              f"(expected {result.predicted_ms[instance]:.4g})")
    for at, start in sorted(result.padded.items()):
        print(f"  step size {start} to {at - 1}: the bodies of {at}, on padded copies")
    if args.out:
        result.compile(default_target()).export_library(str(args.out))
        print(f"wrote {args.out} (tvm.runtime.load_module; 'main' takes the function's "
              "inputs and outputs at any size" + (
                  ", then the packed weights, of shapes " + ", ".join(
                      str(list(shape)) for shape, _ in result.packed)
                  + ", which 'prepack' fills once from the same arguments)"
                  if result.packed else ")"))
    return OK


def _compile(args: argparse.Namespace) -> int:
    from .relax.deploy import SUFFIXES, compile_model
    from .tune import default_target

    if args.trials < 0:
        raise UsageError(f"--trials must be 0 or more, got {args.trials}")
    if args.model.suffix not in SUFFIXES or not args.model.is_file():
        raise UsageError(f"{args.model}: give an existing model file ({', '.join(SUFFIXES)})")
    out, inputs = compile_model(
        args.model,
        args.out,
        args.work_dir,
        args.trials,
        target=default_target(),
        sizes=_sizes(args.sizes),
        population=args.population,
    )
    files = " ".join(f"{name}.npy" for name in inputs)
    print(f"wrote {out}; run it with: scan-tir run {out} {files}")
    return OK


def _run(args: argparse.Namespace) -> int:
    import numpy as np

    from .relax.deploy import run_library

    for path in (args.library, *args.inputs):
        if not path.is_file():
            raise UsageError(f"{path}: no such file")
    outputs, ms = run_library(args.library, [np.load(p) for p in args.inputs], args.repeats)
    for i, out in enumerate(outputs):
        print(f"output {i}: shape {out.shape}, {out.dtype}")
    if ms is not None:
        print(f"median of {args.repeats} calls: {ms:.4g} ms")
    if args.save:
        np.savez(args.save, *outputs)
        print(f"outputs saved to {args.save}")
    return OK


def _db(args: argparse.Namespace) -> int:
    from . import db as dbm
    from .tune import default_target, log

    db = _load(args.dir)
    if args.action == "summary":
        print(f"{'workload':<50} {'records':>7} {'valid':>6} {'best ms':>9} {'median ms':>9} "
              f"{'best at':>7}")
        for s in dbm.summary(db):
            print(f"{s.name:<50} {s.records:>7} {s.valid:>6} {_ms(s.best_ms):>9} "
                  f"{_ms(s.median_ms):>9} {s.best_trial:>7}")
    elif args.action == "top":
        target = None if args.no_baseline else default_target()
        print(f"{'workload':<50} {'rank':>4} {'record':>6} {'ms':>9} {'untuned ms':>10} "
              f"{'speed-up':>8}")
        for r in dbm.top(db, args.k, target):
            print(f"{r.name:<50} {r.rank:>4} {r.entry.index:>6} {_ms(r.entry.mean_ms):>9} "
                  f"{_ms(r.untuned_ms):>10} {_ms(r.speedup):>8}")
    elif args.action == "show":
        log(f"show: regenerating the design space to attribute record {args.record}")
        try:
            print(dbm.render(dbm.show(db, args.record)))
        except IndexError as err:
            raise UsageError(str(err)) from None
    elif args.action == "verify":
        return _verify(
            db, dbm, default_target(), args.tol, log, args.seq, args.build_timeout,
            args.own_targets, args.records,
        )
    elif args.action == "export":
        if not args.csv and not args.json:
            raise UsageError("db export: give --csv FILE and/or --json FILE")
        if args.csv:
            dbm.to_csv(db, args.csv)
        if args.json:
            dbm.to_json(db, args.json)
        print(f"exported {len(db.entries)} records")
    elif args.action == "plot":
        for path in dbm.plot(db, args.out):
            print(path)
    elif args.action == "compare":
        other = _load(args.other)
        print(f"{'workload':<50} {'A rec':>6} {'A best':>9} {'B rec':>6} {'B best':>9} "
              f"{'A/B':>6}")
        for r in dbm.compare(db, other):
            print(f"{r.name:<50} {r.a.records:>6} {_ms(r.a.best_ms):>9} {r.b.records:>6} "
                  f"{_ms(r.b.best_ms):>9} {_ms(r.ratio):>6}")
        return SKIPPED_LINES if db.problems or other.problems else OK
    elif args.action == "prune":
        if args.keep < 1:
            raise UsageError(f"db prune: --keep must be at least 1, got {args.keep}")
        before, after = dbm.prune(args.dir, args.keep)
        print(f"kept {after} of {before} records (the original is kept as a .bak-prune file)")
    return SKIPPED_LINES if db.problems else OK


def _index_range(text: str) -> range:
    """``A-B`` (both included) or ``A-`` as a range of record indices, for argparse."""
    first, sep, last = text.partition("-")
    try:
        start = int(first)
        stop = int(last) + 1 if last else sys.maxsize
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A-B or A-, got {text!r}") from None
    if not sep or start < 0 or stop <= start:
        raise argparse.ArgumentTypeError(f"expected A-B with 0 <= A <= B, or A-; got {text!r}")
    return range(start, stop)


def _range_text(records: range) -> str:
    return f"{records.start}-" + ("" if records.stop == sys.maxsize else str(records.stop - 1))


def _verify(
    db, dbm, target, tol: float, log, seq: int | None, build_timeout_s: float, own: bool,
    records: range | None,
) -> int:
    if seq is not None and seq < 1:
        raise UsageError(f"db verify: --seq must be at least 1, got {seq}")

    done = []

    def progress(v, total: int) -> None:
        done.append(v)
        state = "ok" if v.ok else f"FAILED: {v.problem}"
        log(f"verify: record {v.index} ({len(done)}/{total}): error {_ms(v.max_error)} {state}")

    verdicts = dbm.verify(
        db, target, tol, on_verdict=progress, seq=seq, build_timeout_s=build_timeout_s,
        own_targets=own, records=records,
    )
    failed = [v for v in verdicts if not v.ok]
    chosen = [e for e in db.entries if records is None or e.index in records]
    if records is not None and not chosen:
        raise UsageError(f"db verify: no record in {_range_text(records)}; the database has "
                         f"{len(db.entries)} (0 to {len(db.entries) - 1})")
    skipped = len(chosen) - len(verdicts)
    for v in failed:
        print(f"record {v.index}: {v.problem}")
    at = f" at {seq} steps" if seq is not None else ""
    of = f" (records {_range_text(records)})" if records is not None else ""
    print(f"verified {len(verdicts)} records{of}{at}: {len(verdicts) - len(failed)} ok, "
          f"{len(failed)} failed; {skipped} skipped (failed when tuned)")
    if failed:
        return VERIFY_FAILED
    return SKIPPED_LINES if db.problems else OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``scan-tir`` console script; returns the exit code."""
    args = _parser().parse_args(argv)  # argparse exits with 2 on a usage error
    from .db import DatabaseError
    from .errors import ScanLoweringError

    try:
        command = {"tune": _tune, "compile": _compile, "run": _run, "db": _db}[args.command]
        return command(args)
    except (UsageError, DatabaseError, ScanLoweringError) as err:
        _warn(str(err))
        return BAD_INPUT
    except OSError as err:  # a work dir that is a file, an unwritable output path
        _warn(f"{err.filename or ''}: {err.strerror or err}")
        return BAD_INPUT
    except Exception as err:  # TVM's errors (tuning, builds): a message, not a traceback
        lines = str(err).strip().splitlines()
        _warn(f"TVM failed: {type(err).__name__}: {lines[-1] if lines else ''}")
        return TVM_FAILED


if __name__ == "__main__":
    sys.exit(main())
