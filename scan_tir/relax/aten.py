"""An ``aten.{lstm,gru,rnn_tanh,rnn_relu}.input`` node, or its ``scan_tir::`` twin from
``scan_tir.relax.export`` (same arguments), read and checked before any IR is built.

Every refusal is a :class:`scan_tir.ScanLoweringError` naming the node and the fix: the
alternative is TVM's C++ shape checks reporting a mismatch in buffers the user never wrote,
or a silently wrong result (training-mode dropout, a float64 model run in float32).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tvm import relax

from ..errors import ScanLoweringError
from .layers import GATES, LayerSpec, Size, same_shape, tensor_shape
from .torch_export import NAMESPACE, OP_NAMES

#: The aten overloads (as the importer's convert map names them) -> the layer kind.
KINDS = {
    "lstm.input": "lstm",
    "gru.input": "gru",
    "rnn_tanh.input": "rnn_tanh",
    "rnn_relu.input": "rnn_relu",
}

#: ``scan_tir.relax.export``'s custom ops (convert-map names: TVM's importer keys
#: converters by ``node.target.__name__``, which drops the namespace) -> the layer kind.
EXPORTED_KINDS = {f"{kind}.default": kind for kind in OP_NAMES}


@dataclass(frozen=True)
class RnnCall:
    """One RNN node: its Relax operands and the module's options, all checked.

    ``hx`` is [h0] or, for an LSTM, [h0, c0], each (layers * directions, batch, ·);
    ``params`` is PyTorch's flat weight list (per layer, per direction: w_ih, w_hh,
    [b_ih, b_hh], [w_hr]). ``seq``, ``batch`` and ``input`` are of the sequence in time-major
    order (the importer transposes a batch-first input); ``seq`` and ``batch`` are the
    input's Relax shape expressions where symbolic.
    """

    where: str
    kind: str
    x: relax.Expr
    hx: list[relax.Expr]
    params: list[relax.Expr]
    has_biases: bool
    num_layers: int
    bidirectional: bool
    batch_first: bool
    seq: Size
    batch: Size
    input: int
    hidden: int
    proj: int

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def per_direction(self) -> int:
        """Flat weights per layer and direction."""
        return 2 + 2 * self.has_biases + bool(self.proj)

    def spec(self, layer: int, direction: int) -> LayerSpec:
        """The function for ``layer``, ``direction`` (1: reverse). A bias-free GRU or Elman
        layer is given zero biases (see :class:`LayerSpec`)."""
        width = self.input if layer == 0 else (self.proj or self.hidden) * self.directions
        return LayerSpec(
            kind=self.kind,
            seq=self.seq if isinstance(self.seq, int) else None,
            batch=self.batch if isinstance(self.batch, int) else None,
            input=width,
            hidden=self.hidden,
            proj=self.proj,
            bias=self.has_biases or self.kind != "lstm",
            reverse=bool(direction),
        )

    def weights(self, layer: int, direction: int) -> list[relax.Expr]:
        """This layer-direction's slice of ``params``."""
        start = (layer * self.directions + direction) * self.per_direction
        return self.params[start : start + self.per_direction]


