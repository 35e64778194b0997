"""The backprop-filter microkernels: terms dy * x added into lanes (SPEC 5.4, order in ``filter``).

A filter element (tap t, channel k) has 16 lanes; the term of dy position ox goes to lane
``ox % 16``, and each lane adds its terms in (row, ox) order. Any loop order that keeps that
order per lane gives the same bits, so the channels-last kernel takes the one that suits the
registers: a vector of channels at a time, every tap, and per tap 4 or 8 lanes held in vector
registers while the rows' 16-position blocks stream by, each block adding one term to each
lane. A block that the tap's positions cover only in part selects the products of the positions
inside (``_term``): a select, not an add of zero, so a lane's sum is the same.

Lanes live in memory as ``[tap][lane][k]`` (channels-last, ``n_lanes`` lanes per tap) or
``[tap][k][lane]`` (planar rows, ``_lane_dot``), and are added in lane order at the end of a
chunk (``_add_lanes``).

Rows read in place that start ``shift`` elements past a 64-byte line (NumPy's large arrays start
16 bytes past one) are walked with their vectors of channels moved back to the line
(``_lane_rows``' ``shift``; ``plan.filter_line_shift``): a vector that spans two lines costs two
loads. Each position's first vector then straddles two positions: its first ``shift`` lanes are
the previous position's last channels, the rest the position's first ones. ``[lane][k]`` has the
layout of ``[position][k]``, so the straddling register of lane L is stored over lane L - 1's
last channels and lane L's first; lane 0's, over an extra slot before lane 0 of each tap (slot 0;
the lanes are slots 1-16), which holds lane 15's last channels (``_add_lanes``). Every element of
a register still adds the terms of one lane in (row, ox) order: the same sums, the same bits.
"""

from __future__ import annotations

from numba import njit

from .. import row_njit, simd
from ..target import codegen_target
from .plan import _LANES

# Lanes held in registers per tap and vector of channels: 8 where the target has 32 vector
# registers (AVX-512), 4 with 16 (AVX2), where 8 would spill. A constant of the target, as
# ``plan._ROW_SIZES`` is, so that a kernel compiles one variant only.
_EIGHT_LANES = codegen_target().avx512

# An x column that no tap has: where a tap reads no x row for a dy row (it reads padding). Real
# columns may be negative: a tap's first position can be left of the row it reads.
_NO_ROW = -(1 << 62)


@njit(inline="always")
def _term(r, d, dp, xs, xp, width, ox, lo, hi):
    """Lane register ``r`` plus the term of position ``ox`` (``d[dp + ox*width:] *
    xs[xp + ox*width:]``) if lo <= ox < hi, else ``r`` unchanged; an outside position reads
    position ``lo`` instead, which is in the rows, and drops the product."""
    inside = lo <= ox < hi
    p = ox if inside else lo
    return simd.choose(inside, simd.muladd(r, simd.load(d, dp + p * width), simd.load(xs, xp + p * width)), r)


@njit(inline="always")
def _whole4(r0, r1, r2, r3, d, dp, xs, xp, width, ox):
    """Four lanes' terms of positions ox .. ox + 3, all inside."""
    return (simd.muladd(r0, simd.load(d, dp + ox * width), simd.load(xs, xp + ox * width)),
            simd.muladd(r1, simd.load(d, dp + (ox + 1) * width), simd.load(xs, xp + (ox + 1) * width)),
            simd.muladd(r2, simd.load(d, dp + (ox + 2) * width), simd.load(xs, xp + (ox + 2) * width)),
            simd.muladd(r3, simd.load(d, dp + (ox + 3) * width), simd.load(xs, xp + (ox + 3) * width)))


@njit(inline="always")
def _partial4(r0, r1, r2, r3, d, dp, xs, xp, width, ox, lo, hi):
    """Four lanes' terms of positions ox .. ox + 3, those inside [lo, hi) (``_term``)."""
    return (_term(r0, d, dp, xs, xp, width, ox, lo, hi), _term(r1, d, dp, xs, xp, width, ox + 1, lo, hi),
            _term(r2, d, dp, xs, xp, width, ox + 2, lo, hi), _term(r3, d, dp, xs, xp, width, ox + 3, lo, hi))


