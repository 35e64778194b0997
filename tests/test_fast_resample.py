"""The fast (numba) resample kernels against independent float64 references (SPEC 3.2-3.7).

The references are built here from the per-axis tap tables only: a dense matrix ``J_d`` per
axis, combined over axes with ``np.tensordot`` (forward ``J x``, gradient ``J^T dy``), and, for
non-finite data, the normative scatter of SPEC 3.6 written as a loop over taps.

Tolerances. Nearest forward is a selection: bit-exact. Sums are accumulated in float32 in an
order that differs from the reference, so for an output that sums ``T`` products the error is
bounded by the classical float32 summation bound ``(T + 4) * 2**-24 * sum|w * v|`` (the ``+4``
covers the rounding of the product of up to four axis weights); float16 results get one more
rounding to float16 (half an ulp). For data of one sign that is at most ``T + 4`` float32 ulps.
"""

from __future__ import annotations

import itertools

import numba
import numpy as np
import pytest

from gradops._fast import resample as fast_resample
from gradops._fast import simd
from gradops._fast.half import HARDWARE_HALF, float_to_half, float_to_half_bits, half_bits_to_float, half_to_float
from gradops._fast.resample import resample_backward, resample_forward
from gradops._resample_plan import axis_taps, transpose_taps

RULES = ("half_up", "floor", "ceil")
U32 = 2.0 ** -24


# --- independent references ---------------------------------------------------------------------

def dense(index: np.ndarray, weight: np.ndarray, n_in: int) -> np.ndarray:
    """``J[o, i]``: the forward weight of input ``i`` in output ``o`` (float64)."""
    matrix = np.zeros((index.shape[0], n_in))
    rows = np.repeat(np.arange(index.shape[0]), 2)
    np.add.at(matrix, (rows, index.reshape(-1)), weight.reshape(-1).astype(np.float64))
    return matrix


def apply_axes(matrices: list[np.ndarray], data: np.ndarray) -> np.ndarray:
    """``data`` contracted with ``matrices[d]`` along every axis ``d`` (rows = result axis)."""
    result = data
    for axis, matrix in enumerate(matrices):
        result = np.moveaxis(np.tensordot(matrix, result, axes=([1], [axis])), 0, axis)
    return result


def taps_per_output(matrices: list[np.ndarray]) -> int:
    """The largest number of nonzero products summed into one output element."""
    return int(np.prod([np.count_nonzero(m, axis=1).max(initial=1) for m in matrices]))


def assert_close(got: np.ndarray, exact: np.ndarray, abs_sum: np.ndarray, terms: int) -> None:
    """The bound of the module docstring, plus one float16 rounding for float16 results."""
    tolerance = (terms + 4) * U32 * abs_sum
    if got.dtype == np.float16:
        tolerance = tolerance + np.maximum(np.abs(exact) * 2.0 ** -11, 2.0 ** -25)
    error = np.abs(got.astype(np.float64) - exact)
    worst = np.unravel_index(np.argmax(error - tolerance), error.shape)
    assert np.all(error <= tolerance), (worst, got[worst], exact[worst], tolerance[worst])


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


