"""Backend selection: the NumPy ``reference`` and the compiled ``fast`` backend.

``backend=None`` reads ``GRADOPS_BACKEND`` (``auto`` | ``fast`` | ``reference``), and ``auto``
picks ``fast`` when numba is installed. Nothing here imports numba: the fast kernels load
on their first call, so ``import gradops`` stays cheap.
"""

from __future__ import annotations

import importlib.util
import os
from functools import cache

from .errors import DescriptorError

BACKENDS = ("fast", "reference")
ENV_VAR = "GRADOPS_BACKEND"


@cache
def fast_available() -> bool:
    return importlib.util.find_spec("numba") is not None


def resolve_backend(backend: str | None) -> str:
    """Return ``"fast"`` or ``"reference"`` for a user's ``backend=`` argument."""
    field = "backend"
    if backend is None:
        backend, field = os.environ.get(ENV_VAR, "auto"), ENV_VAR
    if backend == "auto":
        return "fast" if fast_available() else "reference"
    if backend not in BACKENDS:
        raise DescriptorError.expected(field, "'auto', 'fast' or 'reference'", backend)
    if backend == "fast" and not fast_available():
        raise DescriptorError(field, "the fast backend needs numba, which is not installed "
                              "(pip install numba), or use backend='reference'")
    return backend
