"""The fast (numba) resample kernels against independent float64 references (SPEC 3.2-3.7):
random geometries, layouts and strides, the benchmark shapes, long rows, 2x ratios, non-finite
data, thread counts and the public functions' use of these kernels.

The dense references and the tolerance bound are in fast_resample_references.py; for non-finite
data the reference is the normative scatter of SPEC 3.6, written here as a loop over taps.
Nearest forward is a selection: bit-exact. The summation orders, bit for bit, and streamed
outputs are in test_fast_resample_order.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from fast_resample_references import (apply_axes, assert_close, dense, nhwc, random_data, suite_taps,
                                      taps_per_output)

from gradops._fast.resample import resample_backward, resample_forward
from gradops._resample_plan import axis_taps

RULES = ("half_up", "floor", "ceil")


# --- independent references ---------------------------------------------------------------------

def bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).view(f"u{array.itemsize}")


def scatter_reference(dy: np.ndarray, taps: list, input_shape: tuple[int, ...]) -> np.ndarray:
    """SPEC 3.6's normative scatter: ``dX[i] += w * dY[o]`` over nonzero product taps."""
    dx = np.zeros(input_shape)
    for o in itertools.product(*(range(n) for n in dy.shape)):
        for picks in itertools.product(range(2), repeat=dy.ndim):
            w = np.prod([taps[d][1][o[d], k] for d, k in enumerate(picks)], dtype=np.float64)
            if w != 0:
                dx[tuple(taps[d][0][o[d], k] for d, k in enumerate(picks))] += w * np.float64(dy[o])
    return dx


# --- random cases ---------------------------------------------------------------------------------

def random_taps(rng: np.random.Generator, n_in: int, n_out: int, mode: str, rule: str):
    """Forward taps of one axis: sometimes the identity, else random scale and offsets."""
    if n_in == n_out and rng.random() < 0.3:
        return axis_taps(n_in, n_out, 1.0, 0.0, 0.0, mode, "half_up" if mode == "nearest" else rule)
    scale = n_out / n_in * float(rng.choice([1.0, 1.0, rng.uniform(0.5, 2.0)]))
    ipo, opo = [(0.5, -0.5), (0.0, 0.0), tuple(rng.uniform(-1.0, 1.0, 2))][rng.integers(3)]
    return axis_taps(n_in, n_out, scale, ipo, opo, mode, rule)


def layout(rng: np.random.Generator, data: np.ndarray, kind: str) -> np.ndarray:
    """The same logical array in another memory layout (a copy unless ``kind`` is contiguous)."""
    if kind == "contiguous":
        return np.ascontiguousarray(data)
    if kind == "permuted":  # e.g. NCHW logical, NHWC buffer
        order = list(range(data.ndim))
        order = order[:1] + order[2:] + order[1:2] if data.ndim > 2 else order[::-1]
        return np.ascontiguousarray(data.transpose(order)).transpose(np.argsort(order))
    if kind == "strided":  # every axis strided inside a bigger buffer
        big = np.zeros(tuple(2 * n + 1 for n in data.shape), data.dtype)
        view = big[tuple(slice(1, None, 2) for _ in data.shape)]
        view[...] = data
        return view
    if kind == "negative":
        flip = tuple(slice(None, None, -1) if rng.random() < 0.6 else slice(None) for _ in data.shape)
        return np.ascontiguousarray(data[flip])[flip]
    raise AssertionError(kind)


