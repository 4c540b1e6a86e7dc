"""scan_tir.relax.export and the importers with a symbolic sequence length and batch: each
model exported (or built in ONNX) once, imported, compiled once with tvm.compile (no tuning),
and that one module run on the Relax VM at lengths 1 to 2048 and batches 1 and 3, against
PyTorch (onnxruntime for ONNX).

Tolerance: rtol = atol = 1e-5, as in tests/test_relax_torch.py: the kernels at a symbolic
length are the static ones with the length a variable, so they sum in the same order.
Sizes are tiny (compile time is the cost); compiled modules are shared between cases.
"""

from __future__ import annotations

import itertools
import json
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.modules.rnn as torch_rnn
import tvm
from torch.export import Dim
from tvm import relax, tirx
from tvm.s_tir import Schedule
from tvm.sym import Analyzer

from scan_tir import ScanLoweringError
from scan_tir.relax import export, from_exported_program, from_onnx
from scan_tir.relax.aten import read
from scan_tir.relax.layers import LAYER_ATTR
from scan_tir.relax.torch_export import custom_ops

TOL = {"rtol": 1e-5, "atol": 1e-5}
INPUT, HIDDEN, PROJ = 3, 5, 2
MAX_SEQ, MAX_BATCH = 2048, 64
LENGTHS, BATCHES = (1, 17, 300, 2048), (1, 3)
SEQ = Dim("seq", min=1, max=MAX_SEQ)
BATCH = Dim("batch", min=1, max=MAX_BATCH)
MODULES = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn_tanh": torch.nn.RNN}
MODULES["rnn_relu"] = lambda *a, **kw: torch.nn.RNN(*a, nonlinearity="relu", **kw)


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """PyTorch's references on one thread: at these sizes its two threads (oneDNN's LSTM)
    only wait for each other at every step, which on a busy machine cost more than the rest
    of this module."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@dataclass(frozen=True)
class Case:
    """One model: an RNN module with these options, h0 (and c0) inputs if ``states``."""

    kind: str
    layers: int = 1
    bidirectional: bool = False
    batch_first: bool = False
    proj: int = 0
    states: bool = False

    def module(self) -> torch.nn.Module:
        options = {"proj_size": self.proj} if self.proj else {}
        rnn = MODULES[self.kind](
            INPUT,
            HIDDEN,
            num_layers=self.layers,
            bidirectional=self.bidirectional,
            batch_first=self.batch_first,
            **options,
        )
        return WithState(rnn, self.kind).eval()

    def inputs(self, seq: int, batch: int) -> tuple[torch.Tensor, ...]:
        x = torch.rand((batch, seq, INPUT) if self.batch_first else (seq, batch, INPUT)) * 2 - 1
        if not self.states:
            return (x,)
        rows = self.layers * (2 if self.bidirectional else 1)
        h0 = torch.rand(rows, batch, self.proj or HIDDEN) - 0.5
        return (x, h0, torch.rand(rows, batch, HIDDEN) - 0.5) if self.kind == "lstm" else (x, h0)

    def dynamic_shapes(self) -> tuple:
        x = {0: BATCH, 1: SEQ} if self.batch_first else {0: SEQ, 1: BATCH}
        if not self.states:
            return (x,)
        return (x, ({1: BATCH},) * (2 if self.kind == "lstm" else 1))  # forward(x, *state)


class WithState(torch.nn.Module):
    """The RNN called as ``rnn(x)`` or with its initial states, as a model would."""

    def __init__(self, rnn: torch.nn.Module, kind: str) -> None:
        super().__init__()
        self.rnn, self.kind = rnn, kind

    def forward(self, x, *state):
        if not state:
            return self.rnn(x)
        return self.rnn(x, state if self.kind == "lstm" else state[0])


CASES = {
    "lstm-2layers-bi-proj": Case("lstm", 2, True, proj=PROJ),
    "lstm-2layers-bi-h0c0-batch_first": Case("lstm", 2, True, batch_first=True, states=True),
    "lstm-proj-h0c0": Case("lstm", proj=PROJ, states=True),
    "gru-2layers-bi-h0-batch_first": Case("gru", 2, True, batch_first=True, states=True),
    "rnn_tanh-2layers": Case("rnn_tanh", 2),
    "rnn_relu-bi-batch_first": Case("rnn_relu", bidirectional=True, batch_first=True),
}


def quiet_export(model: torch.nn.Module, args: tuple, **kwargs) -> torch.export.ExportedProgram:
    """``scan_tir.relax.export`` (its warning about nn.RNN's flat weights held as plain
    attributes is harmless)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export(model, args, **kwargs)


