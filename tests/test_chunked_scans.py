"""Chunked (associative) lowering of linear scans (issue 18): recognition from the TE
update expressions, the rewrite into chunk-local, carry and chunked passes, and what is
refused and why.

Tolerance. In float32 one step of h = a * h + b rounds twice, each time by at most
u = eps / 2 relative, on values bounded by M = max|h| + max|b|; with |a| <= 1 no earlier
error grows, so after n steps the sequential form is within 2 n u M of the exact result.
The chunked form rounds more often: the chunk-local state (2 per step, on values up to
2 M, since hl = h[t] - P h[start]), the decay product P (1 per step, relative, on a carry
up to M: the product of up to L factors), the carry (2 per chunk, so at most 2 per step,
on values up to 2 M), and each chunk's rerun from its carry adds at most L steps of 2. So
|chunked - exact| <= (9 n + 2 L) u M, and |chunked - sequential| <= (11 n + 2 L) u M. A
wrong chunk boundary or carry is off by O(M). M, the scale, is |b| / (1 - |a|) at worst:
the inputs keep |a| <= 1, as Mamba's exp(delta * A) with A < 0 does. The zoo's selective
scan has no state output to measure M on; its y, a decaying recurrence contracted with C,
keeps the project's float32-vs-float64 tolerance (util.RTOL, ATOL), as the sequential
lowering does at every length. A decay product flushed to zero below the smallest normal
number (chunked_scans.py) moves a state by less than FLT_MIN * M, far inside the bound.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import te
from util import assert_close, compile_func, run

import scan_tir
from scan_tir.errors import ScanLoweringError
from scan_tir.lower import chunk_marked, chunked, linear_form, linear_problem
from scan_tir.lower.te_rewrite import load, map_reads
from scan_tir.workloads import get

U = np.finfo(np.float32).eps / 2
LENGTHS = (1, 2, 7, 64, 1000, 8192)
CHUNKS = (1, 16, 64)
SHAPE = (2, 3)  # a 2-D state per step


def bound(n: int, chunk: int, scale: float, against_sequential: bool = False) -> float:
    """The rounding bound derived in the module docstring."""
    per_step = 11 if against_sequential else 9
    return (per_step * n + 2 * chunk) * U * scale


def scale_of(h: np.ndarray, b: np.ndarray | None = None) -> float:
    """M of the module docstring, max|h| + max|b|; where b is not at hand, |b[t]| =
    |h[t] - a h[t-1]| <= 2 max|h| since |a| <= 1."""
    h_max = np.abs(h).max()
    return h_max + (2 * h_max if b is None else np.abs(b).max())


def linear(n, attrs: dict | None = None) -> list[te.Tensor]:
    """h[t] = a[t-1] * h[t-1] + b[t-1] elementwise over a 2-D state, from an input init
    row: [a, b, h0, h] (h with its init row)."""
    a = te.placeholder((n, *SHAPE), name="a")
    b = te.placeholder((n, *SHAPE), name="b")
    h0 = te.placeholder((1, *SHAPE), name="h0")
    h = te.placeholder((n + 1, *SHAPE), name="h")
    new = te.compute(
        (n + 1, *SHAPE),
        lambda t, i, k: a[t - 1, i, k] * h[t - 1, i, k] + b[t - 1, i, k],
        name="h_new",
    )
    return [a, b, h0, scan_tir.scan(h0, new, h, name="linear", attrs=attrs)]


def linear_inputs(n: int, seed: int = 0) -> list[np.ndarray]:
    """a in (0.9, 1]: slow decay, so the carry matters over many chunks; b, h0 normal."""
    rng = np.random.default_rng(seed)
    arrays = [
        1 - 0.1 * rng.random((n, *SHAPE)),
        rng.standard_normal((n, *SHAPE)),
        rng.standard_normal((1, *SHAPE)),
    ]
    return [x.astype("float32") for x in arrays]


def linear_reference(a, b, h0) -> np.ndarray:
    """The recurrence in float64, from the float32 inputs."""
    h = [h0[0].astype("float64")]
    for t in range(a.shape[0]):
        h.append(a[t] * h[-1] + b[t])
    return np.stack(h)


def scan_names(func) -> list[str]:
    return [s.name for s in scan_tir.find_scans(func)]


@pytest.fixture(scope="module")
def sequential():
    """The hand-written scan lowered as it is, at a symbolic length."""
    return compile_func(scan_tir.create_prim_func(linear(te.var("seq"))))


# --- recognition -----------------------------------------------------------------------------


def test_zoo_linear_forms():
    """The selective scan's h is recurrent and its y rides along; minGRU's one state is
    recurrent: recognised from the expressions, A and B free of the states."""
    s = linear_form(get("selective_scan", seq=4).tensors()[-1].op.input_tensors[0])
    assert [r.state for r in s.recurrent] == [0] and s.outputs == (1,)
    assert [str(v) for v in s.recurrent[0].axis] == ["t", "b", "d", "n"]
    assert "exp" in str(s.recurrent[0].a)
    m = linear_form(get("mingru", seq=4).tensors()[-1].op.input_tensors[0])
    assert [r.state for r in m.recurrent] == [0] and m.outputs == ()
    for form, reads in ((s, {"delta", "A", "B", "x"}), (m, {"z", "candidate"})):
        (r,) = form.recurrent
        assert read_names(r.a) | read_names(r.b) == reads


def read_names(expr) -> set[str]:
    names: set[str] = set()

    def record(tensor, idx):
        names.add(tensor.op.name)
        return load(tensor, idx)

    map_reads([expr], record)
    return names


AFFINE = {
    # name: (update of h from x, g, h; numpy step)
    "lerp": (lambda x, g, h: h + g * (x - h), lambda x, g, h: h + g * (x - h)),
    "negated, divided": (lambda x, g, h: -(h / 2.0) * g + x, lambda x, g, h: -(h / 2) * g + x),
    "through a cast": (
        lambda x, g, h: (h.astype("float64") * g.astype("float64")).astype("float32") - x,
        lambda x, g, h: h * g - x,
    ),
}


@pytest.mark.parametrize("form", sorted(AFFINE))
def test_affine_forms(form):
    """Updates written other than A * h + B split into the same recurrence."""
    update, step = AFFINE[form]
    n = 50
    x = te.placeholder((n, 3), name="x")
    g = te.placeholder((n, 3), name="g")
    h = te.placeholder((n + 1, 3), name="h")
    h0 = te.compute((1, 3), lambda *_: 1.0, name="h0")
    new = te.compute(
        (n + 1, 3), lambda t, i: update(x[t - 1, i], g[t - 1, i], h[t - 1, i]), name="h_new"
    )
    out = scan_tir.scan(h0, new, h, name="affine")
    lib = compile_func(scan_tir.create_prim_func(chunked([x, g, out], 8)))
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((n, 3)).astype("float32")
    gv = rng.random((n, 3)).astype("float32")
    (got,) = run(lib, [xv, gv], [(n + 1, 3)])
    ref = [np.ones(3)]
    for t in range(n):
        ref.append(step(xv[t].astype("float64"), gv[t], ref[-1]))
    ref = np.stack(ref)
    np.testing.assert_allclose(got, ref, rtol=0, atol=bound(n, 8, scale_of(ref)))


# --- numerics --------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", CHUNKS)
def test_symbolic_length_against_sequential_and_numpy(chunk, sequential):
    """One function for every length: chunks that do and do not divide it, lengths below
    one chunk, and 8192 steps, where the carry crosses up to 8192 chunks."""
    lib = compile_func(scan_tir.create_prim_func(chunked(linear(te.var("seq")), chunk)))
    for n in LENGTHS:
        inputs = linear_inputs(n, seed=n)
        ref = linear_reference(*inputs)
        shape = [(n + 1, *SHAPE)]
        (got,) = run(lib, inputs, shape)
        (seq,) = run(sequential, inputs, shape)
        scale = scale_of(ref, inputs[1])
        np.testing.assert_allclose(got, ref, rtol=0, atol=bound(n, chunk, scale))
        np.testing.assert_allclose(got, seq, rtol=0, atol=bound(n, chunk, scale, True))


@pytest.mark.parametrize(("n", "chunk"), [(1, 16), (7, 1), (64, 16), (1000, 64), (8192, 64)])
def test_static_length(n, chunk):
    """Constant lengths: the number of chunks is folded to a constant."""
    func = scan_tir.create_prim_func(chunked(linear(n), chunk))
    assert scan_names(func) == ["linear_chunk_local", "linear_carry", "linear_chunked"]
    inputs = linear_inputs(n)
    ref = linear_reference(*inputs)
    (got,) = run(compile_func(func), inputs, [(n + 1, *SHAPE)])
    scale = scale_of(ref, inputs[1])
    np.testing.assert_allclose(got, ref, rtol=0, atol=bound(n, chunk, scale))


def test_a_decay_product_that_underflows_is_flushed_to_zero():
    """a in (0, 0.01]: every 16-step product is far below float32's smallest normal. The
    chunk-local pass stores it as zero, not as a subnormal number (which x86 computes with
    many times slower), and the result stays within the bound: what a flushed product
    would add is below FLT_MIN times the carry."""
    n, chunk = 256, 16
    func = scan_tir.create_prim_func(chunked(linear(n), chunk))
    a, b, h0 = linear_inputs(n, seed=3)
    a = (0.01 * (1 - a) * 10).astype("float32")
    ref = linear_reference(a, b, h0)
    (got,) = run(compile_func(func), [a, b, h0], [(n + 1, *SHAPE)])
    np.testing.assert_allclose(got, ref, rtol=0, atol=bound(n, chunk, scale_of(ref, b)))
    (local,) = [s for s in scan_tir.find_scans(func) if s.name == "linear_chunk_local"]
    assert "T.Select(T.fabs(" in local.step.script()


def zoo_symbolic(name: str, sizes: dict, chunk: int | None):
    """A zoo recurrence at a symbolic length, chunked or not, built untuned."""
    workload = get(name, seq=1, **sizes)
    tensors = workload.recurrence.build(seq=te.var("seq"), **sizes)
    if chunk is not None:
        tensors = chunked(tensors, chunk)
    return compile_func(scan_tir.create_prim_func(tensors, options=workload.options))


SELECTIVE = {"batch": 1, "d_model": 2, "d_state": 3}
MINGRU = {"batch": 1, "input": 3, "hidden": 2}


@pytest.mark.parametrize("chunk", CHUNKS)
def test_selective_scan(chunk):
    """Config S's recurrence (h linear and 4-D, y an output state read through the
    step's contraction) chunked, against numpy and the sequential lowering."""
    seq_lib = zoo_symbolic("selective_scan", SELECTIVE, None)
    lib = zoo_symbolic("selective_scan", SELECTIVE, chunk)
    for n in LENGTHS:
        workload = get("selective_scan", seq=n, **SELECTIVE)
        inputs = workload.input_arrays(seed=n)
        ref = workload.numpy(inputs)
        got = run(lib, inputs, [r.shape for r in ref])
        assert_close(got, ref)
        assert_close(got, run(seq_lib, inputs, [r.shape for r in ref]))


