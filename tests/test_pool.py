"""The fast backend's thread pool (``_fast/pool.py``): helpers that fall behind catch up."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("numba")

from numba import njit  # noqa: E402

from gradops._fast import pool  # noqa: E402
from gradops._fast.pool import _atomic_load, begin, claim, end, finish, share  # noqa: E402

_ENOUGH_BYTES = 1 << 30  # any call this large runs on the helpers too
_PATIENCE = 1 << 32      # rounds of waiting for a helper: seconds, far beyond a helper's start


@njit(nogil=True)
def _who_claims(counters, epoch, role, chunks, claimed_by, patience):
    """Records the role of the thread that claims each chunk; the thread that claims chunk 0
    waits (at most ``patience`` rounds) for another thread to claim chunk 1."""
    seen = begin(counters, epoch, role)
    while True:
        chunk = claim(counters)
        if chunk >= chunks:
            end(epoch, role, seen)
            return
        claimed_by[chunk] = role
        if chunk == 0:
            for _ in range(patience):
                if _atomic_load(counters, 0) > 1:
                    break
        finish(counters)


def _run(patience: int) -> np.ndarray:
    claimed_by = np.full(2, -1, np.int64)
    share(_who_claims, 2, _ENOUGH_BYTES, claimed_by, patience)
    return claimed_by


def test_a_helper_that_starts_late_helps_with_the_next_call():
    """A helper busy (here: blocked) during two calls finds both of their tasks queued when it
    is free. It must skip them and help with the next call, not linger for that call's
    announcement while that call's task waits unread in its queue: that kept it one task
    behind, call after call, and calls shorter than a helper's lingering ran on one thread."""
    if pool.thread_count() < 2:
        pytest.skip("needs 2 threads")
    _run(0)  # starts the helper (and compiles)
    started, release = threading.Event(), threading.Event()
    pool._helpers[0].put((lambda: (started.set(), release.wait()), ()))
    assert started.wait(30), "the helper did not take its next task"
    rounds = int(pool._epoch[1])
    # Lingering that never times out: a helper lingering for the wrong task would stay there.
    pool._epoch[1] = 1 << 62
    try:
        assert _run(0).tolist() == [pool.CALLER, pool.CALLER]  # queued for the blocked helper
        assert _run(0).tolist() == [pool.CALLER, pool.CALLER]
        release.set()
        assert _run(_PATIENCE).tolist() == [pool.CALLER, pool.HELPER]
    finally:
        release.set()
        pool._epoch[1] = rounds
        _run(0)  # a new announcement ends any lingering begun with the long count


def test_concurrent_callers_get_their_own_results():
    """Python threads calling at once share the helpers (each helper serves the tasks of every
    caller in turn) and the output cache: each call must still return its own result, the same
    bits as alone. ReLU grad is a selection (exact: x > 0 ? dy : +0); the linear resample grad is
    compared with the same call made alone."""
    import gradops

    rng = np.random.default_rng(5)
    cases = []
    for k in range(4):
        x, dy = rng.standard_normal((2, 64, 32, 32), dtype=np.float32)  # 512 KiB each: helpers join
        grad = rng.standard_normal((1, 16, 64 + 8 * k, 64), dtype=np.float32)
        sizes = (1, 16, 32 + 4 * k, 32)
        cases.append((x, dy, np.where(x > 0, dy, np.float32(0)), grad, sizes,
                      gradops.resample_grad1(grad, sizes, mode="linear")))

    def work(case) -> bool:
        x, dy, relu_expected, grad, sizes, resample_expected = case
        for _ in range(40):
            if not np.array_equal(gradops.relu_grad(x, dy), relu_expected):
                return False
            if not np.array_equal(gradops.resample_grad1(grad, sizes, mode="linear").view(np.uint32),
                                  resample_expected.view(np.uint32)):
                return False
        return True

    with ThreadPoolExecutor(len(cases)) as executor:
        assert all(executor.map(work, cases))


def test_small_calls_wake_no_helper_but_use_awake_ones(monkeypatch):
    """Thread budget: below INLINE_BYTES always the calling thread alone; between INLINE_BYTES and
    a kernel's wake_bytes, helpers only while they are still awake from a previous task."""
    import time

    monkeypatch.setattr(pool, "thread_count", lambda: 2)
    mid, wake = 4 * pool.INLINE_BYTES, 16 * pool.INLINE_BYTES
    monkeypatch.setattr(pool, "_last_helped", -1.0)  # asleep
    assert pool.thread_budget(100, pool.INLINE_BYTES - 1, wake) == 1
    assert pool.thread_budget(100, mid, wake) == 1
    assert pool.thread_budget(100, wake, wake) == 2
    assert pool.thread_budget(100, mid, pool.INLINE_BYTES) == 2  # the default: no extra threshold
    monkeypatch.setattr(pool, "_last_helped", time.perf_counter() + 10.0)  # awake
    assert pool.thread_budget(100, mid, wake) == 2 and pool.thread_budget(1, mid, wake) == 1
    assert pool.thread_budget(100, pool.INLINE_BYTES - 1, wake) == 1


def test_a_call_too_small_to_wait_for_helpers_wakes_them_for_the_next(monkeypatch):
    """Between INLINE_BYTES and wake_bytes with the helpers asleep, the call runs alone and hands
    the helpers an empty task, so that the next such call finds them awake and shares its work."""
    from gradops._fast import relu

    monkeypatch.setattr(pool, "thread_count", lambda: 2)
    monkeypatch.setattr(pool, "_last_helped", -1.0)  # asleep
    monkeypatch.setattr(pool, "_HELPER_SPIN_SECONDS", 60.0)  # awake helpers stay awake during the test
    started = []
    monkeypatch.setattr(pool, "_start_helpers", lambda count, kernel, args: started.append((count, kernel)))
    n = 1 << 16
    x = np.arange(n, dtype=np.uint32) - np.uint32(n // 2)
    value = np.arange(n, dtype=np.uint32)
    out = np.zeros(n, np.uint32)
    mid, wake = 3 * pool.INLINE_BYTES, 16 * pool.INLINE_BYTES
    limit = np.uint32(0x7FFFFFFF)
    pool.share(relu._select_dense, 8, mid, x, value, out, limit, wake_bytes=wake)
    assert started == [(1, pool._linger)]  # woken, not waited for
    np.testing.assert_array_equal(out, np.where((x != 0) & (x <= limit), value, 0))
    assert pool.thread_budget(8, mid, wake) == 2  # the next call shares
    started.clear()
    pool.share(relu._select_dense, 8, pool.INLINE_BYTES - 1, x, value, out, limit, wake_bytes=wake)
    pool.share(relu._select_dense, 1, mid, x, value, out, limit, wake_bytes=wake)
    assert started == []  # below INLINE_BYTES, or one work item: nobody to share with
