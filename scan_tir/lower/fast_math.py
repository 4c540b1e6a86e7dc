"""``fast_math``: float32 exp, sigmoid and tanh as polynomials LLVM can vectorise.

LLVM has no vector ``exp``: TVM's llvm codegen emits ``llvm.exp``, which LLVM turns into a
libm ``expf`` call per vector lane, and legalises ``tanh`` into two such calls and
``sigmoid`` into one. An LSTM step has five activations per hidden unit, so at config B
(hidden 16) the calls are most of the step: the same tuned schedule ran 61 us with libm
and 21 us with this rewrite (experiments/ablation.py, notes.md section 3). oneDNN, which
PyTorch's LSTM runs on, computes its activations with vectorised polynomials too.

The polynomials are TVM's own, taken by calling ``topi.fast_exp`` and ``topi.fast_tanh``
on a rank-0 placeholder and reading back their compute bodies
(include/tvm/topi/elemwise.h: a Cephes-style exp with clamping to +-88.38, Eigen's
rational tanh clamped to +-9); sigmoid is ``1 / (1 + fast_exp(-x))``. This is the TIR
counterpart of Relax's FastMathTransform (src/relax/transform/fast_math.cc), which
swaps the same ops for the same topi functions. Their accuracy over the range an RNN's
gates see is measured by tests/test_fast_math.py.
"""

from __future__ import annotations

from collections.abc import Callable

import tvm_ffi
from tvm import te, tirx, topi
from tvm.ir.expr import Call

from .te_rewrite import map_reads

Rewrite = Callable[[tirx.Expr], tirx.Expr]


def _from_topi(topi_op: Callable[[te.Tensor], te.Tensor]) -> Rewrite:
    """``x -> topi_op(x)`` as one expression, topi's intermediate computes inlined.

    No ``Let`` binds ``x`` or the clamped ``x``: MetaSchedule's flop estimate
    (``EstimateTIRFlops``) aborts on one, and tuning with it. The repeated subexpressions
    are common subexpressions of pure arithmetic and loads, which LLVM evaluates once.
    """
    placeholder = te.placeholder((), "float32", "x")
    result = topi_op(placeholder)

    def expand(tensor: te.Tensor, x: tirx.Expr) -> tirx.Expr:
        if tensor.op.same_as(placeholder.op):
            return x
        (body,) = map_reads(list(tensor.op.body), lambda producer, _: expand(producer, x))
        return body

    return lambda x: expand(result, x)


def _rewrites() -> dict[str, Rewrite]:
    fast_exp, fast_tanh = _from_topi(topi.fast_exp), _from_topi(topi.fast_tanh)
    one = tirx.const(1.0, "float32")
    return {
        "tirx.exp": fast_exp,
        "tirx.tanh": fast_tanh,
        "tirx.sigmoid": lambda x: one / (one + fast_exp(-x)),
    }


def fast_math(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every float32 ``exp``, ``tanh`` and ``sigmoid`` replaced by TVM's
    vectorisable approximations; other dtypes and functions are left as they are.

    The result is a different function, so a tuning database matches it, not ``func``:
    tune the function you will build.
    """
    rewrites = _rewrites()

    def on_call(call: Call, mutator: tvm_ffi.StructuralMutator) -> object:
        call = mutator.default_mutate(call)
        rewrite = rewrites.get(getattr(call.op, "name", ""))
        if rewrite is None or str(call.ty) != "float32":
            return call
        return rewrite(call.args[0])

    return tvm_ffi.structural_mutate(func, [(Call, on_call)])
