"""gradops on its default backend (``fast`` when numba is installed), with fresh and ``out=`` outputs.

Resample runs on NCHW arrays and on channels_last views (logical NCHW, NHWC memory); depthwise
runs in its workload's ``data_format``. The first variant is a fresh-output call in the
canonical layout, so its cold call is the first call a user makes in a new process.
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any

import numpy as np

from ..workloads import (NCHW_TO_NHWC, NHWC_TO_NCHW, DepthwiseWorkload, Output, ResampleGradWorkload, Variant,
                     Workload)


def setup() -> dict[str, Any]:
    # numba is not imported here: loading it and the kernel cache belongs to the cold call.
    import gradops
    from gradops._backend import resolve_backend

    return {"version": gradops.__version__, "backend": resolve_backend(None),
            "threads": os.environ.get("NUMBA_NUM_THREADS"),
            # The code generation target (bench --isa): unset means the host CPU.
            "numba_cpu": os.environ.get("NUMBA_CPU_NAME") or "host"}


def variants(workload: Workload, inputs: dict[str, np.ndarray]) -> list[Variant]:
    if isinstance(workload, ResampleGradWorkload):
        layouts = ["NCHW", "channels_last"]
    elif isinstance(workload, DepthwiseWorkload):
        layouts = [workload.data_format]
    else:
        layouts = ["contiguous"]
    return [Variant(layout, output, partial(_prepare, workload, inputs, layout, output))
            for layout in layouts for output in ("fresh", "out")]


def _channels_last(array: np.ndarray) -> np.ndarray:
    """The same logical NCHW array, stored NHWC."""
    return np.ascontiguousarray(array.transpose(NCHW_TO_NHWC)).transpose(NHWC_TO_NCHW)


def _nan_buffer(shape: tuple[int, ...], dtype: np.dtype, channels_last: bool) -> np.ndarray:
    """An ``out=`` buffer of NaN starting on a 64-byte line, as PyTorch's allocator gives its
    ``out=`` tensors (NumPy's large buffers start 16 bytes past one)."""
    stored = tuple(shape[d] for d in NCHW_TO_NHWC) if channels_last else tuple(shape)
    nbytes = int(np.prod(stored)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    buffer = raw[start:start + nbytes].view(dtype).reshape(stored)
    buffer[...] = np.nan
    return buffer.transpose(NHWC_TO_NCHW) if channels_last else buffer


def _prepare(workload: Workload, inputs: dict[str, np.ndarray], layout: str, output: Output):
    arrays = {name: _channels_last(a) if layout == "channels_last" else a for name, a in inputs.items()}
    if output == "fresh":
        return workload.gradops_call(arrays), np.asarray
    out = _nan_buffer(workload.result_shape(), workload.dtype, layout == "channels_last")
    return workload.gradops_call(arrays, out=out), np.asarray
