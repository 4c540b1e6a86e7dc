"""Why scan-tir emits the "step" encoding: probe three S-TIR encodings of one scan.

Archived probe: it ran at commits cca0d56 and 22811b4 (2026-11-30, notes.md section 1); its
finding lives in the converter (scan_tir/lower: the step encoding). It lowers with
``LoweringOptions.legacy()``, the converter it ran with, and compiles for llvm's generic
CPU as it did then.

The model is a simple RNN, h[0] = 0 and h[t] = tanh(h[t-1] @ W + x[t]) for t >= 1, with n = 64,
written as three sibling computations per step: ``dense`` (the reduction over k), ``bias``
(elementwise, there so that ``compute_inline`` has a producer to inline) and ``s_update``.
It is encoded three ways (see ../shared/FIELD_NOTES.md):

* ``step``: what ``scan_tir.create_prim_func`` emits from the TE graph: a serial loop over t in
  the scan's block, one block per step whose time iterator is ``T.axis.scan`` (ordered), and
  ordinary spatial/reduce blocks inside it that work on match_buffer views of the step's slices.
* ``flat``: a serial loop over t at the root holding the three blocks as siblings. The blocks
  bind t as an ordered ``T.axis.scan`` iterator, the kind that says what t is. t has to be
  bound: using the loop var directly inside a block is ill-formed S-TIR (the probe records the
  verifier's message), and binding it spatial is the third encoding.
* ``t-spatial``: the flat form with t declared ``T.axis.spatial``, so the schedule believes that
  time steps are independent.

For each encoding the probe records whether the function is well-formed and builds and computes
the right answer at lengths 16 and 4096; then, each on a fresh ``tvm.s_tir.Schedule`` of the
length-4096 function, whether the schedule primitives a tuner needs are accepted. An accepted
schedule is built and checked against numpy too, because "accepted" is only useful if the result
is still right. ``parallel`` of the time loop is the one primitive that must be refused; where it
is not, the race it introduces is measured at both lengths over several runs. Finally the
unscheduled modules' latency at length 4096 is given for reference.

Run: ``TVM_NUM_THREADS=2 python experiments/archive/encoding_probe.py`` (the race needs >= 2
threads).
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import s_tir, te, tirx
from tvm.s_tir.schedule import LoopRV
from tvm.script import tirx as T

import scan_tir

N = 64
LENGTHS = (16, 4096)
SCHEDULE_LENGTH = 4096
TOL = 1e-4
RACE_RUNS = 10
LATENCY_REPEATS = 15
TARGET_JSON = {"kind": "llvm", "num-cores": 2}
ENCODINGS = ("step", "flat", "t-spatial")


# ----------------------------------------------------------------------------- the encodings


def step_func(length: int, n: int = N) -> tirx.PrimFunc:
    """The step encoding, from the TE graph through the project's converter (what ships)."""
    x = te.placeholder((length, n), name="X")
    w = te.placeholder((n, n), name="W")
    s = te.placeholder((length, n), name="s")
    init = te.compute((1, n), lambda _, i: tirx.const(0.0, "float32"), name="s_init")
    k = te.reduce_axis((0, n), name="k")
    d = te.compute((length, n), lambda t, i: te.sum(s[t - 1, k] * w[k, i], axis=k), name="dense")
    b = te.compute((length, n), lambda t, i: d[t, i] + x[t, i], name="bias")
    u = te.compute((length, n), lambda t, i: te.tanh(b[t, i]), name="s_update")
    res = scan_tir.scan(init, u, s, name="rnn")
    return scan_tir.create_prim_func([x, w, res], options=scan_tir.LoweringOptions.legacy())


