"""The worked examples of SPEC section 7, runnable: ``gradops examples`` and the test suite.

Each family module here defines ``EXAMPLES``. An :class:`Example` runs gradops on the inputs
the SPEC states and returns :class:`Check` objects pairing each result with the SPEC's expected
numbers, which are typed in from the SPEC, never computed by gradops.
"""

from __future__ import annotations

import importlib
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
