"""Argument checks shared by the NumPy-level operator functions.

Each check raises a :class:`~gradops.errors.GradopsError` naming the argument, before any
output is written.
"""

from __future__ import annotations

import contextlib
import math
import os
from contextvars import ContextVar
from functools import cache, lru_cache
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from ._output_cache import empty_c_order, output_factory
from .errors import AliasingError, DataTypeError, ShapeError


def dtype_names(dtypes: Iterable[np.dtype]) -> str:
    names = [np.dtype(d).name for d in dtypes]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


# Whole-array sizes are not checked while a blockwise graph is validated (gradops.dask): the whole
# array is never an operand of one call, and each block's call checks its own sizes.
_WHOLE_SIZES_CHECKED: ContextVar[bool] = ContextVar("gradops_whole_sizes_checked", default=True)


def whole_sizes_checked() -> bool:
    """False inside :func:`blockwise_validation`."""
    return _WHOLE_SIZES_CHECKED.get()


@contextlib.contextmanager
def blockwise_validation() -> Iterator[None]:
    """Validate a call of the NumPy API on whole-array stand-ins without the limits on sizes (the
    memory limit, DirectML's 2^32-1 elements): everything else is checked as in the call."""
    token = _WHOLE_SIZES_CHECKED.set(False)
    try:
        yield
    finally:
        _WHOLE_SIZES_CHECKED.reset(token)


# The largest byte count NumPy can address (np.iinfo costs a microsecond per call).
_MAX_ADDRESSABLE_BYTES = int(np.iinfo(np.intp).max)


@cache
def memory_limit_bytes() -> int:
    """The most bytes one call may need: the machine's physical memory, or less with
    ``GRADOPS_MEMORY_LIMIT_MB`` (README "Errors"). A call that needs more could only fail or swap
    for minutes (or wake the OOM killer), so it is refused up front."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        physical = _MAX_ADDRESSABLE_BYTES
    try:
        return min(physical, int(os.environ["GRADOPS_MEMORY_LIMIT_MB"]) << 20)
    except (KeyError, ValueError):
        return physical


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.3g} GiB"


def check_output_size(field: str, shape: Sequence[int], itemsize: int, *, working_bytes: int = 0,
                      working: str = "") -> None:
    """Refuse, naming ``field``, an output of ``shape`` that NumPy cannot address or whose bytes,
    with the call's ``working_bytes`` (e.g. resample's tap tables, ``working`` says what they
    are), exceed :func:`memory_limit_bytes`: the one place that sizes a result before anything
    is allocated."""
    elements = math.prod(shape)
    if elements * itemsize > _MAX_ADDRESSABLE_BYTES and _WHOLE_SIZES_CHECKED.get():
        raise ShapeError(field, f"expected an output NumPy can address, got {elements} elements of "
                         f"{itemsize} bytes (shape {tuple(shape)})")
    require_memory(field, elements * itemsize + working_bytes,
                   lambda: f"the output of shape {tuple(shape)} needs {_gib(elements * itemsize)}"
                           + (f" and {_gib(working_bytes)} of {working}" if working_bytes else ""))


def require_memory(field: str, nbytes: int, what: Callable[[], str]) -> None:
    """Refuse, naming ``field``, a call whose working memory (``what()`` needs ``nbytes``) exceeds
    :func:`memory_limit_bytes`. ``what`` returns the text, so that the calls that pass (all but a
    few) skip formatting it, which costs as much as a small call's kernel."""
    limit = memory_limit_bytes()
    if nbytes > limit and _WHOLE_SIZES_CHECKED.get():
        raise ShapeError(field, f"{what()}, more than this machine's {_gib(limit)} "
                         "of memory")


def allocate_output(field: str, shape: tuple[int, ...], dtype: np.dtype, like: np.ndarray | None = None
                    ) -> np.ndarray:
    """A fresh output (:func:`~gradops._output_cache.empty_output`) after
    :func:`check_output_size`; an allocation the system still refuses raises ``ShapeError``."""
    return output_allocator(field, shape, dtype, like)()


