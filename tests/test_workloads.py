"""The workload zoo: every recurrence lowered, built and run against its numpy reference and
PyTorch's module with the same weights; at 1024+ steps on 2 threads; tuned through
``scan_space`` with every record replayed and checked; sizes and workload tags."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from util import compile_func, run

import scan_tir
from scan_tir.lower.vocabulary import expected_scans
from scan_tir.tune.replay import replay
from scan_tir.tuning import build_candidate
from scan_tir.workloads import CONFIGS, RECURRENCES, get, workload_of

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})

# Small sizes with batch > 1, per recurrence.
SMALL: dict[str, dict[str, int]] = {
    "lstm": {"seq": 9, "batch": 3, "input": 5, "hidden": 4},
    "gru": {"seq": 9, "batch": 3, "input": 5, "hidden": 4},
    "rnn_tanh": {"seq": 9, "batch": 3, "input": 5, "hidden": 4},
    "rnn_relu": {"seq": 9, "batch": 3, "input": 5, "hidden": 4},
    "lstm_stacked": {"seq": 9, "batch": 3, "input": 5, "hidden": 4, "layers": 2},
    "bilstm": {"seq": 9, "batch": 3, "input": 5, "hidden": 4},
    "selective_scan": {"seq": 9, "batch": 3, "d_model": 5, "d_state": 4},
    "mingru": {"seq": 9, "batch": 3, "input": 5, "hidden": 4},
}
RTOL, ATOL = 1e-4, 1e-5


def _with_seq(name: str, seq: int, batch: int) -> dict[str, int]:
    """SMALL[name] at another length and batch (feature sizes stay small)."""
    return {**SMALL[name], "seq": seq, "batch": batch}


def _outputs(workload, lib, inputs):
    """Run ``lib`` on ``inputs``; the outputs take the numpy reference's shapes."""
    ref = workload.numpy(inputs)
    return run(lib, inputs, [r.shape for r in ref]), ref


def _assert_close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def _blocks(func) -> list:
    found: list = []
    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, found.append))
    return found