def flat_func(length: int, n: int = N, t_axis: Callable = T.axis.scan) -> tirx.PrimFunc:
    """The flat encoding: sibling blocks under a root loop over t; ``t_axis`` binds t.

    Step t (0-based, t < length - 1) reads S[t] and writes S[t + 1], so the loop starts at 0
    (``split`` refuses loops that do not). The temporaries have one row per step, so that no
    two steps write the same element: the encoding is then as parallel-friendly as it can be,
    and any refusal comes from how t is declared, not from a false write-after-write.
    """
    steps = length - 1

    @T.prim_func(s_tir=True)
    def main(
        X: T.Buffer((length, n), "float32"),
        W: T.Buffer((n, n), "float32"),
        S: T.Buffer((length, n), "float32"),
    ):
        dense = T.sblock_alloc_buffer((steps, n))
        bias = T.sblock_alloc_buffer((steps, n))
        for i in range(n):
            with T.sblock("s_init"):
                vi = T.axis.spatial(n, i)
                S[0, vi] = T.float32(0)
        for t in range(steps):
            for i, k in T.grid(n, n):
                with T.sblock("dense"):
                    vt = t_axis(steps, t)
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        dense[vt, vi] = T.float32(0)
                    dense[vt, vi] = dense[vt, vi] + S[vt, vk] * W[vk, vi]
            for i in range(n):
                with T.sblock("bias"):
                    vt = t_axis(steps, t)
                    vi = T.axis.spatial(n, i)
                    bias[vt, vi] = dense[vt, vi] + X[vt + 1, vi]
            for i in range(n):
                with T.sblock("s_update"):
                    vt = t_axis(steps, t)
                    vi = T.axis.spatial(n, i)
                    S[vt + 1, vi] = T.tanh(bias[vt, vi])

    return main


def flat_direct_error(length: int = 16, n: int = N) -> str:
    """Why the flat form must bind t as a block iterator: using the loop var directly is
    ill-formed S-TIR. Returns the verifier's message (empty if it unexpectedly passes)."""

    @T.prim_func(s_tir=True, check_well_formed=False)
    def main(
        X: T.Buffer((length, n), "float32"),
        W: T.Buffer((n, n), "float32"),
        S: T.Buffer((length, n), "float32"),
    ):
        for t in range(1, length):
            for i in range(n):
                with T.sblock("s_update"):
                    vi = T.axis.spatial(n, i)
                    S[t, vi] = T.tanh(S[t - 1, vi] + X[t, vi])

    try:
        s_tir.analysis.verify_well_formed(main, True)
    except Exception as err:  # the message is the evidence
        return first_line(err)
    return ""


BUILDERS: dict[str, Callable[[int], tirx.PrimFunc]] = {
    "step": step_func,
    "flat": flat_func,
    "t-spatial": lambda length: flat_func(length, t_axis=T.axis.spatial),
}
#: The block whose outermost loop is the time loop, per encoding.
TIME_BLOCK = {"step": "rnn_step", "flat": "dense", "t-spatial": "dense"}


# ----------------------------------------------------------------------------- running


@dataclass
class Data:
    """Inputs and the float64 numpy answer for one length."""

    x: np.ndarray
    w: np.ndarray
    ref: np.ndarray


def make_data(length: int, n: int = N, seed: int = 0) -> Data:
    """Weights scaled like PyTorch's RNN init so the state neither saturates nor dies out
    over 4096 steps; otherwise a race could hide behind tanh(large) == 1."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((length, n)).astype("float32")
    w = rng.uniform(-1, 1, (n, n)).astype("float32") / np.float32(np.sqrt(n))
    ref = np.zeros((length, n))
    for t in range(1, length):
        ref[t] = np.tanh(ref[t - 1] @ w.astype("float64") + x[t])
    return Data(x, w, ref)


def first_line(err: BaseException) -> str:
    """The error's type and its most telling line.

    A ScheduleError's first line only names the primitive; the reason follows an
    "Error message:" marker, so that line is added when present.
    """
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    head = lines[0] if lines else ""
    why = next((ln for ln in lines if ln.startswith("Error message:")), "")
    text = f"{head} {why}".strip() if why and why != head else head
    kind = type(err).__name__
    return text if text.startswith(kind) else f"{kind}: {text}"


def build(func: tirx.PrimFunc) -> tvm.runtime.Module:
    """Compile for the 2-core llvm target every measurement in this project uses."""
    target = tvm.target.Target(TARGET_JSON)
    return tvm.compile(tvm.IRModule({"main": func}), target=target).jit()


def run(mod: tvm.runtime.Module, data: Data) -> np.ndarray:
    """One call on fresh, zeroed state, so a race reads zeros and not a previous answer."""
    out = tvm.runtime.tensor(np.zeros(data.ref.shape, "float32"))
    mod["main"](tvm.runtime.tensor(data.x), tvm.runtime.tensor(data.w), out)
    return out.numpy()


def max_err(got: np.ndarray, data: Data) -> float:
    """Max abs error against the float64 reference."""
    return float(np.max(np.abs(got.astype("float64") - data.ref)))


def latency_ms(mod: tvm.runtime.Module, data: Data) -> float:
    """Median per-call ms over LATENCY_REPEATS repeats of TVM's time_evaluator."""
    args = [tvm.runtime.tensor(a) for a in (data.x, data.w, np.zeros(data.ref.shape, "float32"))]
    timer = mod.time_evaluator("main", tvm.cpu(), number=3, repeat=LATENCY_REPEATS)
    return statistics.median(timer(*args).results) * 1e3


