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

A layer of symbolic sequence length or batch (``LayerSpec.seq`` or ``batch`` None, as
``scan_tir.relax.export`` leaves them) is built on ``te.var`` sizes named ``seq`` and
``batch``, which ``call_tir`` binds from its arguments' shapes, and lowered with int64 indices
(see :func:`layer_prim_func`); a static layer is lowered as before, int32. A layer of symbolic
length returns its state sequences only, in step order, and :meth:`LayerFunctions.call` takes
the output in input order and the final states from them in Relax (see
:attr:`LayerSpec.sequences_only`).

The LSTM is ``topi.nn.lstm`` unchanged (it already takes optional biases, initial states, a
projection, peepholes and a reverse direction). The zoo's GRU and Elman builders start from
zeros and run forward only; a layer starts from its initial-state input, in its direction,
with the zoo's GRU step (``scan_tir.workloads.gru.step``) and Elman parts.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import TypeAlias

from tvm import relax, te, tirx, topi
from tvm.ir import GlobalVar
from tvm.sym import Analyzer

from ..errors import ScanLoweringError
from ..lower.convert import create_prim_func
from ..lower.options import LoweringOptions
from ..lower.te_scan import scan
from ..workloads import gru
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

#: A size in a shape: static, or an expression of the symbolic sizes (a te.var in a layer's
#: TE graph, a Relax shape variable in the module calling it).
Size: TypeAlias = int | tirx.Expr

#: The names of the symbolic sizes in a layer function (``scan_tir.specialize`` takes them).
SYMBOLIC = ("seq", "batch")

#: The layer functions' only dtype (``tensor_shape`` refuses others).
DTYPE = "float32"


@dataclass(frozen=True)
class LayerSpec:
    """What one layer-direction's function depends on (its cache key).

    ``seq`` and ``batch`` are None where symbolic: one function then serves every length
    (batch). ``proj`` is ``nn.LSTM``'s ``proj_size`` (0: none). ``bias`` says whether the
    function takes ``b_ih`` and ``b_hh``; a GRU or Elman layer always does (PyTorch's
    bias-free modules get zero vectors), so that one function serves both.

    Two ONNX forms PyTorch lacks (``scan_tir.relax.onnx``): ``peephole``, an LSTM that takes
    ``p`` (3 * hidden: the i, f, o peephole weights, topi's ``p_i``, ``p_f``, ``p_o``), and
    ``linear_before_reset=False``, a GRU whose reset gate scales h before the recurrent
    product of the candidate (ONNX's default), not after it (PyTorch's form).
    """

    kind: str
    seq: int | None
    batch: int | None
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

    @property
    def symbolic(self) -> bool:
        """Whether the sequence length or the batch is symbolic."""
        return self.seq is None or self.batch is None

    def state_shapes(self, batch: Size) -> list[tuple[Size, int]]:
        """h (and, for an LSTM, c): the initial-state inputs and the final-state outputs,
        for the caller's ``batch`` (``self.batch`` unless that is symbolic)."""
        h = (batch, self.out)
        return [h, (batch, self.hidden)] if self.kind == "lstm" else [h]

    @property
    def sequences_only(self) -> bool:
        """Whether the function returns the state sequences in step order (h, and for an
        LSTM c), and no output sequence in input order and no final states.

        At a symbolic length, a block after the scan that reads row ``seq - 1`` (a final
        state) or rows ``seq - 1 - t`` (a reverse layer's re-reversal) reads rows the scan
        writes only if ``seq >= 1``, which TVM cannot prove of a ``te.var``: the root scope
        is then no stage pipeline, and compute_inline and the other primitives a tuned
        schedule replays refuse it. So those reads are Relax ops after the call
        (:meth:`LayerFunctions.call`), and the function is the scan alone. A static layer
        keeps them inside, as tuned databases hold it.
        """
        return self.seq is None

    def output_shapes(self, seq: Size, batch: Size) -> list[tuple[Size, ...]]:
        """The function's outputs: the sequence, then the final states (sizes as in
        :meth:`state_shapes`); or, if :attr:`sequences_only`, h's and c's sequences."""
        if self.sequences_only:
            return [(seq, *shape) for shape in self.state_shapes(batch)]
        return [(seq, batch, self.out), *self.state_shapes(batch)]


