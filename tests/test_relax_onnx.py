"""scan_tir.relax.from_onnx: ONNX LSTM, GRU and RNN nodes built with onnx.helper, imported
as scan PrimFuncs, compiled with tvm.compile (no tuning) and run on the Relax VM, against
onnxruntime on the same model.

Tolerance: rtol = atol = 1e-5. The scan kernels use fast math (relative error <= 1.5e-6 per
activation); onnxruntime has its own vectorised sigmoid/tanh approximations and MLAS GEMMs
that sum in another order; a recurrence may accumulate both, so 1e-5 leaves room over 256
steps (observed: at most 3e-7, at 6 steps and at 256).

onnxruntime refuses ``layout=1`` ("Batchwise recurrent operations (layout == 1) are not
supported", 1.32), so a layout-1 model is checked against onnxruntime running the same
node with layout 0 on the transposed inputs, outputs transposed back; and once against
onnx's own reference evaluator, which does run layout 1 (test_layout_1_reference).
Sizes are tiny: compile time is the cost.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Collection, Mapping

import numpy as np
import pytest
import tvm
from tvm import relax

from scan_tir import LoweringOptions, ScanLoweringError, find_scans
from scan_tir.relax import from_onnx
from scan_tir.relax.layers import LAYER_ATTR, OPAQUE, LayerSpec, layer_prim_func

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

TOL = {"rtol": 1e-5, "atol": 1e-5}
SEQ, BATCH, INPUT, HIDDEN = 6, 2, 3, 5
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OPS = list(GATES)
DIRECTIONS = ["forward", "reverse", "bidirectional"]
ALL_OPTIONAL = ("B", "initial_h", "initial_c")
#: Graph inputs by default (fed at run time); every other operand is an initializer.
FED = ("X", "initial_h", "initial_c")
#: The transposes from layout 0 to layout 1, per tensor.
TO_LAYOUT_1 = {
    "X": (1, 0, 2),
    "initial_h": (1, 0, 2),
    "initial_c": (1, 0, 2),
    "Y": (2, 0, 1, 3),
    "Y_h": (1, 0, 2),
    "Y_c": (1, 0, 2),
}


def operands(
    op: str, direction: str, seq: int, optional: Collection[str], seed: int
) -> dict[str, np.ndarray]:
    """The node's operands in layout 0, drawn as PyTorch initialises its RNNs (weights in
    +-1/sqrt(hidden)), so that long sequences neither saturate nor explode."""
    rng = np.random.default_rng(seed)
    d, rows, k = 2 if direction == "bidirectional" else 1, GATES[op] * HIDDEN, HIDDEN**-0.5

    def draw(bound: float, *shape: int) -> np.ndarray:
        return rng.uniform(-bound, bound, shape).astype("float32")

    arrays = {
        "X": draw(1, seq, BATCH, INPUT),
        "W": draw(k, d, rows, INPUT),
        "R": draw(k, d, rows, HIDDEN),
        "B": draw(k, d, 2 * rows),
        "sequence_lens": np.full(BATCH, seq, "int32"),
        "initial_h": draw(0.5, d, BATCH, HIDDEN),
        "initial_c": draw(0.5, d, BATCH, HIDDEN),
        "P": draw(k, d, 3 * HIDDEN),
    }
    if op != "LSTM":  # GRU and RNN stop at initial_h
        optional = [name for name in optional if name not in ("initial_c", "P")]
    return {name: a for name, a in arrays.items() if name in ("X", "W", "R", *optional)}


def rnn_model(
    op: str,
    arrays: Mapping[str, np.ndarray],
    *,
    direction: str = "forward",
    layout: int = 0,
    fed: Collection[str] = FED,
    outputs: tuple[str, ...] | None = None,
    name: str = "rnn0",
    opset: int = 14,
    **attrs,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One-node model and its feeds: ``arrays`` (layout 0) become graph inputs if named in
    ``fed``, initializers otherwise; X and the states are transposed for ``layout`` 1."""
    arrays = {
        n: a.transpose(TO_LAYOUT_1[n]) if layout and n in TO_LAYOUT_1 else a
        for n, a in arrays.items()
    }
    slots = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
    inputs = [n if n in arrays else "" for n in slots[: 8 if op == "LSTM" else 6]]
    while inputs[-1] == "":
        inputs.pop()
    outputs = outputs or (("Y", "Y_h", "Y_c") if op == "LSTM" else ("Y", "Y_h"))
    if layout:
        attrs["layout"] = 1
    node = helper.make_node(
        op, inputs, list(outputs), name=name, hidden_size=HIDDEN, direction=direction, **attrs
    )
    shapes = output_shapes(arrays, direction, layout)
    graph = helper.make_graph(
        [node],
        "g",
        [value_info(n, a) for n, a in arrays.items() if n in fed],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outputs if o],
        [numpy_helper.from_array(a, n) for n, a in arrays.items() if n not in fed],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model, {n: a for n, a in arrays.items() if n in fed}


