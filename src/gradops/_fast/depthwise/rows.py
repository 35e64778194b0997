"""Tap paths for 3x3 filters and whole filter rows, channels-last: the taps of one filter row of
dilation 1 read consecutive positions, so neighbouring outputs share their source vectors, and 9
taps keep their weights in registers (SPEC 5.4; the same products and additions in the same
order as ``taps._taps_blocked``, so the same bits).

* ``_taps_rows_for(size, ascending)``: rows of 3, 5 or 7 taps, P positions at a time (8, or 7),
  then 4 (3-tap rows); 7 at a time for rows of 7k positions where the size has a ``seven``
  microkernel. The blocks are the generated microkernels (``row_template.py``,
  ``row_microkernels_*.py``) that ``selection.ROW_KERNELS`` chooses, with their P.
* ``_taps9_2x2``: the 9 taps of a 3x3 filter (any dilation) over rows that ``selection.
  NINE_BLOCKS`` allows keep all 18 weight vectors of a pair of k vectors in registers
  and go 2 positions at a time; ``_taps9_rows_for(ascending)`` does the same for whole filter
  rows, each row's 4 source positions loaded once for two outputs (``_window_2x2``), where the
  tier has the registers for it (``selection.NINE_ROWS``); with AVX2's 16, blocks of 6 positions
  of one 32-byte vector of channels, through a generated microkernel, instead.

Each row size and direction is a function of its own, made by a cached factory: a call compiles
the ones its plan may use (``plan._tap_paths``) and no others (issue 23, cold start).

Each returns how many positions it computed; ``planes._fill_plane_blocked`` sends the rest to
``taps._taps_blocked``. Rows read in place from memory are prefetched ahead
(``_PREFETCH_POSITIONS``, ``_PREFETCH_AHEAD_BYTES``), and the dy row the next output row stages
is requested a share at a time while this one is summed (``_PREFETCH_STAGED_BYTES``).
"""

from __future__ import annotations

import functools

from numba import njit

from .. import row_njit, simd
from ..target import codegen_target
from .codecs import _put
from .plan import _NINE_POSITIONS, _PREFETCH_AHEAD_BYTES, _PREFETCH_POSITIONS
from .selection import NINE_ROWS, row_blocks, row_microkernel, tier
from .taps import _channel_tail


@njit(inline="always")
def _run3(b, v0, v1, v2, w0, w1, w2):
    """``((b + v0*w0) + v1*w1) + v2*w2``: three taps of one filter row, in order."""
    return simd.muladd(simd.muladd(simd.muladd(b, v0, w0), v1, w1), v2, w2)


@njit(inline="always")
def _filter_rows(so, count, pitch):
    """``R`` (``-R``) if the taps come in rows of R = 3, 5 or 7 reading consecutive ascending
    (descending) positions: whole filter rows with dilation 1. Else 0."""
    d = so[1] - so[0] if count >= 2 else 0
    if d != pitch and d != -pitch:
        return 0
    for size in (3, 5, 7):
        if count % size != 0:
            continue
        rows = True
        for t in range(count):
            if t % size != 0 and so[t] - so[t - 1] != d:
                rows = False
                break
        if rows:
            return size if d > 0 else -size
    return 0


