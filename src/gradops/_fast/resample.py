"""Fast resample and resample gradient (SPEC 3.2-3.7): separable gathers over per-axis tap tables.

Both directions are one contraction ``dst[i] = sum over product taps of w * src[j]`` with
per-axis tables that map a destination index to its source indices:

* forward  (``Y = J X``):    the forward taps of ``axis_taps`` (zero weights dropped, SPEC 3.4);
* backward (``dX = J^T dY``): the transposed, CSR tables of ``transpose_taps``.

So the gradient is a gather too: every destination element is computed by one thread, summing
in one fixed order, and results are bit-identical whatever the thread count.

Layout. The axes are permuted by ``dst``'s strides into five roles, outermost first:
``a0, a1, a2`` (outer axes), ``a3`` (the "column" axis) and ``a4`` (the "unit" axis, of size
``U``). If ``dst``'s innermost axis is not resampled (C in NHWC) it becomes the unit axis and
the next one (W) the column axis; otherwise (W in NCHW) the innermost axis is the column axis
and the unit axis is a dummy of size 1. A work item is one index ``(i0, i1, i2)`` and one block
of columns, computed in two steps over contiguous memory:

1. ``row_sum[c, u] = sum over the taps of a0, a1, a2 of w * src[o0, o1, o2, c, u]`` over the
   source columns ``c`` that the block reads: long vectorised loops adding up to four source
   rows per pass, pure sums when every weight is 1 (nearest);
2. the column axis: a copy if it is not resampled, otherwise
   ``dst[j, u] = sum over k of w[j, k] * row_sum[slot[j, k], u]`` through a padded table of
   ``K`` slots per destination column (padding slots read a unit of ``-0.0``, the exact additive
   identity of IEEE addition). With ``U > 1`` (NHWC) each slot adds a vector of ``U`` elements.
   With ``U == 1`` (NCHW) the columns of an "affine span", where the sources are
   ``q * t + base + k`` (2x up- or downsampling), are computed by loops with constant strides
   that LLVM vectorises; the other columns read the table one by one.

float16 NHWC gradients of linear 2x upsampling (4 slots per column, advancing by 2 source
columns: an affine span of one phase) take the two steps the other way round: each source row's
columns are contracted first, once, into a ring of float32 rows that the next destination rows
reuse, ``cc[c, u] = (q0 + q1) + (q2 + q3)``, then ``dst = zero + ((p0 + p1) + (p2 + p3))`` over
the rows' ``p = w * cc`` (``_half_columns_first``). Row first, every float16 element is decoded
twice, and decoding costs these rows more than the sums do.

When step 1 would add only one or two source rows and the pixels (``U > 1``) have one or two
slots (nearest 2x gradients, N3, linear 2x downsampling), step 2 reads those rows directly. So do
the other nearest gradients of pixels (P1, P2): each source element belongs to one pixel, so the
row sum would save no work, only add a pass over it (``_pixel_sums``).

Arithmetic (SPEC 3.7): sums are float32; float16 data are decoded to float32 in the kernel
(exactly) and the result is rounded once to float16 (round to nearest even; subnormals, inf and
NaN handled). Nearest forward resampling is a pure selection and copies bits, NaN payloads
included. Sums start from -0.0 in the forward op (a -0 input read at weight 1 stays -0,
SPEC 3.4) and from +0.0 in the gradient (the scatter of SPEC 3.6 starts from zeros).

Large NHWC outputs whose pixels start on 64-byte lines are written with non-temporal stores
(``_streams``), the same sums; while a row's pixels are summed from the row sum, the source
rows the next row adds are prefetched when the source is larger than the caches hold
(``_store_units``, ``_PREFETCH_SOURCE_BYTES``).

Threads: the calling thread and helper threads claim chunks of work items (see ``pool.py``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np
from numba import njit, types
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.extending import overload

from .._resample_plan import tap_key, transpose_taps
from . import half, simd
from .pool import begin, claim, end, finish, share
from .strided import aligned_input, element_aligned, flat_view

Taps = Sequence[tuple[np.ndarray, np.ndarray]]

RANK = 4
# Elements of one row sum (columns x U): longer rows are split into column blocks, so that long
# 1-D/2-D cases still run in parallel and the row sum stays in L1/L2.
_ROW_ELEMENTS = 8192

# Sources at least this large prefetch the next row sum's rows (``_store_units``); smaller ones
# are mostly in the caches, where the prefetches cost more than they hide (linear 2x gradients,
# 2 threads: 8 MiB of dy 1.2x slower with them, 16 MiB 0.94-0.95, 32 MiB and more 0.84-0.91).
_PREFETCH_SOURCE_BYTES = 16 << 20

_FORWARD_ZERO = -0.0   # identity of IEEE addition: -0 + v == v bit for bit, -0 + -0 == -0
_GRADIENT_ZERO = 0.0   # the scatter of SPEC 3.6 starts from +0


# Element access generic over the buffer type: float32 data as is, float16 data as uint16 bits
# (converted by ``half.py``). Sums are float32 either way (SPEC 3.7).

def _load(buffer, index):
    """``buffer[index]`` as a number (float16 bits are decoded)."""


def _store(buffer, index, value):
    """``buffer[index] = value``, rounded once to the buffer's type."""


@overload(_load)
def _load_impl(buffer, index):
    if buffer.dtype == types.uint16:
        return lambda buffer, index: half.decode(buffer[index])
    return lambda buffer, index: buffer[index]


@overload(_store)
def _store_impl(buffer, index, value):
    if buffer.dtype == types.uint16:
        def store_half(buffer, index, value):
            buffer[index] = half.encode(np.float32(value))
        return store_half

    def store_float(buffer, index, value):
        buffer[index] = np.float32(value)
    return store_float


@njit(inline="always")
def _slots4(row_sum, u, s0, s1, s2, s3, zero):
    """The vector at ``u`` of ``zero + ((r0 + r1) + (r2 + r3))``, ``r_k = row_sum[s_k:]``."""
    return simd.add(zero, simd.add(simd.add(simd.load(row_sum, s0 + u), simd.load(row_sum, s1 + u)),
                                   simd.add(simd.load(row_sum, s2 + u), simd.load(row_sum, s3 + u))))


@njit(inline="always")
def _weighted_slots4(row_sum, u, s0, s1, s2, s3, w0, w1, w2, w3, zero):
    """``_slots4`` of the products ``w_k * r_k``."""
    return simd.add(zero, _four_terms(simd.load(row_sum, s0 + u), simd.load(row_sum, s1 + u),
                                      simd.load(row_sum, s2 + u), simd.load(row_sum, s3 + u), w0, w1, w2, w3))


@njit(inline="always")
def _four_terms(p0, p1, p2, p3, w0, w1, w2, w3):
    """``(w0 * p0 + w1 * p1) + (w2 * p2 + w3 * p3)`` for vectors."""
    return simd.add(simd.add(simd.mul(w0, p0), simd.mul(w1, p1)), simd.add(simd.mul(w2, p2), simd.mul(w3, p3)))


@njit(inline="always")
def _prefetch_part(src, ahead, ahead_rows, first, last):
    """Requests ``src[ahead[r] + first : ahead[r] + last]`` into L2 for ``r < ahead_rows``, one
    prefetch per 64-byte line: the source rows the next work item adds, a share per part of this
    item's loop, so that their memory reads overlap its sums instead of following them."""
    for r in range(ahead_rows):
        simd.prefetch_l2_range(src, ahead[r] + first, ahead[r] + last)


def _stream_direct(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots, weighted,
                   zero):
    """``_direct_units`` (the same sums) in vectors written with non-temporal stores, for a row
    of pixels that start on 64-byte lines (``units`` a multiple of the lane count). float32
    only: nothing else streams, so other types get a no-op."""


