"""An ONNX ``LSTM``, ``GRU`` or ``RNN`` node read and checked before its Relax is built.

Two stages, both raising :class:`scan_tir.ScanLoweringError` that names the node (name and
op type), the attribute or input, and the fix. :func:`read_attributes` needs the attributes
only, so ``scan_tir.relax.onnx`` runs it over the graph before TVM's importer parses a single
initializer (a refusal costs nothing then); :func:`read` adds the operands, as Relax values
with their shapes, inside the converter. What is refused is what the scan layers cannot
compute exactly: the alternative is a model that compiles and silently computes something
else (a clipped cell, a padded batch read past its lengths).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import relax

from ..errors import ScanLoweringError
from .layers import GATES, LayerSpec, Size, same_shape, tensor_shape

#: The op types converted here -> their gates (the stacked rows of W and R per direction).
OP_GATES = {"LSTM": GATES["lstm"], "GRU": GATES["gru"], "RNN": GATES["rnn_tanh"]}

#: Each op's activations for one direction, as ONNX defaults them. Names are
#: case-sensitive, as onnxruntime reads them (it rejects "relu").
DEFAULT_ACTIVATIONS = {
    "LSTM": ("Sigmoid", "Tanh", "Tanh"),
    "GRU": ("Sigmoid", "Tanh"),
    "RNN": ("Tanh",),
}

#: An RNN direction's activation -> the Elman layer kind (``nn.RNN``'s nonlinearity).
ELMAN_KINDS = {"Tanh": "rnn_tanh", "Relu": "rnn_relu"}

_COMMON = {"activation_alpha", "activation_beta", "activations", "clip", "direction"}
_COMMON |= {"hidden_size", "layout", "output_sequence"}  # output_sequence: opset 1 only
_KNOWN = {"LSTM": _COMMON | {"input_forget"}, "GRU": _COMMON | {"linear_before_reset"}}
_KNOWN["RNN"] = _COMMON

_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}

#: The ONNX inputs, by position (LSTM's P is the eighth; GRU and RNN stop at initial_h).
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")


@dataclass(frozen=True)
class Attributes:
    """A node's attributes, checked: one layer kind and one reverse flag per direction."""

    where: str
    op_type: str
    kinds: tuple[str, ...]
    reverse: tuple[bool, ...]
    layout: int
    hidden_size: int | None
    linear_before_reset: bool


@dataclass(frozen=True)
class RnnNode:
    """A node's attributes and operands, checked. Operands are Relax values (constants, or
    graph inputs), absent optional ones None; ``sequence_lens``, once checked, is gone.
    ``seq`` and ``batch`` are X's Relax shape expressions where symbolic."""

    attrs: Attributes
    x: relax.Expr
    w: relax.Expr
    r: relax.Expr
    b: relax.Expr | None
    initial_h: relax.Expr | None
    initial_c: relax.Expr | None
    p: relax.Expr | None
    seq: Size
    batch: Size
    input: int
    hidden: int

    @property
    def gates(self) -> int:
        return OP_GATES[self.attrs.op_type]

    def spec(self, direction: int) -> LayerSpec:
        """The layer function of ``direction`` (0 forward or only, 1 reverse). Biases as
        the PyTorch path has them: an LSTM without B takes none, a GRU or RNN zeros."""
        kind = self.attrs.kinds[direction]
        return LayerSpec(
            kind=kind,
            seq=self.seq if isinstance(self.seq, int) else None,
            batch=self.batch if isinstance(self.batch, int) else None,
            input=self.input,
            hidden=self.hidden,
            bias=self.b is not None or kind != "lstm",
            reverse=self.attrs.reverse[direction],
            peephole=self.p is not None,
            linear_before_reset=self.attrs.linear_before_reset,
        )


def where(op_type: str, name: str) -> str:
    """How messages name a node."""
    return f"ONNX {op_type} node '{name}'" if name else f"unnamed ONNX {op_type} node"


