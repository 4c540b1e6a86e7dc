"""``LoweringOptions`` and where they travel: config-name suffixes, ``workloads.get``, the
workload tag (so databases say which lowering they hold), and ``scan-tir tune``'s flags."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
import tvm_ffi
from tvm import te

import scan_tir
from scan_tir import LoweringOptions, ScanLoweringError, cli
from scan_tir.tune import TuneResult
from scan_tir.workloads import CONFIGS, config_name, get, parse_config, workload_of
from scan_tir.workloads.base import WORKLOAD_ATTR

FAST = LoweringOptions(fast_math=True, copies_in_step=False, merge_updates=False)
ALL = [LoweringOptions(*flags) for flags in itertools.product([False, True], repeat=3)]
SMALL_LSTM = {"seq": 4, "batch": 1, "input": 3, "hidden": 4}

# --- the options themselves -----------------------------------------------------------------


def test_default_is_the_fast_path_and_legacy_is_all_off():
    assert LoweringOptions() == LoweringOptions(
        fast_math=True, copies_in_step=True, merge_updates=False
    )
    assert LoweringOptions.legacy() == LoweringOptions(False, False, False)
    assert LoweringOptions.names() == ("fast_math", "copies_in_step", "merge_updates")
    with pytest.raises(dataclasses.FrozenInstanceError):
        LoweringOptions().fast_math = False  # type: ignore[misc]


@pytest.mark.parametrize(
    "options, label",
    [
        (LoweringOptions(), "default"),
        (LoweringOptions.legacy(), "legacy"),
        (FAST, "fast_math"),
        (LoweringOptions(merge_updates=True), "fast_math+copies_in_step+merge_updates"),
        (LoweringOptions(fast_math=False), "copies_in_step"),
    ],
)
def test_label(options, label):
    assert options.label == label


def test_dict_round_trip_and_errors():
    for options in ALL:
        assert LoweringOptions.from_dict(options.to_dict()) == options
    assert LoweringOptions.from_dict({}) == LoweringOptions()  # missing: the default
    assert LoweringOptions.from_dict({"fast_math": False}) == LoweringOptions(fast_math=False)
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['tile'\].*fast_math"):
        LoweringOptions.from_dict({"fast_math": True, "tile": True})


def _scan_graph():
    x = te.placeholder((8, 4), name="X")
    s = te.placeholder((9, 4), name="s")
    init = te.compute((1, 4), lambda _, i: 0.0, name="init")
    update = te.compute((9, 4), lambda t, i: te.tanh(s[t - 1, i] + x[t - 1, i]), name="update")
    scan = te.scan(init, update, s, name="rnn")
    return [x, te.compute((8, 4), lambda t, i: scan[t + 1, i], name="out")]


def test_create_prim_func_defaults_to_the_default_options():
    graph = _scan_graph()
    default = scan_tir.create_prim_func(graph)
    assert tvm_ffi.structural_equal(default, scan_tir.create_prim_func(graph, options=None))
    assert tvm_ffi.structural_equal(
        default, scan_tir.create_prim_func(graph, options=LoweringOptions())
    )
    # Each option changes this function (copies_in_step: the copy ``out``; fast_math: tanh).
    for off in ("fast_math", "copies_in_step"):
        other = dataclasses.replace(LoweringOptions(), **{off: False})
        assert not tvm_ffi.structural_equal(
            default, scan_tir.create_prim_func(graph, options=other)
        ), off


def test_a_graph_without_scans_ignores_the_options():
    a = te.placeholder((4,), name="a")
    b = te.compute((4,), lambda i: te.exp(a[i]), name="b")
    theirs = te.create_prim_func([a, b])
    for options in ALL:
        assert tvm_ffi.structural_equal(scan_tir.create_prim_func([a, b], options=options), theirs)


# --- config names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [
        ("A", ("A", None)),
        ("a", ("A", None)),
        ("A-FAST", ("A", FAST)),
        ("a-fast-instep", ("A", LoweringOptions(fast_math=True, copies_in_step=True))),
        ("D-INSTEP-FAST", ("D", LoweringOptions(fast_math=True, copies_in_step=True))),
        ("B-MERGED", ("B", LoweringOptions(False, False, True))),
        ("abi-legacy", ("Abi", LoweringOptions.legacy())),
    ],
)
def test_parse_config(name, expected):
    assert parse_config(name) == expected


@pytest.mark.parametrize(
    "name, match",
    [
        ("Z-FAST", r"unknown config 'Z'"),
        ("A-FASTER", r"suffixes are -LEGACY alone.*got \['FASTER'\]"),
        ("A-LEGACY-FAST", r"suffixes are -LEGACY alone.*got \['LEGACY', 'FAST'\]"),
    ],
)
def test_parse_config_errors(name, match):
    with pytest.raises(ScanLoweringError, match=match):
        parse_config(name)


@pytest.mark.parametrize("base", sorted(CONFIGS))
def test_config_name_round_trips(base):
    assert config_name(base, None) == base
    assert config_name(base, LoweringOptions.legacy()) == f"{base}-LEGACY"
    assert config_name(base, LoweringOptions()) == f"{base}-FAST-INSTEP"
    for options in ALL:
        assert parse_config(config_name(base, options)) == (base, options)


def test_get_takes_options_from_the_suffixes_or_the_argument():
    assert get("A").options == LoweringOptions()
    assert get("A-FAST").options == FAST
    assert get("A", LoweringOptions.legacy()).options == LoweringOptions.legacy()
    assert get("A-FAST", FAST).options == FAST  # the same twice: no conflict
    assert get("lstm", FAST, **SMALL_LSTM).options == FAST
    assert get("A-FAST").sizes == get("A").sizes == CONFIGS["A"][1]


def test_get_errors():
    with pytest.raises(ScanLoweringError, match=r"'A-FAST' names its options.*not both"):
        get("A-FAST", LoweringOptions())
    with pytest.raises(ScanLoweringError, match=r"fixes its sizes.*'lstm'"):
        get("A-FAST", seq=3)
    with pytest.raises(ScanLoweringError, match=r"unknown workload 'A-TURBO'"):
        get("A-TURBO")


def test_workload_name_says_options_other_than_the_default():
    assert get("lstm", **SMALL_LSTM).name == "lstm(seq=4, batch=1, input=3, hidden=4)"
    legacy = get("lstm", LoweringOptions.legacy(), **SMALL_LSTM)
    assert legacy.name == "lstm(seq=4, batch=1, input=3, hidden=4) [legacy]"
    assert get("lstm", FAST, **SMALL_LSTM).name.endswith(" [fast_math]")


# --- the workload tag -----------------------------------------------------------------------


@pytest.mark.parametrize("options", ALL, ids=lambda o: o.label)
def test_the_tag_round_trips_with_the_options(options):
    workload = get("lstm", options, **SMALL_LSTM)
    func = workload.prim_func()
    assert json.loads(str(func.attrs[WORKLOAD_ATTR])) == {
        "name": "lstm",
        "sizes": SMALL_LSTM,
        "options": options.to_dict(),
    }
    assert workload_of(func) == workload


def test_prim_func_options_replace_the_workloads_own():
    workload = get("lstm", **SMALL_LSTM)
    func = workload.prim_func(LoweringOptions.legacy())
    assert workload_of(func) == get("lstm", LoweringOptions.legacy(), **SMALL_LSTM)
    # Two lowerings of one workload are two functions, so two keys of a tuning database.
    assert not tvm_ffi.structural_equal(func, workload.prim_func())


def test_a_tag_without_options_is_the_legacy_lowering():
    func = get("lstm", **SMALL_LSTM).prim_func()
    spec = {"name": "lstm", "sizes": SMALL_LSTM}
    old = func.with_attr(WORKLOAD_ATTR, json.dumps(spec))
    assert workload_of(old).options == LoweringOptions.legacy()
    bad = func.with_attr(WORKLOAD_ATTR, json.dumps({**spec, "options": {"unroll": True}}))
    with pytest.raises(ValueError, match="unknown option"):
        workload_of(bad)


# --- scan-tir tune --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["lstm"], LoweringOptions()),
        (["lstm", "--legacy"], LoweringOptions.legacy()),
        (["lstm", "--no-fast-math"], LoweringOptions(fast_math=False)),
        (["lstm", "--legacy", "--fast-math"], FAST),
        (["lstm", "--no-copies-in-step", "--merge-updates"], LoweringOptions(True, False, True)),
        (["A"], LoweringOptions()),
        (["A-FAST"], FAST),
        (["A-FAST", "--copies-in-step"], LoweringOptions(fast_math=True, copies_in_step=True)),
        (["A-FAST-INSTEP", "--legacy"], LoweringOptions.legacy()),
        (["A-MERGED", "--no-merge-updates"], LoweringOptions.legacy()),
    ],
)
def test_tune_flags_choose_the_options(argv, expected, tmp_path, monkeypatch, capsys):
    """What ``scan-tir tune`` hands to ``scan_tir.tune.tune`` (stubbed: nothing is tuned)."""
    tuned = []

    def fake_tune(workload, work_dir, trials, **_):
        tuned.append(workload)
        return TuneResult(work_dir, 0, trials, 0, 0.0)

    monkeypatch.setattr("scan_tir.tune.tune", fake_tune)
    sizes = [] if argv[0] != "lstm" else ["--sizes", "seq=4,batch=1,input=3,hidden=4"]
    code = cli.main(["tune", *argv, *sizes, "--trials", "1", "-d", str(tmp_path)])
    assert code == cli.OK, capsys.readouterr().err
    (workload,) = tuned
    assert workload.options == expected
    assert workload.name in capsys.readouterr().out
