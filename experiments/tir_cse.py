"""TVM's TIR common-subexpression elimination on and off, side by side (issue 17).

The whole dispatching function takes seconds to build, most of them TIR passes, and
TVM's ``CommonSubexprElim`` is the largest and grows faster than the function (notes.md);
the same pass once hoisted vector indices out of a persistent launch
(``scan_tir.transform.vector_indices``). This builds one function twice with
``PIPELINE``, as every scan-tir build, once as it is and once with the pass context's
``tirx.disable_cse_tir``, prints each build's seconds, and times both at each instance
(checked against numpy first):

- ``--script``: a dispatching function as ``experiments/dynamic_shapes.py`` leaves it
  (``<work dir>/dynamic/dispatch.tvmscript``, its ``prepack`` and ``main``; gzipped or
  not);
- ``--alone``: the per-instance arms of a grid's work dir, each instance's best record
  replayed on the function fixed there (its own kernel, as that arm built it).

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/tir_cse.py --workload gru
--script build/<dir>/dynamic/dispatch.tvmscript --at 1x16,16x64`` (or ``--alone
build/<dir>``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import tvm
from bench.report import header, markdown_table, start_run
from dispatch_branches import saved_dispatch
from dynamic_shapes import side_by_side
from tvm.s_tir import meta_schedule as ms

from scan_tir import workloads
from scan_tir.transform.pipeline import PIPELINE
from scan_tir.transform.weight_prepack import prepack_module
from scan_tir.tune import default_target, dispatch_target
from scan_tir.tune.symbolic import specialize

WAYS = {"TIR CSE": {}, "TIR CSE off": {"tirx.disable_cse_tir": True}}


def built(mod: tvm.IRModule, target) -> tuple[dict, dict]:
    """``mod`` built each way: the modules and the seconds each build took."""
    libs, seconds = {}, {}
    for way, config in WAYS.items():
        start = time.perf_counter()
        with tvm.transform.PassContext(opt_level=3, config=config):
            libs[way] = tvm.compile(mod, target=target, tir_pipeline=PIPELINE).jit()
            libs[way]["main"]  # machine code generated here, inside the build's seconds
        seconds[way] = time.perf_counter() - start
    return libs, seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--script", type=Path, help="a dispatch.tvmscript")
    source.add_argument("--alone", type=Path, help="a grid's work dir")
    p.add_argument("--workload", default="lstm")
    p.add_argument("--sizes", default="input=512,hidden=256")
    p.add_argument("--at", required=True, help="instances, BATCHxSEQ,...")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    load = start_run()
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in args.sizes.split(","))}
    func = workloads.get(args.workload, seq=16, **sizes).symbolic_func(["batch", "seq"],
                                                                        packed=True)
    if args.script:
        mod, packed = saved_dispatch(args.script, args.workload, sizes)
        libs, seconds = built(mod, dispatch_target(default_target()))
        print("build s: " + ", ".join(f"{w} {s:.1f}" for w, s in seconds.items()), flush=True)
    rows = []
    for text in args.at.split(","):
        batch, seq = map(int, text.split("x"))
        if args.alone:
            fixed = tvm.IRModule({"main": specialize(func.with_attr("global_symbol", "main"),
                                                     {"batch": batch, "seq": seq})})
            db = ms.database.JSONDatabase(work_dir=str(args.alone / f"per_instance_{text}"))
            record = db.get_top_k(db.commit_workload(fixed), 1)[0]
            sch = tvm.s_tir.Schedule(fixed)
            record.trace.apply_to_schedule(sch, remove_postproc=False)
            mod, shapes = prepack_module(sch.mod["main"])
            packed = [[list(shape), dtype] for shape, dtype in shapes]
            libs, seconds = built(mod, default_target())
        wl = workloads.get(args.workload, batch=batch, seq=seq, **sizes)
        values = wl.input_arrays(seed=1)
        times = side_by_side(libs, values, wl.numpy(values), text, args.rounds, args.repeats,
                             dict.fromkeys(libs, packed))
        ms_ = {way: float(np.median(t)) for way, t in times.items()}
        rows.append([text, *(f"{ms_[w]:.3f}" for w in WAYS),
                     f"{ms_['TIR CSE off'] / ms_['TIR CSE']:.3f}",
                     *(f"{seconds[w]:.1f}" for w in WAYS)])
        print(rows[-1], flush=True)
    print(header(load))
    print(markdown_table(["instance", *(f"{w} (ms)" for w in WAYS), "off / on",
                          *(f"{w}: build s" for w in WAYS)], rows))


if __name__ == "__main__":
    main()
