"""The fast backend's thread pool (``_fast/pool.py``): helpers that fall behind catch up."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("numba")

from numba import carray, cfunc, njit, types  # noqa: E402

from gradops._fast import pool  # noqa: E402
from gradops._fast.pool import (LANE_ARGUMENTS, _atomic_load, begin, claim, end, finish, lane_chunks,  # noqa: E402
                                lane_claim, lane_finish, lane_join, lane_publish, lane_wait, pointer_to, share)

from pool_probes import who_claims  # noqa: E402

_ENOUGH_BYTES = 1 << 30  # any call this large runs on the helpers too
_PATIENCE = 1 << 32      # rounds of waiting for a helper: seconds, far beyond a helper's start


def _run(patience: int, moved_bytes: int = _ENOUGH_BYTES) -> np.ndarray:
    """Who claimed each of the two chunks of a task; the thread that claims chunk 0 waits at most
    ``patience`` rounds for another to claim chunk 1."""
    claimed_by = np.full(2, -1, np.int64)
    share(who_claims, 2, moved_bytes, claimed_by, patience)
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
    monkeypatch.setattr(pool, "_start_helpers", lambda count, kernel, args, **_: started.append((count, kernel)))
    n = 1 << 16
    x = np.arange(n, dtype=np.int32) - np.int32(n // 2)
    value = np.arange(n, dtype=np.int32)
    out = np.zeros(n, np.int32)
    mid, wake = 3 * pool.INLINE_BYTES, 16 * pool.INLINE_BYTES
    entry = relu._LANE_ENTRIES[out.dtype]
    assert pool.share_lane(relu._select_dense, entry, 8, mid, x, value, out, True, wake_bytes=wake)
    assert started == [(1, pool._linger)]  # woken, not waited for
    np.testing.assert_array_equal(out, np.where(x > 0, value, 0))
    assert pool.thread_budget(8, mid, wake) == 2  # the next call shares
    started.clear()
    pool.share_lane(relu._select_dense, entry, 8, pool.INLINE_BYTES - 1, x, value, out, True, wake_bytes=wake)
    pool.share_lane(relu._select_dense, entry, 1, mid, x, value, out, True, wake_bytes=wake)
    assert started == []  # below INLINE_BYTES, or one work item: nobody to share with
    # A kernel that refuses its arguments (here: out is x) writes nothing and wakes nobody.
    assert not pool.share_lane(relu._select_dense, entry, 8, mid, x, value, x, True, wake_bytes=wake)
    assert started == []


# --- The lane -----------------------------------------------------------------------------------

@njit
def _publish(lane, chunks, helpers):
    return lane_publish(lane, 0, chunks, helpers)


@njit
def _claim(lane, task, from_back):
    return lane_claim(lane, task, from_back)


@njit
def _join(lane):
    return lane_join(lane)


def test_lane_claims_from_both_ends_and_name_their_task():
    lane = np.zeros(pool.LANE_WORDS, np.int64)
    task = _publish(lane, 5, 1)
    claims = [_claim(lane, task, from_back) for from_back in (False, True, False, True, False, True, False)]
    assert claims == [0, 4, 1, 3, 2, -1, -1]
    assert _join(lane) and not _join(lane)  # one helper, as published
    # The next task: a helper still holding the last task's number claims nothing of it.
    following = _publish(lane, 3, 1)
    assert following == task + 1
    assert _claim(lane, task, True) == -1 and _claim(lane, task, False) == -1
    assert _claim(lane, following, True) == 2
    # Task numbers are compared on their low 32 bits, which the claim word holds.
    lane[pool._LANE_TASK] = (1 << 32) - 1
    wrapped = _publish(lane, 2, 1)
    assert wrapped == 1 << 32 and _claim(lane, wrapped, False) == 0 and _claim(lane, wrapped - 1, False) == -1


@cfunc(types.void(types.CPointer(types.int64), types.int64), nogil=True)
def _record_entry(lane_address, task):
    """A lane entry that records, for each chunk it claims, that a helper claimed it."""
    lane = carray(lane_address, (LANE_ARGUMENTS + 1,))
    if not lane_join(lane):
        return
    claimed_by = carray(pointer_to(lane[LANE_ARGUMENTS], np.int64), (lane_chunks(lane),))
    while True:
        chunk = lane_claim(lane, task, True)
        if chunk < 0:
            return
        claimed_by[chunk] = pool.HELPER
        lane_finish(lane)


@njit(nogil=True)
def _record_claims(lane, entry, helpers, chunks, claimed_by, patience):
    """The caller's side of ``_record_entry``: it waits in its first chunk (at most ``patience``
    rounds) until a helper has claimed one."""
    if helpers == 0:
        claimed_by[:] = pool.ALONE
        return 0
    lane[LANE_ARGUMENTS] = np.int64(claimed_by.ctypes.data)
    task = lane_publish(lane, entry, chunks, helpers)
    while True:
        chunk = lane_claim(lane, task, False)
        if chunk < 0:
            return 0 if lane_wait(lane) else 1
        claimed_by[chunk] = pool.CALLER
        if chunk == 0:
            for _ in range(patience):
                if _atomic_load(claimed_by, chunks - 1) == pool.HELPER:
                    break
        lane_finish(lane)


def test_a_lingering_helper_takes_lane_chunks_from_the_back():
    """A helper lingering after a task joins the next lane task natively: the caller claims from
    the front, the helper from the back, every chunk exactly once."""
    if pool.thread_count() < 2:
        pytest.skip("needs 2 threads")
    _record_claims(pool._epoch, 0, 0, 4, np.zeros(4, np.int64), 0)  # compiles
    _run(_PATIENCE, pool.INLINE_BYTES)  # starts the helper (and compiles)
    rounds = int(pool._epoch[1])
    pool._epoch[1] = 1 << 62  # lingering that never times out, however this process is scheduled
    try:
        # a task the helper has certainly taken (not one so large that the caller's share goes to
        # the proxy thread, which may start after the helper has stopped lingering)
        assert sorted(_run(_PATIENCE, pool.INLINE_BYTES).tolist()) == [pool.CALLER, pool.HELPER]
        for _ in range(3):
            claimed_by = np.full(4, -1, np.int64)
            assert pool.share_lane(_record_claims, lambda: _record_entry.address, 4, _ENOUGH_BYTES, claimed_by,
                                   _PATIENCE)
            assert claimed_by[0] == pool.CALLER and claimed_by[-1] == pool.HELPER
            assert set(claimed_by.tolist()) <= {pool.CALLER, pool.HELPER}
            assert pool._epoch[pool._LANE_FINISHED] == 4
    finally:
        pool._epoch[1] = rounds
        _run(0)  # a new announcement ends the long lingering