# ----------------------------------------------------------------------------- primitives


def loops(sch: s_tir.Schedule, block: str) -> list[LoopRV]:
    """Loops of a block up to its enclosing block; the last two of "dense" are (i, k)."""
    return list(sch.get_loops(sch.get_sblock(block)))


def p_compute_inline(sch: s_tir.Schedule, enc: str) -> None:
    """Fusing elementwise producers into consumers: the first thing AutoInline does."""
    sch.compute_inline(sch.get_sblock("bias"))


def p_split_reorder(sch: s_tir.Schedule, enc: str) -> None:
    """Tiling the GEMV: what MultiLevelTiling does to the reduction's loops."""
    i, k = loops(sch, "dense")[-2:]
    io, ii = sch.split(i, [None, 16])
    sch.reorder(io, k, ii)


def p_decompose_reduction(sch: s_tir.Schedule, enc: str) -> None:
    """Separating the init of the reduction (RewriteReductionBlock postproc)."""
    sch.decompose_reduction(sch.get_sblock("dense"), loops(sch, "dense")[-2])


def p_cache_write(sch: s_tir.Schedule, enc: str) -> None:
    """Accumulating in a local buffer (MultiLevelTiling's write cache)."""
    sch.cache_write(sch.get_sblock("dense"), 0, "global")


def p_rfactor(sch: s_tir.Schedule, enc: str) -> None:
    """Splitting the reduction to parallelize it (AddRFactor)."""
    sch.rfactor(loops(sch, "dense")[-1], 0)


def p_parallel_inner(sch: s_tir.Schedule, enc: str) -> None:
    """Parallel within a step (over the GEMV's output i): the legal source of parallelism."""
    sch.parallel(loops(sch, "dense")[-2])


def p_vectorize_inner(sch: s_tir.Schedule, enc: str) -> None:
    """Vector lanes within a step (over the update's i)."""
    sch.vectorize(loops(sch, "s_update")[-1])


def p_parallel_t(sch: s_tir.Schedule, enc: str) -> None:
    """Parallel over time: wrong for a recurrence, so an encoding must make it refuse."""
    sch.parallel(loops(sch, TIME_BLOCK[enc])[0])


PRIMITIVES: dict[str, Callable[[s_tir.Schedule, str], None]] = {
    "compute_inline": p_compute_inline,
    "split+reorder": p_split_reorder,
    "decompose_reduction": p_decompose_reduction,
    "cache_write": p_cache_write,
    "rfactor": p_rfactor,
    "parallel(inner)": p_parallel_inner,
    "vectorize(inner)": p_vectorize_inner,
    "parallel(t)": p_parallel_t,
}


@dataclass
class Outcome:
    """One primitive on one encoding: refused (with why) or accepted (and then checked)."""

    accepted: bool
    error: str = ""
    errors: dict[int, list[float]] = field(default_factory=dict)  # length -> errs of runs


def try_primitive(
    enc: str, prim: str, funcs: dict[int, tirx.PrimFunc], data: dict[int, Data]
) -> Outcome:
    """Apply one primitive on a fresh schedule; if accepted, build and check the result.

    The primitive is applied anew to the function of each length, SCHEDULE_LENGTH first, whose
    answer is the one reported; a different answer at another length is reported as such.
    parallel(t) is run RACE_RUNS times per length, because a race need not show every time.
    """
    results: dict[int, list[float]] = {}
    for length in sorted(funcs, key=lambda n: n != SCHEDULE_LENGTH):
        sch = s_tir.Schedule(funcs[length])
        # Only a later length can disagree with the reported one: say so rather than hide it.
        late = "" if length == SCHEDULE_LENGTH else f"accepted at L={SCHEDULE_LENGTH}, but "
        try:
            PRIMITIVES[prim](sch, enc)
        except s_tir.ScheduleError as err:
            return Outcome(bool(late), late + first_line(err))
        except Exception as err:  # any refusal is a result, its type says how
            return Outcome(bool(late), late + first_line(err))
        try:
            s_tir.analysis.verify_well_formed(sch.mod["main"], True)
            mod = build(sch.mod["main"])
        except Exception as err:  # accepted but unusable is a result too
            return Outcome(True, "accepted, then " + first_line(err))
        runs = RACE_RUNS if prim == "parallel(t)" else 1
        results[length] = [max_err(run(mod, data[length]), data[length]) for _ in range(runs)]
    return Outcome(True, errors=results)


