"""The compiled backend: numba kernels, multi-threaded, cached on disk.

Only imported on the first fast call (numba's import and the kernel cache load are not paid by
``import gradops``). Every kernel is a gather: each output element is written by exactly one
thread in a fixed order, so results are bit-identical whatever the thread count.
"""

import os

# OpenMP workers that spin while they wait hold a core that another process may need: on a
# busy 2-core machine a 2.7 ms kernel then takes 8 ms, one scheduler time slice (measured on
# depthwise D3). Sleeping waiters cost microseconds per call. This only sets a default, before
# numba's OpenMP layer starts; an OMP_WAIT_POLICY set by the user wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