# prefer_literal: one specialisation per (taps, slots, weighted), whose branches fold away, as the
# literal arguments of _direct_units do.
@overload(_stream_direct, prefer_literal=True)
def _stream_direct_impl(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots,
                        weighted, zero):
    if dst.dtype != types.float32:
        return lambda dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots, \
            weighted, zero: None

    def stream(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots, weighted, zero):
        n = np.uint64(units)
        lanes = np.uint64(simd.lanes(dst))
        z, row0, row1 = simd.splat(dst, zero), simd.splat(dst, w0), simd.splat(dst, w1)
        for j in range(columns):
            out = np.uint64(base + j * d3)
            s0, s1, v0, v1 = _outer_slots(slot, weight, column0 + j, slots, n)
            for u in range(np.uint64(0), n, lanes):
                first = _slot_vector(src, b0 + s0 + u, v0, weighted)
                if slots == 2:
                    first = simd.add(first, _slot_vector(src, b0 + s1 + u, v1, weighted))
                if weighted:
                    first = simd.mul(row0, first)
                if taps == 2:
                    second = _slot_vector(src, b1 + s0 + u, v0, weighted)
                    if slots == 2:
                        second = simd.add(second, _slot_vector(src, b1 + s1 + u, v1, weighted))
                    first = simd.add(first, simd.mul(row1, second) if weighted else second)
                simd.store_stream(dst, out + u, simd.add(z, first))
    return stream


@njit(inline="always")
def _slot_vector(src, start, weight, weighted):
    """``_masked`` / ``_masked_sum`` of one vector: a padding slot (weight 0, reading the block's
    first column as the scalar code does) gives -0.0; selects, not branches."""
    value = simd.load(src, start)
    term = simd.choose(weighted, simd.mul(simd.splat(src, weight), value), value)
    return simd.choose(weight == 0, simd.splat(src, -0.0), term)


def _store_slots4(dst, b, row_sum, s0, s1, s2, s3, w0, w1, w2, w3, n, weighted, zero, stream):
    """``dst[b + u] = zero + ((w0 * row_sum[s0 + u] + w1 * row_sum[s1 + u]) + (w2 * row_sum[s2 + u]
    + w3 * row_sum[s3 + u]))`` for ``u < n`` (the products dropped when not ``weighted``);
    ``stream``: with non-temporal stores (see ``_contract``)."""


@overload(_store_slots4, inline="always")
def _store_slots4_impl(dst, b, row_sum, s0, s1, s2, s3, w0, w1, w2, w3, n, weighted, zero, stream):
    vectors = dst.dtype == types.float32
    # float16 bits (``_streams``: whole 64-byte lines per pixel): float32 vectors of the row sum,
    # rounded to float16 as they are stored (as ``half.encode``).
    half_lines = dst.dtype == types.uint16 and half.HARDWARE_HALF

    def store(dst, b, row_sum, s0, s1, s2, s3, w0, w1, w2, w3, n, weighted, zero, stream):
        u = np.uint64(0)
        if half_lines and stream:
            lanes = np.uint64(simd.lanes(row_sum))
            z = simd.splat(row_sum, zero)
            if weighted:
                v0, v1 = simd.splat(row_sum, w0), simd.splat(row_sum, w1)
                v2, v3 = simd.splat(row_sum, w2), simd.splat(row_sum, w3)
                while u + lanes <= n:
                    simd.store_stream_half(dst, b + u, _weighted_slots4(row_sum, u, s0, s1, s2, s3, v0, v1, v2, v3, z))
                    u += lanes
            else:
                while u + lanes <= n:
                    simd.store_stream_half(dst, b + u, _slots4(row_sum, u, s0, s1, s2, s3, z))
                    u += lanes
        if vectors:
            # Explicit vectors: for NHWC pixels of a few vectors, LLVM's vectorised loop spends
            # more on its set-up and remainder than on the pixel (P1, 1 and 2 threads: -6 to -9%).
            lanes = np.uint64(simd.lanes(dst))
            z = simd.splat(dst, zero)
            if weighted:
                v0, v1, v2, v3 = simd.splat(dst, w0), simd.splat(dst, w1), simd.splat(dst, w2), simd.splat(dst, w3)
                if stream:
                    while u + lanes <= n:
                        simd.store_stream(dst, b + u, _weighted_slots4(row_sum, u, s0, s1, s2, s3, v0, v1, v2, v3, z))
                        u += lanes
                else:
                    while u + lanes <= n:
                        simd.store(dst, b + u, _weighted_slots4(row_sum, u, s0, s1, s2, s3, v0, v1, v2, v3, z))
                        u += lanes
            elif stream:
                while u + lanes <= n:
                    simd.store_stream(dst, b + u, _slots4(row_sum, u, s0, s1, s2, s3, z))
                    u += lanes
            else:
                while u + lanes <= n:
                    simd.store(dst, b + u, _slots4(row_sum, u, s0, s1, s2, s3, z))
                    u += lanes
        if weighted:
            for i in range(u, n):
                _store(dst, b + i, zero + ((w0 * row_sum[s0 + i] + w1 * row_sum[s1 + i])
                                           + (w2 * row_sum[s2 + i] + w3 * row_sum[s3 + i])))
        else:
            for i in range(u, n):
                _store(dst, b + i, zero + ((row_sum[s0 + i] + row_sum[s1 + i])
                                           + (row_sum[s2 + i] + row_sum[s3 + i])))
    return store


class _NoAliasCompiler(CompilerBase):
    """numba's nopython pipeline, with LLVM ``noalias`` on the array arguments: ``dst`` never
    overlaps ``src`` (callers reject such an ``out``) and the scratch rows are private, so LLVM
    can drop the runtime alias checks of the short row loops."""

    def define_pipelines(self):
        self.state.flags.noalias = True
        return [DefaultPassBuilder.define_nopython_pipeline(self.state)]


# ---------------------------------------------------------------------------------------------
# Row helpers, inlined into the kernels by numba (a real call per row costs reference counting
# on every array argument and hides constant arguments from LLVM). Hot loops index the flat
# buffers with unsigned integers: NumPy-style negative index wraparound code would stop LLVM
# from vectorising them, and slicing inside the row loop would cost reference-count updates.

@njit(inline="always")
def _add_rows(acc, a, src, b0, b1, b2, b3, w0, w1, w2, w3, n, rows, weighted, first, zero):
    """``acc[a + c] = (zero if first else acc[a + c]) + sum over the first ``rows`` (1, 2 or 4)
    of ``w_r * src[b_r + c]``, summed as ((r0 + r1) + (r2 + r3)), for ``c < n``. Writing the
    first group instead of clearing ``acc`` first saves a pass over ``acc``."""
    if rows == 4:
        if weighted:
            for c in range(n):
                acc[a + c] = (zero if first else acc[a + c]) + ((w0 * _load(src, b0 + c) + w1 * _load(src, b1 + c))
                                                               + (w2 * _load(src, b2 + c) + w3 * _load(src, b3 + c)))
        else:
            for c in range(n):
                acc[a + c] = (zero if first else acc[a + c]) + ((_load(src, b0 + c) + _load(src, b1 + c))
                                                               + (_load(src, b2 + c) + _load(src, b3 + c)))
    elif rows == 2:
        if weighted:
            for c in range(n):
                acc[a + c] = (zero if first else acc[a + c]) + (w0 * _load(src, b0 + c) + w1 * _load(src, b1 + c))
        else:
            for c in range(n):
                acc[a + c] = (zero if first else acc[a + c]) + (_load(src, b0 + c) + _load(src, b1 + c))
    elif weighted:
        for c in range(n):
            acc[a + c] = (zero if first else acc[a + c]) + w0 * _load(src, b0 + c)
    else:
        for c in range(n):
            acc[a + c] = (zero if first else acc[a + c]) + _load(src, b0 + c)


@njit(inline="always")
def _sum_rows(acc, start, src, bases, weights, taps, shift, count, step, weighted, zero):
    """``acc[start + c] = zero + sum over t < taps of weights[t] * src[bases[t] + shift + c * step]``
    for ``c < count``. Unit steps add four (then two, one) source rows per pass over ``acc``."""
    zero = np.float32(zero)
    a = np.uint64(start)
    n = np.uint64(count)
    if taps == 0 or step != 1:
        for c in range(n):
            acc[a + c] = zero
    if step != 1:
        for t in range(taps):
            for c in range(count):
                acc[a + np.uint64(c)] += weights[t] * _load(src, np.uint64(bases[t] + shift + c * step))
        return
    t = 0
    while t < taps:
        rows = 4 if taps - t >= 4 else (2 if taps - t >= 2 else 1)
        last = t + rows - 1
        _add_rows(acc, a, src, np.uint64(bases[t] + shift), np.uint64(bases[min(t + 1, last)] + shift),
                  np.uint64(bases[min(t + 2, last)] + shift), np.uint64(bases[last] + shift),
                  weights[t], weights[min(t + 1, last)], weights[min(t + 2, last)], weights[last],
                  n, rows, weighted, t == 0, zero)
        t += rows


