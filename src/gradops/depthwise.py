"""TensorFlow depthwise convolution family (SPEC section 5): ``DepthwiseConv2dNative`` and its
gradients ``DepthwiseConv2dNativeBackpropInput`` and ``DepthwiseConv2dNativeBackpropFilter``.

Arguments and attributes are those of ``tf.raw_ops``. The math is the scatter form of SPEC 5.4,
a true correlation (no filter flip) with zero padding::

    Y[b, oy, ox, c*M + m] = sum_{ky,kx} X[b, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw, c] * F[ky, kx, c, m]

BackpropInput and BackpropFilter are its exact adjoints with respect to X and F.

Where gradops departs from TensorFlow's CPU kernels (SPEC 0.9 and 5.6, [DECISION]):

* ``data_format="NCHW"`` is supported (TF's CPU kernels raise Unimplemented).
* ``dilations`` are honoured, as ``tf.nn.depthwise_conv2d`` does. TF's raw forward kernel rejects
  them, and its raw BackpropInput / BackpropFilter silently compute the dilation-1 result.
* Unequal row and column strides are accepted; TF rejects them ("Current implementation only
  supports equal length strides in the row and column dimensions.").
* float16 and bfloat16 accumulate in float32 and round once (TF's CPU forward and
  BackpropFilter accumulate in half). The reference backend accumulates everything in float64
  and rounds once to the output type.
* ``input_sizes`` / ``filter_sizes``: 4 ints, as a sequence of Python (or NumPy) integers or a
  1-D int32 array. Other arrays, int64 included, are rejected: TF registers these inputs as
  int32 and rejects int64 tensors (its eager mode converts int64 NumPy arrays silently).
* Every integer attribute must fit an int32, as TF requires for ``strides``; TF also accepts
  larger ``explicit_paddings``.
* Non-integer strides, dilations or paddings are rejected (TF's Python layer truncates floats).

Like TF, empty tensors are legal: a zero batch, depth, multiplier or filter size, and a VALID
output size that truncates to 0 (SPEC 5.3). A sum over no taps is 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from ._arrays import check_disjoint, output_allocator, prepare_out, require_memory
from ._backend import fast_module, resolve_backend
from ._memo import find_run, memoized, remember, typed_key
from ._depthwise_checks import (_DATA_FORMATS, _PADDINGS, DEPTHWISE_DTYPES, _check_sizes, _check_tensor,
                               _int32, _int_list, _quoted, _shape4, _window, tf_dtype)
from ._depthwise_reference import REFERENCE_KERNELS, no_run, reference_run, zeros_run
from .errors import DataTypeError, DescriptorError, ShapeError
from .registry import OpInfo, load_data

__all__ = [
    "depthwise_conv2d_native", "depthwise_conv2d_native_backprop_input",
    "depthwise_conv2d_native_backprop_filter", "DepthwiseConv2dNativeDesc",
    "DepthwiseConv2dNativeBackpropInputDesc", "DepthwiseConv2dNativeBackpropFilterDesc",
    "DepthwiseGeometry", "DEPTHWISE_DTYPES",
]

# A prepared call (``_DepthwiseDesc._prepare_run``): its two operands in the op's argument order,
# and ``out`` or None; returns the output.
Run = Callable[[np.ndarray, np.ndarray, "np.ndarray | None"], np.ndarray]


@dataclass(frozen=True)
class DepthwiseGeometry:
    """The sizes and pads of one call (SPEC 5.2, 5.3), named in NHWC terms."""

    batch: int
    in_height: int
    in_width: int
    channels: int
    filter_height: int
    filter_width: int
    multiplier: int
    out_height: int
    out_width: int
    pad_top: int
    pad_bottom: int
    pad_left: int
    pad_right: int

    def input_shape(self, data_format: str) -> tuple[int, int, int, int]:
        return _in_format((self.batch, self.in_height, self.in_width, self.channels), data_format)

    def output_shape(self, data_format: str) -> tuple[int, int, int, int]:
        return _in_format((self.batch, self.out_height, self.out_width, self.channels * self.multiplier),
                          data_format)

    @property
    def filter_shape(self) -> tuple[int, int, int, int]:
        return self.filter_height, self.filter_width, self.channels, self.multiplier


def _in_format(nhwc: tuple[int, int, int, int], data_format: str) -> tuple[int, int, int, int]:
    n, h, w, c = nhwc
    return (n, c, h, w) if data_format == "NCHW" else (n, h, w, c)


def _nhwc_view(array: np.ndarray, data_format: str) -> np.ndarray:
    """The NHWC-indexed view of a data_format array (no copy): what the kernels take."""
    return array.transpose(0, 2, 3, 1) if data_format == "NCHW" else array


# --- descriptors -----------------------------------------------------------------------------

@dataclass(frozen=True)
class _DepthwiseDesc:
    """The attributes shared by the three ops (SPEC 5.1), validated and normalised on
    construction. A descriptor is immutable and can run any number of calls."""

    T: Any
    strides: Sequence[int]
    padding: str
    explicit_paddings: Sequence[int] = ()
    data_format: str = "NHWC"
    dilations: Sequence[int] = (1, 1, 1, 1)

    OPERATOR: ClassVar[str]
    ERROR_PREFIX: ClassVar[str]  # TensorFlow's prefix for shape errors of this op
    ARGUMENTS: ClassVar[tuple[str, ...]]  # the operands, in the op's argument order

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # which operands are tensors and which are sizes (``input_sizes``, ``filter_sizes``)
        cls.TENSORS = tuple(i for i, name in enumerate(cls.ARGUMENTS) if not name.endswith("_sizes"))
        cls.SIZES = tuple(i for i, name in enumerate(cls.ARGUMENTS) if name.endswith("_sizes"))

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "T", tf_dtype(self.T))
        if not isinstance(self.data_format, str) or self.data_format not in _DATA_FORMATS:
            raise DescriptorError("data_format", f"Value for attr 'data_format' of {_quoted(self.data_format)} is "
                                  'not in the list of allowed values: "NHWC", "NCHW"')
        if not isinstance(self.padding, str) or self.padding not in _PADDINGS:
            raise DescriptorError("padding", f"Value for attr 'padding' of {_quoted(self.padding)} is not in the "
                                  'list of allowed values: "SAME", "VALID", "EXPLICIT"')
        batch_depth = (0, self.data_format.index("C"))
        strides = _int_list("strides", self.strides, "Sliding window strides field must specify 4 dimensions")
        for i, s in enumerate(strides):
            if s <= 0:
                raise DescriptorError(f"strides[{i}]", f"Stride must be > 0, but got {s}")
        if any(strides[i] != 1 for i in batch_depth):
            raise DescriptorError("strides", "Current implementation does not yet support strides in the batch "
                                  f"and depth dimensions. (got {list(strides)}, {self.data_format} order)")
        dilations = _int_list("dilations", self.dilations, "Sliding window dilations field must specify 4 "
                              "dimensions")
        for i, d in enumerate(dilations):
            if d <= 0:
                raise DescriptorError(f"dilations[{i}]", f"Dilated rates should be larger than 0. (got {d})")
        if any(dilations[i] != 1 for i in batch_depth):
            raise DescriptorError("dilations", "Current implementation does not yet support dilations in the "
                                  f"batch and depth dimensions. (got {list(dilations)}, {self.data_format} order)")
        set_(self, "strides", strides)
        set_(self, "dilations", dilations)
        set_(self, "explicit_paddings", self._check_explicit_paddings(batch_depth))
        # What the geometry depends on, as a memo key hashed in C (the dataclass's __hash__ is
        # Python, run twice per lookup)
        set_(self, "_geometry_key", typed_key((type(self), str(self.T), self.strides, self.padding,
                                               self.explicit_paddings, self.data_format, self.dilations)))

    def _check_explicit_paddings(self, batch_depth: tuple[int, int]) -> tuple[int, ...]:
        value = self.explicit_paddings
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise DescriptorError.expected("explicit_paddings", "a list of 8 integers", value)
        items = list(value)
        if self.padding != "EXPLICIT":
            if items:
                raise DescriptorError("explicit_paddings", "explicit_paddings attribute must be empty if the "
                                      f"padding attribute is not EXPLICIT (padding is {self.padding!r})")
            return ()
        if len(items) != 8:
            raise DescriptorError("explicit_paddings", "explicit_paddings attribute must contain 8 values, "
                                  f"but got: {len(items)}")
        pads = tuple(_int32(f"explicit_paddings[{i}]", v, "explicit_paddings")
                     for i, v in enumerate(items))
        for i, p in enumerate(pads):
            if p < 0:
                raise DescriptorError(f"explicit_paddings[{i}]", "All elements of explicit_paddings must be "
                                      f"nonnegative, got {p}")
        if any(pads[2 * d] or pads[2 * d + 1] for d in batch_depth):
            raise DescriptorError("explicit_paddings", "Nonzero explicit padding in the batch or depth dimensions "
                                  f"is not supported (got {list(pads)}, {self.data_format} order)")
        return pads

    def _checked_geometry(self, *shapes: Any) -> DepthwiseGeometry:
        """``self.geometry(*shapes)``, remembered per descriptor and shapes (``_memo``): it
        depends on nothing else."""
        return memoized(_GEOMETRIES, shapes, lambda: self.geometry(*shapes), keyed=self._geometry_key)

    @property
    def _spatial_axes(self) -> tuple[int, int]:
        return (2, 3) if self.data_format == "NCHW" else (1, 2)

    @property
    def _kernel_attrs(self) -> tuple[int, int, int, int]:
        """(stride_h, stride_w, dil_h, dil_w), in the argument order of the kernels."""
        h, w = self._spatial_axes
        return self.strides[h], self.strides[w], self.dilations[h], self.dilations[w]

    def _geometry(self, input_shape: tuple[int, ...], input_name: str, filter_shape: tuple[int, ...],
                  filter_name: str, out_backprop_shape: tuple[int, ...] | None) -> DepthwiseGeometry:
        """Check that the shapes agree with each other and the attributes, and compute the output
        sizes and pads (SPEC 5.2, 5.3, 5.5). Shapes are in data_format order."""
        prefix = self.ERROR_PREFIX
        h_axis, w_axis = self._spatial_axes
        c_axis = self.data_format.index("C")
        batch, height, width, channels = (input_shape[a] for a in (0, h_axis, w_axis, c_axis))
        filter_height, filter_width, filter_channels, multiplier = filter_shape
        if out_backprop_shape is not None and out_backprop_shape[0] != batch:
            raise ShapeError("out_backprop.shape[0]", f"{prefix}input and out_backprop must have the same batch "
                             f"size ({out_backprop_shape[0]} vs {input_name}[0] = {batch})")
        if filter_channels != channels:
            what = "in_depth" if out_backprop_shape is not None else f"depth: {channels} vs {filter_channels}"
            raise ShapeError(f"{filter_name}[2]", f"{prefix}input and filter must have the same {what} "
                             f"({input_name}[{c_axis}] = {channels}, {filter_name}[2] = {filter_channels})")
        if out_backprop_shape is not None and out_backprop_shape[c_axis] != channels * multiplier:
            raise ShapeError(f"out_backprop.shape[{c_axis}]", f"{prefix}depth_multiplier * in_depth not equal "
                             f"to out_depth ({multiplier} * {channels} != {out_backprop_shape[c_axis]})")
        stride_h, stride_w, dil_h, dil_w = self._kernel_attrs
        pads = self.explicit_paddings or (0,) * 8
        out_h, pad_top, pad_bottom = _window(height, filter_height, stride_h, dil_h, self.padding,
                                             pads[2 * h_axis: 2 * h_axis + 2], f"{input_name}[{h_axis}]")
        out_w, pad_left, pad_right = _window(width, filter_width, stride_w, dil_w, self.padding,
                                             pads[2 * w_axis: 2 * w_axis + 2], f"{input_name}[{w_axis}]")
        if out_backprop_shape is not None:
            for axis, dim, computed in ((h_axis, "rows", out_h), (w_axis, "cols", out_w)):
                if out_backprop_shape[axis] != computed:
                    raise ShapeError(f"out_backprop.shape[{axis}]", f"{prefix}Number of {dim} of out_backprop "
                                     f"doesn't match computed: actual = {out_backprop_shape[axis]}, "
                                     f"computed = {computed}")
        return DepthwiseGeometry(batch, height, width, channels, filter_height, filter_width, multiplier,
                                 out_h, out_w, pad_top, pad_bottom, pad_left, pad_right)

    def _prepare_run(self, kernel: str, operands: Mapping[str, np.ndarray], out: Any, shape: tuple[int, ...],
                     size_field: str, geometry: DepthwiseGeometry, backend: str | None) -> tuple[Run, np.ndarray]:
        """The run of every call whose operands (in the op's argument order), ``out`` and backend
        have these types and layouts, and this call's output: ``out`` checked, or a fresh one.
        The run computes ``kernel`` (a name in ``gradops._fast.depthwise`` and
        ``REFERENCE_KERNELS``) on NHWC views, with what the layouts fix decided once; it checks
        what the addresses decide (an ``out`` overlapping an operand) on every call."""
        backend = resolve_backend(backend)
        # The key tells fresh calls from out= calls: only a run of fresh ones allocates (an out= call
        # passes whatever size its out has), with the allocator that makes this call's output too.
        allocate = output_allocator(size_field, shape, self.T) if out is None else None
        out = allocate() if allocate else prepare_out(out, shape=shape, dtype=self.T, inputs=operands,
                                                      size_field=size_field)
        names, T = tuple(operands), self.T
        a, b = self._kernel_operands(*operands.values())
        args = (*self._kernel_attrs, geometry.pad_top, geometry.pad_left)
        if out.size == 0:
            compute = no_run
        elif a.size == 0 or b.size == 0:
            compute = zeros_run  # a sum over no taps (e.g. a 0-size filter or an empty out_backprop), as TF
        elif backend == "fast":
            # while a kernel it needs compiles, the call runs its sums in NumPy (same bits; first_calls)
            fast = fast_module("depthwise")
            compute = fast.first_calls.gated(getattr(fast, kernel).prepare(a, b, self._kernel_out(out), *args),
                                             partial(fast.ordered_run, kernel, args),
                                             partial(fast.ordered_fits, kernel))
        else:
            # float64 copies of the operands, the accumulator and one tap's products
            nbytes = 8 * (2 * (a.size + b.size) + 3 * out.size)
            require_memory("backend", nbytes, lambda: f"the reference backend's float64 copies need about "
                           f"{nbytes / 2**30:.3g} GiB (backend='fast' needs none)")
            compute = partial(reference_run, REFERENCE_KERNELS[kernel], args)
        kernel_operands, kernel_out = self._kernel_operands, self._kernel_out

        def run(first: np.ndarray, second: np.ndarray, out: np.ndarray | None) -> np.ndarray:
            if out is None:
                out = allocate()
            else:
                check_disjoint(out, dict(zip(names, (first, second))))
            compute(*kernel_operands(first, second), kernel_out(out))
            return out
        return run, out

    def _kernel_operands(self, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The kernel's two operands, NHWC-indexed, from the op's (in its argument order)."""
        raise NotImplementedError

    def _kernel_out(self, out: np.ndarray) -> np.ndarray:
        """The kernel's output view of ``out``: NHWC-indexed, except a filter gradient."""
        return _nhwc_view(out, self.data_format)


@dataclass(frozen=True)
class DepthwiseConv2dNativeDesc(_DepthwiseDesc):
    """``tf.raw_ops.DepthwiseConv2dNative`` attributes; call it with ``(input, filter)``."""

    OPERATOR = "DepthwiseConv2dNative"
    ERROR_PREFIX = ""
    ARGUMENTS = ("input", "filter")

    def geometry(self, input_shape: Sequence[int], filter_shape: Sequence[int]) -> DepthwiseGeometry:
        return self._geometry(_shape4("input.shape", input_shape), "input.shape",
                              _shape4("filter.shape", filter_shape), "filter.shape", None)

    def __call__(self, input: np.ndarray, filter: np.ndarray, *, out: np.ndarray | None = None,
                 backend: str | None = None) -> np.ndarray:
        run, operands, out = self.prepare(input, filter, out=out, backend=backend)
        return run(*operands, out)

    def prepare(self, input: np.ndarray, filter: np.ndarray, *, out: np.ndarray | None = None,
                backend: str | None = None) -> tuple[Run, tuple[np.ndarray, np.ndarray], np.ndarray]:
        """Check a call; return the run of calls like it (``_prepare_run``), its operands as
        arrays and its output."""
        x = _check_tensor("input", input, self.ERROR_PREFIX, self.T)
        filt = _check_tensor("filter", filter, self.ERROR_PREFIX, self.T)
        geometry = self._checked_geometry(x.shape, filt.shape)
        # the output grows with the padding, or with the filter's channel multiplier
        size_field = "explicit_paddings" if self.padding == "EXPLICIT" else "filter.shape"
        run, out = self._prepare_run("conv_forward", {"input": x, "filter": filt}, out,
                                     geometry.output_shape(self.data_format), size_field, geometry, backend)
        return run, (x, filt), out

    def _kernel_operands(self, x: np.ndarray, filt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _nhwc_view(x, self.data_format), filt


@dataclass(frozen=True)
class DepthwiseConv2dNativeBackpropInputDesc(_DepthwiseDesc):
    """``tf.raw_ops.DepthwiseConv2dNativeBackpropInput`` attributes; call it with
    ``(input_sizes, filter, out_backprop)``."""

    OPERATOR = "DepthwiseConv2dNativeBackpropInput"
    ERROR_PREFIX = "DepthwiseConv2DBackpropInput: "
    ARGUMENTS = ("input_sizes", "filter", "out_backprop")

    def geometry(self, input_sizes: Any, filter_shape: Sequence[int],
                 out_backprop_shape: Sequence[int]) -> DepthwiseGeometry:
        sizes = _check_sizes("input_sizes", input_sizes, self.ERROR_PREFIX, "input")
        return self._geometry(sizes, "input_sizes", _shape4("filter.shape", filter_shape), "filter.shape",
                              _shape4("out_backprop.shape", out_backprop_shape))

    def __call__(self, input_sizes: Any, filter: np.ndarray, out_backprop: np.ndarray, *,
                 out: np.ndarray | None = None, backend: str | None = None) -> np.ndarray:
        run, operands, out = self.prepare(input_sizes, filter, out_backprop, out=out, backend=backend)
        return run(*operands, out)

    def prepare(self, input_sizes: Any, filter: np.ndarray, out_backprop: np.ndarray, *,
                out: np.ndarray | None = None, backend: str | None = None
                ) -> tuple[Run, tuple[np.ndarray, np.ndarray], np.ndarray]:
        """Check a call; return the run of calls like it (``_prepare_run``), its operands as
        arrays and its output."""
        filt = _check_tensor("filter", filter, self.ERROR_PREFIX, self.T)
        dy = _check_tensor("out_backprop", out_backprop, self.ERROR_PREFIX, self.T)
        geometry = self._checked_geometry(input_sizes, filt.shape, dy.shape)
        run, out = self._prepare_run("backprop_input", {"filter": filt, "out_backprop": dy}, out,
                                     geometry.input_shape(self.data_format), "input_sizes", geometry, backend)
        return run, (filt, dy), out

    def _kernel_operands(self, filt: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _nhwc_view(dy, self.data_format), filt


@dataclass(frozen=True)
class DepthwiseConv2dNativeBackpropFilterDesc(_DepthwiseDesc):
    """``tf.raw_ops.DepthwiseConv2dNativeBackpropFilter`` attributes; call it with
    ``(input, filter_sizes, out_backprop)``."""

    OPERATOR = "DepthwiseConv2dNativeBackpropFilter"
    ERROR_PREFIX = "DepthwiseConv2DBackpropFilter: "
    ARGUMENTS = ("input", "filter_sizes", "out_backprop")

    def geometry(self, input_shape: Sequence[int], filter_sizes: Any,
                 out_backprop_shape: Sequence[int]) -> DepthwiseGeometry:
        sizes = _check_sizes("filter_sizes", filter_sizes, self.ERROR_PREFIX, "filter")
        return self._geometry(_shape4("input.shape", input_shape), "input.shape", sizes, "filter_sizes",
                              _shape4("out_backprop.shape", out_backprop_shape))

    def __call__(self, input: np.ndarray, filter_sizes: Any, out_backprop: np.ndarray, *,
                 out: np.ndarray | None = None, backend: str | None = None) -> np.ndarray:
        run, operands, out = self.prepare(input, filter_sizes, out_backprop, out=out, backend=backend)
        return run(*operands, out)

    def prepare(self, input: np.ndarray, filter_sizes: Any, out_backprop: np.ndarray, *,
                out: np.ndarray | None = None, backend: str | None = None
                ) -> tuple[Run, tuple[np.ndarray, np.ndarray], np.ndarray]:
        """Check a call; return the run of calls like it (``_prepare_run``), its operands as
        arrays and its output."""
        x = _check_tensor("input", input, self.ERROR_PREFIX, self.T)
        dy = _check_tensor("out_backprop", out_backprop, self.ERROR_PREFIX, self.T)
        geometry = self._checked_geometry(x.shape, filter_sizes, dy.shape)
        run, out = self._prepare_run("backprop_filter", {"input": x, "out_backprop": dy}, out,
                                     geometry.filter_shape, "filter_sizes", geometry, backend)
        return run, (x, dy), out

    def _kernel_operands(self, x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _nhwc_view(x, self.data_format), _nhwc_view(dy, self.data_format)

    def _kernel_out(self, out: np.ndarray) -> np.ndarray:
        return out


# --- NumPy-level functions (tf.raw_ops signatures) ------------------------------------------

_DESCRIPTORS: dict = {}
_GEOMETRIES: dict = {}


# Runs prepared by earlier calls (``_call``), in a table of ``_memo``'s size.
_CALLS: dict = {}


def _descriptor(cls: type, *attributes: Any) -> Any:
    """``cls(*attributes)``, validated once per distinct attributes (``_memo``; descriptors are
    frozen, so one can serve every call)."""
    return memoized(_DESCRIPTORS, (cls, *attributes), lambda: cls(*attributes))


def _call(cls: type, attributes: tuple, arguments: tuple, out: Any, backend: str | None) -> np.ndarray:
    """``cls``'s op on ``arguments`` (in its argument order, ``cls.ARGUMENTS``), through the run
    prepared by the first call with the same attributes, sizes, layouts and backend
    (``_memo.find_run`` says what the key holds). The run checks on every call what the addresses
    decide (an ``out`` overlapping an operand), and the kernel plans what the data decides. A
    call whose preparation raises keeps nothing."""
    tensors = tuple(arguments[i] for i in cls.TENSORS)
    key, run = find_run(_CALLS, cls, (*attributes, *(arguments[i] for i in cls.SIZES)), tensors, out, backend)
    if run is None:
        T = _check_tensor(cls.ARGUMENTS[cls.TENSORS[0]], tensors[0], cls.ERROR_PREFIX).dtype
        run, tensors, out = _descriptor(cls, T, *attributes).prepare(*arguments, out=out, backend=backend)
        if key is not None:
            remember(_CALLS, key, run)
    return run(*tensors, out)


def depthwise_conv2d_native(input: np.ndarray, filter: np.ndarray, strides: Sequence[int], padding: str, *,
                            explicit_paddings: Sequence[int] = (), data_format: str = "NHWC",
                            dilations: Sequence[int] = (1, 1, 1, 1), out: np.ndarray | None = None,
                            backend: str | None = None) -> np.ndarray:
    """``tf.raw_ops.DepthwiseConv2dNative``: the forward depthwise correlation (SPEC 5.4).

    ``input`` is ``[N, H, W, C]`` (NHWC) or ``[N, C, H, W]`` (NCHW), ``filter`` ``[fh, fw, C, M]``
    in both layouts; the result is ``[N, OH, OW, C*M]`` or ``[N, C*M, OH, OW]`` with output channel
    ``c*M + m``. ``strides``, ``dilations`` and ``explicit_paddings`` are in data_format order.
    ``padding``: "SAME" (the odd pad goes after), "VALID" or "EXPLICIT" (SPEC 5.3). T, the dtype
    of ``input``, is float16, bfloat16, float32 or float64, and ``filter`` must match it.
    Unlike TF's CPU kernel, NCHW, dilations and unequal row/column strides are accepted.
    """
    return _call(DepthwiseConv2dNativeDesc, (strides, padding, explicit_paddings, data_format, dilations),
                 (input, filter), out, backend)


def depthwise_conv2d_native_backprop_input(input_sizes: Any, filter: np.ndarray, out_backprop: np.ndarray,
                                           strides: Sequence[int], padding: str, *,
                                           explicit_paddings: Sequence[int] = (), data_format: str = "NHWC",
                                           dilations: Sequence[int] = (1, 1, 1, 1), out: np.ndarray | None = None,
                                           backend: str | None = None) -> np.ndarray:
    """``tf.raw_ops.DepthwiseConv2dNativeBackpropInput``: dX, the exact adjoint of the forward op
    with respect to its input (SPEC 5.4), of shape ``input_sizes``.

    ``input_sizes``: 4 ints in data_format order (a sequence of ints or a 1-D int32 array; int64
    arrays are rejected, as TF rejects int64 tensors). ``filter`` ``[fh, fw, C, M]`` and
    ``out_backprop`` (shaped like the forward output) share T: float16, bfloat16, float32 or
    float64. Half types accumulate in float32 and round once (SPEC 5.6). Unlike TF's CPU
    kernel, NCHW, dilations (honoured, not ignored) and unequal row/column strides are accepted.
    """
    return _call(DepthwiseConv2dNativeBackpropInputDesc, (strides, padding, explicit_paddings, data_format,
                 dilations), (input_sizes, filter, out_backprop), out, backend)


def depthwise_conv2d_native_backprop_filter(input: np.ndarray, filter_sizes: Any, out_backprop: np.ndarray,
                                            strides: Sequence[int], padding: str, *,
                                            explicit_paddings: Sequence[int] = (), data_format: str = "NHWC",
                                            dilations: Sequence[int] = (1, 1, 1, 1), out: np.ndarray | None = None,
                                            backend: str | None = None) -> np.ndarray:
    """``tf.raw_ops.DepthwiseConv2dNativeBackpropFilter``: dF ``[fh, fw, C, M]``, the exact adjoint
    of the forward op with respect to its filter (SPEC 5.4).

    ``filter_sizes``: 4 ints ``[fh, fw, C, M]`` (a sequence of ints or a 1-D int32 array).
    ``input`` and ``out_backprop`` share T: float16, bfloat16, float32 or float64; half types
    accumulate in float32 and round once. NCHW, dilations and unequal strides are accepted.
    """
    return _call(DepthwiseConv2dNativeBackpropFilterDesc, (strides, padding, explicit_paddings, data_format,
                 dilations), (input, filter_sizes, out_backprop), out, backend)


# --- registry: `gradops run` with TensorFlow field names -------------------------------------

_ATTR_FIELDS = ("strides", "padding", "explicit_paddings", "data_format", "dilations")


def run_tf_json(desc_cls: type[_DepthwiseDesc], arguments: tuple[str, ...], spec: Mapping[str, Any],
                base: Path) -> dict[str, np.ndarray]:
    """Run one op from a JSON document in TensorFlow's field names, e.g.
    ``{"operator": "DepthwiseConv2dNativeBackpropInput", "input_sizes": [1, 5, 5, 1],
    "filter": DATA, "out_backprop": DATA, "strides": [1, 2, 2, 1], "padding": "SAME",
    "T": "float"}``. DATA is inline nested lists or ``{"file": "x.npy"}``
    (see :func:`gradops.registry.load_data`); T (default "float") accepts TF and NumPy names.
    ``arguments`` are the op's inputs in call order; ``*_sizes`` ones are plain lists of ints."""
    allowed = {"operator", "T", "backend", *arguments, *_ATTR_FIELDS}
    unknown = set(spec) - allowed
    if unknown:
        raise DescriptorError.expected("JSON", f"only the fields {sorted(allowed)}", sorted(unknown))
    for name in ("strides", "padding", *arguments):
        if name not in spec:
            raise DescriptorError(name, f"missing: {desc_cls.OPERATOR} needs {name}")
    T = tf_dtype(spec.get("T", "float"))
    values: dict[str, Any] = {}
    for name in arguments:
        if name.endswith("_sizes"):
            values[name] = spec[name]
            continue
        data = load_data(spec[name], field_name=name, dtype=T, base=base)
        if data.dtype != T:
            raise DataTypeError.expected(f"{name}.dtype", f"{T.name} (T)", str(data.dtype))
        values[name] = data
    desc = desc_cls(T, **{name: spec[name] for name in _ATTR_FIELDS if name in spec})
    return {"output": desc(**values, backend=spec.get("backend"))}


_TF_DTYPES = ("half", "bfloat16", "float", "double")
OPS = tuple(
    OpInfo(desc_cls.OPERATOR, "TensorFlow", function, "4", _TF_DTYPES, None,
           partial(run_tf_json, desc_cls, arguments))
    for desc_cls, function, arguments in (
        (DepthwiseConv2dNativeDesc, "depthwise_conv2d_native", ("input", "filter")),
        (DepthwiseConv2dNativeBackpropInputDesc, "depthwise_conv2d_native_backprop_input",
         ("input_sizes", "filter", "out_backprop")),
        (DepthwiseConv2dNativeBackpropFilterDesc, "depthwise_conv2d_native_backprop_filter",
         ("input", "filter_sizes", "out_backprop")),
    )
)
