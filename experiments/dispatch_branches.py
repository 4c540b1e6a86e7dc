"""A dispatching function built whole against the branch it takes built with the others
emptied (issue 17).

``scan_tir.tune.dynamic`` chooses its kernels by builds of each alone; the dispatching
function is one build of all of them, and a whole build has run a branch many times
slower than the same branch built alone (notes.md: LLVM's LICM cap; TVM's CSE hoisting
vector indices out of parallel launches). Given a dispatching function as
``experiments/dynamic_shapes.py`` leaves it (``<work dir>/dynamic/dispatch.tvmscript``:
its ``prepack`` and ``main``; gzipped or not), this builds, for ``dispatch_target``:

- ``whole``: the function as ``Dynamic.compile`` builds it;
- ``whole, no InlineVectorIndices``: the same without that pass of the pipeline;
- ``branch alone``: the function with every branch but the one the instance takes
  emptied (which branch: the function's own index expression, evaluated at the shape);

and times them side by side at each instance (against numpy first).

Run from the repo root: ``TVM_NUM_THREADS=2 python experiments/dispatch_branches.py
--script build/<dir>/dynamic/dispatch.tvmscript --at 1x16,1x64,2x256``.
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np
import tvm
import tvm_ffi
from bench.report import fmt, header, markdown_table, start_run
from dynamic_shapes import side_by_side
from tvm import s_tir, tirx
from tvm.sym import Analyzer
from tvm.tirx import stmt as S

from scan_tir import workloads
from scan_tir.transform.pipeline import PIPELINE
from scan_tir.tune import default_target, dispatch_target

NO_PASS = "scan_tir.InlineVectorIndices"


def branch_taken(main: tirx.PrimFunc, sizes: dict[str, int]) -> int:
    """The kernel index the function computes at ``sizes`` (its first statement)."""
    store = main.body.block.body.seq[0]

    def at(var: tirx.Var) -> tirx.Expr:
        name = str(var.name)
        return tirx.IntImm(var.ty.dtype, sizes[name]) if name in sizes else var

    return int(Analyzer().simplify(tvm_ffi.structural_map(store.value, (tirx.Var, at))))


def keeping(mod: tvm.IRModule, kept: int) -> tvm.IRModule:
    """``mod`` with every branch of ``main`` but ``kept`` emptied."""
    main = mod["main"]
    realize = main.body
    block = realize.block
    store, chain = block.body.seq

    def keep(stmt: S.Stmt, k: int) -> S.Stmt:
        if not isinstance(stmt, S.IfThenElse):
            return stmt if k == kept else S.Evaluate(tirx.const(0, "int32"))
        then = stmt.then_case if k == kept else S.Evaluate(tirx.const(0, "int32"))
        other = keep(stmt.else_case, k + 1) if stmt.else_case is not None else None
        return S.IfThenElse(stmt.condition, then, other)

    body = S.SeqStmt([store, keep(chain, 0)])
    new_block = s_tir.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint, body,
                             block.init, block.alloc_buffers, block.match_buffers,
                             block.annotations)
    new_main = main.with_body(s_tir.SBlockRealize(realize.iter_values, realize.predicate,
                                                  new_block))
    return tvm.IRModule({"prepack": mod["prepack"], "main": new_main})


def saved_dispatch(script: Path, workload: str, sizes: dict[str, int]) -> tuple[tvm.IRModule, list]:
    """A dispatching function as ``dynamic_shapes.py`` saves it (gzipped or not), and the
    [shape, dtype] of each packed weight its ``prepack`` fills (after the function's own
    parameters)."""
    opened = gzip.open if script.suffix == ".gz" else open
    with opened(script, "rt") as f:
        mod = tvm.script.from_source(f.read())
    zoo = workloads.get(workload, seq=16, **sizes)
    params = len(zoo.symbolic_func(["batch", "seq"], packed=True).params)
    packed = [[[int(d) for d in p.ty.shape], str(p.ty.dtype)]
              for p in mod["prepack"].params[params:]]
    return mod, packed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--script", type=Path, required=True, help="a dispatch.tvmscript")
    p.add_argument("--workload", default="lstm")
    p.add_argument("--sizes", default="input=512,hidden=256")
    p.add_argument("--at", required=True, help="instances, BATCHxSEQ,...")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    load = start_run()
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in args.sizes.split(","))}
    mod, packed = saved_dispatch(args.script, args.workload, sizes)
    target = dispatch_target(default_target())
    whole = tvm.compile(mod, target=target, tir_pipeline=PIPELINE).jit()
    with tvm.transform.PassContext(opt_level=3, disabled_pass=[NO_PASS]):
        unfixed = tvm.compile(mod, target=target, tir_pipeline=PIPELINE).jit()
    rows, alone = [], {}
    for text in args.at.split(","):
        batch, seq = map(int, text.split("x"))
        k = branch_taken(mod["main"], {"batch": batch, "seq": seq})
        if k not in alone:
            alone[k] = tvm.compile(keeping(mod, k), target=target, tir_pipeline=PIPELINE).jit()
        libs = {"whole": whole, "whole, no InlineVectorIndices": unfixed,
                "branch alone": alone[k]}
        wl = workloads.get(args.workload, batch=batch, seq=seq, **sizes)
        values = wl.input_arrays(seed=1)
        times = side_by_side(libs, values, wl.numpy(values), text, args.rounds, args.repeats,
                             {name: packed for name in libs})
        ms = {name: float(np.median(t)) for name, t in times.items()}
        rows.append([text, str(k), *(fmt(ms[n]) for n in libs),
                     f"{ms['whole'] / ms['branch alone']:.2f}"])
        print(rows[-1], flush=True)
    print(header(load))
    print(markdown_table(["instance", "branch", "whole (ms)", "whole, no InlineVectorIndices",
                          "branch alone", "whole / alone"], rows))


if __name__ == "__main__":
    main()
