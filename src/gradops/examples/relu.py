"""E11 (RELU_GRAD special values, SPEC 4.2) and E17 (RELU forward, SPEC 4.3)."""

from __future__ import annotations

import numpy as np

from ..relu import relu, relu_grad
from . import Check, Example

nan, inf = np.nan, np.inf
E11_X = [1, 2, -1, 0, -0.0, nan, 3, -2, inf, -inf]
E11_DY = [inf, nan, inf, nan, -5, 7, -0.0, -3, 2, 2]
E11_DX = [inf, nan, 0, 0, 0, 0, -0.0, 0, 2, 0]  # only the 7th element has its sign bit set
E17_X = [-2, -0.0, 0, 3, nan, inf, -inf]
E17_Y = [0, 0, 0, 3, 0, inf, 0]  # all zeros are +0


def _e11(backend: str | None) -> list[Check]:
    return [Check(f"RELU_GRAD {dtype}", relu_grad(np.array(E11_X, dtype), np.array(E11_DY, dtype),
                                                  backend=backend), np.array(E11_DX, dtype))
            for dtype in ("float32", "float16")]


def _e17(backend: str | None) -> list[Check]:
    return [Check(f"RELU {dtype}", relu(np.array(E17_X, dtype), backend=backend), np.array(E17_Y, dtype))
            for dtype in ("float32", "float16")]


EXAMPLES = (
    Example("E11", "RELU_GRAD special values: X > 0 ? dY : +0 (SPEC 4.2)",
            {"X": E11_X, "dY": E11_DY}, _e11),
    Example("E17", "RELU forward special values: X > 0 ? X : +0 (SPEC 4.3)", {"X": E17_X}, _e17),
)