@pytest.mark.parametrize("chunk", CHUNKS)
def test_mingru(chunk):
    """Config M's recurrence, its A = 1 - z and B = z * h~ from projections made before
    the scan (fast-math sigmoid included); its output is the state, so the derived bound
    applies."""
    seq_lib = zoo_symbolic("mingru", MINGRU, None)
    lib = zoo_symbolic("mingru", MINGRU, chunk)
    for n in LENGTHS:
        workload = get("mingru", seq=n, **MINGRU)
        inputs = workload.input_arrays(seed=n)
        (ref,) = workload.numpy(inputs)
        (got,) = run(lib, inputs, [ref.shape])
        (seq,) = run(seq_lib, inputs, [ref.shape])
        scale = scale_of(ref)
        np.testing.assert_allclose(got, ref, rtol=0, atol=bound(n, chunk, scale))
        np.testing.assert_allclose(got, seq, rtol=0, atol=bound(n, chunk, scale, True))


# --- the graph around a chunked scan ---------------------------------------------------------


def elman_on(xs: te.Tensor, n: int) -> te.Tensor:
    """A non-linear scan reading ``xs`` (n + 1 rows): g[t] = tanh(g[t-1] + xs[t])."""
    g = te.placeholder((n + 1, *SHAPE), name="g")
    g0 = te.compute((1, *SHAPE), lambda *_: 0.0, name="g0")
    new = te.compute(
        (n + 1, *SHAPE), lambda t, i, k: te.tanh(g[t - 1, i, k] + xs[t, i, k]), name="g_new"
    )
    return scan_tir.scan(g0, new, g, name="elman")


