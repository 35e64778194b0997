"""The compiled backend: numba kernels, multi-threaded, cached on disk.

Only imported on the first fast call (numba's import and the kernel cache load are not paid by
``import gradops``). Every kernel is a gather: each output element is written by exactly one
thread in a fixed order, so results are bit-identical whatever the thread count. The threads
are the calling thread and ``numba.get_num_threads() - 1`` helpers (``pool.py``; set with
``NUMBA_NUM_THREADS`` or ``numba.set_num_threads``); no kernel uses an OpenMP parallel region.

Compile time (a first call from an empty cache; ``gradops examples`` on a fresh machine):

* numba types a call to another jitted function with its literal arguments first, and compiles
  that specialisation even when the variable later unifies to int64. A counter that starts at
  ``0`` and is passed on (``nt``, ``count``, ``taps``) therefore compiled its callee twice;
  such counters start at ``np.int64(0)``. Literal flags are passed on purpose where a
  specialisation pays (``stream`` in the depthwise kernels: the stores are fixed at compile time).
* ``inline="always"`` inlines at numba's IR level, copying the callee's IR into every call site
  (most of the compile time was ``copy.deepcopy``). It is kept for the small register-blocked
  leaves, which LLVM might not inline; the functions that call them once per row segment are
  compiled once per signature and called (depthwise ``_taps_rows``, ``_taps_blocked``).
* Functions called once per row or row segment (not inlined) are compiled without numba's
  reference counting (``njit(_nrt=False)``, ``row_njit`` below): at each such call numba
  otherwise increments and decrements the reference count of every array argument, atomic
  operations on counters that both threads share, which made the cache line holding them travel
  between the cores. Interleaved A/B, 2 threads: D1 0.83-0.84, D2 0.84-0.86, D3 0.95. Later
  the depthwise dx row writers, which had kept it (``_stream_row``, inlined into the kernel,
  whose inlined store helpers counted references at every line, and ``_store_dx_row``): D7 0.92.
  Overloads called per row take ``jit_options={"_nrt": False}``: resample's ``_columns_first``
  (a ``*args`` wrapper passing 14 arrays), L3 0.92-0.95; depthwise ``_pair_sums_run``, D4
  0.97-0.98. Such functions cannot allocate (numba refuses to compile one that does); their
  callers keep the arrays alive.
"""

from numba import njit

row_njit = njit(_nrt=False)
