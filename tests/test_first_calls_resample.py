"""The resample family's NumPy tier (gradops._fast.resample.ordered, issue 23): a first call whose
kernel is not compiled yet is answered in NumPy, and must give the kernels' bits. Each case runs
the kernel, then the same call with the kernel refused (so through the gate, into the tier), and
compares bits; NaN results compare as NaN (their payload is unspecified, SPEC 3.7). The cases
cover every branch of ``_contract`` (asserted per test): row sums in groups and one row at a time,
the column axis copied, through slots, affine spans and NHWC pixels (in one sum and in memory),
pixels read directly, nearest pixel sums, float16 columns first, column blocks, streamed outputs,
and nearest forward selections."""

from __future__ import annotations

import numpy as np
import pytest
from fast_resample_references import nhwc, suite_taps
from test_fast_resample import CASES, broadcast_input, grid_taps, layout, random_case
from test_fast_resample import SUITE_SHAPES as FAST_SUITE_SHAPES

from gradops._fast import first_calls, simd
from gradops._fast import resample as fast_resample
from gradops._fast.half import HARDWARE_HALF
from gradops._fast.resample import ordered, resample_backward, resample_forward
from gradops._resample_plan import axis_taps, tap_key

BRANCHES = ("_direct", "_pixel_sums", "_columns_first", "_columns_nchw", "_pixels_from_row_sum")


@pytest.fixture
def tier(monkeypatch):
    """``tier(function, source, out_shape_or_out, taps)``: runs ``function`` (resample_forward or
    resample_backward) with its kernel refused, so that the NumPy tier answers; the branches the
    tier took are in ``tier.branches``."""
    def refuse(*args):
        raise first_calls.KernelNotReady(("tests", "refused", None), ())

    class Tier:
        def __init__(self):
            self.branches = set()

        def __call__(self, function, source, out, taps):
            with monkeypatch.context() as patch:
                patch.setenv(first_calls.MODE_VARIABLE, "numpy")
                patch.setattr(fast_resample, "share", refuse)
                patch.setattr(first_calls._compiles, "request", lambda recipe, signature: None)
                for name in BRANCHES:
                    patch.setattr(ordered, name, self._recording(name, getattr(ordered, name)))
                function(source, out, taps)

        def _recording(self, name, branch):
            def run(*args):
                self.branches.add(name)
                return branch(*args)
            return run

    return Tier()


def assert_same_bits(by_tier: np.ndarray, by_kernel: np.ndarray) -> None:
    nan = np.isnan(by_kernel)
    np.testing.assert_array_equal(np.isnan(by_tier), nan)
    width = f"u{by_kernel.itemsize}"
    np.testing.assert_array_equal(by_tier[~nan].view(width), by_kernel[~nan].view(width))


def both(tier, function, source, make_out, taps) -> None:
    """The kernel's output and the tier's, each into a fresh ``make_out()``, compared bit for bit."""
    by_kernel, by_tier = make_out(), make_out()
    function(source, by_kernel, taps)
    tier(function, source, by_tier, taps)
    assert_same_bits(by_tier, by_kernel)


def spread(rng: np.random.Generator, shape: tuple, dtype) -> np.ndarray:
    """Magnitudes over 2**-12 .. 2**12, so that float32 sums round and any other order shows."""
    return (rng.standard_normal(shape) * 2.0 ** rng.integers(-12, 13, shape)).astype(dtype)


@pytest.mark.parametrize("seed,dtype,src_kind,out_kind", CASES)
def test_random_geometries_and_layouts(tier, seed, dtype, src_kind, out_kind):
    """Ranks 1-4, random scales and offsets, identity axes, contiguous / permuted / strided /
    negative layouts of source and output (test_fast_resample's cases), both directions."""
    rng, n_in, n_out, taps, _ = random_case(seed)
    x = layout(rng, spread(rng, n_in, dtype), src_kind)
    both(tier, resample_forward, x, lambda: layout(rng, np.full(n_out, np.nan, dtype), out_kind), taps)
    dy = layout(rng, spread(rng, n_out, dtype), src_kind)
    both(tier, resample_backward, dy, lambda: layout(rng, np.full(n_in, np.nan, dtype), out_kind), taps)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_broadcast_inputs(tier, seed, dtype):
    """A source of stride 0 on one axis (one value repeated along it)."""
    rng, n_in, n_out, taps, _ = random_case(100 + seed)
    both(tier, resample_forward, broadcast_input(rng, n_in, dtype), lambda: np.empty(n_out, dtype), taps)
    both(tier, resample_backward, broadcast_input(rng, n_out, dtype), lambda: np.empty(n_in, dtype), taps)


# test_fast_resample's S1-like shapes, and linear 3x / 2.5x (4-slot pixels from more dy rows)
SUITE_SHAPES = FAST_SUITE_SHAPES + [((1, 3, 9, 20), (1, 3, 27, 50), "linear", "half")]