def test_non_linear_scan_downstream_is_rebuilt():
    """With every linear scan chosen, the non-linear one after it stays sequential and
    reads the chunked output; the results are unchanged."""
    n = 40
    a, b, h0, h = linear(n)
    out = elman_on(h, n)
    func = scan_tir.create_prim_func(chunked([a, b, h0, out], 16))
    assert scan_names(func) == ["linear_chunk_local", "linear_carry", "linear_chunked", "elman"]
    inputs = linear_inputs(n)
    ref_h = linear_reference(*inputs)
    ref = [np.zeros(SHAPE)]
    for t in range(1, n + 1):
        ref.append(np.tanh(ref[-1] + ref_h[t]))
    (got,) = run(compile_func(func), inputs, [(n + 1, *SHAPE)])
    assert_close([got], [np.stack(ref)])


def test_chosen_by_name_and_refused_by_name():
    """Naming scans chooses them; a named non-linear scan raises its reason, an unknown
    name the scans there are."""
    n = 8
    a, b, h0, h = linear(n)
    out = elman_on(h, n)
    func = scan_tir.create_prim_func(chunked([a, b, h0, out], 4, scans=[]))
    assert scan_names(func) == ["linear", "elman"]
    with pytest.raises(
        ScanLoweringError,
        match="scan 'elman': the update 'g_new' of state "
        "'g' is not affine in the state: tanh of the state.",
    ):
        chunked([out], 4, scans=["elman"])
    with pytest.raises(ScanLoweringError, match=r"no scan named \['lstm'\]"):
        chunked([out], 4, scans=["lstm"])
    with pytest.raises(ScanLoweringError, match="must be a positive int, got 0"):
        chunked([out], 0)