def allocate_c_order_output(field: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """:func:`allocate_output` in C order for an output whose size an existing array already has
    (which passes :func:`check_output_size`): a call of a few microseconds, without the layout
    work and the size checks."""
    try:
        return empty_c_order(shape, dtype)
    except (MemoryError, ValueError) as exc:
        raise _refused(field, shape, dtype, exc) from exc


def output_allocator(field: str, shape: tuple[int, ...], dtype: np.dtype, like: np.ndarray | None = None
                     ) -> Callable[[], np.ndarray]:
    """:func:`allocate_output` for every call whose output has ``shape`` and ``dtype`` and the
    layout of ``like`` (a prepared run, whose key holds them and ``whole_sizes_checked``): the
    size check, which they alone decide, is made here, once; the allocator allocates."""
    check_output_size(field, shape, np.dtype(dtype).itemsize)
    make = output_factory(shape, dtype, like)

    def allocate() -> np.ndarray:
        try:
            return make()
        except (MemoryError, ValueError) as exc:
            raise _refused(field, shape, dtype, exc) from exc
    return allocate


def _refused(field: str, shape: tuple[int, ...], dtype: np.dtype, exc: Exception) -> ShapeError:
    return ShapeError(field, f"cannot allocate an output of shape {shape} and dtype {np.dtype(dtype).name}: {exc}")


def as_array(name: str, value: Any, dtypes: Sequence[np.dtype]) -> np.ndarray:
    """``value`` as an ndarray. Lists and scalars are refused: they carry no dtype, and gradops
    never converts dtypes behind the caller's back. Array-likes (``__array__``) are accepted.
    ndarray subclasses are read through a base-class view (no copy), except masked arrays,
    which are refused: their mask would be silently ignored (README "Errors")."""
    if type(value) is np.ndarray:
        return value
    if isinstance(value, np.ma.MaskedArray):
        raise DataTypeError.expected(name, "a plain NumPy array (a masked array's mask would be ignored: "
                                     "pass .filled(...) or .data)", value)
    if isinstance(value, np.ndarray):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)) or np.isscalar(value):
        raise DataTypeError.expected(name, f"a NumPy array of dtype {dtype_names(dtypes)}", value)
    try:
        return np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - any failure to convert is the user's argument
        raise DataTypeError.expected(name, "a NumPy array", value) from exc


# DirectML's limit on a tensor's element count (SPEC 2.2), applied to the inputs of the DirectML
# operators' NumPy functions too: a broadcast view may be far larger than its memory.
MAX_ELEMENTS = 2**32 - 1


def check_input(name: str, value: Any, *, dtypes: Sequence[np.dtype], ranks: Sequence[int]) -> np.ndarray:
    """An input array (see :func:`as_array`) of a supported dtype and rank, with at most
    :data:`MAX_ELEMENTS` elements."""
    value = as_array(name, value, dtypes)
    if value.dtype not in dtypes:  # a dtype equals its scalar type: np.dtype("float32") == np.float32
        raise DataTypeError.expected(f"{name}.dtype", dtype_names(dtypes), str(value.dtype))
    if value.ndim not in ranks:
        lo, hi = min(ranks), max(ranks)
        raise ShapeError.expected(f"{name}.ndim", f"a rank in {lo}..{hi}" if lo != hi else f"rank {lo}",
                                  value.ndim)
    if 0 in value.shape:
        raise ShapeError.expected(f"{name}.shape[{value.shape.index(0)}]",
                                  "a size >= 1 (DirectML sizes are never 0)", value.shape)
    if math.prod(value.shape) > MAX_ELEMENTS and _WHOLE_SIZES_CHECKED.get():
        raise ShapeError.expected(f"{name}.shape", "at most 2^32-1 elements (DirectML's limit)", value.shape)
    return value


def check_same(name: str, value: np.ndarray, ref_name: str, ref: np.ndarray) -> None:
    """``value`` has the dtype and shape of ``ref``."""
    if value.dtype != ref.dtype:
        raise DataTypeError.expected(f"{name}.dtype", f"{ref.dtype} (the dtype of {ref_name})", str(value.dtype))
    if value.shape != ref.shape:
        raise ShapeError.expected(f"{name}.shape", f"{ref.shape} (the shape of {ref_name})", value.shape)


