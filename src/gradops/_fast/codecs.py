"""The element kinds of the compiled kernels and their conversions (SPEC 3.7, 5.6), shared by
the packages' element access overloads (``resample/codecs.py``, ``depthwise/codecs.py``).

float32 and float64 arrays are read and written as they are (``FLOAT``). float16 (``F16``) and
bfloat16 (``BF16``) arrays reach the kernels as their uint16 bits (numba has no half
arithmetic): decoded exactly to float32 when read, rounded once to nearest even when written, by
``half.py`` (float16 in hardware where the target converts it). Each package's overloads ask
``half_codec`` while a kernel is typed, so the kernel compiles the one conversion its element
kind needs, and none for float arrays.

``stream_run``, the one streamed-run writer of both packages, writes a run of sums computed in a
buffer (a depthwise row buffer, a resample staged row) to an output beyond the cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from numba import types
from numba.extending import overload

from . import half, simd

FLOAT, F16, BF16 = 0, 1, 2  # how a kernel reads and writes an element: as it is, or as half bits
HALF_KINDS = {np.dtype(np.float16): F16, np.dtype(ml_dtypes.bfloat16): BF16}


@dataclass(frozen=True)
class HalfCodec:
    """The jitted conversions of one half kind: ``decode`` (uint16 bits -> float32, exact) and
    ``encode`` (float32 -> uint16 bits, rounded once to nearest even)."""

    decode: object
    encode: object


HALF_CODECS = {F16: HalfCodec(half.decode, half.encode), BF16: HalfCodec(half.bf16_to_float, half.float_to_bf16)}


def half_codec(element: types.Type, kind: int) -> HalfCodec | None:
    """The conversions of an array element of numba type ``element`` that holds ``kind``: None
    for float arrays, which are read and written as they are."""
    if isinstance(element, types.Float):
        return None
    return HALF_CODECS[kind]


def encode_sums(sums: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float32 / float64 sums computed in NumPy (the first calls' tiers, ``first_calls``) as
    ``dtype``, rounded once to nearest even as the kernels' stores round (``half.py``: hardware
    float16 keeps a NaN's payload, quietened; bfloat16 likewise)."""
    kind = HALF_KINDS.get(dtype)
    if kind is None:
        return sums.astype(dtype)
    bits = sums.view(np.uint32)  # float32: the accumulator of both half types
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    if dtype == np.float16:
        if half.HARDWARE_HALF:
            nan_bits = ((bits >> 16) & 0x8000) | 0x7E00 | ((bits >> 13) & 0x3FF)
        else:
            nan_bits = ((bits >> 16) & 0x8000) | 0x7E00
        rounded = sums.astype(np.float16).view(np.uint16)
    else:
        nan_bits = (bits >> 16) | 0x40
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return np.where(nan, nan_bits, rounded).astype(np.uint16).view(dtype)


def stream_run(src, start, n, dst, out):
    """``dst[out : out + n] = src[start : start + n]``, rounded once to dst's type: dst's whole
    64-byte lines with non-temporal stores (no read for ownership), the partial lines at the run's
    two ends with plain ones, so ``dst`` need only be element-aligned. ``src`` holds the sums: of
    dst's own float type, or float32 for a uint16 ``dst`` of float16 bits, whose lines are
    converted in hardware (``half.HARDWARE_HALF``; the callers stream no other half rows)."""


@overload(stream_run, inline="always")
def _stream_run_impl(src, start, n, dst, out):
    if isinstance(dst.dtype, types.Float):
        def stream_float(src, start, n, dst, out):
            lanes = simd.lanes(dst)
            head = simd.line_head(dst, out, n)
            for i in range(head):
                dst[out + i] = src[start + i]
            i = head
            while i + lanes <= n:
                simd.store_stream(dst, out + i, simd.load(src, start + i))
                i += lanes
            for k in range(i, n):
                dst[out + k] = src[start + k]
        return stream_float
    if dst.dtype == types.uint16 and src.dtype == types.float32 and half.HARDWARE_HALF:
        def stream_half(src, start, n, dst, out):
            lanes = simd.lanes(src)  # float32 lanes: two vectors of them per line of float16
            head = simd.line_head(dst, out, n)
            for i in range(head):
                dst[out + i] = half.encode(src[start + i])
            i = head
            while i + 2 * lanes <= n:
                simd.store_stream_half(dst, out + i, simd.load(src, start + i))
                simd.store_stream_half(dst, out + i + lanes, simd.load(src, start + i + lanes))
                i += 2 * lanes
            for k in range(i, n):
                dst[out + k] = half.encode(src[start + k])
        return stream_half
    # Never called: no kernel streams other rows (resample, which stages float32 only, still types
    # the call for float16 outputs, with a staged row of their bits).
    return lambda src, start, n, dst, out: None