def test_every_recurrence_has_small_sizes():
    assert set(SMALL) == set(RECURRENCES)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_matches_numpy_and_pytorch(name):
    """PyTorch: nn.LSTM, nn.GRU, nn.RNN (tanh, relu), nn.LSTM(num_layers=2),
    nn.LSTM(bidirectional=True); a loop for the selective scan and minGRU."""
    workload = get(name, **SMALL[name])
    inputs = workload.input_arrays(seed=1)
    got, ref = _outputs(workload, compile_func(workload.prim_func()), inputs)
    _assert_close(got, ref)
    _assert_close(got, workload.torch(inputs))
    # What benchmarks time (experiments/tune_zoo.py): a call that computes the first output.
    call = RECURRENCES[name].torch_model(*inputs, **workload.sizes)
    np.testing.assert_allclose(np.asarray(call()), ref[0], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("layers", [1, 3])
def test_stacked_lstm_other_depths_match_pytorch(layers):
    workload = get("lstm_stacked", **{**SMALL["lstm_stacked"], "layers": layers})
    inputs = workload.input_arrays(seed=2)
    assert len(inputs) == 1 + 4 * layers
    got, ref = _outputs(workload, compile_func(workload.prim_func()), inputs)
    _assert_close(got, ref)
    _assert_close(got, workload.torch(inputs))


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


def check_long_sequence(name: str, seed: int, **lowering: bool) -> None:
    """Recurrence ``name`` at 1024 steps, batch 2, lowered with ``lowering``
    (``Workload.prim_func``'s options): scan invariants kept, outputs equal to numpy's."""
    workload = get(name, **_with_seq(name, 1024, 2))
    func = workload.prim_func(**lowering)
    expected = expected_scans(tvm.IRModule({"main": func}))["main"]
    assert scan_tir.scan_violations(func, expected) == []
    inputs = workload.input_arrays(seed=seed)
    got, ref = _outputs(workload, compile_func(func), inputs)
    assert np.abs(ref[0][-1]).max() > 1e-2, "the reference died out; the test would be weak"
    _assert_close(got, ref)


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


@pytest.fixture(scope="module")
def builder() -> ms.builder.LocalBuilder:
    """One builder for every tuning test: its construction runs a worker (sanity check).
    It builds with scan_tir.tuning.build_candidate (MetaSchedule's build without the 15-20 s
    import of tensor_intrin in every fresh worker). One worker: two, each importing TVM on
    these 2 busy cores, were slower for 4 candidates.
    """
    return ms.builder.LocalBuilder(max_workers=1, f_build=build_candidate)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_tuned_records_replay_correct(name, builder, tmp_path):
    """A few candidates of scan_space, sampled and mutated once (small population, random
    cost model: the stock 2048 population and XGBoost took 36 s of search per workload);
    each record replayed at 1024 steps: scan invariants kept, outputs equal numpy's."""
    workload = get(name, **_with_seq(name, 1024, 2))
    tune_and_replay(workload, workload.prim_func(), scan_tir.scan_space(TARGET), builder, tmp_path)


def tune_and_replay(workload, func, space, builder, work_dir, trials: int = 4) -> None:
    """Tune ``func`` on ``space`` for a few trials, then replay every record at its length:
    scan invariants kept, outputs equal to numpy's."""
    db = ms.tune_tir(
        tvm.IRModule({"main": func}),
        TARGET,
        str(work_dir),
        max_trials_global=trials,
        num_trials_per_iter=trials,
        space=space,
        strategy=ms.search_strategy.EvolutionarySearch(population_size=32, genetic_num_iters=1),
        cost_model="random",
        builder=builder,
    )
    records = db.get_all_tuning_records()
    assert len(records) == trials, "tuning measured fewer candidates than asked"
    expected = expected_scans(tvm.IRModule({"main": func}))["main"]
    inputs = workload.input_arrays(seed=4)
    for record in records:
        scheduled = replay(record, func)
        assert scan_tir.scan_violations(scheduled, expected) == []
        got, ref = _outputs(workload, compile_func(scheduled), inputs)
        _assert_close(got, ref)


def test_tvm_inline_into_a_step_is_still_ill_formed():
    """TVM 0.27's compute_inline of a step's input into the step leaves the step's own
    temporaries in the step's and the scan's regions (meta_rules/step_inputs.py). When this
    fails, TVM is fixed, and KeepStepInputs can go."""
    sch = s_tir.Schedule(get("lstm", **SMALL["lstm"]).prim_func())
    sch.compute_inline(sch.get_sblock("Xi2h_bias"))
    assert not s_tir.analysis.verify_well_formed(sch.mod["main"], assert_mode=False)


@pytest.mark.parametrize("name", ["lstm", "bilstm"])
def test_design_spaces_keep_step_inputs_and_are_well_formed(name):
    """Regression: AutoInline inlined topi's Xi2h_bias into the step's gates, and every LSTM
    candidate of the scan space was ill-formed S-TIR (built and measured nonetheless)."""
    func = get(name, **SMALL[name]).prim_func()
    ctx = ms.TuneContext(
        mod=tvm.IRModule({"main": func}),
        target=TARGET,
        space_generator=scan_tir.scan_space(TARGET),
        task_name="t",
    )
    spaces = ctx.generate_design_space()
    assert spaces
    for space in spaces:
        scheduled = space.mod["main"]
        assert s_tir.analysis.verify_well_formed(scheduled)
        names = {str(b.name_hint) for b in _blocks(scheduled)}
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
    assert back.sizes == workload.sizes
    assert workload_of(workload.prim_func(tag=False)) is None  # not a config's sizes


def test_untagged_config_found_structurally():
    assert workload_of(get("E").prim_func(tag=False)).name == get("E").name
    assert workload_of(get("S").prim_func(tag=False)).name == get("S").name
