"""Fresh outputs come from a bounded cache of released buffers: never shared while alive."""

from __future__ import annotations

import gc

import ml_dtypes
import numpy as np
import pytest

import gradops
from gradops import _output_cache


def _big_pair(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((512, 1024)).astype(np.float32),
            rng.standard_normal((512, 1024)).astype(np.float32))  # 2 MiB each: cached size class


def test_released_output_buffers_are_reused():
    """Steady state: each call gets the buffer the previous call's output released, although a
    helper thread that computed part of that call still holds its arguments while it waits for
    the next task (``pool.py``: it holds lent views)."""
    x, dy = _big_pair(0)
    addresses = set()
    for _ in range(6):  # back to back, as a training step calls (no collection in between)
        result = gradops.relu_grad(x, dy)
        addresses.add(result.ctypes.data)
        del result
    assert len(addresses) == 1
    np.testing.assert_array_equal(gradops.relu_grad(x, dy), np.where(x > 0, dy, 0))


def test_a_lent_view_shares_the_memory_but_not_the_buffer():
    x, dy = _big_pair(4)
    result = gradops.relu_grad(x, dy)
    (lent,) = _output_cache.lent((result[3:],))
    assert lent.base is not None and np.shares_memory(lent, result)
    np.testing.assert_array_equal(lent, result[3:])
    address = result.ctypes.data
    del result
    gc.collect()
    assert gradops.relu_grad(x, dy).ctypes.data == address  # released although `lent` lives
    plain = np.ones((512, 1024), np.float32)
    assert _output_cache.lent((plain, 7))[0] is plain  # not from the cache: nothing to lend


def test_lent_views_keep_layout_and_dtype_and_are_made_once_per_array():
    """Strided, transposed, reversed, read-only and reinterpreted views of an output lent as views of the same bytes,
    with the same strides and values; an array passed twice is lent once."""
    x, dy = _big_pair(8)
    result = gradops.relu_grad(x, dy)
    readonly = result[7:]
    readonly.flags.writeable = False
    views = (result[1::3, ::2], result.T, result.view(ml_dtypes.bfloat16), result[5:], readonly, result[::-1])
    lent = _output_cache.lent(views + (views[0],))
    for view, borrowed in zip(views, lent):
        assert borrowed is not view and borrowed.strides == view.strides and borrowed.dtype == view.dtype
        assert borrowed.ctypes.data == view.ctypes.data
        assert borrowed.tobytes() == view.tobytes()
    assert lent[-1] is lent[0]


def test_a_live_view_keeps_its_buffer():
    x, dy = _big_pair(1)
    result = gradops.relu_grad(x, dy)
    row = result[7]  # a view: keeps the buffer alive after `result` is gone
    expected = row.copy()
    del result
    gc.collect()
    for seed in range(3):
        other = gradops.relu_grad(*_big_pair(seed + 10))
        assert not np.shares_memory(other, row)
    np.testing.assert_array_equal(row, expected)


def test_many_outputs_of_one_size_in_use(cache_limit):
    """Twenty-four 2 MiB outputs alive at once under a 50 MiB limit, then every other one released:
    the next twelve outputs reuse exactly the released buffers, and room for a 4 MiB output is
    made by forgetting one released buffer, the one handed out longest ago, never one in use."""
    cache_limit("50")
    _output_cache._CACHE.clear()
    x, dy = _big_pair(9)
    alive = [gradops.relu_grad(x, dy) for _ in range(24)]
    released = [out.ctypes.data for out in alive[::2]]
    del alive[::2]
    reused = [gradops.relu_grad(x, dy) for _ in range(12)]
    assert sorted(out.ctypes.data for out in reused) == sorted(released)
    freed = [out.ctypes.data for out in reused[:3]]
    del reused[:3]
    wide = np.ones((1024, 1024), np.float32)  # 4 MiB
    larger = gradops.relu_grad(wide, wide)
    assert _output_cache._CACHE.kept_bytes == 50 << 20 and len(_output_cache._CACHE.shadows) == 24
    again = [gradops.relu_grad(x, dy) for _ in range(2)]
    assert sorted(out.ctypes.data for out in again) == sorted(freed[1:])  # freed[0] was forgotten
    np.testing.assert_array_equal(alive[0], np.where(x > 0, dy, 0))
    np.testing.assert_array_equal(larger, wide)


