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

The lane (:func:`share_lane`): for calls of tens of microseconds, even a lingering helper's
way through Python to its next task costs too much, so a kernel may publish its task to the
helpers in native memory instead, where ``end`` picks it up without returning to Python. Inside
a torch program, another thread pool's threads serve the lane instead (:func:`set_lane_team`,
``openmp_team``: torch's OpenMP threads, which spin between torch's operators on the cores
gradops' helpers would need).

Inside a torch program, ``share``'s kernels run on that same team too, through a native entry per
kernel (``team_share``) once it is compiled.

Interrupts: a large call from the main thread runs its caller's share on a proxy thread, so that
Ctrl-C stops it after the chunks being computed (``interrupts``, :func:`_cancel`).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Callable

import numpy as np
from llvmlite import ir
from numba import get_num_threads, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .._output_cache import lent
from .first_calls import KernelNotReady, thread_state
from .interrupts import run_interruptibly
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


@intrinsic
def _atomic_store(typingctx, counters, index, value):
    """``counters[index] = value``, written atomically (another thread may compare-exchange it)."""
    if not _is_counter(counters, index) or not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(value, _counter_pointer(context, builder, signature, args), "seq_cst", 8)
        return context.get_dummy_value()
    return types.void(counters, index, value), codegen


@intrinsic
def _compare_exchange(typingctx, counters, index, expected, desired):
    """Atomically ``counters[index] = desired`` if it holds ``expected``; returns whether it did."""
    if not (_is_counter(counters, index) and isinstance(expected, types.Integer)
            and isinstance(desired, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        old, new = (context.cast(builder, value, kind, types.int64)
                    for value, kind in zip(args[2:], signature.args[2:]))
        result = builder.cmpxchg(_counter_pointer(context, builder, signature, args), old, new, "seq_cst", "seq_cst")
        return builder.extract_value(result, 1)
    return types.boolean(counters, index, expected, desired), codegen


@intrinsic
def _call_entry(typingctx, address, lane, task):
    """Call the lane entry at ``address``: a C function ``void(int64 *lane, int64 task)``."""
    if not (isinstance(address, types.Integer) and _is_counter(lane, task)):
        return None

    def codegen(context, builder, signature, args):
        words = context.make_array(signature.args[1])(context, builder, args[1]).data
        entry_type = ir.FunctionType(ir.VoidType(), [words.type, ir.IntType(64)])
        entry = builder.inttoptr(args[0], entry_type.as_pointer())
        builder.call(entry, [words, context.cast(builder, args[2], signature.args[2], types.int64)])
        return context.get_dummy_value()
    return types.void(address, lane, task), codegen


@intrinsic
def pointer_to(typingctx, address, dtype):
    """The address of a lane task's array (``lane[i]``, an int64) as a pointer to ``dtype``, for
    ``numba.carray``."""
    if not (isinstance(address, types.Integer) and isinstance(dtype, types.NumberClass)):
        return None
    pointer_type = types.CPointer(dtype.instance_type)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer_type))
    return pointer_type(address, dtype), codegen


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
    """A helper lingers until the next task is announced, or ``epoch[1]`` rounds have passed. It
    computes its share of each task published in the lane meanwhile, natively, and lingers again;
    first of the lane's current task, which may still be open (a helper that skipped it
    lingered through a long task alone, timed out, and skipped the next one again, call after
    call: a 4 MiB ReLU gradient took 0.57 ms instead of 0.24)."""
    if role == HELPER:
        served = -1
        rounds = 0
        while rounds < epoch[1]:
            if _atomic_load(epoch, 0) != seen:
                return
            task = _atomic_load(epoch, _LANE_TASK)
            if task != served and task > 0:  # task 0: none was ever published
                served = task
                _serve_task(epoch, task)
                rounds = 0
            rounds += 1


@njit(inline="always")
def _serve_task(lane, task):
    """Take part in lane task ``task`` through its entry (which joins, claims and computes)."""
    _call_entry(_atomic_load(lane, _LANE_ENTRY), lane, task)


@njit(inline="always")
def serve_awaited(lane):
    """A lane team's thread (``set_lane_team``): wait for the task its caller is about to publish
    (``_LANE_AWAITED``) and serve it; return when the caller gives up on it (0) or a later one is."""
    while True:
        awaited = _atomic_load(lane, _LANE_AWAITED)
        task = _atomic_load(lane, _LANE_TASK)
        if awaited == 0 or task > awaited:
            return
        if task == awaited:
            _serve_task(lane, task)
            return


