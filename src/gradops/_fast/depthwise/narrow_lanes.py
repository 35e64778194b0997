"""Backprop filter over channels-last rows narrower than ``plan._FILTER_REGISTER_POSITIONS``, read
in place (SPEC 5.4; the order of ``filter``: lane ``ox % 2`` of each filter element adds its
terms in (row, ox) order).

Such rows (the 7x7 and 14x14 layers of EfficientNet and MobileNet, with hundreds of channels)
are a few positions of many channels: ``lanes._lane_rows_in_memory`` walks each position's
channels as one run, loading and storing the lanes for every term. Here the lanes of a vector of
channels stay in registers over a group of rows instead, a filter row's taps at once
(``_row_pass_for``): per pair of positions two dy vectors and the x vectors the taps read.

A vector of channels of such rows is one line every ``width`` elements, far apart (a multiple of
512 bytes maps them into a few sets of L1), which no prefetcher of the CPU's foresees: the lines
of the vector ``_PREFETCH_VECTORS`` ahead are requested while one is summed, and the group's dy
rows are read whole first, by the finiteness test. For each vector of channels the x rows it
reads are copied into ``x_buf`` (one vector per position), where each x row carries zeros in the
padding on both sides: every tap of the filter row then reaches every dy position, and the pass
needs no edges. A tap's terms in the padding are dy * 0 = ±0, and a lane that starts at +0 is
never -0 (in round-to-nearest a sum is -0 only if both addends are), so adding them leaves it as
it was: the same bits. Only where dy is finite: a group with an inf or a NaN in dy (whose product
with 0 is a NaN) adds each tap's own positions alone (``_exact_taps``). The dy vectors are read
in place.

The taps of a filter row go in passes of ``pass_taps`` (``plan.filter_pass_taps``: all of them
where the registers allow, ``selection.FILTER_PASS_TAPS``), the last pass filled up with taps
past the filter's end that read the zeros and whose lanes are dropped. Groups of rows:
``plan._filter_narrow_rows``.
"""

from __future__ import annotations

import functools

from numba import njit

from .. import row_njit, simd
from .plan import _FILTER_VECTOR_BYTES, _LANES
from .lanes import _NO_ROW

# How many vectors of channels ahead of the one staged its lines are requested.
_PREFETCH_VECTORS = 4
# A row whose x row is out of the image for a filter row (``x_rows``).
_NO_X = -1


@njit(inline="always")
def _tap_term(e, de, x, at):
    """A lane plus the term of dy vector ``de`` and the staged x vector at ``at``."""
    return simd.muladd(e, de, simd.load_as(e, x, at))


@njit(inline="always")
def _tap_terms(e, o, de, do, x, at, v):
    """A tap's lanes plus the terms of a pair of positions: x at ``at`` (even) and ``at + v``."""
    return _tap_term(e, de, x, at), _tap_term(o, do, x, at + v)


@njit(inline="always")
def _load_pair(like, lanes, at, v):
    """A tap's two lanes from ``lanes[at:]`` (``[lane][vector]``)."""
    return simd.load_as(like, lanes, at), simd.load_as(like, lanes, at + v)


@njit(inline="always")
def _store_pair(lanes, at, v, even, odd):
    """A tap's two lanes back to ``lanes[at:]`` (``[lane][vector]``)."""
    simd.store(lanes, at, even)
    simd.store(lanes, at + v, odd)


