"""``scan_tir.tune.linear_forms`` / ``tune_forms``: a linear recurrence is offered in its
chunked forms beside the sequential one, each tuned, the fastest kept; any other
recurrence has its one form."""

from __future__ import annotations

import numpy as np
import pytest
from util import assert_close, compile_func, outputs

import scan_tir
from scan_tir.tune import linear_forms, tune_forms
from scan_tir.workloads import get


def test_a_linear_recurrence_is_offered_chunked():
    w = get("selective_scan", seq=40, batch=1, d_model=8, d_state=4)
    forms = linear_forms(w.tensors(), chunks=(8, 16))
    assert list(forms) == ["sequential", "chunked 8", "chunked 16"]
    inputs = w.input_arrays(seed=1)
    for func in forms.values():
        got, ref = outputs(w, compile_func(func), inputs)
        assert_close(got, ref)


def test_weights_are_layout_free_in_every_form():
    w = get("mingru", seq=16, batch=1, input=8, hidden=8)
    for func in linear_forms(w.tensors(), chunks=(4,), weights=("Wz", "Wh")).values():
        assert sorted(int(i) for i in func.attrs["layout_free_buffers"]) == [1, 2]


def test_an_lstm_has_one_form():
    w = get("lstm", seq=8, batch=1, input=8, hidden=8)
    assert list(linear_forms(w.tensors())) == ["sequential"]


@pytest.mark.slow
def test_tune_forms_keeps_the_fastest_of_the_tuned_forms(tmp_path, target):
    w = get("mingru", seq=64, batch=1, input=8, hidden=16)
    result = tune_forms(w.tensors(), tmp_path, 2, target=target, chunks=(16,), population=8)
    assert set(result.latency_ms) == {"sequential", "chunked 16"}
    assert (tmp_path / "chunked_16" / "database_tuning_record.json").exists()
    ran = {k: v for k, v in result.latency_ms.items() if not np.isnan(v)}
    assert result.best == min(ran, key=ran.get)
    assert scan_tir.find_scans(result.fastest)
    got, ref = outputs(w, compile_func(result.fastest), w.input_arrays(seed=2))
    assert_close(got, ref)
