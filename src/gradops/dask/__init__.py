"""gradops on dask arrays (extra ``gradops[dask]``): the NumPy API's operators, blockwise.

Each function takes and returns ``dask.array`` arrays, with the arguments of its NumPy
counterpart; the small operands (filters, sizes, scales, offsets) stay plain values. Arguments
are validated when the graph is built, with the NumPy call's errors. Every block is computed by
the in-memory operator on its input range (halo included), with the full call's parameters
restated for the block, so the gather operators give the in-memory call's bits for any chunking;
the filter gradient sums per-block partial sums in a fixed tree (see ``depthwise``).

Inside a worker each block runs with one fast-backend thread per dask thread (``_graph``).
"""

from __future__ import annotations

from .depthwise import (depthwise_conv2d_native, depthwise_conv2d_native_backprop_filter,
                        depthwise_conv2d_native_backprop_input)
from .elementwise import relu, relu_grad
from .resample import resample, resample1, resample2, resample_grad, resample_grad1

__all__ = [
    "relu", "relu_grad", "resample", "resample1", "resample2", "resample_grad", "resample_grad1",
    "depthwise_conv2d_native", "depthwise_conv2d_native_backprop_input", "depthwise_conv2d_native_backprop_filter",
]
