"""The fast backend's threads: the calling thread and helper threads claim chunks of work.

A fork-join parallel region (numba's ``prange``) waits for every thread to start and finish its
share: on a busy machine a helper thread that the OS does not schedule stalls the call for a
whole time slice (measured here: a 50 us region took 8 ms with one competing process). Here the
calling thread and ``numba.get_num_threads() - 1`` helper threads claim chunks of work items
from an atomic counter; the caller only waits for chunks a helper has claimed, never for a
helper that has not started. Which thread computes a chunk does not change its result, so
outputs are bit-identical whatever the thread count.

A kernel run by :func:`share` has the signature ``kernel(counters, epoch, role, chunks, *args)``,
releases the GIL (``nogil=True``), starts with ``seen = begin(counters, epoch, role)``, loops
``chunk = claim(counters)`` until ``chunk >= chunks``, calling ``finish(counters)`` after each
chunk it computed, and ends with ``end(epoch, role, seen)``. It touches the data of its large
array arguments only inside chunks it claimed: helpers get views that do not keep a fresh output's
buffer alive (``_output_cache.lent``), so the next call can reuse that buffer while they linger.

Waking a sleeping thread costs tens of microseconds, as much as a small call's whole work. So
calls that move little memory run on the calling thread alone, and a helper does not sleep
after its task: it lingers (``end``) inside the kernel, without the GIL, for
``_HELPER_SPIN_SECONDS`` watching ``epoch``, which the calling thread's kernel bumps (``begin``)
once the next task is queued and the GIL released. The calls of a training step, which follow
each other closely, find the helpers awake, and no thread waits on the GIL held by another.

Interrupts. Python runs a signal handler (Ctrl-C's KeyboardInterrupt) on the main thread between
bytecodes, never inside a nogil kernel. So a large call made from the main thread runs its
caller's share on a proxy thread while the main thread waits interruptibly; on an interrupt it
pushes the claim counter past the last chunk (:func:`_cancel`), so that every thread stops after
the chunk it is computing, waits for those chunks and re-raises. The pool is then as after any
call. Which thread computes a chunk never changes its result, so the bits are the same.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Callable

import numpy as np
from numba import get_num_threads, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .._output_cache import lent
from .numba_internals import native_thread_count

# Chunks of work items per thread, claimed dynamically: enough to even out items of unequal cost
# and threads that start late, few enough that claiming costs nothing.
_CHUNKS_PER_THREAD = 16
# Calls that move fewer bytes than this run on the calling thread: waking a helper costs more.
INLINE_BYTES = 256 << 10
# How long the calling thread busy-waits for a helper's last chunk before yielding the CPU.
_CALLER_SPIN_SECONDS = 2e-4
# How long an idle helper watches for the next task before it sleeps.
_HELPER_SPIN_SECONDS = 2e-4
# When the last task with helpers ended (perf_counter): until _HELPER_SPIN_SECONDS after it they
# are awake, and cheap to hand work to.
_last_helped = -1.0
# Calls from the main thread that move at least this much can be interrupted (see the module
# docstring); smaller ones, a few milliseconds at most, skip the proxy thread's two wake-ups.
_INTERRUPTIBLE_BYTES = 128 << 20


def _is_counter(counters, index) -> bool:
    return isinstance(counters, types.Array) and counters.dtype == types.int64 and isinstance(index, types.Integer)


def _counter_pointer(context, builder, signature, args):
    """The address of ``counters[index]`` (the intrinsics' first two arguments)."""
    array_type = signature.args[0]
    array = context.make_array(array_type)(context, builder, args[0])
    position = context.cast(builder, args[1], signature.args[1], types.intp)
    return cgutils.get_item_pointer(context, builder, array_type, array, [position])


@intrinsic
def _fetch_add(typingctx, counters, index):
    """Atomically ``counters[index] += 1``; returns the previous value."""
    if not _is_counter(counters, index):
        return None

    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("add", _counter_pointer(context, builder, signature, args),
                                  context.get_constant(types.int64, 1), "seq_cst")
    return types.int64(counters, index), codegen


@intrinsic
def _atomic_load(typingctx, counters, index):
    """``counters[index]``, read atomically (a loop of plain loads may be hoisted by LLVM)."""
    if not _is_counter(counters, index):
        return None

    def codegen(context, builder, signature, args):
        return builder.load_atomic(_counter_pointer(context, builder, signature, args), "seq_cst", 8)
    return types.int64(counters, index), codegen


@intrinsic
def _fetch_add_many(typingctx, counters, index, amount):
    """Atomically ``counters[index] += amount``; returns the previous value."""
    if not _is_counter(counters, index) or not isinstance(amount, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[2], signature.args[2], types.int64)
        return builder.atomic_rmw("add", _counter_pointer(context, builder, signature, args), value, "seq_cst")
    return types.int64(counters, index, amount), codegen


@njit(nogil=True, cache=True)
def _cancel(counters):
    """Push the claim counter past any chunk count: every later ``claim`` ends its kernel's loop.
    Returns the claims made before, of which at most ``chunks`` were real chunks."""
    return _fetch_add_many(counters, 0, 1 << 40)


CALLER, HELPER, ALONE = 0, 1, 2  # a kernel's ``role``


@njit(inline="always")
def begin(counters, epoch, role):
    """The calling thread announces its task to the lingering helpers; returns the epoch of this
    task. A helper takes it from ``counters[2]``, not from ``epoch``: a helper that starts a task
    late, after the caller has announced the next one, must not linger for that next task while
    it waits unread in its queue (it would stay one task behind, call after call)."""
    if role == CALLER:
        return _fetch_add(epoch, 0) + 1
    if role == HELPER:
        return counters[2]
    return _atomic_load(epoch, 0)


@njit(inline="always")
def end(epoch, role, seen):
    """A helper lingers until the next task is announced, or ``epoch[1]`` rounds have passed."""
    if role == HELPER:
        for _ in range(epoch[1]):
            if _atomic_load(epoch, 0) != seen:
                return


@njit(inline="always")
def claim(counters):
    """The next chunk for this thread (``>= chunks`` when none is left)."""
    return _fetch_add(counters, 0)


@njit(inline="always")
def finish(counters):
    """Report one claimed chunk computed."""
    _fetch_add(counters, 1)


@njit(nogil=True, cache=True)
def _linger(counters, epoch, role):
    """A kernel with no work (calibrates ``end``)."""
    end(epoch, role, begin(counters, epoch, role))


_read_thread_count: Callable[[], int] | None = None


def thread_count() -> int:
    """``numba.get_num_threads()`` (this thread's setting). Once numba's threading layer is up,
    its C getter answers directly, without the public function's locks: 0.1 against 1.25 us per
    call. (The public function wherever numba lacks that getter.)"""
    global _read_thread_count
    if _read_thread_count is None:
        get_num_threads()  # starts the threading layer
        _read_thread_count = native_thread_count() or get_num_threads
    return _read_thread_count()


_helpers: list[queue.SimpleQueue] = []
_helpers_lock = threading.Lock()
_helpers_pid = os.getpid()  # helper threads do not survive a fork
# [tasks announced, rounds a helper lingers]; the rounds are calibrated when helpers start.
_epoch = np.zeros(2, np.int64)


def _calibrate_linger() -> int:
    """Rounds of ``end`` in ``_HELPER_SPIN_SECONDS``, from the fastest of a few timings (a timing
    the OS interrupted would make helpers give up waiting too soon)."""
    probe = np.array([0, 1 << 16], np.int64)
    counters = np.zeros(3, np.int64)  # the task of epoch 0, which stays current
    _linger(counters, probe, HELPER)  # compile or load
    fastest = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        _linger(counters, probe, HELPER)
        fastest = min(fastest, time.perf_counter() - start)
    return max(1, int(probe[1] * _HELPER_SPIN_SECONDS / max(fastest, 1e-9)))


def _serve(tasks: queue.SimpleQueue) -> None:
    while True:
        kernel, args = tasks.get()  # at once when the kernel's lingering saw the task announced
        kernel(*args)
        del kernel, args  # the arrays of a finished call must not outlive it


def thread_budget(items: int, moved_bytes: int, wake_bytes: int) -> int:
    """Threads for a call: 1 below ``INLINE_BYTES``, or below ``wake_bytes`` while the helpers
    sleep (a kernel whose work per byte is small, such as a select, does not pay for waking them);
    else up to ``thread_count()``."""
    awake = time.perf_counter() - _last_helped < _HELPER_SPIN_SECONDS
    if moved_bytes < (INLINE_BYTES if awake else max(wake_bytes, INLINE_BYTES)):
        return 1
    return min(thread_count(), items)


def share(kernel: Callable, items: int, moved_bytes: int, *args, wake_bytes: int = INLINE_BYTES) -> None:
    """Run ``kernel(counters, epoch, role, chunks, *args)`` over ``items`` work items on this thread and
    on as many helper threads as :func:`thread_budget` gives."""
    global _last_helped
    threads = thread_budget(items, moved_bytes, wake_bytes)
    chunks = min(items, threads * _CHUNKS_PER_THREAD)
    counters = np.zeros(3, np.int64)  # [next chunk to claim, chunks computed, the task's epoch]
    if threads == 1 and moved_bytes >= INLINE_BYTES:
        # Too little work to wait for a sleeping helper, but enough to share with an awake one:
        # wake the helpers without waiting for them, so that a call that follows closely (a loop
        # over such calls, the next layer) finds them lingering, as OpenMP's spinning threads are.
        helpers = min(thread_count(), items) - 1
        if helpers > 0:
            _wake_helpers(helpers)
    if threads > 1:
        # What the caller's ``begin`` will announce (if another thread's call announces first, a
        # helper merely stops lingering early).
        counters[2] = _epoch[0] + 1
        # The caller holds the arrays until every claimed chunk is done, and a helper touches
        # their data only in chunks it claimed; so helpers may hold lent views.
        _start_helpers(threads - 1, kernel, (counters, _epoch, HELPER, chunks, *lent(args)))
    role = CALLER if threads > 1 else ALONE
    if moved_bytes >= _INTERRUPTIBLE_BYTES and threading.current_thread() is threading.main_thread():
        _run_interruptibly(kernel, counters, role, chunks, args)
    else:
        kernel(counters, _epoch, role, chunks, *args)
    # Wait for the helpers' claimed chunks: spin briefly (a chunk is short), then yield the CPU
    # (a helper may have been preempted).
    deadline = time.perf_counter() + _CALLER_SPIN_SECONDS
    while counters[1] < chunks:
        if time.perf_counter() > deadline:
            time.sleep(0)
    if threads > 1:
        _last_helped = time.perf_counter()


def _wake_helpers(count: int) -> None:
    """Hand ``count`` helpers a task with no work, after which they linger for the next one."""
    global _last_helped
    counters = np.zeros(3, np.int64)
    counters[2] = _epoch[0]  # the current epoch: they linger until the next task is announced
    _start_helpers(count, _linger, (counters, _epoch, HELPER))
    _last_helped = time.perf_counter()


def _run_interruptibly(kernel: Callable, counters: np.ndarray, role: int, chunks: int, args: tuple) -> None:
    """The caller's share of ``kernel`` on the proxy thread; the main thread waits, and on an
    exception (KeyboardInterrupt from a signal handler) cancels the call, waits until no thread
    is computing a chunk of it any more, and re-raises."""
    done = threading.Event()
    errors: list[BaseException] = []
    _proxy().put((kernel, (counters, _epoch, role, chunks, *args), done, errors))
    try:
        done.wait()
    except BaseException:
        claimed = min(int(_cancel(counters)), chunks)
        _wait_uninterrupted(lambda: done.is_set() and counters[1] >= claimed)
        raise
    if errors:
        raise errors[0]


def _wait_uninterrupted(finished: Callable[[], bool]) -> None:
    """Wait for ``finished()``: a chunk or two, during which a further interrupt is deferred."""
    pending: BaseException | None = None
    while not finished():
        try:
            time.sleep(1e-3)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, once the threads are idle
            pending = exc
    if pending is not None:
        raise pending


_proxy_tasks: queue.SimpleQueue | None = None
_proxy_pid = 0


def _proxy() -> queue.SimpleQueue:
    """The queue of the thread that runs the main thread's share of interruptible calls."""
    global _proxy_tasks, _proxy_pid
    with _helpers_lock:
        if _proxy_tasks is None or _proxy_pid != os.getpid():  # threads do not survive a fork
            _proxy_tasks, _proxy_pid = queue.SimpleQueue(), os.getpid()
            threading.Thread(target=_serve_proxy, args=(_proxy_tasks,), daemon=True, name="gradops-caller").start()
        return _proxy_tasks


def _serve_proxy(tasks: queue.SimpleQueue) -> None:
    while True:
        kernel, args, done, errors = tasks.get()
        try:
            kernel(*args)
        except BaseException as exc:  # noqa: BLE001 - raised again on the calling thread
            errors.append(exc)
        done.set()
        del kernel, args, done, errors  # the arrays of a finished call must not outlive it


def _start_helpers(count: int, kernel: Callable, args: tuple) -> None:
    global _helpers_pid
    with _helpers_lock:
        if _helpers_pid != os.getpid():
            _helpers.clear()
            _helpers_pid = os.getpid()
        if not _epoch[1]:
            _epoch[1] = _calibrate_linger()
        while len(_helpers) < count:
            tasks: queue.SimpleQueue = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(tasks,), daemon=True, name="gradops-helper").start()
            _helpers.append(tasks)
        for tasks in _helpers[:count]:
            tasks.put((kernel, args))
