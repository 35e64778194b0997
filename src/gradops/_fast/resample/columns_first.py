"""Step 2 before step 1: float16 NHWC gradients of linear 2x upsampling (package docstring;
SPEC 3.7). Summing the rows first decodes every float16 source element twice (each dy row is read
by two dx rows), and decoding is what these rows spend their time on, more than on the products
and sums. Contracting each source row's columns first, once, into a ring of float32 rows that the
next destination rows reuse decodes every element once (``_half_columns_first``).

Compiled only where the CPU converts half in hardware (``_columns_first``); the plan decides when
a call takes this path (``plan._columns_first_fits``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from .. import half, simd
from ..numba_internals import NO_REFCOUNT, NoAliasCompiler
from .rows import _prefetch_part, _sum_rows
from .selection import SLOT_SUMS, TERM_SUMS, row_sum_microkernel
from .writers import _store_run

# Weighted sums of four vectors (``row_sum_template.py``): ``selection.TERM_SUMS``, ``SLOT_SUMS``.
_terms4, _slots4_weighted = row_sum_microkernel(TERM_SUMS), row_sum_microkernel(SLOT_SUMS[True])


@njit(inline="always")
def _slot_term(cc, src, row, first, s, w, units, u):
    """``w * src[row + (first + s - 1) * units + u]`` (a float16 vector) for slot ``s``, or -0.0
    for a padding slot (``s == 0``), which reads nothing."""
    if s == 0:
        return simd.splat(cc, -0.0)
    return simd.mul(simd.splat(cc, w), simd.load_half(src, np.uint64(row + (first + s - 1) * units + u)))


@njit(inline="always")
def _span4(cc, c0, src, row, units, u, lo, hi, base, span_weight):
    """The span part of ``_half_column_sums`` for the four vectors of channels from ``u``: each
    column's last two source pixels are the next column's first two, kept in registers; a
    pass reads each pixel's 4 vectors at once, in order."""
    n = np.uint64(units)
    l1 = np.uint64(simd.lanes(cc))
    l2, l3 = 2 * l1, 3 * l1
    b = np.uint64(row + (2 * lo + base) * units + u)
    p0a, p0b, p0c, p0d = (simd.load_half(src, b), simd.load_half(src, b + l1), simd.load_half(src, b + l2),
                          simd.load_half(src, b + l3))
    b += n
    p1a, p1b, p1c, p1d = (simd.load_half(src, b), simd.load_half(src, b + l1), simd.load_half(src, b + l2),
                          simd.load_half(src, b + l3))
    for j in range(lo, hi):
        w0, w1 = simd.splat(cc, span_weight[0, j]), simd.splat(cc, span_weight[1, j])
        w2, w3 = simd.splat(cc, span_weight[2, j]), simd.splat(cc, span_weight[3, j])
        b = np.uint64(row + (2 * j + base + 2) * units + u)
        p2a, p2b, p2c, p2d = (simd.load_half(src, b), simd.load_half(src, b + l1), simd.load_half(src, b + l2),
                              simd.load_half(src, b + l3))
        b += n
        p3a, p3b, p3c, p3d = (simd.load_half(src, b), simd.load_half(src, b + l1), simd.load_half(src, b + l2),
                              simd.load_half(src, b + l3))
        o = np.uint64(c0 + j * units + u)
        simd.store(cc, o, _terms4(p0a, p1a, p2a, p3a, w0, w1, w2, w3))
        simd.store(cc, o + l1, _terms4(p0b, p1b, p2b, p3b, w0, w1, w2, w3))
        simd.store(cc, o + l2, _terms4(p0c, p1c, p2c, p3c, w0, w1, w2, w3))
        simd.store(cc, o + l3, _terms4(p0d, p1d, p2d, p3d, w0, w1, w2, w3))
        p0a, p0b, p0c, p0d = p2a, p2b, p2c, p2d
        p1a, p1b, p1c, p1d = p3a, p3b, p3c, p3d


@njit(inline="always")
def _span1(cc, c0, src, row, units, u, lo, hi, base, span_weight):
    """``_span4`` for one vector of channels."""
    n = np.uint64(units)
    b = np.uint64(row + (2 * lo + base) * units + u)
    p0, p1 = simd.load_half(src, b), simd.load_half(src, b + n)
    for j in range(lo, hi):
        b = np.uint64(row + (2 * j + base + 2) * units + u)
        p2, p3 = simd.load_half(src, b), simd.load_half(src, b + n)
        simd.store(cc, np.uint64(c0 + j * units + u),
                   _terms4(p0, p1, p2, p3, simd.splat(cc, span_weight[0, j]), simd.splat(cc, span_weight[1, j]),
                               simd.splat(cc, span_weight[2, j]), simd.splat(cc, span_weight[3, j])))
        p0, p1 = p2, p3