def random_data(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


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


def suite_taps(shape_in, shape_out, mode, grid):
    """Per-axis taps of the benchmark workloads: identity axes, half-pixel or asymmetric grid."""
    taps = []
    for n_in, n_out in zip(shape_in, shape_out):
        if n_in == n_out:
            taps.append(axis_taps(n_in, n_out, 1.0, 0.0, 0.0, mode, "half_up"))
        elif grid == "half":
            taps.append(axis_taps(n_in, n_out, n_out / n_in, 0.5, -0.5, mode, "half_up"))
        else:
            taps.append(axis_taps(n_in, n_out, n_out / n_in, 0.0, 0.0, mode, "floor"))
    return taps


def nhwc(array: np.ndarray) -> np.ndarray:
    """The same logical NCHW tensor in an NHWC buffer."""
    return np.ascontiguousarray(array.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("shape_in,shape_out,mode,grid", [
    ((2, 3, 8, 8), (2, 3, 16, 16), "nearest", "half"),      # N1-like
    ((2, 3, 8, 8), (2, 3, 16, 16), "nearest", "asym"),      # N2-like
    ((2, 3, 10, 10), (2, 3, 15, 5), "nearest", "half"),     # N3-like
    ((2, 3, 8, 8), (2, 3, 16, 16), "linear", "half"),       # L1-like
    ((2, 3, 16, 16), (2, 3, 8, 8), "linear", "half"),       # L2-like
    ((2, 3, 5, 5), (2, 3, 12, 14), "nearest", "half"),      # P1-like
    ((2, 3, 5, 5), (2, 3, 23, 27), "nearest", "asym"),      # P2-like
])
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


def _sum_in_groups(terms: list[np.ndarray]) -> np.ndarray:
    """The terms (float32) in groups of four, then two, then one, each group summed as
    ``(t0 + t1) + (t2 + t3)``; the first group added to +0, the next ones to the running sum."""
    total = None
    while terms:
        size = 4 if len(terms) >= 4 else (2 if len(terms) >= 2 else 1)
        group, terms = terms[:size], terms[size:]
        part = group[0] if size == 1 else (group[0] + group[1] if size == 2
                                           else (group[0] + group[1]) + (group[2] + group[3]))
        total = np.float32(0) + part if total is None else total + part
    return total


def _kernel_order_gradient(dy: np.ndarray, row_taps, column_taps, n_rows: int, n_columns: int) -> np.ndarray:
    """The NHWC gradient of a resampling of H and W, in float32 and in the order the module
    docstring gives: per dx row, the dy rows in groups of four (then two, one) as
    ``(p0 + p1) + (p2 + p3)``, the first group added to +0, the next ones to the running sum;
    then per dx column ``+0 + ((q0 + q1) + (q2 + q3))`` over a table of 4 slots, the unused
    ones reading -0.0. ``p`` and ``q`` are ``w * value``, or the value itself when every weight
    of the problem is 1 (nearest). Written from the tap tables alone, with NumPy.

    Except nearest, whose pixels are summed straight from the dy rows: ``+0 + (s0 + s1 + ...)``
    over the dy rows in order, ``s = -0 + (v0 + v1 + ...)`` over a row's dy columns in order."""
    f32 = np.float32
    row_ptr, row_src, row_w = transpose_taps(*row_taps, n_rows)
    col_ptr, col_src, col_w = transpose_taps(*column_taps, n_columns)
    weighted = not (np.all(row_w == 1) and np.all(col_w == 1))
    assert np.diff(col_ptr).max() in (3, 4)  # the 4-slot table
    batch, _, _, channels = dy.shape
    dx = np.empty((batch, n_rows, n_columns, channels), f32)
    if not weighted:
        for i in range(n_rows):
            for j in range(n_columns):
                total = np.zeros((batch, channels), f32)
                for r in row_src[row_ptr[i]:row_ptr[i + 1]]:
                    row = np.full((batch, channels), -0.0, f32)
                    for c in col_src[col_ptr[j]:col_ptr[j + 1]]:
                        row = row + dy[:, r, c]
                    total = total + row
                dx[:, i, j] = total
        return dx
    for i in range(n_rows):
        terms = [(row_w[k] * dy[:, row_src[k]]) if weighted else dy[:, row_src[k]]
                 for k in range(row_ptr[i], row_ptr[i + 1])]
        row_sum = _sum_in_groups(terms)
        for j in range(n_columns):
            picks = [(col_w[k] * row_sum[:, col_src[k]]) if weighted else row_sum[:, col_src[k]]
                     for k in range(col_ptr[j], col_ptr[j + 1])]
            picks += [np.full((batch, channels), -0.0, f32)] * (4 - len(picks))
            dx[:, i, j] = f32(0) + ((picks[0] + picks[1]) + (picks[2] + picks[3]))
    return dx


@pytest.mark.parametrize("mode,shape_in,shape_out", [
    ("nearest", (20, 20), (46, 54)),  # P1's ratios: 2-3 dy rows and 2-3 dy columns per dx pixel
    ("linear", (16, 16), (32, 32)),   # L1's 2x: 4 weighted rows and columns
])
@pytest.mark.parametrize("channels", [37, 16])  # two whole vectors and 5 channels more; one vector
def test_channels_last_pixels_are_summed_in_the_documented_order(mode, shape_in, shape_out, channels):
    """Bit for bit against the float32 emulation above: the vectors of whole channels and the
    channels past them give the same sums in the same order."""
    rng = np.random.default_rng(11)
    taps = suite_taps((2, channels) + shape_in, (2, channels) + shape_out, mode, "half")
    dy = rng.standard_normal((2,) + shape_out + (channels,)).astype(np.float32)
    out = np.full((2,) + shape_in + (channels,), np.nan, np.float32)
    resample_backward(dy.transpose(0, 3, 1, 2), out.transpose(0, 3, 1, 2), taps)
    expected = _kernel_order_gradient(dy, taps[2], taps[3], *shape_in)
    np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


def _columns_first_gradient(dy: np.ndarray, row_taps, column_taps, n_rows: int, n_columns: int) -> np.ndarray:
    """The float16 NHWC gradient of a linear 2x resampling of H and W in the order of the module
    docstring's columns-first path, in float32 with NumPy: per dy row and dx column
    ``(q0 + q1) + (q2 + q3)`` over the 4-slot table (``q = w * value``, -0.0 for unused slots);
    per dx row, over its dy rows ``p = w * cc``: ``+0 + ((p0 + p1) + (p2 + p3))`` for four rows,
    otherwise groups of two (then one) as in the row-first order; rounded once to float16."""
    f32 = np.float32
    row_ptr, row_src, row_w = transpose_taps(*row_taps, n_rows)
    col_ptr, col_src, col_w = transpose_taps(*column_taps, n_columns)
    data = dy.astype(f32)
    batch, _, _, channels = dy.shape
    cc = np.empty((batch, dy.shape[1], n_columns, channels), f32)
    for j in range(n_columns):
        picks = [col_w[k] * data[:, :, col_src[k]] for k in range(col_ptr[j], col_ptr[j + 1])]
        picks += [np.full(data[:, :, 0].shape, -0.0, f32)] * (4 - len(picks))
        cc[:, :, j] = (picks[0] + picks[1]) + (picks[2] + picks[3])
    dx = np.empty((batch, n_rows, n_columns, channels), f32)
    for i in range(n_rows):
        terms = [row_w[k] * cc[:, row_src[k]] for k in range(row_ptr[i], row_ptr[i + 1])]
        dx[:, i] = _sum_in_groups(terms)
    return dx.astype(np.float16)


@pytest.mark.skipif(not HARDWARE_HALF, reason="the columns-first path needs hardware half conversions")
@pytest.mark.parametrize("channels", [64, 112, 16])  # one pass of 4 vectors; 4 + 3 single ones; one
def test_float16_linear_2x_gradients_sum_columns_first(channels, on_each_thread_count):
    """Bit for bit against the emulation above (float16 NHWC, linear 2x, 20 dx columns: an affine
    span and its clamped edges), with infinities and NaN among the data, on 1 and 2 threads (so
    the ring of column sums restarts at chunk boundaries). The row-first order gives other bits."""
    rng = np.random.default_rng(17)
    shape_in, shape_out = (3, channels, 9, 20), (3, channels, 18, 40)
    taps = suite_taps(shape_in, shape_out, "linear", "half")
    # Magnitudes spread over 2**-12 .. 2**12, so that float32 sums round and orders differ.
    dy = (rng.standard_normal((3, 18, 40, channels)) * 2.0 ** rng.integers(-12, 13, (3, 18, 40, channels)))
    dy = dy.astype(np.float16)
    dy[0, 5, 7, 3], dy[1, 0, 39, 0], dy[2, 17, 20, 5] = np.inf, -np.inf, np.nan
    expected = _columns_first_gradient(dy, taps[2], taps[3], *shape_in[2:])

    def run():
        out = np.full((3,) + shape_in[2:] + (channels,), np.nan, np.float16)
        resample_backward(dy.transpose(0, 3, 1, 2), out.transpose(0, 3, 1, 2), taps)
        return out

    nan = np.isnan(expected)
    for out in on_each_thread_count(run):
        np.testing.assert_array_equal(np.isnan(out), nan)
        np.testing.assert_array_equal(out[~nan].view(np.uint16), expected[~nan].view(np.uint16))
    row_first = _kernel_order_gradient(dy.astype(np.float32), taps[2], taps[3], *shape_in[2:]).astype(np.float16)
    assert not np.array_equal(row_first[~nan].view(np.uint16), expected[~nan].view(np.uint16))


def _nans_past_a_line(shape: tuple[int, ...], offset: int, dtype=np.float32) -> np.ndarray:
    """An NHWC array of NaN whose data start ``offset`` bytes past a 64-byte line, viewed as
    NCHW."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    array = raw[start:start + nbytes].view(dtype).reshape(shape)
    array[...] = np.nan
    return array.transpose(0, 3, 1, 2)


@pytest.mark.parametrize("mode,grid,shape_in,shape_out", [
    ("nearest", "asym", (8, 8), (16, 16)),    # 2 rows x 2 columns read directly (N2)
    ("linear", "half", (16, 16), (8, 8)),     # 1 weighted row x 1 column read directly (L2)
    ("nearest", "half", (20, 20), (46, 54)),  # 4-slot pixels from the row sum (P1)
    ("linear", "half", (8, 8), (16, 16)),     # weighted 4-slot pixels (L1)
])
@pytest.mark.parametrize("dtype,channels", [(np.float32, 16), (np.float32, 48), (np.float16, 32), (np.float16, 96)])
def test_streamed_outputs_have_the_same_bits(monkeypatch, mode, grid, shape_in, shape_out, dtype, channels):
    """Outputs written with non-temporal stores (large NHWC outputs of whole 64-byte lines per
    pixel; the size threshold lowered here) hold the bits of the plain stores, and match the
    reference. float16 streams its four-slot pixels only; the flag must not change the others."""
    flags = []

    def share(*args):
        flags.append(args[-1])
        return real_share(*args)
    real_share = fast_resample.share
    monkeypatch.setattr(fast_resample, "share", share)
    rng = np.random.default_rng(13)
    taps = suite_taps((2, channels) + shape_in, (2, channels) + shape_out, mode, grid)
    dy = nhwc(random_data(rng, (2, channels) + shape_out, dtype))
    nhwc_shape = (2,) + shape_in + (channels,)
    plain = _nans_past_a_line(nhwc_shape, 0, dtype)
    resample_backward(dy, plain, taps)
    monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", 0)
    streamed = _nans_past_a_line(nhwc_shape, 0, dtype)
    resample_backward(dy, streamed, taps)
    unaligned = _nans_past_a_line(nhwc_shape, 4, dtype)  # NumPy's own buffers start 16 bytes past a line
    resample_backward(dy, unaligned, taps)
    assert flags == [False, HARDWARE_HALF or dtype == np.float32, False]
    bits = np.uint32 if dtype == np.float32 else np.uint16
    np.testing.assert_array_equal(streamed.view(bits), plain.view(bits))
    np.testing.assert_array_equal(unaligned.view(bits), plain.view(bits))
    transposed = [dense(index, weight, n).T for (index, weight), n in zip(taps, (2, channels) + shape_in)]
    abs_sum = apply_axes([np.abs(m) for m in transposed], np.abs(dy.astype(np.float64)))
    assert_close(streamed, apply_axes(transposed, dy.astype(np.float64)), abs_sum, taps_per_output(transposed))


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


# --- float16 conversions: the bit-manipulation fallback and LLVM's hardware conversions ---------

@numba.njit
def _decode_bits(bits):
    out = np.empty(bits.size, np.float32)
    for i in range(bits.size):
        out[i] = half_to_float(bits[i])
    return out


@numba.njit
def _encode_bits(values):
    out = np.empty(values.size, np.uint16)
    for i in range(values.size):
        out[i] = float_to_half(values[i])
    return out


@numba.njit
def _decode_hardware(bits):
    out = np.empty(bits.size, np.float32)
    for i in range(bits.size):
        out[i] = half_bits_to_float(bits[i])
    return out


@numba.njit
def _encode_hardware(values):
    out = np.empty(values.size, np.uint16)
    for i in range(values.size):
        out[i] = float_to_half_bits(values[i])
    return out


CONVERSIONS = [pytest.param(_decode_bits, _encode_bits, id="bits"),
               pytest.param(_decode_hardware, _encode_hardware, id="hardware",
                            marks=pytest.mark.skipif(not HARDWARE_HALF, reason="no hardware half conversions"))]


@pytest.mark.parametrize("decode,encode", CONVERSIONS)
def test_half_decoding_is_exact_for_all_65536_patterns(decode, encode):
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    got = decode(bits)
    expected = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), expected[~nan].view(np.uint32))
    assert np.isnan(got[nan]).all()


@pytest.mark.parametrize("decode,encode", CONVERSIONS)
def test_half_encoding_rounds_to_nearest_even(decode, encode):
    rng = np.random.default_rng(2)
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    finite = halves[np.isfinite(halves)]
    finite.sort()
    midpoints = (finite[:-1] + finite[1:]) / 2  # exact ties, representable in float32
    values = np.concatenate([
        rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        midpoints.astype(np.float32), np.nextafter(midpoints.astype(np.float32), np.float32(np.inf)),
        np.nextafter(midpoints.astype(np.float32), np.float32(-np.inf)), finite.astype(np.float32),
        np.array([65504, 65519.996, 65520, 2.0 ** -25, 2.0 ** -26, 1e-45, np.inf, -np.inf], np.float32),
    ])
    with np.errstate(over="ignore"):
        expected = values.astype(np.float16)
    got = encode(values).view(np.float16)
    nan = np.isnan(values)
    np.testing.assert_array_equal(got[~nan].view(np.uint16), expected[~nan].view(np.uint16))
    assert np.isnan(got[nan]).all()


def test_public_gradient_uses_these_kernels(monkeypatch):
    """``gradops.resample_grad1(..., backend="fast")`` runs ``resample_backward`` (and the
    forward op ``resample_forward``), with results matching the dense reference."""
    import gradops
    from gradops._fast import resample as fast

    calls = []

    def spy(name, kernel):
        def wrapper(*args, **kwargs):
            calls.append(name)
            kernel(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(fast, "resample_backward", spy("backward", fast.resample_backward))
    monkeypatch.setattr(fast, "resample_forward", spy("forward", fast.resample_forward))
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
