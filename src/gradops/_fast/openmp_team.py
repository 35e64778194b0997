"""Lane tasks served by a foreign OpenMP team: torch's intra-op threads, inside a torch program.

torch's OpenMP threads spin for a while after each of its parallel operators, waiting for the
next one. On a machine with as many cores as threads, a gradops call right after a torch
operator then finds the cores taken: its own helper threads (``pool``) are not scheduled, and
the calling thread computes alone (docs/performance.md, "Decisions"). The spinning threads
themselves are idle, ready for work: so a lane task (``pool.share_lane``) is handed to them.
``GOMP_parallel_start`` wakes the calling thread's team (the one torch's operators use) with a
native function (``_member``: ``pool.serve_awaited``) that waits for the task the caller is about to
publish and serves it as a lingering helper does (the lane entry, chunks claimed from the back);
``GOMP_parallel_end`` waits for it. No Python runs on those threads, so neither the GIL nor a
Python thread state is involved.

``pool.share``'s kernels, whose arguments are Python objects, run so through a native entry
each (``team_share``), once it is compiled; until then with gradops' own helpers.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Callable

import numpy as np
from numba import carray, cfunc, types

from . import pool, team_share


@functools.cache
def _member() -> int:
    """The address of the function a team thread runs: ``void(void *lane)``."""

    @cfunc(types.void(types.voidptr), cache=True, nogil=True)
    def member(lane_address):
        pool.serve_awaited(carray(lane_address, (pool.LANE_WORDS,), np.int64))

    return member.address


class OpenMPTeam:
    """``pool``'s lane team on a GNU OpenMP runtime (``libgomp``), loaded as ``library``."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._start, self._end = library.GOMP_parallel_start, library.GOMP_parallel_end
        self._start.argtypes, self._start.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint], None
        self._end.argtypes, self._end.restype = [], None
        self._lane_words = pool.lane_words()
        self._lane = self._lane_words.ctypes.data

    def start(self, threads: int) -> None:
        self._start(_member(), self._lane, threads)

    def start_share(self, kernel: Callable, counters: np.ndarray, chunks: int, args: tuple,
                    threads: int) -> np.ndarray | None:
        """Start ``threads - 1`` team threads on ``pool.share``'s ``kernel`` (``team_share``):
        they claim chunks on ``counters`` until :meth:`end`. Returns the packed words, which the
        team reads until then; None, and nothing started, while the kernel's entry is not ready."""
        values = (counters, self._lane_words, chunks, *args)
        words = np.empty(team_share.WORDS, np.int64)
        address = team_share.packed(kernel, words, values)
        entry = address and team_share.entry_for(kernel, int(words[0]), values)
        if not entry:
            return None
        self._start(entry, address, threads)
        return words

    def end(self) -> None:
        self._end()


def loaded_libgomp(prefer: str) -> str | None:
    """The path of a GNU OpenMP runtime this process has loaded (``/proc/self/maps``), one under
    the directory ``prefer`` if there is one; None if none is loaded."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "libgomp" in line and "/" in line})
    except OSError:
        return None
    preferred = [path for path in paths if path.startswith(prefer)]
    return (preferred or paths or [None])[0]


def join_torch_team(torch_module) -> bool:
    """Serve lane tasks with torch's OpenMP team, when torch's intra-op threads are OpenMP's
    (GNU libgomp) and ``GRADOPS_OPENMP_TEAM`` is not ``0``. Returns whether it does."""
    if os.environ.get("GRADOPS_OPENMP_TEAM", "1") == "0":
        return False
    if "ATen parallel backend: OpenMP" not in torch_module.__config__.parallel_info():
        return False
    path = loaded_libgomp(os.path.dirname(torch_module.__file__))
    if path is None:
        return False
    try:
        team = OpenMPTeam(ctypes.CDLL(path))
    except (OSError, AttributeError):
        return False
    pool.set_lane_team(team)
    return True
