"""Packing a tuned function's weights once, as a deployment does, and timing what the tuner
timed.

``layout_free`` lets MetaSchedule's RewriteLayout postproc repack weights into the layouts
the tiled loops want. The schedule it returns does the repacking itself, in blocks
annotated ``meta_schedule.layout_rewrite_preproc``, at the start of every call; what the
tuner measured (its database's run_secs) is the function without those blocks, fed weights
that are already packed (its builder, ``scan_tir.tune.build_candidate``, applies
``scan_tir.prepacked``). A deployment packs the weights once, as Relax does:
``SplitLayoutRewritePreproc`` moves the preproc blocks into a function of their own
(``*_weight_prepack``), which Relax runs once (or folds into constants). Here that split
function packs the weights once, and the timed module is ``scan_tir.prepacked`` of the
tuned one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax, tirx

import scan_tir

from .build import build, param_shape
from .timing import evaluator_latency_ms


def tensor_type(param: tirx.Var) -> relax.TensorType:
    """The Relax type of a PrimFunc buffer parameter."""
    return relax.TensorType(list(param_shape(param)), str(param.ty.dtype))


def weight_prepack_func(tuned: tirx.PrimFunc, n_outputs: int) -> tirx.PrimFunc | None:
    """The tuned function's ``layout_rewrite_preproc`` blocks as a function of their own, or
    None when the schedule repacks nothing.

    Uses Relax's SplitLayoutRewritePreproc, the pass through which TVM itself obtains
    prepacked weights (``relax.pipeline`` with MetaSchedule). It acts on ``call_tir`` sites, so
    the PrimFunc is wrapped in a one-call Relax function. The split function takes the original
    weights, then the packed outputs, each in the order of the preproc blocks.
    ``RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=False)`` cannot serve: in TVM 0.27 it
    ignores the flag and only drops the blocks and retypes the parameters (see
    src/s_tir/transform/remove_weight_layout_rewrite_block.cc).
    """
    n_in = len(tuned.params) - n_outputs
    args = [relax.Var(str(p.name), tensor_type(p)) for p in tuned.params[:n_in]]
    bb = relax.BlockBuilder()
    with bb.function("main", args):
        gv = bb.add_func(tuned, "scan")
        out_types = [tensor_type(p) for p in tuned.params[n_in:]]
        with bb.dataflow():
            out = bb.emit_output(relax.call_tir(gv, relax.Tuple(args), out_types))
        bb.emit_func_output(out)
    split = relax.transform.SplitLayoutRewritePreproc()(bb.get())
    found = [gv for gv in split.get_global_vars() if gv.name_hint == "scan_weight_prepack"]
    return split[found[0]] if found else None


def prepack(
    func: tirx.PrimFunc, weights: dict[str, Any], repeats: int
) -> tuple[dict[str, Any], list[float]]:
    """Run the split-off preproc function once: packed tensors by original parameter name, and
    its own latency (a one-time cost of deployment, reported in the notes)."""
    n = len(func.params) // 2
    names = [str(p.name) for p in func.params[:n]]
    outs = [tvm.runtime.tensor(np.zeros(param_shape(p), str(p.ty.dtype))) for p in func.params[n:]]
    mod = build(func)
    run_args = [weights[name] for name in names] + outs
    mod["main"](*run_args)
    return dict(zip(names, outs)), evaluator_latency_ms(mod, run_args, repeats)


@dataclass
class Packed:
    """A tuned function ready to run on packed weights."""

    func: tirx.PrimFunc  # scan_tir.prepacked(tuned), or tuned itself when nothing is repacked
    once_ms: list[float] = field(default_factory=list)  # the one-off prepack, per repeat
    shapes: dict[str, list[int]] = field(default_factory=dict)  # packed weight shapes


def on_packed_weights(
    tuned: tirx.PrimFunc, tensors: dict[str, Any], n_outputs: int, repeats: int
) -> Packed:
    """Pack the weights in ``tensors`` (replaced in place, by original name) for ``tuned`` and
    return the function that reads them packed: what the tuner timed."""
    pre = weight_prepack_func(tuned, n_outputs)
    if pre is None:
        return Packed(tuned)
    packed, once = prepack(pre, tensors, repeats)
    tensors.update(packed)
    func = scan_tir.prepacked(tvm.IRModule({"main": tuned}))["main"]
    return Packed(func, once, {n: list(t.shape) for n, t in packed.items()})