@njit(inline="always")
def _store_run(dst, base, step, values, start, count):
    """``dst[base + j * step] = values[start + j]`` for ``j < count``, rounded to dst's type."""
    v = np.uint64(start)
    if step == 1:
        b = np.uint64(base)
        for j in range(np.uint64(count)):
            _store(dst, b + j, values[v + j])
    else:
        for j in range(count):
            _store(dst, np.uint64(base + j * step), values[v + np.uint64(j)])


@njit(inline="always")
def _store_gathered(dst, base, step, row_sum, slot, weight, column0, count, weighted, zero):
    """``dst[base + j * step] = zero + sum over k of weight[c, k] * row_sum[slot[c, k]]`` with
    ``c = column0 + j``, ``j < count`` (unit size 1): one register accumulator per column.
    Tables have 1, 2 or 4m slots, summed in groups of four."""
    zero = np.float32(zero)
    slots = slot.shape[1]
    first = np.uint64(column0)
    for j in range(np.uint64(count)):
        c = first + j
        out = np.uint64(base + np.int64(j) * step)
        if slots == 1:
            v = row_sum[slot[c, 0]]
            _store(dst, out, zero + (weight[c, 0] * v if weighted else v))
        elif slots == 2:
            if weighted:
                _store(dst, out, zero + (weight[c, 0] * row_sum[slot[c, 0]] + weight[c, 1] * row_sum[slot[c, 1]]))
            else:
                _store(dst, out, zero + (row_sum[slot[c, 0]] + row_sum[slot[c, 1]]))
        else:
            acc = zero
            for k in range(np.uint64(0), np.uint64(slots), np.uint64(4)):
                k1, k2, k3 = k + np.uint64(1), k + np.uint64(2), k + np.uint64(3)
                if weighted:
                    acc += ((weight[c, k] * row_sum[slot[c, k]] + weight[c, k1] * row_sum[slot[c, k1]])
                            + (weight[c, k2] * row_sum[slot[c, k2]] + weight[c, k3] * row_sum[slot[c, k3]]))
                else:
                    acc += ((row_sum[slot[c, k]] + row_sum[slot[c, k1]])
                            + (row_sum[slot[c, k2]] + row_sum[slot[c, k3]]))
            _store(dst, out, acc)


@njit(inline="always")
def _masked(weight, value):
    """One tap read through a padded table: ``weight * value``, or -0.0 (the additive identity)
    for a padding slot of weight 0, so that whatever the padding reads never reaches the sum."""
    return np.float32(-0.0) if weight == 0 else weight * value


@njit(inline="always")
def _masked_sum(weight, value):
    """``_masked`` for pure sums (nearest): ``value``, or -0.0 for a padding slot."""
    return np.float32(-0.0) if weight == 0 else value


@njit(inline="always")
def _affine_span(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, phases, q, slots, zero):
    """Columns ``j = phases * t + p`` of an affine span (see ``_affine``):
    ``dst[o + j] = zero + sum over k < slots of weight[k, j] * row_sum[q * t + base_p + k]``.
    Inlined with literal ``phases``, ``q`` and ``slots`` so that LLVM sees constant strides and
    vectorises the loads as interleaved groups."""
    for t in range(t_lo, t_hi):
        for p in range(phases):
            j = np.uint64(phases) * t + np.uint64(p)
            a = np.uint64(q) * t + (base0 if p == 0 else base1)
            total = _masked(weight[0, j], row_sum[a])
            if slots >= 2:
                total += _masked(weight[1, j], row_sum[a + np.uint64(1)])
            if slots == 4:
                total += _masked(weight[2, j], row_sum[a + np.uint64(2)]) \
                    + _masked(weight[3, j], row_sum[a + np.uint64(3)])
            _store(dst, o + j, zero + total)


@njit(inline="always")
def _store_affine(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, phases, slots, zero):
    """``_affine_span`` for the supported shapes: one phase reading every second source column
    (gradient of a 2x upsampling, forward 2x downsampling; two or four slots) or two phases
    reading consecutive ones (gradient of a 2x downsampling, forward 2x upsampling; one, two or
    four slots). The weights double as the padding mask, so nearest sums multiply by them too
    (by 1: exact)."""
    zero = np.float32(zero)
    if phases == 1 and slots == 2:
        _affine_span(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, 1, 2, 2, zero)
    elif phases == 1:
        _affine_span(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, 1, 2, 4, zero)
    elif slots == 1:
        _affine_span(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, 2, 1, 1, zero)
    elif slots == 2:
        _affine_span(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, 2, 1, 2, zero)
    else:
        _affine_span(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, 2, 1, 4, zero)


@njit(inline="always")
def _outer_slots(slot, weight, column, slots, n):
    """(start, start, weight, weight) of the first and the last slot of ``column`` in a source row
    of ``n``-element columns; a padding slot (0) starts at the row's first column (its weight 0
    masks what it reads)."""
    c = np.uint64(column)
    one = np.uint32(1)
    return ((max(slot[c, 0], one) - one) * n, (max(slot[c, slots - 1], one) - one) * n,
            weight[c, 0], weight[c, slots - 1])


@njit(inline="always")
def _direct_units(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots, weighted,
                  zero):
    """``dst[base + j * d3 + u] = zero + sum over t < taps of w_t * sum over k < slots of
    weight[c, k] * src[b_t + (slot[c, k] - 1) * units + u]``, ``c = column0 + j``: the column
    axis read straight from one or two source rows, skipping the row sum. Inlined with literal
    ``taps``, ``slots`` and ``weighted``. Padding slots read the block's first column, masked."""
    n = np.uint64(units)
    for j in range(columns):
        out = np.uint64(base + j * d3)
        s0, s1, v0, v1 = _outer_slots(slot, weight, column0 + j, slots, n)
        for u in range(n):
            if weighted:
                first = _masked(v0, _load(src, b0 + s0 + u))
                if slots == 2:
                    first += _masked(v1, _load(src, b0 + s1 + u))
            else:
                first = _masked_sum(v0, _load(src, b0 + s0 + u))
                if slots == 2:
                    first += _masked_sum(v1, _load(src, b0 + s1 + u))
            if taps == 2:
                if weighted:
                    second = _masked(v0, _load(src, b1 + s0 + u))
                    if slots == 2:
                        second += _masked(v1, _load(src, b1 + s1 + u))
                    total = w0 * first + w1 * second
                else:
                    second = _masked_sum(v0, _load(src, b1 + s0 + u))
                    if slots == 2:
                        second += _masked_sum(v1, _load(src, b1 + s1 + u))
                    total = first + second
            else:
                total = w0 * first if weighted else first
            _store(dst, out + u, zero + total)


@njit(inline="always")
def _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots, weighted,
                zero, stream):
    """``_direct_units``, or with ``stream`` ``_stream_direct``, with literal ``taps``, ``slots``
    and ``weighted``."""
    if stream:
        _stream_direct(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots,
                       weighted, zero)
    else:
        _direct_units(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots,
                      weighted, zero)


# Per-row functions: no reference counting of their array arguments (``_nrt=False``, see
# ``_fast/__init__``; N1 0.91-0.96, L3 0.95 in interleaved A/B).
@njit(nogil=True, cache=True, pipeline_class=_NoAliasCompiler, _nrt=False)
def _store_direct(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, weighted, zero,
                  stream):
    """``_direct_units`` for one or two source rows and one or two slots. Called once per row and
    not inlined, which keeps ``_contract`` (and how LLVM optimises its NCHW loops) small.
    ``stream``: with non-temporal stores (``_stream_direct``)."""
    zero = np.float32(zero)
    if slot.shape[1] == 1:
        if taps == 1:
            if weighted:
                _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, 1, 1, True,
                            zero, stream)
            else:
                _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, 1, 1, False,
                            zero, stream)
        elif weighted:
            _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, 2, 1, True, zero,
                        stream)
        else:
            _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, 2, 1, False, zero,
                        stream)
    elif taps == 1:
        if weighted:
            _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, 1, 2, True, zero,
                        stream)
        else:
            _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, 1, 2, False, zero,
                        stream)
    elif weighted:
        _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, 2, 2, True, zero,
                    stream)
    else:
        _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, 2, 2, False, zero,
                    stream)


