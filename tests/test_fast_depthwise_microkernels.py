"""The depthwise channels-last microkernels, each on its own (the XNNPACK way: a tester per
family), against brute-force NumPy loops that sum in the documented order (the taps in order from
+0, two roundings per tap), bit for bit: every generated filter-row microkernel (``row_template``)
in float32 and float64, the generated modules against their template and the selection table
against the family; then the other tap paths of a row segment (any taps, 9 taps with their
weights in registers, 3x3 filter rows) and the filter-row driver."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from numba import njit

from gradops._fast import simd
from gradops._fast.depthwise import row_template, selection, tile_template

FAMILY = {kernel.name: kernel for kernel in row_template.FAMILY}
TILES = {kernel.name: kernel for kernel in tile_template.FAMILY}


def _segment_brute_force(src, so, wt, taps, count, pitch, n_pos, width, dtype):
    """A row segment's sums by definition, ``+0 + sum over t < count, in order, of src[so[t] +
    q*pitch + j] * wt[taps[t] + j]`` per position q < n_pos, one NumPy operation (one rounding) at
    a time."""
    sums = []
    for q in range(n_pos):
        total = np.zeros(width, dtype)
        for t in range(count):
            start = so[t] + q * pitch
            total = total + src[start:start + width] * wt[taps[t]:taps[t] + width]
        sums.append(total)
    return sums


def _check_segment(acc, done, step, pitch, src, so, wt, taps, count, width, dtype):
    """Positions ``0 .. done`` hold the brute force's sums, bit for bit; nothing else is written."""
    expected = np.full_like(acc, np.nan)
    for q, total in enumerate(_segment_brute_force(src, so, wt, taps, count, pitch, done, width, dtype)):
        expected[9 + q * step:9 + q * step + width] = total
    np.testing.assert_array_equal(acc.view(np.uint8), expected.view(np.uint8))


