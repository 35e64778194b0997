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
from .selection import HALF_SPANS, SLOT_SUMS, column_microkernel, row_sum_microkernel
from .writers import _store_run

# The generated microkernels of this path: a vector of four slots (``row_sum_template.py``,
# ``selection.SLOT_SUMS``) and the affine spans of 4 and 1 vectors of channels
# (``column_template.py``, ``selection.HALF_SPANS``).
_slots4_weighted = row_sum_microkernel(SLOT_SUMS[True])
_span4, _span1 = column_microkernel(HALF_SPANS[4]), column_microkernel(HALF_SPANS[1])


@njit(inline="always")
def _slot_term(cc, src, row, first, s, w, units, u):
    """``w * src[row + (first + s - 1) * units + u]`` (a float16 vector) for slot ``s``, or -0.0
    for a padding slot (``s == 0``), which reads nothing."""
    if s == 0:
        return simd.splat(cc, -0.0)
    return simd.mul(simd.splat(cc, w), simd.load_half(src, np.uint64(row + (first + s - 1) * units + u)))


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
