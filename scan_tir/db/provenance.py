"""Which schedule rule or postproc made each instruction of a record's trace: exactly.

No heuristic: the design space is generated again with every rule of
:func:`scan_tir.scan_space` (``meta_rules.scan_rules``) wrapped so that it tags the trace
instructions it adds, and the record's trace (before ``EnterPostproc``) is matched to the
design space it was sampled from, instruction by instruction. A record's trace is its design
space's trace with other decisions, simplified (instructions whose results nothing uses are
dropped), so it is a subsequence of that space's instructions with the same kinds and
attributes. Instructions added by ``PostOrderApply`` itself (it looks up each block before
the rules see it) are reported as such. The match is a longest common subsequence, so a
record made by another version of the rules still has every instruction the current rules
make attributed, and the others are marked "?". One ambiguity remains: where simplification
dropped an instruction identical in kind and attributes to another one of another rule (two
``GetLoops`` of one block), the alignment may name the other one's rule. The part after
``EnterPostproc`` is attributed by applying the postprocs again, one by one, to the record's
schedule and tagging what each adds.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import s_tir
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule, ScheduleRule
from tvm.target import Target

from meta_rules import scan_rules
from postprocs import scan_postprocs

GENERATOR = "PostOrderApply (block lookup)"
UNMATCHED = "? (in no design space of the current rules)"


def component_name(obj: object) -> str:
    """A rule's or postproc's name: for Python ones (``derived_object`` keeps the Python
    instance in ``_inst``) its own ``repr`` where it has one (``Scoped(...)``)."""
    inst = getattr(obj, "_inst", None)
    if inst is None:
        return type(obj).__name__
    return repr(inst) if type(inst).__repr__ is not object.__repr__ else type(inst).__name__


@derived_object
class _Tagging(PyScheduleRule):
    """``rule``, recording each instruction it adds to a schedule's trace in ``tags``."""

    def __init__(self, rule: ScheduleRule, name: str, tags: dict) -> None:
        super().__init__()
        self.rule, self.name, self.tags = rule, name, tags

    def _initialize_with_tune_context(self, context) -> None:
        self.rule._initialize_with_tune_context(context)

    def apply(self, sch: s_tir.Schedule, block) -> list[s_tir.Schedule]:
        start = len(sch.trace.insts)
        out = list(self.rule.apply(sch, block))
        for result in out:
            for inst in result.trace.insts[start:]:
                # Keyed by handle; the instruction is kept alive so handles are not reused.
                self.tags.setdefault(inst.__chandle__(), (inst, self.name))
        return out

    def clone(self) -> ScheduleRule:
        return _Tagging(self.rule.clone(), self.name, self.tags)


def _signature(inst) -> tuple[str, str]:
    return inst.kind.name, str(inst.attrs)


@dataclass(frozen=True)
class Step:
    """One instruction of a record: the Python line and who made it."""

    made_by: str
    python: str


def _split(insts) -> int:
    kinds = [i.kind.name for i in insts]
    return kinds.index("EnterPostproc") if "EnterPostproc" in kinds else len(kinds)


def _design_spaces(
    mod: tvm.IRModule, target: Target
) -> list[list[tuple[tuple[str, str], str]]]:
    """Each design space as (signature, maker) per instruction."""
    # The rules of scan_space, as Python objects: the space's own sch_rules come back from
    # TVM as generic handles that no longer know their Python class.
    tags: dict = {}
    rules = scan_rules(target)
    space = ms.space_generator.PostOrderApply(
        sch_rules=[_Tagging(r, component_name(r), tags) for r in rules],
        postprocs=[],
        mutator_probs={},
    )
    ctx = ms.TuneContext(mod=mod, target=target, space_generator=space, task_name="provenance")
    spaces = []
    for sch in ctx.generate_design_space():
        spaces.append(
            [(_signature(i), tags.get(i.__chandle__(), (None, GENERATOR))[1])
             for i in sch.trace.insts]
        )
    return spaces


def _match(record_sigs: list, space: list) -> tuple[int, list[str]]:
    """Longest common subsequence of the record's and the space's instructions: (number
    matched, maker of each record instruction). A record made by another version of the
    rules still gets every instruction the current rules would make attributed."""
    n, m = len(record_sigs), len(space)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if record_sigs[i] == space[j][0]:
                best[i][j] = best[i + 1][j + 1] + 1
            else:
                best[i][j] = max(best[i + 1][j], best[i][j + 1])
    makers, i, j = [], 0, 0
    while i < n:
        if j < m and record_sigs[i] == space[j][0]:
            makers.append(space[j][1])
            i, j = i + 1, j + 1
        elif j < m and best[i][j + 1] >= best[i + 1][j]:
            j += 1
        else:
            makers.append(UNMATCHED)
            i += 1
    return best[0][0], makers


def _postproc_makers(record: ms.database.TuningRecord, target: Target, post: list) -> list[str]:
    """Apply the postprocs again to the record's schedule; tag what each adds."""
    sch = s_tir.Schedule(record.workload.mod)
    record.trace.apply_to_schedule(sch, remove_postproc=True)
    sch.enter_postproc()
    ctx = ms.TuneContext(mod=record.workload.mod, target=target, task_name="provenance")
    made: list[tuple[tuple[str, str], str]] = []
    for pp in scan_postprocs(target):
        pp._initialize_with_tune_context(ctx)
        start = len(sch.trace.insts)
        if not pp.apply(sch):
            break
        made += [(_signature(i), component_name(pp)) for i in sch.trace.insts[start:]]
    sigs = [_signature(i) for i in post]
    if [s for s, _ in made] == sigs:
        return [m for _, m in made]
    return ["postproc (re-applying them gave another trace)"] * len(sigs)


def provenance(record: ms.database.TuningRecord, target: Target) -> list[Step]:
    """Each instruction of ``record``'s trace, as Python, with the rule or postproc that
    made it (``EnterPostproc`` itself is marked "postprocs follow")."""
    insts = list(record.trace.insts)
    lines = record.trace.as_python()
    k = _split(insts)
    sigs = [_signature(i) for i in insts[:k]]
    best = max((_match(sigs, s) for s in _design_spaces(record.workload.mod, target)),
               key=lambda m: m[0], default=(0, [UNMATCHED] * k))
    makers = best[1]
    if k < len(insts):
        makers = makers + ["postprocs follow"] + _postproc_makers(record, target, insts[k + 1:])
    return [Step(m, line) for m, line in zip(makers, lines)]
