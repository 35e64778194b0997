"""Describing any NumPy view to a kernel as (flat buffer, element offset, element strides).

Kernels index ``buf[offset + sum(i[d] * strides[d])]``, which covers every layout a view can
have (negative, zero and padded strides) without copying.
"""

from __future__ import annotations

import numpy as np


def element_aligned(array: np.ndarray) -> bool:
    """Whether every byte stride is a multiple of the item size (false only for hand-made views,
    e.g. one field of a packed structured array). Kernels need aligned views: inputs that are
    not get copied, outputs get computed into a temporary and copied back. NumPy's ALIGNED flag
    (data and strides of the axes longer than 1 multiples of the dtype's alignment) answers the
    common case at once where that alignment is the item size (not float64 on 32-bit x86)."""
    return (array.flags.aligned and array.dtype.alignment == array.itemsize) or all(
        s % array.itemsize == 0 for s in array.strides)


def aligned_input(array: np.ndarray) -> np.ndarray:
    return array if element_aligned(array) else np.ascontiguousarray(array)


def flat_view(array: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """A 1-D view spanning ``array``'s memory from its lowest address (:func:`flat_buffer`), the
    element offset of index (0, ..., 0) in it, and the element strides. ``array`` must be
    element-aligned."""
    itemsize = array.itemsize
    strides = np.array([s // itemsize for s in array.strides], dtype=np.int64)
    # index (0, ..., 0) lies past the span of the axes with negative strides
    offset = -sum(min(s, 0) * (n - 1) for s, n in zip(strides.tolist(), array.shape))
    return flat_buffer(array), offset, strides


def flat_buffer(array: np.ndarray) -> np.ndarray:
    """The 1-D view of :func:`flat_view` alone: what a call whose layout is known already needs."""
    if array.flags.c_contiguous or array.flags.f_contiguous:
        # Dense: a plain reshape is a view (and ~30x cheaper than as_strided for small calls).
        return array.reshape(-1, order="A")
    itemsize = array.itemsize
    span = sum(abs(s) // itemsize * (n - 1) for s, n in zip(array.strides, array.shape)) + 1
    start = array[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in array.strides)]
    return np.lib.stride_tricks.as_strided(start, shape=(span,), strides=(itemsize,),
                                           writeable=array.flags.writeable)


def coalesce(shape: tuple[int, ...], *strides: tuple[int, ...]) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge axes that are contiguous in every stride list and drop size-1 axes, ordering axes by
    the first stride list (outermost first). Returns the reduced shape and stride lists."""
    axes = [d for d in range(len(shape)) if shape[d] > 1]
    axes.sort(key=lambda d: -abs(strides[0][d]))
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for d in axes:
        if out_shape and all(st[-1] == s[d] * shape[d] for st, s in zip(out_strides, strides)):
            out_shape[-1] *= shape[d]
            for st, s in zip(out_strides, strides):
                st[-1] = s[d]
            continue
        out_shape.append(shape[d])
        for st, s in zip(out_strides, strides):
            st.append(s[d])
    if not out_shape:
        return (1,), [(1,) for _ in strides]
    return tuple(out_shape), [tuple(st) for st in out_strides]