@functools.cache
def _row_pass_for(taps: int):
    """``_row_pass`` for passes of ``taps`` taps (1 to 7): a closure constant, so that only its
    lanes are kept in registers and the code of the others is folded away."""

    @njit(inline="always")
    def _positions(lanes_in, d, dp0, width, x, xp0, v, step, out_w):
        e0, o0, e1, o1, e2, o2, e3, o3, e4, o4, e5, o5, e6, o6 = lanes_in
        ox = 0
        while ox + 2 <= out_w:
            dp, xp = dp0 + ox * width, xp0 + ox * v
            de, do = simd.load_as(e0, d, dp), simd.load_as(e0, d, dp + width)
            e0, o0 = _tap_terms(e0, o0, de, do, x, xp, v)
            if taps > 1:
                e1, o1 = _tap_terms(e1, o1, de, do, x, xp + step, v)
            if taps > 2:
                e2, o2 = _tap_terms(e2, o2, de, do, x, xp + 2 * step, v)
            if taps > 3:
                e3, o3 = _tap_terms(e3, o3, de, do, x, xp + 3 * step, v)
            if taps > 4:
                e4, o4 = _tap_terms(e4, o4, de, do, x, xp + 4 * step, v)
            if taps > 5:
                e5, o5 = _tap_terms(e5, o5, de, do, x, xp + 5 * step, v)
            if taps > 6:
                e6, o6 = _tap_terms(e6, o6, de, do, x, xp + 6 * step, v)
            ox += 2
        if ox < out_w:  # the last, even position
            dp, xp = dp0 + ox * width, xp0 + ox * v
            de = simd.load_as(e0, d, dp)
            e0 = _tap_term(e0, de, x, xp)
            if taps > 1:
                e1 = _tap_term(e1, de, x, xp + step)
            if taps > 2:
                e2 = _tap_term(e2, de, x, xp + 2 * step)
            if taps > 3:
                e3 = _tap_term(e3, de, x, xp + 3 * step)
            if taps > 4:
                e4 = _tap_term(e4, de, x, xp + 4 * step)
            if taps > 5:
                e5 = _tap_term(e5, de, x, xp + 5 * step)
            if taps > 6:
                e6 = _tap_term(e6, de, x, xp + 6 * step)
        return e0, o0, e1, o1, e2, o2, e3, o3, e4, o4, e5, o5, e6, o6

    @njit(inline="always")
    def _row_pass(lanes, at, d, d_rows, n_rows, width, j, x, x_rows, column, out_w, dw):
        """``taps`` taps of one filter row, from ``column`` (staged positions) on, for the vector
        of channels ``j``: their lanes ``lanes[at:]`` (``[tap][lane][vector]``) plus the terms of
        every row r whose x row is staged at ``x_rows[r]`` (``_NO_X``: none), in (row, ox) order.
        dy is read in place (row r at ``d_rows[r]``, positions ``width`` apart); tap k reads the
        staged position ox + k*dw of its row."""
        like = simd.zeros_of(lanes, _FILTER_VECTOR_BYTES)
        v = _FILTER_VECTOR_BYTES // lanes.itemsize
        # tap k's lanes at at + 2k*v (even) and at + (2k + 1)*v; the taps past ``taps`` are not kept
        e0 = o0 = e1 = o1 = e2 = o2 = e3 = o3 = e4 = o4 = e5 = o5 = e6 = o6 = like
        e0, o0 = _load_pair(like, lanes, at, v)
        if taps > 1:
            e1, o1 = _load_pair(like, lanes, at + 2 * v, v)
        if taps > 2:
            e2, o2 = _load_pair(like, lanes, at + 4 * v, v)
        if taps > 3:
            e3, o3 = _load_pair(like, lanes, at + 6 * v, v)
        if taps > 4:
            e4, o4 = _load_pair(like, lanes, at + 8 * v, v)
        if taps > 5:
            e5, o5 = _load_pair(like, lanes, at + 10 * v, v)
        if taps > 6:
            e6, o6 = _load_pair(like, lanes, at + 12 * v, v)
        acc = (e0, o0, e1, o1, e2, o2, e3, o3, e4, o4, e5, o5, e6, o6)
        for r in range(n_rows):
            if x_rows[r] == _NO_X:
                continue
            xp0 = x_rows[r] + column * v
            if dw == 1:  # adjacent taps: the odd position's x of tap k is the even one's of tap k + 1
                acc = _positions(acc, d, d_rows[r] + j, width, x, xp0, v, v, out_w)
            else:
                acc = _positions(acc, d, d_rows[r] + j, width, x, xp0, v, dw * v, out_w)
        e0, o0, e1, o1, e2, o2, e3, o3, e4, o4, e5, o5, e6, o6 = acc
        _store_pair(lanes, at, v, e0, o0)
        if taps > 1:
            _store_pair(lanes, at + 2 * v, v, e1, o1)
        if taps > 2:
            _store_pair(lanes, at + 4 * v, v, e2, o2)
        if taps > 3:
            _store_pair(lanes, at + 6 * v, v, e3, o3)
        if taps > 4:
            _store_pair(lanes, at + 8 * v, v, e4, o4)
        if taps > 5:
            _store_pair(lanes, at + 10 * v, v, e5, o5)
        if taps > 6:
            _store_pair(lanes, at + 12 * v, v, e6, o6)

    return _row_pass


@njit(inline="always")
def _rows_finite(like, d, d_rows, n_rows, n, probe):
    """Whether the ``n`` elements from each ``d_rows[r]`` are all finite: their products with 0
    (``like``, a zero vector) add up to a NaN otherwise. ``probe``: a vector's room."""
    v = probe.size
    total = like
    finite = True
    for r in range(n_rows):
        k = 0
        while k + v <= n:
            total = simd.muladd(total, simd.load_as(like, d, d_rows[r] + k), like)
            k += v
        for e in range(k, n):
            finite &= d[d_rows[r] + e] * 0.0 == 0.0
    simd.store(probe, 0, total)
    for k in range(v):
        finite &= probe[k] == 0.0
    return finite