def read_attributes(op_type: str, name: str, attrs: Mapping[str, Any]) -> Attributes:
    """``attrs`` as TVM's importer or ``onnx.helper.get_attribute_value`` gives them
    (strings as bytes, lists as tuples or lists), checked."""
    here = where(op_type, name)
    attrs = {k: _text(v) for k, v in attrs.items() if k != "tvm_custom"}
    unknown = sorted(set(attrs) - _KNOWN[op_type])
    if unknown:
        raise ScanLoweringError(
            f"{here}: attribute {', '.join(unknown)} is not an ONNX {op_type} attribute "
            f"scan-tir knows ({', '.join(sorted(_KNOWN[op_type]))}); remove it."
        )
    if "clip" in attrs:
        raise ScanLoweringError(
            f"{here}: attribute clip={attrs['clip']}: cell clipping is not implemented in "
            "scan-tir's recurrences; export the model without clip (it changes results only "
            "where a pre-activation exceeds the bound)."
        )
    if op_type == "LSTM" and int(attrs.get("input_forget", 0)):
        raise ScanLoweringError(
            f"{here}: attribute input_forget=1 (coupled input and forget gates) is not "
            "implemented; export the LSTM with input_forget=0 (the default)."
        )
    direction = attrs.get("direction", "forward")
    if direction not in _DIRECTIONS:
        raise ScanLoweringError(
            f"{here}: attribute direction={direction!r}; ONNX allows forward, reverse or "
            "bidirectional: fix the attribute."
        )
    reverse = _DIRECTIONS[direction]
    layout = int(attrs.get("layout", 0))
    if layout not in (0, 1):
        raise ScanLoweringError(
            f"{here}: attribute layout={layout}; ONNX allows 0 (time-major) or 1 "
            "(batch-major): fix the attribute."
        )
    return Attributes(
        where=here,
        op_type=op_type,
        kinds=_kinds(here, op_type, attrs.get("activations"), len(reverse)),
        reverse=reverse,
        layout=layout,
        hidden_size=int(attrs["hidden_size"]) if "hidden_size" in attrs else None,
        linear_before_reset=op_type != "GRU" or bool(int(attrs.get("linear_before_reset", 0))),
    )


