"""The compiled backend: numba kernels, multi-threaded, cached on disk.

Only imported on the first fast call (numba's import and the kernel cache load are not paid by
``import gradops``). Every kernel is a gather: each output element is written by exactly one
thread in a fixed order, so results are bit-identical whatever the thread count. The threads
are the calling thread and ``numba.get_num_threads() - 1`` helpers (``pool.py``; set with
``NUMBA_NUM_THREADS`` or ``numba.set_num_threads``); no kernel uses an OpenMP parallel region.
"""