def value_info(name: str, array: np.ndarray) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(
        name, helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape)
    )


def output_shapes(arrays, direction: str, layout: int) -> dict[str, list[int]]:
    """ONNX's output shapes, from the spec (not from the code under test)."""
    d = 2 if direction == "bidirectional" else 1
    seq, batch = arrays["X"].shape[:2] if layout == 0 else arrays["X"].shape[1::-1]
    if layout == 0:
        state, y = [d, batch, HIDDEN], [seq, d, batch, HIDDEN]
    else:
        state, y = [batch, d, HIDDEN], [batch, seq, d, HIDDEN]
    return {"Y": y, "Y_h": state, "Y_c": state}


def import_onnx(model: onnx.ModelProto, **kwargs) -> tvm.IRModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TVM's importer warns about every renamed input
        return from_onnx(model, **kwargs)


def run_tvm(mod: tvm.IRModule, target, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Compile without tuning, run main on the VM (its parameters are the graph inputs, in
    order: ``feeds`` keeps that order)."""
    vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    out = vm["main"](*(tvm.runtime.tensor(a) for a in feeds.values()))
    return [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]


def run_ort(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, dict(feeds))


def check(
    op: str,
    *,
    direction: str = "forward",
    layout: int = 0,
    seq: int = SEQ,
    optional: Collection[str] = ALL_OPTIONAL,
    seed: int = 0,
    target,
    **kwargs,
) -> tvm.IRModule:
    """Build, import, compile and run the node; compare every output with onnxruntime (on
    the layout-0 twin for layout 1). Returns the imported module."""
    arrays = operands(op, direction, seq, optional, seed)
    model, feeds = rnn_model(op, arrays, direction=direction, layout=layout, **kwargs)
    mod = import_onnx(model)
    got = run_tvm(mod, target, feeds)
    twin, twin_feeds = rnn_model(op, arrays, direction=direction, layout=0, **kwargs)
    want = run_ort(twin, twin_feeds)
    names = [o.name for o in model.graph.output]
    if layout:
        want = [w.transpose(TO_LAYOUT_1[n]) for n, w in zip(names, want, strict=True)]
    assert [g.shape for g in got] == [w.shape for w in want]
    for name, g, w in zip(names, got, want, strict=True):
        np.testing.assert_allclose(g, w, **TOL, err_msg=name)
    return mod


def scan_calls(mod: tvm.IRModule) -> list[str]:
    """The scan functions ``main`` calls, once per call, in order."""
    names = []

    def visit(expr):
        if isinstance(expr, relax.Call) and expr.op.same_as(tvm.ir.Op.get("relax.call_tir")):
            if LAYER_ATTR in (mod[expr.args[0]].attrs or {}):
                names.append(expr.args[0].name_hint)

    relax.analysis.post_order_visit(mod["main"].body, visit)
    return names


# Every op, direction and layout, with B and the initial states; GRU at ONNX's default
# linear_before_reset=0.
@pytest.mark.parametrize("layout", [0, 1], ids=["layout0", "layout1"])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op", OPS)
def test_op(op, direction, layout, target):
    mod = check(op, direction=direction, layout=layout, target=target)
    assert len(scan_calls(mod)) == (2 if direction == "bidirectional" else 1)


@pytest.mark.parametrize("layout", [0, 1], ids=["layout0", "layout1"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("lbr", [0, 1], ids=["reset_before", "reset_after"])
def test_gru_linear_before_reset(lbr, direction, layout, target):
    """0: h' from (r * h) R_h^T (a second product in the step); 1: PyTorch's r * (h R_h^T)."""
    check("GRU", direction=direction, layout=layout, linear_before_reset=lbr, target=target)


# The optional inputs, absent or present, where they change what a direction is given:
# no B (an LSTM takes no biases, a GRU or RNN zeros), no states (zeros), h without c,
# peepholes with and without B.
OPTIONAL_CASES = {
    "lstm-bare": ("LSTM", ()),
    "lstm-h0": ("LSTM", ("initial_h",)),
    "lstm-c0": ("LSTM", ("B", "initial_c")),
    "lstm-peephole": ("LSTM", ("B", "initial_h", "initial_c", "P")),
    "lstm-peephole-nobias": ("LSTM", ("P", "initial_c")),
    "gru-bare": ("GRU", ()),
    "gru-h0-nobias": ("GRU", ("initial_h",)),
    "rnn-bare": ("RNN", ()),
    "rnn-bias-only": ("RNN", ("B",)),
}


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("case", list(OPTIONAL_CASES))
def test_optional_inputs(case, direction, target):
    op, optional = OPTIONAL_CASES[case]
    check(op, direction=direction, optional=optional, target=target)


def test_peephole_layout_1_reverse(target):
    """Peepholes with the batch-major states and the reverse scan together."""
    optional = ("B", "initial_h", "initial_c", "P")
    check("LSTM", direction="reverse", layout=1, optional=optional, target=target)


@pytest.mark.parametrize(
    "direction, activations",
    [
        ("forward", ["Relu"]),
        ("bidirectional", ["Relu", "Relu"]),
        ("bidirectional", ["Tanh", "Relu"]),
        ("reverse", ["Relu"]),
    ],
    ids=["relu", "bi-relu", "bi-tanh-relu", "reverse-relu"],
)
def test_rnn_relu(direction, activations, target):
    """An RNN direction with Relu is nn.RNN's relu cell; each direction has its own."""
    mod = check("RNN", direction=direction, activations=activations, target=target)
    assert [name.split("_")[1] for name in scan_calls(mod)] == [a.lower() for a in activations]


def test_default_activations_spelled_out(target):
    activations = ["Sigmoid", "Tanh", "Tanh"] * 2
    check("LSTM", direction="bidirectional", activations=activations, target=target)
    check("GRU", activations=["Sigmoid", "Tanh"], target=target)


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_long_sequence(op, target):
    """256 steps both ways (TVM_NUM_THREADS=2, tests/conftest.py): the errors stay within
    tolerance."""
    optional = (*ALL_OPTIONAL, "P") if op == "LSTM" else ALL_OPTIONAL
    check(op, direction="bidirectional", seq=256, optional=optional, target=target)


def test_weights_as_graph_inputs(target):
    """W, R, B and P fed at run time: gate rows reordered by Relax, not at import."""
    fed = ("X", "W", "R", "B", "P", "initial_h", "initial_c")
    optional = (*ALL_OPTIONAL, "P")
    check("LSTM", direction="bidirectional", layout=1, optional=optional, fed=fed, target=target)
    check("GRU", direction="bidirectional", fed=fed, target=target)


def test_states_as_initializers(target):
    """initial_h and initial_c constants (sliced at import), layout 1."""
    check("LSTM", direction="bidirectional", layout=1, fed=("X",), target=target)


def test_keep_params_in_input(target):
    """TVM's keep_params_in_input: initializers become trailing parameters of main."""
    arrays = operands("GRU", "bidirectional", SEQ, (*ALL_OPTIONAL, "sequence_lens"), 3)
    model, feeds = rnn_model("GRU", arrays, direction="bidirectional")
    mod = import_onnx(model, keep_params_in_input=True)
    params = [numpy_helper.to_array(t) for t in model.graph.initializer]
    got = run_tvm(mod, target, {**feeds, **{str(i): p for i, p in enumerate(params)}})
    for g, w in zip(got, run_ort(model, feeds), strict=True):
        np.testing.assert_allclose(g, w, **TOL)


def test_full_sequence_lens_accepted(target):
    """sequence_lens as an initializer with every length == seq changes nothing."""
    check(
        "LSTM", direction="bidirectional", optional=(*ALL_OPTIONAL, "sequence_lens"), target=target
    )


@pytest.mark.parametrize(
    "outputs", [("Y",), ("", "Y_h"), ("", "", "Y_c"), ("Y", "", "Y_c")], ids=str
)
def test_optional_outputs(outputs, target):
    check("LSTM", direction="bidirectional", outputs=outputs, target=target)


def test_opset_7(target):
    """Before opset 14 (no layout attribute) the same converter applies."""
    check("GRU", direction="bidirectional", opset=7, target=target)


def test_layout_1_reference(target):
    """The layout-1 convention (Y as batch, seq, directions, hidden) against onnx's own
    reference evaluator, which runs layout 1 (onnxruntime does not)."""
    from onnx.reference import ReferenceEvaluator

    arrays = operands("LSTM", "bidirectional", SEQ, ALL_OPTIONAL, 4)
    model, feeds = rnn_model("LSTM", arrays, direction="bidirectional", layout=1)
    got = run_tvm(import_onnx(model), target, feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_graph_around_the_node(target):
    """Ops before, between and after go through TVM's converters; two LSTMs of different
    input widths call two functions."""
    arrays = operands("LSTM", "forward", SEQ, ALL_OPTIONAL, 5)
    model, feeds = rnn_model("LSTM", arrays, fed=("X",))
    graph = model.graph
    first = graph.node[0]
    first.input[0] = "X_tanh"
    second = helper.make_node(
        "LSTM", ["Y_flat", *first.input[1:]], ["Y2", "Y2_h"], name="rnn1", hidden_size=HIDDEN
    )
    pre = helper.make_node("Tanh", ["X"], ["X_tanh"], name="pre")
    flat = helper.make_node("Squeeze", ["Y", "axis1"], ["Y_flat"], name="squeeze")
    # The second node's input width is HIDDEN, not INPUT: its own W.
    w2 = np.random.default_rng(6).uniform(-0.4, 0.4, (1, 4 * HIDDEN, HIDDEN)).astype("float32")
    second.input[1] = "W2"
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array([1], "int64"), "axis1"),
            numpy_helper.from_array(w2, "W2"),
        ]
    )
    graph.node.insert(0, pre)
    graph.node.extend([flat, second])
    del graph.output[:]
    graph.output.extend(
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y2", "Y_c")]
    )
    mod = import_onnx(model)
    assert scan_calls(mod) == ["lstm_forward_scan", "lstm_forward_scan1"]
    got = run_tvm(mod, target, feeds)
    for g, w in zip(got, run_ort(model, feeds), strict=True):
        np.testing.assert_allclose(g, w, **TOL)


