"""Fast ``out = x > 0 ? value : 0`` on raw bits (SPEC 4.2 / 4.3).

The select is done on unsigned integer views, so float16 needs no float arithmetic and every
value, NaN payloads and -0 included, is copied bit for bit. For an IEEE float viewed as
unsigned bits ``b``, ``x > 0`` is ``0 < b <= bits(+inf)`` (sign clear, not zero, not NaN);
for a signed integer it is ``0 < b <= max``.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from . import simd
from .pool import INLINE_BYTES, begin, claim, end, finish, share
from .strided import aligned_input, coalesce, element_aligned, flat_view

# Per dtype: the unsigned type its bits are selected as, and the largest bit pattern that compares > 0.
_BITS_AND_LIMIT = {
    np.dtype(np.float32): (np.uint32, np.uint32(0x7F800000)), np.dtype(np.float16): (np.uint16, np.uint16(0x7C00)),
    np.dtype(np.int32): (np.uint32, np.uint32(0x7FFFFFFF)), np.dtype(np.int16): (np.uint16, np.uint16(0x7FFF)),
    np.dtype(np.int8): (np.uint8, np.uint8(0x7F)),
}


# Streaming stores (``simd.STREAMING_THRESHOLD_BYTES``): reading two arrays and writing one moves
# three array-sizes over the memory bus instead of four. One store per 64-byte line (a whole
# write-combining buffer at once): R1 0.95x, R2 0.89-0.91x the time of 32-byte stores (A/B).
_VECTOR_BYTES = simd.LINE_BYTES
_STREAMING_CHUNK_VECTORS = 4096  # vectors per job; a store fence ends each chunk of jobs
_DENSE_JOB = 1 << 14  # elements per job of the plain select
# A dense select moving less than this runs on the calling thread while the helpers sleep: it
# reads and writes cached data at tens of GB/s, so waking a helper (tens of microseconds) costs
# more than the half of the work it would take over. Helpers still awake from a previous call
# (a training step) take a share from pool.INLINE_BYTES up.
_WAKE_HELPERS_BYTES = 3 << 20


def _select_vector_intrinsic(nontemporal: bool):
    """One vector (``_VECTOR_BYTES``) of ``out[start:] = x > 0 ? value : 0`` on unsigned bits, as a
    branch-free vector select: with random signs a per-element branch mispredicts half the time.
    The non-temporal variant needs ``out`` aligned to the vector at ``start``; the plain one needs
    no alignment."""

    @intrinsic
    def select_vector(typingctx, x, value, out, start, limit):
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
            store = builder.store(builder.select(positive, values, zero), pointer(o_arr),
                                  align=_VECTOR_BYTES if nontemporal else element_bytes)
            if nontemporal:
                simd.mark_nontemporal(builder, store)
            return context.get_dummy_value()

        return sig, codegen

    return select_vector


_select_vector = _select_vector_intrinsic(nontemporal=False)
_select_vector_nontemporal = _select_vector_intrinsic(nontemporal=True)


@njit(inline="always")
def _select_run(x, value, out, start, stop, limit):
    for i in range(start, stop):
        b = x[i]
        out[i] = value[i] if (b != 0) & (b <= limit) else 0


@njit(inline="always")
def _select_vectors(x, value, out, start, stop, limit):
    """``_select_run`` over whole vectors, then element by element for the rest."""
    lanes = _VECTOR_BYTES // out.itemsize
    i = start
    while i + lanes <= stop:
        _select_vector(x, value, out, i, limit)
        i += lanes
    _select_run(x, value, out, i, stop, limit)


@njit(cache=True, nogil=True)
def _select_dense_streaming(counters, epoch, role, chunks, x, value, out, limit):
    """Whole vectors written with non-temporal stores, ``_STREAMING_CHUNK_VECTORS`` per job; the
    unaligned head and the tail go with the first and last job. A store fence ends each chunk."""
    seen = begin(counters, epoch, role)
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


@njit(cache=True, nogil=True)
def _select_dense(counters, epoch, role, chunks, x, value, out, limit):
    seen = begin(counters, epoch, role)
    n = out.size
    while True:
        chunk = claim(counters)
        if chunk >= chunks:
            end(epoch, role, seen)
            return
        _select_vectors(x, value, out, chunk * n // chunks, (chunk + 1) * n // chunks, limit)
        finish(counters)


@njit(cache=True, nogil=True)
def _select_alone(x, value, out, limit):
    _select_vectors(x, value, out, 0, out.size, limit)


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
    bits, limit = _BITS_AND_LIMIT[x.dtype]
    order = _common_dense_order(x, value, out)
    if order:
        # The common case, checked first because small calls are dominated by Python: all three
        # are one dense run in the same memory order, so their flat views line up (``ravel`` of
        # a contiguous array is a view, and the cheapest one NumPy makes).
        _select_dense_run(x.ravel(order).view(bits), value.ravel(order).view(bits), out.ravel(order).view(bits),
                          limit)
        return
    x, value, out = aligned_input(x).view(bits), aligned_input(value).view(bits), out.view(bits)
    x_buf, x_off, _ = flat_view(x)
    v_buf, v_off, _ = flat_view(value)
    o_buf, o_off, _ = flat_view(out)
    elem = out.itemsize
    shape, (o_st, x_st, v_st) = coalesce(out.shape, out.strides, x.strides, value.strides)
    if len(shape) == 1 and o_st == x_st == v_st == (elem,):
        # Dense in the same memory order after all (channels_last, say): the buffers line up
        # element for element from their lowest addresses.
        _select_dense_run(x_buf, v_buf, o_buf, limit)
        return
    share(_select_strided, math.prod(shape[:-1]), 3 * out.nbytes, np.array(shape, dtype=np.int64),
          x_buf, x_off, np.array(x_st, dtype=np.int64) // elem,
          v_buf, v_off, np.array(v_st, dtype=np.int64) // elem,
          o_buf, o_off, np.array(o_st, dtype=np.int64) // elem, limit)


def select_dense(x: np.ndarray, value: np.ndarray, out: np.ndarray) -> None:
    """``select_positive`` for three C-contiguous arrays of one dtype and shape, ``out``
    element-aligned (``relu._dense_arguments``): one dense run, with no layout to work out."""
    bits, limit = _BITS_AND_LIMIT[x.dtype]
    _select_dense_run(x.reshape(-1).view(bits), value.reshape(-1).view(bits), out.reshape(-1).view(bits), limit)


def _common_dense_order(x: np.ndarray, value: np.ndarray, out: np.ndarray) -> str:
    """``"C"`` or ``"F"`` when the three arrays are contiguous in that order, else ``""``."""
    if x.flags.c_contiguous and value.flags.c_contiguous and out.flags.c_contiguous:
        return "C"
    if x.flags.f_contiguous and value.flags.f_contiguous and out.flags.f_contiguous:
        return "F"
    return ""


def _select_dense_run(x: np.ndarray, value: np.ndarray, out: np.ndarray, limit) -> None:
    """The select over three 1-D unit-stride views of unsigned bits."""
    moved = 3 * out.nbytes
    if moved < INLINE_BYTES:
        _select_alone(x, value, out, limit)  # without the pool's bookkeeping: small calls are all overhead
    elif out.nbytes >= simd.STREAMING_THRESHOLD_BYTES and out.ctypes.data % out.itemsize == 0:
        vectors = out.nbytes // _VECTOR_BYTES
        share(_select_dense_streaming, -(-vectors // _STREAMING_CHUNK_VECTORS), moved, x, value, out, limit)
    else:
        share(_select_dense, max(1, out.size // _DENSE_JOB), moved, x, value, out, limit,
              wake_bytes=_WAKE_HELPERS_BYTES)
