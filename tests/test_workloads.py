"""The workload zoo: every recurrence lowered, built and run against its numpy reference and
PyTorch's module with the same weights; at 1024+ steps on 2 threads; tuned through
``scan_space`` with every record replayed and checked; sizes and workload tags."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tuning import tune_and_replay
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from util import ATOL, RTOL, assert_close, block_names, compile_func, outputs, run
from workloads import SMALL, check_long_sequence, with_seq

import scan_tir
from scan_tir.tune.symbolic import specialize
from scan_tir.workloads import CONFIGS, RECURRENCES, get, workload_of


def test_every_recurrence_has_small_sizes():
    assert set(SMALL) == set(RECURRENCES)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_matches_numpy_and_pytorch(name):
    """PyTorch: nn.LSTM, nn.GRU, nn.RNN (tanh, relu), nn.LSTM(num_layers=2),
    nn.LSTM(bidirectional=True); a loop for the selective scan and minGRU."""
    workload = get(name, **SMALL[name])
    inputs = workload.input_arrays(seed=1)
    got, ref = outputs(workload, compile_func(workload.prim_func()), inputs)
    assert_close(got, ref)
    assert_close(got, workload.torch(inputs))
    # What benchmarks time (Recurrence.torch_model): a call that computes the first output.
    call = RECURRENCES[name].torch_model(*inputs, **workload.sizes)
    np.testing.assert_allclose(np.asarray(call()), ref[0], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("layers", [1, 3])
def test_stacked_lstm_other_depths_match_pytorch(layers):
    workload = get("lstm_stacked", **{**SMALL["lstm_stacked"], "layers": layers})
    inputs = workload.input_arrays(seed=2)
    assert len(inputs) == 1 + 4 * layers
    got, ref = outputs(workload, compile_func(workload.prim_func()), inputs)
    assert_close(got, ref)
    assert_close(got, workload.torch(inputs))


def test_references_disagree_when_a_weight_changes():
    """The comparisons can fail: a perturbed recurrent weight moves every reference."""
    for name in ("gru", "rnn_relu", "bilstm", "selective_scan", "mingru"):
        workload = get(name, **SMALL[name])
        inputs = workload.input_arrays(seed=1)
        ref = workload.numpy(inputs)[0]
        inputs[2] = inputs[2] * 1.5
        assert not np.allclose(workload.numpy(inputs)[0], ref, rtol=RTOL, atol=ATOL), name
        assert not np.allclose(workload.torch(inputs)[0], ref, rtol=RTOL, atol=ATOL), name


@pytest.mark.parametrize("name", sorted(SMALL))
def test_long_sequence_matches_numpy(name):
    """1024 steps on 2 threads (conftest): the state carried correctly through every step."""
    check_long_sequence(name, seed=3)


def test_input_projections_are_hoisted_out_of_the_scans():
    """No step reads the raw input Xs: its product with Wi runs once, before the scan."""
    for name in sorted(SMALL):
        func = get(name, **SMALL[name]).prim_func()
        if "Xs" not in [str(p.name) for p in func.params]:
            continue  # the selective scan reads x inside its step by design
        for nest in scan_tir.find_scans(func):
            read = {str(r.source.name) for r in nest.step.reads}
            assert read, (name, nest.name)
            assert "Xs" not in read, (name, nest.name)


@pytest.mark.parametrize("config", ["E", "A2", "Abi", "S", "M"])
def test_new_configs_convert(config):
    recurrence, sizes = CONFIGS[config]
    func = get(config).prim_func()
    assert s_tir.analysis.verify_well_formed(func)
    scans = {"A2": 2, "Abi": 2}.get(config, 1)
    assert len(scan_tir.find_scans(func)) == scans
    assert workload_of(func).name == get(recurrence, **sizes).name


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL))
def test_tuned_records_replay_correct(name, builder, target, tmp_path):
    """A few candidates of scan_space (tuning.tune_and_replay), each record replayed at
    1024 steps: scan invariants kept, outputs equal numpy's."""
    workload = get(name, **with_seq(name, 1024, 2))
    space = scan_tir.scan_space(target)
    tune_and_replay(workload, workload.prim_func(), space, builder, tmp_path, target)


def test_tvm_inline_into_a_step_is_still_ill_formed():
    """TVM 0.27's compute_inline of a step's input into the step leaves the step's own
    temporaries in the step's and the scan's regions (meta_rules/step_inputs.py). When this
    fails, TVM is fixed, and KeepStepInputs can go."""
    sch = s_tir.Schedule(get("lstm", **SMALL["lstm"]).prim_func())
    sch.compute_inline(sch.get_sblock("Xi2h_bias"))
    assert not s_tir.analysis.verify_well_formed(sch.mod["main"], assert_mode=False)


@pytest.mark.parametrize("name", ["lstm", "bilstm"])
def test_design_spaces_keep_step_inputs_and_are_well_formed(name, target):
    """Regression: AutoInline inlined topi's Xi2h_bias into the step's gates, and every LSTM
    candidate of the scan space was ill-formed S-TIR (built and measured nonetheless)."""
    func = get(name, **SMALL[name]).prim_func()
    ctx = ms.TuneContext(
        mod=tvm.IRModule({"main": func}),
        target=target,
        space_generator=scan_tir.scan_space(target),
        task_name="t",
    )
    spaces = ctx.generate_design_space()
    assert spaces
    for space in spaces:
        scheduled = space.mod["main"]
        assert s_tir.analysis.verify_well_formed(scheduled)
        names = set(block_names(scheduled))
        assert {n for n in names if n.startswith("Xi2h_bias")}, "a step input was inlined"


@pytest.mark.parametrize(
    "name, sizes, match",
    [
        ("gru", {"seq": 0}, "positive integers"),
        ("bilstm", {"hidden": -1}, "positive integers"),
        ("lstm_stacked", {"layers": 0}, "positive integers"),
        ("mingru", {"seq": 2.5}, "positive integers"),
        ("selective_scan", {"hidden": 4}, "unknown size"),
        ("rnn_tanh", {"layers": 2}, "unknown size"),
    ],
)
def test_bad_sizes_raise(name, sizes, match):
    with pytest.raises(scan_tir.ScanLoweringError, match=match):
        get(name, **sizes)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_workload_of_round_trip(name):
    workload = get(name, **SMALL[name])
    back = workload_of(workload.prim_func())
    assert back is not None and back.recurrence is RECURRENCES[name]
    assert back.sizes == workload.sizes and back.options == workload.options


@pytest.mark.parametrize("config", ["E", "S"])
def test_untagged_function_has_no_workload(config):
    """The tag is the only way back: a function lowered without the zoo, even a config's
    very function, is nobody's workload (no structural guess)."""
    assert workload_of(scan_tir.create_prim_func(get(config).tensors())) is None


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_a_symbolic_case_is_what_the_function_computes_at_its_sizes(name):
    """``symbolic_case`` at some sizes: inputs for the symbolic function fixed there and
    the numpy reference of them, which the untuned function meets within ``dynamic``'s
    check (1e-4), fast activations included."""
    zoo = get(name, seq=8, batch=2, input=24, hidden=16)
    func = zoo.symbolic_func(["batch", "seq"])
    inputs, want = zoo.symbolic_case()({"batch": 3, "seq": 5})
    assert inputs[0].shape == (5, 3, 24)
    lib = compile_func(specialize(func, {"batch": 3, "seq": 5}))
    got = run(lib, inputs, [w.shape for w in want])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