def _gru_step(spec: LayerSpec, xw: te.Tensor, h: te.Tensor, wh: te.Tensor, bh: te.Tensor):
    """h' of ``nn.GRU`` (the zoo's ``gru.step``: r, z, n; the reset gate scales
    Wh_n h + Bh_n)."""
    if not spec.linear_before_reset:
        return _gru_step_reset_before(spec, xw, h, wh, bh)
    return gru.step(xw, h, wh, bh, _input_step(spec, xw))


def _gru_step_reset_before(
    spec: LayerSpec, xw: te.Tensor, h: te.Tensor, wh: te.Tensor, bh: te.Tensor
) -> te.Tensor:
    """h' of ONNX's default GRU (linear_before_reset=0): n = tanh(Wi_n x + Bi_n +
    Wh_n (r * h) + Bh_n). The candidate's product needs r first, so it is a second
    reduction in the step, and the first covers the r and z rows only."""
    hidden, x_t = spec.hidden, _input_step(spec, xw)
    shape = h.shape
    k = te.reduce_axis((0, hidden), name="kh")
    hw = te.compute(
        (*shape[:2], 2 * hidden),
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
    x_t = _input_step(spec, xw)
    return te.compute(
        h.shape,
        lambda t, b, j: act(xw[x_t(t), b, j] + hw[t, b, j]),
        name="h_new",
    )


def _input_step(spec: LayerSpec, xw: te.Tensor):
    """The input row scan step t (1..seq) reads: topi's convention, reversed if asked."""
    seq = xw.shape[0]
    return (lambda t: seq - t) if spec.reverse else (lambda t: t - 1)


def _gated(spec: LayerSpec, x, weights, h0) -> te.Tensor:
    """Every step's hidden state (step order) of a GRU or Elman layer."""
    w_ih, w_hh, b_ih, b_hh = weights
    xw = input_projection(x, w_ih, b_ih, "xw")
    seq, batch = x.shape[:2]
    h = te.placeholder((seq + 1, batch, spec.hidden), name="h")
    init = te.compute((1, batch, spec.hidden), lambda _, b, j: h0[b, j], name="h_init")
    step = _gru_step if spec.kind == "gru" else _elman_step
    h_new = step(spec, xw, h, w_hh, b_hh)
    return drop_init(scan(init, h_new, h, name=f"{spec.kind}_scan"), "hidden_states")


def build(spec: LayerSpec) -> list[te.Tensor]:
    """The layer's TE graph: inputs (x, weights, initial states), then outputs (the
    sequence in input order, the final states; or the state sequences in step order, if
    :attr:`LayerSpec.sequences_only`). Symbolic sizes are te.vars named as in
    :data:`SYMBOLIC`."""
    seq, batch = (
        te.var(name) if size is None else size
        for name, size in zip(SYMBOLIC, (spec.seq, spec.batch), strict=True)
    )
    x = te.placeholder((seq, batch, spec.input), name="x")
    named = {name: te.placeholder(shape, name=name) for name, shape in spec.weight_shapes()}
    shapes = spec.state_shapes(batch)
    states = [te.placeholder(s, name=n) for n, s in zip(("h0", "c0"), shapes)]
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
            **_peepholes(spec, batch, named.get("p")),
        )
    else:
        weights = [named[n] for n in ("w_ih", "w_hh", "b_ih", "b_hh")]
        seqs = [_gated(spec, x, weights, states[0])]
    if spec.sequences_only:
        return [x, *named.values(), *states, *seqs]
    finals = [_last(s, name) for s, name in zip(seqs, ("h_n", "c_n"))]
    return [x, *named.values(), *states, _in_input_order(spec, seqs[0]), *finals]


def _peepholes(spec: LayerSpec, batch: Size, p: te.Tensor | None) -> dict[str, te.Tensor]:
    """topi's ``p_i``, ``p_f``, ``p_o`` (indexed [batch, hidden]) from ``p`` (i, f, o rows,
    one per hidden unit, as ONNX has them: shared by the batch)."""
    if p is None:
        return {}

    def rows(g: int, gate: str) -> te.Tensor:
        shape = (batch, spec.hidden)
        return te.compute(shape, lambda _, j: p[g * spec.hidden + j], name=f"p_{gate}")

    return {f"p_{gate}": rows(g, gate) for g, gate in enumerate("ifo")}


