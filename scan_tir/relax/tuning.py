"""``tune``: MetaSchedule over every kernel of an imported Relax module, scans included.

TVM's ``relax.pipeline.static_shape_tuning_pipeline`` (tvm/relax/pipeline.py) is the
model: the module is legalised and fused (``zero`` pipeline), model weights are marked
layout-free (``AttachAttrLayoutFreeBuffers``), every distinct PrimFunc becomes a task
(``ms.relax_integration.extract_tasks``), and ``ms.tune_tasks`` tunes them into one JSON
database. Two things differ:

* every task gets :func:`scan_tir.scan_space`, whose rules keep a scan's time loop serial
  and tune the blocks inside each step (its rules fall back to MetaSchedule's own for the
  other kernels: the decoder's matmul, an embedding's take);
* a kernel with symbolic sizes (sequence length, batch) cannot be measured, so its task is
  the kernel specialised at representative sizes (``sizes``, saved in the work dir for
  :func:`scan_tir.relax.build`, which replays the schedule on the symbolic kernel).

The budget counts the records already in the work dir, so a killed run resumes where it
stopped, like ``scan-tir tune``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import tvm
from tvm import relax, tirx
from tvm.s_tir import meta_schedule as ms
from tvm.sym import Analyzer
from tvm.target import Target

from ..db.records import load, repair
from ..errors import ScanLoweringError
from ..transform.layout_free import safe_layout_free
from ..tune.measure import build_candidate, local_runner
from ..tune.pooled_builder import PooledBuilder
from ..tune.progress import count_lines, log, records_file, watch_records
from ..tune.search import evolutionary_search
from ..tune.space import scan_space
from ..tune.symbolic import size_vars, specialize
from .frontend import DIM_NAMES_ATTR

#: The representative sizes a work dir's symbolic kernels were tuned at.
SIZES_FILE = "representative_sizes.json"


def prepare(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """``mod`` as the tuner sees it: legalised, fused, weights marked layout-free (the
    first half of TVM's ``static_shape_tuning_pipeline``), those MetaSchedule cannot repack
    without loss unmarked again (:func:`scan_tir.transform.layout_free.safe_layout_free`)."""
    passes = [
        relax.transform.DecomposeOpsForInference(),
        relax.transform.CanonicalizeBindings(),
        relax.get_pipeline("zero"),
        relax.transform.AttachAttrLayoutFreeBuffers(),
    ]
    with target:
        mod = tvm.transform.Sequential(passes)(mod)
    for gv, func in list(mod.functions.items()):
        if isinstance(func, tirx.PrimFunc):
            mod[gv] = safe_layout_free(func)
    return mod


def symbolic_sizes(mod: tvm.IRModule) -> list[str]:
    """The names of the symbolic sizes in the signatures of ``mod``'s Relax functions."""
    names: set[str] = set()
    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            for param in func.params:
                shape = getattr(param.ty, "shape", None)
                for dim in getattr(shape, "values", None) or []:
                    names |= {str(v.name) for v in tirx.analysis.undefined_vars(dim)}
    return sorted(names)


def representatives(
    fused: tvm.IRModule, sizes: Mapping[str, int]
) -> dict[tvm.ir.GlobalVar, tirx.PrimFunc]:
    """Every PrimFunc of ``fused`` with symbolic sizes, specialised at ``sizes`` (by the
    Relax module's size names).

    A kernel's own size variables need not share the Relax names (a layer function is
    lowered once for all modules), so each is bound through a call site: the shapes the
    call passes, with ``sizes`` substituted, fix the kernel's parameter shapes.
    """
    found: dict[tvm.ir.GlobalVar, tirx.PrimFunc] = {}
    for gv, func in fused.functions.items():
        if isinstance(func, tirx.PrimFunc) and size_vars(func) and gv not in found:
            bound = bound_at_call(fused, gv, func, sizes)
            found[gv] = specialize(func, bound)
    return found


def bound_at_call(
    fused: tvm.IRModule, gv: tvm.ir.GlobalVar, func: tirx.PrimFunc, sizes: Mapping[str, int]
) -> dict[str, int]:
    """``func``'s size variables, by name, at its first call in ``fused`` under ``sizes``."""
    by_name = {**sizes}
    for caller in fused.functions.values():
        if not isinstance(caller, relax.Function):
            continue
        for call in _calls_of(caller, gv):
            passed = [*call.args[1].fields, *_out_types(call)]
            passed += list(call.args[2].values) if len(call.args) > 2 else []
            bound: dict[str, int] = {}
            for param, value in zip(func.params, passed, strict=True):
                if isinstance(param.ty, tirx.BufferType):  # a tensor: bind its shape's sizes
                    ty = value if isinstance(value, relax.TensorType) else value.ty
                    shape = ty.shape.values
                    for dim, size in zip(param.ty.shape, shape, strict=True):
                        if isinstance(dim, tirx.Var):
                            bound[str(dim.name)] = _evaluate(size, by_name)
                else:  # a size passed as a scalar (a prim value, or of tir_vars)
                    bound[str(param.name)] = _evaluate(value, by_name)
            missing = set(size_vars(func)) - set(bound)
            if not missing:
                return bound
    raise ScanLoweringError(
        f"kernel '{gv.name_hint}': its symbolic sizes {sorted(size_vars(func))} are not all "
        "fixed by a call in the module; pass the module as imported, before any lowering."
    )


def _calls_of(func: relax.Function, gv: tvm.ir.GlobalVar) -> list[relax.Call]:
    calls: list[relax.Call] = []

    def visit(expr: relax.Expr) -> None:
        if (
            isinstance(expr, relax.Call)
            and expr.op.same_as(tvm.ir.Op.get("relax.call_tir"))
            and expr.args[0].same_as(gv)
        ):
            calls.append(expr)

    relax.analysis.post_order_visit(func, visit)
    return calls


def _out_types(call: relax.Call) -> list[relax.TensorType]:
    out = call.ty_args[0]
    return list(out.fields) if isinstance(out, relax.TupleType) else [out]


def _evaluate(value: tirx.Expr, sizes: Mapping[str, int]) -> int:
    """``value`` (a shape expression of the Relax module) at ``sizes``."""
    free = {str(v.name): v for v in tirx.analysis.undefined_vars(value)}
    unknown = sorted(set(free) - set(sizes))
    if unknown:
        raise ScanLoweringError(
            f"no representative size for {unknown}: pass sizes with a value for each (the "
            "sizes to tune the symbolic kernels at)."
        )
    analyzer = Analyzer()
    for name, var in free.items():
        analyzer.bind(var, tirx.IntImm(var.ty.dtype, int(sizes[name])))
    return int(analyzer.simplify(value))


def workload_func(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` as a task of ``extract_tasks`` holds it (named ``main``, as MetaSchedule's
    relax integration names every task's function): what the database is keyed by."""
    return func.with_attrs({"global_symbol": "main", "tirx.noalias": True})


def tasks(fused: tvm.IRModule, target: Target, sizes: Mapping[str, int]) -> list[ms.ExtractedTask]:
    """MetaSchedule's tasks of ``fused``, the symbolic kernels specialised at ``sizes``."""
    special = {gv.name_hint: f for gv, f in representatives(fused, sizes).items()}
    static = fused
    if special:
        static = tvm.IRModule(
            {gv: special.get(gv.name_hint, f) for gv, f in fused.functions.items()},
            attrs=fused.attrs,
        )
    return ms.relax_integration.extract_tasks(static, target)


def tune(
    mod: tvm.IRModule,
    target: Target,
    work_dir: str | Path,
    max_trials_global: int,
    *,
    sizes: Mapping[str, int] | None = None,
    runner: ms.runner.Runner | None = None,
    num_trials_per_iter: int = 16,
    population: int = 512,
) -> ms.Database:
    """Tune every kernel of ``mod`` (from :func:`scan_tir.relax.from_exported_program` or
    :func:`~scan_tir.relax.from_onnx`) until ``work_dir`` holds ``max_trials_global``
    records of them; returns the database.

    ``sizes``: representative values of the module's symbolic sizes, required when it has
    any, by their names in ``main``'s signature or by their ``torch.export.Dim`` names
    (``{"seq": 80, "batch": 1}``); saved in the work dir for :func:`build`.
    ``num_trials_per_iter``: candidates per task and round; MetaSchedule's gradient task
    scheduler first gives every task one round, so a model's many small tasks (reshapes,
    an embedding's take) would eat a budget at its default of 64. ``population``: the
    evolutionary search's (small for tiny budgets).
    """
    given = {k: int(v) for k, v in (sizes or {}).items()}
    sizes = checked_sizes(mod, given)
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    # As given (Dim names where the user used them): a later export's symbols differ.
    (work_dir / SIZES_FILE).write_text(json.dumps(given, sort_keys=True) + "\n")
    fused = prepare(mod, target)
    extracted = tasks(fused, target, sizes)
    if records_file(work_dir).exists():
        for problem in repair(work_dir):
            log(f"relax: dropped unreadable line {problem} (backup kept)")
    before = records_of_tasks(work_dir, extracted)
    names = ", ".join(t.task_name for t in extracted)
    if before >= max_trials_global:
        log(f"relax: {before} records in {work_dir} already, budget {max_trials_global}: done")
        return ms.database.JSONDatabase(work_dir=str(work_dir))
    log(f"relax: {len(extracted)} tasks ({names}); {before} records there already")
    trials = max_trials_global - before
    contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
        extracted,
        str(work_dir),
        space=scan_space(target),
        strategy=evolutionary_search(population, trials),
    )
    total = count_lines(records_file(work_dir)) + trials
    with watch_records("relax", work_dir, period_s=5.0, total=total):
        ms.tune_tasks(
            tasks=contexts,
            task_weights=weights,
            work_dir=str(work_dir),
            max_trials_global=trials,
            num_trials_per_iter=min(trials, num_trials_per_iter),
            builder=PooledBuilder(f_build=build_candidate),
            runner=runner if runner is not None else local_runner(),
            database=ms.database.JSONDatabase(work_dir=str(work_dir)),
        )
    return ms.database.JSONDatabase(work_dir=str(work_dir))


def checked_sizes(mod: tvm.IRModule, sizes: Mapping[str, int] | None) -> dict[str, int]:
    """``sizes`` by the module's symbol names, all of them given; a size may be named by
    its ``torch.export.Dim`` name (``scan_tir.relax.export``) instead of its symbol."""
    names = symbolic_sizes(mod)
    main = mod["main"] if "main" in _names(mod) else None
    declared = dict((main.attrs or {}).get(DIM_NAMES_ATTR, {})) if main is not None else {}
    symbol_of = {str(dim): str(symbol) for symbol, dim in declared.items()}
    sizes = {symbol_of.get(k, k): v for k, v in (sizes or {}).items()}
    missing = [n for n in names if n not in sizes]
    if missing:
        raise ScanLoweringError(
            f"the module has symbolic sizes {_described(names, declared)}; MetaSchedule "
            "measures fixed shapes, so "
            f"pass representative values for {missing}, e.g. sizes={{"
            + ", ".join(f"{declared.get(n, n)!r}: 64" for n in missing)
            + "} (the sizes most calls will have)."
        )
    unknown = sorted(set(sizes) - set(names))
    if unknown:
        raise ScanLoweringError(
            f"sizes {unknown} are not symbolic sizes of the module (it has {names or 'none'})."
        )
    return {n: int(v) for n, v in sizes.items()}


def _names(mod: tvm.IRModule) -> set[str]:
    return {gv.name_hint for gv in mod.get_global_vars()}


def _described(names: list[str], declared: Mapping[str, str]) -> str:
    return ", ".join(f"{n} ('{declared[n]}')" if n in declared else n for n in names)


def saved_sizes(work_dir: str | Path) -> dict[str, int]:
    """The representative sizes :func:`tune` saved in ``work_dir`` (empty if none)."""
    path = Path(work_dir) / SIZES_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def records_of_tasks(work_dir: Path, extracted: list[ms.ExtractedTask]) -> int:
    """Records in ``work_dir`` of the tasks' functions: what a run's budget counts.

    Only workloads structurally equal to a task count. MetaSchedule in TVM 0.27 now and
    then commits a task's workload in a scheduled form (notes.md: a ``fused_matmul_add``
    with its add vectorised); that task's records are then not counted here, and a resumed
    run tunes it again."""
    if not records_file(work_dir).exists():
        return 0
    db = load(work_dir)
    count = 0
    for task in extracted:
        index = db.index_of(task.dispatched[0])
        count += 0 if index is None else len(db.of_workload(index))
    return count