@njit(inline="always")
def _half_column_sums(cc, c0, src, row, units, slot, weight, first, columns, lo, hi, base, span_weight):
    """``cc[c0 + j * units + u] = (t0 + t1) + (t2 + t3)`` with ``t_k = weight[j, k] * src[row +
    (first + slot[j, k] - 1) * units + u]`` for the ``columns`` columns of one float16 source row
    (4 slots, -0.0 for padding ones). In the affine span ``lo <= j < hi`` the slots are the
    consecutive source columns ``2 * j + base + k`` (``_affine``: one phase, q = 2)."""
    lanes = simd.lanes(cc)
    for part in range(2):
        for j in range(0 if part == 0 else hi, lo if part == 0 else columns):
            for u in range(0, units, lanes):
                t0 = _slot_term(cc, src, row, first, slot[j, 0], weight[j, 0], units, u)
                t1 = _slot_term(cc, src, row, first, slot[j, 1], weight[j, 1], units, u)
                t2 = _slot_term(cc, src, row, first, slot[j, 2], weight[j, 2], units, u)
                t3 = _slot_term(cc, src, row, first, slot[j, 3], weight[j, 3], units, u)
                simd.store(cc, np.uint64(c0 + j * units + u), simd.add(simd.add(t0, t1), simd.add(t2, t3)))
    fours = units // (4 * lanes) * (4 * lanes)
    for u in range(0, fours, 4 * lanes):
        _span4(cc, c0, src, row, units, u, lo, hi, base, span_weight)
    for u in range(fours, units, lanes):
        _span1(cc, c0, src, row, units, u, lo, hi, base, span_weight)


@njit(inline="always")
def _combine4(dst, o, cc, b0, b1, b2, b3, w0, w1, w2, w3, zero, n, src, ahead, ahead_rows, row_elements, stream):
    """``dst[o + e] = zero + ((w0 * cc[b0 + e] + w1 * cc[b1 + e]) + (w2 * cc[b2 + e] + w3 *
    cc[b3 + e]))`` for ``e < n``, rounded to float16; meanwhile the ``ahead_rows`` source runs
    ``src[ahead[r] : ahead[r] + row_elements]`` are prefetched into L2, spread over the vectors."""
    lanes = simd.lanes(cc)
    z = simd.splat(cc, zero)
    v0, v1, v2, v3 = simd.splat(cc, w0), simd.splat(cc, w1), simd.splat(cc, w2), simd.splat(cc, w3)
    per_vector = simd.line_share(row_elements, n // lanes, simd.LINE_BYTES // src.itemsize)
    for k in range(n // lanes):
        _prefetch_part(src, ahead, ahead_rows, k * per_vector, min((k + 1) * per_vector, row_elements))
        e = np.uint64(k * lanes)
        value = _slots4_weighted(cc, e, b0, b1, b2, b3, v0, v1, v2, v3, z)
        if stream:
            simd.store_stream_half(dst, o + e, value)
        else:
            simd.store_half(dst, o + e, value)


@njit(nogil=True, cache=True, pipeline_class=NoAliasCompiler, **NO_REFCOUNT)
def _half_columns_first(dst, out, src, tap_base, tap_weight, taps, cc, tags, cc_base, ring_next, row_sum, units,
                        slot, weight, first, columns, affine, affine_base, affine_weight, zero, stream, ahead,
                        ahead_rows, row_elements):
    """One float16 NHWC destination row, the column axis first: each source row ``tap_base[t]``
    is contracted over the columns once (``_half_column_sums``) into a slot of the float32 ring
    ``cc`` tagged with it (``tags``), where the next destination rows that read it find it; then
    ``dst[out + e] = zero + sum over taps of tap_weight[t] * cc[slot of t + e]``, as
    ((r0 + r1) + (r2 + r3)) for four taps (``_combine4``, which prefetches the next row's new
    source rows, see ``writers._store_units``), in the order of ``_sum_rows`` otherwise. Returns the next
    ring slot to fill (round robin, skipping the slots this row reads)."""
    n = columns * units
    ring = tags.size
    for t in range(taps):
        found = -1
        for r in range(ring):
            if tags[r] == tap_base[t]:
                found = r
        while found < 0:
            r = ring_next
            ring_next = (ring_next + 1) % ring
            taken = False
            for q in range(t):
                taken = taken or cc_base[q] == r * n
            if not taken:
                _half_column_sums(cc, r * n, src, tap_base[t], units, slot, weight, first, columns, affine[2],
                                  affine[3], affine_base[0], affine_weight)
                tags[r] = tap_base[t]
                found = r
        cc_base[t] = found * n
    zero = np.float32(zero)
    if taps == 4:
        b0, b1, b2, b3 = np.uint64(cc_base[0]), np.uint64(cc_base[1]), np.uint64(cc_base[2]), np.uint64(cc_base[3])
        w0, w1, w2, w3 = tap_weight[0], tap_weight[1], tap_weight[2], tap_weight[3]
        if stream:
            _combine4(dst, np.uint64(out), cc, b0, b1, b2, b3, w0, w1, w2, w3, zero, n, src, ahead, ahead_rows,
                      row_elements, True)
        else:
            _combine4(dst, np.uint64(out), cc, b0, b1, b2, b3, w0, w1, w2, w3, zero, n, src, ahead, ahead_rows,
                      row_elements, False)
    else:
        _sum_rows(row_sum, 0, cc, cc_base, tap_weight, taps, 0, n, 1, True, zero)
        _store_run(dst, out, 1, row_sum, 0, n)
    return ring_next


def _columns_first(*args):
    """``_half_columns_first(*args)`` for float16 sources where the CPU decodes them in hardware;
    typed as a no-op otherwise (never called then: ``plan._columns_first_fits``), so that float32
    kernels do not compile it."""


@overload(_columns_first, jit_options=NO_REFCOUNT)  # see row_njit in _fast/__init__
def _columns_first_impl(*args):
    if args[2].dtype == types.uint16 and half.HARDWARE_HALF:
        return lambda *args: _half_columns_first(*args)
    return lambda *args: args[9]  # ring_next