def _in_input_order(spec: LayerSpec, hs: te.Tensor) -> te.Tensor:
    """The reverse scan's step t saw x[seq-1-t], where PyTorch reports it: re-reversed.
    (A forward layer's hs is already the step copy made inside the scan.)"""
    if not spec.reverse:
        return hs
    last = hs.shape[0] - 1
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
    model, lower once. A symbolic layer's indices are int64, as Relax's shape variables
    are: in int32 the sizes would arrive through a narrowing cast, and products such as
    seq * batch * 4 * hidden, which no static bound keeps small, could overflow.
    """
    index_dtype = "int64" if spec.symbolic else None
    func = create_prim_func(build(spec), index_dtype_override=index_dtype, options=options)
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

    def call(
        self,
        bb: relax.BlockBuilder,
        spec: LayerSpec,
        args: list[relax.Expr],
        seq: Size,
        batch: Size,
    ) -> list[relax.Expr]:
        """A ``call_tir`` of ``spec``'s function on ``args`` (x, weights, initial states)
        for the input's ``seq`` and ``batch``: the output sequence in input order (seq,
        batch, out), then the final states (batch, ·).

        For a function that returns its state sequences only
        (:attr:`LayerSpec.sequences_only`) they are taken here: each final state is row
        ``seq - 1`` of its sequence in step order (the state after the last step, in either
        direction), and a reverse layer's output is its h sequence flipped.
        """
        out_ty = [relax.TensorType(shape, DTYPE) for shape in spec.output_shapes(seq, batch)]
        if len(out_ty) == 1:  # a GRU's or Elman's h sequence: not a tuple of one
            outputs = [bb.emit(relax.call_tir(self(bb, spec), args, out_ty[0]))]
        else:
            result = bb.emit(relax.call_tir(self(bb, spec), args, out_ty))
            outputs = [bb.emit(relax.TupleGetItem(result, i)) for i in range(len(out_ty))]
        if not spec.sequences_only:
            return outputs
        finals = [bb.emit(_last_row(states, seq)) for states in outputs]
        y = bb.emit(relax.op.flip(outputs[0], axis=0)) if spec.reverse else outputs[0]
        return [y, *finals]


def _last_row(states: relax.Expr, seq: Size) -> relax.Expr:
    """``states[seq - 1]``: a slice with a symbolic begin, not a ``take`` of index -1 (TVM
    0.27 legalises a negative index of ``take``/select wrongly). Declared in bounds, so that
    the slice has one row and squeezes: an RNN has no final state of an empty sequence
    (PyTorch refuses one), and a length below 1 must be kept out by the declared range
    that ``main`` checks."""
    row = relax.op.strided_slice(states, axes=[0], begin=[seq - 1], end=[seq], assume_inbound=True)
    return relax.op.squeeze(row, [0])


def tensor_shape(
    where: str,
    what: str,
    value: relax.Expr,
    to_float32: str,
    to_static: str,
    symbolic: Collection[int] = (),
) -> tuple[Size, ...]:
    """``value``'s shape, ints where static, after checking that it is a float32 tensor (the
    layer functions' only kind) whose axes are static but those in ``symbolic`` (the
    sequence and batch axes: the layer functions take any length and batch, not any
    width). ``where`` names the node, ``what`` the operand, and ``to_float32``/``to_static``
    say, in the frontend's terms, how to fix the model."""
    ty = getattr(value, "ty", None)
    if not isinstance(ty, relax.TensorType):
        raise ScanLoweringError(f"{where}: {what} is not a tensor ({ty}); fix the model.")
    if str(ty.dtype) != "float32":
        raise ScanLoweringError(
            f"{where}: {what} is {ty.dtype}; scan-tir's recurrences are float32 only: {to_float32}."
        )
    if ty.shape is None:
        raise ScanLoweringError(f"{where}: {what} has no known shape; {to_static}.")
    for axis, size in enumerate(ty.shape):
        if axis not in symbolic and not isinstance(size, tirx.IntImm):
            raise ScanLoweringError(
                f"{where}: {what} has shape {ty.shape}, axis {axis} symbolic; only the "
                f"sequence length and the batch may be symbolic: {to_static}."
            )
    return tuple(int(d) if isinstance(d, tirx.IntImm) else d for d in ty.shape)


def same_shape(shape: tuple[Size, ...] | None, expected: tuple[Size, ...]) -> bool:
    """Whether ``shape`` is ``expected``, a symbolic size the same expression (an initial
    state whose batch is another symbol than the input's is not the input's batch)."""
    if shape is None or len(shape) != len(expected):
        return False
    analyzer = Analyzer()
    return all(analyzer.can_prove_equal(a, b) for a, b in zip(shape, expected, strict=True))