def broadcast_input(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> np.ndarray:
    """Random data with stride 0 on one axis (one value repeated along it)."""
    axis = int(rng.integers(len(shape)))
    small = list(shape)
    small[axis] = 1
    return np.broadcast_to(random_data(rng, tuple(small), dtype), shape)


def empty_out(rng: np.random.Generator, shape: tuple[int, ...], dtype, kind: str) -> np.ndarray:
    """An output buffer of ``kind`` layout, filled with garbage that must be overwritten."""
    return layout(rng, np.full(shape, np.nan, dtype), kind)


def random_case(seed: int):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 5))
    mode = ("nearest", "linear")[seed % 2]
    rule = RULES[(seed // 2) % 3]
    n_in = tuple(int(n) for n in rng.integers(1, 8, rank))
    n_out = tuple(n if rng.random() < 0.3 else int(rng.integers(1, 12)) for n in n_in)
    taps = [random_taps(rng, i, o, mode, rule) for i, o in zip(n_in, n_out)]
    matrices = [dense(index, weight, i) for (index, weight), i in zip(taps, n_in)]
    return rng, n_in, n_out, taps, matrices


LAYOUTS = ("contiguous", "permuted", "strided", "negative")
CASES = [(seed, dtype, src_kind, out_kind)
         for seed in range(24)
         for dtype, src_kind, out_kind in [(np.float32, LAYOUTS[seed % 4], LAYOUTS[(seed // 4) % 4]),
                                           (np.float16, LAYOUTS[(seed + 1) % 4], LAYOUTS[(seed + 2) % 4])]]


# --- tests ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed,dtype,src_kind,out_kind", CASES)
def test_forward_matches_dense_reference(seed, dtype, src_kind, out_kind):
    rng, n_in, n_out, taps, matrices = random_case(seed)
    x = layout(rng, random_data(rng, n_in, dtype), src_kind)
    out = empty_out(rng, n_out, dtype, out_kind)
    resample_forward(x, out, taps)
    exact = apply_axes(matrices, x.astype(np.float64))
    if all(np.all(w[:, 0] == 1) and np.all(w[:, 1] == 0) for _, w in taps):  # nearest: a selection
        np.testing.assert_array_equal(bits(out), bits(exact.astype(dtype)))
    else:
        abs_sum = apply_axes([np.abs(m) for m in matrices], np.abs(x.astype(np.float64)))
        assert_close(out, exact, abs_sum, taps_per_output(matrices))


@pytest.mark.parametrize("seed,dtype,src_kind,out_kind", CASES)
def test_backward_matches_dense_reference(seed, dtype, src_kind, out_kind):
    rng, n_in, n_out, taps, matrices = random_case(seed)
    dy = layout(rng, random_data(rng, n_out, dtype), src_kind)
    out = empty_out(rng, n_in, dtype, out_kind)
    resample_backward(dy, out, taps)
    transposed = [m.T for m in matrices]
    exact = apply_axes(transposed, dy.astype(np.float64))
    abs_sum = apply_axes([np.abs(m) for m in transposed], np.abs(dy.astype(np.float64)))
    assert_close(out, exact, abs_sum, taps_per_output(transposed))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_broadcast_inputs(seed, dtype):
    rng, n_in, n_out, taps, matrices = random_case(100 + seed)
    x = broadcast_input(rng, n_in, dtype)
    out = np.empty(n_out, dtype)
    resample_forward(x, out, taps)
    abs_sum = apply_axes([np.abs(m) for m in matrices], np.abs(x.astype(np.float64)))
    assert_close(out, apply_axes(matrices, x.astype(np.float64)), abs_sum, taps_per_output(matrices))
    dy = broadcast_input(rng, n_out, dtype)
    grad = np.empty(n_in, dtype)
    resample_backward(dy, grad, taps)
    transposed = [m.T for m in matrices]
    abs_sum = apply_axes([np.abs(m) for m in transposed], np.abs(dy.astype(np.float64)))
    assert_close(grad, apply_axes(transposed, dy.astype(np.float64)), abs_sum, taps_per_output(transposed))


# The S1 resample workloads' geometry, small: (shape_in, shape_out, mode, grid)
SUITE_SHAPES = [
    ((2, 3, 8, 8), (2, 3, 16, 16), "nearest", "half"),      # N1-like
    ((2, 3, 8, 8), (2, 3, 16, 16), "nearest", "asym"),      # N2-like
    ((2, 3, 10, 10), (2, 3, 15, 5), "nearest", "half"),     # N3-like
    ((2, 3, 8, 8), (2, 3, 16, 16), "linear", "half"),       # L1-like
    ((2, 3, 16, 16), (2, 3, 8, 8), "linear", "half"),       # L2-like
    ((2, 3, 5, 5), (2, 3, 12, 14), "nearest", "half"),      # P1-like
    ((2, 3, 5, 5), (2, 3, 23, 27), "nearest", "asym"),      # P2-like
]


@pytest.mark.parametrize("shape_in,shape_out,mode,grid", SUITE_SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("channels_last", [False, True])
def test_suite_shapes_both_layouts(shape_in, shape_out, mode, grid, dtype, channels_last):
    rng = np.random.default_rng(7)
    taps = suite_taps(shape_in, shape_out, mode, grid)
    transposed = [dense(index, weight, n).T for (index, weight), n in zip(taps, shape_in)]
    dy = random_data(rng, shape_out, dtype)
    out = np.empty(shape_in, dtype)
    if channels_last:
        dy, out = nhwc(dy), nhwc(out)
    resample_backward(dy, out, taps)
    abs_sum = apply_axes([np.abs(m) for m in transposed], np.abs(dy.astype(np.float64)))
    assert_close(out, apply_axes(transposed, dy.astype(np.float64)), abs_sum, taps_per_output(transposed))


def test_large_rows_split_into_blocks():
    """Rows longer than one column block (and a rank-1 case that only blocks can parallelise);
    the references are the tap sums written with bincount instead of dense matrices."""
    rng = np.random.default_rng(3)
    n_in, n_out = 12000, 18011
    for mode in ("nearest", "linear"):
        index, weight = axis_taps(n_in, n_out, 1.5, 0.5, -0.5, mode, "half_up")
        w = weight.astype(np.float64)
        x = random_data(rng, (n_in,), np.float32)
        y = np.empty(n_out, np.float32)
        resample_forward(x, y, [(index, weight)])
        exact = (w * x[index]).sum(axis=1)
        assert_close(y, exact, (w * np.abs(x[index])).sum(axis=1), 2)
        dy = random_data(rng, (n_out,), np.float32)
        dx = np.empty(n_in, np.float32)
        resample_backward(dy, dx, [(index, weight)])
        exact = np.bincount(index.ravel(), (w * dy[:, None]).ravel(), n_in)
        abs_sum = np.bincount(index.ravel(), (w * np.abs(dy[:, None])).ravel(), n_in)
        terms = int(np.bincount(index[weight != 0], minlength=n_in).max())
        assert_close(dx, exact, abs_sum, terms)


def grid_taps(n_in: int, n_out: int, mode: str, grid: str):
    if grid == "half":
        return axis_taps(n_in, n_out, n_out / n_in, 0.5, -0.5, mode, "half_up")
    if grid == "asymmetric":
        return axis_taps(n_in, n_out, n_out / n_in, 0.0, 0.0, mode, "floor")
    return axis_taps(n_in, n_out, n_out / n_in, 0.25, 0.3, mode, "ceil")


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("grid", ["half", "asymmetric", "shifted"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("channels_last", [False, True])
def test_twofold_ratios_with_wide_rows(mode, grid, dtype, channels_last):
    """2x up- and downsampling on rows of >= 16 columns: the affine-span loops (both
    directions, edges clamped, empty phases) and the slot tables around them."""
    rng = np.random.default_rng(13)
    for shape_in, shape_out in [((2, 3, 5, 24), (2, 3, 10, 48)), ((2, 3, 10, 48), (2, 3, 5, 24)),
                                ((2, 3, 7, 35), (2, 3, 14, 70))]:
        taps = [axis_taps(n, n, 1.0, 0.0, 0.0, mode, "half_up") for n in shape_in[:2]] + \
            [grid_taps(i, o, mode, grid) for i, o in zip(shape_in[2:], shape_out[2:])]
        matrices = [dense(index, weight, n) for (index, weight), n in zip(taps, shape_in)]
        x, dy = random_data(rng, shape_in, dtype), random_data(rng, shape_out, dtype)
        y, dx = np.empty(shape_out, dtype), np.empty(shape_in, dtype)
        if channels_last:
            x, dy, y, dx = nhwc(x), nhwc(dy), nhwc(y), nhwc(dx)
        resample_forward(x, y, taps)
        abs_sum = apply_axes([np.abs(m) for m in matrices], np.abs(x.astype(np.float64)))
        assert_close(y, apply_axes(matrices, x.astype(np.float64)), abs_sum, taps_per_output(matrices))
        resample_backward(dy, dx, taps)
        transposed = [m.T for m in matrices]
        abs_sum = apply_axes([np.abs(m) for m in transposed], np.abs(dy.astype(np.float64)))
        assert_close(dx, apply_axes(transposed, dy.astype(np.float64)), abs_sum, taps_per_output(transposed))


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_twofold_ratio_across_column_blocks(mode):
    """Rank 1, 2x, longer than one column block: affine spans cut by block boundaries."""
    rng = np.random.default_rng(17)
    for n_in, n_out in [(9000, 18000), (18000, 9000)]:
        index, weight = axis_taps(n_in, n_out, n_out / n_in, 0.5, -0.5, mode, "half_up")
        w = weight.astype(np.float64)
        dy = random_data(rng, (n_out,), np.float32)
        dx = np.empty(n_in, np.float32)
        resample_backward(dy, dx, [(index, weight)])
        exact = np.bincount(index.ravel(), (w * dy[:, None]).ravel(), n_in)
        abs_sum = np.bincount(index.ravel(), (w * np.abs(dy[:, None])).ravel(), n_in)
        assert_close(dx, exact, abs_sum, int(np.bincount(index[weight != 0], minlength=n_in).max()))
        x = random_data(rng, (n_in,), np.float32)
        y = np.empty(n_out, np.float32)
        resample_forward(x, y, [(index, weight)])
        assert_close(y, (w * x[index]).sum(axis=1), (w * np.abs(x[index])).sum(axis=1), 2)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_gradient_non_finite_and_signed_zero(mode):
    """inf/NaN flow only through taps of nonzero weight (SPEC 3.4); the gradient starts from +0,
    the forward sum keeps a -0 read at weight 1."""
    rng = np.random.default_rng(11)
    shape_in, shape_out = (3, 4), (7, 5)
    taps = [axis_taps(3, 7, 7 / 3, 0.5, -0.5, mode, "half_up"), axis_taps(4, 5, 1.25, 0.0, 0.0, mode, "floor")]
    dy = random_data(rng, shape_out, np.float32)
    dy[1, 2], dy[4, 0], dy[6, 4] = np.inf, -np.inf, np.nan
    out = np.empty(shape_in, np.float32)
    resample_backward(dy, out, taps)
    expected = scatter_reference(dy, taps, shape_in)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(out[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)])
    np.testing.assert_allclose(out[finite], expected[finite], rtol=1e-5, atol=1e-6)

    resample_backward(np.full(shape_out, -0.0, np.float32), out, taps)
    assert not np.signbit(out).any()
    identity = [axis_taps(3, 3, 1.0, 0.0, 0.0, mode, "half_up"), axis_taps(4, 4, 1.0, 0.0, 0.0, mode, "half_up")]
    forward = np.empty(shape_in, np.float32)
    resample_forward(np.full(shape_in, -0.0, np.float32), forward, identity)
    assert np.signbit(forward).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_bitwise_deterministic_across_thread_counts(dtype, channels_last, mode, on_each_thread_count):
    rng = np.random.default_rng(5)
    shape_in, shape_out = (3, 5, 13, 11), (3, 5, 29, 17)
    taps = suite_taps(shape_in, shape_out, mode, "half")
    dy = random_data(rng, shape_out, dtype)
    x = random_data(rng, shape_in, dtype)
    if channels_last:
        dy, x = nhwc(dy), nhwc(x)

    def run():
        grad, forward = np.empty(shape_in, dtype), np.empty(shape_out, dtype)
        resample_backward(dy, grad, taps)
        resample_forward(x, forward, taps)
        return grad.tobytes(), forward.tobytes()

    results = on_each_thread_count(run)
    assert results[0] == results[1]


def test_public_gradient_uses_these_kernels(monkeypatch):
    """``gradops.resample_grad1(..., backend="fast")`` runs a run of ``prepare_backward`` (and the
    forward op one of ``prepare_forward``), with results matching the dense reference."""
    import gradops
    from gradops._fast import resample as fast

    calls = []

    def spy(name, kernel):
        def wrapper(*args, **kwargs):
            calls.append(name)
            return kernel(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(fast, "prepare_backward", spy("backward", fast.prepare_backward))
    monkeypatch.setattr(fast, "prepare_forward", spy("forward", fast.prepare_forward))
    rng = np.random.default_rng(23)
    dy = random_data(rng, (2, 3, 12, 10), np.float32)
    dx = gradops.resample_grad1(dy, (2, 3, 6, 4), mode="linear", backend="fast")
    y = gradops.resample2(random_data(rng, (2, 3, 6, 4), np.float32), (2, 3, 12, 10), mode="linear",
                          backend="fast")
    assert calls == ["backward", "forward"] and y.shape == (2, 3, 12, 10)
    # Default GRAD1 parameters are the adjoint of RESAMPLE2 on the half-pixel grid (SPEC 3.6).
    taps = [axis_taps(n, n, 1.0, 0.0, 0.0, "linear", "floor") for n in (2, 3)] + \
        [axis_taps(i, o, np.float32(o / i), 0.5, -0.5, "linear", "floor") for i, o in ((6, 12), (4, 10))]
    transposed = [dense(index, weight, n).T for (index, weight), n in zip(taps, (2, 3, 6, 4))]
    abs_sum = apply_axes([np.abs(m) for m in transposed], np.abs(dy.astype(np.float64)))
    assert_close(dx, apply_axes(transposed, dy.astype(np.float64)), abs_sum, taps_per_output(transposed))


def test_public_forward_calls_say_whether_they_are_selections(monkeypatch):
    """The plan tells the fast forward op whether every tap is one element at weight 1 (a bit
    copy): nearest calls, and linear ones whose taps all fall on input elements (scale 1, offsets
    that cancel); other linear calls are not. With NaN payloads, a selection keeps them."""
    import gradops
    from gradops._fast import resample as fast

    said = []
    prepare = fast.prepare_forward
    monkeypatch.setattr(fast, "prepare_forward",
                        lambda x, out, taps, key, selection: (said.append(selection),
                                                              prepare(x, out, taps, key, selection))[1])
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    x.view(np.uint32)[0, 0, 0, 0] = 0x7FC01234
    y = gradops.resample1(x, (2, 3, 8, 10), mode="nearest", backend="fast")
    assert y.view(np.uint32)[0, 0, 0, 0] == 0x7FC01234
    gradops.resample1(x, (2, 3, 4, 5), mode="linear", backend="fast")
    gradops.resample1(x, (2, 3, 8, 10), mode="linear", backend="fast")
    assert said == [True, True, False]


def test_contract_plan_of_a_nearest_twofold_gradient():
    """The plan alone, no kernel run: the gradient of nearest 2x upsampling of an NHWC image
    [1, 2, 3, 8] -> [1, 4, 6, 8]. Hand-derived: forward output o reads input o // 2 (weight 1), so
    dx row i gathers dy rows 2i and 2i + 1, and dx column j dy columns 2j and 2j + 1. C is not
    resampled and is the unit axis, W the column axis, H the last outer axis."""
    from gradops._fast.resample.plan import _contract_plan
    from gradops._resample_plan import tap_key

    def taps(n_out: int, step: int) -> tuple[np.ndarray, np.ndarray]:
        index = np.zeros((n_out, 2), np.int64)
        index[:, 0] = np.arange(n_out) // step
        weight = np.zeros((n_out, 2), np.float32)
        weight[:, 0] = 1
        return index, weight

    dy, dx = np.zeros((1, 4, 6, 8), np.float32), np.zeros((1, 2, 3, 8), np.float32)
    keys = tuple(tap_key(*t) for t in (taps(1, 1), taps(4, 2), taps(6, 2), taps(8, 1)))
    _, items, _, _, plan, record, path = _contract_plan(True, dy.shape, dy.strides, dx.shape, dx.strides, 4, keys)
    assert type(record) is tuple  # what the kernel takes: numba types a named tuple's fields in Python
    assert list(plan.dst_shape) == [1, 1, 2, 3, 8] and items == 2  # 2 dx rows, one column block
    assert list(plan.src_strides[2:]) == [48, 8, 1] and list(plan.dst_strides[2:]) == [24, 8, 1]
    assert list(plan.ptr2) == [0, 2, 4] and list(plan.src2) == [0, 1, 2, 3] and (plan.weight2 == 1).all()
    assert list(plan.ptr1) == [0, 1] and list(plan.src1) == [0]  # N: one tap
    assert list(plan.block_first) == [0] and list(plan.block_count) == [6]
    assert plan.slot.tolist() == [[1, 2], [3, 4], [5, 6]] and (plan.slot_weight == 1).all()
    assert not plan.weighted and not plan.column_identity and plan.max_taps == 2 and not plan.columns_first
    assert plan.zero == 0 and np.copysign(1, plan.zero) == 1  # the gradient's sums start from +0 (SPEC 3.6)
    # columns_first, direct pixels of 2 slots, unweighted, pixel sums (float32, unweighted), no row sum (every
    # dx row reads 2 dy rows: direct), identity, affine, narrow NCHW rows
    assert path == (False, 2, 0, True, False, False, False, False)


@pytest.mark.parametrize("dtype,row_sum", [(np.float32, False), (np.float16, True)])
def test_gradient_rows_without_taps_are_written(dtype, row_sum):
    """The gradient of nearest 3x downsampling of an NHWC image [1, 6, 6, 16] -> [1, 2, 2, 16]
    (forward output o reads input 3o + 1): dx rows and columns that no dy element reads get no
    tap and must come out +0, not the NaN the output held. Hand-derived plan: float32 pixels are
    pixel sums, which write every row, so the kernel is built without the row sum; float16 pixels
    of one slot are read directly only from rows with one or two taps, so the rows with none need
    the row sum (``plan._row_sum_needed``)."""
    from gradops._fast.resample.plan import _contract_plan
    from gradops._resample_plan import tap_key

    def picks(inputs: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Forward taps of one axis: output o reads input ``inputs[o]`` at weight 1."""
        index = np.zeros((len(inputs), 2), np.int64)
        index[:, 0] = inputs
        weight = np.zeros((len(inputs), 2), np.float32)
        weight[:, 0] = 1
        return index, weight

    all_taps = [picks([0]), picks(list(range(16))), picks([1, 4]), picks([1, 4])]  # N, C, H, W (logical NCHW)
    dy = nhwc(np.arange(1, 65, dtype=dtype).reshape(1, 16, 2, 2))
    dx = nhwc(np.full((1, 16, 6, 6), np.nan, dtype))
    keys = tuple(tap_key(*t) for t in all_taps)
    path = _contract_plan(True, dy.shape, dy.strides, dx.shape, dx.strides, dx.itemsize, keys)[-1]
    assert path[4] is row_sum
    resample_backward(dy, dx, all_taps)
    expected = np.zeros(dx.shape, dtype)
    expected[:, :, 1::3, 1::3] = dy
    assert bits(dx).tolist() == bits(expected).tolist()