@njit(inline="always")
def _load4(lanes, at, step):
    return (simd.load(lanes, at), simd.load(lanes, at + step), simd.load(lanes, at + 2 * step),
            simd.load(lanes, at + 3 * step))


@njit(inline="always")
def _store4(lanes, at, step, r0, r1, r2, r3):
    simd.store(lanes, at, r0)
    simd.store(lanes, at + step, r1)
    simd.store(lanes, at + 2 * step, r2)
    simd.store(lanes, at + 3 * step, r3)


@njit(inline="always")
def _row_terms(r0, r1, r2, r3, r4, r5, r6, r7, d, dp, xs, xp, width, lo, hi, g):
    """Lanes g .. g + 3 (g .. g + 7 with ``_EIGHT_LANES``) plus the terms of one row's positions
    [lo, hi), block by block of 16 positions; in the blocks at either end that [lo, hi) covers
    in part, the products of the positions inside."""
    first_whole, end_whole = (lo + _LANES - 1) // _LANES, hi // _LANES
    if lo // _LANES < first_whole:  # the block holding lo, in part
        ox = lo // _LANES * _LANES + g
        r0, r1, r2, r3 = _partial4(r0, r1, r2, r3, d, dp, xs, xp, width, ox, lo, hi)
        if _EIGHT_LANES:
            r4, r5, r6, r7 = _partial4(r4, r5, r6, r7, d, dp, xs, xp, width, ox + 4, lo, hi)
    for block in range(first_whole, end_whole):
        ox = block * _LANES + g
        r0, r1, r2, r3 = _whole4(r0, r1, r2, r3, d, dp, xs, xp, width, ox)
        if _EIGHT_LANES:  # a second set of four: the additions of one set do not wait on the other's
            r4, r5, r6, r7 = _whole4(r4, r5, r6, r7, d, dp, xs, xp, width, ox + 4)
    if first_whole <= end_whole and end_whole * _LANES < hi:  # the block holding hi - 1, in part
        ox = end_whole * _LANES + g
        r0, r1, r2, r3 = _partial4(r0, r1, r2, r3, d, dp, xs, xp, width, ox, lo, hi)
        if _EIGHT_LANES:
            r4, r5, r6, r7 = _partial4(r4, r5, r6, r7, d, dp, xs, xp, width, ox + 4, lo, hi)
    return r0, r1, r2, r3, r4, r5, r6, r7


@njit(inline="always")
def _masked(r, k, d, dp, xs, xp, width, ox, shift, previous):
    """Lane register ``r`` plus the term of position ``ox``'s straddling vector in its first
    ``shift`` lanes only (``previous``: position ox - 1's last channels) or in the others only
    (position ox's first channels), if ``k`` == 0; else ``r`` unchanged."""
    if k != 0:
        return r
    term = simd.muladd(r, simd.load(d, dp + ox * width), simd.load(xs, xp + ox * width))
    return simd.choose_first(shift, term, r) if previous else simd.choose_first(shift, r, term)


@njit(inline="always")
def _masked4(r0, r1, r2, r3, k, d, dp, xs, xp, width, ox, shift, previous):
    """``_masked`` of register ``k`` of four (none when ``k`` is outside 0-3)."""
    return (_masked(r0, k, d, dp, xs, xp, width, ox, shift, previous),
            _masked(r1, k - 1, d, dp, xs, xp, width, ox, shift, previous),
            _masked(r2, k - 2, d, dp, xs, xp, width, ox, shift, previous),
            _masked(r3, k - 3, d, dp, xs, xp, width, ox, shift, previous))


@njit(inline="always")
def lane_slots(n_lanes, shift):
    """Slots per tap of a lane table: one more than the lanes with a ``shift`` (module docstring)."""
    return n_lanes + 1 if shift > 0 else n_lanes


