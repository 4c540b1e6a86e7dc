"""scan_tir.relax.from_exported_program: PyTorch's RNN modules, exported, imported as scan
PrimFuncs, compiled with tvm.compile (no tuning) and run on the Relax VM, against PyTorch.

Tolerance: rtol = atol = 1e-5. The scan kernels use fast math (relative error <= 1.5e-6
per activation) and sum in a different order from PyTorch; a recurrence may accumulate
that, so 1e-5 leaves room for it over 512 steps. Sizes are tiny: compile time is the cost.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import tvm
from torch.export import Dim
from tvm import relax

from scan_tir import LoweringOptions, ScanLoweringError, find_scans
from scan_tir.relax import from_exported_program
from scan_tir.relax.frontend import check_rnn_nodes
from scan_tir.relax.layers import LAYER_ATTR, OPAQUE, LayerSpec, layer_prim_func

TOL = {"rtol": 1e-5, "atol": 1e-5}
SEQ, BATCH, INPUT, HIDDEN, PROJ = 5, 2, 3, 5, 3
KINDS = {
    "lstm": lambda **kw: torch.nn.LSTM(INPUT, HIDDEN, **kw),
    "gru": lambda **kw: torch.nn.GRU(INPUT, HIDDEN, **kw),
    "rnn_tanh": lambda **kw: torch.nn.RNN(INPUT, HIDDEN, nonlinearity="tanh", **kw),
    "rnn_relu": lambda **kw: torch.nn.RNN(INPUT, HIDDEN, nonlinearity="relu", **kw),
}


def export(model: torch.nn.Module, args: tuple, **kwargs) -> torch.export.ExportedProgram:
    """``torch.export`` of the eval-mode model (its warning about nn.RNN's flat weights
    held as plain attributes is harmless)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(model, args, **kwargs)


def flat(outputs) -> list[np.ndarray]:
    """PyTorch's nested outputs (``y, (h_n, c_n)``) in order, as the importer flattens them."""
    if isinstance(outputs, torch.Tensor):
        return [outputs.numpy()]
    return [a for item in outputs for a in flat(item)]


def run(mod: tvm.IRModule, target, args: tuple) -> list[np.ndarray]:
    """Compile without tuning and run ``main`` on the VM."""
    vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    out = vm["main"](*(tvm.runtime.tensor(a.numpy()) for a in args))
    return [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]


def check(model: torch.nn.Module, args: tuple, target) -> tvm.IRModule:
    """Export, import, compile, run: every output as PyTorch returns it."""
    model.eval()
    mod = from_exported_program(export(model, args))
    got = run(mod, target, args)
    with torch.no_grad():
        want = flat(model(*args))
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, **TOL)
    return mod


def scan_calls(mod: tvm.IRModule) -> list[str]:
    """The scan functions ``main`` calls, once per call, in order."""
    names = []

    def visit(expr):
        if isinstance(expr, relax.Call) and expr.op.same_as(tvm.ir.Op.get("relax.call_tir")):
            gv = expr.args[0]
            if LAYER_ATTR in (mod[gv].attrs or {}):
                names.append(gv.name_hint)

    relax.analysis.post_order_visit(mod["main"].body, visit)
    return names


def sequence(seq: int = SEQ, batch_first: bool = False) -> torch.Tensor:
    shape = (BATCH, seq, INPUT) if batch_first else (seq, BATCH, INPUT)
    return torch.rand(shape) * 2 - 1