@njit(inline="always")
def _lowest_positions(low, so, count, rows, shift, pitch):
    """``low[r]``: the lowest source position that row ``r`` of taps (``_filter_rows``) reads,
    ``shift`` past ``so``."""
    size = abs(rows)
    for r in range(count // size):
        low[r] = so[size * r] + shift - (0 if rows > 0 else (size - 1) * pitch)


@functools.cache
def _taps_rows_for(size: int, ascending: bool):
    """``_taps_rows`` for filter rows of ``size`` (3, 5 or 7) taps read in one direction, with the
    microkernels ``selection.ROW_KERNELS`` chooses for that size: each (size, direction) is its
    own function, so that a call compiles the row code of its filter alone (issue 23, cold start;
    ``plan._tap_paths`` says which sizes a call may meet). The choices are closure constants:
    numba prunes the branches of the blocks a size has no kernel for before typing them."""
    blocks = row_blocks(codegen_target(), size, ascending)
    vector_bytes, main_positions = blocks.vector_bytes, blocks.positions
    main = row_microkernel(blocks.main, ascending)
    has_seven, has_four = blocks.seven is not None, blocks.four is not None
    seven_apart = has_seven and blocks.seven != blocks.main
    seven = row_microkernel(blocks.seven, ascending) if has_seven else main
    four = row_microkernel(blocks.four, ascending) if has_four else main

    @row_njit
    def _taps_rows(acc, a0, step, width, pitch, n_pos, src, so, wt, taps, count, low, prefetch, stream, ahead_src,
                   ahead, ahead_n):
        """``_taps_blocked`` for taps in filter rows of ``size`` taps (``_filter_rows``), P positions
        at a time over whole vectors (``RowBlocks.positions``: 8, or 7); returns how many positions
        it computed (the rest go to ``_taps_blocked``). Same products, same additions, same order.
        Where the size has a ``seven`` microkernel, rows over 7k positions that are not a multiple of
        P (7, 14, 21, 28; e.g. 14-position rows with zero margins, 7x7 layers) go 7 at a time.
        Otherwise a remainder after the blocks of P (but 4 positions of 3-tap rows, which take a
        block of 4) is covered by one more block of P ending at ``n_pos``, which computes again (and
        writes again, the same bits) up to P - 1 positions (not 4 + 2 + 1 in ``_taps_blocked``,
        which reloads the weights for each position). ``prefetch``: the rows are read in place from
        memory, so the first and last rows of taps (the source row that is new for this output row,
        in the adjoint and in the forward direction) are requested ``_PREFETCH_POSITIONS`` ahead.
        ``stream``: as in ``_taps_blocked``. ``ahead_src[ahead : ahead + ahead_n]``: a run the next
        call reads (the dy row the next output row stages), requested into L2 a share per block and
        vector (``_PREFETCH_STAGED_BYTES``)."""
        lanes = vector_bytes // acc.itemsize
        if width < lanes:
            return 0
        rows = size if ascending else -size
        sevens = has_seven and n_pos % 7 == 0 and n_pos % main_positions != 0
        positions = 7 if sevens else main_positions
        blocked = n_pos if sevens else n_pos // main_positions * main_positions
        overlap = not sevens and n_pos > blocked >= main_positions and not (has_four and n_pos - blocked == 4)
        n_blocks = blocked // positions + overlap
        share = simd.line_share(ahead_n, n_blocks * (width // lanes), simd.LINE_BYTES // ahead_src.itemsize)
        requested = 0
        for block in range(n_blocks):
            q = min(positions * block, n_pos - positions)
            _lowest_positions(low, so, count, rows, q * pitch, pitch)
            if prefetch:
                last = count // size - 1
                for r in range(0, last + 1, max(last, 1)):  # rows 0 and last, once each
                    front = low[r] + _PREFETCH_POSITIONS * pitch
                    for e in range(front, min(front + 8 * pitch, src.size), simd.LINE_BYTES // src.itemsize):
                        simd.prefetch(src, e)
            j = 0
            while j + lanes <= width:
                simd.prefetch_l2_range(ahead_src, ahead + requested, ahead + min(requested + share, ahead_n))
                requested += share
                a = a0 + q * step
                if seven_apart:  # a kernel per count, each compiled for its own
                    if sevens:
                        seven(acc, a, step, pitch, src, low, wt, taps, j, count, stream, 7)
                    else:
                        main(acc, a, step, pitch, src, low, wt, taps, j, count, stream, main_positions)
                else:  # one kernel, the count at run time (read by the "8or7" kernels)
                    main(acc, a, step, pitch, src, low, wt, taps, j, count, stream, positions)
                j += lanes
            _channel_tail(acc, a0 + q * step, step, width, pitch, positions, src, so, q * pitch, wt, taps, count, j)
        if overlap:
            blocked = n_pos
        if has_four and n_pos - blocked >= 4:
            # Four positions more (12 of 12, 4 of 4-7): fewer loads than _taps_blocked's 4 x 2 blocks.
            q = blocked
            _lowest_positions(low, so, count, rows, q * pitch, pitch)
            j = 0
            while j + lanes <= width:
                four(acc, a0 + q * step, step, pitch, src, low, wt, taps, j, count, stream, 4)
                j += lanes
            _channel_tail(acc, a0 + q * step, step, width, pitch, 4, src, so, q * pitch, wt, taps, count, j)
            blocked += 4
        return blocked

    return _taps_rows


@njit(inline="always")
def _tap_2x2(b0, c0, b1, c1, src, s, pitch, lanes, w, v):
    """One tap of ``_taps9_2x2`` for positions q, q + 1 (``pitch`` apart) x vectors j, j + lanes."""
    return (simd.muladd(b0, simd.load(src, s), w), simd.muladd(c0, simd.load(src, s + lanes), v),
            simd.muladd(b1, simd.load(src, s + pitch), w), simd.muladd(c1, simd.load(src, s + pitch + lanes), v))


@njit(inline="always")
def _weights9(wt, taps, j):
    """The weight vectors at ``j`` of the 9 taps of a 3x3 filter, kept in registers."""
    return (simd.load(wt, taps[0] + j), simd.load(wt, taps[1] + j), simd.load(wt, taps[2] + j),
            simd.load(wt, taps[3] + j), simd.load(wt, taps[4] + j), simd.load(wt, taps[5] + j),
            simd.load(wt, taps[6] + j), simd.load(wt, taps[7] + j), simd.load(wt, taps[8] + j))


@njit(inline="always")
def _put_2x2(acc, o, step, lanes, b0, c0, b1, c1, stream):
    """The sums of positions q, q + 1 (``step`` apart, from ``o``) x vectors j, j + lanes."""
    _put(acc, o, b0, stream)
    _put(acc, o + lanes, c0, stream)
    _put(acc, o + step, b1, stream)
    _put(acc, o + step + lanes, c1, stream)


@row_njit
def _taps9_2x2(acc, a0, step, width, pitch, n_pos, src, so, wt, taps, stream):
    """``_taps_blocked`` for exactly 9 taps and ``width`` a multiple of two vectors, with the
    weights in registers: per pair of vectors the 18 weight vectors are loaded once, then the
    positions go two at a time (4 sums, each over the 9 taps in order from +0: the same products
    and additions as every other path). Returns how many positions it computed (the even part
    of ``n_pos``; the last of an odd count goes to ``_taps_blocked``)."""
    lanes = simd.lanes(acc)
    s0, s1, s2, s3, s4, s5, s6, s7, s8 = so[0], so[1], so[2], so[3], so[4], so[5], so[6], so[7], so[8]
    for j in range(0, width, 2 * lanes):
        w0, w1, w2, w3, w4, w5, w6, w7, w8 = _weights9(wt, taps, j)
        v0, v1, v2, v3, v4, v5, v6, v7, v8 = _weights9(wt, taps, j + lanes)
        q = 0
        while q + 2 <= n_pos:
            p = q * pitch + j
            b0 = simd.zeros(acc)
            c0 = b1 = c1 = b0
            b0, c0, b1, c1 = _tap_2x2(b0, c0, b1, c1, src, s0 + p, pitch, lanes, w0, v0)
            b0, c0, b1, c1 = _tap_2x2(b0, c0, b1, c1, src, s1 + p, pitch, lanes, w1, v1)
            b0, c0, b1, c1 = _tap_2x2(b0, c0, b1, c1, src, s2 + p, pitch, lanes, w2, v2)
            b0, c0, b1, c1 = _tap_2x2(b0, c0, b1, c1, src, s3 + p, pitch, lanes, w3, v3)
            b0, c0, b1, c1 = _tap_2x2(b0, c0, b1, c1, src, s4 + p, pitch, lanes, w4, v4)
            b0, c0, b1, c1 = _tap_2x2(b0, c0, b1, c1, src, s5 + p, pitch, lanes, w5, v5)
            b0, c0, b1, c1 = _tap_2x2(b0, c0, b1, c1, src, s6 + p, pitch, lanes, w6, v6)
            b0, c0, b1, c1 = _tap_2x2(b0, c0, b1, c1, src, s7 + p, pitch, lanes, w7, v7)
            b0, c0, b1, c1 = _tap_2x2(b0, c0, b1, c1, src, s8 + p, pitch, lanes, w8, v8)
            _put_2x2(acc, a0 + q * step + j, step, lanes, b0, c0, b1, c1, stream)
            q += 2
    return n_pos // 2 * 2


@njit(inline="always")
def _window_2x2(b0, c0, b1, c1, src, p, pitch, lanes, w0, v0, w1, v1, w2, v2, ascending):
    """One filter row of 3 taps reading consecutive positions, for positions q, q + 1 x vectors
    j, j + lanes: the 4 source positions from ``p`` (the lowest one read) are loaded once and
    serve the 6 (position, tap) products of each vector, added in tap order."""
    x0, y0 = simd.load(src, p), simd.load(src, p + lanes)
    x1, y1 = simd.load(src, p + pitch), simd.load(src, p + pitch + lanes)
    x2, y2 = simd.load(src, p + 2 * pitch), simd.load(src, p + 2 * pitch + lanes)
    x3, y3 = simd.load(src, p + 3 * pitch), simd.load(src, p + 3 * pitch + lanes)
    if ascending:  # tap i reads position + i
        return (_run3(b0, x0, x1, x2, w0, w1, w2), _run3(c0, y0, y1, y2, v0, v1, v2),
                _run3(b1, x1, x2, x3, w0, w1, w2), _run3(c1, y1, y2, y3, v0, v1, v2))
    # tap i reads position + 2 - i (the adjoint walks the filter row backwards)
    return (_run3(b0, x2, x1, x0, w0, w1, w2), _run3(c0, y2, y1, y0, v0, v1, v2),
            _run3(b1, x3, x2, x1, w0, w1, w2), _run3(c1, y3, y2, y1, v0, v1, v2))


@njit(inline="always")
def _rows9_2x2(acc, a0, step, pitch, q, stop, src, j, lanes, low, w, v, ascending, prefetch, stream):
    """Positions q, q + 1, ... < ``stop`` of ``_taps9_rows`` two at a time for vectors j, j + lanes;
    ``low``: the lowest position each filter row reads, ``w`` / ``v``: the 9 weight vectors of
    each vector."""
    line = simd.LINE_BYTES // src.itemsize
    # The row that is new for this output row: the last filter row forward, the first adjoint.
    ahead = (low[2] if ascending else low[0]) + _PREFETCH_AHEAD_BYTES // src.itemsize
    while q + 2 <= stop:
        p = q * pitch + j
        if prefetch:  # a hint: no fault past the end of src
            for e in range(ahead + p, ahead + p + 2 * pitch, line):
                simd.prefetch(src, e)
        b0 = simd.zeros(acc)
        c0 = b1 = c1 = b0
        b0, c0, b1, c1 = _window_2x2(b0, c0, b1, c1, src, low[0] + p, pitch, lanes, w[0], v[0], w[1], v[1], w[2],
                                     v[2], ascending)
        b0, c0, b1, c1 = _window_2x2(b0, c0, b1, c1, src, low[1] + p, pitch, lanes, w[3], v[3], w[4], v[4], w[5],
                                     v[5], ascending)
        b0, c0, b1, c1 = _window_2x2(b0, c0, b1, c1, src, low[2] + p, pitch, lanes, w[6], v[6], w[7], v[7], w[8],
                                     v[8], ascending)
        _put_2x2(acc, a0 + q * step + j, step, lanes, b0, c0, b1, c1, stream)
        q += 2


@functools.cache
def _taps9_rows_for(ascending: bool):
    """``_taps9_rows`` for filter rows read in one direction (as ``_taps_rows_for``): the
    tier's ``selection.NINE_ROWS``."""
    nine = NINE_ROWS[tier(codegen_target())]
    if nine.stem is not None:
        return _taps9_row_blocks_for(nine.stem, nine.positions, ascending)

    @row_njit
    def _taps9_rows(acc, a0, step, width, pitch, n_pos, src, so, wt, taps, low, prefetch, stream, ahead_src, ahead,
                    ahead_n):
        """``_taps9_2x2`` for a 3x3 filter of dilation 1 (``_filter_rows`` 3 or -3): each filter
        row's 3 taps read 4 consecutive positions for two outputs, so 4 loads serve 6 products
        instead of 6. ``prefetch``: the rows are read in place, so the newest one (which comes from
        memory; the older ones were read for the previous output row) is requested
        ``_PREFETCH_AHEAD_BYTES`` ahead; past its end, that is the start of the row that is new for
        the next output row: with fewer loads, rows from memory would wait on it.
        ``ahead_src[ahead : ahead + ahead_n]`` (the dy row the next output row stages) is requested
        a share per ``_NINE_POSITIONS`` positions, between the position loops: inside them the
        request slowed the loops down (they keep 30 of the 32 vector registers busy)."""
        lanes = simd.lanes(acc)
        _lowest_positions(low, so, 9, 3 if ascending else -3, 0, pitch)
        stop = n_pos // 2 * 2
        parts = -(-stop // _NINE_POSITIONS)
        share = simd.line_share(ahead_n, parts * (width // (2 * lanes)), simd.LINE_BYTES // ahead_src.itemsize)
        requested = 0
        for j in range(0, width, 2 * lanes):
            w, v = _weights9(wt, taps, j), _weights9(wt, taps, j + lanes)
            for q in range(0, stop, _NINE_POSITIONS):
                simd.prefetch_range(ahead_src, ahead + requested, ahead + min(requested + share, ahead_n))
                requested += share
                part_stop = min(q + _NINE_POSITIONS, stop)
                _rows9_2x2(acc, a0, step, pitch, q, part_stop, src, j, lanes, low, w, v, ascending, prefetch, stream)
        return stop

    return _taps9_rows


@functools.cache
def _taps9_row_blocks_for(stem: str, positions: int, ascending: bool):
    """``_taps9_rows`` through the generated microkernel ``stem`` (``NINE_ROWS``), which computes
    ``positions`` positions of one vector of channels with the 9 weight vectors in registers."""
    kernel = row_microkernel(stem, ascending)
    vector_bytes = NINE_ROWS[tier(codegen_target())].multiple_bytes  # the microkernel's vectors: rows of whole ones
    rows = 3 if ascending else -3

    @row_njit
    def _taps9_rows(acc, a0, step, width, pitch, n_pos, src, so, wt, taps, low, prefetch, stream, ahead_src, ahead,
                    ahead_n):
        """Blocks of ``positions`` positions, each block's vectors of channels in turn, so that its
        source lines serve all its channels while they are in L1; a last block that does not fit
        ends at ``n_pos`` and computes again (and writes again, the same bits) positions of the
        block before, as ``_taps_rows`` does. Returns how many positions it computed: all, or none
        of fewer than ``positions``. ``prefetch``: as the other ``_taps9_rows``, the newest row
        requested ``_PREFETCH_AHEAD_BYTES`` ahead of each block's positions;
        ``ahead_src[ahead : ahead + ahead_n]`` a share per block."""
        lanes = vector_bytes // acc.itemsize
        if n_pos < positions:
            return 0
        n_blocks = -(-n_pos // positions)
        line = simd.LINE_BYTES // src.itemsize
        share = simd.line_share(ahead_n, n_blocks, simd.LINE_BYTES // ahead_src.itemsize)
        requested = 0
        for block in range(n_blocks):
            q = min(positions * block, n_pos - positions)
            _lowest_positions(low, so, 9, rows, q * pitch, pitch)
            if prefetch:  # a hint: no fault past the end of src
                newest = (low[2] if ascending else low[0]) + _PREFETCH_AHEAD_BYTES // src.itemsize
                for e in range(newest, newest + positions * pitch, line):
                    simd.prefetch(src, e)
            simd.prefetch_range(ahead_src, ahead + requested, ahead + min(requested + share, ahead_n))
            requested += share
            a = a0 + q * step
            for j in range(0, width, lanes):
                kernel(acc, a, step, pitch, src, low, wt, taps, j, 9, stream, positions)
        return n_pos

    return _taps9_rows