def _pixel_sums(dst, base, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector, zero):
    """``dst[base + j * d3 + u] = zero + sum over t < taps of (-0.0 + sum over k < count of
    src[tap_base[t] + shift + (first + k) * units + u])``, in that order, for column ``c = column0
    + j`` whose ``count`` real slots are the consecutive source columns from ``first`` (see
    ``_consecutive_slots``): unweighted (nearest) NHWC pixels of float32 read straight from their
    source rows. Skipping the padding slots gives what adding their -0.0 would. Whole vectors are
    summed in registers, the units past them in ``vector``. A no-op for other types, which never
    get here."""


@overload(_pixel_sums, inline="always")
def _pixel_sums_impl(dst, base, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector, zero):
    if dst.dtype != types.float32:
        return lambda dst, base, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector, zero: None
    return _pixel_sums_float32


def _pixel_sums_float32(dst, base, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector, zero):
    n = np.uint64(units)
    one = np.uint32(1)
    lanes = np.uint64(simd.lanes(dst))
    for j in range(columns):
        c = np.uint64(column0 + j)
        out = np.uint64(base + j * d3)
        count = 0
        for k in range(slot.shape[1]):
            count += slot[c, k] != 0
        first = np.uint64(shift) + (max(slot[c, 0], one) - one) * n
        u = np.uint64(0)
        while u + lanes <= n:
            acc = simd.splat(dst, zero)
            for t in range(taps):
                column = np.uint64(tap_base[t]) + first + u
                row = simd.splat(dst, -0.0)
                for _ in range(count):
                    row = simd.add(row, simd.load(src, column))
                    column += n
                acc = simd.add(acc, row)
            simd.store(dst, out + u, acc)
            u += lanes
        if u < n:
            rest = n - u
            for i in range(rest):
                vector[i] = zero
            for t in range(taps):
                column = np.uint64(tap_base[t]) + first + u
                for i in range(rest):
                    vector[rest + i] = -0.0
                for _ in range(count):
                    for i in range(rest):
                        vector[rest + i] += src[column + i]
                    column += n
                for i in range(rest):
                    vector[i] += vector[rest + i]
            for i in range(rest):
                dst[out + u + i] = vector[i]


def _float32(buffer):
    """Whether ``buffer`` holds float32 (a constant when the kernel is compiled)."""


@overload(_float32, inline="always")
def _float32_impl(buffer):
    flag = buffer.dtype == types.float32
    return lambda buffer: flag


@njit(inline="always")
def _consecutive_slots(slot):
    """Whether every column's real slots (nonzero) come first and are consecutive source columns."""
    for c in range(slot.shape[0]):
        for k in range(1, slot.shape[1]):
            if slot[c, k] != 0 and (slot[c, k - 1] == 0 or slot[c, k] != slot[c, k - 1] + 1):
                return False
    return True


@njit(nogil=True, cache=True, pipeline_class=_NoAliasCompiler, _nrt=False)
def _store_pixel_sums(dst, base, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector, zero):
    """``_pixel_sums``, called once per row and not inlined (as ``_store_direct``)."""
    _pixel_sums(dst, base, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector,
                np.float32(zero))


