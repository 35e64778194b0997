"""Element loads and stores of the depthwise kernels: half decoding and encoding, plain and
non-temporal vector stores.

Half arrays reach the kernels as their uint16 bits (numba has no half arithmetic): they load as
float32 (bit-exact decoding) and are rounded once, to nearest even, as they are stored (SPEC 5.6:
half types accumulate in float32), by the codecs of ``_fast/codecs.py`` (float16 in hardware
where the target has F16C). Each load and store dispatches on the array type while compiling:
float arrays get plain copies, so the float32 / float64 kernels carry no conversion code (less to
compile); half bits of a ``kind`` fixed by the kernel (a literal: the forward and backprop-input
kernels take it as a constant of their path) get that kind's conversion only, others a branch
per run (``half.py``'s two conversions, chosen by ``kind`` at run time). The
``@overload`` registrations happen when this module is imported, which every module calling
these functions does before it defines a kernel.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit, types
from numba.extending import overload

from .. import half, row_njit, simd
from ..codecs import F16, half_codec


def _fixed_half(element, kind):
    """The codec (``_fast/codecs.py``) of half bits of ``kind`` if it is a literal (fixed while
    compiling), else None. The overloads that call it are typed with literal arguments first
    (``prefer_literal``); numba's default tries them last."""
    if isinstance(kind, types.IntegerLiteral):
        return half_codec(element, kind.literal_value)
    return None


@functools.cache
def _half_runs(kind: int):
    """``(decode_run, encode_run)`` of half bits of ``kind``: ``_load_run`` and ``_store_run`` with
    that kind's conversion, compiled once per array types: the overloads pass them their offsets
    and steps as int64, not as the literals (0, 1) some call sites give, so that those sites share
    one compiled run instead of each compiling its own (issue 23, cold start)."""
    codec = half_codec(types.uint16, kind)
    decode, encode = codec.decode, codec.encode

    @row_njit
    def decode_run(src, start, step, n, dst, dst_start):
        out = dst[dst_start:dst_start + n]
        if step == 1:  # a unit stride of its own, so that this loop vectorises
            run = src[start:start + n]
            for i in range(n):
                out[i] = decode(run[i])
        else:
            for i in range(n):
                out[i] = decode(src[start + i * step])

    @row_njit
    def encode_run(acc, start, n, dst, dst_start, step):
        run = acc[start:start + n]
        if step == 1:
            out = dst[dst_start:dst_start + n]
            for i in range(n):
                out[i] = encode(run[i])
        else:
            for i in range(n):
                dst[dst_start + i * step] = encode(run[i])

    return decode_run, encode_run


def _load_one(src, i, kind):
    """float(src[i]), decoding half bits as ``kind`` says."""


def _load_run(src, start, step, n, dst, dst_start, kind):
    """``dst[dst_start + i] = float(src[start + i*step])`` for i < n."""


def _store_run(acc, start, n, dst, dst_start, step, kind):
    """``dst[dst_start + i*step] = acc[start + i]`` for i < n, rounded once to the output type."""


def _store_one(dst, i, value, kind):
    """``dst[i] = value`` rounded once to the output type."""


@overload(_store_one, inline="always", prefer_literal=True)
def _store_one_impl(dst, i, value, kind):
    if isinstance(dst.dtype, types.Float):
        def copy(dst, i, value, kind):
            dst[i] = value
        return copy
    codec = _fixed_half(dst.dtype, kind)
    if codec is not None:
        fixed = codec.encode

        def encode_fixed(dst, i, value, kind):
            dst[i] = fixed(value)
        return encode_fixed

    def encode(dst, i, value, kind):
        dst[i] = half.encode(value) if kind == F16 else half.float_to_bf16(value)
    return encode


@overload(_load_one, inline="always", prefer_literal=True)
def _load_one_impl(src, i, kind):
    if isinstance(src.dtype, types.Float):
        return lambda src, i, kind: src[i]
    codec = _fixed_half(src.dtype, kind)
    if codec is not None:
        fixed = codec.decode
        return lambda src, i, kind: fixed(src[i])

    def decode(src, i, kind):
        return half.decode(src[i]) if kind == F16 else half.bf16_to_float(src[i])
    return decode


# Inlined: staging calls it once per position of a row with a padded pitch, where a call with its
# two views costs about as much as the copy.
@overload(_load_run, inline="always", prefer_literal=True)
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
    if _fixed_half(src.dtype, kind) is not None:
        decode_run = _half_runs(kind.literal_value)[0]
        return lambda src, start, step, n, dst, dst_start, kind: decode_run(
            src, np.int64(start), np.int64(step), np.int64(n), dst, np.int64(dst_start))

    def decode(src, start, step, n, dst, dst_start, kind):
        # the branches sit outside the loops, so each loop vectorises
        out = dst[dst_start:dst_start + n]
        if step != 1:
            for i in range(n):
                out[i] = _load_one(src, start + i * step, kind)
            return
        run = src[start:start + n]
        if kind == F16:
            for i in range(n):
                out[i] = half.decode(run[i])
        else:
            for i in range(n):
                out[i] = half.bf16_to_float(run[i])
    return decode


@overload(_store_run, inline="always", prefer_literal=True)
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
    if _fixed_half(dst.dtype, kind) is not None:
        encode_run = _half_runs(kind.literal_value)[1]
        return lambda acc, start, n, dst, dst_start, step, kind: encode_run(
            acc, np.int64(start), np.int64(n), dst, np.int64(dst_start), np.int64(step))

    def encode(acc, start, n, dst, dst_start, step, kind):
        run = acc[start:start + n]
        if step != 1:
            for i in range(n):
                _store_one(dst, dst_start + i * step, run[i], kind)
            return
        out = dst[dst_start:dst_start + n]
        if kind == F16:
            for i in range(n):
                out[i] = half.encode(run[i])
        else:
            for i in range(n):
                out[i] = half.float_to_bf16(run[i])
    return encode


@njit(inline="always")
def _put(acc, p, value, stream):
    """``simd.store``, or with ``stream`` its non-temporal form (``acc[p]`` on a 64-byte line)."""
    if stream:
        simd.store_stream(acc, p, value)
    else:
        simd.store(acc, p, value)