def test_shared_function_and_fusion(target):
    """Two nodes of one spec call one function, the PyTorch path's own (same cache);
    after legalisation and fusion it is still there, unchanged, opaque."""
    arrays = operands("GRU", "bidirectional", SEQ, ALL_OPTIONAL, 7)
    model, feeds = rnn_model("GRU", arrays, direction="bidirectional", linear_before_reset=1)
    twin = helper.make_node(
        "GRU",
        list(model.graph.node[0].input),
        ["Z", "Z_h"],
        name="rnn1",
        hidden_size=HIDDEN,
        direction="bidirectional",
        linear_before_reset=1,
    )
    model.graph.node.append(twin)
    model.graph.output.append(helper.make_tensor_value_info("Z", TensorProto.FLOAT, None))
    mod = import_onnx(model)
    calls = scan_calls(mod)
    assert calls == ["gru_forward_scan", "gru_reverse_scan"] * 2
    spec = LayerSpec("gru", SEQ, BATCH, INPUT, HIDDEN, reverse=True)
    func = mod[mod.get_global_var("gru_reverse_scan")]
    tvm.ir.assert_structural_equal(func, layer_prim_func(spec, LoweringOptions()))
    passes = relax.backend.cpu_generic.pipeline.legalize_passes(target)
    with target:
        lowered = tvm.transform.Sequential(passes)(mod)
    assert scan_calls(lowered) == calls
    for name in set(calls):
        assert int(lowered[lowered.get_global_var(name)].attrs["op_pattern"]) == OPAQUE
    got = run_tvm(mod, target, feeds)
    want = run_ort(model, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, **TOL)


