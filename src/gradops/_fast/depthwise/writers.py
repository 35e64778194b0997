"""Writers of backprop-input dx rows from a row buffer: the M partial sums of an element added
in m order (SPEC 5.4, the package docstring's order), rounded once to the output type, and,
for a dx beyond the cache, written with non-temporal stores (``plan._streams_rows``): whole
64-byte lines streamed, the partial lines at the two ends of a row with plain stores.
"""

from __future__ import annotations

from numba import types
from numba.extending import overload

from .. import row_njit, simd
from ..codecs import stream_run
from ..numba_internals import NO_REFCOUNT
from .codecs import _put, _store_run


@row_njit
def _stream_row(buf, n, dst, start):
    """``dst[start:start + n] = buf[:n]`` streamed (``codecs.stream_run``: float rows, and float16
    rows rounded from float32 sums): compiled once per array types, not inlined into each kernel."""
    stream_run(buf, 0, n, dst, start)


def _pair_sums_run(acc, n, combined, dst, start, kind, stream):
    """``dst[start + i] = acc[2i] + acc[2i + 1]`` for i < n, rounded once to dst's type: the sums of
    m = 0 and m = 1 of M = 2, in that order. ``stream``: dst's whole 64-byte lines with
    non-temporal stores, the partial lines at the ends with plain ones (float dst only: the
    others go through ``combined`` and ``_store_run``)."""


@overload(_pair_sums_run, jit_options=NO_REFCOUNT, prefer_literal=True)  # see row_njit in _fast/__init__
def _pair_sums_run_impl(acc, n, combined, dst, start, kind, stream):
    if isinstance(dst.dtype, types.Float):
        def vectors(acc, n, combined, dst, start, kind, stream):
            lanes = simd.lanes(acc)
            head = simd.line_head(dst, start, n) if stream else 0
            for i in range(head):
                dst[start + i] = acc[2 * i] + acc[2 * i + 1]
            i = head
            while i + lanes <= n:
                _put(dst, start + i, simd.pair_sums(simd.load(acc, 2 * i), simd.load(acc, 2 * i + lanes)), stream)
                i += lanes
            for k in range(i, n):
                dst[start + k] = acc[2 * k] + acc[2 * k + 1]
        return vectors

    return lambda acc, n, combined, dst, start, kind, stream: _pair_sums_rounded(acc, n, combined, dst, start, kind)


@row_njit
def _pair_sums_rounded(acc, n, combined, dst, start, kind):
    """``_pair_sums_run`` for a half dst, one function for both ``stream`` literals: the sums
    in ``combined``, then rounded by ``_store_run``."""
    for i in range(n):  # a constant stride: this loop vectorises
        combined[i] = acc[2 * i] + acc[2 * i + 1]
    _store_run(combined, 0, n, dst, start, 1, kind)


@row_njit
def _store_planar_dx_row(acc, combined, dx, base, dx_st, in_w, chans, mult, sw, plane_len, kind):
    """dx[c, ix] = sum over m (in order) of the planar row buffer at (c*M + m, ix); ix = q*sw + r."""
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


@row_njit
def _store_dx_row(acc, combined, dx, base, dx_st, in_w, chans, mult, sw, plane_len, kind, stream):
    """dx[ix, c] = sum over m (in order) of the channels-last row buffer at (ix, c*M + m);
    ix = q*sw + r. ``stream`` (one run, M = 2): non-temporal stores (``_streams_rows``). Planar
    rows have a function of their own (``_store_planar_dx_row``), so that a kernel compiles the
    writer of its layout only."""
    width = chans * mult
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