def test_opt_in_through_the_scans_attrs():
    """``scan(..., attrs={"scan_tir.chunk": L})`` chunks that scan, through chunk_marked
    or straight in create_prim_func; the passes do not carry the mark on."""
    n = 30
    args = linear(n, attrs={"scan_tir.chunk": 8})
    func = scan_tir.create_prim_func(chunk_marked(args))
    assert scan_names(func) == ["linear_chunk_local", "linear_carry", "linear_chunked"]
    tvm.ir.assert_structural_equal(scan_tir.create_prim_func(args), func)
    inputs = linear_inputs(n)
    ref = linear_reference(*inputs)
    (got,) = run(compile_func(func), inputs, [(n + 1, *SHAPE)])
    np.testing.assert_allclose(got, ref, rtol=0, atol=bound(n, 8, scale_of(ref, inputs[1])))
    assert scan_names(scan_tir.create_prim_func(chunk_marked(linear(n)))) == ["linear"]


# --- refusals --------------------------------------------------------------------------------


def one_state(update, rows: int = 1):
    """A scan over state h (3 wide) with update ``update(x, h, t, i)``."""
    n = 6
    x = te.placeholder((n + rows, 3), name="x")
    h = te.placeholder((n + rows, 3), name="h")
    init = te.compute((rows, 3), lambda *_: 0.5, name="h0")
    new = te.compute((n + rows, 3), lambda t, i: update(x, h, t, i), name="h_new")
    return scan_tir.scan(init, new, h, name="bad")


