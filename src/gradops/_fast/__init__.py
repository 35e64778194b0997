"""The compiled backend: numba kernels, multi-threaded, cached on disk.

Only imported on the first fast call (numba's import and the kernel cache load are not paid by
``import gradops``). Every kernel is a gather: each output element is written by exactly one
thread in a fixed order, so results are bit-identical whatever the thread count.
"""
