"""The backprop-filter microkernels: terms dy * x added into lanes (SPEC 5.4, order in ``filter``).

A filter element (tap t, channel k) has 2 lanes; the term of dy position ox goes to lane
``ox % 2``, and each lane adds its terms in (row, ox) order. Any loop order that keeps that
order per lane gives the same bits, so the channels-last kernel takes the one that suits the
registers: a vector of channels at a time; per pass, 3 taps (in tap order ``ky*fw + kx``) with
both lanes of each in registers while the rows go by, a pair of positions at a time (one dy
load per position serves the pass's taps). The two lanes give each accumulator one addition
per pair, so the additions of one register do not wait on each other (``_TAPS_PER_PASS``).

Lanes live in memory as ``[tap][lane][k]`` between groups of rows and are added (lane 0, then
lane 1) at the end of a chunk (``_add_lanes``).

Rows read in place that start ``shift`` elements past a multiple of the vector width (NumPy's
large arrays start 16 bytes past a 64-byte line) are walked with their vectors of channels moved
back to that multiple (``plan.filter_line_shift``): a vector that spans two lines costs two
loads. Each position's first vector then straddles two positions: its first ``shift`` elements
are the previous position's last channels (the other lane), the rest the position's first ones.
A tap's slots are ``[extra][lane 0][lane 1]``, each ``[k]``, so the straddling register of lane
1 is stored over lane 0's last channels and lane 1's first, and lane 0's over the extra slot's
last channels, which stand for lane 1's until ``_add_lanes`` moves them there. A tap's first
position adds its own channels only, and the position after its last one adds the last one's
channels only (``_part_terms``, around each row's whole vectors). Every element of a register
still adds the terms of one lane in (row, ox) order: the same sums, the same bits.
"""

from __future__ import annotations

from numba import njit

from .. import row_njit, simd
from .plan import _FILTER_VECTOR_BYTES, _LANES

# Taps per pass over the rows: 2 accumulators each, 2 dy vectors and the x loads in 16 registers.
_TAPS_PER_PASS = 3

# An x column that no tap has: where a tap reads no x row for a dy row (it reads padding). Real
# columns may be negative: a tap's first position can be left of the row it reads.
_NO_ROW = -(1 << 62)


@njit(inline="always")
def _term(acc, d, dp, xs, xp, width, ox):
    """``acc`` plus the term of position ``ox``: ``d[dp + ox*width:] * xs[xp + ox*width:]``."""
    return simd.muladd(acc, simd.load_as(acc, d, dp + ox * width), simd.load_as(acc, xs, xp + ox * width))


@njit(inline="always")
def _tap_run(even, odd, d, dp, xs, xp, width, start, end):
    """One tap's lanes (``even``: ox % 2 == 0, ``odd``) plus the terms of positions [start, end),
    ascending."""
    ox = start
    if ox < end and ox % 2 == 1:
        odd = _term(odd, d, dp, xs, xp, width, ox)
        ox += 1
    while ox + 2 <= end:
        even = _term(even, d, dp, xs, xp, width, ox)
        odd = _term(odd, d, dp, xs, xp, width, ox + 1)
        ox += 2
    if ox < end:
        even = _term(even, d, dp, xs, xp, width, ox)
    return even, odd


@njit(inline="always")
def _pair3(e0, o0, e1, o1, e2, o2, d, dp, xs, x0, x1, x2, width, ox):
    """Three taps' lanes plus the terms of positions ox (even) and ox + 1: two dy loads."""
    de = simd.load_as(e0, d, dp + ox * width)
    do = simd.load_as(e0, d, dp + (ox + 1) * width)
    at = ox * width
    e0 = simd.muladd(e0, de, simd.load_as(e0, xs, x0 + at))
    e1 = simd.muladd(e1, de, simd.load_as(e0, xs, x1 + at))
    e2 = simd.muladd(e2, de, simd.load_as(e0, xs, x2 + at))
    o0 = simd.muladd(o0, do, simd.load_as(e0, xs, x0 + at + width))
    o1 = simd.muladd(o1, do, simd.load_as(e0, xs, x1 + at + width))
    o2 = simd.muladd(o2, do, simd.load_as(e0, xs, x2 + at + width))
    return e0, o0, e1, o1, e2, o2


