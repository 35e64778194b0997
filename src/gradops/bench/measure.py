"""Timing, the correctness check, and the machine figures behind the lower bound.

Everything here runs inside a worker process (:mod:`gradops.bench.worker`).
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any, Callable

import numpy as np

from .workloads import NotAvailable, Variant

WARMUP_CALLS = 2
# Short calls are repeated until these many seconds have passed (a CPU reaches its steady clock,
# caches and thread pools settle only after a few milliseconds of work): at least WARMUP_CALLS
# warm-up calls and ``reps`` timed calls, and at least this long for each, like timeit's autorange.
WARMUP_S = 0.2
TIMED_S = 0.3


def error_reason(exc: BaseException) -> str:
    """One line naming an exception: TF's messages span lines and start with a function tag."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if text.startswith("{{") and "}}" in text:
        text = text.split("}}", 1)[1].strip()
    text = text.removesuffix(" name:")  # TF's eager errors end with an empty op name
    text = text if len(text) <= 200 else text[:197] + "..."
    return text if isinstance(exc, NotAvailable) else f"{type(exc).__name__}: {text}"


def compare(result: np.ndarray, reference: np.ndarray, tolerance: float) -> dict[str, Any]:
    """``max|result - reference| / max|reference|`` against ``tolerance``, computed in float64 one
    batch item at a time (the reference is memory-mapped; full-size float64 copies would not fit
    comfortably next to the peer's own tensors)."""
    check: dict[str, Any] = {"tolerance": tolerance}
    if result.shape != reference.shape:
        return check | {"passed": False, "reason": f"shape {list(result.shape)}, expected "
                                                   f"{list(reference.shape)}"}
    max_reference = max((float(np.max(np.abs(np.asarray(e, dtype=np.float64)), initial=0.0))
                         for e in reference), default=0.0)
    allowed = tolerance * max_reference
    max_error = 0.0
    finite = True
    mismatches = 0
    for item, expected in zip(result, reference):
        item = np.asarray(item, dtype=np.float64)
        finite = finite and bool(np.isfinite(item).all())
        error = np.abs(item - np.asarray(expected, dtype=np.float64))
        max_error = max(max_error, float(np.max(error, initial=0.0)))
        mismatches += int(np.count_nonzero(~(error <= allowed)))
    relative = max_error / max_reference if max_reference > 0 else max_error
    passed = finite and relative <= tolerance
    check |= {"passed": passed, "max_abs_error": max_error, "max_abs_reference": max_reference,
              "relative_error": relative, "mismatched_elements": mismatches, "elements": int(result.size)}
    if not finite:
        check["reason"] = "non-finite values in the result"
    return check


def time_variant(variant: Variant, *, reps: int, reference: np.ndarray | None, tolerance: float,
                 framework_reference: Callable[[], np.ndarray | None] | None = None,
                 settle: bool = True) -> dict[str, Any]:
    """Prepare, call once cold (timed separately; it may compile or load caches), check that
    result, warm up, then time at least ``reps`` calls (with ``settle``, more for short calls: see
    ``TIMED_S``). Each fresh result is dropped before the next call.

    A peer's result that fails the check against the DirectML reference is checked again against
    ``framework_reference()`` (the framework's own documented convention, where it differs).
    """
    record: dict[str, Any] = {"layout": variant.layout, "output": variant.output}
    try:
        call, to_canonical = variant.prepare()
        start = time.perf_counter()
        result = call()
        record["cold_s"] = time.perf_counter() - start
        # Checked before any further call, so an out= buffer (prefilled with NaN) shows what the
        # first call wrote.
        if reference is not None:
            canonical = np.asarray(to_canonical(result))
            record["check"] = check = compare(canonical, reference, tolerance)
            alternative = framework_reference() if framework_reference and not check["passed"] else None
            if alternative is not None:
                check["framework_convention"] = compare(canonical, alternative, tolerance)
            del canonical
        del result
        gc.collect()
        warm_until = time.perf_counter() + (WARMUP_S if settle else 0.0)
        calls = 0
        while calls < WARMUP_CALLS or time.perf_counter() < warm_until:
            call()
            calls += 1
        gc.disable()
        try:
            times = []
            timed_until = time.perf_counter() + (TIMED_S if settle else 0.0)
            while len(times) < reps or time.perf_counter() < timed_until:
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
        finally:
            gc.enable()
    except Exception as exc:  # noqa: BLE001 - any peer failure becomes an "n/a" cell with its reason
        return record | {"status": "n/a", "reason": error_reason(exc)}
    return record | {"status": "ok", "median_s": statistics.median(times), "min_s": min(times),
                     "times_s": times}


def memory_bandwidth(quick: bool) -> dict[str, Any]:
    """Best of many 2-thread copy and triad passes over arrays far larger than the caches, in
    bytes moved (read + written, as :meth:`Workload.bytes_moved` counts them) per second."""
    from . import _stream

    # float32, the suite's main dtype (float64 streams measured slower here); 64 MiB (quick) or
    # 128 MiB per array, beyond the last-level cache.
    n = 1 << (24 if quick else 25)
    a, b, c = (np.full(n, value, dtype=np.float32) for value in (0.0, 1.0, 2.0))
    rates: dict[str, float] = {}
    for name, kernel, args, moved in (("copy", _stream.copy, (b, a), 2), ("triad", _stream.triad, (a, b, c), 3)):
        kernel(*args)  # compile or load, and touch every page
        # Many short passes: on a shared machine the best one is the least disturbed.
        best = min(_timed(kernel, *args) for _ in range(3 if quick else 20))
        rates[name] = moved * a.nbytes / best
    return {"bytes_per_s": max(rates.values()), "copy_bytes_per_s": rates["copy"],
            "triad_bytes_per_s": rates["triad"], "array_mib": a.nbytes / 2**20,
            "threads": _stream.thread_count()}


def matmul_rate(quick: bool) -> dict[str, Any]:
    """Best float32 ``numpy.matmul`` rate (BLAS limited to 2 threads by the worker's environment)."""
    n = 512 if quick else 2048
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    a @ b
    best = min(_timed(np.matmul, a, b) for _ in range(3 if quick else 10))
    return {"flops_per_s": 2 * n**3 / best, "n": n}


def _timed(function, *args) -> float:
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start
