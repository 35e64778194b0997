"""The compiled backend: numba kernels, multi-threaded, cached on disk.

Only imported on the first fast call (numba's import and the kernel cache load are not paid by
``import gradops``). Every kernel is a gather: each output element is written by exactly one
thread in a fixed order, so results are bit-identical whatever the thread count. The threads
are the calling thread and ``numba.get_num_threads() - 1`` helpers (``pool.py``; set with
``NUMBA_NUM_THREADS`` or ``numba.set_num_threads``); no kernel uses an OpenMP parallel region.

The disk cache is numba's: ``NUMBA_CACHE_DIR`` if set, else ``__pycache__`` beside these sources
if it is writable, else the user cache directory (``$XDG_CACHE_HOME/numba``, by default
``~/.cache/numba``), so a read-only install works (tests/test_cold_start.py). numba is not told
where to cache by gradops: setting ``NUMBA_CACHE_DIR`` would move every other numba user's
cache in the process too, and would do nothing once numba is imported.

First calls: a call whose kernel would compile is answered meanwhile by its family's NumPy tier,
with the same bits, while a compile process compiles the kernel (``first_calls.py``; the
families' tiers are ``depthwise/ordered.py`` and ``resample/ordered.py``; ReLU compiles in the
calling process, in about 2 s); the listener below is where such a compile is refused.

Compile time (a first call from an empty cache; ``gradops examples`` on a fresh machine):

* numba types a call to another jitted function with its literal arguments first, and compiles
  that specialisation even when the variable later unifies to int64. A counter that starts at
  ``0`` and is passed on (``nt``, ``count``, ``taps``) therefore compiled its callee twice;
  such counters start at ``np.int64(0)``. Literal flags are passed on purpose where a
  specialisation pays (``stream`` in the depthwise kernels: the stores are fixed at compile time).
* A kernel compiles the branches its call can take and no others: the entry code decides, from
  the plan, which branches are possible (layout, store kind, which row paths), and the kernel is
  built for that set by a cached factory (``_contract_kernel``, ``_backprop_input_kernel_for``,
  ``_forward_kernel_for``) whose flags are closure constants; numba prunes a branch on a constant
  False before typing it, so its callees are never compiled. Each set is its own entry in the
  disk cache.
* ``inline="always"`` inlines at numba's IR level, copying the callee's IR into every call site
  (most of the compile time was ``copy.deepcopy``). It is kept for the small register-blocked
  leaves, which LLVM might not inline; the functions that call them once per row segment are
  compiled once per signature and called (depthwise ``_taps_rows_for``, ``_taps_blocked``).
* A depthwise call compiles the row paths of its filter only: the plan's tap paths reach the
  plane function as literal arguments of an ``@overload``, which builds the function of that set
  (``depthwise/planes.py``); a 3x3 backprop input compiles in about a third of the time of all
  row sizes in both directions.
* Functions called once per row or row segment (not inlined) are compiled without numba's
  reference counting (``row_njit``, ``numba_internals.NO_REFCOUNT``): at each such call numba
  otherwise increments and decrements the reference count of every array argument, atomic
  operations on counters that both threads share, which made the cache line holding them travel
  between the cores (docs/performance.md has the measurements). Overloads called per row take
  ``jit_options=NO_REFCOUNT`` (resample's ``_columns_first``, a ``*args`` wrapper passing 14
  arrays; depthwise ``_pair_sums_run``). Such functions cannot allocate (numba refuses to compile
  one that does); their callers keep the arrays alive.
"""

import functools
import hashlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np
from numba import types
from numba.core import event

from .numba_internals import row_njit  # noqa: F401 (for the kernel modules)
from .first_calls import before_compile
from .numba_internals import add_cache_locators, unique_symbols_across_processes

log = logging.getLogger("gradops")


def _kernel_dtype(args: tuple) -> str:
    """What a kernel signature computes on, for the log: int64 arrays are indices and counters,
    half types travel as uint16 bits beside float32 accumulators, and ReLU moves every type as
    unsigned bits of its size."""
    dtypes = [np.dtype(str(arg.dtype)) for arg in args
              if isinstance(arg, types.Array) and str(arg.dtype) != "int64"]
    floats = [dtype for dtype in dtypes if dtype.kind == "f"]
    if floats and np.dtype(np.uint16) in dtypes:
        return "float16/bfloat16"
    if floats:
        return str(floats[0])
    if dtypes:
        return f"{dtypes[0].itemsize * 8}-bit elements"
    return "int64"


class _CompileLog(event.Listener):
    """Logs one INFO line before numba compiles a kernel (issue 23, cold start: a first call must
    not look like a hang), unless ``first_calls`` refuses the compile first. numba raises
    ``numba:compile`` only on a miss of both the in-process overloads and the disk cache, and
    once per callee as well: only the outermost compile of a thread is logged, which is the
    kernel a call dispatched."""

    def __init__(self) -> None:
        self._local = threading.local()

    def on_start(self, ev: event.Event) -> None:
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        dispatcher = ev.data["dispatcher"]
        function = dispatcher.py_func
        if depth == 0 and _is_kernel(function):
            self._local.start = None
            before_compile(dispatcher, ev.data["args"])  # may refuse: the call runs in NumPy meanwhile
            self._local.start = time.perf_counter()
            # the module under _fast/ (a family's package: its name, not the submodule's)
            family = function.__module__.split("._fast.", 1)[-1].split(".", 1)[0]
            log.info("compiling %s kernel %s for %s (first use; cached afterwards)", family,
                     function.__name__.strip("_"), _kernel_dtype(ev.data["args"]))

    def on_end(self, ev: event.Event) -> None:
        self._local.depth -= 1
        function = ev.data["dispatcher"].py_func
        if self._local.depth == 0 and _is_kernel(function) and self._local.start is not None:
            log.debug("compiled %s in %.1f s", function.__qualname__, time.perf_counter() - self._local.start)


def _is_kernel(function: Callable) -> bool:
    """Whether ``function`` is one of this package's: numba's events also announce the user's own
    compiles (of functions made any way, with or without a module), which gradops does not log."""
    module = getattr(function, "__module__", None)
    return isinstance(module, str) and module.startswith(__name__ + ".")


event.register("numba:compile", _CompileLog())


# --- The disk cache's source stamp ------------------------------------------------------------
# numba checks a cached kernel against the source file of its own function only, but a gradops
# kernel inlines functions from the other modules here (kernels.py calls rows.py, simd.py, ...):
# after an edit of one of those, or a checkout that changes it, numba would load the kernel
# compiled from the old code. So every kernel defined under this package is stamped with a digest
# of the whole package's sources: any change recompiles them all (once, then cached).

_PACKAGE = Path(__file__).resolve().parent


@functools.cache
def _package_digest() -> str:
    """SHA-256 of every source file of this package, with its path (computed once per process)."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


class _PackageStamp:
    """A cache locator for this package's kernels whose source stamp is :func:`_package_digest`;
    mixed into each of numba's file-backed locators (the same cache folders, in numba's order)."""

    def get_source_stamp(self) -> str:
        return _package_digest()

    @classmethod
    def from_function(cls, py_func, py_file):
        # resolved, as _PACKAGE is: a checkout reached through a symbolic link is still this package
        if not os.path.realpath(py_file).startswith(str(_PACKAGE) + os.sep):
            return None
        return super().from_function(py_func, py_file)


# Registered before any kernel is defined: numba picks a function's locator when ``cache=True``
# is applied, at import of the module that defines it.
add_cache_locators(_PackageStamp)
# Before any kernel compiles: kernels compiled by different processes meet in the disk cache.
unique_symbols_across_processes()