@njit(inline="always")
def _pair3_adjacent(e0, o0, e1, o1, e2, o2, d, dp, xs, x0, width, ox):
    """``_pair3`` for taps that read adjacent x positions (x1 = x0 + width, x2 = x1 + width): the
    odd position's first two taps read the even one's last two x vectors again, four x loads."""
    de = simd.load_as(e0, d, dp + ox * width)
    do = simd.load_as(e0, d, dp + (ox + 1) * width)
    at = x0 + ox * width
    xa, xb = simd.load_as(e0, xs, at), simd.load_as(e0, xs, at + width)
    xc, xd = simd.load_as(e0, xs, at + 2 * width), simd.load_as(e0, xs, at + 3 * width)
    e0, e1, e2 = simd.muladd(e0, de, xa), simd.muladd(e1, de, xb), simd.muladd(e2, de, xc)
    o0, o1, o2 = simd.muladd(o0, do, xb), simd.muladd(o1, do, xc), simd.muladd(o2, do, xd)
    return e0, o0, e1, o1, e2, o2


@njit(inline="always")
def _three_run(e0, o0, e1, o1, e2, o2, d, dp, xs, x0, x1, x2, width, start, end):
    """``_tap_run`` of three taps over the positions [start, end) that all three reach."""
    if start < end and start % 2 == 1:
        o0 = _term(o0, d, dp, xs, x0, width, start)
        o1 = _term(o1, d, dp, xs, x1, width, start)
        o2 = _term(o2, d, dp, xs, x2, width, start)
        start += 1
    ox = start
    if x1 == x0 + width and x2 == x1 + width:  # stride 1, dilation 1: taps kx, kx + 1, kx + 2 of a row
        while ox + 2 <= end:
            e0, o0, e1, o1, e2, o2 = _pair3_adjacent(e0, o0, e1, o1, e2, o2, d, dp, xs, x0, width, ox)
            ox += 2
    while ox + 2 <= end:
        e0, o0, e1, o1, e2, o2 = _pair3(e0, o0, e1, o1, e2, o2, d, dp, xs, x0, x1, x2, width, ox)
        ox += 2
    if ox < end:
        e0 = _term(e0, d, dp, xs, x0, width, ox)
        e1 = _term(e1, d, dp, xs, x1, width, ox)
        e2 = _term(e2, d, dp, xs, x2, width, ox)
    return e0, o0, e1, o1, e2, o2


@njit(inline="always")
def lane_slots(shift):
    """Slots per tap of a lane table: one more than the lanes with a ``shift`` (module docstring)."""
    return _LANES + 1 if shift > 0 else _LANES


@njit(inline="always")
def _three_taps(lanes, like, width, j, t, slots, d, d_rows, first_row, end_row, xs, x_cols, lo, hi, whole):
    """Taps t .. t + 2, channels j .. j + vector: their lanes plus the terms of rows [first_row,
    end_row). Each row's positions that all three taps reach go in pairs; a tap's own positions
    before and after them, and whole rows where some tap reads no x row, tap by tap: every lane
    ascending. ``whole`` = 1: the vector straddling each position and the one before, whose
    whole vectors start at each tap's second position (``_part_terms`` adds the rest); else 0."""
    at = (t * slots + slots - _LANES) * width + j
    at1, at2 = at + slots * width, at + 2 * slots * width  # taps t + 1, t + 2
    e0, o0 = simd.load_as(like, lanes, at), simd.load_as(like, lanes, at + width)
    e1, o1 = simd.load_as(like, lanes, at1), simd.load_as(like, lanes, at1 + width)
    e2, o2 = simd.load_as(like, lanes, at2), simd.load_as(like, lanes, at2 + width)
    lo0, lo1, lo2 = lo[t] + whole, lo[t + 1] + whole, lo[t + 2] + whole
    hi0, hi1, hi2 = hi[t], hi[t + 1], hi[t + 2]
    start, end = max(lo0, lo1, lo2), min(hi0, hi1, hi2)
    shared = start < end  # some positions all three taps reach
    for r in range(first_row, end_row):
        dp = d_rows[r] + j
        c0, c1, c2 = x_cols[r, t], x_cols[r, t + 1], x_cols[r, t + 2]
        if not shared or c0 == _NO_ROW or c1 == _NO_ROW or c2 == _NO_ROW:
            if c0 != _NO_ROW:
                e0, o0 = _tap_run(e0, o0, d, dp, xs, c0 + j, width, lo0, hi0)
            if c1 != _NO_ROW:
                e1, o1 = _tap_run(e1, o1, d, dp, xs, c1 + j, width, lo1, hi1)
            if c2 != _NO_ROW:
                e2, o2 = _tap_run(e2, o2, d, dp, xs, c2 + j, width, lo2, hi2)
            continue
        x0, x1, x2 = c0 + j, c1 + j, c2 + j
        e0, o0 = _tap_run(e0, o0, d, dp, xs, x0, width, lo0, start)
        e1, o1 = _tap_run(e1, o1, d, dp, xs, x1, width, lo1, start)
        e2, o2 = _tap_run(e2, o2, d, dp, xs, x2, width, lo2, start)
        e0, o0, e1, o1, e2, o2 = _three_run(e0, o0, e1, o1, e2, o2, d, dp, xs, x0, x1, x2, width, start, end)
        e0, o0 = _tap_run(e0, o0, d, dp, xs, x0, width, end, hi0)
        e1, o1 = _tap_run(e1, o1, d, dp, xs, x1, width, end, hi1)
        e2, o2 = _tap_run(e2, o2, d, dp, xs, x2, width, end, hi2)
    simd.store(lanes, at, e0)
    simd.store(lanes, at + width, o0)
    simd.store(lanes, at1, e1)
    simd.store(lanes, at1 + width, o1)
    simd.store(lanes, at2, e2)
    simd.store(lanes, at2 + width, o2)


