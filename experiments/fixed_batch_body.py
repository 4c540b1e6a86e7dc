"""What a symbolic batch costs a tuned schedule, and what fixing the batch in its body gives
back (issue 17: why ``tune.dynamic`` builds each schedule with the step's sizes fixed at
the listed values, :func:`scan_tir.tune.symbolic.specialize_body`).

The best records of a database tuned at one shape of a zoo recurrence are replayed on the
function with batch and length symbolic (``replay_sized``), then built three ways and
timed side by side at each instance: generic (both sizes symbolic, as ``apply_best``
serves a shape today), the body fixed at the instance's batch (the parameters still
symbolic: what the dispatching function runs at a listed batch), and the whole function
fixed at the instance (what the tuning measured). Each is checked against the untuned
function first.

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/fixed_batch_body.py
--work-dir build/dynamic_grid/per_instance_16x256 --at 16x256,3x64,1x16``.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np
import tvm
from bench.build import build
from bench.check import max_err
from bench.report import fmt, header, markdown_table, start_run
from bench.timing import evaluator_latency_ms, median
from tvm.s_tir import meta_schedule as ms

from scan_tir import workloads
from scan_tir.db import numerics
from scan_tir.tune.symbolic import replay_sized, specialize, specialize_body


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="lstm")
    p.add_argument("--sizes", default="input=512,hidden=256")
    p.add_argument("--work-dir", type=Path, required=True, help="a database of that workload")
    p.add_argument("--at", default="16x256", help="instances BATCHxSEQ, comma-separated")
    p.add_argument("--records", type=int, default=1, help="the best this many records")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    load = start_run()
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in args.sizes.split(","))}
    names = ["batch", "seq"]
    func = workloads.get(args.workload, seq=16, batch=1, **sizes).symbolic_func(names)
    records = sorted(
        ms.database.JSONDatabase(work_dir=str(args.work_dir)).get_all_tuning_records(),
        key=lambda r: statistics.median(float(x) for x in r.run_secs) if r.run_secs else 1e9,
    )[: args.records]
    reference = build(func)
    rows = []
    for rank, record in enumerate(records):
        kernel = replay_sized(record.trace, func)
        generic = build(kernel)
        for text in args.at.split(","):
            at = dict(zip(names, (int(v) for v in text.split("x"))))
            fixed_shape = specialize(func, at)
            shapes = [tuple(int(d) for d in q.ty.shape) for q in fixed_shape.params]
            inputs = [np.random.default_rng(0).uniform(-1, 1, s).astype("float32")
                      for s in shapes]
            want = numerics.call(reference, inputs)
            body_fixed = specialize_body(kernel, {"batch": at["batch"]})
            libs = {"generic": generic, "body fixed at the batch": build(body_fixed),
                    "function fixed": build(specialize(kernel, at))}
            times = {}
            for name, lib in libs.items():
                got = numerics.call(lib, inputs)
                err = max(max_err(g, w) for g, w in zip(got, want))
                if err > 1e-4:
                    raise SystemExit(f"record {rank}, {name}, at {text}: off by {err:.3g}")
                args_ = [tvm.runtime.tensor(a.copy()) for a in inputs]
                times[name] = median(evaluator_latency_ms(lib, args_, args.repeats))
            rows.append([str(rank), text, *(fmt(t) for t in times.values()),
                         fmt(times["generic"] / times["body fixed at the batch"])])
    print(header(load))
    print(f"{args.workload} {sizes}, the best {len(records)} record(s) of {args.work_dir}; "
          f"median ms of {args.repeats} time_evaluator repeats")
    print(markdown_table(["record", "instance", "generic", "body fixed at the batch",
                          "function fixed", "generic / body fixed"], rows))


if __name__ == "__main__":
    main()
