"""What every fuzz case checks (issue 27): a call either returns or raises a ``GradopsError``,
within a time limit; a failed call leaves ``out=`` untouched; no call modifies its inputs."""

from __future__ import annotations

import atexit
import collections
import faulthandler
import json
import os
import sys
import time
from typing import Any, Callable

import numpy as np

import gradops

# A case that runs longer than this is a hang: faulthandler prints every thread's stack and ends
# the process, since a nogil kernel cannot be interrupted from Python. A fast-backend call may
# include compiling a kernel (minutes from an empty cache), hence the generous default.
CASE_SECONDS = float(os.environ.get("GRADOPS_FUZZ_CASE_SECONDS", "600"))

# A campaign (GRADOPS_FUZZ=long) records every exception other than GradopsError and goes on, and
# conftest fails the session at its end if there was any; the CI run fails at the first.
CAMPAIGN = os.environ.get("GRADOPS_FUZZ") == "long"
escapes: list[str] = []
counts: collections.Counter = collections.Counter()  # target -> generated calls
outcomes: collections.Counter = collections.Counter()  # (target, "ok" | error class) -> calls
slowest: dict[str, float] = {}  # target -> seconds of its slowest call


def _write_counts() -> None:
    """Append this process's totals so far (a report keeps each process's last line)."""
    path = os.environ.get("GRADOPS_FUZZ_COUNTS")
    if path and counts:
        with open(path, "a") as file:
            file.write(json.dumps({"pid": os.getpid(), "counts": dict(counts), "slowest": slowest, "escapes": escapes,
                                   "outcomes": {f"{t}|{o}": n for (t, o), n in outcomes.items()}}) + "\n")


atexit.register(_write_counts)


def _memory(array: np.ndarray) -> np.ndarray:
    """The array that owns ``array``'s memory (a broadcast view's few real bytes, not its size)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _snapshot(value: Any, skip: frozenset = frozenset()) -> Any:
    """A deep copy of the memory of every array / buffer reachable in ``value`` (lists, tuples,
    dicts), except the objects whose ids are in ``skip`` (outputs, found anywhere)."""
    if id(value) in skip:
        return None
    if isinstance(value, np.ndarray):
        return _memory(value).copy(order="K"), value.shape, value.strides, value.dtype
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, tuple)):
        return [_snapshot(v, skip) for v in value]
    if isinstance(value, dict):
        return {k: _snapshot(v, skip) for k, v in value.items()}
    return None


def _same(value: Any, snap: Any, skip: frozenset = frozenset()) -> bool:
    if id(value) in skip:
        return True
    if isinstance(value, np.ndarray):
        copy = snap[0]
        memory = _memory(value)
        return (value.shape == snap[1] and value.dtype == snap[3] and memory.shape == copy.shape
                and np.array_equal(_bits(memory), _bits(copy)))
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value) == snap
    if isinstance(value, (list, tuple)):
        return all(_same(v, s, skip) for v, s in zip(value, snap))
    if isinstance(value, dict):
        return all(_same(value[k], snap[k], skip) for k in value)
    return True


def _bits(array: np.ndarray) -> np.ndarray:
    """Elements as unsigned integers of their size (NaN payloads and -0 compare exactly)."""
    if array.dtype.kind in "biu" or array.dtype.itemsize not in (1, 2, 4, 8) or array.dtype.hasobject:
        return np.asarray(array)
    return np.ascontiguousarray(array).view(f"u{array.dtype.itemsize}")


def call(target: str, function: Callable[..., Any], *args: Any, outputs: tuple = (), may_write: tuple = (),
         **kwargs: Any) -> tuple[Any, BaseException | None]:
    """Run ``function(*args, **kwargs)`` as one fuzz case of ``target`` and check the contract.

    ``outputs``: buffers the call may write when it succeeds (``out=`` arrays, output buffers),
    compared byte for byte with their state before when it fails. ``may_write``: inputs that are
    legitimately the output too (relu in place). Returns (result, GradopsError or None).
    """
    counts[target] += 1
    if sum(counts.values()) % 500 == 0:
        _write_counts()  # a campaign that is stopped keeps its counts
    skip = frozenset(id(o) for o in (*outputs, *may_write))
    watched = [*args, *kwargs.values()]
    before = _snapshot(watched, skip)
    outputs_before = _snapshot(list(outputs))
    faulthandler.dump_traceback_later(CASE_SECONDS, exit=True, file=sys.stderr)
    start = time.perf_counter()
    try:
        result, error = function(*args, **kwargs), None
    except gradops.GradopsError as exc:
        result, error = None, exc
    except BaseException as exc:
        outcomes[(target, type(exc).__name__)] += 1
        if CAMPAIGN and isinstance(exc, Exception):
            escapes.append(f"{target}: {type(exc).__name__}: {exc!s:.300} <- {args!r:.300} {kwargs!r:.300}")
            return None, exc
        raise AssertionError(f"{target}: {type(exc).__name__} escaped instead of a GradopsError: {exc!r:.400}") \
            from exc
    finally:
        faulthandler.cancel_dump_traceback_later()
    slowest[target] = max(slowest.get(target, 0.0), time.perf_counter() - start)
    outcomes[(target, "ok" if error is None else type(error).__name__)] += 1
    if error is not None:
        assert str(error).split(":")[0], error
        assert _same(list(outputs), outputs_before), f"{target}: a failed call wrote its output ({error})"
    assert _same(watched, before, skip), f"{target}: the call modified an input"
    return result, error
