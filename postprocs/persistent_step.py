"""``RewritePersistentStep``: carry out a step's persistent decision.

A persistent step (``meta_rules.PersistentStep`` samples it) runs inside one thread-pool
launch for the whole sequence, every thread walking every step and taking its share of
each parallel nest, with a barrier after each nest (``scan_tir.transform.
persistent_launch`` builds it). That is legal only if nothing in the step runs outside a
parallel loop: a serial nest would run on every thread at once, and no barrier would
follow it. So this postproc makes the top loop of every nest of the step parallel, fusing
it with the loops nested alone under it until the fused loop has an iteration per thread;
TVM's ``parallel`` primitive checks each of these (the loop binds only data-parallel
iterators of every block under it). A nest that cannot be shared out (its top loop carries
a reduction, or is vectorised, or the nest has one iteration) runs on the first thread
alone, under a parallel loop whose other iterations do nothing. Where every nest was
shared out, their parallel loops are split to one common extent, so that each thread takes
the same slice of every nest. Then it marks the time loop
:data:`~scan_tir.lower.vocabulary.PERSISTENT`. Only a top loop that is already parallel
over one iteration (which lowering would drop, leaving the nest to every thread), or a
nest TVM's ``parallel`` refuses even a unit loop above (a block without compact dataflow
under it), keeps the step fork-and-join: the candidate is kept, without the mark.
``VerifyScanStructure`` checks the result on every candidate (``scan_violations``: a
marked time loop's step holds parallel nests only).

Touches: the top loops of the nests directly under a step block (fuse, parallel, split to
the common extent; a unit loop added above and split) and the step's time loop (the
:data:`PERSISTENT` annotation only). Never a block outside a step.
"""

from __future__ import annotations

import math

import tvm
from tvm import s_tir, tirx
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule
from tvm.s_tir.meta_schedule.postproc import Postproc, PyPostproc
from tvm.s_tir.schedule import LoopRV, SBlockRV

from scan_tir.lower.vocabulary import PERSISTENT, STEP_PERSISTENT, step_blocks


def _nests(sch: Schedule, step: SBlockRV) -> list[list[LoopRV]]:
    """For each nest under ``step``, the loops of its first block (a block without loops
    gets a unit loop)."""
    nests: list[list[LoopRV]] = []
    for child in sch.get_child_blocks(step):
        loops = sch.get_loops(child) or [sch.add_unit_loop(child)]
        if not any(sch.get(n[0]).same_as(sch.get(loops[0])) for n in nests):
            nests.append(loops)
    return nests


def _fusable_prefix(sch: Schedule, loops: list[LoopRV], threads: int) -> list[LoopRV]:
    """The top loop and the serial loops nested alone under it, until they have
    ``threads`` iterations."""
    prefix, product = loops[:1], int(sch.get(loops[0]).extent)
    for inner in loops[1:]:
        node = sch.get(inner)
        if product >= threads or not sch.get(prefix[-1]).body.same_as(node):
            break
        if node.kind != tirx.ForKind.SERIAL or node.annotations:
            break
        if not isinstance(node.extent, tirx.IntImm):
            break
        prefix.append(inner)
        product *= int(node.extent)
    return prefix


def _shared_out(sch: Schedule, loops: list[LoopRV], threads: int) -> LoopRV | None:
    """Try to make the nest's top loops one parallel loop of at least two iterations;
    None when done, else the nest's top loop now."""
    top = sch.get(loops[0])
    if top.kind != tirx.ForKind.SERIAL or not isinstance(top.extent, tirx.IntImm):
        return loops[0]
    prefix = _fusable_prefix(sch, loops, threads)
    if math.prod(int(sch.get(loop).extent) for loop in prefix) < 2:
        return loops[0]
    annotations = dict(top.annotations)
    for key in annotations:
        sch.unannotate(loops[0], key)
    fused, left = loops[0], None
    try:
        if len(prefix) > 1:
            fused = sch.fuse(*prefix)
        sch.parallel(fused)
    except s_tir.ScheduleError:
        left = fused
    # The nest keeps its unroll pragmas on whichever loop is now its top.
    for key, value in annotations.items():
        sch.annotate(fused, key, value)
    return left


def _on_one_thread(sch: Schedule, top: LoopRV, threads: int) -> str | None:
    """A parallel loop of ``threads`` iterations above ``top``, of which only the first
    runs the nest (a unit loop split imperfectly: the others fail its predicate); None
    when done, else why not. A unit parallel loop would not do: lowering drops unit
    loops, and the nest would run on every thread."""
    try:
        outer, _ = sch.split(sch.add_unit_loop(top), [max(threads, 2), None])
        sch.parallel(outer)
    except s_tir.ScheduleError as err:
        return f"a nest cannot run on one thread of the launch: {_last_line(err)}"
    return None