def layout_overlap(shape: Sequence[int], strides: Sequence[int], itemsize: int) -> str:
    """Why two distinct indices of a strided layout address overlapping bytes, or "" if none do.

    ``strides`` and ``itemsize`` share one unit (bytes, or elements with itemsize 1). Sorting
    the axes by stride, each stride must reach past the span of all smaller ones; when that
    quick test fails (interleaved layouts) the offsets are enumerated exactly.
    """
    axes = [(abs(st), n) for n, st in zip(shape, strides) if n > 1]
    if any(st == 0 for st, _ in axes):
        return "a stride of 0 on an axis of size > 1 broadcasts"
    span = itemsize
    for st, n in sorted(axes):
        if st < span:
            break
        span += st * (n - 1)
    else:
        return ""
    count = math.prod(n for _, n in axes)
    if count > 1 << 26:
        return "interleaved strides too large to prove free of overlap"
    offsets = np.zeros(1, dtype=np.int64)
    for st, n in axes:
        offsets = (offsets[:, None] + st * np.arange(n, dtype=np.int64)).ravel()
    offsets.sort()
    return "two indices address the same element" if np.any(np.diff(offsets) < itemsize) else ""


# Repeated calls pass outputs of a few layouts: the overlap proof is remembered per layout.
_cached_layout_overlap = lru_cache(maxsize=1024)(layout_overlap)


def _shares_memory(a: np.ndarray, b: np.ndarray) -> bool:
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=10**6))
    except np.exceptions.TooHardError:
        return True  # undecidable within the budget: refuse rather than risk a wrong answer


def _same_view(a: np.ndarray, b: np.ndarray) -> bool:
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype)


def prepare_out(out: Any, *, shape: tuple[int, ...], dtype: np.dtype, inputs: Mapping[str, np.ndarray],
                may_alias: Sequence[str] = (), name: str = "out", like: np.ndarray | None = None,
                size_field: str = "out") -> np.ndarray:
    """Validate a user's ``out=`` array (:func:`check_out`, then :func:`check_disjoint`), or
    allocate a fresh one (:func:`allocate_output`, in the memory order of ``like``, as NumPy's
    ``order="K"``; a size error names ``size_field``)."""
    if out is None:
        return allocate_output(size_field, tuple(shape), dtype, like)
    out = check_out(out, shape=shape, dtype=dtype, name=name)
    check_disjoint(out, inputs, may_alias, name)
    return out


def check_out(out: Any, *, shape: tuple[int, ...], dtype: np.dtype, name: str = "out") -> np.ndarray:
    """A user's ``out=`` array, checked for what its type and layout decide: a writeable ndarray
    of exactly ``shape`` and ``dtype`` whose elements do not overlap each other. A subclass is
    written through a base-class view, which is returned; a masked array is refused."""
    if not isinstance(out, np.ndarray):
        raise AliasingError.expected(name, "a NumPy array or None", out)
    if isinstance(out, np.ma.MaskedArray):
        raise AliasingError.expected(name, "a plain NumPy array (a masked array's mask would not be updated)",
                                     out)
    if type(out) is not np.ndarray:
        out = out.view(np.ndarray)
    if out.dtype != dtype:
        raise DataTypeError.expected(f"{name}.dtype", str(np.dtype(dtype)), str(out.dtype))
    if out.shape != tuple(shape):
        raise ShapeError.expected(f"{name}.shape", tuple(shape), out.shape)
    if not out.flags.writeable:
        raise AliasingError.expected(name, "a writeable array", "a read-only array")
    flags = out.flags  # a contiguous array's elements never overlap: no proof needed
    overlap = "" if flags.c_contiguous or flags.f_contiguous else _cached_layout_overlap(out.shape, out.strides,
                                                                                          out.itemsize)
    if overlap:
        raise AliasingError(name, f"expected an array whose elements do not overlap, got strides "
                            f"{out.strides} for shape {out.shape} ({overlap})")
    return out


def check_disjoint(out: np.ndarray, inputs: Mapping[str, np.ndarray], may_alias: Sequence[str] = (),
                   name: str = "out") -> None:
    """``out`` shares no memory with the ``inputs``, except those named in ``may_alias``, which
    it may be exactly (element-wise operators run in place): what the addresses decide, checked
    on every call."""
    for input_name, array in inputs.items():
        if not _shares_memory(out, array):
            continue
        if input_name in may_alias and _same_view(out, array):
            continue
        allowed = f" (only exactly `{input_name}` itself)" if input_name in may_alias else ""
        raise AliasingError(name, f"expected memory disjoint from `{input_name}`{allowed}, "
                            "got an array that overlaps it")