@pytest.mark.parametrize("hold", [lambda r: r.T, lambda r: memoryview(r), lambda r: [r], lambda r: r.view(np.int32)],
                         ids=["transpose", "memoryview", "list", "view-as"])
def test_anything_referencing_an_output_keeps_its_buffer(hold):
    """Whether a buffer is free is read from its reference count: any holder of the output or
    of a view of it keeps the buffer from the next outputs."""
    x, dy = _big_pair(7)
    result = gradops.relu_grad(x, dy)
    start, stop, result_bytes = result.ctypes.data, result.ctypes.data + result.nbytes, result.nbytes
    holder = hold(result)
    del result
    gc.collect()
    for _ in range(3):
        other = gradops.relu_grad(x, dy)
        assert not start <= other.ctypes.data < stop
    free = _output_cache._CACHE.free_bytes()
    del holder
    gc.collect()
    assert _output_cache._CACHE.free_bytes() == free + result_bytes  # free once the holder is gone


def test_outputs_are_ordinary_writeable_arrays():
    x, dy = _big_pair(2)
    result = gradops.relu_grad(x, dy)
    assert type(result) is np.ndarray and result.flags.writeable and result.flags.c_contiguous
    assert result.ctypes.data % 64 == 0
    result[...] = 1  # the caller owns it


@pytest.fixture
def cache_limit(monkeypatch):
    """Sets ``GRADOPS_OUTPUT_CACHE_MB`` as a new process would see it (it is read once)."""
    def set_limit(megabytes: str) -> None:
        monkeypatch.setenv("GRADOPS_OUTPUT_CACHE_MB", megabytes)
        _output_cache._limit_bytes.cache_clear()
    yield set_limit
    monkeypatch.undo()
    _output_cache._limit_bytes.cache_clear()


def test_cache_can_be_disabled_and_is_bounded(cache_limit):
    cache_limit("0")
    x, dy = _big_pair(3)
    assert gradops.relu_grad(x, dy).base is None  # plain np.empty
    cache_limit("3")
    _output_cache._CACHE.clear()
    results = [gradops.relu_grad(x, dy) for _ in range(4)]  # 4 x 2 MiB alive at once
    kept = [id(result.base) in _output_cache._CACHE.shadows for result in results]
    assert kept == [True, False, False, False] and _output_cache._CACHE.kept_bytes == 2 << 20
    del results
    gc.collect()
    assert _output_cache._CACHE.free_bytes() == 2 << 20


def test_room_is_made_by_forgetting_the_least_recently_used_free_buffers(cache_limit):
    """A limit of 5 MiB holding two free 2 MiB buffers: a 3 MiB output (which neither can hold)
    forgets the one handed out longer ago, and the other serves the next 2 MiB output."""
    cache_limit("5")
    _output_cache._CACHE.clear()
    x, dy = _big_pair(6)
    older, newer = gradops.relu_grad(x, dy), gradops.relu_grad(x, dy)
    newer_address = newer.ctypes.data
    del older, newer
    wide = np.ones((768, 1024), np.float32)  # 3 MiB
    larger = gradops.relu_grad(wide, wide)
    assert _output_cache._CACHE.kept_bytes == 5 << 20 and len(_output_cache._CACHE.shadows) == 2
    assert gradops.relu_grad(x, dy).ctypes.data == newer_address
    np.testing.assert_array_equal(larger, wide)


