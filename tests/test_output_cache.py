"""Fresh outputs come from a bounded cache of released buffers: never shared while alive."""

from __future__ import annotations

import gc

import numpy as np

import gradops
from gradops import _output_cache


def _big_pair(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((512, 1024)).astype(np.float32),
            rng.standard_normal((512, 1024)).astype(np.float32))  # 2 MiB each: cached size class


def test_released_output_buffers_are_reused():
    x, dy = _big_pair(0)
    first = gradops.relu_grad(x, dy)
    address = first.ctypes.data
    del first
    gc.collect()
    second = gradops.relu_grad(x, dy)
    assert second.ctypes.data == address
    np.testing.assert_array_equal(second, np.where(x > 0, dy, 0))


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


def test_outputs_are_ordinary_writeable_arrays():
    x, dy = _big_pair(2)
    result = gradops.relu_grad(x, dy)
    assert type(result) is np.ndarray and result.flags.writeable and result.flags.c_contiguous
    assert result.ctypes.data % 64 == 0
    result[...] = 1  # the caller owns it


def test_cache_can_be_disabled_and_is_bounded(monkeypatch):
    monkeypatch.setenv("GRADOPS_OUTPUT_CACHE_MB", "0")
    x, dy = _big_pair(3)
    assert gradops.relu_grad(x, dy).base is None  # plain np.empty
    monkeypatch.setenv("GRADOPS_OUTPUT_CACHE_MB", "3")
    results = [gradops.relu_grad(x, dy) for _ in range(4)]  # 4 x 2 MiB released at once
    del results
    gc.collect()
    assert _output_cache._CACHE.free_bytes <= 3 << 20
