"""Helpers shared by the tests: build a PrimFunc, run it on numpy arrays, compare, look
inside. Test modules import helpers from here (and from workloads.py, tuning.py), never
from one another."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tvm
import tvm_ffi
from tvm import s_tir, tirx

import scan_tir
from scan_tir import LoweringOptions
from scan_tir.lower.vocabulary import expected_scans
from scan_tir.transform import PIPELINE
from scan_tir.workloads.base import WORKLOAD_ATTR

#: The test database: 4 records of ``lstm(seq=8, batch=1, input=4, hidden=8)`` lowered with
#: ``LoweringOptions.legacy()`` (the converter's only lowering when it was made; tagged with
#: its options since). With today's flags: ``scan-tir tune lstm --legacy --sizes
#: seq=8,batch=1,input=4,hidden=8 --trials 4 --trials-per-iter 2 --population 16
#: -d tests/data/lstm_tiny``, logs removed.
FIXTURE = Path(__file__).parent / "data" / "lstm_tiny"
FIXTURE_SIZES = {"seq": 8, "batch": 1, "input": 4, "hidden": 8}
FIXTURE_OPTIONS = LoweringOptions.legacy()
RECORDS = "database_tuning_record.json"

#: The tolerance of every comparison of a float32 recurrence with its float64 reference.
RTOL, ATOL = 1e-4, 1e-5


def compile_func(func: tirx.PrimFunc) -> tvm.runtime.Module:
    assert s_tir.analysis.verify_well_formed(func)
    return tvm.compile(tvm.IRModule({"main": func}), target="llvm", tir_pipeline=PIPELINE)


def lower_and_build(
    args: list, options: LoweringOptions | None = None
) -> tuple[tirx.PrimFunc, tvm.runtime.Module]:
    func = scan_tir.create_prim_func(args, options=options)
    return func, compile_func(func)


def run(lib, inputs: list[np.ndarray], out_shapes: list[tuple], dtype="float32"):
    """Call ``lib`` on ``inputs`` plus zeroed outputs; return the outputs as numpy."""
    outs = [tvm.runtime.tensor(np.zeros(s, dtype)) for s in out_shapes]
    lib["main"](*[tvm.runtime.tensor(x) for x in inputs], *outs)
    return [o.numpy() for o in outs]


def outputs(workload, lib, inputs: Sequence[np.ndarray]):
    """Run a zoo workload's ``lib`` on ``inputs``; returns (outputs, numpy reference), the
    outputs in the reference's shapes."""
    ref = workload.numpy(inputs)
    return run(lib, inputs, [r.shape for r in ref]), ref


def assert_close(got, want, rtol: float = RTOL, atol: float = ATOL) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def expected(func: tirx.PrimFunc) -> list:
    """What ``scan_violations`` checks a schedule of ``func`` against."""
    return expected_scans(tvm.IRModule({"main": func}))["main"]


def assert_scans_kept(scheduled: tirx.PrimFunc, original: tirx.PrimFunc) -> None:
    assert scan_tir.scan_violations(scheduled, expected(original)) == []


def blocks(node) -> list[s_tir.SBlock]:
    """Every block under ``node`` (a function or a statement), in program order."""
    body = node.body if isinstance(node, tirx.PrimFunc) else node
    found: list[s_tir.SBlock] = []
    tvm_ffi.structural_walk(body, (s_tir.SBlock, found.append), order="pre")
    return found


def block_names(node) -> list[str]:
    return [str(b.name_hint) for b in blocks(node)]


def loop_kinds(node) -> list[tirx.ForKind]:
    """The kind of every loop under ``node``."""
    kinds: list[tirx.ForKind] = []
    tvm_ffi.structural_walk(node, (tirx.For, lambda loop: kinds.append(loop.kind)))
    return kinds


def untagged(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` without its workload tag, which records the options it was lowered with."""
    return func.without_attr(WORKLOAD_ATTR)


# --- the test database ----------------------------------------------------------------------


def raw_means_ms(work_dir: Path) -> list[float]:
    """Mean run_secs of each record line, read with plain json: the independent reference."""
    lines = (work_dir / RECORDS).read_text().splitlines()
    return [1e3 * sum(r) / len(r) for r in (json.loads(x)[1][1] for x in lines)]


def damage(work_dir: Path) -> list[str]:
    """Append a record pointing at a missing workload, then half a record (a killed write);
    returns the lines that were there."""
    lines = (work_dir / RECORDS).read_text().splitlines()
    orphan = json.dumps([7, json.loads(lines[0])[1]])
    with (work_dir / RECORDS).open("a") as fh:
        fh.write(orphan + "\n" + lines[1][: len(lines[1]) // 2])
    return lines


def matches_torch(executable, module, x, rtol: float, atol: float) -> None:
    """A built Relax module (``main`` on ``x``) against the PyTorch module it came from."""
    import torch
    from tvm import relax

    vm = relax.VirtualMachine(executable, tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x.numpy()))
    with torch.no_grad():
        ref = module(x)
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=rtol, atol=atol)