def test_the_limit_counts_the_outputs_bytes(cache_limit):
    """A limit of 4 MiB keeps two released 2 MiB outputs, though each buffer is a few bytes
    larger (it is aligned): both come back, at their addresses, for the next two outputs. The
    cache starts empty: a larger buffer another test released could serve a 2 MiB output."""
    cache_limit("4")
    _output_cache._CACHE.clear()
    x, dy = _big_pair(5)
    results = [gradops.relu_grad(x, dy) for _ in range(2)]
    addresses = {result.ctypes.data for result in results}
    del results
    gc.collect()
    assert len(_output_cache._CACHE.shadows) == 2 and _output_cache._CACHE.free_bytes() == 4 << 20
    again = [gradops.relu_grad(x, dy) for _ in range(2)]
    assert {result.ctypes.data for result in again} == addresses


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.int32])
def test_a_buffer_released_by_one_dtype_serves_another(dtype):
    """The cache keeps each buffer's aligned address and makes each dtype's array interface once:
    a 2 MiB float32 output's buffer comes back as a 2 MiB output of another dtype, at the same
    64-byte-aligned address, holding what is written into it."""
    first = _output_cache.empty_output((512, 1024), np.dtype(np.float32))
    address = first.ctypes.data
    del first
    gc.collect()
    elements = (2 << 20) // np.dtype(dtype).itemsize
    again = _output_cache.empty_output((elements,), np.dtype(dtype))
    assert again.dtype == np.dtype(dtype) and again.ctypes.data == address and address % 64 == 0
    values = (np.arange(elements) % 251).astype(dtype)
    again[...] = values
    assert again.tobytes() == values.tobytes()


def _memory_order(array: np.ndarray) -> list[int]:
    return sorted(range(array.ndim), key=lambda d: -array.strides[d])


def test_fresh_outputs_follow_the_gradient_memory_order():
    """Like NumPy's ``order="K"``: a channels_last ``dy`` gives a channels_last dX (of another
    shape) and a channels_last ReLU gradient, with the same values as contiguous inputs give."""
    rng = np.random.default_rng(5)
    dy = rng.standard_normal((2, 3, 8, 6)).astype(np.float32)
    dy_nhwc = np.ascontiguousarray(dy.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    kwargs = dict(mode="linear", scales=(1, 1, 2, 2))
    dx = gradops.resample_grad1(dy_nhwc, (2, 3, 4, 3), **kwargs)
    assert _memory_order(dx) == [0, 2, 3, 1] and dx.flags.writeable
    np.testing.assert_array_equal(dx, gradops.resample_grad1(dy, (2, 3, 4, 3), **kwargs))
    x = rng.standard_normal(dy.shape).astype(np.float32)
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    grad = gradops.relu_grad(x_nhwc, dy_nhwc)
    assert _memory_order(grad) == [0, 2, 3, 1]
    np.testing.assert_array_equal(grad, np.where(x > 0, dy, 0))


def test_memory_order_of_unit_axes_and_gapped_inputs():
    like = np.empty((4, 1, 5, 6), np.float32).transpose(0, 2, 3, 1)[:, ::2]  # (4, 3, 6, 1), gaps
    out = _output_cache.empty_output((4, 3, 6, 2), np.dtype(np.float32), like)
    assert out.flags.c_contiguous  # like's long axes are in C order; its size-1 axis keeps its place
    fortran = np.asfortranarray(np.empty((3, 4, 5), np.float16))
    out = _output_cache.empty_output((2, 4, 5), np.dtype(np.float16), fortran)
    assert out.shape == (2, 4, 5) and out.flags.f_contiguous


@pytest.mark.parametrize("elements", [4096, 1 << 19])  # np.empty, and a cache block
def test_repeated_fresh_outputs_are_new_arrays_in_the_memory_order_of_the_first(elements):
    """A prepared run's outputs (``_arrays.output_allocator``, through ``output_factory``): each call
    a new array, of the shape, dtype and memory order the first call's ``like`` gave, released
    buffers reused only once nothing views them."""
    like = np.empty((2, elements // 64, 4, 8), np.float32).transpose(0, 3, 1, 2)  # channels-last memory
    make = _output_cache.output_factory((2, 8, elements // 64, 4), np.dtype(np.float32), like)
    first, second = make(), make()
    for out in (first, second):
        assert out.shape == (2, 8, elements // 64, 4) and out.dtype == np.float32 and out.flags.writeable
        assert _memory_order(out) == [0, 2, 3, 1]
    assert not np.shares_memory(first, second)


def test_an_allocation_the_system_refuses_names_the_field(monkeypatch):
    from gradops import _arrays
    from gradops.errors import ShapeError

    def refused():
        raise MemoryError("no room")
    monkeypatch.setattr(_arrays, "output_factory", lambda *args: refused)
    allocate = _arrays.output_allocator("input_sizes", (2, 3), np.dtype(np.float32))
    with pytest.raises(ShapeError, match="input_sizes.*cannot allocate an output of shape \\(2, 3\\).*no room"):
        allocate()
