"""Backend selection: the NumPy ``reference`` and the compiled ``fast`` backend.

``backend=None`` reads ``GRADOPS_BACKEND`` (``auto`` | ``fast`` | ``reference``), and ``auto``
picks ``fast`` when numba is installed. Nothing here imports numba: the fast kernels load
on their first call, so ``import gradops`` stays cheap.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from functools import cache
from types import ModuleType
from typing import Callable

from .errors import DescriptorError

BACKENDS = ("fast", "reference")
ENV_VAR = "GRADOPS_BACKEND"


# os.environ keeps its entries in a dict of encoded keys and values (CPython's ``os._Environ``),
# which its setters (monkeypatch.setenv included) update. Reading that dict takes 14 ns against
# 540 ns for ``os.environ.get``, which decodes and encodes on every call: a tenth of a small
# call's time. Elsewhere (another Python), ``os.environ.get``.
_ENVIRON = getattr(os.environ, "_data", None)


def environment_reader(name: str, default: str) -> Callable[[], str]:
    """A function returning the environment variable ``name`` as ``os.environ`` has it at each
    call, or ``default``: cheap enough for every call of an operator."""
    if _ENVIRON is None or not hasattr(os.environ, "encodekey"):
        return lambda: os.environ.get(name, default)
    key, environ, decode = os.environ.encodekey(name), _ENVIRON, os.environ.decodevalue

    def read() -> str:
        value = environ.get(key)
        return default if value is None else decode(value)
    return read


environment_backend = environment_reader(ENV_VAR, "auto")
environment_backend.__doc__ = """``GRADOPS_BACKEND`` as ``os.environ`` has it now, or ``"auto"``."""


@cache
def fast_module(name: str) -> ModuleType:
    """``gradops._fast.<name>``, the fast backend's module of one family, imported on its first
    call (so that ``import gradops`` does not import numba) and then held: an import statement per
    call costs microseconds, as much as a small call's kernel."""
    return importlib.import_module(f"{__package__}._fast.{name}")


@cache
def fast_available() -> bool:
    return importlib.util.find_spec("numba") is not None


def resolve_backend(backend: str | None) -> str:
    """Return ``"fast"`` or ``"reference"`` for a user's ``backend=`` argument."""
    field = "backend"
    if backend is None:
        backend, field = environment_backend(), ENV_VAR
    if backend == "auto":
        return "fast" if fast_available() else "reference"
    if backend not in BACKENDS:
        raise DescriptorError.expected(field, "'auto', 'fast' or 'reference'", backend)
    if backend == "fast" and not fast_available():
        raise DescriptorError(field, "the fast backend needs numba, which is not installed "
                              "(pip install numba), or use backend='reference'")
    return backend