@pytest.mark.parametrize("shape_in,shape_out,mode,grid", SUITE_SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("channels", [3, 16, 37, 64])
def test_benchmark_shapes_channels_last(tier, shape_in, shape_out, mode, grid, dtype, channels):
    """NHWC pixels of 3, 16, 37 and 64 channels: pixels read directly (nearest 2x, linear 2x
    down), nearest pixel sums, 4-slot pixels, and the float16 columns-first path (linear 2x up)."""
    rng = np.random.default_rng(channels)
    shape_in, shape_out = (shape_in[0], channels) + shape_in[2:], (shape_out[0], channels) + shape_out[2:]
    taps = suite_taps(shape_in, shape_out, mode, grid)
    x, dy = nhwc(spread(rng, shape_in, dtype)), nhwc(spread(rng, shape_out, dtype))
    both(tier, resample_forward, x, lambda: nhwc(np.full(shape_out, np.nan, dtype)), taps)
    both(tier, resample_backward, dy, lambda: nhwc(np.full(shape_in, np.nan, dtype)), taps)


@pytest.mark.parametrize("shape_in,shape_out,mode,grid", SUITE_SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_benchmark_shapes_planar(tier, shape_in, shape_out, mode, grid, dtype):
    """NCHW rows: slots and affine spans of the column axis after the row sum."""
    rng = np.random.default_rng(5)
    taps = suite_taps(shape_in, shape_out, mode, grid)
    x, dy = spread(rng, shape_in, dtype), spread(rng, shape_out, dtype)
    both(tier, resample_forward, x, lambda: np.full(shape_out, np.nan, dtype), taps)
    both(tier, resample_backward, dy, lambda: np.full(shape_in, np.nan, dtype), taps)
    assert "_columns_nchw" in tier.branches


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("grid", ["half", "asymmetric", "shifted"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("channels_last", [False, True])
def test_twofold_ratios_with_wide_rows(tier, mode, grid, dtype, channels_last):
    """Affine spans of one and two phases, their clamped edges and empty phases."""
    rng = np.random.default_rng(13)
    for shape_in, shape_out in [((2, 3, 5, 24), (2, 3, 10, 48)), ((2, 3, 10, 48), (2, 3, 5, 24)),
                                ((2, 3, 7, 35), (2, 3, 14, 70))]:
        taps = [axis_taps(n, n, 1.0, 0.0, 0.0, mode, "half_up") for n in shape_in[:2]] + \
            [grid_taps(i, o, mode, grid) for i, o in zip(shape_in[2:], shape_out[2:])]
        convert = nhwc if channels_last else (lambda array: array)
        x, dy = convert(spread(rng, shape_in, dtype)), convert(spread(rng, shape_out, dtype))
        both(tier, resample_forward, x, lambda: convert(np.full(shape_out, np.nan, dtype)), taps)
        both(tier, resample_backward, dy, lambda: convert(np.full(shape_in, np.nan, dtype)), taps)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_rows_longer_than_a_column_block(tier, mode):
    """Rank 1, longer than one column block (tuning.ROW_ELEMENTS): block offsets of the slots,
    affine spans cut at block boundaries."""
    rng = np.random.default_rng(17)
    for n_in, n_out, scale, offsets in [(9000, 18000, 2.0, (0.5, -0.5)), (18000, 9000, 0.5, (0.5, -0.5)),
                                        (12000, 18011, 1.5, (0.5, -0.5))]:
        taps = [axis_taps(n_in, n_out, scale, *offsets, mode, "half_up")]
        both(tier, resample_forward, spread(rng, (n_in,), np.float32), lambda: np.empty(n_out, np.float32), taps)
        both(tier, resample_backward, spread(rng, (n_out,), np.float32), lambda: np.empty(n_in, np.float32), taps)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("mode,grid,shape_in,shape_out", [
    ("linear", "half", (6, 7), (13, 11)), ("nearest", "half", (5, 5), (12, 14)), ("nearest", "asym", (4, 4), (8, 8))])
def test_strided_channels(tier, dtype, mode, grid, shape_in, shape_out):
    """NHWC data whose channels are not contiguous (every second one of a larger array): the row
    sum one source row at a time, always weighted; an output of strided channels: NHWC pixels
    summed in memory."""
    rng = np.random.default_rng(3)
    channels = 5
    full_in, full_out = (2, channels) + shape_in, (2, channels) + shape_out
    taps = suite_taps(full_in, full_out, mode, grid)

    def every_second_channel(shape, data=None):
        big = np.full((shape[0],) + shape[2:] + (2 * shape[1],), np.nan, dtype)
        view = big[..., ::2].transpose(0, 3, 1, 2)
        if data is not None:
            view[...] = data
        return view

    dy = every_second_channel(full_out, spread(rng, full_out, dtype))
    both(tier, resample_backward, dy, lambda: every_second_channel(full_in), taps)
    x = every_second_channel(full_in, spread(rng, full_in, dtype))
    both(tier, resample_forward, x, lambda: every_second_channel(full_out), taps)
    assert "_pixels_from_row_sum" in tier.branches


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("shape_in,shape_out", [((6, 7), (12, 9)), ((5, 5), (12, 14)), ((9, 20), (18, 40))])
def test_non_finite_values_and_signed_zeros(tier, dtype, mode, channels_last, shape_in, shape_out):
    """inf, NaN and -0.0 among the data, and a region of -0.0 only, whose sums are -0.0 before
    the starting zero is added: -0.0 in the forward op, +0 in the gradient (SPEC 3.4, 3.6), so
    that every branch's starting zero shows in the bits."""
    rng = np.random.default_rng(11)
    full_in, full_out = (2, 16) + shape_in, (2, 16) + shape_out
    taps = suite_taps(full_in, full_out, mode, "half")
    convert = nhwc if channels_last else (lambda array: array)
    for shape, function, out_shape in ((full_in, resample_forward, full_out),
                                       (full_out, resample_backward, full_in)):
        data = spread(rng, shape, dtype)
        data.reshape(-1)[rng.choice(data.size, 12, replace=False)] = [np.inf, -np.inf, np.nan] * 4
        data.reshape(-1)[rng.choice(data.size, data.size // 4, replace=False)] = -0.0
        data[:, :, :shape[2] // 2] = -0.0
        both(tier, function, convert(data), lambda: convert(np.full(out_shape, np.nan, dtype)), taps)


@pytest.mark.skipif(not HARDWARE_HALF, reason="the columns-first path needs hardware half conversions")
@pytest.mark.parametrize("channels", [16, 64, 112])
def test_float16_columns_first(tier, channels):
    """float16 NHWC gradients of linear 2x upsampling take the columns-first path."""
    rng = np.random.default_rng(19)
    shape_in, shape_out = (3, channels, 9, 20), (3, channels, 18, 40)
    taps = suite_taps(shape_in, shape_out, "linear", "half")
    dy = nhwc(spread(rng, shape_out, np.float16))
    both(tier, resample_backward, dy, lambda: nhwc(np.full(shape_in, np.nan, np.float16)), taps)
    assert "_columns_first" in tier.branches


@pytest.mark.parametrize("dtype,channels", [(np.float32, 16), (np.float32, 37), (np.float16, 32)])
def test_pixels_read_directly_and_nearest_pixel_sums(tier, dtype, channels):
    """Nearest 2x gradients read their pixels directly, nearest ones of other scales (float32)
    sum them straight from the source rows; also written with streaming stores (threshold 0)."""
    rng = np.random.default_rng(23)
    for streaming in (False, True):
        with pytest.MonkeyPatch.context() as patch:
            if streaming:
                patch.setattr(simd, "STREAMING_THRESHOLD_BYTES", 0)
            for shape_in, shape_out, grid in [((8, 8), (16, 16), "asym"), ((5, 5), (12, 14), "half"),
                                              ((16, 16), (8, 8), "half")]:
                full_in, full_out = (2, channels) + shape_in, (2, channels) + shape_out
                for mode in ("nearest", "linear"):
                    taps = suite_taps(full_in, full_out, mode, grid)
                    dy = nhwc(spread(rng, full_out, dtype))
                    both(tier, resample_backward, dy, lambda: nhwc(np.full(full_in, np.nan, dtype)), taps)
    assert "_direct" in tier.branches
    assert dtype != np.float32 or "_pixel_sums" in tier.branches


def test_nearest_forward_copies_bits(tier):
    """A selection: NaN payloads and signed zeros come through as they are."""
    rng = np.random.default_rng(29)
    x = spread(rng, (2, 3, 5, 6), np.float32)
    x.view(np.uint32)[0, 0, 0, :3] = [0x7FC00001, 0xFFC12345, 0x80000000]
    taps = suite_taps((2, 3, 5, 6), (2, 3, 11, 13), "nearest", "half")
    by_kernel, by_tier = np.empty((2, 3, 11, 13), np.float32), np.empty((2, 3, 11, 13), np.float32)
    resample_forward(x, by_kernel, taps)
    tier(resample_forward, x, by_tier, taps)
    np.testing.assert_array_equal(by_tier.view(np.uint32), by_kernel.view(np.uint32))


def test_the_tier_declines_what_would_not_fit_in_half_the_memory_limit(monkeypatch):
    """Then the kernel compiles in the calling process instead (first_calls.gated)."""
    taps = suite_taps((2, 3, 8, 8), (2, 3, 16, 16), "linear", "half")
    dy, dx = np.ones((2, 3, 16, 16), np.float32), np.empty((2, 3, 8, 8), np.float32)
    planned = fast_resample._contract_plan(True, dy.shape, dy.strides, dx.shape, dx.strides, 4,
                                           tuple(tap_key(*t) for t in taps))
    monkeypatch.setattr(ordered, "memory_limit_bytes", lambda: 1 << 40)
    assert ordered.ordered_fits(dy, dx, planned) and ordered.select_fits(dy, dx, taps)
    monkeypatch.setattr(ordered, "memory_limit_bytes", lambda: 1 << 10)
    assert not ordered.ordered_fits(dy, dx, planned) and not ordered.select_fits(dy, dx, taps)
