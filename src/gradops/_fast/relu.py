"""Fast ``out = x > 0 ? value : 0`` on raw bits (SPEC 4.2 / 4.3).

The select is done on unsigned integer views, so float16 needs no float arithmetic and every
value, NaN payloads and -0 included, is copied bit for bit. For an IEEE float viewed as
unsigned bits ``b``, ``x > 0`` is ``0 < b <= bits(+inf)`` (sign clear, not zero, not NaN);
for a signed integer it is ``0 < b <= max``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .strided import aligned_input, coalesce, element_aligned, flat_view

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32}
_POSITIVE_LIMIT = {  # largest bit pattern that compares > 0
    np.dtype(np.float32): 0x7F800000, np.dtype(np.float16): 0x7C00,
    np.dtype(np.int32): 0x7FFFFFFF, np.dtype(np.int16): 0x7FFF, np.dtype(np.int8): 0x7F,
}


@njit(parallel=True, cache=True, nogil=True)
def _select_dense(x, value, out, limit):
    for i in prange(out.size):
        b = x[i]
        out[i] = value[i] if (b != 0) & (b <= limit) else 0


@njit(parallel=True, cache=True, nogil=True)
def _select_strided(shape, x, x_off, x_st, v, v_off, v_st, out, o_off, o_st, limit):
    ndim = shape.size
    inner = shape[ndim - 1]
    rows = 1
    for d in range(ndim - 1):
        rows *= shape[d]
    for r in prange(rows):
        xi, vi, oi, rem = x_off, v_off, o_off, np.int64(r)
        for d in range(ndim - 2, -1, -1):
            i = rem % shape[d]
            rem //= shape[d]
            xi += i * x_st[d]
            vi += i * v_st[d]
            oi += i * o_st[d]
        for j in range(inner):
            b = x[xi + j * x_st[ndim - 1]]
            out[oi + j * o_st[ndim - 1]] = v[vi + j * v_st[ndim - 1]] if (b != 0) & (b <= limit) else 0


def select_positive(x: np.ndarray, value: np.ndarray, out: np.ndarray) -> None:
    if not element_aligned(out):
        staged = np.empty(out.shape, out.dtype)
        select_positive(x, value, staged)
        np.copyto(out, staged)
        return
    bits = _UNSIGNED[out.itemsize]
    limit = bits(_POSITIVE_LIMIT[x.dtype])
    x, value, out = aligned_input(x).view(bits), aligned_input(value).view(bits), out.view(bits)
    x_buf, x_off, _ = flat_view(x)
    v_buf, v_off, _ = flat_view(value)
    o_buf, o_off, _ = flat_view(out)
    elem = out.itemsize
    shape, (o_st, x_st, v_st) = coalesce(out.shape, out.strides, x.strides, value.strides)
    if len(shape) == 1 and o_st == x_st == v_st == (elem,):
        # One dense run in the same memory order for all three: the buffers line up element
        # for element from their lowest addresses.
        _select_dense(x_buf, v_buf, o_buf, limit)
        return
    _select_strided(np.array(shape, dtype=np.int64),
                    x_buf, x_off, np.array(x_st, dtype=np.int64) // elem,
                    v_buf, v_off, np.array(v_st, dtype=np.int64) // elem,
                    o_buf, o_off, np.array(o_st, dtype=np.int64) // elem, limit)
