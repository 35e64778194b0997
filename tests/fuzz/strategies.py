"""Hostile and valid arguments for the fuzz suite (issue 27): types, dtypes (object, complex, bool,
big-endian, extended precision), ranks, zero-size and huge dimensions, NaN/inf/huge numbers,
overlapping or negative strides, read-only and overlapping ``out=``, subclasses, lists, scalars,
and bytes of the wrong length."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

FLOATS = (np.float32, np.float16)
INTEGERS = (np.int32, np.int16, np.int8)
HOSTILE_DTYPES = (np.dtype(object), np.complex64, np.complex128, np.bool_, np.dtype(">f4"), np.dtype(">f2"),
                  np.longdouble, np.float64, np.int64, np.uint8, np.dtype("U3"), np.dtype("V4"),
                  np.dtype(ml_dtypes.bfloat16), np.dtype("datetime64[s]"))
HUGE = (2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**62, 2**63 - 1, 2**64, 10**10)
NUMBERS = (0, -0.0, 1, -1, 0.5, 1e-45, 1e-40, 3.4e38, 3.5e38, 1e300, float("nan"), float("inf"), -float("inf"),
           True, None, "1", b"1", 1j, np.float64(2.5), np.int64(3), np.float16(np.nan), [1], (), object())


def values(dtype: type, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random data with specials (NaN, inf, -0, subnormals) among ordinary values."""
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
    data = rng.standard_normal(shape) * 4
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-42, 65504.0, 70000.0])
    mask = rng.random(shape) < 0.05
    data[mask] = rng.choice(specials, size=int(mask.sum()))
    with np.errstate(over="ignore"):
        return data.astype(dtype)


@st.composite
def layouts(draw, array: np.ndarray) -> np.ndarray:
    """The same values in another memory layout: transposed copy, reversed view, strided
    sub-view, read-only, an np.matrix / subclass view (2-D), or as is."""
    kind = draw(st.sampled_from(["as is", "fortran", "reversed", "strided", "readonly", "subclass"]))
    if kind == "fortran":
        return np.asfortranarray(array)
    if kind == "reversed" and array.ndim:
        return np.flip(np.flip(array).copy())  # negative strides, same values
    if kind == "strided" and array.ndim:
        wide = np.zeros(array.shape[:-1] + (array.shape[-1] * 2,), array.dtype)
        wide[..., ::2] = array
        return wide[..., ::2]
    if kind == "readonly":
        copy = array.copy()
        copy.flags.writeable = False
        return copy
    if kind == "subclass":
        return array.view(np.matrix) if array.ndim == 2 else array.view(type("Sub", (np.ndarray,), {}))
    return array


@st.composite
def hostile_arrays(draw, rng: np.random.Generator) -> object:
    """Something that is not a valid operand: wrong dtype, rank 0 or 9+, a zero-size or huge
    (broadcast) shape, a masked array, a list, a scalar, bytes, None."""
    kind = draw(st.sampled_from(["dtype", "rank0", "rank9", "zero", "huge", "masked", "list", "scalar", "bytes",
                                 "none", "string", "broadcast"]))
    if kind == "dtype":
        dtype = draw(st.sampled_from(HOSTILE_DTYPES))
        try:
            return np.zeros((1, 2, 2, 1), dtype)
        except TypeError:
            return np.zeros(4, np.float32).astype(object)
    if kind == "rank0":
        return np.array(1.0, draw(st.sampled_from(FLOATS)))
    if kind == "rank9":
        return np.ones((1,) * draw(st.integers(9, 33)), np.float32)
    if kind == "zero":
        shape = [draw(st.integers(0, 3)) for _ in range(draw(st.integers(1, 4)))]
        shape[draw(st.integers(0, len(shape) - 1))] = 0
        return np.ones(shape, draw(st.sampled_from(FLOATS)))
    if kind in ("huge", "broadcast"):
        rank = draw(st.integers(1, 4))
        shape = [1] * rank
        shape[draw(st.integers(0, rank - 1))] = draw(st.sampled_from((2**31, 2**32 - 1, 2**33, 10**10)))
        if kind == "broadcast":
            shape = [2**15] * rank  # up to 2**60 elements, one in memory
        return np.broadcast_to(np.float32(1), shape)
    if kind == "masked":
        return np.ma.masked_array(np.ones((1, 2, 2, 1), np.float32), mask=[[[[0], [1]], [[0], [0]]]])
    if kind == "list":
        return [[[[1.0, 2.0]]]]
    if kind == "scalar":
        return draw(st.sampled_from((1.0, np.float32(1), 3, True)))
    if kind == "bytes":
        return b"\x00" * draw(st.integers(0, 17))
    if kind == "string":
        return "x"
    return None


@st.composite
def hostile_outs(draw, good: np.ndarray, inputs: list[np.ndarray]) -> object:
    """An ``out=`` that must be refused (or, "good", accepted): wrong dtype or shape, read-only,
    self-overlapping, overlapping an input, masked, a list; or the right array in another layout."""
    kind = draw(st.sampled_from(["good", "dtype", "shape", "readonly", "self-overlap", "input", "masked",
                                 "list", "slice-of-input", "subclass"]))
    if kind == "good":
        return np.full(good.shape, 7, good.dtype)
    if kind == "subclass":
        out = np.full(good.shape, 7, good.dtype)
        return out.view(np.matrix) if out.ndim == 2 else out.view(type("Sub", (np.ndarray,), {}))
    if kind == "dtype":
        return np.full(good.shape, 7, np.float64 if good.dtype != np.float64 else np.float32)
    if kind == "shape":
        return np.full(good.shape + (1,), 7, good.dtype)
    if kind == "readonly":
        out = np.full(good.shape, 7, good.dtype)
        out.flags.writeable = False
        return out
    if kind == "self-overlap":
        if good.size <= 1:
            return np.full(good.shape, 7, np.float64)
        return np.lib.stride_tricks.as_strided(np.full(good.size, 7, good.dtype), good.shape,
                                               (0,) * good.ndim)
    if kind in ("input", "slice-of-input"):
        source = draw(st.sampled_from(inputs)) if inputs else None
        if source is None or source.dtype != good.dtype or not source.flags.writeable:
            return np.full(good.shape, 7, good.dtype)
        if kind == "input" and source.shape == good.shape:
            return source
        flat = source.view(np.ndarray).reshape(-1) if source.flags.c_contiguous else None
        if flat is not None and flat.size >= good.size:
            return flat[:good.size].reshape(good.shape)
        return np.full(good.shape, 7, good.dtype)
    if kind == "masked":
        return np.ma.masked_array(np.full(good.shape, 7, good.dtype))
    return good.tolist()


def backends() -> st.SearchStrategy:
    return st.sampled_from(["fast", "reference", None, "auto", "gpu", 1])