def _row_sources(spec, low, count, pitch):
    """``so`` of a row microkernel's taps as a segment's (below): tap t reads position q of its
    filter row from ``low[t // T]`` plus its place in the row (read in the kernel's direction)."""
    places = [t % spec.taps if spec.ascending else spec.taps - 1 - t % spec.taps for t in range(count)]
    return [low[t // spec.taps] + places[t] * pitch for t in range(count)]


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


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(FAMILY))
def test_microkernel_against_brute_force(name, dtype):
    """Two filter rows (count = 2T; three for the ``nine`` schedule, which takes a 3x3 filter's),
    two vectors of channels, a source pitch and an output step wider than the row; every position
    the kernel computes is the brute force's, bit for bit, and nothing else in the output is
    touched (for the ``or`` kernels, with either count)."""
    spec = FAMILY[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    width = 2 * simd.VECTOR_BYTES // np.dtype(dtype).itemsize
    pitch, step, rows = width + 3, width + 5, 3 if spec.schedule == "nine" else 2  # nine: the 3 rows of a 3x3 filter
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
        _check_segment(acc, positions, step, pitch, src, _row_sources(spec, low, count, pitch), wt, taps, count, width,
                       dtype)


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
    expected = _segment_brute_force(src, _row_sources(FAMILY[name], low, 6, width), wt, taps, 6, width, 8, width, dtype)
    np.testing.assert_array_equal(plain.view(np.uint32), np.concatenate(expected).view(np.uint32))


@pytest.mark.parametrize("template", [row_template, tile_template])
def test_generated_modules_are_current(template):
    """``row_microkernels_*.py`` and ``tile_microkernels.py`` are what their templates write
    (regenerate with ``python -m gradops._fast.depthwise.row_template`` / ``tile_template``)."""
    for path, text in template.generate().items():
        assert path.read_text() == text, f"{path.name} is out of date"


def test_selection_table_covers_the_family():
    """Every stem of the table names a generated microkernel of the right shape and width in the
    direction it is selected for (``RowBlocks.forward``: the forward's own blocks), and every
    generated microkernel is selected on some tier for some filter row size."""
    selected = set()
    for tier in selection.ROW_KERNELS.values():
        for size, table_blocks in tier.items():
            for direction in ("ascending", "descending"):
                blocks = table_blocks.read(direction == "ascending")
                for stem, positions in blocks.stems():
                    spec = FAMILY[f"{stem}_{direction}"]
                    assert (spec.taps, spec.vector_bytes) == (size, blocks.vector_bytes)
                    assert positions in (spec.positions, spec.positions - spec.or_one_less)
                    selected.add(spec.name)
    for nine in selection.NINE_ROWS.values():
        if nine.stem is not None:
            for direction in ("ascending", "descending"):
                spec = FAMILY[f"{nine.stem}_{direction}"]
                assert (spec.schedule, spec.taps, spec.positions) == ("nine", 3, nine.positions)
                assert spec.vector_bytes == nine.multiple_bytes
                selected.add(spec.name)
    assert selected == set(FAMILY)


# The other channels-last tap paths of a row segment (``planes._fill_plane_blocked`` chooses):
# each against ``_segment_brute_force``.

def _segment(rng, dtype, count, width, n_pos, so_pattern=None):
    """Random sources and weights for a segment: tap t reads ``src[so[t] + q*pitch + j]``, with
    ``so`` from ``so_pattern(pitch)`` or random offsets; returns everything the kernels take."""
    pitch, step = width + 3, width + 5
    span = (n_pos + 16) * pitch
    src = rng.standard_normal(count * span + 64).astype(dtype)
    src[rng.random(src.size) < 0.05] = -0.0
    so = (np.array(so_pattern(pitch), np.int64) if so_pattern else
          (rng.permutation(count) * span + rng.integers(0, 8, count)).astype(np.int64))
    wt = rng.standard_normal(count * width + 11).astype(dtype)
    taps = (rng.permutation(count) * width + 11).astype(np.int64)
    acc = np.full(n_pos * step + 9, np.nan, dtype)
    return acc, step, pitch, src, so, wt, taps


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("count, width_vectors, tail, n_pos", [(1, 1, 0, 1), (4, 2, 3, 6), (9, 3, 5, 9),
                                                               (11, 0, 7, 5), (2, 4, 0, 13)])
def test_taps_blocked(dtype, count, width_vectors, tail, n_pos):
    """Any taps (``taps._taps_blocked``): blocks of 4 positions x 2 vectors, 4 x 1, 1 x 4, 1 x 1,
    and the masked channel tail past the last whole vector."""
    from gradops._fast.depthwise.taps import _taps_blocked

    width = width_vectors * simd.VECTOR_BYTES // np.dtype(dtype).itemsize + tail
    rng = np.random.default_rng(count * 100 + width + n_pos)
    acc, step, pitch, src, so, wt, taps = _segment(rng, dtype, count, width, n_pos)
    _taps_blocked(acc, 9, step, width, pitch, n_pos, src, so, wt, taps, count, np.zeros(count, np.int64), False)
    _check_segment(acc, n_pos, step, pitch, src, so, wt, taps, count, width, dtype)


@pytest.mark.parametrize("n_pos", [2, 7, 10])
def test_nine_taps_with_weights_in_registers(n_pos):
    """9 taps anywhere, two vectors of channels (``rows._taps9_2x2``): the even part of the
    positions, two at a time."""
    from gradops._fast.depthwise.rows import _taps9_2x2

    dtype = np.float32
    width = 2 * simd.VECTOR_BYTES // 4
    acc, step, pitch, src, so, wt, taps = _segment(np.random.default_rng(n_pos), dtype, 9, width, n_pos)
    done = _taps9_2x2(acc, 9, step, width, pitch, n_pos, src, so, wt, taps, False)
    assert done == n_pos // 2 * 2
    _check_segment(acc, done, step, pitch, src, so, wt, taps, 9, width, dtype)


def _filter_rows_pattern(size: int, rows: int, ascending: bool):
    """``so`` of ``rows`` filter rows of ``size`` taps reading consecutive positions, each row
    walked ascending (the forward) or descending (the adjoint)."""
    def pattern(pitch):
        sign = 1 if ascending else -1
        return [(r * 40 + 20) * pitch + sign * i * pitch for r in range(rows) for i in range(size)]
    return pattern


@pytest.mark.parametrize("ascending", [True, False])
@pytest.mark.parametrize("n_pos", [3, 6, 8, 11, 13])
def test_nine_taps_in_filter_rows(ascending, n_pos):
    """A 3x3 filter of dilation 1 (``rows._taps9_rows_for``, the code-generation tier's
    ``selection.NINE_ROWS``): with AVX-512, each row's 4 source positions serve two outputs, the
    even part of the positions; with AVX2, blocks of 6 positions, the last one overlapping the
    block before, all the positions or none of fewer than 6."""
    from gradops._fast.depthwise.rows import _taps9_rows_for
    from gradops._fast.target import codegen_target

    dtype = np.float32
    width = 2 * simd.VECTOR_BYTES // 4
    acc, step, pitch, src, so, wt, taps = _segment(np.random.default_rng(n_pos), dtype, 9, width, n_pos,
                                                   _filter_rows_pattern(3, 3, ascending))
    done = _taps9_rows_for(ascending)(acc, 9, step, width, pitch, n_pos, src, so, wt, taps, np.zeros(4, np.int64),
                                      True, False, src, 0, 0)
    nine = selection.NINE_ROWS[selection.tier(codegen_target())]
    if nine.stem is None:
        assert done == n_pos // 2 * 2
    else:
        assert done == (n_pos if n_pos >= nine.positions else 0)
    _check_segment(acc, done, step, pitch, src, so, wt, taps, 9, width, dtype)


@pytest.mark.parametrize("ascending", [True, False])
@pytest.mark.parametrize("size, n_pos, tail", [(3, 4, 0), (3, 12, 5), (3, 14, 0), (5, 21, 3), (5, 13, 0),
                                               (7, 8, 0), (7, 19, 2)])
def test_filter_row_driver(ascending, size, n_pos, tail):
    """``rows._taps_rows_for``, which runs the microkernels ``selection`` chooses over a segment:
    blocks of 8, of 7 (7k positions), an overlapping last block, 3-tap blocks of 4, the masked
    channel tail; returns how many positions it computed (the rest go tap by tap)."""
    from gradops._fast.depthwise.rows import _taps_rows_for

    dtype = np.float32
    width = simd.VECTOR_BYTES // 4 + tail
    rows = 2
    count = rows * size
    acc, step, pitch, src, so, wt, taps = _segment(np.random.default_rng(size * n_pos), dtype, count, width, n_pos,
                                                   _filter_rows_pattern(size, rows, ascending))
    done = _taps_rows_for(size, ascending)(acc, 9, step, width, pitch, n_pos, src, so, wt, taps, count,
                                           np.zeros(rows + 1, np.int64), False, False, src, 0, 0)
    assert 0 < done <= n_pos
    _check_segment(acc, done, step, pitch, src, so, wt, taps, count, width, dtype)


@functools.cache
def _tile_harness(name: str):
    """A jitted loop over the tiles of a row of ``width`` channels, calling tile ``name``."""
    spec = TILES[name]
    kernel = selection.tile_microkernel(name)
    step_vectors, vector_bytes = spec.vectors, spec.vector_bytes

    @njit
    def run(acc, a, step, pitch, src, s, wt, taps, count, width):
        lanes = vector_bytes // acc.itemsize
        j = 0
        while j + step_vectors * lanes <= width:
            kernel(acc, a, step, pitch, src, s, wt, taps, j, count, False)
            j += step_vectors * lanes
    return run


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(TILES))
def test_tile_against_brute_force(name, dtype):
    """Each tile microkernel over two of its tiles of channels, 5 taps anywhere: its positions
    hold the brute force's sums, bit for bit; nothing else is written."""
    spec = TILES[name]
    width = 2 * spec.vectors * spec.vector_bytes // np.dtype(dtype).itemsize
    rng = np.random.default_rng(sum(map(ord, name)))
    acc, step, pitch, src, so, wt, taps = _segment(rng, dtype, 5, width, spec.positions)
    _tile_harness(name)(acc, 9, step, pitch, src, so, wt, taps, 5, width)
    _check_segment(acc, spec.positions, step, pitch, src, so, wt, taps, 5, width, dtype)


def test_tile_table_covers_the_family():
    """Every tile the table names is generated with the table's width and the shape its field
    says, and every generated tile is selected on some tier."""
    selected = set()
    for tiles in selection.TILE_KERNELS.values():
        for field, shape in (("four_by_two", (4, 2)), ("four_by_one", (4, 1)), ("one_by_four", (1, 4)),
                             ("one_by_one", (1, 1))):
            spec = TILES[getattr(tiles, field)]
            assert (spec.positions, spec.vectors, spec.vector_bytes) == (*shape, tiles.vector_bytes)
            selected.add(spec.name)
    assert selected == set(TILES)