@njit(inline="always")
def claim(counters):
    """The next chunk for this thread (``>= chunks`` when none is left)."""
    return _fetch_add(counters, 0)


@njit(inline="always")
def finish(counters):
    """Report one claimed chunk computed."""
    _fetch_add(counters, 1)


# --- The lane ------------------------------------------------------------------------------
# A queued task reaches a lingering helper through Python: the helper returns from its kernel,
# takes the GIL, the task from its queue and dispatches the kernel, a few microseconds in all,
# as long as a 512 KiB ReLU gradient's whole work. A lane task does not leave native code: its
# caller's kernel writes the task into the lane (words of ``_epoch``: an entry, a C function
# ``void(int64 *lane, int64 task)`` compiled with ``numba.cfunc``, and the task's arguments, as
# addresses and sizes) and publishes it; a lingering helper calls the entry from ``end``. One
# caller at a time owns the lane (``_lane_lock``). Claims name their task (``lane_claim``), so
# a helper that arrives after its task ended claims nothing of the next one.
# ``_LANE_AWAITED``: the task a foreign OpenMP team's threads wait for (``openmp_team``), 0 for none.
(_LANE_TASK, _LANE_ENTRY, _LANE_CLAIM, _LANE_FINISHED, _LANE_CHUNKS, _LANE_JOINED, _LANE_HELPERS,
 _LANE_AWAITED) = range(2, 10)
LANE_ARGUMENTS = 10  # the task's own arguments start here
LANE_WORDS = LANE_ARGUMENTS + 8
# A claim word: the task's number (its low 32 bits), the caller's next chunk from the front and
# the helpers' next chunk from the back (16 bits each).
_TASK_MASK, _CHUNK_MASK = (1 << 32) - 1, (1 << 16) - 1
LANE_MAX_CHUNKS = _CHUNK_MASK
# How many rounds the lane's caller waits for the helpers' chunks before Python takes over.
_LANE_CALLER_ROUNDS = 1 << 16


@njit(inline="always")
def lane_publish(lane, entry, chunks, helpers):
    """The lane's caller publishes its task (its arguments already written from
    ``LANE_ARGUMENTS`` on): at most ``helpers`` helpers join it. Returns the task's number."""
    task = lane[_LANE_TASK] + 1
    _atomic_store(lane, _LANE_CLAIM, ((task & _TASK_MASK) << 32) | chunks)  # a late helper may CAS it
    lane[_LANE_FINISHED] = 0
    lane[_LANE_CHUNKS] = chunks
    lane[_LANE_JOINED] = 0
    lane[_LANE_HELPERS] = helpers
    lane[_LANE_ENTRY] = entry
    _fetch_add(lane, _LANE_TASK)  # a full barrier: every word above is written first
    return task


@njit(inline="always")
def lane_join(lane):
    """Whether a helper entering the lane's task may help (at most the caller's number do)."""
    return _fetch_add(lane, _LANE_JOINED) < lane[_LANE_HELPERS]


@njit(inline="always")
def lane_claim(lane, task, from_back):
    """The next chunk of lane task ``task``, or -1 when none is left or the lane holds another
    task. The caller claims from the front, helpers ``from_back``: calls that follow each other
    split their data at about the same place, and each core finds its part in its own cache
    (a 512 KiB ReLU gradient on 2 threads: 9.4 us so, 11.6 us with chunks taken in turn)."""
    while True:
        word = _atomic_load(lane, _LANE_CLAIM)
        if (word >> 32) & _TASK_MASK != task & _TASK_MASK:
            return -1
        front, back = (word >> 16) & _CHUNK_MASK, word & _CHUNK_MASK
        if front >= back:
            return -1
        if from_back:
            if _compare_exchange(lane, _LANE_CLAIM, word, word - 1):
                return back - 1
        elif _compare_exchange(lane, _LANE_CLAIM, word, word + (1 << 16)):
            return front


@njit(inline="always")
def lane_chunks(lane):
    """The number of chunks of the lane's task (read before claiming: a claim that succeeds
    proves the task, and so this number, current)."""
    return lane[_LANE_CHUNKS]


@njit(inline="always")
def lane_finish(lane):
    """Report one claimed chunk of the lane's task computed."""
    _fetch_add(lane, _LANE_FINISHED)