def coupled():
    """a[t] = a[t-1] / 2 + b[t-1], b[t] = b[t-1] / 2: diagonal and linear, but coupled."""
    a, b = te.placeholder((5, 3), name="a"), te.placeholder((5, 3), name="b")
    init = [te.compute((1, 3), lambda *_: 1.0, name=f"{s}0") for s in "ab"]
    a_new = te.compute((5, 3), lambda t, i: a[t - 1, i] / 2.0 + b[t - 1, i], name="a_new")
    b_new = te.compute((5, 3), lambda t, i: b[t - 1, i] / 2.0, name="b_new")
    return scan_tir.scan(init, [a_new, b_new], [a, b], name="bad")[0]


def reduction():
    w = te.placeholder((3, 3), name="W")
    k = te.reduce_axis((0, 3), name="k")
    return one_state(lambda x, h, t, i: te.sum(h[t - 1, k] * w[k, i], axis=k))


NOT_AFFINE = "A chunked scan needs h[t] = A * h[t-1] + B with A and B free of the state."
DIAGONAL = (
    "a chunked scan needs a first-order diagonal recurrence (each element reads its own "
    "value one step back)."
)
REFUSED = {
    "lstm": (
        lambda: get("lstm", seq=4).tensors()[-1].op.input_tensors[0],
        "scan 'lstm_scan': the update 'next_h' of state 'h_state' reads its state through "
        "body op 'o_gate'; a chunked scan needs the update to read the state directly, so "
        "that it can be split into A * h[t-1] + B.",
    ),
    "h*h": (
        lambda: one_state(lambda x, h, t, i: h[t - 1, i] * h[t - 1, i] + x[t, i]),
        f"scan 'bad': the update 'h_new' of state 'h' is not affine in the state: state * "
        f"state. {NOT_AFFINE}",
    ),
    "tanh(h)": (
        lambda: one_state(lambda x, h, t, i: te.tanh(h[t - 1, i]) * x[t, i]),
        f"scan 'bad': the update 'h_new' of state 'h' is not affine in the state: tanh of "
        f"the state. {NOT_AFFINE}",
    ),
    "t-2": (
        lambda: one_state(lambda x, h, t, i: h[t - 2, i] * x[t, i], rows=2),
        f"scan 'bad': the update 'h_new' of state 'h' reads it at [t - 2, i], not at "
        f"[t - 1, i]; {DIAGONAL}",
    ),
    "another element": (
        lambda: one_state(lambda x, h, t, i: h[t - 1, 2 - i] * x[t, i]),
        f"scan 'bad': the update 'h_new' of state 'h' reads it at [t - 1, 2 - i], not at "
        f"[t - 1, i]; {DIAGONAL}",
    ),
    "coupled": (
        coupled,
        "scan 'bad': states 'a' and 'b' are coupled (the update 'a_new' of 'a' reads 'b'); "
        "a chunked scan needs each recurrent state to read only itself.",
    ),
    "init of 2 rows": (
        lambda: one_state(lambda x, h, t, i: h[t - 1, i] * x[t, i], rows=2),
        "scan 'bad': its init gives 2 rows; a chunked scan needs one (a first-order "
        "recurrence, restarted from one carried row per chunk).",
    ),
    "reduction": (
        reduction,
        "scan 'bad': the update 'h_new' of state 'h' is a reduction; a chunked scan needs "
        "each element of a recurrent state to read only its own previous value "
        "(h[t] = A * h[t-1] + B elementwise).",
    ),
    "no recurrence": (
        lambda: one_state(lambda x, h, t, i: x[t, i] * 2.0),
        "scan 'bad': no body op reads a state, so there is no recurrence to chunk; compute "
        "it with te.compute over all steps instead.",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_with_the_reason(case):
    """Each non-linear shape of update is refused, the message naming what breaks
    linearity; linear_form raises the same reason."""
    make, reason = REFUSED[case]
    scan = make()
    assert linear_problem(scan) == reason
    with pytest.raises(ScanLoweringError) as err:
        linear_form(scan)
    assert str(err.value) == reason