@row_njit
def _lane_rows(lanes, n_lanes, width, d, d_rows, n_rows, xs, x_cols, lo, hi, d_next, d_next_n, x_next, x_next_n,
               shift):
    """Channels-last, ``n_rows`` dy rows (row r at ``d_rows[r]``): for each tap t, row r with
    ``x_cols[r, t] != _NO_ROW``, ox in [lo[t], hi[t]) and k < width, ``lanes[(t*n_lanes + ox % 16)*width
    + k] += d[d_rows[r] + ox*width + k] * xs[x_cols[r, t] + ox*width + k]``, each lane receiving
    its terms in (row, ox) order.

    One vector of channels at a time, so that its lines of the rows and of the lanes stay in L1
    while the taps revisit them; per tap, 4 or 8 lanes (``_EIGHT_LANES``; ``n_lanes`` is a
    multiple of 8) stay in registers over all the rows. The channels past the
    last whole vector go one by one. Meanwhile the lines the next rows read first,
    ``d[d_next:][:d_next_n]`` and ``xs[x_next:][:x_next_n]``, are requested into L2 a share per
    (vector, tap): the walk reads lines far apart, which the CPU's prefetchers do not foresee.
    ``shift`` > 0: rows and vectors of channels that start ``shift`` elements past a line,
    walked from the line (module docstring), into lanes of ``n_lanes + 1`` slots per tap."""
    v = simd.lanes(lanes)
    vectors = width - width % v
    taps = lo.size
    group = 8 if _EIGHT_LANES else 4
    slots = lane_slots(n_lanes, shift)
    line = simd.LINE_BYTES // d.itemsize
    d_share = simd.line_share(d_next_n, vectors // v * taps, line)
    x_share = simd.line_share(x_next_n, vectors // v * taps, line)
    requested = 0
    for j in range(0, vectors, v):
        for t in range(taps):
            simd.prefetch_l2_range(d, d_next + requested * d_share, d_next + min((requested + 1) * d_share, d_next_n))
            simd.prefetch_l2_range(xs, x_next + requested * x_share, x_next + min((requested + 1) * x_share, x_next_n))
            requested += 1
            if lo[t] >= hi[t]:
                continue
            # With a shift, vector 0 of each position straddles the one before (module docstring):
            # positions lo + 1 .. hi - 1 whole; at lo its own channels only (lo - 1 is outside the
            # tap's positions), at hi position hi - 1's last channels only. lo is the first
            # position of its lane and hi the last, so every lane keeps its order.
            straddles = shift > 0 and j == 0
            first, last = lo[t] % _LANES, hi[t] % _LANES
            whole_from = lo[t] + 1 if straddles else lo[t]
            for g in range(0, n_lanes, group):
                at = (t * slots + slots - n_lanes + g) * width + j - shift
                r0, r1, r2, r3 = _load4(lanes, at, width)
                r4, r5, r6, r7 = _load4(lanes, at + 4 * width if _EIGHT_LANES else at, width)
                for r in range(n_rows):
                    if x_cols[r, t] == _NO_ROW:
                        continue
                    dp, xp = d_rows[r] + j - shift, x_cols[r, t] + j - shift
                    if straddles and g <= first < g + group:
                        r0, r1, r2, r3 = _masked4(r0, r1, r2, r3, first - g, d, dp, xs, xp, width, lo[t], shift, False)
                        if _EIGHT_LANES:
                            r4, r5, r6, r7 = _masked4(r4, r5, r6, r7, first - g - 4, d, dp, xs, xp, width, lo[t],
                                                      shift, False)
                    r0, r1, r2, r3, r4, r5, r6, r7 = _row_terms(r0, r1, r2, r3, r4, r5, r6, r7, d, dp, xs, xp, width,
                                                                whole_from, hi[t], g)
                    if straddles and g <= last < g + group:
                        r0, r1, r2, r3 = _masked4(r0, r1, r2, r3, last - g, d, dp, xs, xp, width, hi[t], shift, True)
                        if _EIGHT_LANES:
                            r4, r5, r6, r7 = _masked4(r4, r5, r6, r7, last - g - 4, d, dp, xs, xp, width, hi[t],
                                                      shift, True)
                _store4(lanes, at, width, r0, r1, r2, r3)
                if _EIGHT_LANES:
                    _store4(lanes, at + 4 * width, width, r4, r5, r6, r7)
    for k in range(vectors, width):  # never with a shift (plan.filter_line_shift: whole vectors)
        for t in range(taps):
            base = t * n_lanes * width + k
            for r in range(n_rows):
                if x_cols[r, t] != _NO_ROW:
                    d0, x0 = d_rows[r] + k, x_cols[r, t] + k
                    for ox in range(lo[t], hi[t]):
                        lanes[base + (ox % _LANES) * width] += d[d0 + ox * width] * xs[x0 + ox * width]


@row_njit
def _lane_rows_in_memory(lanes, n_lanes, width, d, d_rows, n_rows, xs, x_cols, lo, hi):
    """``_lane_rows`` with the lanes in memory: for each row, tap and position, a whole run of
    ``width`` channels, contiguous in the lanes, dy and x alike. For rows narrower than a block
    of 16 positions, where the lanes would take no whole block through registers and the
    vector-at-a-time walk would read lines ``width`` elements apart (a multiple of 512 bytes
    maps them all into a few sets of the L1 cache)."""
    for r in range(n_rows):
        for t in range(lo.size):
            if x_cols[r, t] == _NO_ROW:
                continue
            for ox in range(lo[t], hi[t]):
                lane = lanes[(t * n_lanes + ox % _LANES) * width:(t * n_lanes + ox % _LANES + 1) * width]
                dd = d[d_rows[r] + ox * width:d_rows[r] + (ox + 1) * width]
                xx = xs[x_cols[r, t] + ox * width:x_cols[r, t] + (ox + 1) * width]
                for k in range(width):
                    lane[k] += dd[k] * xx[k]


@row_njit
def _add_lanes(lanes, n_lanes, width, totals, shift):
    """Channels-last ``totals[t*width + k]`` = lanes 0, 1, ... of (t, k) added in order: a vector
    of channels at a time, each lane a unit-stride run of ``lanes``. ``shift`` > 0 (``_lane_rows``):
    ``n_lanes + 1`` slots per tap, lane 15's last ``shift`` channels in the first; they are
    moved to their lane's slot first."""
    v = simd.lanes(lanes)
    vectors = width - width % v
    slots = lane_slots(n_lanes, shift)
    for t in range(totals.size // width):
        first = (t * slots + slots - n_lanes) * width
        if shift:
            for k in range(width - shift, width):
                lanes[first + (n_lanes - 1) * width + k] = lanes[first - width + k]
        for j in range(0, vectors, v):
            total = simd.load(lanes, first + j)
            for lane in range(1, n_lanes):
                total = simd.add(total, simd.load(lanes, first + lane * width + j))
            simd.store(totals, t * width + j, total)
        for k in range(vectors, width):
            total = lanes[first + k]
            for lane in range(1, n_lanes):
                total += lanes[first + lane * width + k]
            totals[t * width + k] = total


@row_njit
def _lane_dot(lanes, base, d, d0, xs, x0, lo, hi):
    """Planar: lanes[base + ox % 16] += d[d0 + ox] * xs[x0 + ox] for ox in [lo, hi), ascending."""
    ox = lo
    while ox < hi and ox % _LANES != 0:
        lanes[base + ox % _LANES] += d[d0 + ox] * xs[x0 + ox]
        ox += 1
    lane = lanes[base:base + _LANES]
    while ox + _LANES <= hi:
        dd = d[d0 + ox:d0 + ox + _LANES]
        xx = xs[x0 + ox:x0 + ox + _LANES]
        for j in range(_LANES):
            lane[j] += dd[j] * xx[j]
        ox += _LANES
    while ox < hi:
        lanes[base + ox % _LANES] += d[d0 + ox] * xs[x0 + ox]
        ox += 1
