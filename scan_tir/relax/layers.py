"""One direction of one layer of a PyTorch RNN as a scan PrimFunc.

A layer's function takes, in ``nn.LSTM``/``nn.GRU``/``nn.RNN``'s flat-weight order, the
layer's input sequence, its weights and its initial state, and returns what PyTorch reports
for that layer and direction: the output sequence in input order, and the final states.
Everything the recurrence needs is inside: the input projection (one GEMM over seq * batch,
before the scan, as the zoo's workloads have it, so that MetaSchedule tunes it with the step
as one task and the weight prepacking of ``scan_tir.transform`` applies to it unchanged).

The function depends on the layer's sizes and kind only, not on its weights, so identical
layers (layer 2 and 3 of a deep LSTM, the same module called twice) share one function:
:func:`layer_prim_func` is cached by (:class:`LayerSpec`, options).

The LSTM is ``topi.nn.lstm`` unchanged (it already takes optional biases, initial states, a
projection, peepholes and a reverse direction). The zoo's GRU and Elman builders start from
zeros and run forward only, so their step is written here again with initial-state input and
direction, from the zoo's parts (``scan_tir.workloads.parts``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache

from tvm import relax, te, tirx, topi
from tvm.ir import GlobalVar

from ..errors import ScanLoweringError
from ..lower.convert import create_prim_func
from ..lower.options import LoweringOptions
from ..lower.te_scan import scan
from ..workloads.elman import ACTIVATIONS
from ..workloads.parts import drop_init, input_projection, recurrent_projection

#: Gates stacked in each weight, per kind (PyTorch's i,f,g,o / r,z,n / one).
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}

#: PrimFunc attribute: the layer's spec and options as JSON, so that later tools (tuning,
#: prepacking) can tell which layer a function is without matching its structure.
LAYER_ATTR = "scan_tir.rnn_layer"

#: Relax's ``OpPatternKind::kOpaque`` (include/tvm/relax/op_attr_types.h): FuseOps never
#: groups a call to a function so marked, so neither FuseTIR nor LegalizeOps touches it,
#: and AnnotateTIROpPattern keeps an ``op_pattern`` that is already set.
OPAQUE = 8


@dataclass(frozen=True)
class LayerSpec:
    """What one layer-direction's function depends on (its cache key).

    ``proj`` is ``nn.LSTM``'s ``proj_size`` (0: none). ``bias`` says whether the function
    takes ``b_ih`` and ``b_hh``; a GRU or Elman layer always does (PyTorch's bias-free
    modules get zero vectors), so that one function serves both.

    Two ONNX forms PyTorch lacks (``scan_tir.relax.onnx``): ``peephole``, an LSTM that takes
    ``p`` (3 * hidden: the i, f, o peephole weights, topi's ``p_i``, ``p_f``, ``p_o``), and
    ``linear_before_reset=False``, a GRU whose reset gate scales h before the recurrent
    product of the candidate (ONNX's default), not after it (PyTorch's form).
    """

    kind: str
    seq: int
    batch: int
    input: int
    hidden: int
    proj: int = 0
    bias: bool = True
    reverse: bool = False
    peephole: bool = False
    linear_before_reset: bool = True

    @property
    def out(self) -> int:
        """Width of the hidden state PyTorch reports (``proj_size`` if set)."""
        return self.proj or self.hidden

    def weight_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """The weight parameters, in PyTorch's flat-weight order."""
        rows = GATES[self.kind] * self.hidden
        shapes = [("w_ih", (rows, self.input)), ("w_hh", (rows, self.out))]
        if self.bias:
            shapes += [("b_ih", (rows,)), ("b_hh", (rows,))]
        if self.proj:
            shapes.append(("w_hr", (self.proj, self.hidden)))
        if self.peephole:
            shapes.append(("p", (3 * self.hidden,)))
        return shapes

    def state_shapes(self) -> list[tuple[int, int]]:
        """h (and, for an LSTM, c): the initial-state inputs and the final-state outputs."""
        h = (self.batch, self.out)
        return [h, (self.batch, self.hidden)] if self.kind == "lstm" else [h]

    def output_shapes(self) -> list[tuple[int, ...]]:
        """The function's outputs: the sequence, then the final states."""
        return [(self.seq, self.batch, self.out), *self.state_shapes()]


def _gru_step(spec: LayerSpec, xw: te.Tensor, h: te.Tensor, wh: te.Tensor, bh: te.Tensor):
    """h' of ``nn.GRU`` (the zoo's gru.py: r, z, n; the reset gate scales Wh_n h + Bh_n)."""
    if not spec.linear_before_reset:
        return _gru_step_reset_before(spec, xw, h, wh, bh)
    hidden = spec.hidden
    hw = recurrent_projection(h, wh, bh, "hw")
    x_t = _input_step(spec)

    def gate(t, b, j, g):
        return xw[x_t(t), b, g * hidden + j] + hw[t, b, g * hidden + j]

    shape = (spec.seq + 1, spec.batch, hidden)
    r = te.compute(shape, lambda t, b, j: te.sigmoid(gate(t, b, j, 0)), name="r")
    z = te.compute(shape, lambda t, b, j: te.sigmoid(gate(t, b, j, 1)), name="z")
    n = te.compute(
        shape,
        lambda t, b, j: te.tanh(
            xw[x_t(t), b, 2 * hidden + j] + r[t, b, j] * hw[t, b, 2 * hidden + j]
        ),
        name="n",
    )
    return te.compute(
        shape,
        lambda t, b, j: (1.0 - z[t, b, j]) * n[t, b, j] + z[t, b, j] * h[t - 1, b, j],
        name="h_new",
    )


def _gru_step_reset_before(
    spec: LayerSpec, xw: te.Tensor, h: te.Tensor, wh: te.Tensor, bh: te.Tensor
) -> te.Tensor:
    """h' of ONNX's default GRU (linear_before_reset=0): n = tanh(Wi_n x + Bi_n +
    Wh_n (r * h) + Bh_n). The candidate's product needs r first, so it is a second
    reduction in the step, and the first covers the r and z rows only."""
    hidden, x_t = spec.hidden, _input_step(spec)
    shape = (spec.seq + 1, spec.batch, hidden)
    k = te.reduce_axis((0, hidden), name="kh")
    hw = te.compute(
        (spec.seq + 1, spec.batch, 2 * hidden),
        lambda t, b, j: te.sum(h[t - 1, b, k] * wh[j, k], axis=k),
        name="hw_rz",
    )

    def gate(t, b, j, g):
        return xw[x_t(t), b, g * hidden + j] + hw[t, b, g * hidden + j] + bh[g * hidden + j]

    r = te.compute(shape, lambda t, b, j: te.sigmoid(gate(t, b, j, 0)), name="r")
    z = te.compute(shape, lambda t, b, j: te.sigmoid(gate(t, b, j, 1)), name="z")
    rh = te.compute(shape, lambda t, b, j: r[t, b, j] * h[t - 1, b, j], name="rh")
    kn = te.reduce_axis((0, hidden), name="kn")
    hn = te.compute(
        shape,
        lambda t, b, j: te.sum(rh[t, b, kn] * wh[2 * hidden + j, kn], axis=kn),
        name="hw_n",
    )
    n = te.compute(
        shape,
        lambda t, b, j: te.tanh(xw[x_t(t), b, 2 * hidden + j] + hn[t, b, j] + bh[2 * hidden + j]),
        name="n",
    )
    return te.compute(
        shape,
        lambda t, b, j: (1.0 - z[t, b, j]) * n[t, b, j] + z[t, b, j] * h[t - 1, b, j],
        name="h_new",
    )


def _elman_step(spec: LayerSpec, xw: te.Tensor, h: te.Tensor, wh: te.Tensor, bh: te.Tensor):
    """h' of ``nn.RNN``: act(Wi x + Bi + Wh h + Bh), act from the zoo's elman.py."""
    act = ACTIVATIONS[spec.kind.removeprefix("rnn_")][0]
    hw = recurrent_projection(h, wh, bh, "hw")
    x_t = _input_step(spec)
    return te.compute(
        (spec.seq + 1, spec.batch, spec.hidden),
        lambda t, b, j: act(xw[x_t(t), b, j] + hw[t, b, j]),
        name="h_new",
    )


def _input_step(spec: LayerSpec):
    """The input row scan step t (1..seq) reads: topi's convention, reversed if asked."""
    return (lambda t: spec.seq - t) if spec.reverse else (lambda t: t - 1)


def _gated(spec: LayerSpec, x, weights, h0) -> te.Tensor:
    """Every step's hidden state (step order) of a GRU or Elman layer."""
    w_ih, w_hh, b_ih, b_hh = weights
    xw = input_projection(x, w_ih, b_ih, "xw")
    h = te.placeholder((spec.seq + 1, spec.batch, spec.hidden), name="h")
    init = te.compute((1, spec.batch, spec.hidden), lambda _, b, j: h0[b, j], name="h_init")
    step = _gru_step if spec.kind == "gru" else _elman_step
    h_new = step(spec, xw, h, w_hh, b_hh)
    return drop_init(scan(init, h_new, h, name=f"{spec.kind}_scan"), "hidden_states")


def build(spec: LayerSpec) -> list[te.Tensor]:
    """The layer's TE graph: inputs (x, weights, initial states), then outputs (the
    sequence in input order, the final states)."""
    x = te.placeholder((spec.seq, spec.batch, spec.input), name="x")
    named = {name: te.placeholder(shape, name=name) for name, shape in spec.weight_shapes()}
    states = [te.placeholder(s, name=n) for n, s in zip(("h0", "c0"), spec.state_shapes())]
    if spec.kind == "lstm":
        seqs = topi.nn.lstm(
            x,
            named["w_ih"],
            named["w_hh"],
            Bi=named.get("b_ih"),
            Bh=named.get("b_hh"),
            h_init=states[0],
            c_init=states[1],
            proj=named.get("w_hr"),
            reverse=spec.reverse,
            **_peepholes(spec, named.get("p")),
        )
    else:
        weights = [named[n] for n in ("w_ih", "w_hh", "b_ih", "b_hh")]
        seqs = [_gated(spec, x, weights, states[0])]
    finals = [_last(s, name) for s, name in zip(seqs, ("h_n", "c_n"))]
    return [x, *named.values(), *states, _in_input_order(spec, seqs[0]), *finals]


def _peepholes(spec: LayerSpec, p: te.Tensor | None) -> dict[str, te.Tensor]:
    """topi's ``p_i``, ``p_f``, ``p_o`` (indexed [batch, hidden]) from ``p`` (i, f, o rows,
    one per hidden unit, as ONNX has them: shared by the batch)."""
    if p is None:
        return {}

    def rows(g: int, gate: str) -> te.Tensor:
        shape = (spec.batch, spec.hidden)
        return te.compute(shape, lambda _, j: p[g * spec.hidden + j], name=f"p_{gate}")

    return {f"p_{gate}": rows(g, gate) for g, gate in enumerate("ifo")}


def _in_input_order(spec: LayerSpec, hs: te.Tensor) -> te.Tensor:
    """The reverse scan's step t saw x[seq-1-t], where PyTorch reports it: re-reversed.
    (A forward layer's hs is already the step copy made inside the scan.)"""
    if not spec.reverse:
        return hs
    last = spec.seq - 1
    return te.compute(hs.shape, lambda t, b, j: hs[last - t, b, j], name="output")


def _last(states: te.Tensor, name: str) -> te.Tensor:
    """The state after the last step (of the scan, so of either direction)."""
    last = states.shape[0] - 1
    return te.compute(states.shape[1:], lambda b, j: states[last, b, j], name=name)


@lru_cache(maxsize=256)
def layer_prim_func(spec: LayerSpec, options: LoweringOptions) -> tirx.PrimFunc:
    """The layer's scan PrimFunc, opaque to Relax's fusion, tagged with its spec.

    No ``global_symbol``: the Relax module's AttachGlobalSymbol names it after the GlobalVar
    it is added under (create_prim_func's "main" would clash with the Relax ``main``).
    Cached (PrimFuncs are immutable): identical layers, and later imports of the same
    model, lower once.
    """
    func = create_prim_func(build(spec), options=options)
    tag = json.dumps({"spec": asdict(spec), "options": options.to_dict()}, sort_keys=True)
    func = func.without_attr("global_symbol")
    return func.with_attrs({"op_pattern": OPAQUE, LAYER_ATTR: tag})


class LayerFunctions:
    """The layer functions of one import, by spec: each added to the module being built
    once, so that identical layers and directions (of one node, of several nodes, of either
    frontend) call one function."""

    def __init__(self, options: LoweringOptions | None = None) -> None:
        self.options = options if options is not None else LoweringOptions()
        self._added: dict[LayerSpec, GlobalVar] = {}

    def __call__(self, bb: relax.BlockBuilder, spec: LayerSpec) -> GlobalVar:
        """The GlobalVar of ``spec``'s function in ``bb``'s module."""
        if spec not in self._added:
            name = f"{spec.kind}_{'reverse' if spec.reverse else 'forward'}_scan"
            self._added[spec] = bb.add_func(layer_prim_func(spec, self.options), name)
        return self._added[spec]


def static_shape(
    where: str, what: str, value: relax.Expr, to_float32: str, to_static: str
) -> tuple[int, ...]:
    """``value``'s shape as ints, after checking that it is a float32 tensor of static shape
    (the layer functions' only kind); ``where`` names the node, ``what`` the operand, and
    ``to_float32``/``to_static`` say, in the frontend's terms, how to fix the model."""
    ty = getattr(value, "ty", None)
    if not isinstance(ty, relax.TensorType):
        raise ScanLoweringError(f"{where}: {what} is not a tensor ({ty}); fix the model.")
    if str(ty.dtype) != "float32":
        raise ScanLoweringError(
            f"{where}: {what} is {ty.dtype}; scan-tir's recurrences are float32 only: "
            f"{to_float32}."
        )
    if ty.shape is None or not all(isinstance(d, tirx.IntImm) for d in ty.shape):
        raise ScanLoweringError(
            f"{where}: {what} has shape {ty.shape}, not static; symbolic sizes are not "
            f"supported yet: {to_static}."
        )
    return tuple(int(d) for d in ty.shape)