def read(node: Any, env: Mapping[Any, Any]) -> RnnCall:
    """The node's arguments by their schema names, as Relax values from the importer's
    ``env``, checked against everything the layer functions assume."""
    where = f"node '{node.name}' ({node.target})"
    kind = _kind(node.target, where)
    names = [a.name for a in node.target._schema.arguments]
    args = {**dict(zip(names, node.args)), **node.kwargs}
    x, params = env[args["input"]], [env[p] for p in args["params"]]
    hx = [env[h] for h in (args["hx"] if isinstance(args["hx"], list | tuple) else [args["hx"]])]
    layers, bidirectional = int(args["num_layers"]), bool(args["bidirectional"])
    if args["train"] and args["dropout"] > 0 and layers > 1:
        raise ScanLoweringError(
            f"{where}: dropout {args['dropout']} between layers in training mode; scan-tir "
            "compiles inference only: call model.eval() before torch.export.export."
        )
    # Symbolic: the input's time and batch axes (in either order), h0's and c0's batch.
    named = {"input": (x, (0, 1)), **{f"hx[{i}]": (h, (1,)) for i, h in enumerate(hx)}}
    named.update({f"params[{i}]": (p, ()) for i, p in enumerate(params)})
    shapes = {name: _shape(where, name, *operand) for name, operand in named.items()}
    if len(shapes["input"]) != 3:
        raise ScanLoweringError(
            f"{where}: input of rank {len(shapes['input'])}; the aten op takes (seq, batch, "
            "features) (or batch-first); export the nn module, which adds the batch axis."
        )
    seq, batch, width = shapes["input"]
    if args["batch_first"]:
        seq, batch = batch, seq
    biases = bool(args["has_biases"])
    has_proj = _has_proj(where, kind, len(params), layers, bidirectional, biases)
    w_hh = shapes["params[1]"]
    call = RnnCall(
        where=where,
        kind=kind,
        x=x,
        hx=hx,
        params=params,
        has_biases=biases,
        num_layers=layers,
        bidirectional=bidirectional,
        batch_first=bool(args["batch_first"]),
        seq=seq,
        batch=batch,
        input=width,
        hidden=w_hh[0] // GATES[kind],
        proj=w_hh[1] if has_proj else 0,
    )
    _check_shapes(call, shapes)
    return call


def _kind(target: Any, where: str) -> str:
    """The layer kind of an aten RNN overload or of one of ``export``'s custom ops."""
    name, namespace = target.__name__, getattr(target, "namespace", None)
    if namespace == "aten" and name in KINDS:
        return KINDS[name]
    if namespace == NAMESPACE and name in EXPORTED_KINDS:
        return EXPORTED_KINDS[name]
    raise ScanLoweringError(
        f"{where}: not an RNN op scan-tir converts (aten's {', '.join(KINDS)} or "
        f"{NAMESPACE}::{{{', '.join(OP_NAMES)}}}); pass a converter for "
        f"'{name}' in custom_convert_map."
    )


def _shape(where: str, name: str, value: relax.Expr, symbolic: tuple[int, ...]) -> tuple:
    return tensor_shape(
        where,
        name,
        value,
        "convert the module and its inputs with .float() before exporting",
        "declare only the sequence length and the batch in dynamic_shapes (the features, "
        "hidden sizes and weights must be static)",
        symbolic,
    )


def _has_proj(
    where: str, kind: str, count: int, layers: int, bidirectional: bool, biases: bool
) -> bool:
    """Whether the flat weights include an LSTM's ``w_hr`` (``proj_size``); the count must
    match the module's options either way."""
    per = 2 + 2 * biases
    base = per * layers * (2 if bidirectional else 1)
    if count == base:
        return False
    if kind == "lstm" and count == base + base // per:
        return True
    expected = f"{base} or {base + base // per} (proj_size)" if kind == "lstm" else str(base)
    raise ScanLoweringError(
        f"{where}: {count} weights for {layers} layer(s), bidirectional={bidirectional}, "
        f"has_biases={biases}; expected {expected}: pass the module's _flat_weights, as "
        "nn.LSTM, nn.GRU and nn.RNN do."
    )


def _check_shapes(call: RnnCall, shapes: Mapping[str, tuple[int, ...]]) -> None:
    """Every weight and initial state has the shape its layer function takes."""
    expected: dict[str, tuple[int, ...]] = {}
    for layer in range(call.num_layers):
        for direction in range(call.directions):
            spec = call.spec(layer, direction)
            start = (layer * call.directions + direction) * call.per_direction
            # A bias-free GRU or Elman spec lists the zero biases it is given: drop them.
            for k, (_, shape) in enumerate(spec.weight_shapes()[: call.per_direction]):
                expected[f"params[{start + k}]"] = shape
    spec = call.spec(0, 0)
    for i, state in enumerate(spec.state_shapes(call.batch)):
        expected[f"hx[{i}]"] = (call.num_layers * call.directions, *state)
    for name, shape in expected.items():
        if not same_shape(shapes.get(name), shape):
            raise ScanLoweringError(
                f"{call.where}: {name} has shape {shapes.get(name)}, expected {shape} for a "
                f"{call.kind} with input {call.input}, hidden {call.hidden}, proj "
                f"{call.proj}, {call.num_layers} layer(s), bidirectional={call.bidirectional}; "
                "export the nn module itself, whose weights PyTorch has checked."
            )