# ----------------------------------------------------------------------------- report


@dataclass
class Row:
    """Everything measured for one encoding."""

    name: str
    well_formed: str
    correct: dict[int, str]
    latency: str
    prims: dict[str, Outcome]


def correctness(func: tirx.PrimFunc, data: Data) -> tuple[str, tvm.runtime.Module | None]:
    """'yes (err)' / 'NO (err)' / 'build fails' for the unscheduled function."""
    try:
        mod = build(func)
    except Exception as err:
        return f"build fails: {first_line(err)}", None
    err = max_err(run(mod, data), data)
    return f"{'yes' if err <= TOL else 'NO'} ({err:.1e})", mod


def probe(enc: str, data: dict[int, Data]) -> Row:
    """All measurements of one encoding."""
    funcs = {length: BUILDERS[enc](length) for length in LENGTHS}
    ok = all(s_tir.analysis.verify_well_formed(f, False) for f in funcs.values())
    correct, mods = {}, {}
    for length in LENGTHS:
        correct[length], mods[length] = correctness(funcs[length], data[length])
    mod = mods[SCHEDULE_LENGTH]
    lat = f"{latency_ms(mod, data[SCHEDULE_LENGTH]):.2f}" if mod is not None else "-"
    prims = {p: try_primitive(enc, p, funcs, data) for p in PRIMITIVES}
    return Row(enc, "yes" if ok else "NO", correct, lat, prims)


def cell(out: Outcome, notes: list[str], label: str) -> str:
    """Table cell of one primitive; reasons go to numbered notes to keep the table narrow."""
    if out.error:
        notes.append(f"{label}: {out.error}")
        word = "accepted, unusable" if out.accepted else "refused"
        return f"{word} [{len(notes)}]"
    worst = max(e for errs in out.errors.values() for e in errs)
    return "accepted" if worst <= TOL else f"accepted, WRONG ({worst:.2g})"


def race_cell(out: Outcome) -> str:
    """parallel(t) per length: how many of the RACE_RUNS runs were wrong, and the worst error."""
    if not out.accepted or not out.errors:
        return "n/a (refused)"
    parts = [
        f"L={n}: {sum(x > TOL for x in e)}/{len(e)} wrong, max {max(e):.2g}"
        for n, e in sorted(out.errors.items())
    ]
    return "; ".join(parts)


def table(rows: list[Row]) -> tuple[str, list[str]]:
    """The Markdown table and its numbered notes."""
    head = ["encoding", "well-formed"]
    head += [f"correct@{n} (err)" for n in LENGTHS]
    head += list(PRIMITIVES)
    head += ["parallel(t) race: runs wrong, max err", f"default ms @{SCHEDULE_LENGTH}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes: list[str] = []
    for r in rows:
        cells = [r.name, r.well_formed, *(r.correct[n] for n in LENGTHS)]
        cells += [cell(r.prims[p], notes, f"{r.name}, {p}") for p in PRIMITIVES]
        cells += [race_cell(r.prims["parallel(t)"]), r.latency]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), notes


def main() -> int:
    """Probe every encoding and print the command, the table and the refusal reasons."""
    if os.environ.get("TVM_NUM_THREADS") is None:
        print("warning: TVM_NUM_THREADS is unset; run with TVM_NUM_THREADS=2", file=sys.stderr)
    data = {length: make_data(length) for length in LENGTHS}
    rows = [probe(enc, data) for enc in ENCODINGS]
    text, notes = table(rows)
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    print(f"Command: `TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS', '(unset)')} {cmd}`")
    print(
        f"TVM {tvm.__version__}, target {TARGET_JSON}, n={N}, lengths {LENGTHS}; primitives "
        f"applied at L={SCHEDULE_LENGTH} and checked at every length; correct means max abs "
        f"err <= {TOL:g} vs a float64 numpy reference."
    )
    print()
    print(text)
    print()
    for i, note in enumerate(notes, 1):
        print(f"[{i}] {note}")
    direct = flat_direct_error()
    print()
    print(f"Flat with t used directly in a block (not bound as an iterator): {direct or 'passes'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