@row_njit
def _part_terms(lanes, width, first_tap, end_tap, slots, d, d_rows, r, xs, x_cols, lo, hi, shift, previous):
    """The straddling lanes of taps ``first_tap`` .. ``end_tap`` - 1 plus row r's part terms: the
    term of a tap's first position in its last elements only (that position's own channels;
    ``previous`` False, before the row's whole vectors), or of the position after its last one in
    its first ``shift`` elements only (the last position's channels; True, after them), into lane
    ``ox % 2``. Called, not inlined: inlined into ``_lane_rows``, its code slowed the other
    vectors' passes (docs/performance.md, "Depthwise")."""
    like = simd.zeros_of(lanes, _FILTER_VECTOR_BYTES)
    for tap in range(first_tap, end_tap):
        column = x_cols[r, tap]
        if column == _NO_ROW or lo[tap] >= hi[tap]:
            continue
        ox = hi[tap] if previous else lo[tap]
        at = (tap * slots + slots - _LANES + ox % 2) * width - shift
        lane = simd.load_as(like, lanes, at)
        term = _term(lane, d, d_rows[r] - shift, xs, column - shift, width, ox)
        part = simd.choose_first(shift, term, lane) if previous else simd.choose_first(shift, lane, term)
        simd.store(lanes, at, part)


@njit(inline="always")
def _one_tap(lanes, like, width, j, t, slots, d, d_rows, first_row, end_row, xs, x_cols, lo, hi, whole):
    """``_three_taps`` for tap t alone."""
    at = (t * slots + slots - _LANES) * width + j
    even, odd = simd.load_as(like, lanes, at), simd.load_as(like, lanes, at + width)
    for r in range(first_row, end_row):
        if x_cols[r, t] != _NO_ROW:
            even, odd = _tap_run(even, odd, d, d_rows[r] + j, xs, x_cols[r, t] + j, width, lo[t] + whole, hi[t])
    simd.store(lanes, at, even)
    simd.store(lanes, at + width, odd)


