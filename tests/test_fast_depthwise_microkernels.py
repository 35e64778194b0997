"""The depthwise filter-row microkernels, each on its own (the XNNPACK way: a tester per family):
every generated microkernel against a brute-force NumPy loop that sums in the documented order
(``row_template``: per position, the taps of each filter row in order from +0, two roundings per
tap), bit for bit, in float32 and float64; the generated modules against their template; the
selection table against the family."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from numba import njit

from gradops._fast import simd
from gradops._fast.depthwise import row_template, selection

FAMILY = {kernel.name: kernel for kernel in row_template.FAMILY}


@functools.cache
def _harness(name: str):
    """A jitted loop over the vectors of a row of ``width`` channels, calling microkernel ``name``."""
    spec = FAMILY[name]
    kernel = selection.row_microkernel(spec.stem, spec.ascending)
    vector_bytes = spec.vector_bytes

    @njit
    def run(acc, a, step, pitch, src, low, wt, taps, count, stream, positions, width):
        lanes = vector_bytes // acc.itemsize
        j = 0
        while j + lanes <= width:
            kernel(acc, a, step, pitch, src, low, wt, taps, j, count, stream, positions)
            j += lanes
    return run


def _brute_force(spec, src, low, wt, taps, count, pitch, positions, width, dtype):
    """The sums the template documents, one NumPy float operation (one rounding) at a time."""
    sums = []
    for q in range(positions):
        total = np.zeros(width, dtype)
        for t in range(count):
            row, i = divmod(t, spec.taps)
            v = q + (i if spec.ascending else spec.taps - 1 - i)
            start = low[row] + v * pitch
            total = total + src[start:start + width] * wt[taps[t]:taps[t] + width]
        sums.append(total)
    return sums


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(FAMILY))
def test_microkernel_against_brute_force(name, dtype):
    """Two filter rows (count = 2T), two vectors of channels, a source pitch and an output step
    wider than the row; every position the kernel computes is the brute force's, bit for bit,
    and nothing else in the output is touched (for the ``or`` kernels, with either count)."""
    spec = FAMILY[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    width = 2 * simd.VECTOR_BYTES // np.dtype(dtype).itemsize
    pitch, step, rows = width + 3, width + 5, 2
    count = rows * spec.taps
    span = (spec.positions + spec.taps) * pitch
    src = rng.standard_normal(rows * span + 7).astype(dtype)
    src[rng.random(src.size) < 0.05] = -0.0  # signed zeros must survive a sum from +0
    low = np.array([7 + r * span for r in range(rows)], np.int64)
    wt = rng.standard_normal(count * width + 11).astype(dtype)
    taps = (rng.permutation(count) * width + 11).astype(np.int64)  # tap t's weights, in any order
    counts = (spec.positions, spec.positions - 1) if spec.or_one_less else (spec.positions,)
    for positions in counts:
        acc = np.full(spec.positions * step + 9, np.nan, dtype)
        _harness(name)(acc, 9, step, pitch, src, low, wt, taps, count, False, positions, width)
        expected = np.full_like(acc, np.nan)
        for q, total in enumerate(_brute_force(spec, src, low, wt, taps, count, pitch, positions, width, dtype)):
            expected[9 + q * step:9 + q * step + width] = total
        np.testing.assert_array_equal(acc.view(np.uint8), expected.view(np.uint8))


def test_streamed_microkernel_stores():
    """With ``stream``, the sums are written with non-temporal stores (each vector on a 64-byte
    line): the same bits."""
    name = "row3_8_64b_descending"  # 64-byte vectors, each stored on a line
    dtype = np.float32
    width = simd.VECTOR_BYTES // 4
    rng = np.random.default_rng(3)
    src = rng.standard_normal(64 * width).astype(dtype)
    low = np.array([0, 12 * width], np.int64)
    wt = rng.standard_normal(6 * width).astype(dtype)
    taps = (np.arange(6) * width).astype(np.int64)
    raw = np.zeros(8 * width + 64, dtype)
    start = (-raw.ctypes.data) % simd.LINE_BYTES // 4
    streamed, plain = raw[start:start + 8 * width], np.zeros(8 * width, dtype)
    for acc, stream in ((streamed, True), (plain, False)):
        _harness(name)(acc, 0, width, width, src, low, wt, taps, 6, stream, 8, width)
    np.testing.assert_array_equal(streamed.view(np.uint32), plain.view(np.uint32))
    expected = _brute_force(FAMILY[name], src, low, wt, taps, 6, width, 8, width, dtype)
    np.testing.assert_array_equal(plain.view(np.uint32), np.concatenate(expected).view(np.uint32))


def test_generated_modules_are_current():
    """``row_microkernels_*.py`` are what the template writes (regenerate with ``python -m
    gradops._fast.depthwise.row_template``)."""
    for path, text in row_template.generate().items():
        assert path.read_text() == text, f"{path.name} is out of date"


def test_selection_table_covers_the_family():
    """Every stem of the table names a generated microkernel of the right shape in both
    directions and width, and every generated microkernel is selected on some tier for some filter
    row size."""
    selected = set()
    for tier in selection.ROW_KERNELS.values():
        for size, blocks in tier.items():
            for stem, positions in ((blocks.eight, 8), (blocks.seven, 7), (blocks.four, 4)):
                if stem is None:
                    continue
                for direction in ("ascending", "descending"):
                    spec = FAMILY[f"{stem}_{direction}"]
                    assert (spec.taps, spec.vector_bytes) == (size, blocks.vector_bytes)
                    assert positions in (spec.positions, spec.positions - spec.or_one_less)
                    selected.add(spec.name)
    assert selected == set(FAMILY)
