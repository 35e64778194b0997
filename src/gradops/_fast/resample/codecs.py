"""Element access generic over the buffer type, as numba overloads (SPEC 3.7).

float32 buffers are read and written as they are; float16 buffers travel as uint16 bits, decoded
to float32 when read (exactly) and rounded once to float16 when written, by the float16 codec of
``_fast/codecs.py``. The sums are float32 either way. ``_float32`` tells a kernel, as a constant
fixed when it compiles, which of the two it was compiled for.

The ``@overload`` registrations are global to numba and happen when this module is imported;
every module whose functions call these imports it, so they exist before any kernel compiles.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from ..codecs import F16, half_codec


def _load(buffer, index):
    """``buffer[index]`` as a number (float16 bits are decoded)."""


def _store(buffer, index, value):
    """``buffer[index] = value``, rounded once to the buffer's type."""


@overload(_load)
def _load_impl(buffer, index):
    codec = half_codec(buffer.dtype, F16)
    if codec is not None:
        decode = codec.decode
        return lambda buffer, index: decode(buffer[index])
    return lambda buffer, index: buffer[index]


@overload(_store)
def _store_impl(buffer, index, value):
    codec = half_codec(buffer.dtype, F16)
    if codec is not None:
        encode = codec.encode

        def store_half(buffer, index, value):
            buffer[index] = encode(np.float32(value))
        return store_half

    def store_float(buffer, index, value):
        buffer[index] = np.float32(value)
    return store_float


def _float32(buffer):
    """Whether ``buffer`` holds float32 (a constant when the kernel is compiled)."""


@overload(_float32, inline="always")
def _float32_impl(buffer):
    flag = buffer.dtype == types.float32
    return lambda buffer: flag