def test_not_unrolled():
    """main's size does not grow with the sequence; each function holds one scan over it."""

    def imported(seq: int) -> tvm.IRModule:
        arrays = operands("LSTM", "bidirectional", seq, (*ALL_OPTIONAL, "P"), 0)
        return import_onnx(rnn_model("LSTM", arrays, direction="bidirectional", layout=1)[0])

    short, long = imported(4), imported(64)
    sizes = [sum(len(b.bindings) for b in m["main"].body.blocks) for m in (short, long)]
    assert sizes[0] == sizes[1]
    for name in scan_calls(long):
        (nest,) = find_scans(long[long.get_global_var(name)])
        assert nest.loop.extent == 64


def test_lowering_options(target):
    mod = import_onnx(
        rnn_model("RNN", operands("RNN", "forward", SEQ, ALL_OPTIONAL, 1))[0],
        options=LoweringOptions.legacy(),
    )
    (name,) = scan_calls(mod)
    assert '"fast_math": false' in str(mod[mod.get_global_var(name)].attrs[LAYER_ATTR])


# Refusals: a ScanLoweringError naming the node (name and op type), the attribute or input,
# and the fix; the importer's convert map is restored afterwards.


def refused(model: onnx.ModelProto, pattern: str, **kwargs) -> None:
    from tvm.relax.frontend.onnx import onnx_frontend

    original = onnx_frontend._get_convert_map
    with pytest.raises(ScanLoweringError, match=pattern) as info:
        import_onnx(model, **kwargs)
    assert onnx_frontend._get_convert_map is original
    assert "node 'rnn0'" in str(info.value)


