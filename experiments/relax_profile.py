"""Where a tuned model's time goes: wall time per kernel of the Relax VM (issue 15).

Builds a model of ``relax_models.py`` from its tuning work dir (``scan_tir.relax.build``,
weights packed at build time) and times every call the VM makes through its instrument
hook (``VirtualMachine.set_instrument``): a ``perf_counter`` before and after each packed
function, summed per function over ``--calls`` calls of ``main`` after three warm-up
calls. The hook's own cost (a Python call per VM instruction) is included, so the sum
exceeds the ``time_evaluator`` latency of ``relax_models.py`` a little; the split between
kernels is what this is for.

Run from the repo root after ``relax_models.py --trials N`` has tuned the model:
``TVM_NUM_THREADS=2 python experiments/relax_profile.py --models lm1,tagger``.
"""

from __future__ import annotations

import argparse
import collections
import logging
import time
from pathlib import Path

import tvm
from bench.build import target
from bench.cli import name_list
from bench.frontends import import_scan, torch_export
from bench.models import MODELS
from bench.report import header, markdown_table, start_run
from tvm import relax

import scan_tir.relax as scan_relax


def kernel_ms(vm: relax.VirtualMachine, x: tvm.runtime.Tensor, calls: int) -> dict[str, float]:
    """Mean ms per call of ``main`` spent in each function the VM calls."""
    total: dict[str, float] = collections.defaultdict(float)
    started: dict[str, float] = {}

    def instrument(_func, symbol: str, before: bool, _ret, *_args) -> int:
        if before:
            started[symbol] = time.perf_counter()
        else:
            total[symbol] += time.perf_counter() - started.pop(symbol)
        return 0

    vm.set_instrument(instrument)
    for _ in range(3):
        vm["main"](x)
    total.clear()
    for _ in range(calls):
        vm["main"](x)
    return {k: 1e3 * v / calls for k, v in total.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="lm1,tagger")
    p.add_argument("--work-dir", type=Path, default=Path("build/relax-models"))
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--top", type=int, default=6)
    args = p.parse_args()
    load = start_run()
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    rows = []
    for name in name_list(p, args.models, MODELS):
        case = MODELS[name](False)
        mod = import_scan(torch_export(case.module, (case.input,))[1])
        vm = relax.VirtualMachine(
            scan_relax.build(mod, target(), args.work_dir / name), tvm.cpu()
        )
        times = kernel_ms(vm, tvm.runtime.tensor(case.input.numpy()), args.calls)
        whole = sum(times.values())
        for symbol, ms in sorted(times.items(), key=lambda kv: -kv[1])[: args.top]:
            rows.append([name, symbol, f"{ms:.3f}", f"{100 * ms / whole:.0f}%"])
    print(header(load))
    print()
    print(markdown_table(["model", "function", "ms per call of main", "share"], rows))


if __name__ == "__main__":
    main()
