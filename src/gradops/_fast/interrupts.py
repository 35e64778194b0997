"""Interrupts of large calls from the main thread (``pool.share``).

Python runs a signal handler (Ctrl-C's KeyboardInterrupt) on the main thread between bytecodes,
never inside a nogil kernel. So a large call made from the main thread runs its caller's share
on a proxy thread while the main thread waits interruptibly; on an interrupt it pushes the claim
counter past the last chunk, so that every thread stops after the chunk it is computing, waits
for those chunks and re-raises. The pool is then as after any call. Which thread computes a
chunk never changes its result, so the bits are the same.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Callable

from .first_calls import thread_state

_proxy_lock = threading.Lock()


def run_interruptibly(kernel: Callable, arguments: tuple, cancel: Callable[[], int]) -> None:
    """The caller's share, ``kernel(*arguments)`` (``arguments``: counters, epoch, role, chunks
    and the kernel's own), on the proxy thread; the main thread waits, and on an exception
    (KeyboardInterrupt from a signal handler) cancels the call (``cancel()``: ``pool._cancel``,
    which returns the claims made before), waits until no thread is computing a chunk of it any
    more, and re-raises."""
    counters, chunks = arguments[0], arguments[3]
    done = threading.Event()
    errors: list[BaseException] = []
    _proxy().put((kernel, arguments, done, errors, getattr(thread_state, "gated", False)))
    try:
        done.wait()
    except BaseException:
        claimed = min(int(cancel()), chunks)
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
    with _proxy_lock:
        if _proxy_tasks is None or _proxy_pid != os.getpid():  # threads do not survive a fork
            _proxy_tasks, _proxy_pid = queue.SimpleQueue(), os.getpid()
            threading.Thread(target=_serve_proxy, args=(_proxy_tasks,), daemon=True, name="gradops-caller").start()
        return _proxy_tasks


def _serve_proxy(tasks: queue.SimpleQueue) -> None:
    while True:
        kernel, args, done, errors, thread_state.gated = tasks.get()  # the caller's gate (first_calls)
        try:
            kernel(*args)
        except BaseException as exc:  # noqa: BLE001 - raised again on the calling thread
            errors.append(exc)
        done.set()
        del kernel, args, done, errors  # the arrays of a finished call must not outlive it
