"""STREAM-style kernels measuring memory bandwidth on the worker's threads (numba, like gradops'
fast backend, so both see the same threading layer)."""

from __future__ import annotations

import numba
from numba import njit, prange


@njit(parallel=True, cache=True, nogil=True)
def copy(source, target):
    for i in prange(target.size):
        target[i] = source[i]


@njit(parallel=True, cache=True, nogil=True)
def triad(target, b, c):
    for i in prange(target.size):
        target[i] = b[i] + c[i] + c[i]  # stays in float32


def thread_count() -> int:
    return numba.get_num_threads()