@row_njit
def _lane_rows(lanes, width, d, d_rows, n_rows, xs, x_cols, lo, hi, d_next, d_next_n, x_next, x_next_n, shift):
    """Channels-last, ``n_rows`` dy rows (row r at ``d_rows[r]``): for each tap t, row r with
    ``x_cols[r, t] != _NO_ROW``, ox in [lo[t], hi[t]) and k < width, ``lanes[(t*2 + ox % 2)*width
    + k] += d[d_rows[r] + ox*width + k] * xs[x_cols[r, t] + ox*width + k]``, each lane receiving
    its terms in (row, ox) order.

    One vector of channels at a time, so that its lines of the rows stay in L1 while the passes
    of taps revisit them (and the next vector, in the same lines); the taps in passes of 3
    (``_three_taps``), the last one or two alone. The channels past the last whole vector go
    through ``_lane_rows_in_memory``. Meanwhile the lines the next rows read first, ``d[d_next:][:d_next_n]`` and
    ``xs[x_next:][:x_next_n]``, are requested into L2 a share per (vector, pass): the walk reads
    lines far apart, which the CPU's prefetchers do not foresee. ``shift`` > 0: rows and vectors
    of channels that start ``shift`` elements past a multiple of the vector width, walked from it
    (module docstring; the vector straddling each position and the one before in the same passes,
    a row at a time), into lanes of ``lane_slots(shift)`` slots per tap; the width is then whole
    lines, so whole vectors."""
    like = simd.zeros_of(lanes, _FILTER_VECTOR_BYTES)
    v = _FILTER_VECTOR_BYTES // lanes.itemsize
    vectors = width - width % v
    taps = lo.size
    passes = -(-taps // _TAPS_PER_PASS)
    slots = lane_slots(shift)
    line = simd.LINE_BYTES // d.itemsize
    d_share = simd.line_share(d_next_n, vectors // v * passes, line)
    x_share = simd.line_share(x_next_n, vectors // v * passes, line)
    requested = 0
    for j in range(0, vectors, v):
        for t in range(0, taps, _TAPS_PER_PASS):
            simd.prefetch_l2_range(d, d_next + requested * d_share, d_next + min((requested + 1) * d_share, d_next_n))
            simd.prefetch_l2_range(xs, x_next + requested * x_share, x_next + min((requested + 1) * x_share, x_next_n))
            requested += 1
            # the straddling vector a row at a time, each row's part terms around its whole
            # vectors; one copy of the pass for every vector (a second one makes the kernel's
            # compile much longer: docs/performance.md)
            straddling = shift > 0 and j == 0
            blocks, block_rows = (n_rows, 1) if straddling else (1, n_rows)
            whole = 1 if straddling else 0
            end_tap = min(t + _TAPS_PER_PASS, taps)
            for block in range(blocks):
                first_row, end_row = block * block_rows, (block + 1) * block_rows
                if straddling:
                    _part_terms(lanes, width, t, end_tap, slots, d, d_rows, block, xs, x_cols, lo, hi, shift, False)
                if end_tap - t == _TAPS_PER_PASS:
                    _three_taps(lanes, like, width, j - shift, t, slots, d, d_rows, first_row, end_row, xs, x_cols, lo,
                                hi, whole)
                else:  # the last one or two taps
                    for alone in range(t, end_tap):
                        _one_tap(lanes, like, width, j - shift, alone, slots, d, d_rows, first_row, end_row, xs,
                                 x_cols, lo, hi, whole)
                if straddling:
                    _part_terms(lanes, width, t, end_tap, slots, d, d_rows, block, xs, x_cols, lo, hi, shift, True)
    # the channels past the last whole vector (none with a shift: whole lines, so whole vectors)
    _lane_rows_in_memory(lanes, width, d, d_rows, n_rows, xs, x_cols, lo, hi, vectors)


@row_njit
def _lane_rows_in_memory(lanes, width, d, d_rows, n_rows, xs, x_cols, lo, hi, first):
    """``_lane_rows`` with the lanes in memory, for channels ``first`` .. ``width`` - 1: for each
    row, tap and position, a run of those channels, contiguous in the lanes, dy and x alike. All
    channels for rows narrower than ``plan._FILTER_REGISTER_POSITIONS``, where a vector of channels
    at a time would pay a pass's setup for a few positions and read lines ``width`` elements apart
    (a multiple of 512 bytes maps them all into a few sets of the L1 cache); the channels past the
    last whole vector for ``_lane_rows``."""
    n = width - first
    if n <= 0:
        return
    for r in range(n_rows):
        for t in range(lo.size):
            if x_cols[r, t] == _NO_ROW:
                continue
            for ox in range(lo[t], hi[t]):
                at = (t * _LANES + ox % _LANES) * width + first
                lane = lanes[at:at + n]
                dd = d[d_rows[r] + ox * width + first:d_rows[r] + ox * width + width]
                xx = xs[x_cols[r, t] + ox * width + first:x_cols[r, t] + ox * width + width]
                for k in range(n):
                    lane[k] += dd[k] * xx[k]


@row_njit
def _add_lanes(lanes, width, totals, shift):
    """``totals[t*width + k]`` = lane 0 + lane 1 of (t, k). ``shift`` > 0 (``_lane_rows``): lane
    1's last ``shift`` channels are in the slot before lane 0, moved to their lane first."""
    slots = lane_slots(shift)
    for t in range(totals.size // width):
        first = (t * slots + slots - _LANES) * width
        for k in range(width - shift, width):
            lanes[first + width + k] = lanes[first - width + k]
        for k in range(width):
            totals[t * width + k] = lanes[first + k] + lanes[first + width + k]
