"""The worked examples of SPEC section 7, runnable: ``gradops examples`` and the test suite.

Each family module here defines ``EXAMPLES``. An :class:`Example` runs gradops on the inputs
the SPEC states and returns :class:`Check` objects pairing each result with the SPEC's expected
numbers, which are typed in from the SPEC, never computed by gradops.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

EXAMPLE_MODULES = ("gradops.examples.relu", "gradops.examples.resample",
                   "gradops.examples.depthwise")


@dataclass(frozen=True)
class Check:
    """One result against the SPEC. ``rtol=0`` means exact: equal values, NaN where NaN is
    expected, and the same sign on every zero."""

    label: str
    result: np.ndarray
    expected: np.ndarray
    rtol: float = 0.0

    @property
    def passed(self) -> bool:
        result, expected = np.asarray(self.result), np.asarray(self.expected)
        if result.shape != expected.shape:
            return False
        if self.rtol == 0:
            same = np.array_equal(result, expected.astype(result.dtype), equal_nan=True)
            if result.dtype.kind == "f":
                same = same and np.array_equal(np.signbit(result), np.signbit(expected))
            return bool(same)
        return bool(np.allclose(result.astype(np.float64), expected.astype(np.float64),
                                rtol=self.rtol, atol=0.0, equal_nan=True))


@dataclass(frozen=True)
class Example:
    """A SPEC section 7 example: what goes in (for printing) and a function that runs it."""

    id: str
    title: str
    inputs: dict[str, Any]
    run: Callable[[str | None], list[Check]] = field(repr=False)


def all_examples() -> list[Example]:
    examples = [ex for module in EXAMPLE_MODULES for ex in importlib.import_module(module).EXAMPLES]
    return sorted(examples, key=lambda ex: int(ex.id[1:]))


def run_examples(examples: list[Example], backend: str | None,
                 initializer: Callable[[], None] | None = None) -> dict[str, list[Check]]:
    """Each example's checks, by id. The operator families run side by side: the first here, the
    others in spawned processes (``initializer`` run first in each), one per further core this
    process may use. From an empty kernel cache a run is mostly compiling (README "First calls")
    and each family compiles its own kernels, so the wall time is about the slowest family's
    instead of the sum; with the kernels cached, the workers start while this process works."""
    chosen = {example.id for example in examples}
    families = [ids for ids in ([example.id for example in importlib.import_module(module).EXAMPLES
                                 if example.id in chosen] for module in reversed(EXAMPLE_MODULES)) if ids]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = min(cores, len(families)) - 1
    if workers < 1:
        return {example.id: example.run(backend) for example in examples}
    results: dict[str, list[Check]] = {}
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=initializer) as pool:
            others = [pool.submit(_run_ids, ids, backend) for ids in families[1:]]
            results.update(_run_ids(families[0], backend))
            for family in others:
                results.update(family.result())
    except (BrokenProcessPool, OSError):
        pass  # a worker could not start, or died: what is missing runs here
    missing = [example_id for ids in families for example_id in ids if example_id not in results]
    return results | _run_ids(missing, backend) if missing else results


def _run_ids(ids: list[str], backend: str | None) -> dict[str, list[Check]]:
    """The checks of the examples ``ids`` (here, or in a worker process of ``run_examples``)."""
    return {example.id: example.run(backend) for example in all_examples() if example.id in ids}