def _last_line(err: Exception) -> str:
    lines = [line for line in str(err).strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else type(err).__name__


def _aligned(sch: Schedule, step: SBlockRV, threads: int) -> None:
    """Split each nest's parallel loop down to the step's smallest parallel extent, where
    that extent divides the others and gives every thread work, so that iteration ``i`` of
    every nest is the same contiguous run of the nests' outer iterations (for a tiled step,
    the same channels). A thread then keeps one slice of the step's data in its cache from
    nest to nest, and where that slice is all it reads, ``MarkOwnedShares`` proves the
    launch needs no barriers (a selective scan's state update, parallel over every
    channel, beside its contraction tiled over channel blocks)."""
    tops = [loops[0] for loops in _nests(sch, step)]
    nodes = [sch.get(top) for top in tops]
    if not all(
        n.kind == tirx.ForKind.PARALLEL and isinstance(n.extent, tirx.IntImm) for n in nodes
    ):
        return
    extents = [int(n.extent) for n in nodes]
    common = min(extents)
    if common < threads or any(e % common for e in extents):
        return
    # TVM's parallel check refuses a loop over a reduction decomposed since the loop was
    # made parallel; such a step keeps its extents, so the splits are tried on a copy.
    try:
        _split_to(sch.copy(), tops, nodes, common)
    except s_tir.ScheduleError:
        return
    _split_to(sch, tops, nodes, common)


def _split_to(sch: Schedule, tops: list[LoopRV], nodes: list[tirx.For], common: int) -> None:
    for top, node in zip(tops, nodes):
        extent = int(node.extent)
        if extent == common:
            continue
        for key in node.annotations:
            sch.unannotate(top, key)
        outer, _ = sch.split(top, [common, extent // common])
        sch.parallel(outer)
        for key, value in node.annotations.items():
            sch.annotate(outer, key, value)


def make_persistent(sch: Schedule, step: SBlockRV, threads: int) -> str | None:
    """Share every nest of ``step`` out over ``threads`` (a nest that cannot be shared,
    one whose top loop carries a reduction or is vectorised, runs on the first thread
    alone), align the nests' shares (:func:`_aligned`), then mark its time loop
    persistent. None when done, else why the step stays fork-and-join (a top loop already
    parallel over a single iteration, which lowering would drop, or a nest TVM will not
    put under a parallel loop at all); some nests may then be parallel already, still a
    valid schedule."""
    one_thread = False
    for loops in _nests(sch, step):
        top = sch.get(loops[0])
        if top.kind == tirx.ForKind.PARALLEL:
            if not (isinstance(top.extent, tirx.IntImm) and int(top.extent) < 2):
                continue
            return f"a nest's top loop is parallel over {top.extent} iteration"
        left = _shared_out(sch, loops, threads)
        if left is not None:
            one_thread = True
            why = _on_one_thread(sch, left, threads)
            if why:
                return why
    if not one_thread:
        _aligned(sch, step, threads)
    sch.annotate(sch.get_loops(step)[-1], PERSISTENT, 1)
    return None


def shared_out(func: tirx.PrimFunc, threads: int, launch: bool = True) -> tirx.PrimFunc | str:
    """``func`` (a scheduled function, e.g. a replayed record) with every step's nests
    shared out over ``threads`` and its time loops persistent, or, without ``launch``,
    each nest its own fork/join (the mark removed); or why a step cannot be. A step
    already persistent is kept as it is."""
    sch = Schedule(tvm.IRModule({"main": func}))
    for step, scan in step_blocks(sch):
        if PERSISTENT not in scan.loop.annotations:
            why = make_persistent(sch, step, threads)
            if why:
                return f"scan '{scan.name}': {why}"
        if not launch:
            sch.unannotate(sch.get_loops(step)[-1], PERSISTENT)
    return sch.mod["main"]


@derived_object
class RewritePersistentStep(PyPostproc):
    """Carry out the STEP_PERSISTENT decision on every step block."""

    def __init__(self) -> None:
        super().__init__()
        self.threads = 1

    def _initialize_with_tune_context(self, context) -> None:
        self.threads = int(context.target.attrs.get("num-cores", 1))

    def apply(self, sch: Schedule) -> bool:
        for step, _scan in step_blocks(sch):
            annotations = sch.get(step).annotations
            if STEP_PERSISTENT not in annotations:
                continue
            wanted = int(annotations[STEP_PERSISTENT])
            sch.unannotate(step, STEP_PERSISTENT)
            if wanted:
                make_persistent(sch, step, self.threads)
        return True

    def clone(self) -> Postproc:
        twin = RewritePersistentStep()
        twin.threads = self.threads
        return twin
