"""The element kinds of the compiled kernels and their conversions (SPEC 3.7, 5.6), shared by
the packages' element access overloads (``resample/codecs.py``, ``depthwise/codecs.py``).

float32 and float64 arrays are read and written as they are (``FLOAT``). float16 (``F16``) and
bfloat16 (``BF16``) arrays reach the kernels as their uint16 bits (numba has no half
arithmetic): decoded exactly to float32 when read, rounded once to nearest even when written, by
``half.py`` (float16 in hardware where the target converts it). Each package's overloads ask
``half_codec`` while a kernel is typed, so the kernel compiles the one conversion its element
kind needs, and none for float arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from numba import types

from . import half

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
