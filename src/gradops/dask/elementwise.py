"""``relu`` and ``relu_grad`` on dask arrays: element-wise selects (SPEC 4.2, 4.3), one in-memory
call per block, so every chunking gives the in-memory call's bits."""

from __future__ import annotations

from functools import partial
from typing import Any

import dask.array as da
import numpy as np
from dask.array.core import unify_chunks

from ..relu import _RANKS, RELU_DTYPES
from ..relu import relu as numpy_relu
from ..relu import relu_grad as numpy_relu_grad
from .._arrays import check_input, check_same
from .._backend import resolve_backend
from ._graph import as_dask, builds_graph, _on_one_thread, shape_proxy


@builds_graph
def relu(x: Any, *, backend: str | None = None) -> da.Array:
    """:func:`gradops.relu` blockwise: ``x > 0 ? x : +0``."""
    x = as_dask("x", x)
    check_input("x", shape_proxy(x), dtypes=RELU_DTYPES, ranks=_RANKS)
    backend = resolve_backend(backend)
    return da.map_blocks(partial(_on_one_thread, _relu_block), x, backend=backend, dtype=x.dtype,
                         meta=np.empty((0,) * x.ndim, x.dtype))


@builds_graph
def relu_grad(x: Any, dy: Any, *, backend: str | None = None) -> da.Array:
    """:func:`gradops.relu_grad` blockwise: ``x > 0 ? dy : +0``; the chunks of ``x`` and ``dy``
    are unified (each block of the result has the chunks both share)."""
    x, dy = as_dask("x", x), as_dask("dy", dy)
    x_proxy = check_input("x", shape_proxy(x), dtypes=RELU_DTYPES, ranks=_RANKS)
    dy_proxy = check_input("dy", shape_proxy(dy), dtypes=RELU_DTYPES, ranks=_RANKS)
    check_same("dy", dy_proxy, "x", x_proxy)
    backend = resolve_backend(backend)
    axes = tuple(range(x.ndim))
    _, (x, dy) = unify_chunks(x, axes, dy, axes)  # blocks of both on the common refinement of their chunks
    return da.map_blocks(partial(_on_one_thread, _relu_grad_block), x, dy, backend=backend, dtype=x.dtype,
                         meta=np.empty((0,) * x.ndim, x.dtype))


def _relu_block(x: np.ndarray, *, backend: str) -> np.ndarray:
    return numpy_relu(x, backend=backend)


def _relu_grad_block(x: np.ndarray, dy: np.ndarray, *, backend: str) -> np.ndarray:
    return numpy_relu_grad(x, dy, backend=backend)
