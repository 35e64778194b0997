"""Independent float64 references for the fast resample tests (SPEC 3.2-3.7), shared by
test_fast_resample.py and test_fast_resample_order.py.

The references are built from the per-axis tap tables only: a dense matrix ``J_d`` per axis,
combined over axes with ``np.tensordot`` (forward ``J x``, gradient ``J^T dy``).

Tolerances. Sums are accumulated in float32 in an order that differs from the reference, so for
an output that sums ``T`` products the error is bounded by the classical float32 summation bound
``(T + 4) * 2**-24 * sum|w * v|`` (the ``+4`` covers the rounding of the product of up to four
axis weights); float16 results get one more rounding to float16 (half an ulp). For data of one
sign that is at most ``T + 4`` float32 ulps.
"""

from __future__ import annotations

import numpy as np

from gradops._resample_plan import axis_taps

U32 = 2.0 ** -24


def dense(index: np.ndarray, weight: np.ndarray, n_in: int) -> np.ndarray:
    """``J[o, i]``: the forward weight of input ``i`` in output ``o`` (float64)."""
    matrix = np.zeros((index.shape[0], n_in))
    rows = np.repeat(np.arange(index.shape[0]), 2)
    np.add.at(matrix, (rows, index.reshape(-1)), weight.reshape(-1).astype(np.float64))
    return matrix


def apply_axes(matrices: list[np.ndarray], data: np.ndarray) -> np.ndarray:
    """``data`` contracted with ``matrices[d]`` along every axis ``d`` (rows = result axis)."""
    result = data
    for axis, matrix in enumerate(matrices):
        result = np.moveaxis(np.tensordot(matrix, result, axes=([1], [axis])), 0, axis)
    return result


def taps_per_output(matrices: list[np.ndarray]) -> int:
    """The largest number of nonzero products summed into one output element."""
    return int(np.prod([np.count_nonzero(m, axis=1).max(initial=1) for m in matrices]))


def assert_close(got: np.ndarray, exact: np.ndarray, abs_sum: np.ndarray, terms: int) -> None:
    """The bound of the module docstring, plus one float16 rounding for float16 results."""
    tolerance = (terms + 4) * U32 * abs_sum
    if got.dtype == np.float16:
        tolerance = tolerance + np.maximum(np.abs(exact) * 2.0 ** -11, 2.0 ** -25)
    error = np.abs(got.astype(np.float64) - exact)
    worst = np.unravel_index(np.argmax(error - tolerance), error.shape)
    assert np.all(error <= tolerance), (worst, got[worst], exact[worst], tolerance[worst])


def random_data(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def suite_taps(shape_in, shape_out, mode, grid):
    """Per-axis taps of the benchmark workloads: identity axes, half-pixel or asymmetric grid."""
    taps = []
    for n_in, n_out in zip(shape_in, shape_out):
        if n_in == n_out:
            taps.append(axis_taps(n_in, n_out, 1.0, 0.0, 0.0, mode, "half_up"))
        elif grid == "half":
            taps.append(axis_taps(n_in, n_out, n_out / n_in, 0.5, -0.5, mode, "half_up"))
        else:
            taps.append(axis_taps(n_in, n_out, n_out / n_in, 0.0, 0.0, mode, "floor"))
    return taps


def nhwc(array: np.ndarray) -> np.ndarray:
    """The same logical NCHW tensor in an NHWC buffer."""
    return np.ascontiguousarray(array.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