@row_njit
def _exact_taps(lanes, fw, padded_fw, d, d_rows, n_rows, width, j, x, x_rows, lo, hi, dw):
    """The terms of ``_row_pass``, tap by tap, each over its own positions [lo[t], hi[t]) only
    (never the zeros of the padding): for a group whose dy is not finite."""
    like = simd.zeros_of(lanes, _FILTER_VECTOR_BYTES)
    v = _FILTER_VECTOR_BYTES // lanes.itemsize
    for t in range(lo.size):
        ky, kx = t // fw, t % fw
        at = (ky * padded_fw + kx) * _LANES * v
        even, odd = _load_pair(like, lanes, at, v)
        for r in range(n_rows):
            if x_rows[ky, r] == _NO_X:
                continue
            for ox in range(lo[t], hi[t]):
                de, at_x = simd.load_as(like, d, d_rows[r] + ox * width + j), x_rows[ky, r] + (ox + kx * dw) * v
                if ox % 2 == 0:
                    even = _tap_term(even, de, x, at_x)
                else:
                    odd = _tap_term(odd, de, x, at_x)
        _store_pair(lanes, at, v, even, odd)


@functools.cache
def narrow_rows_for(pass_taps: int):
    """``_narrow_rows`` with filter rows in passes of ``pass_taps`` taps (``_row_pass_for``)."""
    row_pass = _row_pass_for(pass_taps)

    @row_njit
    def _narrow_rows(vector_lanes, width, d, d_rows, n_rows, xs, x_row_at, lo, hi, out_w, in_w, fw, padded_fw, pl, dw,
                     x_buf, x_rows, slot_rows, probe):
        """The terms of ``n_rows`` dy rows (row r at ``d_rows[r]``; its filter row ky reads the x
        row at ``x_row_at[r, ky]``, or ``_NO_ROW``) into ``vector_lanes[j // vector]``
        (``[filter row][padded tap][lane][vector]``: ``padded_fw``, a whole number of passes, taps a
        filter row), for every whole vector of channels ``j``
        (module docstring). ``x_buf``, ``x_rows`` (``[filter row][row]``: where the row's x row
        is staged), ``slot_rows``, ``probe``: scratch."""
        like = simd.zeros_of(x_buf, _FILTER_VECTOR_BYTES)
        v = _FILTER_VECTOR_BYTES // vector_lanes.itemsize
        fh = x_row_at.shape[1]
        row_len = out_w + (padded_fw - 1) * dw  # staged positions of an x row: pl zeros first
        slots = 0
        for r in range(n_rows):
            for ky in range(fh):
                row, slot = x_row_at[r, ky], -1
                if row != _NO_ROW:
                    for s in range(slots):
                        if slot_rows[s] == row:
                            slot = s
                            break
                    if slot < 0:
                        slot_rows[slots], slot = row, slots
                        slots += 1
                x_rows[ky, r] = _NO_X if slot < 0 else slot * row_len * v
        finite = _rows_finite(like, d, d_rows, n_rows, out_w * width, probe)
        vectors = width - width % v
        for j in range(0, vectors, v):
            ahead = j + _PREFETCH_VECTORS * v
            if ahead < vectors:  # lines far apart, which no prefetcher of the CPU's foresees
                for s in range(slots):
                    for ix in range(in_w):
                        simd.prefetch(xs, slot_rows[s] + ix * width + ahead)
                for r in range(n_rows):
                    for ox in range(out_w):
                        simd.prefetch(d, d_rows[r] + ox * width + ahead)
            for s in range(slots):
                for p in range(row_len):
                    ix = p - pl
                    vector = simd.load_as(like, xs, slot_rows[s] + ix * width + j) if 0 <= ix < in_w else like
                    simd.store(x_buf, (s * row_len + p) * v, vector)
            lanes = vector_lanes[j // v]
            if finite:
                for ky in range(fh):
                    for first in range(0, padded_fw, pass_taps):
                        row_pass(lanes, (ky * padded_fw + first) * _LANES * v, d, d_rows, n_rows, width, j, x_buf,
                                 x_rows[ky], first * dw, out_w, dw)
            else:
                _exact_taps(lanes, fw, padded_fw, d, d_rows, n_rows, width, j, x_buf, x_rows, lo, hi, dw)

    return _narrow_rows


@row_njit
def add_narrow_lanes(lanes, vector_lanes, width, fw, padded_fw, totals):
    """``totals[t*width + k]`` = lane 0 + lane 1 of (tap t, channel k): from ``_narrow_rows``'s
    lanes (``[vector][filter row][padded tap][lane][vector's k]``) for the whole vectors of
    channels, from ``lanes`` (``[tap][lane][k]``) for the channels past them."""
    like = simd.zeros_of(totals, _FILTER_VECTOR_BYTES)
    v = _FILTER_VECTOR_BYTES // totals.itemsize
    vectors = width - width % v
    for t in range(totals.size // width):
        source = ((t // fw) * padded_fw + t % fw) * _LANES * v
        for j in range(0, vectors, v):
            lanes_j = vector_lanes[j // v]
            simd.store(totals, t * width + j, simd.add(simd.load_as(like, lanes_j, source),
                                                       simd.load_as(like, lanes_j, source + v)))
        for k in range(vectors, width):
            totals[t * width + k] = lanes[t * _LANES * width + k] + lanes[(t * _LANES + 1) * width + k]
