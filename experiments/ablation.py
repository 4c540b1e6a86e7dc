"""What fast math and in-place packed weights each do to one and the same schedule.

For each config, the best schedule of its database is built four ways and timed side by
side: as tuned, with ``scan_tir.fast_math`` applied to the scheduled function (a libm
database's schedule) or not, and on prepacked weights with the per-call weight copy
elided (``scan_tir.prepacked``) or kept (``RemoveWeightLayoutRewriteBlock`` alone). All
inputs are random (uniform in [-0.1, 0.1]), as the tuning runner's; every variant is first
checked against the one built as tuned, on the same inputs (fast math: within 1e-5).

Run: ``TVM_NUM_THREADS=2 python experiments/ablation.py --configs A,B,A-fast`` from the
repo root, after tune_lstm.py has filled ``experiments/results/<config>/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import tvm
from tune_lstm import build, config_module, open_database, param_shape, target
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

import scan_tir

VARIANTS = ("copy kept", "copy elided", "copy kept, fast_math", "copy elided, fast_math")


def variants(tuned: tvm.IRModule) -> dict[str, tvm.tirx.PrimFunc]:
    """The tuned module's function on prepacked weights, built each of the VARIANTS ways."""
    kept = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(tuned)["main"]
    elided = scan_tir.prepacked(tuned)["main"]
    funcs = [kept, elided, scan_tir.fast_math(kept), scan_tir.fast_math(elided)]
    return dict(zip(VARIANTS, funcs))


def run(func: tvm.tirx.PrimFunc, inputs: list[np.ndarray], repeats: int) -> tuple[float, list]:
    """(median ms, the last two arguments after one call: the LSTM's outputs) of ``func``."""
    mod = build(func)
    args = [tvm.runtime.tensor(a) for a in inputs]
    mod["main"](*args)
    outs = [a.numpy() for a in args[-2:]]
    timer = mod.time_evaluator("main", tvm.cpu(), number=10, repeat=repeats, min_repeat_ms=30)
    return float(np.median(timer(*args).results)) * 1e3, outs


def ablate(name: str, results: Path, repeats: int) -> str:
    mod = config_module(name)
    sch = ms.tir_integration.compile_tir(open_database(results / name), mod, target())
    (_, base), *others = variants(sch.mod).items()
    rng = np.random.default_rng(0)
    shapes = [param_shape(p) for p in base.params]
    inputs = [rng.uniform(-0.1, 0.1, s).astype("float32") for s in shapes]
    base_ms, base_out = run(base, inputs, repeats)
    cells = [f"{base_ms:.4f}"]
    for label, func in others:
        ms_, out = run(func, inputs, repeats)
        for got, want in zip(out, base_out):
            if "fast_math" in label:
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=label)
            else:
                np.testing.assert_array_equal(got, want, err_msg=label)
        cells.append(f"{ms_:.4f}")
    return f"| {name} | " + " | ".join(cells) + " |"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="A,B,A-fast")
    parser.add_argument("--results", default="experiments/results", type=Path)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    print(f"Command: `{' '.join([Path(sys.executable).name, *sys.argv])}`\n")
    head = ["config (its database's best)", *(f"{v} ms" for v in VARIANTS)]
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")
    for name in args.configs.upper().split(","):
        print(ablate(name, args.results, args.repeats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