def flat(outputs) -> list[np.ndarray]:
    """PyTorch's nested outputs (``y, (h_n, c_n)``) in order, as the importer flattens them."""
    if isinstance(outputs, torch.Tensor):
        return [outputs.numpy()]
    return [a for item in outputs for a in flat(item)]


@dataclass
class Compiled:
    """A model, its imported module and that module compiled, on the VM."""

    model: torch.nn.Module
    mod: tvm.IRModule | None
    vm: relax.VirtualMachine

    def run(self, args: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
        out = self.vm["main"](*(tvm.runtime.tensor(a.numpy()) for a in args))
        return [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]

    def check(self, args: tuple[torch.Tensor, ...]) -> None:
        with torch.no_grad():
            want = flat(self.model(*args))
        got = self.run(args)
        shape = tuple(args[0].shape)
        assert [g.shape for g in got] == [w.shape for w in want], shape
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            np.testing.assert_allclose(g, w, **TOL, err_msg=f"output {i}, input {shape}")


@pytest.fixture(scope="module")
def compiled(target) -> Callable[[str], Compiled]:
    """Each case exported at (seq 7, batch 2), imported and compiled once per module."""
    cache: dict[str, Compiled] = {}

    def get(name: str) -> Compiled:
        if name not in cache:
            case = CASES[name]
            torch.manual_seed(len(cache))
            model = case.module()
            ep = quiet_export(model, case.inputs(7, 2), dynamic_shapes=case.dynamic_shapes())
            mod = from_exported_program(ep)
            vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
            cache[name] = Compiled(model, mod, vm)
        return cache[name]

    return get


@pytest.mark.parametrize("name", list(CASES))
def test_one_module_every_length_and_batch(name, compiled):
    torch.manual_seed(100)
    module = compiled(name)
    for seq, batch in itertools.product(LENGTHS, BATCHES):
        module.check(CASES[name].inputs(seq, batch))


def test_unbatched_input(target):
    """A 2-D input (nn.GRU adds the batch axis around its op): only the length is symbolic."""
    torch.manual_seed(11)
    model = torch.nn.GRU(INPUT, HIDDEN, num_layers=2).eval()
    ep = quiet_export(model, (torch.rand(7, INPUT),), dynamic_shapes=({0: SEQ},))
    vm = relax.VirtualMachine(tvm.compile(from_exported_program(ep), target=target), tvm.cpu())
    module = Compiled(model, None, vm)
    for seq in LENGTHS:
        module.check((torch.rand(seq, INPUT) * 2 - 1,))


def test_shapes_are_symbolic(compiled):
    """main takes any (seq, batch) in the declared ranges, and each layer function binds
    its own int64 ``seq`` and ``batch`` from its arguments: one function per layer and
    direction, not one per length."""
    mod = compiled("lstm-2layers-bi-h0c0-batch_first").mod
    main = mod["main"]
    x, h0, c0 = main.params
    batch, seq = x.ty.shape[0], x.ty.shape[1]
    assert isinstance(seq, tirx.Var) and isinstance(batch, tirx.Var) and not seq.same_as(batch)
    assert int(x.ty.shape[2]) == INPUT
    assert h0.ty.shape[1].same_as(batch) and c0.ty.shape[1].same_as(batch)
    assert int(main.attrs["tir_var_upper_bound"][seq.name]) == MAX_SEQ
    assert int(main.attrs["tir_var_upper_bound"][batch.name]) == MAX_BATCH
    layers = [gv for gv, f in mod.functions.items() if LAYER_ATTR in (f.attrs or {})]
    assert len(layers) == 4
    for gv in layers:
        func = mod[gv]
        spec = json.loads(str(func.attrs[LAYER_ATTR]))["spec"]
        assert spec["seq"] is None and spec["batch"] is None
        x_shape = func.params[0].ty.shape
        assert [(x_shape[i].name, str(x_shape[i].ty.dtype)) for i in (0, 1)] == [
            ("seq", "int64"),
            ("batch", "int64"),
        ]


@pytest.mark.parametrize(
    "name, outputs",
    [
        ("lstm-2layers-bi-proj", {"hidden_states": PROJ, "cell_states": HIDDEN}),
        ("gru-2layers-bi-h0-batch_first", {"hidden_states": HIDDEN}),
    ],
)
def test_symbolic_length_layers_end_with_the_scan(name, outputs, compiled):
    """At a symbolic length a layer function returns its state sequences (seq, batch, ·)
    only, the final states and a reverse layer's re-reversal being Relax ops after the
    call: a read of row seq - 1 after the scan would leave the root scope no stage pipeline
    (TVM cannot prove seq >= 1), and no tuned schedule would replay. compute_inline of the
    initial state, the first thing such a schedule does, needs a stage pipeline."""
    mod = compiled(name).mod
    layers = [f for f in mod.functions.values() if LAYER_ATTR in (f.attrs or {})]
    assert len(layers) == 4
    analyzer = Analyzer()
    for func in layers:
        params = func.params[-len(outputs) :]
        assert [str(p.name) for p in params] == list(outputs)
        seq, batch, _ = func.params[0].ty.shape
        for p, width in zip(params, outputs.values(), strict=True):
            assert analyzer.can_prove_equal(p.ty.shape[0], seq)  # a GRU's reads seq + 1 - 1
            assert p.ty.shape[1].same_as(batch) and int(p.ty.shape[2]) == width
        sch = Schedule(tvm.IRModule({"main": func}))
        sch.compute_inline(sch.get_sblock("h_init"))


@pytest.mark.parametrize(
    "seq, batch, dim, declared",
    [(MAX_SEQ + 1, 1, "seq", MAX_SEQ), (4, MAX_BATCH + 1, "batch", MAX_BATCH)],
    ids=["seq", "batch"],
)
def test_out_of_range_refused_at_run_time(seq, batch, dim, declared, compiled):
    """Buffers are planned for the declared bounds: main checks the sizes first, and the VM
    raises a Python error naming the input, axis, dimension and range."""
    module = compiled("lstm-2layers-bi-proj")
    with pytest.raises(AssertionError, match=rf"x\.shape\[\d\] = \d+ .*\[1, {declared}\].*'{dim}'"):
        module.run(CASES["lstm-2layers-bi-proj"].inputs(seq, batch))


def test_empty_sequence_refused_whatever_the_dim_allows(target):
    """A Dim's minimum defaults to 0, but no RNN takes an empty sequence (PyTorch refuses
    one; the final states would be read at row -1): the check's lower bound is 1."""
    model = torch.nn.GRU(3, 4).eval()
    ep = export(model, (torch.randn(5, 2, 3),), dynamic_shapes={"input": {0: Dim("seq", max=16)}})
    vm = relax.VirtualMachine(tvm.compile(from_exported_program(ep), target=target), tvm.cpu())
    with pytest.raises(AssertionError, match=r"= 0 is outside the range \[1, 16\]"):
        vm["main"](tvm.runtime.tensor(np.zeros((0, 2, 3), "float32")))


def test_export_keeps_rnn_whole_and_restores_torch():
    """The RNN is one scan_tir op (strict or not), the program still runs in PyTorch, and
    rnn.py's _VF is torch's again after the export, also when it fails."""
    vf = torch_rnn._VF
    model = torch.nn.LSTM(INPUT, HIDDEN, num_layers=2).eval()
    x = torch.rand(7, 2, INPUT)
    for strict in (False, True):
        ep = quiet_export(model, (x,), dynamic_shapes=({0: SEQ, 1: BATCH},), strict=strict)
        targets = {n.target for n in ep.graph.nodes if n.op == "call_function"}
        assert custom_ops()["lstm"] in targets
        assert not any(
            getattr(t, "namespace", None) == "aten" and "lstm" in str(t) for t in targets
        )
        assert torch_rnn._VF is vf
    longer = torch.rand(40, 3, INPUT)
    with torch.no_grad():
        for got, want in zip(flat(ep.module()(longer)), flat(model(longer)), strict=True):
            np.testing.assert_allclose(got, want, **TOL)
    with pytest.raises(ValueError, match="2D or 3D"):  # raised by nn.LSTM while rerouted
        quiet_export(model, (torch.rand(1, 7, 2, INPUT),))
    assert torch_rnn._VF is vf


def test_static_export_imports_as_torch_export():
    """Without dynamic_shapes, the custom op imports to the very module torch.export's aten
    op does."""
    model = torch.nn.LSTM(INPUT, HIDDEN, num_layers=2, bidirectional=True, proj_size=PROJ)
    args = (torch.rand(7, 2, INPUT),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        aten = from_exported_program(torch.export.export(model.eval(), args))
    tvm.ir.assert_structural_equal(from_exported_program(quiet_export(model, args)), aten)


def test_training_mode_dropout_refused():
    model = torch.nn.GRU(INPUT, HIDDEN, num_layers=2, dropout=0.5).train()
    ep = quiet_export(model, (torch.rand(7, 2, INPUT),), dynamic_shapes=({0: SEQ},))
    with pytest.raises(ScanLoweringError, match=r"'gru'.*dropout.*model\.eval\(\)"):
        from_exported_program(ep)


@pytest.mark.parametrize("operand", ["input", "params[1]"])
def test_symbolic_width_refused(operand):
    """Only the length and the batch may be symbolic. torch.export cannot produce another
    symbolic size here (the weights fix them), so the node is built by hand."""
    graph = torch.fx.Graph()
    names = ["input", "h0", "c0", *(f"params[{i}]" for i in range(4))]
    nodes = {n: graph.placeholder(n.replace("[", "_").replace("]", "")) for n in names}
    args = (nodes["input"], [nodes["h0"], nodes["c0"]], [nodes[f"params[{i}]"] for i in range(4)])
    node = graph.call_function(custom_ops()["lstm"], (*args, True, 1, 0.0, False, False, False))
    seq, batch, width = (tirx.Var(n, "int64") for n in ("s0", "s1", "s2"))
    shapes = {
        "input": (seq, batch, INPUT),
        "h0": (1, batch, HIDDEN),
        "c0": (1, batch, HIDDEN),
        "params[0]": (4 * HIDDEN, INPUT),
        "params[1]": (4 * HIDDEN, HIDDEN),
        "params[2]": (4 * HIDDEN,),
        "params[3]": (4 * HIDDEN,),
    }
    shapes[operand] = (*shapes[operand][:-1], width)
    env = {nodes[n]: relax.Var(n, relax.TensorType(s, "float32")) for n, s in shapes.items()}
    where = rf"scan_tir\.lstm.*{re.escape(operand)}.*axis \d symbolic.*dynamic_shapes"
    with pytest.raises(ScanLoweringError, match=where):
        read(node, env)


# ONNX: the importer makes each dim_param ("seq", "batch") one symbolic size of main.

ONNX_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
ONNX_CASES = {
    "LSTM-bidirectional-h0c0": ("LSTM", "bidirectional", 0, True),
    "GRU-reverse-layout1-h0": ("GRU", "reverse", 1, True),
    "RNN-forward": ("RNN", "forward", 0, False),
}


def onnx_rnn(op: str, direction: str, layout: int, states: bool, width: int | str = INPUT):
    """A one-node model whose X and initial states have dim_params "seq" and "batch" (and
    X's features ``width``), weights initializers drawn as PyTorch initialises its RNNs (the
    same for every layout); its state input names."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    d, rows, bound = 2 if direction == "bidirectional" else 1, ONNX_GATES[op] * HIDDEN, HIDDEN**-0.5
    weights = {
        "W": rng.uniform(-bound, bound, (d, rows, INPUT)),
        "R": rng.uniform(-bound, bound, (d, rows, HIDDEN)),
        "B": rng.uniform(-bound, bound, (d, 2 * rows)),
    }
    state_names = ["initial_h", "initial_c"][: 2 if op == "LSTM" else 1] if states else []
    dims = {"X": ["seq", "batch", width], **{n: [d, "batch", HIDDEN] for n in state_names}}
    if layout:  # batch-major: X (batch, seq, features), states (batch, d, hidden)
        dims = {n: [shape[1], shape[0], shape[2]] for n, shape in dims.items()}
    outputs = ["Y", "Y_h", "Y_c"][: 3 if op == "LSTM" else 2]
    node = helper.make_node(
        op,
        ["X", "W", "R", "B", *([""] + state_names if states else [])],
        outputs,
        name="rnn0",
        hidden_size=HIDDEN,
        direction=direction,
        layout=layout,
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in dims.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(a.astype("float32"), n) for n, a in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), state_names


def import_onnx(model, **kwargs) -> tvm.IRModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TVM's importer warns about every renamed input
        return from_onnx(model, **kwargs)


@pytest.mark.parametrize("name", list(ONNX_CASES))
def test_onnx_one_module_every_length_and_batch(name, target):
    """Against onnxruntime running the layout-0 model on the same weights."""
    ort = pytest.importorskip("onnxruntime")
    op, direction, layout, states = ONNX_CASES[name]
    model, state_names = onnx_rnn(op, direction, layout, states)
    mod = import_onnx(model)
    x = mod["main"].params[0]
    assert all(isinstance(x.ty.shape[i], tirx.Var) for i in (0, 1))
    vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    reference = onnx_rnn(op, direction, 0, states)[0]
    session = ort.InferenceSession(
        reference.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(1)
    d = 2 if direction == "bidirectional" else 1
    for seq, batch in itertools.product(LENGTHS, BATCHES):
        feeds = {"X": rng.uniform(-1, 1, (seq, batch, INPUT)).astype("float32")}
        for state in state_names:
            feeds[state] = rng.uniform(-0.5, 0.5, (d, batch, HIDDEN)).astype("float32")
        want = session.run(None, feeds)
        if layout:  # the same feeds, batch-major
            feeds = {n: np.ascontiguousarray(a.transpose(1, 0, 2)) for n, a in feeds.items()}
        out = vm["main"](*(tvm.runtime.tensor(a) for a in feeds.values()))
        got = [o.numpy() for o in out]
        if layout:  # back to layout 0: Y (batch, seq, d, h) -> (seq, d, batch, h)
            got = [got[0].transpose(1, 2, 0, 3), *(g.transpose(1, 0, 2) for g in got[1:])]
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            np.testing.assert_allclose(g, w, **TOL, err_msg=f"output {i}, seq {seq}, batch {batch}")


def test_onnx_sequence_lens_with_symbolic_length_refused():
    """sequence_lens is accepted only where every length is known to be seq."""
    from onnx import numpy_helper

    model, _ = onnx_rnn("GRU", "forward", 0, False)
    model.graph.node[0].input.append("sequence_lens")
    model.graph.initializer.append(numpy_helper.from_array(np.full(2, 7, "int32"), "sequence_lens"))
    with pytest.raises(ScanLoweringError, match=r"'rnn0'.*sequence_lens.*symbolic.*drop"):
        import_onnx(model)