def _text(value: Any) -> Any:
    """bytes as str, lists of bytes as tuples of str; anything else unchanged."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list | tuple):
        return tuple(_text(v) for v in value)
    return value


def _kinds(here: str, op_type: str, activations: Any, directions: int) -> tuple[str, ...]:
    """The layer kind of each direction. LSTM and GRU take their default activations only;
    an RNN direction may be Tanh or Relu (``nn.RNN``'s two nonlinearities). None of these
    takes a parameter, so ``activation_alpha`` and ``activation_beta`` are unused (and
    accepted)."""
    default = DEFAULT_ACTIVATIONS[op_type]
    if activations is None:
        names = default * directions
    else:
        names = tuple(str(a) for a in activations)
    per = len(default)
    supported = " or ".join(ELMAN_KINDS) if op_type == "RNN" else ", ".join(default)
    supported += " per direction (ONNX's names, case-sensitive)"
    fix = f"scan-tir compiles {supported}: use those or leave activations unset."
    if len(names) != per * directions:
        raise ScanLoweringError(
            f"{here}: attribute activations={activations}: {len(names)} functions for "
            f"{directions} direction(s), ONNX expects {per * directions}; {fix}"
        )
    if op_type == "RNN":
        if all(a in ELMAN_KINDS for a in names):
            return tuple(ELMAN_KINDS[a] for a in names)
    elif names == default * directions:
        return (op_type.lower(),) * directions
    raise ScanLoweringError(f"{here}: attribute activations={activations} is not supported; {fix}")


def read(
    attrs: Attributes,
    inputs: Sequence[relax.Expr | None],
    params: Mapping[str, tuple[relax.Var, Any]] | None = None,
) -> RnnNode:
    """The node's operands, checked against its attributes. ``params`` is the importer's
    record of initializers kept as inputs (``keep_params_in_input``), where a
    ``sequence_lens`` initializer is then found."""
    named = {name: inputs[i] if i < len(inputs) else None for i, name in enumerate(INPUTS)}
    if attrs.op_type != "LSTM":
        named["initial_c"] = named["P"] = None  # not inputs of GRU and RNN
    for required in ("X", "W", "R"):
        if named[required] is None:
            raise ScanLoweringError(
                f"{attrs.where}: input {required} is missing; ONNX requires it: fix the model."
            )
    # Symbolic: X's time and batch axes, the initial states' batch axis (per layout).
    symbolic = {"X": (0, 1), "initial_h": (1 - attrs.layout,), "initial_c": (1 - attrs.layout,)}
    shapes = {
        name: _shape(attrs.where, name, value, symbolic.get(name, ()))
        for name, value in named.items()
        if value is not None and name != "sequence_lens"
    }
    x_shape = shapes["X"]
    if len(x_shape) != 3:
        raise ScanLoweringError(
            f"{attrs.where}: input X has shape {x_shape}; ONNX's {attrs.op_type} takes a "
            "3-D X: fix the model."
        )
    seq, batch, width = x_shape if attrs.layout == 0 else (x_shape[1], x_shape[0], x_shape[2])
    hidden = _hidden(attrs, shapes["R"])
    node = RnnNode(
        attrs=attrs,
        x=named["X"],
        w=named["W"],
        r=named["R"],
        b=named["B"],
        initial_h=named["initial_h"],
        initial_c=named["initial_c"],
        p=named["P"],
        seq=seq,
        batch=batch,
        input=width,
        hidden=hidden,
    )
    _check_shapes(node, shapes)
    if named["sequence_lens"] is not None:
        _check_lengths(node, named["sequence_lens"], params or {})
    return node


def constant(value: relax.Expr) -> np.ndarray | None:
    """A Relax constant's value (what the importer makes of an initializer), else None."""
    return value.value.numpy() if isinstance(value, tvm.ir.GenericConst) else None


def _shape(here: str, name: str, value: relax.Expr, symbolic: tuple[int, ...]) -> tuple:
    return tensor_shape(
        here,
        f"input {name}",
        value,
        "convert the model to float32 (or pass dtype_dict for a graph input)",
        "give the model's inputs static feature sizes (dim_value), or pass "
        "shape_dict={input name: shape}",
        symbolic,
    )


def _hidden(attrs: Attributes, r_shape: tuple[int, ...]) -> int:
    """hidden_size, from R (D, gates * hidden, hidden); the attribute, if set, must agree."""
    hidden = r_shape[-1]
    if attrs.hidden_size is not None and attrs.hidden_size != hidden:
        raise ScanLoweringError(
            f"{attrs.where}: attribute hidden_size={attrs.hidden_size} but R has shape "
            f"{r_shape} (hidden {hidden}); make them agree."
        )
    return hidden


def _check_shapes(node: RnnNode, shapes: Mapping[str, tuple[Size, ...]]) -> None:
    """Every operand has the shape ONNX specifies for the node's sizes and layout."""
    d, rows, h = len(node.attrs.reverse), node.gates * node.hidden, node.hidden
    state = (d, node.batch, h) if node.attrs.layout == 0 else (node.batch, d, h)
    expected = {
        "W": (d, rows, node.input),
        "R": (d, rows, h),
        "B": (d, 2 * rows),
        "initial_h": state,
        "initial_c": state,
        "P": (d, 3 * h),
    }
    for name, shape in shapes.items():
        if name in expected and not same_shape(shape, expected[name]):
            raise ScanLoweringError(
                f"{node.attrs.where}: input {name} has shape {shape}, expected "
                f"{expected[name]} for {d} direction(s), X of shape {shapes['X']} (layout "
                f"{node.attrs.layout}) and hidden {h}; fix the model."
            )


def _check_lengths(
    node: RnnNode, value: relax.Expr, params: Mapping[str, tuple[relax.Var, Any]]
) -> None:
    """sequence_lens is accepted when it is known at import and every length is seq: then
    it changes nothing. Anything else would need per-sequence masking of state and output."""
    here = node.attrs.where
    fix = (
        "pad every sequence to the full length and drop sequence_lens (mask or slice the "
        "outputs yourself), or split the batch by length"
    )
    lengths = constant(value)
    if lengths is None:  # an initializer kept as an input (keep_params_in_input)?
        kept = (array for var, array in params.values() if var.same_as(value))
        lengths = next((a.numpy() for a in kept), None)
    if lengths is None:
        raise ScanLoweringError(
            f"{here}: input sequence_lens is computed or a graph input, so its lengths are "
            f"unknown at import; scan-tir runs every sequence for all {node.seq} steps: {fix}, "
            "or make it an initializer whose lengths all equal seq."
        )
    if not isinstance(node.seq, int) or not isinstance(node.batch, int):
        raise ScanLoweringError(
            f"{here}: input sequence_lens with X of symbolic shape (seq {node.seq}, batch "
            f"{node.batch}): the lengths cannot be checked against every sequence: drop "
            "sequence_lens (every sequence then runs for its full length), or give X a static "
            "shape (shape_dict)."
        )
    lengths = np.asarray(lengths).reshape(-1)
    if lengths.shape != (node.batch,) or np.any(lengths != node.seq):
        raise ScanLoweringError(
            f"{here}: input sequence_lens={lengths.tolist()} with seq={node.seq}: sequences "
            f"of unequal (or shorter) lengths are not supported: {fix}."
        )