@njit(inline="always")
def lane_wait(lane):
    """The caller waits a while for the helpers' claimed chunks; returns whether all are done."""
    for _ in range(_LANE_CALLER_ROUNDS):
        if _atomic_load(lane, _LANE_FINISHED) >= lane[_LANE_CHUNKS]:
            return True
    return False


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
# [tasks announced, rounds a helper lingers, the lane]; the rounds are calibrated when helpers start.
_epoch = np.zeros(LANE_WORDS, np.int64)
_lane_lock = threading.Lock()
_lane_team = None  # set_lane_team's; a fork's child has none (_reset_lane_in_child)


def _reset_lane_in_child() -> None:
    """A fork copies the lane's lock as some thread held it, and the lane's team as the parent's
    threads make it up; neither thread is in the child, whose lane is served by its own helpers."""
    global _lane_lock, _lane_team
    _lane_lock = threading.Lock()
    _lane_team = None


os.register_at_fork(after_in_child=_reset_lane_in_child)


def _calibrate_linger() -> int:
    """Rounds of ``end`` in ``_HELPER_SPIN_SECONDS``, from the fastest of a few timings (a timing
    the OS interrupted would make helpers give up waiting too soon)."""
    probe = np.zeros(LANE_WORDS, np.int64)
    probe[1] = 1 << 16
    counters = np.zeros(3, np.int64)  # the task of epoch 0, which stays current
    _linger(counters, probe, HELPER)  # compile or load
    fastest = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        _linger(counters, probe, HELPER)
        fastest = min(fastest, time.perf_counter() - start)
    return max(1, int(probe[1] * _HELPER_SPIN_SECONDS / max(fastest, 1e-9)))


def _serve(tasks: queue.SimpleQueue) -> None:
    thread_state.helper = True  # a helper never compiles (first_calls): the calling thread does
    while True:
        kernel, args = tasks.get()  # at once when the kernel's lingering saw the task announced
        try:
            kernel(*args)
        except KernelNotReady:
            pass  # refused before it claimed a chunk: the calling thread computes them, or none
        del kernel, args  # the arrays of a finished call must not outlive it


def thread_budget(items: int, moved_bytes: int, wake_bytes: int) -> int:
    """Threads for a call: 1 below ``INLINE_BYTES``, or below ``wake_bytes`` while the helpers
    sleep (a kernel whose work per byte is small, such as a select, does not pay for waking them);
    else up to ``thread_count()``."""
    if moved_bytes < (INLINE_BYTES if _helpers_awake() else max(wake_bytes, INLINE_BYTES)):
        return 1
    return min(thread_count(), items)


def _helpers_awake() -> bool:
    """Whether the helpers are still lingering after the last task they took part in."""
    return time.perf_counter() - _last_helped < _HELPER_SPIN_SECONDS


def _wake_for_next_call(threads: int, items: int, moved_bytes: int) -> None:
    """A call that ran alone (``threads`` 1) with too little work to wait for a sleeping helper,
    but enough to share with an awake one, wakes the helpers without waiting for them, so that a
    call that follows closely (a loop over such calls, the next layer) finds them lingering, as
    OpenMP's spinning threads are."""
    if threads == 1 and moved_bytes >= INLINE_BYTES:
        helpers = min(thread_count(), items) - 1
        if helpers > 0:
            _wake_helpers(helpers)


def share(kernel: Callable, items: int, moved_bytes: int, *args, wake_bytes: int = INLINE_BYTES) -> None:
    """Run ``kernel(counters, epoch, role, chunks, *args)`` over ``items`` work items on this thread and
    on as many helper threads as :func:`thread_budget` gives; with a lane team (:func:`set_lane_team`),
    on the team's threads instead, once the kernel's entry is ready (``team_share``)."""
    global _last_helped
    team = _lane_team
    threads = thread_budget(items, moved_bytes, wake_bytes if team is None else INLINE_BYTES)
    chunks = min(items, threads * _CHUNKS_PER_THREAD)
    counters = np.zeros(3, np.int64)  # [next chunk to claim, chunks computed, the task's epoch]
    team_words = None if team is None or threads == 1 else team.start_share(kernel, counters, chunks, args, threads)
    if team is None:
        _wake_for_next_call(threads, items, moved_bytes)
    if threads > 1 and team_words is None:
        # What the caller's ``begin`` will announce (if another thread's call announces first, a
        # helper merely stops lingering early).
        counters[2] = _epoch[0] + 1
        # The caller holds the arrays until every claimed chunk is done, and a helper touches
        # their data only in chunks it claimed; so helpers may hold lent views.
        _start_helpers(threads - 1, kernel, (counters, _epoch, HELPER, chunks, *lent(args)))
    role = CALLER if threads > 1 else ALONE
    try:
        if moved_bytes >= _INTERRUPTIBLE_BYTES and threading.current_thread() is threading.main_thread():
            run_interruptibly(kernel, (counters, _epoch, role, chunks, *args), lambda: _cancel(counters))
        else:
            kernel(counters, _epoch, role, chunks, *args)
    finally:
        if team_words is not None:
            team.end()  # waits for the team's chunks
    # Wait for the helpers' claimed chunks: spin briefly (a chunk is short), then yield the CPU
    # (a helper may have been preempted).
    deadline = time.perf_counter() + _CALLER_SPIN_SECONDS
    while counters[1] < chunks:
        if time.perf_counter() > deadline:
            time.sleep(0)
    if threads > 1 and team_words is None:
        _last_helped = time.perf_counter()