# Every kind, with the options that change which weights a layer takes and where
# (layers, directions, biases); batch_first below.
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("layers", [1, 2], ids=["1layer", "2layers"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_module(kind, layers, bidirectional, bias, target):
    torch.manual_seed(0)
    model = KINDS[kind](num_layers=layers, bidirectional=bidirectional, bias=bias)
    mod = check(model, (sequence(),), target)
    assert len(scan_calls(mod)) == layers * (2 if bidirectional else 1)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_batch_first(kind, bidirectional, target):
    torch.manual_seed(1)
    model = KINDS[kind](num_layers=2, bidirectional=bidirectional, batch_first=True)
    check(model, (sequence(batch_first=True),), target)


@pytest.mark.parametrize("kind", list(KINDS))
def test_initial_state(kind, target):
    """h0 (and c0) given: each layer-direction starts from its own row. Batch-first, where
    h0 is still (layers * directions, batch, hidden)."""
    torch.manual_seed(2)
    rnn = KINDS[kind](num_layers=2, bidirectional=True, batch_first=True)

    class WithState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = rnn

        def forward(self, x, *state):
            return self.rnn(x, state if kind == "lstm" else state[0])

    h = torch.rand(4, BATCH, HIDDEN) - 0.5
    state = (h, torch.rand(4, BATCH, HIDDEN) - 0.5) if kind == "lstm" else (h,)
    check(WithState(), (sequence(batch_first=True), *state), target)


@pytest.mark.parametrize("with_state", [False, True], ids=["zeros", "h0c0"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_lstm_proj_size(bidirectional, bias, with_state, target):
    """proj_size: h (and h0, h_n, the next layer's input) has PROJ columns, c keeps HIDDEN."""
    torch.manual_seed(3)
    lstm = torch.nn.LSTM(
        INPUT, HIDDEN, num_layers=2, bidirectional=bidirectional, bias=bias, proj_size=PROJ
    )

    class WithState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = lstm

        def forward(self, x, h0, c0):
            return self.lstm(x, (h0, c0))

    if not with_state:
        check(lstm, (sequence(),), target)
        return
    rows = 4 if bidirectional else 2
    h0, c0 = torch.rand(rows, BATCH, PROJ) - 0.5, torch.rand(rows, BATCH, HIDDEN) - 0.5
    check(WithState(), (sequence(), h0, c0), target)


def test_tuple_unpacking(target):
    """``y, (h_n, c_n) = lstm(x)`` inside the model: h_n and c_n are the final states,
    not the output again (TVM's own converter returns the output for every index)."""
    torch.manual_seed(4)

    class Unpack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(INPUT, HIDDEN, num_layers=2)

        def forward(self, x):
            y, (h_n, c_n) = self.lstm(x)
            return h_n * 2 + c_n, y[SEQ - 1]  # not y[-1]: see test_rest_of_graph_by_tvm

    check(Unpack(), (sequence(),), target)


def test_rest_of_graph_by_tvm(target):
    """Ops around the RNN go through TVM's own converters (here matmul, add, tanh, select).

    The step is indexed from the front: TVM 0.27's ``aten.select.int`` converter
    (exported_program_translator.py, ``_select``) passes a negative index to ``take`` in
    "fast" mode, so ``y[:, -1]`` reads out of bounds (garbage, no error)."""
    torch.manual_seed(5)

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(INPUT, HIDDEN, batch_first=True)
            self.head = torch.nn.Linear(HIDDEN, 2)

        def forward(self, x):
            y, _ = self.lstm(torch.tanh(x))
            return self.head(y[:, SEQ - 1])

    mod = check(Classifier(), (sequence(batch_first=True),), target)
    assert scan_calls(mod) == ["lstm_forward_scan"]
    assert "R.matmul" in mod["main"].script()


def test_lowering_options(target):
    """``options`` reach the layer functions: the legacy lowering (libm activations, state
    copies after the scan) computes the same."""
    torch.manual_seed(9)
    model = torch.nn.LSTM(INPUT, HIDDEN, bidirectional=True).eval()
    args = (sequence(),)
    mod = from_exported_program(export(model, args), options=LoweringOptions.legacy())
    for name in scan_calls(mod):
        assert '"fast_math": false' in str(mod[mod.get_global_var(name)].attrs[LAYER_ATTR])
    with torch.no_grad():
        want = flat(model(*args))
    for got, expected in zip(run(mod, target, args), want, strict=True):
        np.testing.assert_allclose(got, expected, **TOL)


def test_dropout_in_eval_mode(target):
    torch.manual_seed(6)
    check(torch.nn.LSTM(INPUT, HIDDEN, num_layers=2, dropout=0.5), (sequence(),), target)


def test_unbatched_input(target):
    """A 2-D input: nn.GRU adds and removes the batch axis around the aten op."""
    torch.manual_seed(7)
    check(torch.nn.GRU(INPUT, HIDDEN, num_layers=2), (torch.rand(SEQ, INPUT),), target)


@pytest.mark.parametrize(
    "kind, layers",
    [("lstm", 1), pytest.param("gru", 2, marks=pytest.mark.slow)],
    ids=["lstm", "gru-2layers"],
)
def test_long_sequence(kind, layers, target):
    """512 steps both ways (TVM_NUM_THREADS=2, tests/conftest.py): errors stay within
    tolerance. Most of the time is torch: export and its decomposition pass trace the
    aten op's Python decomposition step by step (a GRU, 2 layers: about 20 s)."""
    torch.manual_seed(8)
    check(KINDS[kind](num_layers=layers, bidirectional=True), (sequence(512),), target)


def test_not_unrolled():
    """main's size does not grow with the sequence: one call_tir per layer and direction,
    of a function holding one scan (a serial time loop)."""
    model = torch.nn.LSTM(INPUT, HIDDEN, num_layers=2, bidirectional=True).eval()
    short, long = (from_exported_program(export(model, (sequence(n),))) for n in (4, 64))
    assert bindings(short) == bindings(long)
    assert len(scan_calls(long)) == 4
    for name in scan_calls(long):
        (nest,) = find_scans(long[long.get_global_var(name)])
        assert nest.loop.extent == 64


def bindings(mod: tvm.IRModule) -> int:
    return sum(len(block.bindings) for block in mod["main"].body.blocks)


def test_identical_layers_share_a_function():
    """Layers 1-3 of a 4-layer LSTM (input width = hidden) have one function per direction;
    layer 0 (input width 3) its own."""
    model = torch.nn.LSTM(INPUT, HIDDEN, num_layers=4, bidirectional=True).eval()
    mod = from_exported_program(export(model, (sequence(),)))
    calls = scan_calls(mod)
    assert len(calls) == 8 and len(set(calls)) == 4
    spec = LayerSpec("gru", SEQ, BATCH, INPUT, HIDDEN)
    assert layer_prim_func(spec, LoweringOptions()) is layer_prim_func(spec, LoweringOptions())


def test_fusion_leaves_scans_alone(target):
    """After Relax's legalisation and fusion passes main still calls the scan functions,
    unchanged and still marked opaque (unmarked, AnnotateTIROpPattern calls them 4,
    kOutEWiseFusable: a candidate for FuseOps to fuse elementwise consumers into)."""
    model = torch.nn.GRU(INPUT, HIDDEN, num_layers=2)
    mod = from_exported_program(export(model.eval(), (sequence(),)))
    passes = relax.backend.cpu_generic.pipeline.legalize_passes(target)
    with target:
        lowered = tvm.transform.Sequential(passes)(mod)
    assert scan_calls(lowered) == scan_calls(mod) == ["gru_forward_scan", "gru_forward_scan1"]
    for name in scan_calls(mod):
        func = lowered[lowered.get_global_var(name)]
        assert int(func.attrs["op_pattern"]) == OPAQUE
        tvm.ir.assert_structural_equal(func, mod[mod.get_global_var(name)])


# Refusals: a ScanLoweringError naming the node and the fix, before any IR is built.


def test_training_mode_dropout_refused():
    model = torch.nn.LSTM(INPUT, HIDDEN, num_layers=2, dropout=0.5).train()
    with pytest.raises(ScanLoweringError, match=r"'lstm'.*dropout.*model\.eval\(\)"):
        from_exported_program(export(model, (sequence(),)))


def test_float64_refused():
    model = torch.nn.GRU(INPUT, HIDDEN).double().eval()
    with pytest.raises(ScanLoweringError, match=r"'gru'.*float64.*\.float\(\)"):
        from_exported_program(export(model, (sequence().double(),)))


def test_symbolic_batch(target):
    """A batch that torch.export keeps symbolic stays so: one module serves every batch.
    (torch.export specialises the length: scan_tir.relax.export keeps it symbolic too,
    tests/test_relax_export.py.)"""
    torch.manual_seed(10)
    model = torch.nn.RNN(INPUT, HIDDEN).eval()
    ep = export(model, (sequence(),), dynamic_shapes={"input": {1: Dim("batch", min=2)}})
    vm = relax.VirtualMachine(tvm.compile(from_exported_program(ep), target=target), tvm.cpu())
    for batch in (2, 5):
        x = torch.rand(SEQ, batch, INPUT) * 2 - 1
        with torch.no_grad():
            want = flat(model(x))
        got = vm["main"](tvm.runtime.tensor(x.numpy()))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), w, **TOL)


def test_unknown_rnn_variant_refused():
    """An LSTM cell kept whole (no decomposition) has no converter: named, not an assert."""
    ep = export(torch.nn.LSTMCell(INPUT, HIDDEN).eval(), (torch.rand(BATCH, INPUT),))
    with pytest.raises(ScanLoweringError, match=r"lstm_cell.*custom_convert_map"):
        from_exported_program(ep, run_ep_decomposition=False)


def test_packed_sequence_refused():
    """torch.export itself refuses pack_padded_sequence today; should a graph still hold
    the packed overload, it is named."""
    graph = torch.fx.Graph()
    data, sizes, h, w = (graph.placeholder(n) for n in ("data", "batch_sizes", "h", "w"))
    args = (data, sizes, [h, h], [w, w], False, 1, 0.0, False, False)
    graph.call_function(torch.ops.aten.lstm.data, args)
    with pytest.raises(ScanLoweringError, match=r"packed sequences"):
        check_rnn_nodes(graph.nodes, {})
