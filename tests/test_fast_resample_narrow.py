"""NCHW rows of one column block (``gradops/_fast/resample/narrow.py``): ``_narrow_rows`` must write
what ``_contract``'s row-sum branch writes for the same plan, bit for bit (the same sums in the
same order, SPEC 3.7). Each case runs the kernel built for the plan's path (narrow rows) and the
kernel built with the row-sum branch instead, on data with -0, inf and NaN, and compares bits.
"""

from __future__ import annotations

import numpy as np
import pytest

from fast_resample_references import random_data
from gradops._fast.pool import share
from gradops._fast.resample.kernels import _contract_kernel
from gradops._fast.resample.plan import _contract_plan, _flat_buffer
from gradops._resample_plan import axis_taps, tap_key


def _taps(shape_in, shape_out, mode):
    return [axis_taps(i, o, float(np.float32(o / i)), 0.5, -0.5, mode, "half_up") for i, o in zip(shape_in, shape_out)]


def _run(path, src, dst, planned):
    axes, items, src_offset, dst_offset, _, record, _ = planned
    share(_contract_kernel(path), items, src.nbytes + dst.nbytes, _flat_buffer(src, axes), src_offset,
          _flat_buffer(dst, axes), dst_offset, record, False)


def _special(rng, shape, dtype):
    data = random_data(rng, shape, dtype)
    flat = data.reshape(-1)
    picks = rng.choice(flat.size, size=min(12, flat.size), replace=False)
    flat[picks[:4]] = -0.0
    flat[picks[4:8]] = np.inf
    flat[picks[8:10]] = -np.inf
    flat[picks[10:]] = np.nan
    return data


CASES = [
    # (mode, forward input, forward output, transpose: the gradient)
    ("nearest", (1, 16, 16, 16), (1, 16, 32, 32), True),  # 16-column rows, the sweep's 16 KiB
    ("nearest", (2, 8, 25, 38), (2, 8, 50, 76), True),  # FPN's 38-column rows
    ("linear", (1, 4, 8, 8), (1, 4, 16, 16), True),  # too short for an affine span: every column gathered
    ("linear", (1, 4, 8, 16), (1, 4, 16, 32), True),  # an affine span on AVX2 (8 columns or more), not AVX-512
    ("linear", (1, 4, 8, 64), (1, 4, 16, 128), True),  # affine span with gathered edges
    ("linear", (2, 3, 9, 7), (2, 3, 13, 17), True),  # fractional scales: no affine span
    ("linear", (1, 4, 8, 40), (1, 4, 16, 80), False),  # forward 2x upsampling: two phases
    ("linear", (1, 4, 16, 80), (1, 4, 8, 40), False),  # forward 2x downsampling
    ("nearest", (3, 40), (6, 80), True),  # rank 2
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("mode,shape_in,shape_out,transpose", CASES)
def test_narrow_rows_write_the_row_sum_branch_bits(mode, shape_in, shape_out, transpose, dtype):
    rng = np.random.default_rng(len(shape_in) * 100 + shape_in[-1])
    taps = _taps(shape_in, shape_out, mode)
    src = _special(rng, shape_out if transpose else shape_in, dtype)
    dst_shape = shape_in if transpose else shape_out
    keys = tuple(tap_key(*t) for t in taps)
    planned = _contract_plan(transpose, src.shape, src.strides, dst_shape, np.empty(dst_shape, dtype).strides,
                             src.itemsize, keys)
    path = planned[6]
    assert path[-1] and not path[4]  # narrow rows, so no row-sum branch in the kernel the plan builds
    generic = path[:4] + (True,) + path[5:-1] + (False,)
    narrow, row_sum = np.full(dst_shape, np.nan, dtype), np.full(dst_shape, 7, dtype)
    _run(path, src, narrow, planned)
    _run(generic, src, row_sum, planned)
    bits = np.uint16 if dtype == np.float16 else np.uint32
    assert narrow.view(bits).tolist() == row_sum.view(bits).tolist()


def test_rows_read_with_a_column_stride_are_not_narrow():
    """A source whose columns are not contiguous (every second one, or reversed) takes the row-sum
    branch one column at a time: ``plan._narrow_fits`` refuses it."""
    taps = _taps((1, 4, 8, 16), (1, 4, 16, 32), "nearest")
    keys = tuple(tap_key(*t) for t in taps)
    dst = np.empty((1, 4, 8, 16), np.float32)
    for src in (np.empty((1, 4, 16, 64), np.float32)[..., ::2], np.empty((1, 4, 16, 32), np.float32)[..., ::-1]):
        path = _contract_plan(True, src.shape, src.strides, dst.shape, dst.strides, 4, keys)[6]
        assert not path[-1] and path[4]
