"""One function that picks among schedules of itself by shape at run time (DietCode's dispatch).

A function of symbolic sizes (a sequence length, a batch) is served best by different
schedules at different sizes; DietCode (MLSys 2022) tunes for a set of size instances and
emits one kernel that branches to a few schedules by shape. :func:`dispatch` joins
schedules of one function (its parameters, its symbolic sizes) into one function whose
body chooses a schedule's body with a chain of ``IfThenElse`` on an index computed from
the sizes, so that one compiled module serves every shape. :func:`nearest_instance` is
that index for a table from size instances to schedules: a shape takes the schedule of
the smallest listed instance at or above it in every size (the largest beyond the last),
so shapes between and beyond the instances are served by a schedule tuned for a shape
no smaller than theirs.

The build's pipeline lowers the function with TVM's StorageRewrite reusing no memory
(:func:`~scan_tir.transform.pipeline.merged_unsafely`): its branches' allocations merged
into one would be sized with an int32 count of bits that overflows.

Build a dispatching function for :func:`dispatch_target`'s target: TVM's LLVM codegen
puts every body in one LLVM function, and past a size LLVM's LICM stops promoting a
loop's memory accesses to registers (its ``licm-mssa-max-acc-promotion`` cap), so that a
body runs far slower there than built alone (notes.md, issue 17).

Each body gets fresh definitions (``s_tir.renew_defs``) before its parameters and sizes
are renamed to the function's: schedules replayed on one function share loop variables
(an untouched init nest), and TVM's simplifier refuses a variable bound twice with
different ranges.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.target import Target

from ..errors import ScanLoweringError
from .symbolic import size_vars


def dispatch(
    func: tirx.PrimFunc, kernels: Sequence[tirx.PrimFunc], choice: tirx.Expr
) -> tirx.PrimFunc:
    """``func`` running ``kernels[choice]``, where ``choice`` is an integer expression of
    ``func``'s sizes and every kernel is a schedule of ``func`` (same parameters, same
    symbolic sizes: replayed on it with :func:`~scan_tir.tune.symbolic.replay_sized`).
    A ``choice`` outside ``0 .. len(kernels) - 1`` runs the last kernel. Where ``choice``
    is a tree of constants (:func:`nearest_instance`'s), the kernels it never takes are
    checked but left out: each body is built, and a large one costs seconds."""
    if not kernels:
        raise ScanLoweringError("dispatch: no kernel to dispatch to")
    sizes = size_vars(func)
    for i, k in enumerate(kernels):
        _check_schedule(k, func, sizes, i)
    reached: set[int] = set()

    def reach(k: int) -> int:
        reached.add(k)
        return k

    if _on_kernels(choice, len(kernels), reach) is not None:  # the others are left out
        index = {old: new for new, old in enumerate(sorted(reached))}
        choice = _on_kernels(choice, len(kernels), index.__getitem__)
        kernels = [kernels[old] for old in sorted(reached)]
    bodies = [_aligned(k, func, sizes) for k in kernels]
    # The index kept in a buffer, not bound to a variable: TVM's simplifier substitutes a
    # bound value, so each nested branch would add the whole choice to the constraints
    # under which every later body is simplified (quadratic in the bodies).
    index = tirx.decl_buffer((1,), "int32", "kernel", scope="local", layout=None)
    chosen = tirx.BufferLoad(index, [0])
    body = bodies[-1]
    for i in reversed(range(len(bodies) - 1)):
        body = tirx.IfThenElse(chosen == i, bodies[i], body)
    body = tirx.SeqStmt([tirx.BufferStore(index, tirx.Cast("int32", choice), [0]), body])
    # Under a root block, as every S-TIR function (Relax's AnnotateTIROpPattern needs it).
    root = s_tir.SBlock([], [], [], "root", body, alloc_buffers=[index])
    return func.with_body(s_tir.SBlockRealize([], True, root))


#: LLVM options a dispatching function is built with (see the module docstring): the
#: loops LICM promotes to registers, however many memory accesses they hold.
LLVM_OPTIONS = ("-licm-mssa-max-acc-promotion:uint=1000000",)


def dispatch_target(target: Target) -> Target:
    """``target`` with :data:`LLVM_OPTIONS` added to its ``cl-opt``: the target to build
    a dispatching function for (other targets than llvm are returned as they are)."""
    if target.kind.name != "llvm":
        return target
    config = dict(target.export())
    given = list(config.get("cl-opt", ()))
    config["cl-opt"] = [*given, *(o for o in LLVM_OPTIONS if o not in given)]
    return Target(config)


def nearest_instance(
    func: tirx.PrimFunc,
    grid: Mapping[str, Sequence[int]],
    table: Mapping[tuple[int, ...], int],
) -> tirx.Expr:
    """The kernel index ``table`` gives the instance a shape rounds up to.

    ``grid`` lists, per symbolic size of ``func``, the values tuned for; ``table`` maps each
    instance (a tuple of values in ``grid``'s order of sizes) to a kernel index. A size
    rounds up to the smallest listed value at or above it, or to the largest.
    """
    sizes = size_vars(func)
    unknown = sorted(set(grid) - set(sizes))
    if unknown:
        raise ScanLoweringError(
            f"nearest_instance: the function has no symbolic size {unknown}; it has "
            f"{sorted(sizes) or 'none'}."
        )
    values = {name: sorted(set(vs)) for name, vs in grid.items()}
    instances = list(itertools.product(*values.values()))
    missing = [inst for inst in instances if inst not in table]
    if missing:
        raise ScanLoweringError(
            f"nearest_instance: the table has no kernel for {len(missing)} instance(s) of "
            f"the grid, e.g. {dict(zip(values, missing[0]))}"
        )
    # A decision tree on each size in turn, its conditions plain comparisons: TVM's
    # simplifier takes each Select's condition as a constraint on its branches, and a
    # chain repeating an expression of every size in each condition grows the
    # constraints with every instance.
    order = list(values)

    def tree(prefix: tuple[int, ...]) -> tirx.Expr:
        if len(prefix) == len(order):
            return tirx.IntImm("int32", table[prefix])
        name = order[len(prefix)]
        var, vs = sizes[name], values[name]
        node = tree((*prefix, vs[-1]))
        for v in reversed(vs[:-1]):
            below = tree((*prefix, v))
            if not tvm_ffi.structural_equal(below, node):
                node = tirx.Select(var <= tirx.IntImm(var.ty.dtype, v), below, node)
        return node

    return tree(())


def _on_kernels(
    choice: tirx.Expr, count: int, kernel: Callable[[int], int]
) -> tirx.Expr | None:
    """``choice`` with each kernel index it can take (one out of range: the last)
    replaced by ``kernel(index)``, where it is a tree of ``Select`` (and casts) over
    constants, as :func:`nearest_instance` makes it, its conditions kept; None where it
    is any other expression."""
    if isinstance(choice, tirx.IntImm):
        value = int(choice.value)
        return tirx.IntImm(choice.ty.dtype, kernel(value if 0 <= value < count else count - 1))
    if isinstance(choice, tirx.Cast):
        inner = _on_kernels(choice.value, count, kernel)
        return None if inner is None else tirx.Cast(choice.ty.dtype, inner)
    if isinstance(choice, tirx.Select):
        then = _on_kernels(choice.true_value, count, kernel)
        other = _on_kernels(choice.false_value, count, kernel)
        if then is None or other is None:
            return None
        return tirx.Select(choice.condition, then, other)
    return None


def _check_schedule(
    kernel: tirx.PrimFunc, func: tirx.PrimFunc, sizes: dict[str, tirx.Var], index: int
) -> None:
    """Refuses a kernel that is not a schedule of ``func`` (its parameters, its sizes)."""
    where = f"dispatch: kernel {index}"
    if len(kernel.params) != len(func.params):
        raise ScanLoweringError(
            f"{where} has {len(kernel.params)} parameters, the function {len(func.params)}: "
            "every kernel must be a schedule of the function"
        )
    for k, f in zip(kernel.params, func.params):
        if not tvm_ffi.structural_equal(k.ty, f.ty, map_free_vars=True):
            raise ScanLoweringError(
                f"{where}: parameter '{f.name}' is {k.ty} there, {f.ty} in the function: "
                "replay the schedule on the symbolic function itself (replay_sized)"
            )
    own = size_vars(kernel)
    if sorted(own) != sorted(sizes):
        raise ScanLoweringError(
            f"{where} has symbolic sizes {sorted(own)}, the function {sorted(sizes)}"
        )


def _aligned(kernel: tirx.PrimFunc, func: tirx.PrimFunc, sizes: dict[str, tirx.Var]) -> tirx.Stmt:
    """``kernel``'s body with fresh definitions, reading ``func``'s parameters and sizes."""
    kernel = s_tir.renew_defs(kernel)
    own = size_vars(kernel)
    pairs = [*zip(kernel.params, func.params), *((own[n], sizes[n]) for n in sizes)]

    def on_var(var: tirx.Var) -> tirx.Var:
        for old, new in pairs:
            if var.same_as(old):
                return new
        return var

    return tvm_ffi.structural_map(kernel.body, [(tvm.ir.expr.Var, on_var)])
