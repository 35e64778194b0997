"""Fast depthwise convolution family (SPEC 5.2-5.4, 5.6): forward, backprop input, backprop filter.

Arrays arrive as NHWC-indexed views of any strides (NCHW data as a transposed view): x / dx
``[N, H, W, C]``, y / dy ``[N, OH, OW, C*M]``, filter / dfilter ``[fh, fw, C, M]``. Channel
``k = c*M + m`` (SPEC 5.2). Every kernel is a gather: each output element is computed by one
thread, in an order fixed by the problem alone, so results are bit-identical whatever the thread
count or schedule, and NCHW gives the same bits as NHWC.

How the work is laid out:

* Rows. Forward and backprop input run one job per (image, block of output rows); the source
  rows a job needs are converted once into a small ring of float rows (``_stage_*``), or read in
  place when they already are float rows of the canonical layout ("direct"). Output rows of that
  layout are accumulated in place too; otherwise in a row buffer, then stored (and rounded) once.
  A dx beyond the cache is written with non-temporal stores: straight from the registers when
  its positions start on 64-byte lines (the stores drain while the next blocks compute); a
  strided one that does not, or a float16 one whose rows are one run each, summed in a row
  buffer and streamed out (rounded as it is written: ``_stream_row``), as is a float one with
  M = 2 (its two sums per element added in vectors as it is written: ``_pair_sums_run``).
* Canonical row layouts. ``channels-last`` rows are ``[position][k]``, so one filter tap covers a
  contiguous run of (position, k) and a SIMD vector spans consecutive k; staged rows and the
  weight table space their positions ``pitch`` apart (``_pitch``: C*M, or one cache line more
  where C*M would map a column of positions onto a few L1 sets). ``planar`` rows (chosen
  when W is the unit-stride axis, e.g. NCHW) are
  ``[k][position]`` with one scalar weight per (k, tap). Planar with stride 1 and finite weights
  goes further: each tap is one run over a whole block of rows (``_planar_blocks_kernel``).
* Strides. A stride ``s`` makes the column map ``ix = ox*s + shift`` non-contiguous in x-space, so
  x-space rows are split into ``s`` residue planes (``ix = q*s + r``, plane r holds q = 0, 1, ...);
  within a plane every tap's columns are contiguous again. No modulo runs in an inner loop.
* Taps. Per output row, the taps that reach it are listed with the columns they reach; the row
  splits into segments of columns reached by the same taps. Channels-last segments run in blocks
  of 4 positions x 2 SIMD vectors of k (``_taps_blocked``, with ``simd.py``): 8 sums stay in
  registers over all the taps, so each weight vector is loaded once per block and no partial sum
  goes through memory. Whole 3-tap filter rows go 8 positions at a time, then 4 (``_taps_rows``);
  the 9 taps of a 3x3 filter over rows of at most 256 bytes keep all 18 weight vectors of a pair
  of k vectors in registers and go 2 positions at a time (``_taps9_2x2``). Planar segments take
  their taps 4 at a time (one load and store of the accumulator per 4; the first group writes,
  so nothing is zeroed first). Taps in the padding
  are skipped: they are never multiplied by 0, except in the planar blocks and in staged
  stride-1 backprop rows with zero margins, where that is exact (see ``_planar_blocks_kernel``,
  ``_zero_margins``).
* Summation order of one output element. Forward: taps (ky, kx) ascending, from +0. Backprop
  input: for each m, taps (ky, kx) ascending from +0, then the M partial sums added in m order.
  Backprop filter: 16 lanes per filter element, lane ``ox % 16`` summing its (row, ox) terms in
  order; lanes added in order; then a fixed number of row chunks (``_CHUNKS``, independent of the
  thread count) added in order.
* Precision. float16 / bfloat16 load as float32 (bit-exact decoding), accumulate in float32 and
  round once, to nearest even; float32 accumulates in float32, float64 in float64. Numba has no
  half arithmetic, so half arrays are viewed as uint16 and converted by ``half.py`` (float16
  in hardware where the CPU has F16C).
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import ml_dtypes
import numpy as np
from numba import njit, types
from numba.extending import overload

from .._depthwise_reference import REFERENCE_KERNELS
from . import half, row_njit, simd
from .pool import begin, claim, end, finish, share, thread_count
from .strided import aligned_input, element_aligned, flat_view

_FLOAT, _F16, _BF16 = 0, 1, 2  # how the kernel reads/writes an element: native float or half bits
_HALF_KINDS = {np.dtype(np.float16): _F16, np.dtype(ml_dtypes.bfloat16): _BF16}
_LANES = 16  # backprop filter: independent partial sums per filter element (ox % 16)
_CHUNKS = 64  # backprop filter: row chunks reduced separately, then combined in order
_JOBS_PER_THREAD = 16  # forward / backprop input: jobs handed out dynamically (see _rows_per_job)
_PREFETCH_POSITIONS = 16  # rows read in place: how far ahead of a block of taps to prefetch
# ``_taps9_rows`` over rows read in place: how far ahead of the positions being computed to
# prefetch the newest row (D1: 8 KiB 0.90-0.96 against 4 KiB with all three rows, 2 KiB 0.97).
_PREFETCH_AHEAD_BYTES = 8192
# Backprop input requests the next staged dy row from a dy at least this large (smaller ones are
# mostly in the caches; D7's 25.7 MB: 0.92 in interleaved A/B): while the current output row is
# summed, in equal shares over the blocks of ``_taps_rows`` (D4: 0.91-0.93 against one burst of
# 900 line prefetches after staging, most of which the CPU does not keep in flight) and over the
# parts of ``_NINE_POSITIONS`` positions of ``_taps9_rows`` (D7: 0.93 against one burst), else at
# once. ``_taps9_rows`` requests into L1 (a float16 row is 7 KB; 0.97 against L2, where D4's
# 57 KB float32 rows saw no difference); 8 positions a part: 0.97-0.98 against 16, 32 1.04.
_PREFETCH_STAGED_BYTES = 16 << 20
_NINE_POSITIONS = 8
_LINE = 64  # bytes per cache line
# Rows at most this many bytes wide (two pairs of float32 vectors) take their 9-tap segments in
# ``_taps9_2x2``: D1 -18%, D5 -16%, D7 -9%, 56x56x64 -13% in interleaved A/B; wider rows lost
# (28x28x128 +3%, 56x56x128 +17%, D3 +11%).
_WEIGHTS_IN_REGISTERS_BYTES = 256
# Backprop input reads stride-1 dy rows in place only up to this many bytes per position (one pair
# of float32 vectors: D1, D5, whose 9-tap segments run in _taps9_2x2; staged, 112x112x32 took
# 1.17x as long). Wider rows are staged with zero margins: 56x56x144 0.60x, 14x14x480 with 5x5
# taps 0.68x, 112x112x96 0.68x, 28x28x240 0.73x, 7x7x480 0.89x, 112x112x64 0.96x (interleaved
# A/B). Strided rows stay in place (staged, without margins: 1.04-1.06x).
_IN_PLACE_ROW_BYTES = 128


# Loads and stores dispatch on the array type while compiling: float arrays get plain copies, so
# the float32 / float64 kernels carry no half conversion code (less to compile).

def _load_one(src, i, kind):
    """float(src[i]), decoding half bits as ``kind`` says."""


def _load_run(src, start, step, n, dst, dst_start, kind):
    """``dst[dst_start + i] = float(src[start + i*step])`` for i < n."""


def _store_run(acc, start, n, dst, dst_start, step, kind):
    """``dst[dst_start + i*step] = acc[start + i]`` for i < n, rounded once to the output type."""


def _store_one(dst, i, value, kind):
    """``dst[i] = value`` rounded once to the output type."""


@overload(_store_one, inline="always")
def _store_one_impl(dst, i, value, kind):
    if isinstance(dst.dtype, types.Float):
        def copy(dst, i, value, kind):
            dst[i] = value
        return copy

    def encode(dst, i, value, kind):
        dst[i] = half.encode(value) if kind == _F16 else half.float_to_bf16(value)
    return encode


@overload(_load_one, inline="always")
def _load_one_impl(src, i, kind):
    if isinstance(src.dtype, types.Float):
        return lambda src, i, kind: src[i]

    def decode(src, i, kind):
        return half.decode(src[i]) if kind == _F16 else half.bf16_to_float(src[i])
    return decode


# Inlined: staging calls it once per position of a row with a padded pitch (D3, D4), where a
# call with its two views cost about as much as the copy (A/B: D4 0.95, D3 0.96, D7 0.98).
@overload(_load_run, inline="always")
def _load_run_impl(src, start, step, n, dst, dst_start, kind):
    if isinstance(src.dtype, types.Float):
        def copy(src, start, step, n, dst, dst_start, kind):
            out = dst[dst_start:dst_start + n]
            if step == 1:
                run = src[start:start + n]
                for i in range(n):
                    out[i] = run[i]
            else:
                for i in range(n):
                    out[i] = src[start + i * step]
        return copy

    def decode(src, start, step, n, dst, dst_start, kind):
        # the branches sit outside the loops, so each loop vectorises
        out = dst[dst_start:dst_start + n]
        if step != 1:
            for i in range(n):
                out[i] = _load_one(src, start + i * step, kind)
            return
        run = src[start:start + n]
        if kind == _F16:
            for i in range(n):
                out[i] = half.decode(run[i])
        else:
            for i in range(n):
                out[i] = half.bf16_to_float(run[i])
    return decode


def _inline_float_stores(expr, caller_info, callee_info) -> bool:
    """Inline ``_store_run`` into float outputs only (the half encoders, inlined, trip an internal
    numba IR check)."""
    return isinstance(callee_info.typemap["dst"].dtype, types.Float)


@overload(_store_run, inline=_inline_float_stores)
def _store_run_impl(acc, start, n, dst, dst_start, step, kind):
    if isinstance(dst.dtype, types.Float):
        def copy(acc, start, n, dst, dst_start, step, kind):
            run = acc[start:start + n]
            if step == 1:
                out = dst[dst_start:dst_start + n]
                for i in range(n):
                    out[i] = run[i]
            else:
                for i in range(n):
                    dst[dst_start + i * step] = run[i]
        return copy

    def encode(acc, start, n, dst, dst_start, step, kind):
        run = acc[start:start + n]
        if step != 1:
            for i in range(n):
                _store_one(dst, dst_start + i * step, run[i], kind)
            return
        out = dst[dst_start:dst_start + n]
        if kind == _F16:
            for i in range(n):
                out[i] = half.encode(run[i])
        else:
            for i in range(n):
                out[i] = half.float_to_bf16(run[i])
    return encode


# --- tap runs: acc[a + j] (=|+=) sum of src[s + j] * weight ---------------------------------
# Planar runs: a group of 4 taps loads and stores the accumulator once: a[j] + p0 + p1 evaluates
# as (a[j] + p0) + p1, the same additions in the same order as one tap at a time. The first group
# of a plane writes 0 + p0 + ... instead of reading a zeroed accumulator (0 + p0 keeps the sum's
# start at +0, as a zeroed accumulator would). Channels-last runs keep their sums in registers.

_ZERO = np.float32(0)


@row_njit
def _scaled1(acc, a0, n, src, s0, f0, first):
    a = acc[a0:a0 + n]
    x0 = src[s0:s0 + n]
    if first:
        for j in range(n):
            a[j] = _ZERO + x0[j] * f0
    else:
        for j in range(n):
            a[j] += x0[j] * f0


@row_njit
def _scaled4(acc, a0, n, src, s0, s1, s2, s3, f0, f1, f2, f3, first):
    a = acc[a0:a0 + n]
    x0 = src[s0:s0 + n]
    x1 = src[s1:s1 + n]
    x2 = src[s2:s2 + n]
    x3 = src[s3:s3 + n]
    if first:
        for j in range(n):
            a[j] = _ZERO + x0[j] * f0 + x1[j] * f1 + x2[j] * f2 + x3[j] * f3
    else:
        for j in range(n):
            a[j] = a[j] + x0[j] * f0 + x1[j] * f1 + x2[j] * f2 + x3[j] * f3


@njit(inline="always")
def _insert_sorted(values, count, value):
    """Insert ``value`` into the sorted distinct ``values[:count]``; return the new count."""
    position = count
    while position > 0 and values[position - 1] > value:
        position -= 1
    if position > 0 and values[position - 1] == value:
        return count
    for i in range(count, position, -1):
        values[i] = values[i - 1]
    values[position] = value
    return count + 1


@njit(inline="always")
def _segments(lo, hi, nt, n_pos, bounds):
    """Sort the distinct column bounds 0, n_pos, lo[t], hi[t] into ``bounds``; return how many.
    Between two consecutive bounds each tap reaches every column or none."""
    count = _insert_sorted(bounds, _insert_sorted(bounds, 0, 0), n_pos)
    for t in range(nt):
        count = _insert_sorted(bounds, _insert_sorted(bounds, count, lo[t]), hi[t])
    return count


@njit(inline="always")
def _put(acc, p, value, stream):
    """``simd.store``, or with ``stream`` its non-temporal form (``acc[p]`` on a 64-byte line)."""
    if stream:
        simd.store_stream(acc, p, value)
    else:
        simd.store(acc, p, value)


@njit(inline="always")
def _taps_4x2(acc, a, step, pitch, src, s, wt, taps, j, count, lanes, stream):
    """Positions 0-3 x vectors j, j + lanes of ``_taps_blocked``: 8 accumulators in registers."""
    b0 = simd.zeros(acc)
    b1 = b2 = b3 = c0 = c1 = c2 = c3 = b0
    for t in range(count):
        w = simd.load(wt, taps[t] + j)
        v = simd.load(wt, taps[t] + j + lanes)
        p = s[t] + j
        b0 = simd.muladd(b0, simd.load(src, p), w)
        c0 = simd.muladd(c0, simd.load(src, p + lanes), v)
        b1 = simd.muladd(b1, simd.load(src, p + pitch), w)
        c1 = simd.muladd(c1, simd.load(src, p + pitch + lanes), v)
        b2 = simd.muladd(b2, simd.load(src, p + 2 * pitch), w)
        c2 = simd.muladd(c2, simd.load(src, p + 2 * pitch + lanes), v)
        b3 = simd.muladd(b3, simd.load(src, p + 3 * pitch), w)
        c3 = simd.muladd(c3, simd.load(src, p + 3 * pitch + lanes), v)
    p = a + j
    _put(acc, p, b0, stream)
    _put(acc, p + lanes, c0, stream)
    _put(acc, p + step, b1, stream)
    _put(acc, p + step + lanes, c1, stream)
    _put(acc, p + 2 * step, b2, stream)
    _put(acc, p + 2 * step + lanes, c2, stream)
    _put(acc, p + 3 * step, b3, stream)
    _put(acc, p + 3 * step + lanes, c3, stream)


@njit(inline="always")
def _taps_4x1(acc, a, step, pitch, src, s, wt, taps, j, count, stream):
    """Positions 0-3 x vector j of ``_taps_blocked``."""
    b0 = simd.zeros(acc)
    b1 = b2 = b3 = b0
    for t in range(count):
        w = simd.load(wt, taps[t] + j)
        p = s[t] + j
        b0 = simd.muladd(b0, simd.load(src, p), w)
        b1 = simd.muladd(b1, simd.load(src, p + pitch), w)
        b2 = simd.muladd(b2, simd.load(src, p + 2 * pitch), w)
        b3 = simd.muladd(b3, simd.load(src, p + 3 * pitch), w)
    p = a + j
    _put(acc, p, b0, stream)
    _put(acc, p + step, b1, stream)
    _put(acc, p + 2 * step, b2, stream)
    _put(acc, p + 3 * step, b3, stream)


@njit(inline="always")
def _taps_1x4(acc, a, src, s, wt, taps, j, count, lanes, stream):
    """One position x vectors j .. j + 3 lanes of ``_taps_blocked``: 4 independent sums (one sum
    alone would wait on the latency of each addition)."""
    b0 = simd.zeros(acc)
    b1 = b2 = b3 = b0
    for t in range(count):
        p = s[t] + j
        w = taps[t] + j
        b0 = simd.muladd(b0, simd.load(src, p), simd.load(wt, w))
        b1 = simd.muladd(b1, simd.load(src, p + lanes), simd.load(wt, w + lanes))
        b2 = simd.muladd(b2, simd.load(src, p + 2 * lanes), simd.load(wt, w + 2 * lanes))
        b3 = simd.muladd(b3, simd.load(src, p + 3 * lanes), simd.load(wt, w + 3 * lanes))
    _put(acc, a + j, b0, stream)
    _put(acc, a + j + lanes, b1, stream)
    _put(acc, a + j + 2 * lanes, b2, stream)
    _put(acc, a + j + 3 * lanes, b3, stream)


@njit(inline="always")
def _channel_tail(acc, a, step, width, pitch, positions, src, so, shift, wt, taps, count, k0):
    """Channels ``k0 .. width`` (fewer than a vector) of ``positions`` positions: ``acc[a + p*step
    + k] = +0 + sum over t, in order, of src[so[t] + shift + p*pitch + k] * wt[taps[t] + k]``, in
    the first lanes of one masked vector per position (same products and additions per lane as
    the full vectors; the lanes past ``width`` are neither read nor written). Scalar sums here
    made a row of C*M = 72 take 2.4x as long as one of 80."""
    n = width - k0
    if n <= 0:
        return
    for p in range(positions):
        b = simd.zeros(acc)
        for t in range(count):
            b = simd.muladd(b, simd.load_first(src, so[t] + shift + p * pitch + k0, n),
                            simd.load_first(wt, taps[t] + k0, n))
        simd.store_first(acc, a + p * step + k0, b, n)


@row_njit
def _taps_blocked(acc, a0, step, width, pitch, n_pos, src, so, wt, taps, count, shifted, stream):
    """``acc[a0 + q*step + j] = +0 + sum over t < count, in order, of src[so[t] + q*pitch + j] *
    wt[taps[t] + j]`` for q < n_pos, j < width (channels-last positions; ``step`` >= ``width``
    spaces the accumulator's positions, e.g. every ``sw``-th position of a dx row). Blocks of 4
    positions x 2 vectors keep 8 accumulators in registers over all taps: each weight vector is
    loaded once per block, and no partial sum goes through memory. Every lane and the masked tail
    compute the same products and additions in the same order. ``stream``: whole vectors are
    written with non-temporal stores (each on a 64-byte line)."""
    lanes = simd.lanes(acc)
    q = 0
    while q < n_pos:
        block = 4 if n_pos - q >= 4 else 1
        a = a0 + q * step
        for t in range(count):
            shifted[t] = so[t] + q * pitch
        j = 0
        if block == 4:
            while j + 2 * lanes <= width:
                _taps_4x2(acc, a, step, pitch, src, shifted, wt, taps, j, count, lanes, stream)
                j += 2 * lanes
            while j + lanes <= width:
                _taps_4x1(acc, a, step, pitch, src, shifted, wt, taps, j, count, stream)
                j += lanes
        else:
            while j + 4 * lanes <= width:
                _taps_1x4(acc, a, src, shifted, wt, taps, j, count, lanes, stream)
                j += 4 * lanes
            while j + lanes <= width:
                b = simd.zeros(acc)
                for t in range(count):
                    b = simd.muladd(b, simd.load(src, shifted[t] + j), simd.load(wt, taps[t] + j))
                _put(acc, a + j, b, stream)
                j += lanes
        _channel_tail(acc, a, step, width, pitch, block, src, shifted, 0, wt, taps, count, j)
        q += block


@njit(inline="always")
def _run3(b, v0, v1, v2, w0, w1, w2):
    """``((b + v0*w0) + v1*w1) + v2*w2``: three taps of one filter row, in order."""
    return simd.muladd(simd.muladd(simd.muladd(b, v0, w0), v1, w1), v2, w2)


@njit(inline="always")
def _load8(src, p, pitch):
    """The vectors at ``p`` of 8 consecutive channels-last positions ``pitch`` apart."""
    return (simd.load(src, p), simd.load(src, p + pitch), simd.load(src, p + 2 * pitch),
            simd.load(src, p + 3 * pitch), simd.load(src, p + 4 * pitch), simd.load(src, p + 5 * pitch),
            simd.load(src, p + 6 * pitch), simd.load(src, p + 7 * pitch))


@njit(inline="always")
def _store8(acc, p, step, b0, b1, b2, b3, b4, b5, b6, b7, stream, positions):
    """Store the sums of ``positions`` (8 or 7) positions ``step`` apart (``_put``)."""
    _put(acc, p, b0, stream)
    _put(acc, p + step, b1, stream)
    _put(acc, p + 2 * step, b2, stream)
    _put(acc, p + 3 * step, b3, stream)
    _put(acc, p + 4 * step, b4, stream)
    _put(acc, p + 5 * step, b5, stream)
    _put(acc, p + 6 * step, b6, stream)
    if positions == 8:
        _put(acc, p + 7 * step, b7, stream)


@njit(inline="always")
def _rows3_8x1(acc, a, step, pitch, src, low, wt, taps, j, count, ascending, stream, positions):
    """``positions`` (8, or 7: a constant) positions x vector j of ``_taps_rows``, rows of 3 taps:
    per filter row, ``positions`` + 2 source vectors serve the 3 * ``positions`` (position, tap)
    products, so loads no longer outnumber multiplications."""
    b0 = simd.zeros(acc)
    b1 = b2 = b3 = b4 = b5 = b6 = b7 = b0
    for t in range(0, count, 3):
        p = low[t // 3] + j
        v0, v1, v2, v3, v4, v5, v6, v7 = _load8(src, p, pitch)
        v8 = simd.load(src, p + 8 * pitch)
        w0 = simd.load(wt, taps[t] + j)
        w1 = simd.load(wt, taps[t + 1] + j)
        w2 = simd.load(wt, taps[t + 2] + j)
        if ascending:  # tap i of the row reads position + i
            b0, b1 = _run3(b0, v0, v1, v2, w0, w1, w2), _run3(b1, v1, v2, v3, w0, w1, w2)
            b2, b3 = _run3(b2, v2, v3, v4, w0, w1, w2), _run3(b3, v3, v4, v5, w0, w1, w2)
            b4, b5 = _run3(b4, v4, v5, v6, w0, w1, w2), _run3(b5, v5, v6, v7, w0, w1, w2)
            b6 = _run3(b6, v6, v7, v8, w0, w1, w2)
            if positions == 8:
                b7 = _run3(b7, v7, v8, simd.load(src, p + 9 * pitch), w0, w1, w2)
        else:  # tap i reads position + 2 - i (the adjoint walks the filter row backwards)
            b0, b1 = _run3(b0, v2, v1, v0, w0, w1, w2), _run3(b1, v3, v2, v1, w0, w1, w2)
            b2, b3 = _run3(b2, v4, v3, v2, w0, w1, w2), _run3(b3, v5, v4, v3, w0, w1, w2)
            b4, b5 = _run3(b4, v6, v5, v4, w0, w1, w2), _run3(b5, v7, v6, v5, w0, w1, w2)
            b6 = _run3(b6, v8, v7, v6, w0, w1, w2)
            if positions == 8:
                b7 = _run3(b7, simd.load(src, p + 9 * pitch), v8, v7, w0, w1, w2)
    _store8(acc, a + j, step, b0, b1, b2, b3, b4, b5, b6, b7, stream, positions)


@njit(inline="always")
def _rows3_4x1(acc, a, step, pitch, src, low, wt, taps, j, count, ascending, stream):
    """``_rows3_8x1`` for 4 positions: 6 source vectors serve the 12 (position, tap) products."""
    b0 = simd.zeros(acc)
    b1 = b2 = b3 = b0
    for t in range(0, count, 3):
        p = low[t // 3] + j
        v0, v1, v2 = simd.load(src, p), simd.load(src, p + pitch), simd.load(src, p + 2 * pitch)
        v3, v4, v5 = simd.load(src, p + 3 * pitch), simd.load(src, p + 4 * pitch), simd.load(src, p + 5 * pitch)
        w0 = simd.load(wt, taps[t] + j)
        w1 = simd.load(wt, taps[t + 1] + j)
        w2 = simd.load(wt, taps[t + 2] + j)
        if ascending:
            b0, b1 = _run3(b0, v0, v1, v2, w0, w1, w2), _run3(b1, v1, v2, v3, w0, w1, w2)
            b2, b3 = _run3(b2, v2, v3, v4, w0, w1, w2), _run3(b3, v3, v4, v5, w0, w1, w2)
        else:
            b0, b1 = _run3(b0, v2, v1, v0, w0, w1, w2), _run3(b1, v3, v2, v1, w0, w1, w2)
            b2, b3 = _run3(b2, v4, v3, v2, w0, w1, w2), _run3(b3, v5, v4, v3, w0, w1, w2)
    _put(acc, a + j, b0, stream)
    _put(acc, a + j + step, b1, stream)
    _put(acc, a + j + 2 * step, b2, stream)
    _put(acc, a + j + 3 * step, b3, stream)


@njit(inline="always")
def _run5(b, v0, v1, v2, v3, v4, w0, w1, w2, w3, w4):
    """``((((b + v0*w0) + v1*w1) + v2*w2) + v3*w3) + v4*w4``: five taps, in order."""
    return simd.muladd(simd.muladd(_run3(b, v0, v1, v2, w0, w1, w2), v3, w3), v4, w4)


@njit(inline="always")
def _rows5_8x1(acc, a, step, pitch, src, low, wt, taps, j, count, ascending, stream):
    """``_rows3_8x1`` for filter rows of 5 taps: 12 source vectors serve 40 products."""
    b0 = simd.zeros(acc)
    b1 = b2 = b3 = b4 = b5 = b6 = b7 = b0
    for t in range(0, count, 5):
        p = low[t // 5] + j
        v0, v1, v2, v3, v4, v5, v6, v7 = _load8(src, p, pitch)
        v8 = simd.load(src, p + 8 * pitch)
        v9 = simd.load(src, p + 9 * pitch)
        v10 = simd.load(src, p + 10 * pitch)
        v11 = simd.load(src, p + 11 * pitch)
        w0 = simd.load(wt, taps[t] + j)
        w1 = simd.load(wt, taps[t + 1] + j)
        w2 = simd.load(wt, taps[t + 2] + j)
        w3 = simd.load(wt, taps[t + 3] + j)
        w4 = simd.load(wt, taps[t + 4] + j)
        if ascending:  # tap i of the row reads position + i
            b0 = _run5(b0, v0, v1, v2, v3, v4, w0, w1, w2, w3, w4)
            b1 = _run5(b1, v1, v2, v3, v4, v5, w0, w1, w2, w3, w4)
            b2 = _run5(b2, v2, v3, v4, v5, v6, w0, w1, w2, w3, w4)
            b3 = _run5(b3, v3, v4, v5, v6, v7, w0, w1, w2, w3, w4)
            b4 = _run5(b4, v4, v5, v6, v7, v8, w0, w1, w2, w3, w4)
            b5 = _run5(b5, v5, v6, v7, v8, v9, w0, w1, w2, w3, w4)
            b6 = _run5(b6, v6, v7, v8, v9, v10, w0, w1, w2, w3, w4)
            b7 = _run5(b7, v7, v8, v9, v10, v11, w0, w1, w2, w3, w4)
        else:  # tap i reads position + 4 - i
            b0 = _run5(b0, v4, v3, v2, v1, v0, w0, w1, w2, w3, w4)
            b1 = _run5(b1, v5, v4, v3, v2, v1, w0, w1, w2, w3, w4)
            b2 = _run5(b2, v6, v5, v4, v3, v2, w0, w1, w2, w3, w4)
            b3 = _run5(b3, v7, v6, v5, v4, v3, w0, w1, w2, w3, w4)
            b4 = _run5(b4, v8, v7, v6, v5, v4, w0, w1, w2, w3, w4)
            b5 = _run5(b5, v9, v8, v7, v6, v5, w0, w1, w2, w3, w4)
            b6 = _run5(b6, v10, v9, v8, v7, v6, w0, w1, w2, w3, w4)
            b7 = _run5(b7, v11, v10, v9, v8, v7, w0, w1, w2, w3, w4)
    _store8(acc, a + j, step, b0, b1, b2, b3, b4, b5, b6, b7, stream, 8)


@njit(inline="always")
def _filter_rows(so, count, pitch):
    """``R`` (``-R``) if the taps come in rows of R = 3 or 5 reading consecutive ascending
    (descending) positions: whole filter rows with dilation 1. Else 0."""
    d = so[1] - so[0] if count >= 2 else 0
    if d != pitch and d != -pitch:
        return 0
    for size in (3, 5):
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


@row_njit
def _taps_rows(acc, a0, step, width, pitch, n_pos, src, so, wt, taps, count, rows, low, prefetch, stream, ahead_src,
               ahead, ahead_n):
    """``_taps_blocked`` for taps in filter rows (``_filter_rows``), 8 positions at a time over
    whole vectors; returns how many positions it computed (the rest go to ``_taps_blocked``).
    Same products, same additions, same order. Rows of 3 taps over 7k positions (7, 14, 21, 28;
    D3's 14-position rows with zero margins) go 7 at a time. Otherwise a remainder after the
    blocks of 8 (but 4 positions of 3-tap rows, which take a block of 4) is covered by one more
    block of 8 ending at ``n_pos``, which computes again (and writes again, the same bits) up to
    7 positions (not 8 + 4 + 2 in ``_taps_blocked``, which reloads the weights for each position).
    ``prefetch``: the rows are read in place from memory, so the first and last rows of taps (the
    source row that is new for this output row, in the adjoint and in the forward direction) are
    requested ``_PREFETCH_POSITIONS`` ahead. ``stream``: as in ``_taps_blocked``.
    ``ahead_src[ahead : ahead + ahead_n]``: a run the next call reads (the dy row the next output
    row stages), requested into L2 a share per block and vector (``_PREFETCH_STAGED_BYTES``)."""
    lanes = simd.lanes(acc)
    if width < lanes:
        return 0
    size = abs(rows)
    sevens = size == 3 and n_pos % 7 == 0 and n_pos % 8 != 0
    positions = 7 if sevens else 8
    blocked = n_pos if sevens else n_pos // 8 * 8
    overlap = not sevens and n_pos > blocked >= 8 and not (size == 3 and n_pos - blocked == 4)
    n_blocks = blocked // positions + overlap
    share = simd.line_share(ahead_n, n_blocks * (width // lanes), _LINE // ahead_src.itemsize)
    requested = 0
    for block in range(n_blocks):
        q = min(positions * block, n_pos - positions)
        _lowest_positions(low, so, count, rows, q * pitch, pitch)
        if prefetch:
            last = count // size - 1
            for r in range(0, last + 1, max(last, 1)):  # rows 0 and last, once each
                ahead = low[r] + _PREFETCH_POSITIONS * pitch
                for e in range(ahead, min(ahead + 8 * pitch, src.size), _LINE // src.itemsize):
                    simd.prefetch(src, e)
        j = 0
        # four call sites, each with a constant direction: a direction tested inside the tap loop
        # keeps both variants' registers live and spills them (21 against 37 GMAC/s for 5 taps)
        while j + lanes <= width:
            simd.prefetch_l2_range(ahead_src, ahead + requested, ahead + min(requested + share, ahead_n))
            requested += share
            a = a0 + q * step
            if rows == 3 and sevens:
                _rows3_8x1(acc, a, step, pitch, src, low, wt, taps, j, count, True, stream, 7)
            elif rows == -3 and sevens:
                _rows3_8x1(acc, a, step, pitch, src, low, wt, taps, j, count, False, stream, 7)
            elif rows == 3:
                _rows3_8x1(acc, a, step, pitch, src, low, wt, taps, j, count, True, stream, 8)
            elif rows == -3:
                _rows3_8x1(acc, a, step, pitch, src, low, wt, taps, j, count, False, stream, 8)
            elif rows == 5:
                _rows5_8x1(acc, a, step, pitch, src, low, wt, taps, j, count, True, stream)
            else:
                _rows5_8x1(acc, a, step, pitch, src, low, wt, taps, j, count, False, stream)
            j += lanes
        _channel_tail(acc, a0 + q * step, step, width, pitch, positions, src, so, q * pitch, wt, taps, count, j)
    if overlap:
        blocked = n_pos
    if size == 3 and n_pos - blocked >= 4:
        # Four positions more (12 of 12, 4 of 4-7): fewer loads than _taps_blocked's 4 x 2 blocks.
        q = blocked
        _lowest_positions(low, so, count, rows, q * pitch, pitch)
        j = 0
        while j + lanes <= width:
            if rows > 0:
                _rows3_4x1(acc, a0 + q * step, step, pitch, src, low, wt, taps, j, count, True, stream)
            else:
                _rows3_4x1(acc, a0 + q * step, step, pitch, src, low, wt, taps, j, count, False, stream)
            j += lanes
        _channel_tail(acc, a0 + q * step, step, width, pitch, 4, src, so, q * pitch, wt, taps, count, j)
        blocked += 4
    return blocked


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
            o = a0 + q * step + j
            _put(acc, o, b0, stream)
            _put(acc, o + lanes, c0, stream)
            _put(acc, o + step, b1, stream)
            _put(acc, o + step + lanes, c1, stream)
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
    line = _LINE // src.itemsize
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
        o = a0 + q * step + j
        _put(acc, o, b0, stream)
        _put(acc, o + lanes, c0, stream)
        _put(acc, o + step, b1, stream)
        _put(acc, o + step + lanes, c1, stream)
        q += 2


@row_njit
def _taps9_rows(acc, a0, step, width, pitch, n_pos, src, so, wt, taps, rows, low, prefetch, stream, ahead_src, ahead,
                ahead_n):
    """``_taps9_2x2`` for a 3x3 filter of dilation 1 (``_filter_rows`` ``rows`` 3 or -3): each
    filter row's 3 taps read 4 consecutive positions for two outputs, so 4 loads serve 6
    products instead of 6. ``prefetch``: the rows are read in place, so the newest one (which
    comes from memory; the older ones were read for the previous output row) is requested
    ``_PREFETCH_AHEAD_BYTES`` ahead; past its end, that is the start of the row that is new for
    the next output row. Without the prefetch, fewer loads made rows from memory slower
    (single thread, 112x112x32: cached images 0.82-0.84, 32 images 1.08).
    ``ahead_src[ahead : ahead + ahead_n]`` (the dy row the next output row stages) is requested
    a share per ``_NINE_POSITIONS`` positions, between the position loops: inside them the
    request made D1 and D7 1.10-1.12x slower (they keep 30 of the 32 vector registers busy)."""
    lanes = simd.lanes(acc)
    _lowest_positions(low, so, 9, rows, 0, pitch)
    stop = n_pos // 2 * 2
    parts = -(-stop // _NINE_POSITIONS)
    share = simd.line_share(ahead_n, parts * (width // (2 * lanes)), _LINE // ahead_src.itemsize)
    requested = 0
    for j in range(0, width, 2 * lanes):
        w, v = _weights9(wt, taps, j), _weights9(wt, taps, j + lanes)
        for q in range(0, stop, _NINE_POSITIONS):
            simd.prefetch_range(ahead_src, ahead + requested, ahead + min(requested + share, ahead_n))
            requested += share
            part_stop = min(q + _NINE_POSITIONS, stop)
            if rows > 0:
                _rows9_2x2(acc, a0, step, pitch, q, part_stop, src, j, lanes, low, w, v, True, prefetch, stream)
            else:
                _rows9_2x2(acc, a0, step, pitch, q, part_stop, src, j, lanes, low, w, v, False, prefetch, stream)
    return stop


# Compiled once per type signature and called, as are ``_taps_rows`` and ``_taps_blocked`` (see
# ``_fast/__init__``). Callers pass ``stream`` as a literal True / False, so numba compiles one
# specialisation of each with the stores fixed (``stream`` tested at each store made D3 3.6x
# slower). Float32 backprop input from an empty cache: 35-39 s (65 s with the segment functions
# inlined and counters typed as literals; 191 s with two inlined copies of ``_taps_rows``).
@row_njit
def _fill_plane_blocked(acc, base, step, width, pitch, n_pos, src, so, tap, lo, hi, nt, wt, scratch, prefetch,
                        stream, ahead_src, ahead, ahead_n):
    """Channels-last plane of ``n_pos`` positions: for q < n_pos, j < width,
    ``acc[base + q*step + j] = sum over taps t with lo[t] <= q < hi[t], in order, of
    src[so[t] + q*pitch + j] * wt[tap[t]*pitch + j]`` (0 where no tap reaches), one segment of
    columns reached by the same taps at a time. ``ahead_src[ahead : ahead + ahead_n]`` is
    requested once: spread over ``_taps_rows`` or ``_taps9_rows`` if the first segment goes there,
    else into L2 at its start."""
    bounds, sub_so, sub_tap, shifted = scratch[0], scratch[1], scratch[2], scratch[3]
    for segment in range(_segments(lo, hi, nt, n_pos, bounds) - 1):
        q0, q1 = bounds[segment], bounds[segment + 1]
        count = np.int64(0)
        for t in range(nt):
            if lo[t] <= q0 and q1 <= hi[t]:
                sub_so[count], sub_tap[count] = so[t] + q0 * pitch, tap[t] * pitch
                count += 1
        if count == 0:
            for q in range(q0, q1):
                acc[base + q * step:base + q * step + width] = 0
            continue
        # A special path computes the first ``done`` positions; the rest go to _taps_blocked.
        done = 0
        rows = _filter_rows(sub_so, count, pitch)
        nine = (count == 9 and width * acc.itemsize <= _WEIGHTS_IN_REGISTERS_BYTES
                and width % (2 * simd.lanes(acc)) == 0)
        if rows == 0:  # the row paths spread the request over their work
            simd.prefetch_l2_range(ahead_src, ahead, ahead + ahead_n)
        if nine:
            if rows != 0:
                done = _taps9_rows(acc, base + q0 * step, step, width, pitch, q1 - q0, src, sub_so, wt, sub_tap, rows,
                                   shifted, prefetch, stream, ahead_src, ahead, ahead_n)
            else:
                done = _taps9_2x2(acc, base + q0 * step, step, width, pitch, q1 - q0, src, sub_so, wt, sub_tap,
                                  stream)
        else:
            if rows != 0:
                done = _taps_rows(acc, base + q0 * step, step, width, pitch, q1 - q0, src, sub_so, wt, sub_tap, count,
                                  rows, shifted, prefetch, stream, ahead_src, ahead, ahead_n)
        ahead_n = 0
        for t in range(count):
            sub_so[t] += done * pitch
        _taps_blocked(acc, base + (q0 + done) * step, step, width, pitch, q1 - q0 - done, src, sub_so, wt, sub_tap,
                      count, shifted, stream)


@row_njit
def _fill_plane_scaled(acc, base, n_pos, src, so, ch, weight, lo, hi, nt, scratch):
    """Planar plane of ``n_pos`` positions: ``acc[base + q] = sum over taps t with lo[t] <= q <
    hi[t], in order, of src[so[t] + ch + q] * weight[t]`` (0 where no tap reaches); segments as in
    ``_fill_plane_blocked``."""
    bounds, sub_so, sub_weight = scratch[0], scratch[1], scratch[2]
    for segment in range(_segments(lo, hi, nt, n_pos, bounds) - 1):
        q0, q1 = bounds[segment], bounds[segment + 1]
        a0, n = base + q0, q1 - q0
        count = np.int64(0)
        for t in range(nt):
            if lo[t] <= q0 and q1 <= hi[t]:
                sub_so[count], sub_weight[count] = so[t] + ch + q0, t
                count += 1
        if count == 0:
            acc[a0:a0 + n] = 0
        t = 0
        while count - t >= 4:
            _scaled4(acc, a0, n, src, sub_so[t], sub_so[t + 1], sub_so[t + 2], sub_so[t + 3], weight[sub_weight[t]],
                     weight[sub_weight[t + 1]], weight[sub_weight[t + 2]], weight[sub_weight[t + 3]], t == 0)
            t += 4
        while t < count:
            _scaled1(acc, a0, n, src, sub_so[t], weight[sub_weight[t]], t == 0)
            t += 1


@njit(inline="always")
def _column_taps(fw, dil_w, pad_left, stride_w, out_w, in_w):
    """Row kx = (ox_lo, ox_hi, r, q_shift) for filter column kx: ``ix = ox*stride_w + shift`` for
    ox in [ox_lo, ox_hi) lands in [0, in_w); residue plane r = shift mod stride_w holds ix at q =
    ox + q_shift. The same for every row, so computed once per call (it takes four divisions)."""
    table = np.empty((fw, 4), np.int64)
    for kx in range(fw):
        shift = kx * dil_w - pad_left
        r = shift % stride_w
        table[kx, 0] = max(0, -(shift // stride_w))
        table[kx, 1] = min(out_w, (in_w - 1 - shift) // stride_w + 1)
        table[kx, 2] = r
        table[kx, 3] = (shift - r) // stride_w
    return table


# --- staging: source rows -> float rows of the canonical layout ------------------------------

@row_njit
def _stage_channels_last(src, base, pos_stride, ch_stride, n_pos, channels, repeat, planes, plane_len,
                         pitch, ring, dst, kind):
    """Row ``src[base + p*pos_stride + c*ch_stride]`` to ``ring[dst + ((p % planes)*plane_len +
    p // planes)*pitch + c*repeat + i]`` for i < repeat (channel c repeated ``repeat`` times, so a
    forward tap's x run lines up with its C*M outputs; ``pitch`` >= C*M spaces the positions)."""
    if repeat == 1 and planes == 1 and pos_stride == channels == pitch and ch_stride == 1:
        _load_run(src, base, 1, n_pos * channels, ring, dst, kind)
        return
    for p in range(n_pos):
        r = p % planes
        d = dst + (r * plane_len + p // planes) * pitch
        s = base + p * pos_stride
        if repeat == 1:
            _load_run(src, s, ch_stride, channels, ring, d, kind)
        else:
            for c in range(channels):
                value = _load_one(src, s + c * ch_stride, kind)
                for i in range(repeat):
                    ring[d + c * repeat + i] = value


@row_njit
def _stage_planar(src, base, pos_stride, ch_stride, n_pos, channels, planes, plane_len, ring, dst, kind):
    """Row ``src[base + p*pos_stride + c*ch_stride]`` to ``ring[dst + (c*planes + p % planes)*plane_len
    + p // planes]``."""
    for c in range(channels):
        for r in range(min(planes, n_pos)):
            count = (n_pos - r + planes - 1) // planes
            _load_run(src, base + c * ch_stride + r * pos_stride, planes * pos_stride, count, ring,
                      dst + (c * planes + r) * plane_len, kind)


# --- forward ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _forward_kernel_for(planar_path: bool):
    """``_forward_kernel`` for planar (NCHW) or channels-last rows: numba prunes the branches of
    the other layout before typing them, so a call compiles only its layout's row code (issue 23,
    cold start). ``planar_path`` is the kernel's ``planar`` argument."""

    @njit(cache=True, nogil=True)
    def _forward_kernel(counters, epoch, role, pool_chunks, x, x_off, x_st, x_direct, direct_in, wv, y, y_off, y_st,
                        y_direct, direct_out, geo, planar, kind, rows_per_job):
        n_batch, in_h, in_w, chans, mult, out_h, out_w = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6]
        fh, fw, sh, sw, dh, dw, pt, pl, pitch = (geo[7], geo[8], geo[9], geo[10], geo[11], geo[12], geo[13], geo[14],
                                                 geo[15])
        width = chans * mult
        plane_len = (in_w + sw - 1) // sw
        row_len = (pitch if not planar else chans) * sw * plane_len
        # distinct x rows one output row reads, and never more than x has (a dilation may exceed it)
        ring_rows = min((fh - 1) * dh + 1, in_h)
        jobs_per_image = (out_h + rows_per_job - 1) // rows_per_job
        acc_k = y_st[3] if direct_out else out_w  # planar: distance between the k planes of a row
        columns = _column_taps(fw, dw, pl, sw, out_w, in_w)
        seen = begin(counters, epoch, role)
        items = n_batch * jobs_per_image
        while True:
            pool_chunk = claim(counters)
            if pool_chunk >= pool_chunks:
                end(epoch, role, seen)
                return
            for job in range(pool_chunk * items // pool_chunks, (pool_chunk + 1) * items // pool_chunks):
                b = job // jobs_per_image
                oy0 = (job - b * jobs_per_image) * rows_per_job
                oy1 = min(out_h, oy0 + rows_per_job)
                ring = np.empty(0 if direct_in else ring_rows * row_len, wv.dtype)
                tags = np.full(ring_rows, -1, np.int64)
                src = x_direct if direct_in else ring
                acc = y_direct if direct_out else np.empty(out_w * width, wv.dtype)
                so = np.empty(fh * fw, np.int64)
                tap = np.empty(fh * fw, np.int64)
                lo = np.empty(fh * fw, np.int64)
                hi = np.empty(fh * fw, np.int64)
                weight = np.empty(fh * fw, wv.dtype)
                scratch = np.empty((4, 2 * fh * fw + 2), np.int64)
                x_base = x_off + b * x_st[0]
                for oy in range(oy0, oy1):
                    nt = np.int64(0)  # not Literal[int](0): see _fast/__init__
                    for ky in range(fh):
                        iy = oy * sh - pt + ky * dh
                        if iy < 0 or iy >= in_h:
                            continue
                        if direct_in:
                            row = x_base + iy * x_st[1]
                        else:
                            slot = iy % ring_rows
                            row = slot * row_len
                            if tags[slot] != iy:
                                tags[slot] = iy
                                if planar_path:
                                    _stage_planar(x, x_base + iy * x_st[1], x_st[2], x_st[3], in_w, chans, sw,
                                                  plane_len, ring, row, kind)
                                else:
                                    _stage_channels_last(x, x_base + iy * x_st[1], x_st[2], x_st[3], in_w, chans, mult,
                                                         sw, plane_len, pitch, ring, row, kind)
                        for kx in range(fw):
                            ox_lo, ox_hi, r, q_shift = columns[kx, 0], columns[kx, 1], columns[kx, 2], columns[kx, 3]
                            if ox_hi <= ox_lo:
                                continue
                            lo[nt], hi[nt], tap[nt] = ox_lo, ox_hi, ky * fw + kx
                            if planar_path:  # x index of (c, ox): so + c*channel_stride + ox
                                # (rows read in place have unit position stride and r = 0: stride 1; with
                                # one position its stride is arbitrary, and only q = 0 is read)
                                so[nt] = row + r * plane_len + q_shift
                            else:  # x index of (ox, k): so + ox*pitch + k
                                so[nt] = row + (r * plane_len + q_shift) * pitch
                            nt += 1
                    y_row = y_off + b * y_st[0] + oy * y_st[1]
                    acc_row = y_row if direct_out else 0
                    if planar_path:
                        channel_stride = x_st[3] if direct_in else sw * plane_len
                        for k in range(width):
                            for t in range(nt):
                                weight[t] = wv[tap[t] * pitch + k]
                            _fill_plane_scaled(acc, acc_row + k * acc_k, out_w, src, so, (k // mult) * channel_stride,
                                               weight, lo, hi, nt, scratch)
                    else:  # no run requested: typed int64, since literals would compile second copies of
                        # _fill_plane_blocked and _taps_rows (first float32 call from an empty cache: 116 s, not 90)
                        _fill_plane_blocked(acc, acc_row, width, width, pitch, out_w, src, so, tap, lo, hi, nt, wv,
                                            scratch, direct_in, False, x, np.int64(0), np.int64(0))
                    if direct_out:
                        continue
                    if planar_path:
                        for k in range(width):
                            _store_run(acc, k * out_w, out_w, y, y_row + k * y_st[3], y_st[2], kind)
                    elif y_st[3] == 1 and y_st[2] == width:
                        _store_run(acc, 0, out_w * width, y, y_row, 1, kind)
                    else:
                        for ox in range(out_w):
                            _store_run(acc, ox * width, width, y, y_row + ox * y_st[2], y_st[3], kind)
            finish(counters)

    return _forward_kernel


# --- backprop input --------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _backprop_input_kernel_for(path: tuple[bool, bool, bool, bool]):
    """``_backprop_input_kernel`` for one ``path`` = its arguments (planar, stream_in_place,
    stream_rows, not direct_out): numba prunes the branches a False flag rules out before typing
    them, so a call compiles only the row code its plan runs (issue 23, cold start): the tap
    paths of ``_fill_plane_blocked`` with ``stream`` = True for a dx streamed in place (beyond
    the cache), with False otherwise, never both. A branch that is kept is taken on the same
    conditions (``stream_in_place`` implies ``direct_out``)."""
    planar_path, stream_in_place_path, stream_rows_path, row_buffer_path = path
    plain_stores_path = not stream_in_place_path

    @njit(cache=True, nogil=True)
    def _backprop_input_kernel(counters, epoch, role, pool_chunks, dy, dy_off, dy_st, dy_direct, direct_in, wv, dx,
                               dx_off, dx_st, dx_direct, direct_out, stream_rows, stream_in_place, geo, planar, kind,
                               rows_per_job, margin_l, margin_r):
        """dx written with non-temporal stores (``direct_out``, channels-last): ``stream_in_place``,
        straight from the registers to dx (every position on a 64-byte line), so the stores drain
        while the next blocks compute; ``stream_rows``, each dx row summed in a row buffer, then
        written as one run (rounded, or its M = 2 sums added: ``_streams_rows``). ``margin_l`` /
        ``margin_r`` (stride 1, staged rows, finite weights; see ``_zero_margins``): zero positions on
        each side of every staged dy row, so that every tap of a row reaches every dx column and the
        row is one segment, without edges."""
        n_batch, in_h, in_w, chans, mult, out_h, out_w = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6]
        fh, fw, sh, sw, dh, dw, pt, pl, pitch = (geo[7], geo[8], geo[9], geo[10], geo[11], geo[12], geo[13], geo[14],
                                                 geo[15])
        width = chans * mult
        plane_len = (in_w + sw - 1) // sw  # dx columns per residue plane (at most)
        row_len = (margin_l + out_w + margin_r) * pitch
        ring_rows = min(((fh - 1) * dh) // sh + 1, out_h)  # distinct dy rows one dx row reads, at most all
        jobs_per_image = (in_h + rows_per_job - 1) // rows_per_job
        acc_k = dx_st[3] if direct_out else sw * plane_len  # planar: distance between the k planes of a row
        columns = _column_taps(fw, dw, pl, sw, out_w, in_w)
        # Staged channels-last rows of one run from beyond the caches: while a dx row is summed, the dy
        # row the next one stages is requested (_PREFETCH_STAGED_BYTES), so that staging it does not
        # wait on memory.
        prefetch_staged = not direct_in and not planar and dy_st[3] == 1 and dy_st[2] == width \
            and dy.size * dy.itemsize >= _PREFETCH_STAGED_BYTES
        seen = begin(counters, epoch, role)
        items = n_batch * jobs_per_image
        while True:
            pool_chunk = claim(counters)
            if pool_chunk >= pool_chunks:
                end(epoch, role, seen)
                return
            for job in range(pool_chunk * items // pool_chunks, (pool_chunk + 1) * items // pool_chunks):
                b = job // jobs_per_image
                iy0 = (job - b * jobs_per_image) * rows_per_job
                iy1 = min(in_h, iy0 + rows_per_job)
                ring = np.empty(0 if direct_in else ring_rows * row_len, wv.dtype)
                tags = np.full(ring_rows, -1, np.int64)
                for slot in range(ring_rows if margin_l + margin_r else 0):  # staging writes between them
                    ring[slot * row_len:slot * row_len + margin_l * pitch] = 0
                    ring[(slot + 1) * row_len - margin_r * pitch:(slot + 1) * row_len] = 0
                src = dy_direct if direct_in else ring
                if stream_rows:
                    acc = np.empty(in_w * width, wv.dtype)  # one dx row of C*M sums
                else:
                    # [r][q][k] or [k][r][q]
                    acc = dx_direct if direct_out else np.empty(sw * plane_len * width, wv.dtype)
                combined = np.empty(sw * plane_len * chans if mult > 1 else 0, wv.dtype)  # >= one dx row
                so = np.empty(fh * fw, np.int64)
                tap = np.empty(fh * fw, np.int64)
                lo = np.empty(fh * fw, np.int64)
                hi = np.empty(fh * fw, np.int64)
                weight = np.empty(fh * fw, wv.dtype)
                scratch = np.empty((4, 2 * fh * fw + 2), np.int64)
                dy_base = dy_off + b * dy_st[0]
                for iy in range(iy0, iy1):
                    dx_row = dx_off + b * dx_st[0] + iy * dx_st[1]
                    acc_row = dx_row if direct_out and not stream_rows else 0
                    ahead = ahead_n = np.int64(0)  # no dy row requested yet
                    for r in range(min(sw, in_w)):
                        n_pos = (in_w - r + sw - 1) // sw
                        nt = np.int64(0)
                        for ky in range(fh):
                            t = iy + pt - ky * dh
                            if t < 0:
                                break
                            oy = t // sh
                            if oy * sh != t or oy >= out_h:
                                continue
                            if direct_in:
                                row = dy_base + oy * dy_st[1]
                            else:
                                slot = oy % ring_rows
                                row = slot * row_len + margin_l * pitch
                                if tags[slot] != oy:
                                    tags[slot] = oy
                                    if planar_path:
                                        _stage_planar(dy, dy_base + oy * dy_st[1], dy_st[2], dy_st[3], out_w, width, 1,
                                                      out_w, ring, row, kind)
                                    else:
                                        _stage_channels_last(dy, dy_base + oy * dy_st[1], dy_st[2], dy_st[3], out_w,
                                                             width, 1, 1, out_w, pitch, ring, row, kind)
                                        if prefetch_staged and oy + 1 < out_h:
                                            ahead, ahead_n = dy_base + (oy + 1) * dy_st[1], out_w * width
                            for kx in range(fw):
                                ox_lo, ox_hi, kx_plane = columns[kx, 0], columns[kx, 1], columns[kx, 2]
                                q_shift = columns[kx, 3]
                                if kx_plane != r or ox_hi <= ox_lo:
                                    continue
                                # dx column q = ox + q_shift of plane r reads dy column ox
                                if margin_l + margin_r:  # stride 1: column ox = q - q_shift, margins too
                                    lo[nt], hi[nt] = max(0, q_shift - margin_l), min(n_pos, q_shift + out_w + margin_r)
                                else:
                                    lo[nt], hi[nt] = ox_lo + q_shift, ox_hi + q_shift
                                tap[nt] = ky * fw + kx
                                so[nt] = row - q_shift * (1 if planar else pitch)
                                nt += 1
                        if planar_path:
                            channel_stride = dy_st[3] if direct_in else out_w
                            for k in range(width):
                                for t in range(nt):
                                    weight[t] = wv[tap[t] * pitch + k]
                                _fill_plane_scaled(acc, acc_row + k * acc_k + r * plane_len, n_pos, src, so,
                                                   k * channel_stride, weight, lo, hi, nt, scratch)
                        elif stream_in_place_path and direct_out and stream_in_place:
                            # positions r, r + sw, ... of the dx row itself
                            _fill_plane_blocked(acc, acc_row + r * width, sw * width, width, pitch, n_pos, src, so, tap,
                                                lo, hi, nt, wv, scratch, direct_in, True, dy, ahead, ahead_n)
                        elif plain_stores_path and direct_out:
                            _fill_plane_blocked(acc, acc_row + r * width, sw * width, width, pitch, n_pos, src, so, tap,
                                                lo, hi, nt, wv, scratch, direct_in, False, dy, ahead, ahead_n)
                        elif row_buffer_path:  # residue plane r of the row buffer, [r][q][k]
                            _fill_plane_blocked(acc, acc_row + r * plane_len * width, width, width, pitch, n_pos,
                                                src, so, tap, lo, hi, nt, wv, scratch, direct_in, False, dy, ahead,
                                                ahead_n)
                        ahead_n = np.int64(0)  # requested once, by the sums of the plane that staged the row
                    if stream_rows_path and stream_rows and mult == 1:
                        _stream_row(acc, in_w * chans, dx, dx_row, kind)
                    elif row_buffer_path and not direct_out:
                        _store_dx_row(acc, combined, dx, dx_row, dx_st, in_w, chans, mult, sw, plane_len, planar, kind,
                                      stream_rows)
            if stream_rows or stream_in_place:
                simd.store_fence()  # the rows are visible before the chunk is reported done
            finish(counters)

    return _backprop_input_kernel


@njit(inline="always")
def _line_head(dst, start, n):
    """How many of ``dst[start : start + n]`` come before the first 64-byte line boundary: the
    elements a streamed run writes with plain stores before its whole lines."""
    return min(n, (-(dst.ctypes.data + start * dst.itemsize)) % simd.VECTOR_BYTES // dst.itemsize)


@row_njit
def _stream_row(buf, n, dst, start, kind):
    """``dst[start:start + n] = buf[:n]``, rounded to dst's type (``_store_run``): whole 64-byte
    lines of ``dst`` with non-temporal stores (``_stream_line``), the partial lines at the two
    ends (``dst`` need only be element-aligned) with plain ones."""
    line = simd.VECTOR_BYTES // dst.itemsize
    head = _line_head(dst, start, n)
    _store_run(buf, 0, head, dst, start, 1, kind)
    i = head
    while i + line <= n:
        _stream_line(dst, start + i, buf, i)
        i += line
    _store_run(buf, i, n - i, dst, start + i, 1, kind)


def _stream_line(dst, index, buf, i):
    """The 64-byte line of ``dst`` at ``index`` = ``buf[i:]`` rounded to dst's type, with
    non-temporal stores: one vector of float, two of float32 rounded to float16 bits."""


@overload(_stream_line, inline="always")
def _stream_line_impl(dst, index, buf, i):
    if isinstance(dst.dtype, types.Float):
        return lambda dst, index, buf, i: simd.store_stream(dst, index, simd.load(buf, i))
    if dst.dtype == types.uint16 and half.HARDWARE_HALF:  # float16 bits (_streams_half_rows)
        def half_line(dst, index, buf, i):
            lanes = simd.lanes(buf)
            simd.store_stream_half(dst, index, simd.load(buf, i))
            simd.store_stream_half(dst, index + lanes, simd.load(buf, i + lanes))
        return half_line
    return lambda dst, index, buf, i: None  # never called: backprop_input streams no other rows


def _pair_sums_run(acc, n, combined, dst, start, kind, stream):
    """``dst[start + i] = acc[2i] + acc[2i + 1]`` for i < n, rounded once to dst's type: the sums of
    m = 0 and m = 1 of M = 2, in that order. ``stream``: dst's whole 64-byte lines with
    non-temporal stores, the partial lines at the ends with plain ones (float dst only: the
    others go through ``combined`` and ``_store_run``)."""


@overload(_pair_sums_run, jit_options={"_nrt": False})  # see row_njit in _fast/__init__
def _pair_sums_run_impl(acc, n, combined, dst, start, kind, stream):
    if isinstance(dst.dtype, types.Float):
        def vectors(acc, n, combined, dst, start, kind, stream):
            lanes = simd.lanes(acc)
            head = _line_head(dst, start, n) if stream else 0
            for i in range(head):
                dst[start + i] = acc[2 * i] + acc[2 * i + 1]
            i = head
            while i + lanes <= n:
                _put(dst, start + i, simd.pair_sums(simd.load(acc, 2 * i), simd.load(acc, 2 * i + lanes)), stream)
                i += lanes
            for k in range(i, n):
                dst[start + k] = acc[2 * k] + acc[2 * k + 1]
        return vectors

    def scalars(acc, n, combined, dst, start, kind, stream):
        for i in range(n):  # a constant stride: this loop vectorises
            combined[i] = acc[2 * i] + acc[2 * i + 1]
        _store_run(combined, 0, n, dst, start, 1, kind)
    return scalars


@row_njit
def _store_dx_row(acc, combined, dx, base, dx_st, in_w, chans, mult, sw, plane_len, planar, kind, stream):
    """dx[ix, c] = sum over m (in order) of acc at (ix, c*M + m); ix = q*sw + r. ``stream`` (one
    run, M = 2): non-temporal stores (``_streams_rows``)."""
    width = chans * mult
    if planar:
        for c in range(chans):
            if mult == 1:
                plane, start = acc, c * sw * plane_len
            else:
                plane, start = combined, 0
                plane0 = c * mult * sw * plane_len
                for j in range(sw * plane_len):  # not a slice assignment, which needs numba's runtime
                    combined[j] = acc[plane0 + j]
                for m in range(1, mult):
                    part = acc[plane0 + m * sw * plane_len:plane0 + (m + 1) * sw * plane_len]
                    for j in range(sw * plane_len):
                        combined[j] += part[j]
            for r in range(min(sw, in_w)):
                _store_run(plane, start + r * plane_len, (in_w - r + sw - 1) // sw, dx,
                           base + c * dx_st[3] + r * dx_st[2], sw * dx_st[2], kind)
        return
    if sw == 1 and dx_st[3] == 1 and dx_st[2] == chans:  # one run: the row is [ix][c], acc [ix][c*M + m]
        if mult == 1:
            _store_run(acc, 0, in_w * chans, dx, base, 1, kind)
            return
        n = in_w * chans
        if mult == 2:
            if stream:  # a literal per call: the stores are fixed at compile time
                _pair_sums_run(acc, n, combined, dx, base, kind, True)
            else:
                _pair_sums_run(acc, n, combined, dx, base, kind, False)
            return
        for i in range(n):
            total = acc[i * mult]
            for m in range(1, mult):
                total += acc[i * mult + m]
            combined[i] = total
        _store_run(combined, 0, n, dx, base, 1, kind)
        return
    for ix in range(in_w):
        q = ix // sw
        start = ((ix - q * sw) * plane_len + q) * width
        if mult == 1:
            _store_run(acc, start, chans, dx, base + ix * dx_st[2], dx_st[3], kind)
        else:
            if mult == 2:  # a constant stride: this loop vectorises
                pairs = acc[start:start + 2 * chans]
                for c in range(chans):
                    combined[c] = pairs[2 * c] + pairs[2 * c + 1]
            else:
                for c in range(chans):
                    total = acc[start + c * mult]
                    for m in range(1, mult):
                        total += acc[start + c * mult + m]
                    combined[c] = total
            _store_run(combined, 0, chans, dx, base + ix * dx_st[2], dx_st[3], kind)


# --- planar, stride 1: whole row blocks per tap ------------------------------------------------

@njit(cache=True, nogil=True)
def _planar_blocks_kernel(counters, epoch, role, pool_chunks, src, src_off, src_st, wv, out, out_off, out_st, geo,
                          shift_y, shift_x, adjoint, kind):
    """Stride-1 planes (forward, and backprop input when ``adjoint``): out[y, x] of plane p is the sum
    over taps t, in order, of w * src[y + shift_y[t], x + shift_x[t]] of a source plane. A job stages
    a block of source rows with zero margins at a common pitch, so each tap is one run over the
    whole block: with finite weights a tap reaching the zero margin adds w * 0 = +-0, which leaves
    a sum that started at +0 unchanged, i.e. exactly as if the tap were skipped. Backprop input sums
    each of the M source planes of dx plane c separately, then adds the partial sums in m order."""
    n_batch, out_h, out_w, src_h, src_w, planes, mult, block_rows = (geo[0], geo[1], geo[2], geo[3], geo[4],
                                                                     geo[5], geo[6], geo[7])
    width = wv.size // shift_y.size  # C*M: columns of the [tap][k] weight table
    taps = shift_y.size
    y_lo, y_hi, x_lo, x_hi = shift_y.min(), shift_y.max(), shift_x.min(), shift_x.max()
    pitch = out_w + x_hi - x_lo
    stage_rows = block_rows + y_hi - y_lo
    parts = mult if adjoint else 1
    blocks = (out_h + block_rows - 1) // block_rows
    seen = begin(counters, epoch, role)
    items = n_batch * planes * blocks
    while True:
        pool_chunk = claim(counters)
        if pool_chunk >= pool_chunks:
            end(epoch, role, seen)
            return
        for job in range(pool_chunk * items // pool_chunks, (pool_chunk + 1) * items // pool_chunks):
            b = job // (planes * blocks)
            plane = (job // blocks) % planes
            y0 = (job % blocks) * block_rows
            rows = min(block_rows, out_h - y0)
            n = rows * pitch
            stage = np.empty(stage_rows * pitch + pitch, wv.dtype)  # + one pitch of slack read by last taps
            acc = np.empty(parts * block_rows * pitch, wv.dtype)
            offsets = np.empty(taps, np.int64)
            weight = np.empty(taps, wv.dtype)
            for t in range(taps):
                offsets[t] = (shift_y[t] - y_lo) * pitch + shift_x[t] - x_lo
            for part in range(parts):
                k = plane * mult + part if adjoint else plane  # weight column
                source = k if adjoint else plane // mult
                base = src_off + b * src_st[0] + source * src_st[3]
                stage[:] = 0
                for r in range(rows + y_hi - y_lo):
                    sy = y0 + y_lo + r
                    if 0 <= sy < src_h:
                        col0 = max(0, x_lo)  # source columns [x_lo, x_lo + pitch) land at stage columns 0..
                        col1 = min(src_w, x_lo + pitch)
                        if col1 > col0:
                            _load_run(src, base + sy * src_st[1] + col0 * src_st[2], src_st[2], col1 - col0, stage,
                                      r * pitch + col0 - x_lo, kind)
                for t in range(taps):
                    weight[t] = wv[t * width + k]
                a0 = part * block_rows * pitch
                t = 0
                while taps - t >= 4:
                    _scaled4(acc, a0, n, stage, offsets[t], offsets[t + 1], offsets[t + 2], offsets[t + 3], weight[t],
                             weight[t + 1], weight[t + 2], weight[t + 3], t == 0)
                    t += 4
                while t < taps:
                    _scaled1(acc, a0, n, stage, offsets[t], weight[t], t == 0)
                    t += 1
            for part in range(1, parts):
                total = acc[:n]
                term = acc[part * block_rows * pitch:part * block_rows * pitch + n]
                for j in range(n):
                    total[j] += term[j]
            for r in range(rows):
                start = out_off + b * out_st[0] + (y0 + r) * out_st[1] + plane * out_st[3]
                _store_run(acc, r * pitch, out_w, out, start, out_st[2], kind)
        finish(counters)


# --- backprop filter -------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _backprop_filter_kernel(counters, epoch, role, pool_chunks, x, x_off, x_st, x_direct, direct_x, dy, dy_off, dy_st,
                            dy_direct, direct_dy, partial, geo, planar, kind):
    """``partial[chunk, tap, k]``: the chunk's rows summed lane by lane, lanes added in order."""
    n_batch, in_h, in_w, chans, mult, out_h, out_w = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6]
    fh, fw, sh, sw, dh, dw, pt, pl = geo[7], geo[8], geo[9], geo[10], geo[11], geo[12], geo[13], geo[14]
    width = chans * mult
    plane_len = (in_w + sw - 1) // sw
    x_row_len = (width if not planar else chans) * sw * plane_len
    ring_rows = min((fh - 1) * dh + 1, in_h)  # distinct x rows one dy row reads, at most all
    chunks = partial.shape[0]
    rows = n_batch * out_h
    columns = _column_taps(fw, dw, pl, sw, out_w, in_w)
    seen = begin(counters, epoch, role)
    items = chunks
    while True:
        pool_chunk = claim(counters)
        if pool_chunk >= pool_chunks:
            end(epoch, role, seen)
            return
        for chunk in range(pool_chunk * items // pool_chunks, (pool_chunk + 1) * items // pool_chunks):
            lanes = np.zeros(fh * fw * _LANES * width, partial.dtype)  # [tap][lane][k] or [tap][k][lane]
            ring = np.empty(0 if direct_x else ring_rows * x_row_len, partial.dtype)
            tags = np.full(ring_rows, -1, np.int64)
            xs = x_direct if direct_x else ring
            dy_row = np.empty(0 if direct_dy else out_w * width, partial.dtype)
            ds = dy_direct if direct_dy else dy_row
            for row in range(chunk * rows // chunks, (chunk + 1) * rows // chunks):
                b = row // out_h
                oy = row - b * out_h
                if direct_dy:
                    d0 = dy_off + b * dy_st[0] + oy * dy_st[1]
                    d_ch = dy_st[3]
                else:
                    d0, d_ch = 0, out_w
                    if planar:
                        _stage_planar(dy, dy_off + b * dy_st[0] + oy * dy_st[1], dy_st[2], dy_st[3], out_w, width, 1,
                                      out_w, dy_row, 0, kind)
                    else:
                        _stage_channels_last(dy, dy_off + b * dy_st[0] + oy * dy_st[1], dy_st[2], dy_st[3], out_w,
                                             width, 1, 1, out_w, width, dy_row, 0, kind)
                for ky in range(fh):
                    iy = oy * sh - pt + ky * dh
                    if iy < 0 or iy >= in_h:
                        continue
                    if direct_x:
                        x_row = x_off + b * x_st[0] + iy * x_st[1]
                        x_ch = x_st[3]
                    else:
                        slot = iy % ring_rows
                        x_row = slot * x_row_len
                        x_ch = sw * plane_len
                        if tags[slot] != b * in_h + iy:
                            tags[slot] = b * in_h + iy
                            if planar:
                                _stage_planar(x, x_off + b * x_st[0] + iy * x_st[1], x_st[2], x_st[3], in_w, chans, sw,
                                              plane_len, ring, x_row, kind)
                            else:
                                _stage_channels_last(x, x_off + b * x_st[0] + iy * x_st[1], x_st[2], x_st[3], in_w,
                                                     chans, mult, sw, plane_len, chans * mult, ring, x_row, kind)
                    for kx in range(fw):
                        ox_lo, ox_hi, r, q_shift = columns[kx, 0], columns[kx, 1], columns[kx, 2], columns[kx, 3]
                        if ox_hi <= ox_lo:
                            continue
                        t = ky * fw + kx
                        if planar:
                            x_col = x_row + r * plane_len + q_shift  # as in the forward kernel
                            for k in range(width):
                                _lane_dot(lanes, (t * width + k) * _LANES, ds, d0 + k * d_ch,
                                          xs, x_col + (k // mult) * x_ch, ox_lo, ox_hi)
                        else:
                            x_col = x_row + (r * plane_len + q_shift) * width
                            for ox in range(ox_lo, ox_hi):
                                lane = lanes[(t * _LANES + ox % _LANES) * width:(t * _LANES + ox % _LANES + 1) * width]
                                dd = ds[d0 + ox * width:d0 + (ox + 1) * width]
                                xx = xs[x_col + ox * width:x_col + (ox + 1) * width]
                                for k in range(width):
                                    lane[k] += dd[k] * xx[k]
            for t in range(fh * fw):
                for k in range(width):
                    if planar:
                        first, step = (t * width + k) * _LANES, 1
                    else:
                        first, step = t * _LANES * width + k, width
                    total = lanes[first]
                    for lane in range(1, _LANES):
                        total += lanes[first + lane * step]
                    partial[chunk, t, k] = total
        finish(counters)


@row_njit
def _lane_dot(lanes, base, d, d0, xs, x0, lo, hi):
    """lanes[base + ox % LANES] += d[d0 + ox] * xs[x0 + ox] for ox in [lo, hi), ox ascending."""
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


@njit(cache=True, nogil=True)
def _combine_chunks(partial, out, out_off, out_st, fw, mult, kind):
    """out[ky, kx, c, m] = the chunk partials of (tap, c*M + m) added in chunk order, rounded once."""
    taps, width = partial.shape[1], partial.shape[2]
    for t in range(taps):
        for k in range(width):
            total = partial[0, t, k]
            for chunk in range(1, partial.shape[0]):
                total += partial[chunk, t, k]
            c = k // mult
            i = out_off + (t // fw) * out_st[0] + (t % fw) * out_st[1] + c * out_st[2] + (k - c * mult) * out_st[3]
            _store_one(out, i, total, kind)


# --- entry points (called by gradops.depthwise with NHWC-indexed views) -----------------------

def _accumulator(dtype: np.dtype) -> type:
    return np.float64 if dtype == np.float64 else np.float32


def _kernel_view(array: np.ndarray, readonly: bool) -> tuple[np.ndarray, int, np.ndarray]:
    """(flat buffer, offset, element strides) of any view; half types as their uint16 bits.
    Inputs always go in read-only, so a caller's writeable flag does not double the kernel
    specialisations numba compiles."""
    array = aligned_input(array)
    if array.dtype in _HALF_KINDS:
        array = array.view(np.uint16)
    buffer, offset, strides = flat_view(array)
    if readonly:
        buffer.flags.writeable = False
    return buffer, offset, strides


def _no_rows(dtype: type) -> np.ndarray:
    """The stand-in for a "direct" input buffer when the rows are staged instead."""
    rows = np.empty(0, dtype)
    rows.flags.writeable = False
    return rows


def _is_planar(pos_stride: int, ch_stride: int, n_pos: int, n_ch: int) -> bool:
    """Planar rows when positions, not channels, are the unit-stride axis (NCHW data)."""
    return (n_pos == 1 or pos_stride == 1) and not (n_ch == 1 or ch_stride == 1)


def _direct_rows(strides: np.ndarray, n_pos: int, width: int, planar: bool) -> bool:
    """Whether rows already are float rows of the canonical layout: channels-last
    ``[position][k]`` with k contiguous, or planar with unit position stride."""
    if planar:
        return n_pos == 1 or strides[2] == 1
    return (width == 1 or strides[3] == 1) and (n_pos == 1 or strides[2] == width)


def _on_lines(buffer: np.ndarray, offset: int, strides: np.ndarray, chans: int) -> bool:
    """Whether every channels-last position of a flat view starts on a 64-byte line and spans
    whole lines (unit channel stride)."""
    line = simd.VECTOR_BYTES // buffer.itemsize
    return bool(strides[3] == 1 and chans % line == 0 and all(s % line == 0 for s in strides[:3])
                and (buffer.ctypes.data + offset * buffer.itemsize) % simd.VECTOR_BYTES == 0)


def _weights(filt: np.ndarray, acc: type, pitch: int) -> np.ndarray:
    """The filter as ``[tap][k]`` floats, flat: tap ``t``'s weights start at ``t * pitch``."""
    fh, fw, chans, mult = filt.shape
    table = np.zeros((fh * fw, pitch), acc)
    table[:, :chans * mult] = filt.reshape(fh * fw, chans * mult)
    return table.reshape(-1)


def _pitch(width: int, acc: type, planar: bool) -> int:
    """Distance between consecutive positions of channels-last staged rows and between the taps of
    the weight table: C*M, plus one cache line when C*M elements span a multiple of 512 bytes.
    Without it, one vector of channels at 8-12 consecutive positions of 3-5 rows (what a block of
    taps reads) falls into 2-4 of the 64 sets of a 32 KiB L1 and evicts itself: 27 against 41
    GMAC/s for D4's rows in cache."""
    size = np.dtype(acc).itemsize
    if planar or (width * size) % 512:
        return width
    return width + 64 // size


def _rows_per_job(batch: int, rows: int) -> int:
    """Output rows per job: about ``_JOBS_PER_THREAD`` jobs per thread balance the load, and no
    more, since each job reads the source rows around its block again (a 3x3 filter: 2 rows).
    With 32 jobs instead of 64 on 2 threads, D1, D3 and D4 each took about 6% less time. Results
    do not depend on it: every output row is summed whole inside one job."""
    return min(rows, max(1, math.ceil(batch * rows / (_JOBS_PER_THREAD * thread_count()))))


def _streams_rows(out: np.ndarray, dx_st: np.ndarray, chans: int, mult: int, stride_w: int, planar: bool) -> bool:
    """Whether backprop input writes dx rows from its row buffer with non-temporal stores as it
    finishes them (``stream_rows``): a dx beyond the cache whose rows are one run each
    (channels-last, stride 1), either float16 with M = 1 where the CPU converts half in hardware,
    rounded on the way out (``_stream_row``; D7: 0.89x the time), or float with M = 2, the two
    sums of each element added in vectors on the way out (``_pair_sums_run``; D4: 0.88-0.92x,
    interleaved A/B). Any row start: the partial lines at its ends take plain stores."""
    one_run = (stride_w == 1 and not planar and dx_st[3] == 1 and dx_st[2] == chans
               and out.nbytes >= simd.STREAMING_THRESHOLD_BYTES)
    half_rows = out.dtype == np.float16 and half.HARDWARE_HALF and mult == 1
    pair_rows = out.dtype not in _HALF_KINDS and mult == 2
    return one_run and (half_rows or pair_rows)


def _zero_margins(fw: int, dil_w: int, pad_left: int, out_w: int, in_w: int) -> tuple[int, int]:
    """Zero dy positions to stage left and right of each row for the stride-1 adjoint, where dx
    column ix reads dy column ix + pad_left - kx*dil_w: with them every tap reaches every dx
    column. A tap reaching a margin adds x*0 = +-0 to a sum that started at +0, which leaves it
    unchanged bit for bit (a sum from +0 is never -0; x + +-0 = x otherwise), given finite
    weights. Each margin is the filter's reach (fw - 1)*dil_w less that side's padding, at least 0
    (out_w = in_w + pad_left + pad_right - reach)."""
    reach = (fw - 1) * dil_w
    return max(0, reach - pad_left), max(0, in_w + pad_left - out_w)


def _geometry(*sizes: int) -> np.ndarray:
    """(N, H, W, C, M, OH, OW, fh, fw, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, pitch):
    the ``geo`` argument of the row kernels."""
    return np.array(sizes, dtype=np.int64)


def _tap_shifts(fh: int, fw: int, step_y: int, step_x: int, start_y: int, start_x: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per tap (ky, kx) in order: the source offset ``start + k*step`` of each axis."""
    ky, kx = np.divmod(np.arange(fh * fw, dtype=np.int64), fw)
    return start_y + ky * step_y, start_x + kx * step_x


def _run_planar_blocks(src, src_off, src_st, wv, out, out_off, out_st, sizes, shift_y, shift_x, adjoint,
                       dtype) -> None:
    """``sizes``: (batch, out_h, out_w, src_h, src_w, out planes, M). Blocks of about 8K elements
    keep a job's staged rows and accumulators in cache."""
    batch, out_h, out_w, src_h, src_w, planes, mult = sizes
    pitch = out_w + int(shift_x.max() - shift_x.min())
    block_rows = max(1, min(out_h, 8192 // pitch))
    geo = np.array([batch, out_h, out_w, src_h, src_w, planes, mult, block_rows], dtype=np.int64)
    share(_planar_blocks_kernel, batch * planes * -(-out_h // block_rows), src.nbytes + out.nbytes, src, src_off,
          src_st, wv, out, out_off, out_st, geo, shift_y, shift_x, adjoint, _HALF_KINDS.get(dtype, _FLOAT))


_REFERENCE_NAMES = {"forward": "conv_forward", "input": "backprop_input", "filter": "backprop_filter"}
# A column stride this much beyond the input's width runs on the reference kernels (float64 sums):
# the strided layouts stage one residue plane per stride step, whatever the width.
_MAX_EMPTY_PLANES = 64


def _live_taps(in_size: int, out_size: int, taps: int, stride: int, dilation: int, pad: int
               ) -> tuple[int, int, int, int, int] | None:
    """The taps of one filter axis that read inside the input, for some output position ``o``:
    tap ``k`` reads input ``k*dilation - pad + o*stride`` (SPEC 5.4). Returns ``(first, last, crop,
    pad', dilation')``: only taps first..last, read as a filter of their own with ``pad'`` and
    ``dilation'`` from input position ``crop`` on (no input before ``crop`` is read), or None when
    no tap reads the input. The other taps read only padding: the kernels would skip them, so
    leaving them out gives the same bits, and no staging buffer grows with a dilation or padding
    beyond the sizes of the operands."""
    start = np.arange(taps, dtype=np.int64) * dilation - pad  # the input position each tap reads at o = 0
    first_output = np.maximum(0, -(start // stride))  # the first o that reads at or after position 0
    live = np.flatnonzero((first_output < out_size) & (start + first_output * stride <= in_size - 1))
    if live.size == 0:
        return None
    first, last = int(live[0]), int(live[-1])
    first_start = first * dilation - pad
    return first, last, max(0, first_start), max(0, -first_start), dilation if last > first else 1


def _entry_point(role: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``compute(a, b, out, *attrs)`` for non-empty operands and an element-aligned ``out``: an empty
    output needs nothing, an empty operand means a sum over no taps (zeros), and an output view
    whose strides are not whole elements is computed into a temporary and copied. ``role`` says
    which operands are the input-space tensor and the filter ("forward": x, filter, y; "input":
    dy, filter, dx; "filter": x, dy, dfilter), so that taps reading only padding are left out
    (:func:`_live_taps`)."""
    def wrap(compute: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(compute)
        def entry(a: np.ndarray, b: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int, dil_h: int,
                  dil_w: int, pad_top: int, pad_left: int) -> None:
            if out.size == 0:
                return
            if a.size == 0 or b.size == 0:
                out[...] = 0
                return
            space = out if role == "input" else a
            filter_shape = out.shape if role == "filter" else b.shape
            output_space = a if role == "input" else (b if role == "filter" else out)
            rows = _live_taps(space.shape[1], output_space.shape[1], filter_shape[0], stride_h, dil_h, pad_top)
            cols = _live_taps(space.shape[2], output_space.shape[2], filter_shape[1], stride_w, dil_w, pad_left)
            if rows is None or cols is None:
                out[...] = 0  # every tap reads padding
                return
            (k0h, k1h, crop_h, pad_top, dil_h), (k0w, k1w, crop_w, pad_left, dil_w) = rows, cols
            if (k0h, k1h + 1, k0w, k1w + 1, crop_h, crop_w) != (0, filter_shape[0], 0, filter_shape[1], 0, 0):
                taps = np.s_[k0h:k1h + 1, k0w:k1w + 1]
                if role == "forward":
                    a, b = a[:, crop_h:, crop_w:], b[taps]
                elif role == "input":
                    out[...] = 0  # dx positions before the crop and taps left out get nothing
                    b, out = b[taps], out[:, crop_h:, crop_w:]
                else:
                    out[...] = 0
                    a, out = a[:, crop_h:, crop_w:], out[taps]
            space = out if role == "input" else a
            output_space = a if role == "input" else (b if role == "filter" else out)
            if output_space.shape[2] == 1:
                stride_w = 1  # one output column: the stride is never applied
            attrs = (stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)
            if stride_w > space.shape[2] + _MAX_EMPTY_PLANES:
                # Residue planes (one per stride step) would be mostly empty and grow with the stride
                REFERENCE_KERNELS[_REFERENCE_NAMES[role]](a, b, out, *attrs)
                return
            if element_aligned(out):
                compute(a, b, out, *attrs)
                return
            target = np.empty(out.shape, out.dtype)
            compute(a, b, target, *attrs)
            np.copyto(out, target)
        return entry
    return wrap


@_entry_point("forward")
def conv_forward(x: np.ndarray, filt: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int, dil_h: int,
                 dil_w: int, pad_top: int, pad_left: int) -> None:
    """y[b, oy, ox, c*M+m] = sum_{ky,kx} x[b, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw, c] * F[ky, kx, c, m]
    (SPEC 5.4) into ``out`` [N, OH, OW, C*M]."""
    batch, in_h, in_w, chans = x.shape
    fh, fw, _, mult = filt.shape
    _, out_h, out_w, width = out.shape
    acc = _accumulator(out.dtype)
    native = out.dtype not in _HALF_KINDS
    x_buf, x_off, x_st = _kernel_view(x, True)
    y_buf, y_off, y_st = _kernel_view(out, False)
    planar = _is_planar(x_st[2], x_st[3], in_w, chans)
    pitch = _pitch(width, acc, planar)
    direct_in = (native and stride_w == 1 and (planar or mult == 1) and pitch == width
                 and _direct_rows(x_st, in_w, chans, planar))
    direct_out = native and _direct_rows(y_st, out_w, width, planar)
    wv = _weights(filt, acc, pitch)
    if planar and stride_h == stride_w == 1 and np.isfinite(wv).all():
        shift_y, shift_x = _tap_shifts(fh, fw, dil_h, dil_w, -pad_top, -pad_left)
        _run_planar_blocks(x_buf, x_off, x_st, wv, y_buf, y_off, y_st, (batch, out_h, out_w, in_h, in_w, width, mult),
                           shift_y, shift_x, False, out.dtype)
        return
    geo = _geometry(batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, stride_h, stride_w, dil_h, dil_w, pad_top,
                    pad_left, pitch)
    rows_per_job = _rows_per_job(batch, out_h)
    share(_forward_kernel_for(planar), batch * -(-out_h // rows_per_job), x.nbytes + out.nbytes, x_buf, x_off, x_st,
          x_buf if direct_in else _no_rows(acc), direct_in, wv, y_buf, y_off, y_st,
          y_buf if direct_out else np.empty(0, acc), direct_out, geo, planar, _HALF_KINDS.get(out.dtype, _FLOAT),
          rows_per_job)


@_entry_point("input")
def backprop_input(dy: np.ndarray, filt: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int, dil_h: int,
                   dil_w: int, pad_top: int, pad_left: int) -> None:
    """dx = the adjoint of ``conv_forward`` applied to dy (SPEC 5.4), into ``out`` [N, H, W, C]."""
    batch, in_h, in_w, chans = out.shape
    fh, fw, _, mult = filt.shape
    _, out_h, out_w, width = dy.shape
    acc = _accumulator(out.dtype)
    native = out.dtype not in _HALF_KINDS
    dy_buf, dy_off, dy_st = _kernel_view(dy, True)
    dx_buf, dx_off, dx_st = _kernel_view(out, False)
    planar = _is_planar(dy_st[2], dy_st[3], out_w, width)
    pitch = _pitch(width, acc, planar)
    wv = _weights(filt, acc, pitch)
    finite = bool(np.isfinite(wv).all())
    # dy rows in the canonical layout are read in place, but stride-1 rows wider than
    # _IN_PLACE_ROW_BYTES are staged with zero margins (finite weights): each row is then one
    # segment of taps, without edge positions (see _zero_margins)
    direct_in = native and pitch == width and _direct_rows(dy_st, out_w, width, planar) and (
        stride_w != 1 or not finite or width * np.dtype(acc).itemsize <= _IN_PLACE_ROW_BYTES)
    # dx rows can be the accumulator when they have its layout and there is no m to combine:
    # channels-last residue planes write every sw-th position in place; planar ones need sw == 1
    direct_out = native and mult == 1 and (stride_w == 1 or not planar) and _direct_rows(dx_st, in_w, chans, planar)
    # A dx beyond the cache skips the read for ownership of its lines: in place, D1 0.92-0.97x,
    # D3 0.95-0.97x, D5 0.88-0.92x (interleaved A/B). Through a row buffer, only a strided dx paid
    # (s*s times dy's size; D2 -11 to -19%; D1 -2 to +3%, D5 +21%).
    stream_out = direct_out and not planar and out.nbytes >= simd.STREAMING_THRESHOLD_BYTES
    stream_in_place = stream_out and _on_lines(dx_buf, dx_off, dx_st, chans)
    stream_rows = (stream_out and not stream_in_place and stride_w > 1) or _streams_rows(
        out, dx_st, chans, mult, stride_w, planar)
    if planar and stride_h == stride_w == 1 and finite:
        # dx[iy, ix] reads dy[iy + pt - ky*dh, ix + pl - kx*dw]
        shift_y, shift_x = _tap_shifts(fh, fw, -dil_h, -dil_w, pad_top, pad_left)
        _run_planar_blocks(dy_buf, dy_off, dy_st, wv, dx_buf, dx_off, dx_st, (batch, in_h, in_w, out_h, out_w, chans,
                           mult), shift_y, shift_x, True, out.dtype)
        return
    geo = _geometry(batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, stride_h, stride_w, dil_h, dil_w, pad_top,
                    pad_left, pitch)
    rows_per_job = _rows_per_job(batch, in_h)
    margins = _zero_margins(fw, dil_w, pad_left, out_w, in_w) if not (direct_in or planar) and stride_w == 1 else (0, 0)
    if margins != (0, 0) and not finite:
        margins = (0, 0)  # 0 * inf: the margins would turn skipped taps into NaN
    kernel = _backprop_input_kernel_for((planar, stream_in_place, stream_rows, not direct_out))
    share(kernel, batch * -(-in_h // rows_per_job), dy.nbytes + out.nbytes, dy_buf, dy_off, dy_st,
          dy_buf if direct_in else _no_rows(acc), direct_in, wv, dx_buf, dx_off, dx_st,
          dx_buf if direct_out else np.empty(0, acc), direct_out, stream_rows, stream_in_place, geo, planar,
          _HALF_KINDS.get(out.dtype, _FLOAT), rows_per_job, *margins)


@_entry_point("filter")
def backprop_filter(x: np.ndarray, dy: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int, dil_h: int,
                    dil_w: int, pad_top: int, pad_left: int) -> None:
    """dF[ky, kx, c, m] = sum_{b,oy,ox} dy[b, oy, ox, c*M+m] * x[b, iy, ix, c] over in-range (iy, ix)
    (SPEC 5.4), into ``out`` [fh, fw, C, M]."""
    batch, in_h, in_w, chans = x.shape
    fh, fw, _, mult = out.shape
    _, out_h, out_w, width = dy.shape
    acc = _accumulator(out.dtype)
    native = x.dtype not in _HALF_KINDS
    x_buf, x_off, x_st = _kernel_view(x, True)
    dy_buf, dy_off, dy_st = _kernel_view(dy, True)
    planar = _is_planar(dy_st[2], dy_st[3], out_w, width)
    direct_x = native and stride_w == 1 and (planar or mult == 1) and _direct_rows(x_st, in_w, chans, planar)
    direct_dy = native and _direct_rows(dy_st, out_w, width, planar)
    partial = np.empty((min(_CHUNKS, batch * out_h), fh * fw, width), acc)
    geo = _geometry(batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, stride_h, stride_w, dil_h, dil_w, pad_top,
                    pad_left)
    kind = _HALF_KINDS.get(out.dtype, _FLOAT)
    share(_backprop_filter_kernel, partial.shape[0], x.nbytes + dy.nbytes, x_buf, x_off, x_st,
          x_buf if direct_x else _no_rows(acc), direct_x, dy_buf, dy_off, dy_st, dy_buf if direct_dy else _no_rows(acc),
          direct_dy, partial, geo, planar, kind)
    out_buf, out_off, out_st = _kernel_view(out, False)
    _combine_chunks(partial, out_buf, out_off, out_st, fw, mult, kind)
