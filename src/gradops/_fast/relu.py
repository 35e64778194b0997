"""Fast ``out = x > 0 ? value : 0`` on raw bits (SPEC 4.2 / 4.3).

The select is done on unsigned integer views, so float16 needs no float arithmetic and every
value, NaN payloads and -0 included, is copied bit for bit. For an IEEE float viewed as
unsigned bits ``b``, ``x > 0`` is ``0 < b <= bits(+inf)`` (sign clear, not zero, not NaN);
for a signed integer it is ``0 < b <= max``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from llvmlite import ir
from numba import carray, cfunc, njit, types
from numba.extending import intrinsic, overload

from . import simd
from .pool import (INLINE_BYTES, LANE_ARGUMENTS, begin, claim, end, finish, lane_chunks, lane_claim, lane_finish,
                   lane_join, lane_publish, lane_wait, pointer_to, share, share_lane)
from .strided import aligned_input, coalesce, element_aligned, flat_view

# Per dtype: the unsigned type its bits are selected as, and the largest bit pattern that compares > 0.
_BITS_AND_LIMIT = {
    np.dtype(np.float32): (np.uint32, np.uint32(0x7F800000)), np.dtype(np.float16): (np.uint16, np.uint16(0x7C00)),
    np.dtype(np.int32): (np.uint32, np.uint32(0x7FFFFFFF)), np.dtype(np.int16): (np.uint16, np.uint16(0x7FFF)),
    np.dtype(np.int8): (np.uint8, np.uint8(0x7F)),
}


def _kernel_dtype(dtype: np.dtype) -> np.dtype:
    """The type a kernel takes an array of ``dtype`` as (``_kernel_views``)."""
    return np.dtype(np.uint16) if dtype == np.float16 else dtype


# ``_BITS_AND_LIMIT`` keyed by the type the kernels see (``_as_bits``, ``_LANE_ENTRIES``).
_KERNEL_BITS_AND_LIMIT = {_kernel_dtype(dtype): bits_and_limit for dtype, bits_and_limit in _BITS_AND_LIMIT.items()}


def _as_bits(x, value, out):
    """``(x, value, out, limit)``: three 1-D unit-stride arrays of one type as unsigned bits, and
    the largest bit pattern of that type that compares > 0. float16 arrives as its uint16 bits
    (numba has no float16 arrays); uint16 means float16 here."""
    raise NotImplementedError


@overload(_as_bits)
def _as_bits_for(x, value, out):
    bits, limit = _KERNEL_BITS_AND_LIMIT[np.dtype(str(x.dtype))]

    def as_bits(x, value, out):
        return x.view(bits), value.view(bits), out.view(bits), limit
    return as_bits


@njit(inline="always")
def _overlaps(out, x, value):
    """Whether ``out`` shares a byte with ``x`` or ``value``: contiguous runs overlap exactly when
    their address ranges do."""
    start, stop = out.ctypes.data, out.ctypes.data + out.nbytes
    return (start < x.ctypes.data + x.nbytes and x.ctypes.data < stop
            or start < value.ctypes.data + value.nbytes and value.ctypes.data < stop)


# Streaming stores (``simd.STREAMING_THRESHOLD_BYTES``): reading two arrays and writing one moves
# three array-sizes over the memory bus instead of four. One store per 64-byte line (a whole
# write-combining buffer at once): R1 0.95x, R2 0.89-0.91x the time of 32-byte stores (A/B).
_VECTOR_BYTES = simd.LINE_BYTES
_STREAMING_CHUNK_VECTORS = 4096  # vectors per job; a store fence ends each chunk of jobs
# A select is streamed when its arrays (2 for ``relu``, 3 for ``relu_grad``) take 3.5 times
# ``simd.STREAMING_THRESHOLD_BYTES`` (a quarter of the last-level cache), 7/8 of that cache: below
# it the arrays stay in the cache between calls, and plain stores leave the output there for the
# next operator (docs/performance.md, "Decisions").
_STREAMING_SHARE = 3.5
_DENSE_JOB = 1 << 14  # elements per job of the plain select
# A dense select moving less than this runs on the calling thread while the helpers sleep: it
# reads and writes cached data at tens of GB/s, so waking a helper (tens of microseconds) costs
# more than the half of the work it would take over. Helpers still awake from a previous call
# (a training step) take a share from pool.INLINE_BYTES up.
_WAKE_HELPERS_BYTES = 3 << 20


@intrinsic
def _select_vector_nontemporal(typingctx, x, value, out, start, limit):
    """One vector (``_VECTOR_BYTES``) of ``out[start:] = x > 0 ? value : 0`` on unsigned bits, as a
    branch-free vector select written with a non-temporal store; ``out`` must be aligned to the
    vector at ``start``. (LLVM does not vectorise a plain loop into non-temporal stores.)"""
    sig = types.void(x, value, out, start, limit)

    def codegen(context, builder, signature, args):
        x_arr, v_arr, o_arr = (context.make_array(t)(context, builder, a)
                               for t, a in zip(signature.args[:3], args[:3]))
        element = context.get_value_type(signature.args[2].dtype)
        element_bytes = element.width // 8
        lanes = _VECTOR_BYTES // element_bytes
        vector = ir.VectorType(element, lanes)

        def pointer(arr):
            return builder.bitcast(builder.gep(arr.data, [args[3]]), vector.as_pointer())

        bits = builder.load(pointer(x_arr), align=element_bytes)
        values = builder.load(pointer(v_arr), align=element_bytes)
        limits = simd.broadcast(builder, context.cast(builder, args[4], signature.args[4],
                                                      signature.args[2].dtype), lanes)
        zero = ir.Constant(vector, None)
        positive = builder.and_(builder.icmp_unsigned("!=", bits, zero),
                                builder.icmp_unsigned("<=", bits, limits))
        store = builder.store(builder.select(positive, values, zero), pointer(o_arr), align=_VECTOR_BYTES)
        simd.mark_nontemporal(builder, store)
        return context.get_dummy_value()

    return sig, codegen


@njit(inline="always")
def _select_run(x, value, out, start, stop, limit):
    """``out[i] = x[i] > 0 ? value[i] : 0`` for ``start <= i < stop``. LLVM vectorises this
    loop into a branch-free compare and mask (with random signs a per-element branch mispredicts
    half the time) when it can see two things: both loads happen whatever the sign (``w`` is
    read before the select), and no index is negative. A loop over ``range(start, stop)`` may
    have negative indices, which wrap around, and became vector gathers and scatters, 30x
    slower; slicing first gives a loop from 0."""
    x, value, out = x[start:stop], value[start:stop], out[start:stop]
    for i in range(out.size):
        b = x[i]
        w = value[i]
        out[i] = w if (b != 0) & (b <= limit) else 0


@njit(cache=True, nogil=True)
def _select_dense_streaming(counters, epoch, role, chunks, x, value, out):
    """Whole vectors written with non-temporal stores, ``_STREAMING_CHUNK_VECTORS`` per job; the
    unaligned head and the tail go with the first and last job. A store fence ends each chunk."""
    seen = begin(counters, epoch, role)
    x, value, out, limit = _as_bits(x, value, out)
    n = out.size
    lanes = _VECTOR_BYTES // out.itemsize
    head = min(n, (_VECTOR_BYTES - out.ctypes.data % _VECTOR_BYTES) % _VECTOR_BYTES // out.itemsize)
    vectors = (n - head) // lanes
    jobs = (vectors + _STREAMING_CHUNK_VECTORS - 1) // _STREAMING_CHUNK_VECTORS
    while True:
        chunk = claim(counters)
        if chunk >= chunks:
            end(epoch, role, seen)
            return
        first_job, last_job = chunk * jobs // chunks, (chunk + 1) * jobs // chunks
        if chunk == 0:
            _select_run(x, value, out, 0, head, limit)
        for v in range(first_job * _STREAMING_CHUNK_VECTORS, min(last_job * _STREAMING_CHUNK_VECTORS, vectors)):
            _select_vector_nontemporal(x, value, out, head + v * lanes, limit)
        simd.store_fence()
        if chunk == chunks - 1:
            _select_run(x, value, out, head + vectors * lanes, n, limit)
        finish(counters)


# A select task's words in the lane, from ``LANE_ARGUMENTS`` on (``_select_dense`` writes them,
# its lane entry reads them): the three arrays' addresses, their length, the type's limit.
_X, _VALUE, _OUT, _SIZE, _LIMIT = range(5)


@njit(inline="always")
def _select_lane_chunks(lane, task, chunks, from_back, x, value, out, limit):
    n = out.size
    while True:
        chunk = lane_claim(lane, task, from_back)
        if chunk < 0:
            return
        _select_run(x, value, out, chunk * n // chunks, (chunk + 1) * n // chunks, limit)
        lane_finish(lane)


@njit(cache=True, nogil=True)
def _select_dense(lane, entry, helpers, chunks, x, value, out, distinct):
    """The select of cached data (below the streaming threshold), through the lane
    (``pool.share_lane``): a helper lingering after the previous call joins within a
    microsecond, where a queued task reaches it in several, as much as half of a 512 KiB call.
    ``distinct``: refuse (-1, nothing written) an ``out`` that shares memory with an input."""
    x, value, out, limit = _as_bits(x, value, out)
    if distinct and _overlaps(out, x, value):
        return -1
    if helpers == 0:
        _select_run(x, value, out, 0, out.size, limit)
        return 0
    arguments = lane[LANE_ARGUMENTS:]
    arguments[_X] = np.int64(x.ctypes.data)
    arguments[_VALUE] = np.int64(value.ctypes.data)
    arguments[_OUT] = np.int64(out.ctypes.data)
    arguments[_SIZE] = out.size
    arguments[_LIMIT] = limit
    task = lane_publish(lane, entry, chunks, helpers)
    _select_lane_chunks(lane, task, chunks, False, x, value, out, limit)
    return 0 if lane_wait(lane) else 1


@functools.cache
def _lane_entry(bits: type) -> int:
    """The address of ``_select_dense``'s lane entry for elements of unsigned type ``bits``
    (compiled on the first call that shares such a select)."""

    @cfunc(types.void(types.CPointer(types.int64), types.int64), cache=True, nogil=True)
    def select_lane_entry(lane_address, task):
        lane = carray(lane_address, (LANE_ARGUMENTS + _LIMIT + 1,))
        if not lane_join(lane):
            return
        arguments = lane[LANE_ARGUMENTS:]
        n = arguments[_SIZE]
        x = carray(pointer_to(arguments[_X], bits), (n,))
        value = carray(pointer_to(arguments[_VALUE], bits), (n,))
        out = carray(pointer_to(arguments[_OUT], bits), (n,))
        _select_lane_chunks(lane, task, lane_chunks(lane), True, x, value, out, bits(arguments[_LIMIT]))

    return select_lane_entry.address


@njit(cache=True, nogil=True)
def _select_alone(x, value, out, distinct):
    """The select on the calling thread, for calls small enough that Python's share of them
    matters: the bits views and the aliasing check are made here, not in Python. ``distinct``:
    refuse (False, nothing written) an ``out`` that shares memory with ``x`` or ``value``."""
    x, value, out, limit = _as_bits(x, value, out)
    if distinct and _overlaps(out, x, value):
        return False
    _select_run(x, value, out, 0, out.size, limit)
    return True


@njit(cache=True, nogil=True)
def _select_strided(counters, epoch, role, chunks, shape, x, x_off, x_st, v, v_off, v_st, out, o_off, o_st, limit):
    seen = begin(counters, epoch, role)
    ndim = shape.size
    inner = shape[ndim - 1]
    rows = 1
    for d in range(ndim - 1):
        rows *= shape[d]
    while True:
        chunk = claim(counters)
        if chunk >= chunks:
            end(epoch, role, seen)
            return
        for r in range(chunk * rows // chunks, (chunk + 1) * rows // chunks):
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
        finish(counters)


def select_positive(x: np.ndarray, value: np.ndarray, out: np.ndarray) -> None:
    if not element_aligned(out):
        staged = np.empty(out.shape, out.dtype)
        select_positive(x, value, staged)
        np.copyto(out, staged)
        return
    arrays = 2 if value is x else 3  # distinct arrays (relu passes x as value): _select_dense_run
    order = _common_dense_order(x, value, out)
    if order:
        # The common case, checked first because small calls are dominated by Python: all three
        # are one dense run in the same memory order, so their flat views line up (``ravel`` of
        # a contiguous array is a view, and the cheapest one NumPy makes).
        _select_dense_run(*_kernel_views(x.ravel(order), value.ravel(order), out.ravel(order)), arrays=arrays)
        return
    dtype = x.dtype
    bits, limit = _BITS_AND_LIMIT[dtype]
    x, value, out = aligned_input(x).view(bits), aligned_input(value).view(bits), out.view(bits)
    x_buf, x_off, _ = flat_view(x)
    v_buf, v_off, _ = flat_view(value)
    o_buf, o_off, _ = flat_view(out)
    elem = out.itemsize
    shape, (o_st, x_st, v_st) = coalesce(out.shape, out.strides, x.strides, value.strides)
    if len(shape) == 1 and o_st == x_st == v_st == (elem,):
        # Dense in the same memory order after all (channels_last, say): the buffers line up
        # element for element from their lowest addresses.
        _select_dense_run(*_kernel_views(x_buf.view(dtype), v_buf.view(dtype), o_buf.view(dtype)), arrays=arrays)
        return
    share(_select_strided, math.prod(shape[:-1]), 3 * out.nbytes, np.array(shape, dtype=np.int64),
          x_buf, x_off, np.array(x_st, dtype=np.int64) // elem,
          v_buf, v_off, np.array(v_st, dtype=np.int64) // elem,
          o_buf, o_off, np.array(o_st, dtype=np.int64) // elem, limit)


def select_dense(x: np.ndarray, value: np.ndarray, out: np.ndarray) -> bool:
    """``select_positive`` for three C-contiguous arrays of one dtype and shape, ``out``
    element-aligned (``relu._dense_arguments``): one dense run, with no layout to work out.
    Returns False, having written nothing, when ``out`` shares memory with ``x`` or ``value``."""
    arrays = 2 if value is x else 3
    # ravel: the cheapest view NumPy makes (40 ns), and one kernel per dtype, not per rank
    x, value, out = x.ravel(), value.ravel(), out.ravel()
    # _kernel_views and _select_dense_run's small branch, written out: a 16 KiB call is 2 us in all
    if x.dtype.char == "e":
        x, value, out = x.view(np.uint16), value.view(np.uint16), out.view(np.uint16)
    if 3 * out.nbytes < INLINE_BYTES:
        return _select_alone(x, value, out, True)
    return _select_dense_run(x, value, out, distinct=True, arrays=arrays)


def _kernel_views(x: np.ndarray, value: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, ...]:
    """The arrays as the kernels take them: float16 as its uint16 bits (numba has no float16
    arrays), any other type as it is (the kernels view it as bits, ``_as_bits``)."""
    if x.dtype.char == "e":
        return x.view(np.uint16), value.view(np.uint16), out.view(np.uint16)
    return x, value, out


def _common_dense_order(x: np.ndarray, value: np.ndarray, out: np.ndarray) -> str:
    """``"C"`` or ``"F"`` when the three arrays are contiguous in that order, else ``""``."""
    if x.flags.c_contiguous and value.flags.c_contiguous and out.flags.c_contiguous:
        return "C"
    if x.flags.f_contiguous and value.flags.f_contiguous and out.flags.f_contiguous:
        return "F"
    return ""


def _select_dense_run(x: np.ndarray, value: np.ndarray, out: np.ndarray, distinct: bool = False,
                      arrays: int = 3) -> bool:
    """The select over three 1-D unit-stride arrays (``_kernel_views``); ``arrays``: how many
    distinct ones (2 for ``relu``, whose ``value`` is ``x``). ``distinct``: refuse an ``out``
    that shares memory with an input (return False, nothing written)."""
    moved = 3 * out.nbytes
    if moved < INLINE_BYTES:  # without the pool's bookkeeping: small calls are all overhead
        return _select_alone(x, value, out, distinct)
    if arrays * out.nbytes < _STREAMING_SHARE * simd.STREAMING_THRESHOLD_BYTES or out.ctypes.data % out.itemsize:
        return share_lane(_select_dense, _LANE_ENTRIES[out.dtype], max(1, out.size // _DENSE_JOB), moved,
                          x, value, out, distinct, wake_bytes=_WAKE_HELPERS_BYTES)
    if distinct and (np.may_share_memory(out, x) or np.may_share_memory(out, value)):
        return False
    vectors = out.nbytes // _VECTOR_BYTES
    share(_select_dense_streaming, -(-vectors // _STREAMING_CHUNK_VECTORS), moved, x, value, out)
    return True


# Per kernel element type (``_kernel_views``): the address of its lane entry, compiled on first use.
_LANE_ENTRIES = {dtype: functools.partial(_lane_entry, bits) for dtype, (bits, _) in _KERNEL_BITS_AND_LIMIT.items()}
