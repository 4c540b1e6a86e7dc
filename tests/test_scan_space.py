"""scan_space with plain ms.tune_tir: a few trials, then every record replayed and checked
against numpy at long sequences on 2 threads, with the scan invariants."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
import tvm_ffi
from tuning import quick_search, tune_records
from tvm import s_tir, te
from tvm.s_tir import meta_schedule as ms
from tvm.topi.testing import lstm_python
from util import assert_scans_kept, compile_func, run
from workloads import gru, gru_numpy_projected, lstm

import scan_tir
from scan_tir.db.replay import replay

RNG = np.random.default_rng(11)


@pytest.mark.slow
def test_tuned_lstm_records_replay_correct(target, tmp_path):
    seq, inp, hidden = 1024, 8, 16
    func = scan_tir.layout_free(scan_tir.create_prim_func(lstm(seq, inp, hidden)), ["Wi", "Wh"])
    _, records = tune_records(func, tmp_path, target, **quick_search())
    values = [
        (RNG.standard_normal(shape) * 0.3).astype("float32")
        for shape in [(seq, 1, inp), (4 * hidden, inp), (4 * hidden, hidden)]
    ]
    ref_h, ref_c = lstm_python(*values)
    for record in records:
        scheduled = replay(record, func)
        assert_scans_kept(scheduled, func)
        got_h, got_c = run(compile_func(scheduled), values, [(seq, 1, hidden)] * 2)
        np.testing.assert_allclose(got_h, ref_h, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(got_c, ref_c, rtol=1e-4, atol=2e-5)


@pytest.mark.slow
def test_symbolic_gru_tuned_at_one_length_serves_all(target, tmp_path):
    """Tune a fixed-length copy, apply the best schedule to the symbolic module, check it
    from 1 to 3000 steps. The GRU takes its input already projected and returns its state,
    so no loop outside the scan has the symbolic extent: every record replays as it is."""
    hidden = 16
    seq = te.var("seq")
    func = scan_tir.create_prim_func(gru(seq, 0, hidden, copy_out=False, project_input=False))
    representative = scan_tir.specialize(func, {"seq": 64})
    db, records = tune_records(representative, tmp_path, target, **quick_search())
    wh = (RNG.standard_normal((3 * hidden, hidden)) * 0.3).astype("float32")
    bh = (RNG.standard_normal(3 * hidden) * 0.1).astype("float32")

    def check(scheduled, lengths):
        lib = compile_func(scheduled)
        for length in lengths:
            xw = RNG.standard_normal((length, 3 * hidden)).astype("float32")
            (got,) = run(lib, [xw, wh, bh], [(length + 1, hidden)])
            ref = gru_numpy_projected(xw, wh, bh)
            np.testing.assert_allclose(got[1:], ref, rtol=1e-4, atol=2e-5)

    check(scan_tir.apply_best(db, representative, func, target), (1, 1024, 3000))
    # Every candidate measured, not only the best: each keeps the scan, and each that TVM's
    # LLVM codegen accepts at symbolic length computes right (some vectorised ones it
    # rejects, "Instruction does not dominate all uses"; apply_best skips those).
    built = 0
    for record in records:
        scheduled = replay(record, func)
        assert_scans_kept(scheduled, func)
        try:
            compile_func(scheduled)
        except tvm.error.InternalError as err:
            assert "LLVM module verification failed" in str(err)
            continue
        check(scheduled, (1024,))
        built += 1
    assert built >= 1


@pytest.mark.slow
def test_symbolic_lstm_with_its_hoisted_product_serves_all(target, tmp_path):
    """topi's LSTM projects the whole input before the scan, one product over seq x batch
    that the tuner tiles with factors of the representative length; apply_best keeps the
    tiles and lets the outer loop cover any length (replay_sized). The best records,
    checked against numpy on 2 threads from 1 step to 2048, lengths no factor divides."""
    inp, hidden = 8, 16
    func = scan_tir.layout_free(
        scan_tir.create_prim_func(lstm(te.var("seq"), inp, hidden)), ["Wi", "Wh"]
    )
    representative = scan_tir.specialize(func, {"seq": 48})
    db, _ = tune_records(representative, tmp_path, target, **quick_search())
    scheduled = scan_tir.apply_best(db, representative, func, target)
    # The product's rows are padded to whole tiles (pad_rows): no tile of it is partial.
    assert _predicated(scheduled, "Xi2h") == []
    lib = compile_func(scheduled)
    for length in (1, 17, 300, 2048):
        values = [
            (RNG.standard_normal(shape) * 0.3).astype("float32")
            for shape in [(length, 1, inp), (4 * hidden, inp), (4 * hidden, hidden)]
        ]
        ref_h, ref_c = lstm_python(*values)
        got_h, got_c = run(lib, values, [(length, 1, hidden)] * 2)
        np.testing.assert_allclose(got_h, ref_h, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(got_c, ref_c, rtol=1e-4, atol=2e-5)


def _predicated(func: tvm.tirx.PrimFunc, prefix: str) -> list[str]:
    """Blocks named ``prefix...`` whose realize carries a predicate."""
    found: list[str] = []

    def visit(realize: s_tir.SBlockRealize) -> None:
        name = str(realize.block.name_hint)
        if name.startswith(prefix) and not tvm.sym.Analyzer().can_prove(realize.predicate):
            found.append(name)

    tvm_ffi.structural_walk(func.body, (s_tir.SBlockRealize, visit))
    return found


def test_apply_best_without_a_record_is_a_clear_error(target, tmp_path):
    func = scan_tir.create_prim_func(gru(te.var("seq"), 4, 4))
    representative = scan_tir.specialize(func, {"seq": 8})
    empty = ms.database.JSONDatabase(work_dir=str(tmp_path))
    with pytest.raises(scan_tir.ScanLoweringError, match="no record"):
        scan_tir.apply_best(empty, representative, func, target)
    with pytest.raises(scan_tir.ScanLoweringError, match="no symbolic size 'length'"):
        scan_tir.specialize(func, {"length": 8})


def test_the_space_registers_the_cpu_intrinsics_only_in_a_fresh_process():
    """MetaSchedule's first TuneContext imports every target's tensor intrinsics; after
    scan_space it finds the CPU ones registered and leaves CUDA's unparsed, and another
    target's can still be imported by name (Hexagon's: CUDA's would take the longest)."""
    code = (
        "import sys\n"
        "from tvm.s_tir import TensorIntrin, meta_schedule as ms\n"
        "import scan_tir\n"
        "target = scan_tir.tune.default_target()\n"
        "space = scan_tir.scan_space(target)\n"
        "func = scan_tir.workloads.get('rnn_tanh', seq=2, batch=1, input=2, hidden=2)"
        ".prim_func()\n"
        "ms.TuneContext(mod=func, target=target, space_generator=space)\n"
        "print('cuda' in sys.modules['tvm.s_tir.tensor_intrin'].__dict__,"
        " 'tvm.s_tir.tensor_intrin.cuda' in sys.modules)\n"
        "TensorIntrin.get('dot_16x4_vnni')\n"
        "import tvm.s_tir.tensor_intrin.hexagon\n"
        "TensorIntrin.get('dot_32x4_u8u8i32_vrmpy')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["False", "False"]
