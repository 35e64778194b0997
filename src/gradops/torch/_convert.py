"""Zero-copy views between torch tensors and the NumPy arrays gradops' operators take.

``Tensor.numpy()`` shares the tensor's memory with any strides, so an NCHW or channels_last
tensor, or a non-contiguous view of one, reaches gradops as a NumPy array over the same bytes
(gradops reads inputs through their strides). bfloat16 has no NumPy type: its bits are viewed
as int16 in torch and then as ``ml_dtypes.bfloat16`` in NumPy, again without a copy.
``torch.from_dlpack`` is never used: on torch 2.13 it aborts the process on some non-contiguous
views. torch has no negative strides, so none can arrive from a tensor.

Outputs are allocated by torch (its allocator, its memory format) and handed to gradops as
``out=`` views, so the fake kernels, which use the same allocation rule, give the real strides.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import ml_dtypes
import numpy as np
import torch
from torch._prims_common import suggest_memory_format

from .._backend import resolve_backend
from .._fast.strided import coalesce
from ..errors import DataTypeError, ShapeError

__all__ = ["as_numpy", "flat_arrays_if_dense", "empty_like_format", "empty_in_format", "check_tensor",
           "keep_openmp_to_torch", "use_torch_threads"]


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """The NumPy view of a CPU tensor's memory (no copy), bfloat16 as ``ml_dtypes.bfloat16``."""
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def flat_arrays_if_dense(*tensors: torch.Tensor) -> tuple[np.ndarray, ...]:
    """NumPy views of tensors (``as_numpy``): 1-D views in memory order when they share one dense
    layout (NCHW, channels_last or any permutation; ``strided.coalesce`` merges its axes into
    one), else views with the tensors' own strides. An element-wise op then walks memory in order
    whatever the memory format (gradops' kernels take a permuted array's axes as given). Done on
    the NumPy views: torch's ``permute`` and ``reshape`` cost several microseconds each per call,
    NumPy's a fraction of one."""
    arrays = tuple(as_numpy(t) for t in tensors)
    first = arrays[0]
    if first.ndim < 2 or any(a.shape != first.shape or a.strides != first.strides for a in arrays[1:]):
        return arrays
    if first.flags.c_contiguous:
        return tuple(a.reshape(-1) for a in arrays)
    if coalesce(first.shape, first.strides) != ((first.size,), [(first.itemsize,)]):
        return arrays
    # dense: its axes from the largest stride to the smallest are C order, so the reshape is a view
    order = sorted(range(first.ndim), key=lambda d: first.strides[d], reverse=True)
    return tuple(a.transpose(order).reshape(-1) for a in arrays)


def empty_like_format(like: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """A new tensor of ``shape`` with ``like``'s dtype and memory format (channels_last when
    ``like``'s strides are NHWC-ordered, as torch's own convolution and upsampling outputs)."""
    return torch.empty(tuple(shape), dtype=like.dtype, device=like.device,
                       memory_format=suggest_memory_format(like))


def empty_in_format(like: torch.Tensor, shape: Sequence[int], channels_last: bool) -> torch.Tensor:
    """A new tensor of ``shape`` with ``like``'s dtype, channels_last or contiguous."""
    return torch.empty(tuple(shape), dtype=like.dtype, device=like.device,
                       memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def check_tensor(name: str, value: object, *, dtypes: Sequence[torch.dtype], ranks: Sequence[int]) -> torch.Tensor:
    """A strided CPU tensor of a supported dtype and rank; a :class:`GradopsError` otherwise."""
    if not isinstance(value, torch.Tensor):
        raise DataTypeError.expected(name, "a torch.Tensor", value)
    if value.device.type != "cpu":
        raise DataTypeError.expected(f"{name}.device", "a CPU tensor (gradops runs on the CPU)", str(value.device))
    if value.layout != torch.strided:
        raise DataTypeError.expected(f"{name}.layout", "torch.strided (a dense tensor)", str(value.layout))
    if value.dtype not in dtypes:
        names = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise DataTypeError.expected(f"{name}.dtype", f"one of {names}", str(value.dtype).removeprefix("torch."))
    if value.dim() not in ranks:
        raise ShapeError.expected(f"{name}.dim()", " or ".join(map(str, ranks)), value.dim())
    return value


def keep_openmp_to_torch() -> None:
    """Make numba start its ``workqueue`` threading layer rather than OpenMP, unless the user chose
    one (``NUMBA_THREADING_LAYER``). torch's wheel ships ``libgomp.so.1``, and numba's OpenMP layer,
    once started (``numba.get_num_threads()`` starts it), shares that runtime with torch and
    resizes its thread team: measured here, a channels_last BatchNorm2d on 8x16x64x64 with
    ``torch.set_num_threads(1)`` went from 1.6 ms to 120 ms, and 1.6 ms with ``workqueue``.
    gradops' own threads (``gradops._fast.pool``) need no numba threading layer at all."""
    import os
    import warnings

    import numba

    from .._fast.numba_internals import threading_layer_started

    if os.environ.get("NUMBA_THREADING_LAYER"):
        return
    if not threading_layer_started():
        numba.config.THREADING_LAYER = "workqueue"
    elif numba.threading_layer() == "omp":
        warnings.warn("numba's OpenMP threading layer started before gradops.torch was imported; it shares "
                      "torch's OpenMP runtime and can slow torch's own operators many times over. Import "
                      "gradops.torch first or set NUMBA_THREADING_LAYER=workqueue (README 'PyTorch').",
                      RuntimeWarning, stacklevel=3)


def use_torch_threads() -> str:
    """Resolve the backend and, for the fast one, give this thread's gradops calls torch's
    intra-op thread count (numba's per-thread setting, which ``gradops._fast.pool`` reads), so
    gradops and torch take turns on the same cores instead of oversubscribing them. Called by
    every operator: numba's functions are looked up once (importing them inside took most of
    its 5 us, 25 us inside a training step, where the interpreter's data is out of the caches)."""
    backend = resolve_backend(None)
    if backend == "fast":
        thread_count, set_num_threads, limit = _numba_threads()
        wanted = max(1, min(torch.get_num_threads(), limit))
        if thread_count() != wanted:
            set_num_threads(wanted)
    return backend


@functools.cache
def _numba_threads() -> tuple[Callable[[], int], Callable[[int], None], int]:
    """This thread's numba thread count (``gradops._fast.pool.thread_count``), its setter and
    ``NUMBA_NUM_THREADS``, imported on the first fast call (after ``keep_openmp_to_torch`` chose
    the threading layer). Also hands gradops' parallel work (lane tasks, and ``pool.share``'s
    kernels once their entries are made) to torch's OpenMP threads (``gradops._fast.openmp_team``),
    which spin between torch's operators, where gradops' own helper threads would find the cores
    taken."""
    import numba

    from .._fast.openmp_team import join_torch_team
    from .._fast.pool import thread_count

    join_torch_team(torch)
    return thread_count, numba.set_num_threads, numba.config.NUMBA_NUM_THREADS
