"""Kernels that report how ``pool`` shared their chunks (for the pool's and the OpenMP team's tests)."""

from __future__ import annotations

from numba import njit

from gradops._fast.pool import _atomic_load, begin, claim, end, finish


@njit(nogil=True)
def who_claims(counters, epoch, role, chunks, claimed_by, patience):
    """Records the role of the thread that claims each chunk; the thread that claims chunk 0
    waits (at most ``patience`` rounds) for another thread to claim chunk 1."""
    seen = begin(counters, epoch, role)
    while True:
        chunk = claim(counters)
        if chunk >= chunks:
            end(epoch, role, seen)
            return
        claimed_by[chunk] = role
        if chunk == 0:
            for _ in range(patience):
                if _atomic_load(counters, 0) > 1:
                    break
        finish(counters)
