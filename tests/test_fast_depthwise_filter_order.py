"""The fast backprop filter sums in the order its docstring documents (``_fast/depthwise/filter``):
per filter element, 2 lanes, lane ``ox % 2`` adding its (row, ox) terms in order; lane 0 + lane 1;
then min(64, N*OH, max(8, ceil(N*OH*OW / 256))) chunks of consecutive rows, added in chunk order,
and rounded once.

The model below follows that description with NumPy scalars of the accumulator type (each
product and each sum rounded, as IEEE arithmetic does), so the kernel must match it bit for bit
whatever code path it takes: vectors with lanes in registers (passes of 3 taps and taps alone),
lanes in memory, the channels past the last whole vector, strides (residue planes), multipliers
(staged rows), planar rows (staged) and half types.
"""

from __future__ import annotations

import numpy as np
import pytest

from gradops._fast import depthwise as fast
from gradops._fast.depthwise import plan as fast_plan
from gradops._fast.depthwise.call_plans import filter_plan

from fast_depthwise_cases import BF16, bits

LANES, CHUNKS = 2, 64


def lane_order_backprop_filter(x, dy, fh, fw, stride, dil, pad, out_dtype):
    """dF by the documented order, from NHWC ``x`` and ``dy``."""
    acc = np.float64 if out_dtype == np.float64 else np.float32
    x, dy = x.astype(acc), dy.astype(acc)
    n, h, w, c = x.shape
    _, oh, ow, width = dy.shape
    mult = width // c
    x_wide = np.repeat(x, mult, axis=3)  # channel k = c*M + m reads x channel c
    rows = n * oh
    chunks = min(CHUNKS, rows, max(8, -(-rows * ow // 256)))
    partial = np.zeros((chunks, fh * fw, width), acc)
    for chunk in range(chunks):
        lanes = np.zeros((fh * fw, LANES, width), acc)
        for row in range(chunk * rows // chunks, (chunk + 1) * rows // chunks):
            b, oy = divmod(row, oh)
            for ky in range(fh):
                iy = oy * stride[0] - pad[0] + ky * dil[0]
                if not 0 <= iy < h:
                    continue
                for kx in range(fw):
                    for ox in range(ow):
                        ix = ox * stride[1] - pad[1] + kx * dil[1]
                        if 0 <= ix < w:
                            lane = lanes[ky * fw + kx, ox % LANES]
                            lane[:] = lane + dy[b, oy, ox] * x_wide[b, iy, ix]
        total = lanes[:, 0].copy()
        for lane in range(1, LANES):
            total = total + lanes[:, lane]
        partial[chunk] = total
    result = partial[0].copy()
    for chunk in range(1, chunks):
        result = result + partial[chunk]
    return result.reshape(fh, fw, c, mult).astype(out_dtype)


CASES = [
    # (N, H, W, C, M, fh, fw, stride, dil, pad): pairs of positions, each tap's own heads and tails
    # around them, a channel tail past the last vector, and more rows than chunks
    (2, 9, 45, 35, 1, 3, 3, (1, 1), (1, 1), (1, 1)),
    (3, 25, 37, 16, 1, 3, 3, (1, 1), (1, 1), (1, 1)),
    (1, 6, 70, 32, 2, 3, 3, (1, 2), (1, 1), (1, 1)),
    (2, 7, 7, 40, 1, 5, 5, (1, 1), (1, 1), (2, 2)),
    (1, 8, 52, 17, 1, 3, 3, (2, 1), (2, 3), (2, 3)),
    (2, 5, 40, 8, 3, 2, 4, (1, 1), (1, 1), (0, 2)),
    (2, 6, 21, 24, 1, 3, 3, (1, 1), (1, 1), (0, 0)),  # pairs from position 0, odd row ends
    # narrow rows, more rows than chunks: float32 / float64 NHWC rows go several at a time
    (4, 40, 7, 24, 1, 3, 3, (1, 1), (1, 1), (1, 1)),
    (3, 50, 9, 16, 1, 5, 5, (1, 1), (1, 1), (2, 2)),
    # rows under 16 positions, lanes in memory (lanes._lane_rows_in_memory): 1152 channels (rows
    # a multiple of 512 bytes, EfficientNet-B0's 7x7 layer), C*M = 21 with a multiplier, stride 2
    (2, 7, 7, 1152, 1, 5, 5, (1, 1), (1, 1), (2, 2)),
    (2, 6, 6, 7, 3, 3, 3, (1, 1), (1, 1), (1, 1)),
    (1, 9, 11, 27, 1, 3, 3, (2, 2), (1, 1), (1, 1)),
    # narrow rows read in place (narrow_lanes): a filter row's taps a pass, the last pass filled up
    # with taps past the filter (4 taps at AVX2's passes of up to 4, 9 at AVX-512's of up to 7),
    # dilated taps, a row stride, groups across images, channels past the last vector
    (3, 6, 10, 24, 1, 2, 4, (1, 1), (1, 1), (0, 2)),
    (1, 10, 9, 32, 1, 9, 9, (1, 1), (1, 1), (4, 4)),
    (2, 8, 12, 40, 1, 3, 3, (1, 1), (2, 2), (2, 2)),
    (2, 9, 10, 40, 1, 7, 7, (2, 1), (1, 1), (3, 3)),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16],
                         ids=str)
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_backprop_filter_sums_in_the_documented_order(case, dtype, layout):
    n, h, w, c, m, fh, fw, stride, dil, pad = case
    rng = np.random.default_rng(sum(case[:5]))
    oh = (h + 2 * pad[0] - (fh - 1) * dil[0] - 1) // stride[0] + 1
    ow = (w + 2 * pad[1] - (fw - 1) * dil[1] - 1) // stride[1] + 1
    x = rng.standard_normal((n, h, w, c)).astype(dtype)
    dy = rng.standard_normal((n, oh, ow, c * m)).astype(dtype)
    expected = lane_order_backprop_filter(x, dy, fh, fw, stride, dil, pad, dtype)
    if layout == "NCHW":  # planar rows: NHWC-indexed views of NCHW data
        x_in = np.ascontiguousarray(x.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)
        dy_in = np.ascontiguousarray(dy.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)
    else:
        x_in, dy_in = x, dy
    out = np.empty((fh, fw, c, m), dtype)
    fast.backprop_filter(x_in, dy_in, out, *stride, *dil, *pad)
    np.testing.assert_array_equal(bits(out), bits(expected))


def _at_line_offset(array, elements):
    """A copy of ``array`` that starts ``elements`` elements past a 64-byte line."""
    raw = np.empty(array.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + elements * array.itemsize
    copy = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


LINE_CASES = [
    # (N, H, W, C, fh, fw, pad): rows of 16 positions or more read in place, every tap's first and
    # last position, runs of odd and even length
    (2, 6, 37, 16, 3, 3, (1, 1)),
    (1, 5, 20, 32, 5, 5, (2, 2)),
    (2, 4, 33, 48, 3, 3, (0, 0)),
]


@pytest.mark.parametrize("case", LINE_CASES)
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)], ids=str)
def test_rows_off_the_lines_are_walked_from_the_lines_in_the_documented_order(case, dtype):
    """Rows that start ``shift`` elements past a line (NumPy's large arrays start 16 bytes past
    one) are walked with vectors moved back to the line, the first of each position straddling
    the previous position (``lanes._part_terms``): at every offset, the same bits as the
    order's model; x and dy at different offsets are walked as they are."""
    n, h, w, c, fh, fw, pad = case
    rng = np.random.default_rng(w + c)
    oh, ow = h + 2 * pad[0] - fh + 1, w + 2 * pad[1] - fw + 1
    x = rng.standard_normal((n, h, w, c)).astype(dtype)
    dy = rng.standard_normal((n, oh, ow, c)).astype(dtype)
    expected = bits(lane_order_backprop_filter(x, dy, fh, fw, (1, 1), (1, 1), pad, dtype))
    line = 64 // dtype.itemsize
    for x_shift, dy_shift in [(s, s) for s in range(line)] + [(1, 2), (0, 3)]:
        x_in, dy_in = _at_line_offset(x, x_shift), _at_line_offset(dy, dy_shift)
        (_, x_off, x_st), (_, dy_off, dy_st) = fast_plan._kernel_view(x_in, True), fast_plan._kernel_view(dy_in, True)
        plan = filter_plan(x.shape, tuple(x_st.tolist()), dy.shape, tuple(dy_st.tolist()), dtype, (fh, fw, c, 1),
                           (1, 1, 1, 1, *pad))
        assert plan.walks_from_lines
        walked = fast_plan.filter_line_shift(x_in.reshape(-1), x_off, dy_in.reshape(-1), dy_off)
        assert walked == (x_shift % (fast_plan._FILTER_VECTOR_BYTES // dtype.itemsize) if x_shift == dy_shift else 0)
        out = np.empty((fh, fw, c, 1), dtype)
        fast.backprop_filter(x_in, dy_in, out, 1, 1, 1, 1, *pad)
        np.testing.assert_array_equal(bits(out), expected, err_msg=f"x at +{x_shift}, dy at +{dy_shift}")


# Narrow rows read in place (narrow_lanes) sum the padding's zeros where dy is finite: each case
# puts an inf or a NaN in dy at a position where a tap reads padding, or signed zeros everywhere.
SPECIAL_CASES = [
    # (N, H, W, C, fh, fw, pad)
    (2, 7, 7, 48, 5, 5, (2, 2)),
    (3, 9, 11, 40, 3, 3, (1, 1)),
]


@pytest.mark.parametrize("case", SPECIAL_CASES)
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)], ids=str)
@pytest.mark.parametrize("special", ["inf", "nan", "-inf", "signed zeros"])
def test_narrow_rows_skip_the_padding_where_dy_is_not_finite(case, dtype, special):
    """A tap that reaches padding adds nothing there, as the model does: an inf in dy at the edge
    of a row is multiplied only by the x it meets, never by a zero of the padding (which would
    make a NaN); dy of zeros of either sign against x of zeros of either sign leave every lane +0
    where the model's sums are +0."""
    n, h, w, c, fh, fw, pad = case
    rng = np.random.default_rng(c + fh)
    oh, ow = h + 2 * pad[0] - fh + 1, w + 2 * pad[1] - fw + 1
    x = rng.standard_normal((n, h, w, c)).astype(dtype)
    dy = rng.standard_normal((n, oh, ow, c)).astype(dtype)
    if special == "signed zeros":
        dy = np.copysign(np.zeros_like(dy), dy)
        x[..., ::2] = np.copysign(np.zeros_like(x[..., ::2]), x[..., ::2])
    else:
        value = {"inf": np.inf, "nan": np.nan, "-inf": -np.inf}[special]
        dy[0, 1, 0, 3] = value  # the first position of a row: the left taps read padding there
        dy[n - 1, oh - 1, ow - 1, c - 1] = value  # the last: the right taps do
    expected = bits(lane_order_backprop_filter(x, dy, fh, fw, (1, 1), (1, 1), pad, dtype))
    (_, x_off, x_st), (_, dy_off, dy_st) = fast_plan._kernel_view(x, True), fast_plan._kernel_view(dy, True)
    plan = filter_plan(x.shape, tuple(x_st.tolist()), dy.shape, tuple(dy_st.tolist()), dtype, (fh, fw, c, 1),
                       (1, 1, 1, 1, *pad))
    assert plan.path[0] == "narrow"
    out = np.empty((fh, fw, c, 1), dtype)
    fast.backprop_filter(x, dy, out, 1, 1, 1, 1, *pad)
    np.testing.assert_array_equal(bits(out), expected)
    if special != "signed zeros":
        assert np.isfinite(out).sum() < out.size < np.isfinite(out).sum() + 2 * fh * fw