def share_lane(kernel: Callable, entry: Callable[[], int], items: int, moved_bytes: int, *args,
               wake_bytes: int = INLINE_BYTES) -> bool:
    """Run ``kernel(lane, entry, helpers, chunks, *args)`` over ``items`` work items, with up to
    ``helpers`` lingering helpers taking chunks through the lane (``entry()``: the address of
    its lane entry). With ``helpers`` 0 the kernel computes everything alone and publishes
    nothing. Else it publishes the task (``lane_publish``), computes every chunk it claims
    (``lane_claim``, ``lane_finish``) and returns 0, or 1 when ``lane_wait`` gave up waiting for
    a helper's chunk. A kernel may refuse its arguments by returning -1 before anything else:
    then this returns False. Helpers that were not lingering are woken for the next call, as
    :func:`share` does. With a lane team (:func:`set_lane_team`), the team's threads take the
    helpers' part instead, and this thread's helpers are left asleep."""
    global _last_helped
    team = _lane_team
    threads = thread_budget(items, moved_bytes, wake_bytes if team is None else INLINE_BYTES)
    if threads > 1 and _lane_lock.acquire(blocking=False):
        if team is None and not _helpers_awake():
            _wake_helpers(threads - 1)  # they join this task if they come in time, else the next
        try:
            chunks = min(items, threads * _CHUNKS_PER_THREAD, LANE_MAX_CHUNKS)
            if team is not None:
                _epoch[_LANE_AWAITED] = _epoch[_LANE_TASK] + 1
                team.start(threads)
            try:
                status = kernel(_epoch, entry(), threads - 1, chunks, *args)
                while status > 0 and _epoch[_LANE_FINISHED] < chunks:  # a helper was preempted in a chunk
                    time.sleep(0)
            finally:
                if team is not None:
                    _epoch[_LANE_AWAITED] = 0  # a thread still waiting (the kernel refused) stops
                    team.end()
            joined = _epoch[_LANE_JOINED]
        finally:
            _lane_lock.release()
        if team is None and status >= 0:
            if joined:
                _last_helped = time.perf_counter()
            else:
                _wake_helpers(threads - 1)
        return status >= 0
    if kernel(_epoch, 0, 0, 1, *args) < 0:
        return False
    if team is None:
        _wake_for_next_call(threads, items, moved_bytes)
    return True


def set_lane_team(team) -> None:
    """Serve lane tasks and ``share``'s tasks with ``team`` from now on: an object whose ``start(threads)``
    has ``threads - 1`` threads of another pool run ``serve_awaited``, whose ``start_share(kernel,
    counters, chunks, args, threads)`` has them run ``kernel`` (or returns None) and whose ``end()``
    waits for them (``openmp_team``: torch's OpenMP threads); None: with this module's helpers."""
    global _lane_team
    _lane_team = team


def lane_words() -> np.ndarray:
    """The lane's words, a kernel's ``epoch`` (for a lane team's threads)."""
    return _epoch


def _wake_helpers(count: int) -> None:
    """Hand ``count`` helpers a task with no work, after which they linger for the next one;
    a helper whose queue holds a task already is left alone (it will linger after that task)."""
    global _last_helped
    counters = np.zeros(3, np.int64)
    counters[2] = _epoch[0]  # the current epoch: they linger until the next task is announced
    _start_helpers(count, _linger, (counters, _epoch, HELPER), only_idle=True)
    _last_helped = time.perf_counter()


def _start_helpers(count: int, kernel: Callable, args: tuple, *, only_idle: bool = False) -> None:
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
            if not (only_idle and not tasks.empty()):
                tasks.put((kernel, args))
