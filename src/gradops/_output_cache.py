"""Fresh outputs from a small cache of recently released buffers.

A large NumPy allocation is a fresh ``mmap``: the kernel zero-fills every page on first touch,
which for a memory-bound operator costs about as much as the operator itself. Like the
caching allocators of TensorFlow and PyTorch, gradops hands out large fresh outputs from
buffers that earlier outputs released: when the last array viewing a buffer is garbage
collected, the buffer returns here instead of to the operating system, and the next output
of a similar size reuses its already-mapped pages.

The arrays returned are ordinary writeable ndarrays (their ``base`` is the cache block). The
fast backend's helper threads get :func:`lent` views of them, which do not keep the block alive:
a helper lingers for the next task with its last task's arguments (``_fast/pool.py``), and were
those real views, back-to-back calls would take turns between two buffers (D3, whose dy and
two dx buffers exceed the 32 MiB L3, took 1.55 ms fresh against 1.42 ms with ``out=``).
At most ``GRADOPS_OUTPUT_CACHE_MB`` megabytes (default 1024, read once, when the first large
output is made) are kept; 0 disables the cache.

Handing out a cached buffer costs Python only, and a memory-bound call of a few MiB takes about
100 us: so the buffers keep their aligned addresses, and the array interface of each dtype is
made once (``ctypes.data`` and ``dtype.descr`` cost microseconds per call).
"""

from __future__ import annotations

import math
import os
import threading
from functools import cache, lru_cache, partial
from typing import Any, Callable

import numpy as np

MIN_POOLED_BYTES = 1 << 20  # smaller outputs come from malloc, which is fast for them
_ALIGNMENT = 64


@cache
def _limit_bytes() -> int:
    try:
        return max(0, int(os.environ.get("GRADOPS_OUTPUT_CACHE_MB", "1024"))) << 20
    except ValueError:
        return 1024 << 20


class _Cache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        # (raw uint8 buffer, its first address on a line), most recently released last
        self.free: list[tuple[np.ndarray, int]] = []
        self.free_bytes = 0

    def take(self, nbytes: int) -> tuple[np.ndarray, int] | None:
        """The smallest free buffer holding ``nbytes`` without wasting more than half of it, the
        most recently released of those (its lines are the likeliest to be in the cache)."""
        with self.lock:
            fits = [i for i, (raw, _) in enumerate(self.free) if nbytes <= raw.size <= 2 * nbytes + _ALIGNMENT]
            if not fits:
                return None
            block = self.free.pop(min(fits, key=lambda i: (self.free[i][0].size, -i)))
            self.free_bytes -= _counted(block[0])
            return block

    def give_back(self, raw: np.ndarray, address: int) -> None:
        limit = _limit_bytes()
        with self.lock:
            if _counted(raw) > limit:
                return
            self.free.append((raw, address))
            self.free_bytes += _counted(raw)
            while self.free_bytes > limit:  # forget the least recently released
                self.free_bytes -= _counted(self.free.pop(0)[0])


def _counted(raw: np.ndarray) -> int:
    """The bytes of outputs a buffer holds, as the limit counts them: without the slack that
    aligns it, so that a limit of 1 GiB keeps 16 released outputs of 64 MiB, not 15 (a dask
    worker's blocks, ``gradops.dask.bench``)."""
    return raw.size - _ALIGNMENT


_CACHE = _Cache()


class _Block:
    """Owner of one cached buffer, exposed through ``__array_interface__`` so that NumPy keeps it
    as the ``base`` of every view; when the last view dies, the buffer goes back to the cache."""

    def __init__(self, raw: np.ndarray, address: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.raw, self.address = raw, address
        self.__array_interface__: dict[str, Any] = {**_interface_of(dtype), "shape": shape, "data": (address, False)}

    def __del__(self) -> None:
        _CACHE.give_back(self.raw, self.address)


@cache
def _interface_of(dtype: np.dtype) -> dict[str, Any]:
    """The array interface's entries that only ``dtype`` decides (C order: no strides)."""
    return {"version": 3, "typestr": dtype.str, "descr": dtype.descr, "strides": None}


class _Borrowed:
    """The memory of an array, exposed without a reference to its owner."""

    def __init__(self, interface: dict[str, Any]) -> None:
        self.__array_interface__ = interface


def lent(args: tuple) -> tuple:
    """``args`` with each array that views a cache block replaced by a view of the same memory
    that does not keep the block alive. Only for a thread that touches that memory while the
    caller holds the arrays (a helper computing the caller's chunks)."""
    return tuple([_borrow(a) if type(a) is np.ndarray and a.nbytes >= MIN_POOLED_BYTES else a for a in args])


def _borrow(array: np.ndarray) -> np.ndarray:
    owner = array.base
    while isinstance(owner, np.ndarray):
        owner = owner.base
    if not isinstance(owner, _Block):
        return array
    return np.asarray(_Borrowed(array.__array_interface__)).view(array.dtype)  # bfloat16: see _empty


def empty_output(shape: tuple[int, ...], dtype: np.dtype, like: np.ndarray | None = None) -> np.ndarray:
    """``np.empty(shape, dtype)``, from the cache for large outputs, stored in the axis order of
    ``like`` (an array of the same rank) as NumPy's ``order="K"`` does: a gradient of a
    channels_last ``dy`` is channels_last too, and the kernels read and write both in one order."""
    return output_factory(shape, dtype, like)()


def output_factory(shape: tuple[int, ...], dtype: np.dtype, like: np.ndarray | None = None
                   ) -> Callable[[], np.ndarray]:
    """:func:`empty_output` of ``shape`` and ``dtype`` like ``like``, as a function of no argument,
    for calls that make such outputs again and again (prepared runs): the layout and the size
    class are worked out once; small outputs are plain ``np.empty``, as ``_empty`` makes them."""
    shape, dtype = tuple(shape), np.dtype(dtype)
    stored_shape, axes = (shape, None) if like is None or like.ndim != len(shape) else \
        _stored_layout(shape, like.shape, like.strides)
    if math.prod(stored_shape) * dtype.itemsize < MIN_POOLED_BYTES:
        make = partial(np.empty, stored_shape, dtype)
    else:
        make = partial(_empty, stored_shape, dtype)
    if axes is None:
        return make
    return lambda: make().transpose(axes)


@lru_cache(maxsize=256)
def _stored_layout(shape: tuple[int, ...], like_shape: tuple[int, ...], like_strides: tuple[int, ...]
                   ) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The shape to allocate and the transpose back to ``shape`` (``None``: C order). Axes go
    outermost first by ``like``'s strides; size-1 axes of ``like`` (whose strides mean nothing)
    keep their places, the longer axes fill the other places in stride order."""
    long_axes = iter(sorted((d for d in range(len(shape)) if like_shape[d] > 1),
                            key=lambda d: (-abs(like_strides[d]), d)))
    order = [next(long_axes) if like_shape[d] > 1 else d for d in range(len(shape))]
    if order == sorted(order):
        return shape, None
    return tuple(shape[d] for d in order), tuple(int(d) for d in np.argsort(order))


def _empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_POOLED_BYTES or _limit_bytes() == 0:
        return np.empty(shape, dtype)
    block = _CACHE.take(nbytes + _ALIGNMENT)
    if block is None:
        raw = np.empty(nbytes + _ALIGNMENT, np.uint8)
        address = raw.ctypes.data
        block = raw, address + (-address) % _ALIGNMENT
    # the array interface spells an ml_dtypes type (bfloat16) as raw bytes ("|V2"): view it back
    return np.asarray(_Block(*block, shape, dtype)).view(dtype)