@njit(inline="always")
def _store_units(dst, base, d3, d4, row_sum, vector, slot, weight, column0, columns, units, weighted, zero, stream,
                 src, ahead, ahead_rows, row_elements):
    """``dst[base + j * d3 + u * d4] = zero + sum over k of weight[c, k] * row_sum[slot[c, k] * units + u]``
    with ``c = column0 + j``: destination columns of ``units`` elements (NHWC: pixels). One, two
    or four slots go straight to a unit-stride ``dst``; otherwise the slots are summed (four per
    pass) into ``vector`` first. One call per row: array arguments cost reference counting per
    call.

    Meanwhile the ``ahead_rows`` source runs ``src[ahead[r] : ahead[r] + row_elements]`` (the rows
    the next work item adds) are prefetched into L2, a share of their lines per column: the
    memory reads of the next row sum overlap these sums instead of following them."""
    zero = np.float32(zero)
    n = np.uint64(units)
    slots = np.uint64(slot.shape[1])
    per_column = simd.line_share(row_elements, columns, simd.VECTOR_BYTES // src.itemsize)
    for j in range(columns):
        c = np.uint64(column0 + j)
        b = np.uint64(base + j * d3)
        _prefetch_part(src, ahead, ahead_rows, j * per_column, min((j + 1) * per_column, row_elements))
        s0 = slot[c, 0] * n
        w0 = weight[c, 0]
        if slots == 1 and d4 == 1:
            if weighted:
                for u in range(n):
                    _store(dst, b + u, zero + w0 * row_sum[s0 + u])
            else:
                for u in range(n):
                    _store(dst, b + u, zero + row_sum[s0 + u])
            continue
        if slots == 2 and d4 == 1:
            s1 = slot[c, 1] * n
            w1 = weight[c, 1]
            if weighted:
                for u in range(n):
                    _store(dst, b + u, zero + (w0 * row_sum[s0 + u] + w1 * row_sum[s1 + u]))
            else:
                for u in range(n):
                    _store(dst, b + u, zero + (row_sum[s0 + u] + row_sum[s1 + u]))
            continue
        if slots == 4 and d4 == 1:
            _store_slots4(dst, b, row_sum, s0, slot[c, 1] * n, slot[c, 2] * n, slot[c, 3] * n, w0, weight[c, 1],
                          weight[c, 2], weight[c, 3], n, weighted, zero, stream)
            continue
        for u in range(n):
            vector[u] = zero
        k = np.uint64(0)
        while k < slots:
            if slots - k < 4:  # one or two slots, strided dst
                s0, w0 = slot[c, k] * n, weight[c, k]
                for u in range(n):
                    vector[u] += w0 * row_sum[s0 + u]
                k += np.uint64(1)
                continue
            k1, k2, k3 = k + np.uint64(1), k + np.uint64(2), k + np.uint64(3)
            s0, s1, s2, s3 = slot[c, k] * n, slot[c, k1] * n, slot[c, k2] * n, slot[c, k3] * n
            w0, w1, w2, w3 = weight[c, k], weight[c, k1], weight[c, k2], weight[c, k3]
            if weighted:
                for u in range(n):
                    vector[u] += (w0 * row_sum[s0 + u] + w1 * row_sum[s1 + u]) + (w2 * row_sum[s2 + u]
                                                                                   + w3 * row_sum[s3 + u])
            else:
                for u in range(n):
                    vector[u] += (row_sum[s0 + u] + row_sum[s1 + u]) + (row_sum[s2 + u] + row_sum[s3 + u])
            k += np.uint64(4)
        if d4 == 1:
            for u in range(n):
                _store(dst, b + u, vector[u])
        else:
            for u in range(units):
                _store(dst, np.uint64(base + j * d3 + u * d4), vector[np.uint64(u)])



# ---------------------------------------------------------------------------------------------
# Columns first: float16 NHWC gradients of linear 2x upsampling (L3). Summing the rows first
# decodes every float16 source element twice (each dy row is read by two dx rows), and decoding
# is what these rows spend their time on (about 0.5 ns per 16 values on this machine, more than
# the products and sums). Contracting each source row's columns first, once, into a ring of
# float32 rows that the next destination rows reuse decodes every element once.

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
        simd.store(cc, o, _four_terms(p0a, p1a, p2a, p3a, w0, w1, w2, w3))
        simd.store(cc, o + l1, _four_terms(p0b, p1b, p2b, p3b, w0, w1, w2, w3))
        simd.store(cc, o + l2, _four_terms(p0c, p1c, p2c, p3c, w0, w1, w2, w3))
        simd.store(cc, o + l3, _four_terms(p0d, p1d, p2d, p3d, w0, w1, w2, w3))
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
                   _four_terms(p0, p1, p2, p3, simd.splat(cc, span_weight[0, j]), simd.splat(cc, span_weight[1, j]),
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
    per_vector = simd.line_share(row_elements, n // lanes, simd.VECTOR_BYTES // src.itemsize)
    for k in range(n // lanes):
        _prefetch_part(src, ahead, ahead_rows, k * per_vector, min((k + 1) * per_vector, row_elements))
        e = np.uint64(k * lanes)
        value = _weighted_slots4(cc, e, b0, b1, b2, b3, v0, v1, v2, v3, z)
        if stream:
            simd.store_stream_half(dst, o + e, value)
        else:
            simd.store_half(dst, o + e, value)


@njit(nogil=True, cache=True, pipeline_class=_NoAliasCompiler, _nrt=False)
def _half_columns_first(dst, out, src, tap_base, tap_weight, taps, cc, tags, cc_base, ring_next, row_sum, units,
                        slot, weight, first, columns, affine, affine_base, affine_weight, zero, stream, ahead,
                        ahead_rows, row_elements):
    """One float16 NHWC destination row, the column axis first: each source row ``tap_base[t]``
    is contracted over the columns once (``_half_column_sums``) into a slot of the float32 ring
    ``cc`` tagged with it (``tags``), where the next destination rows that read it find it; then
    ``dst[out + e] = zero + sum over taps of tap_weight[t] * cc[slot of t + e]``, as
    ((r0 + r1) + (r2 + r3)) for four taps (``_combine4``, which prefetches the next row's new
    source rows, see ``_store_units``), in the order of ``_sum_rows`` otherwise. Returns the next
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
    typed as a no-op otherwise (never called then: ``_columns_first_fits``), so that float32
    kernels do not compile it."""


@overload(_columns_first, jit_options={"_nrt": False})  # see row_njit in _fast/__init__
def _columns_first_impl(*args):
    if args[2].dtype == types.uint16 and half.HARDWARE_HALF:
        return lambda *args: _half_columns_first(*args)
    return lambda *args: args[9]  # ring_next


@njit(inline="always")
def _rows_ahead(ahead, tap_base, taps, shift, src_offset, s0, s1, s2, ptr0, src0, ptr1, src1, ptr2, src2, i0, i1,
                i2):
    """Writes to ``ahead`` the source rows (``+ shift``) of work item ``(i0, i1, i2)`` that are not
    among the ``taps`` rows of ``tap_base`` (the current item's); returns how many. With linear
    2x upsampling, two of the next dx row's four dy rows."""
    rows = 0
    for k0 in range(ptr0[i0], ptr0[i0 + 1]):
        for k1 in range(ptr1[i1], ptr1[i1 + 1]):
            for k2 in range(ptr2[i2], ptr2[i2 + 1]):
                row = src_offset + src0[k0] * s0 + src1[k1] * s1 + src2[k2] * s2
                read = False
                for t in range(taps):
                    read = read or tap_base[t] == row
                if not read and rows < ahead.size:
                    ahead[rows] = row + shift
                    rows += 1
    return rows


# ---------------------------------------------------------------------------------------------
# Kernels. Arrays are flat buffers indexed ``offset + sum(i[d] * strides[d])`` (see strided.py),
# axes already permuted into the five roles of the module docstring. Both kernels are run by
# ``pool.share``: each thread claims chunks of work items from ``counters`` until none is left.

@lru_cache(maxsize=None)
def _contract_kernel(path: tuple[bool, bool, bool, bool, bool]):
    """``_contract`` for the plans of one ``path`` (``_contract_plan``): each flag says whether a
    branch of the kernel can be taken at all. numba prunes a branch on a constant False before
    typing it, so a call compiles the code its plan can run and nothing else (issue 23, cold
    start); a branch that is kept is taken on the same conditions as in the kernel with every
    flag True. Each path is its own entry in the disk cache (numba keys closures by the values
    of their free variables)."""
    columns_first_path, direct_path, pixel_sums_path, identity_path, affine_path = path

    @njit(nogil=True, cache=True, pipeline_class=_NoAliasCompiler)
    def _contract(counters, epoch, role, chunks, src, src_offset, src_strides, dst, dst_offset, dst_strides, dst_shape,
                  ptr0, src0, weight0, ptr1, src1, weight1, ptr2, src2, weight2,
                  block_columns, block_first, block_count, column_identity, slot, slot_weight,
                  affine, affine_base, affine_weight, weighted, zero, max_taps, columns_first, stream):
        """``dst = sum of w * src`` over the product of the outer CSR tables (axes 0-2) and the
        column table (axis 3); axis 4 is not resampled. ``block_first[b]`` / ``block_count[b]``:
        source columns read by destination columns ``[b * block_columns, (b + 1) * block_columns)``;
        ``slot[j, k]`` is 1 + the source column of slot ``k`` of column ``j`` relative to its
        block's first one, or 0 (padding). A work item is (i0, i1, i2, column block).

        ``stream`` (see ``_streams``): pixels of one or two slots read directly (float32), or of
        four from the row sum, are written with non-temporal stores; the same sums."""
        seen = begin(counters, epoch, role)
        units = dst_shape[4]
        # row_sum[0:units] is the padding unit (-0.0) that padding slots point at.
        # + 4: an affine span's padding slots may read up to 3 elements past the block's data.
        row_sum = np.empty(units * (1 + block_count.max()) + 4, np.float32)
        row_sum[:] = -0.0
        vector = np.empty(2 * units, np.float32)  # a pixel's sum, and (_pixel_sums) one dy row's part of it
        tap_base = np.empty(max_taps, np.int64)
        tap_weight = np.empty(max_taps, np.float32)
        ahead = np.empty(max_taps, np.int64)  # source rows to prefetch (_store_units)
        prefetch = src.size * src.itemsize >= _PREFETCH_SOURCE_BYTES
        items = dst_shape[0] * dst_shape[1] * dst_shape[2] * block_first.size
        n1, n2, n3 = dst_shape[1], dst_shape[2], dst_shape[3]
        s0, s1, s2, s3, s4 = src_strides[0], src_strides[1], src_strides[2], src_strides[3], src_strides[4]
        d0, d1, d2, d3, d4 = dst_strides[0], dst_strides[1], dst_strides[2], dst_strides[3], dst_strides[4]
        src_packed = s4 == 1 and s3 == units   # a block's source columns form one contiguous run
        dst_packed = d4 == 1 and d3 == units
        direct_units = units > 1 and src_packed and d4 == 1 and not column_identity and slot.shape[1] <= 2
        # Nearest gradients sum each source element into one pixel: the row sum saves no work. (float32
        # only: float16 pixels of a few vectors converted one value at a time took 1.5-1.9x longer.)
        pixel_sums = _float32(dst) and units > 1 and src_packed and d4 == 1 and not column_identity \
            and not weighted and _consecutive_slots(slot)
        blocks = block_first.size
        ring = 2 * max_taps if columns_first else 0  # rows of column sums (_half_columns_first)
        cc = np.empty(ring * n3 * units, np.float32)
        tags = np.full(ring, -1, np.int64)
        cc_base = np.empty(max_taps, np.int64)
        ring_next = 0
        while True:
            chunk = claim(counters)
            if chunk >= chunks:
                end(epoch, role, seen)
                return
            start = chunk * items // chunks
            # Unflatten the first item once, then step the counters (no division per item).
            block = start % blocks
            rest = start // blocks
            i2 = rest % n2
            rest //= n2
            i1 = rest % n1
            i0 = rest // n1
            for _ in range(start, (chunk + 1) * items // chunks):
                taps = np.int64(0)  # not Literal[int](0): see _fast/__init__
                for k0 in range(ptr0[i0], ptr0[i0 + 1]):
                    for k1 in range(ptr1[i1], ptr1[i1 + 1]):
                        w01 = np.float32(weight0[k0]) * weight1[k1]
                        for k2 in range(ptr2[i2], ptr2[i2 + 1]):
                            tap_base[taps] = src_offset + src0[k0] * s0 + src1[k1] * s1 + src2[k2] * s2
                            tap_weight[taps] = w01 * weight2[k2]
                            taps += 1
                count = block_count[block]
                shift = block_first[block] * s3
                column0 = block * block_columns
                columns = min(block_columns, n3 - column0)
                out = dst_offset + i0 * d0 + i1 * d1 + i2 * d2 + column0 * d3
                if columns_first_path and columns_first and taps > 0:
                    ahead_rows = 0
                    if prefetch and i2 + 1 < n2:
                        ahead_rows = _rows_ahead(ahead, tap_base, taps, shift, src_offset, s0, s1, s2, ptr0, src0,
                                                 ptr1, src1, ptr2, src2, i0, i1, i2 + 1)
                    ring_next = _columns_first(dst, out, src, tap_base, tap_weight, taps, cc, tags, cc_base,
                                               ring_next, row_sum, units, slot, slot_weight, block_first[0], columns,
                                               affine, affine_base, affine_weight, zero, stream, ahead, ahead_rows,
                                               count * units)
                elif direct_path and direct_units and 1 <= taps <= 2:
                    # NHWC pixels of one or two slots from one or two source rows: read them directly.
                    _store_direct(dst, out, d3, src, np.uint64(tap_base[0] + shift),
                                  np.uint64(tap_base[taps - 1] + shift),
                                  tap_weight[0], tap_weight[taps - 1], slot, slot_weight, column0, columns, units, taps,
                                  weighted, zero, stream and _float32(dst))
                elif pixel_sums_path and pixel_sums:
                    _store_pixel_sums(dst, out, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector,
                                      zero)
                else:
                    # Step 1: the row sum, as one contiguous run or one run of ``units`` per column.
                    for c in range(1 if src_packed else count):
                        _sum_rows(row_sum, (c + 1) * units, src, tap_base, tap_weight, taps, shift + c * s3,
                                  count * units if src_packed else units, 1 if src_packed else s4, weighted, zero)
                    # Step 2: the column axis.
                    if identity_path:
                        for j in range(1 if dst_packed else columns):
                            _store_run(dst, out + j * d3, 1 if dst_packed else d4, row_sum, (j + 1) * units,
                                       columns * units if dst_packed else units)
                    elif affine_path:
                        # The affine span (if any) inside the block; the columns around it go through the slots.
                        phases, slots, lo, hi = affine[0], affine[1], affine[2], affine[3]
                        lo = min(max(lo, column0), column0 + columns)
                        hi = max(min(hi, column0 + columns), lo)
                        if phases == 0 or d3 != 1:
                            lo = hi = column0 + columns
                        if hi > lo:
                            # Source columns relative to the block's first one, + 1 for the padding unit.
                            _store_affine(dst, np.uint64(out - column0), row_sum, affine_weight,
                                          np.uint64(lo // phases),
                                          np.uint64(hi // phases), np.uint64(affine_base[0] + 1 - block_first[block]),
                                          np.uint64(affine_base[1] + 1 - block_first[block]), phases, slots, zero)
                        for part in range(2):
                            first = column0 if part == 0 else hi
                            _store_gathered(dst, out + (first - column0) * d3, d3, row_sum, slot, slot_weight, first,
                                            lo - column0 if part == 0 else column0 + columns - hi, weighted, zero)
                    else:
                        ahead_rows = 0
                        if prefetch and src_packed and block + 1 == blocks and i2 + 1 < n2:
                            ahead_rows = _rows_ahead(ahead, tap_base, taps, shift, src_offset, s0, s1, s2, ptr0, src0,
                                                     ptr1, src1, ptr2, src2, i0, i1, i2 + 1)
                        _store_units(dst, out, d3, d4, row_sum, vector, slot, slot_weight, column0, columns, units,
                                     weighted, zero, stream, src, ahead, ahead_rows, count * units)
                block += 1
                if block == blocks:
                    block = 0
                    i2 += 1
                    if i2 == n2:
                        i2 = 0
                        i1 += 1
                        if i1 == n1:
                            i1 = 0
                            i0 += 1
            if stream:
                simd.store_fence()  # the streamed lines are visible before the chunk is reported done
            finish(counters)

    return _contract


@njit(nogil=True, cache=True)
def _select(counters, epoch, role, chunks, src, src_offset, src_strides, dst, dst_offset, dst_strides, dst_shape,
            index0, index1, index2, index3, inner_identity):
    """Nearest forward: ``dst[o] = src[index0[o0], ..., index3[o3]]``, copying raw bits. A work
    item is a row (o0, o1, o2)."""
    seen = begin(counters, epoch, role)
    n1, n2, n3 = dst_shape[1], dst_shape[2], dst_shape[3]
    s0, s1, s2, s3 = src_strides[0], src_strides[1], src_strides[2], src_strides[3]
    d0, d1, d2, d3 = dst_strides[0], dst_strides[1], dst_strides[2], dst_strides[3]
    unit = inner_identity and s3 == 1 and d3 == 1
    rows = dst_shape[0] * n1 * n2
    while True:
        chunk = claim(counters)
        if chunk >= chunks:
            end(epoch, role, seen)
            return
        start = chunk * rows // chunks
        i2 = start % n2
        rest = start // n2
        i1 = rest % n1
        i0 = rest // n1
        for _ in range(start, (chunk + 1) * rows // chunks):
            base = src_offset + index0[i0] * s0 + index1[i1] * s1 + index2[i2] * s2
            out = dst_offset + i0 * d0 + i1 * d1 + i2 * d2
            if unit:
                b = np.uint64(base)
                o = np.uint64(out)
                for j in range(np.uint64(n3)):
                    dst[o + j] = src[b + j]
            else:
                for j in range(n3):
                    dst[np.uint64(out + j * d3)] = src[np.uint64(base + index3[j] * s3)]
            i2 += 1
            if i2 == n2:
                i2 = 0
                i1 += 1
                if i1 == n1:
                    i1 = 0
                    i0 += 1
        finish(counters)


# ---------------------------------------------------------------------------------------------
# Tables. Small (one entry per index of one axis) and cached by content, so repeated calls with
# the same geometry pay only a hash of the tap tables.

def _is_identity(index: np.ndarray, weight: np.ndarray, n_in: int) -> bool:
    """Whether forward taps ``(index, weight)`` are the identity (an axis that is not resampled)."""
    n_out = index.shape[0]
    return n_out == n_in and bool(np.all(index[:, 0] == np.arange(n_out))) and bool(np.all(weight[:, 0] == 1)) \
        and bool(np.all(weight[:, 1] == 0))


def _csr(index: np.ndarray, weight: np.ndarray, n_in: int, transpose: bool) -> tuple[np.ndarray, ...]:
    """Destination index -> (source indices, weights) as CSR, zero weights dropped (SPEC 3.4):
    the forward taps, or their transpose for the gradient."""
    if transpose:
        return transpose_taps(index, weight, n_in)
    keep = weight != 0
    ptr = np.zeros(index.shape[0] + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=ptr[1:])
    return ptr, index[keep].astype(np.int64), weight[keep].astype(np.float32)


@lru_cache(maxsize=256)
def _outer_table(index_bytes: bytes, weight_bytes: bytes, n_in: int, transpose: bool) -> tuple[np.ndarray, ...]:
    index = np.frombuffer(index_bytes, dtype=np.int64).reshape(-1, 2)
    weight = np.frombuffer(weight_bytes, dtype=np.float32).reshape(-1, 2)
    return _csr(index, weight, n_in, transpose)


@lru_cache(maxsize=256)
def _column_table(index_bytes: bytes, weight_bytes: bytes, n_in: int, transpose: bool,
                  block_columns: int) -> tuple[np.ndarray, ...]:
    """Tables of the column axis: ``block_first, block_count, slot, slot_weight`` (see
    ``_contract``) and ``affine, affine_base, affine_weight`` (see ``_affine_span``)."""
    index = np.frombuffer(index_bytes, dtype=np.int64).reshape(-1, 2)
    weight = np.frombuffer(weight_bytes, dtype=np.float32).reshape(-1, 2)
    ptr, source, tap_weight = _csr(index, weight, n_in, transpose)
    n_dst = ptr.size - 1
    counts = np.diff(ptr)
    blocks = -(-n_dst // block_columns)
    tap_block = np.repeat(np.arange(n_dst) // block_columns, counts)
    block_first = np.zeros(blocks, dtype=np.int64)
    block_count = np.zeros(blocks, dtype=np.int64)
    if source.size:
        lo = np.full(blocks, np.iinfo(np.int64).max)
        hi = np.full(blocks, -1)
        np.minimum.at(lo, tap_block, source)
        np.maximum.at(hi, tap_block, source)
        read = hi >= 0
        block_first[read] = lo[read]
        block_count[read] = hi[read] - lo[read] + 1
    slots = int(counts.max()) if n_dst else 0
    slots = slots if slots <= 2 else -(-slots // 4) * 4  # the kernel sums 1, 2 or 4m slots
    slot = np.zeros((n_dst, slots), dtype=np.uint32)
    slot_weight = np.zeros((n_dst, slots), dtype=np.float32)
    rank_in_row = np.arange(source.size) - np.repeat(ptr[:-1], counts)
    columns = np.repeat(np.arange(n_dst), counts)
    slot[columns, rank_in_row] = 1 + source - block_first[tap_block]
    slot_weight[columns, rank_in_row] = tap_weight
    return (block_first, block_count, slot, slot_weight) + _affine(ptr, source, tap_weight, block_columns)


# Affine spans: the (phases, q) shapes _store_affine has loops for, and the shortest span worth one.
_AFFINE_SHAPES = ((1, 2), (2, 1))
_AFFINE_MIN_COLUMNS = 16


def _affine(ptr: np.ndarray, source: np.ndarray, tap_weight: np.ndarray,
            block_columns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The longest run of destination columns ``j = phases * t + p`` whose sources are the
    consecutive columns ``q * t + base[p] + k``, ``k < count_j <= 4`` (with two phases, one of
    them may be empty throughout: it then reads, masked, where the other one does). Returns
    ``affine = (phases, slots, lo, hi)`` (phases 0: none), ``base`` and ``weight[k, j]`` (0 for
    padding slots)."""
    n_dst = ptr.size - 1
    counts = np.diff(ptr)
    column = np.repeat(np.arange(n_dst), counts)
    rank = np.arange(source.size) - np.repeat(ptr[:-1], counts)
    first = np.zeros(n_dst, dtype=np.int64)
    first[column[rank == 0]] = source[rank == 0]
    consecutive = np.ones(n_dst, dtype=bool)
    np.logical_and.at(consecutive, column, source - first[column] == rank)
    real = (counts > 0) & (counts <= 4) & consecutive
    best = (0, 0, 0, (0, 0))
    for phases, q in _AFFINE_SHAPES:
        if block_columns % phases:  # a column block must not split the phases of one t
            continue
        t, p = np.divmod(np.arange(n_dst), phases)
        offset = first - q * t
        base = [None] * phases
        for phase in range(phases):
            values, hits = np.unique(offset[real & (p == phase)], return_counts=True)
            if values.size:
                base[phase] = int(values[np.argmax(hits)])
        match = real & (offset == np.array([-1 if b is None else b for b in base])[p]) \
            & np.isin(p, [phase for phase in range(phases) if base[phase] is not None])
        candidates = [(match, base)]
        for empty in range(phases if phases == 2 else 0):
            if base[1 - empty] is not None:
                borrowed = list(base)
                borrowed[empty] = base[1 - empty]
                candidates.append((np.where(p == empty, counts == 0, match), borrowed))
        for mask, bases in candidates:
            lo, hi = _longest_run(mask, phases)
            if hi - lo > best[1] - best[0]:
                best = (lo, hi, phases, tuple(0 if b is None else b for b in bases))
    lo, hi, phases, base = best
    q_of = dict((p, q) for p, q in _AFFINE_SHAPES)
    if hi - lo < _AFFINE_MIN_COLUMNS:
        return np.zeros(4, np.int64), np.zeros(2, np.int64), np.zeros((2, n_dst), np.float32)
    most = counts[lo:hi].max()
    slots = 1 if phases == 2 and most <= 1 else (2 if most <= 2 else 4)
    # Padding slots read (masked) past a column's sources: keep every read inside the row.
    last_read = q_of[phases] * (np.arange(n_dst) // phases) + np.take(base, np.arange(n_dst) % phases) + slots - 1
    while hi > lo and last_read[hi - phases:hi].max() > source.max():
        hi -= phases
    if hi - lo < _AFFINE_MIN_COLUMNS:
        return np.zeros(4, np.int64), np.zeros(2, np.int64), np.zeros((2, n_dst), np.float32)
    weight = np.zeros((slots, n_dst), dtype=np.float32)
    span = (column >= lo) & (column < hi)
    weight[rank[span], column[span]] = tap_weight[span]
    return np.array([phases, slots, lo, hi], np.int64), np.array(base + (0,) * (2 - len(base)), np.int64), weight


def _longest_run(mask: np.ndarray, align: int) -> tuple[int, int]:
    """The longest run ``[lo, hi)`` of True in ``mask`` with ``lo`` and ``hi`` multiples of ``align``."""
    if align == 2:  # both columns of a pair must match
        pairs = mask[: mask.size // 2 * 2].reshape(-1, 2).all(axis=1)
        lo, hi = _longest_run(pairs, 1)
        return 2 * lo, 2 * hi
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    if not starts.size:
        return 0, 0
    longest = int(np.argmax(stops - starts))
    return int(starts[longest]), int(stops[longest])


def _identity_taps(n: int) -> tuple[np.ndarray, np.ndarray]:
    index = np.repeat(np.arange(n, dtype=np.int64)[:, None], 2, axis=1)
    weight = np.zeros((n, 2), dtype=np.float32)
    weight[:, 0] = 1
    return index, weight


def _pad(src: np.ndarray, dst: np.ndarray, taps: Taps) -> tuple[np.ndarray, np.ndarray, list]:
    """Fixed rank 4: leading size-1 axes with identity taps."""
    missing = RANK - dst.ndim
    lead = (np.newaxis,) * missing
    return src[lead], dst[lead], [_identity_taps(1)] * missing + list(taps)


def _axis_order(dst: np.ndarray) -> list[int]:
    """Outermost first; the innermost axis is dst's smallest stride among axes longer than 1."""
    return sorted(range(dst.ndim), key=lambda d: (dst.shape[d] > 1, -abs(dst.strides[d])))


def _flat(array: np.ndarray, bits: bool = False) -> tuple[np.ndarray, int, np.ndarray]:
    if array.dtype == np.float16:
        array = array.view(np.uint16)
    elif bits:
        array = array.view(np.uint32)
    buffer, offset, strides = flat_view(array)
    strides[np.array(array.shape) == 1] = 1  # size-1 axes: any stride; 1 keeps "packed" tests simple
    return buffer, offset, strides


def _run(src: np.ndarray, dst: np.ndarray, taps: Taps, transpose: bool, key: tuple | None) -> None:
    """``dst = J src`` (forward taps) or ``J^T src`` (``transpose``)."""
    if not element_aligned(dst):
        staged = np.empty(dst.shape, dst.dtype)
        _run(src, staged, taps, transpose, key)
        np.copyto(dst, staged)
        return
    src = aligned_input(src)
    # Everything but the data pointers depends on the geometry only: planned once per geometry.
    axes, items, src_offset, dst_offset, static, path = _contract_plan(
        transpose, src.shape, src.strides, dst.shape, dst.strides, src.itemsize,
        key if key is not None else tuple(tap_key(*t) for t in taps))
    dst_buffer = _flat_buffer(dst, axes)
    share(_contract_kernel(path), items, src.nbytes + dst.nbytes, _flat_buffer(src, axes), src_offset, static[0],
          dst_buffer, dst_offset, *static[1:], _streams(dst_buffer, dst_offset, static[1], static[2]))


def _streams(buffer: np.ndarray, offset: int, strides: np.ndarray, shape: np.ndarray) -> bool:
    """Whether ``_contract`` writes this output with non-temporal stores, which skip reading each
    output line before writing it (N1 -10%, N2 -7 to -13%, L1 -12%, L2 -3 to -10% in interleaved
    A/B with fresh outputs): a float32 output of at least ``simd.STREAMING_THRESHOLD_BYTES`` made
    of packed pixels (NHWC) of whole vectors that all start on a 64-byte line. gradops' fresh
    outputs start on one; NumPy's own large buffers 16 bytes past one (no streaming). float16
    outputs of pixels of whole lines (32k channels) too, where the CPU converts half in hardware;
    only their four-slot pixels stream (L3 0.94 in interleaved A/B), the others are stored as
    without the flag."""
    lanes = simd.VECTOR_BYTES // buffer.itemsize
    units = shape[4]
    return bool((buffer.dtype == np.float32 or (buffer.dtype == np.uint16 and half.HARDWARE_HALF))
                and buffer.nbytes >= simd.STREAMING_THRESHOLD_BYTES
                and strides[4] == 1 and strides[3] == units and units % lanes == 0
                and (buffer.ctypes.data + buffer.itemsize * offset) % simd.VECTOR_BYTES == 0
                and all(shape[d] == 1 or strides[d] % lanes == 0 for d in range(3)))


def _flat_buffer(array: np.ndarray, axes: tuple) -> np.ndarray:
    """The flat buffer of ``flat_view`` (see strided.py) for ``array`` viewed as ``axes``."""
    if _dense(array.shape, array.strides, array.itemsize):
        flat = array.ravel(order="K")  # a view: the memory from the lowest address, in order
    else:
        view = array[(np.newaxis,) * (RANK - array.ndim)].transpose(axes[0])[axes[1]]
        flat = flat_view(view)[0]
    return flat.view(np.uint16) if flat.dtype == np.float16 else flat


@lru_cache(maxsize=256)
def _dense(shape: tuple, strides: tuple, itemsize: int) -> bool:
    """Whether an array fills its memory without gaps, all strides positive (any axis order)."""
    expected = itemsize
    for stride, n in sorted((stride, n) for stride, n in zip(strides, shape) if n > 1):
        if stride != expected:
            return False
        expected *= n
    return True


@lru_cache(maxsize=64)
def _contract_plan(transpose: bool, src_shape: tuple, src_strides: tuple, dst_shape: tuple, dst_strides: tuple,
                   itemsize: int, tap_keys: tuple) -> tuple:
    """Axis roles, buffer offsets and every kernel argument but the buffers (see ``_contract``)."""
    src = np.lib.stride_tricks.as_strided(np.empty(0, f"u{itemsize}"), src_shape, src_strides)
    dst = np.lib.stride_tricks.as_strided(np.empty(0, f"u{itemsize}"), dst_shape, dst_strides)
    taps = [(np.frombuffer(index, np.int64).reshape(-1, 2), np.frombuffer(weight, np.float32).reshape(-1, 2))
            for index, weight in tap_keys]
    src, dst, taps = _pad(src, dst, taps)
    n_in = dst.shape if transpose else src.shape  # forward input sizes
    identity = [_is_identity(*taps[d], n_in[d]) for d in range(RANK)]
    order = _axis_order(dst)
    # Role assignment (module docstring): a non-resampled innermost axis becomes the unit axis.
    if identity[order[-1]] and dst.shape[order[-1]] > 1:
        outer, column, unit = [None] + order[:2], order[2], order[3]
    else:
        outer, column, unit = order[:3], order[3], None
    axes = (tuple(d for d in outer + [column, unit] if d is not None),
            tuple(np.newaxis if d is None else slice(None) for d in outer + [column, unit]))
    _, src_offset, src_strides = _flat(src.transpose(axes[0])[axes[1]])
    dst_view = dst.transpose(axes[0])[axes[1]]
    _, dst_offset, dst_strides = _flat(dst_view)
    dst_shape = np.array(dst_view.shape, dtype=np.int64)
    outer_tables = [_outer_table(*tap_key(*taps[d]), n_in[d], transpose) if d is not None
                    else _outer_table(*tap_key(*_identity_taps(1)), 1, transpose) for d in outer]
    units = int(dst_shape[4])
    block_columns = max(1, _ROW_ELEMENTS // units)
    block_first, block_count, slot, slot_weight, affine, affine_base, affine_weight = _column_table(
        *tap_key(*taps[column]), n_in[column], transpose, block_columns)
    weighted = not (all(np.all(table[2] == 1) for table in outer_tables) and np.all(slot_weight[slot != 0] == 1))
    max_taps = max(1, int(np.prod([np.diff(table[0]).max() for table in outer_tables])))
    columns_first = _columns_first_fits(itemsize, src_strides, dst_strides, units, block_first.size, slot, affine,
                                        affine_weight, bool(weighted))
    static = (src_strides, dst_strides, dst_shape, *outer_tables[0], *outer_tables[1], *outer_tables[2],
              block_columns, block_first, block_count, identity[column], slot, slot_weight,
              affine, affine_base, affine_weight, bool(weighted), _GRADIENT_ZERO if transpose else _FORWARD_ZERO,
              max_taps, columns_first)
    # Which branches of _contract this plan can take (see _contract_kernel), from the conditions
    # the kernel tests; pixel sums also need consecutive slots, which the kernel tests itself.
    pixels = (units > 1 and src_strides[4] == 1 and src_strides[3] == units and dst_strides[4] == 1
              and not identity[column])
    path = (columns_first, bool(pixels and slot.shape[1] <= 2), bool(pixels and itemsize == 4 and not weighted),
            bool(identity[column]), units == 1)
    items = int(np.prod(dst_shape[:3])) * block_first.size
    return axes, items, src_offset, dst_offset, static, path


def _columns_first_fits(itemsize: int, src_strides: np.ndarray, dst_strides: np.ndarray, units: int, blocks: int,
                        slot: np.ndarray, affine: np.ndarray, affine_weight: np.ndarray, weighted: bool) -> bool:
    """Whether ``_contract`` sums the column axis first (``_half_columns_first``): weighted
    float16 NHWC rows of packed pixels of whole vectors, in one column block, whose 4-slot
    columns form an affine span of one phase (4 consecutive source columns advancing by 2: linear
    2x gradients) with no padding slot inside it (the span reads every slot's column)."""
    lo, hi = affine[2], affine[3]
    return bool(itemsize == 2 and half.HARDWARE_HALF and weighted and blocks == 1
                and src_strides[4] == 1 and src_strides[3] == units and dst_strides[4] == 1 and dst_strides[3] == units
                and units % (simd.VECTOR_BYTES // 4) == 0 and slot.shape[1] == 4 and affine[0] == 1 and affine[1] == 4
                and np.all(affine_weight[:, lo:hi] != 0))


def resample_forward(x: np.ndarray, out: np.ndarray, taps: Taps, key: tuple | None = None) -> None:
    """``out[o] = sum over the product taps of (product of axis weights) * x[indices]``
    (SPEC 3.3/3.4), ``taps[d]`` = ``axis_taps(...)`` of axis ``d``. ``x`` and ``out``: rank 1..4,
    float32 or float16 (the same), any strides; ``out`` must not overlap ``x``. ``key``: the taps
    as bytes (``tap_key`` of each), if the caller keeps them."""
    if all(np.all(weight[:, 1] == 0) and np.all(weight[:, 0] == 1) for _, weight in taps):
        _select_nearest(x, out, taps)
        return
    _run(x, out, taps, False, key)


def resample_backward(dy: np.ndarray, out: np.ndarray, taps: Taps, key: tuple | None = None) -> None:
    """``out = J^T dy`` (SPEC 3.6) for the forward taps ``taps``, computed as a gather: ``dy`` has
    the forward output's shape, ``out`` the forward input's; otherwise as ``resample_forward``."""
    _run(dy, out, taps, True, key)


def _select_nearest(x: np.ndarray, out: np.ndarray, taps: Taps) -> None:
    if not element_aligned(out):
        staged = np.empty(out.shape, out.dtype)
        _select_nearest(x, staged, taps)
        np.copyto(out, staged)
        return
    x, out, taps = _pad(aligned_input(x), out, taps)
    order = _axis_order(out)
    src_buf, src_offset, src_strides = _flat(x.transpose(order), bits=True)
    dst_buf, dst_offset, dst_strides = _flat(out.transpose(order), bits=True)
    dst_shape = np.array([out.shape[d] for d in order], dtype=np.int64)
    indices = [np.ascontiguousarray(taps[d][0][:, 0], dtype=np.int64) for d in order]
    inner_identity = _is_identity(*taps[order[-1]], x.shape[order[-1]])
    share(_select, int(np.prod(dst_shape[:3])), x.nbytes + out.nbytes, src_buf, src_offset, src_strides, dst_buf,
          dst_offset, dst_strides, dst_shape, *indices, inner_identity)
