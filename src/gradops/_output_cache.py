"""Fresh outputs from a small cache of buffers that earlier outputs used.

A large NumPy allocation is a fresh ``mmap``: the kernel zero-fills every page on first touch,
which for a memory-bound operator costs about as much as the operator itself. Like the
caching allocators of TensorFlow and PyTorch, gradops hands out large fresh outputs from
buffers it keeps: each output is a view of one of them, and once no array views a buffer any
more, the next output of a similar size reuses its already-mapped pages.

Whether a buffer is free is read from its reference count when an output is asked for: the
cache holds one reference, and every array viewing the buffer holds one through its ``base``
(NumPy points a view of a view at the array owning the memory). Nothing runs when an output
dies, and handing one out is a slice and a view of a plain ``uint8`` array: 2.4-3.4 us with its
release, against 6-7.5 us for an owner object whose ``__del__`` gave the buffer back
(``docs/performance.md``).
The arrays returned are ordinary writeable ndarrays. The fast backend's helper threads get
:func:`lent` views of them, which do not reference the buffer: a helper lingers for the next
task with its last task's arguments (``_fast/pool.py``), and were those real views, back-to-back
calls would take turns between two buffers (D3, whose dy and two dx buffers exceed the 32 MiB
L3, took 1.55 ms fresh against 1.42 ms with ``out=``).

The buffers the cache keeps, in use or free, hold at most ``GRADOPS_OUTPUT_CACHE_MB`` megabytes
(default 1024, read once, when the first large output is made; 0 disables the cache): room for
a new buffer is made by forgetting the least recently used free ones, and an output that still
does not fit is a plain ``np.empty``, which the cache never sees again.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import threading
from collections import deque
from functools import cache, lru_cache, partial
from typing import Callable

import numpy as np

MIN_POOLED_BYTES = 1 << 20  # smaller outputs come from malloc, which is fast for them
_ALIGNMENT = 64


@cache
def _limit_bytes() -> int:
    """``GRADOPS_OUTPUT_CACHE_MB`` in bytes; 0 (no cache) also where the interpreter keeps no
    reference counts, which are what tells a free buffer (``_IDLE_REFERENCES``)."""
    if _IDLE_REFERENCES is None:
        return 0
    try:
        return max(0, int(os.environ.get("GRADOPS_OUTPUT_CACHE_MB", "1024"))) << 20
    except ValueError:
        return 1024 << 20


def _references(entry: list) -> int:
    """The reference count of an entry's buffer, read the same way whenever it is read, so that
    its count when only the entry holds it (``_IDLE_REFERENCES``) is measured, not assumed."""
    return sys.getrefcount(entry[0])


def _idle_references() -> int:
    return _references([np.empty(1, np.uint8), 0, 0])


# The count of a buffer nothing but its cache entry references (interpreters differ in the
# references a call's arguments hold); None where reference counts are not kept (no cache).
_IDLE_REFERENCES = _idle_references() if hasattr(sys, "getrefcount") else None
# Entries of one size a request looks at beyond the most recent one: with many outputs of a size
# alive (a network's activations), a request costs at most this many reference counts.
_SCAN = 32


def _free_entry(bucket: deque) -> list | None:
    """A free entry of ``bucket``: the most recently handed out if it is free (the call before
    released it: its lines are the likeliest to be in the CPU's caches), else the first free one
    of the ``_SCAN`` handed out longest ago, each looked at moved to the back (an entry in use is
    looked at again after the others)."""
    if _references(bucket[-1]) == _IDLE_REFERENCES:
        return bucket[-1]
    for _ in range(min(len(bucket) - 1, _SCAN)):
        entry = bucket.popleft()
        bucket.append(entry)
        if _references(entry) == _IDLE_REFERENCES:
            return entry
    return None


class _Cache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        # output bytes -> entries [raw uint8 buffer, offset of its first address on a line, when it
        # was last handed out (``clock``)]
        self.buckets: dict[int, deque] = {}
        self.clock = 0
        self.kept_bytes = 0
        # ``id`` of each kept buffer -> its address and a view of all of its bytes that does not
        # reference it (``lent``), made once per buffer
        self.shadows: dict[int, tuple[int, np.ndarray]] = {}

    def take(self, nbytes: int) -> list:
        """A buffer for an output of ``nbytes``: a free one of that size (``_free_entry``), else of
        the smallest size holding it without wasting more than half of it; else a new one, kept
        if the limit leaves room for it."""
        with self.lock:
            bucket = self.buckets.get(nbytes)
            entry = _free_entry(bucket) if bucket else None
            if entry is None:
                for size in sorted(size for size in self.buckets if nbytes < size <= 2 * nbytes):
                    entry = _free_entry(self.buckets[size])
                    if entry is not None:
                        break
            self.clock += 1
            if entry is None:
                entry = _new_buffer(nbytes)
                if self._make_room(nbytes):
                    self.buckets.setdefault(nbytes, deque()).append(entry)
                    self.kept_bytes += nbytes
                    self.shadows[id(entry[0])] = _shadow(entry[0])
            entry[2] = self.clock
            return entry

    def _make_room(self, nbytes: int) -> bool:
        """Forget free buffers, least recently handed out first, until ``nbytes`` more fit under
        the limit; False (nothing forgotten) when the buffers in use leave no such room."""
        limit = _limit_bytes()
        if self.kept_bytes + nbytes <= limit:
            return True
        free = sorted((entry for bucket in self.buckets.values() for entry in bucket
                       if _references(entry) == _IDLE_REFERENCES), key=lambda entry: entry[2])
        if self.kept_bytes - sum(_counted(entry[0]) for entry in free) + nbytes > limit:
            return False
        forgotten = set()
        for entry in free:
            if self.kept_bytes + nbytes <= limit:
                break
            forgotten.add(id(entry))
            self.kept_bytes -= _counted(entry[0])
            del self.shadows[id(entry[0])]
        for size, bucket in list(self.buckets.items()):  # by identity: entries hold arrays, which == compares
            kept = deque(entry for entry in bucket if id(entry) not in forgotten)
            if kept:
                self.buckets[size] = kept
            else:
                del self.buckets[size]
        return True

    def free_bytes(self) -> int:
        """The bytes of the buffers no output views now (for tests and reports)."""
        with self.lock:
            return sum(_counted(entry[0]) for bucket in self.buckets.values() for entry in bucket
                       if _references(entry) == _IDLE_REFERENCES)

    def clear(self) -> None:
        """Forget every buffer (those in use stay with their outputs)."""
        with self.lock:
            self.buckets.clear()
            self.shadows.clear()
            self.kept_bytes = 0


def _new_buffer(nbytes: int) -> list:
    raw = np.empty(nbytes + _ALIGNMENT, np.uint8)
    return [raw, -raw.ctypes.data % _ALIGNMENT, 0]


def _counted(raw: np.ndarray) -> int:
    """The bytes of outputs a buffer holds, as the limit counts them: without the slack that
    aligns it, so that a limit of 1 GiB keeps 16 outputs of 64 MiB, not 15 (a dask worker's
    blocks, ``gradops.dask.bench``)."""
    return raw.size - _ALIGNMENT


_CACHE = _Cache()


class _Borrowed:
    """The memory of an array, exposed without a reference to its owner."""

    def __init__(self, interface: dict) -> None:
        self.__array_interface__ = interface


def _shadow(raw: np.ndarray) -> tuple[int, np.ndarray]:
    """``raw``'s address, and a ``uint8`` view of its bytes that does not reference it."""
    interface = raw.__array_interface__
    return interface["data"][0], np.asarray(_Borrowed(interface))


def _address(array: np.ndarray) -> int:
    """``array.ctypes.data``, in 0.3 us rather than 1.35 where ``array`` exports a writeable
    contiguous buffer (a kernel's flat views do): a helper gets its lent arguments only after
    they are made."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError, BufferError):
        return array.ctypes.data


def lent(args: tuple) -> tuple:
    """``args`` with each array that views a kept buffer replaced by a view of the same memory
    that does not reference the buffer (one per distinct array: a kernel often takes its output
    twice). Only for a thread that touches that memory while the caller holds the arrays (a
    helper computing the caller's chunks)."""
    shadows = _CACHE.shadows
    borrowed: dict[int, np.ndarray] = {}
    result = []
    for a in args:
        if type(a) is np.ndarray and id(a.base) in shadows:  # of any size: a small slice holds the buffer too
            view = borrowed.get(id(a))
            if view is None:
                address, shadow = shadows[id(a.base)]
                view = borrowed[id(a)] = np.ndarray(a.shape, a.dtype, shadow, _address(a) - address, a.strides)
            a = view
        result.append(a)
    return tuple(result)


def empty_output(shape: tuple[int, ...], dtype: np.dtype, like: np.ndarray | None = None) -> np.ndarray:
    """``np.empty(shape, dtype)``, from the cache for large outputs, stored in the axis order of
    ``like`` (an array of the same rank) as NumPy's ``order="K"`` does: a gradient of a
    channels_last ``dy`` is channels_last too, and the kernels read and write both in one order."""
    return output_factory(shape, dtype, like)()


def output_factory(shape: tuple[int, ...], dtype: np.dtype, like: np.ndarray | None = None
                   ) -> Callable[[], np.ndarray]:
    """:func:`empty_output` of ``shape`` and ``dtype`` like ``like``, as a function of no argument,
    for calls that make such outputs again and again (prepared runs): the layout and the size
    class are worked out once; small outputs are plain ``np.empty``, as ``empty_c_order`` makes them."""
    shape, dtype = tuple(shape), np.dtype(dtype)
    stored_shape, axes = (shape, None) if like is None or like.ndim != len(shape) else \
        _stored_layout(shape, like.shape, like.strides)
    if math.prod(stored_shape) * dtype.itemsize < MIN_POOLED_BYTES:
        make = partial(np.empty, stored_shape, dtype)
    else:
        make = partial(empty_c_order, stored_shape, dtype)
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


def empty_c_order(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """``np.empty(shape, dtype)`` (C order), from the cache when it is large."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_POOLED_BYTES or _limit_bytes() == 0:
        return np.empty(shape, dtype)
    raw, offset, _ = _CACHE.take(nbytes)
    return raw[offset:offset + nbytes].view(dtype).reshape(shape)