def refusal_model(op: str = "LSTM", **kwargs) -> onnx.ModelProto:
    optional = kwargs.pop("optional", ALL_OPTIONAL)
    return rnn_model(op, operands(op, "forward", SEQ, optional, 0), **kwargs)[0]


@pytest.mark.parametrize("op", OPS)
def test_clip_refused(op):
    refused(refusal_model(op, clip=3.0), rf"ONNX {op} node 'rnn0'.*clip=3\.0.*without clip")


@pytest.mark.parametrize(
    "op, activations",
    [
        ("LSTM", ["Sigmoid", "Tanh", "Relu"]),
        ("GRU", ["HardSigmoid", "Tanh"]),
        ("RNN", ["LeakyRelu"]),
        ("LSTM", ["Sigmoid", "Tanh"]),  # too few
        ("RNN", ["relu"]),  # ONNX's names are case-sensitive (onnxruntime rejects this)
    ],
    ids=["lstm-relu", "gru-hardsigmoid", "rnn-leakyrelu", "lstm-count", "rnn-lowercase"],
)
def test_activation_refused(op, activations):
    pattern = rf"ONNX {op} node 'rnn0'.*activations=.*leave activations unset"
    refused(refusal_model(op, activations=activations), pattern)


def test_input_forget_refused():
    refused(refusal_model(input_forget=1), r"ONNX LSTM node 'rnn0'.*input_forget=1.*input_forget=0")


@pytest.mark.parametrize(
    "lengths", [[SEQ, SEQ - 2], [SEQ - 1, SEQ - 1]], ids=["unequal", "all-short"]
)
def test_sequence_lens_refused(lengths):
    arrays = operands("GRU", "forward", SEQ, (*ALL_OPTIONAL, "sequence_lens"), 0)
    arrays["sequence_lens"] = np.array(lengths, "int32")
    pattern = (
        rf"ONNX GRU node 'rnn0'.*sequence_lens={re.escape(str(lengths))}.*pad every "
        "sequence.*drop sequence_lens"
    )
    refused(rnn_model("GRU", arrays)[0], pattern)
    # The same when TVM keeps the initializer as a parameter of main.
    refused(rnn_model("GRU", arrays)[0], pattern, keep_params_in_input=True)


def test_sequence_lens_as_graph_input_refused():
    arrays = operands("RNN", "forward", SEQ, (*ALL_OPTIONAL, "sequence_lens"), 0)
    model = rnn_model("RNN", arrays, fed=(*FED, "sequence_lens"))[0]
    refused(model, r"ONNX RNN node 'rnn0'.*sequence_lens is computed or a graph input.*pad")


def test_symbolic_features_refused_then_fixed_by_shape_dict(target):
    """A symbolic sequence length and batch import (tests/test_relax_export.py); a symbolic
    feature size does not: the weights fix it."""
    arrays = operands("LSTM", "forward", SEQ, ALL_OPTIONAL, 0)
    model, feeds = rnn_model("LSTM", arrays)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_param = "features"
    refused(model, r"ONNX LSTM node 'rnn0'.*input X has shape.*axis 2 symbolic.*shape_dict")
    mod = import_onnx(model, shape_dict={"X": [SEQ, BATCH, INPUT]})
    got = run_tvm(mod, target, feeds)
    for g, w in zip(got, run_ort(model, feeds), strict=True):
        np.testing.assert_allclose(g, w, **TOL)


def test_float64_refused():
    arrays = {
        n: a.astype("float64") if n == "X" else a
        for n, a in operands("RNN", "forward", SEQ, (), 0).items()
    }
    refused(rnn_model("RNN", arrays)[0], r"ONNX RNN node 'rnn0'.*input X is float64.*float32")


def test_unnamed_node_named_by_position():
    """A node without a name is still identified (op type, 'unnamed')."""
    model = refusal_model(clip=1.0, name="")
    with pytest.raises(ScanLoweringError, match=r"unnamed ONNX LSTM node.*clip"):
        import_onnx(model)
