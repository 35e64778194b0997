"""Framework resize conventions as DirectML resample parameters (SPEC 6.1-6.4).

:class:`DmlResampleParams` holds what a DirectML resample call needs besides its tensors: the
operator (RESAMPLE1 or RESAMPLE2), the interpolation mode, the rounding direction and the
per-axis Scales and pixel offsets of the *forward* op. Its constructors translate a framework's
resize into those parameters::

    params = DmlResampleParams.from_tensorflow(x.shape, (H, W), "bilinear", half_pixel_centers=True)
    y = params.forward(x, (N, H, W, C))              # == tf.raw_ops.ResizeBilinear
    dx = params.gradient(dy, x.shape)                # == tf.raw_ops.ResizeBilinearGrad

``gradient`` calls RESAMPLE_GRAD / RESAMPLE_GRAD1 with :meth:`DmlResampleParams.grad_params`,
i.e. with the offsets swapped by the per-tensor convention of SPEC 3.6 [DECISION]: the
gradient of forward (S, ipo, opo) is the GRAD call (S, InputPixelOffsets=opo,
OutputPixelOffsets=ipo).

Parameters are float32 values (DirectML receives FLOAT, SPEC 3.2), computed with the
framework's own float32 arithmetic where it has one (TensorFlow's ``CalculateResizeScale``).
An axis that a convention does not resample gets ``S = 1`` with the half-pixel offsets
(0.5, -0.5), which maps every index to itself under every rounding rule (SPEC 6.1).

DirectML resamples at most 4 axes (RESAMPLE1 exactly 4, RESAMPLE2 1..4; SPEC 3.1).
``forward``/``gradient`` adapt other ranks as DirectML callers do (ONNX Runtime pads and
squeezes the same way): RESAMPLE1 gets leading size-1 identity axes, and a tensor of rank > 4
has its runs of adjacent unresampled axes merged into one. Both are exact: an identity axis
moves no data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal, Sequence

import numpy as np

from ._resample_plan import Rule, axis_taps
from .errors import DataTypeError, DescriptorError, ShapeError, UnsupportedError
from .resample import (_float32_values, resample1, resample2, resample_grad, resample_grad1,
                       resample_grad_params_from_forward)

__all__ = ["DmlResampleParams"]

Operator = Literal["RESAMPLE1", "RESAMPLE2"]
Mode = Literal["nearest", "linear"]
RoundingDirection = Literal["increasing", "decreasing"]
Axis = tuple[float, float, float]  # (Scale, forward InputPixelOffset, forward OutputPixelOffset)

# SPEC 3.1 / 8.7: RESAMPLE1 and RESAMPLE_GRAD are 4-D only, RESAMPLE2 and RESAMPLE_GRAD1 1..4-D.
_DML_RANKS = {"RESAMPLE1": range(4, 5), "RESAMPLE2": range(1, 5)}
_MODES = ("nearest", "linear")
_ROUNDING_DIRECTIONS = ("increasing", "decreasing")
# An axis that is not resampled (SPEC 6.1): x = (o + 0.5) / 1 - 0.5 = o exactly.
_IDENTITY: Axis = (1.0, 0.5, -0.5)
_FLT_MAX = float(np.finfo(np.float32).max)

_TF_METHODS = {"nearest": "nearest", "bilinear": "linear"}
_TORCH_NEAREST = ("nearest", "nearest-exact")
_TORCH_LINEAR_RANKS = {"linear": 1, "bilinear": 2, "trilinear": 3}  # spatial axes each mode requires
_JAX_METHODS = {"nearest": "nearest", "linear": "linear", "bilinear": "linear", "trilinear": "linear"}
_ONNX_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_half_pixel_for_nn", "tf_crop_and_resize")
# SPEC 3.3: ONNX nearest_mode -> (RoundingDirection, shift added to every InputPixelOffset).
_ONNX_NEAREST_MODES: dict[str, tuple[RoundingDirection, float]] = {
    "round_prefer_floor": ("increasing", 0.5),
    "round_prefer_ceil": ("decreasing", -0.5),
    "floor": ("decreasing", 0.0),
    "ceil": ("increasing", 0.0),
}


def _f32_div(numerator: float, denominator: float) -> float:
    """``fl32(numerator / denominator)``: one correctly rounded float32 division, as C++
    ``a / static_cast<float>(b)`` computes it (exact operands for sizes below 2**24)."""
    return float(np.float32(numerator) / np.float32(denominator))


@dataclass(frozen=True)
class DmlResampleParams:
    """The non-tensor parameters of a DirectML forward resample, one entry per axis.

    ``operator``: ``"RESAMPLE1"`` (nearest rule ``floor(x + 0.5)``) or ``"RESAMPLE2"``.
    ``mode``: ``"nearest"`` or ``"linear"``. ``rounding_direction``: ``"decreasing"`` (floor) or
    ``"increasing"`` (ceil), required by RESAMPLE2 in nearest mode, ``None`` otherwise.
    ``scales`` (> 0), ``input_pixel_offsets`` and ``output_pixel_offsets`` are the forward op's
    and are stored as float32 values.
    """

    operator: Operator
    mode: Mode
    rounding_direction: RoundingDirection | None
    scales: tuple[float, ...]
    input_pixel_offsets: tuple[float, ...]
    output_pixel_offsets: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.operator not in _DML_RANKS:
            raise DescriptorError.expected("operator", "'RESAMPLE1' or 'RESAMPLE2'", self.operator)
        if self.mode not in _MODES:
            raise DescriptorError.expected("mode", "'nearest' or 'linear'", self.mode)
        if self.operator == "RESAMPLE1" or self.mode == "linear":
            if self.rounding_direction is not None:
                raise DescriptorError.expected("rounding_direction", f"None ({self.operator} {self.mode} has no "
                                               "rounding direction, SPEC 3.3)", self.rounding_direction)
        elif self.rounding_direction not in _ROUNDING_DIRECTIONS:
            raise DescriptorError.expected("rounding_direction", "'decreasing' (floor) or 'increasing' (ceil) for "
                                           "RESAMPLE2 nearest", self.rounding_direction)
        if isinstance(self.scales, (str, bytes)) or not isinstance(self.scales, (Sequence, np.ndarray)) \
                or len(self.scales) == 0:
            raise DescriptorError.expected("scales", "a non-empty sequence of numbers (one per axis)", self.scales)
        rank = len(self.scales)
        object.__setattr__(self, "scales", _float32_values("scales", self.scales, rank, "one per axis",
                                                           positive=True))
        for name in ("input_pixel_offsets", "output_pixel_offsets"):
            object.__setattr__(self, name, _float32_values(name, getattr(self, name), rank, "as many as scales",
                                                           positive=False))

    @property
    def rank(self) -> int:
        return len(self.scales)

    @property
    def axes(self) -> tuple[Axis, ...]:
        """``(Scale, InputPixelOffset, OutputPixelOffset)`` of the forward op, per axis."""
        return tuple(zip(self.scales, self.input_pixel_offsets, self.output_pixel_offsets))

    def grad_params(self) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        """``(Scales, InputPixelOffsets, OutputPixelOffsets)`` of the GRAD call (SPEC 3.6,
        per-tensor): the forward scales, GRAD InputPixelOffsets = forward OutputPixelOffsets,
        GRAD OutputPixelOffsets = forward InputPixelOffsets."""
        return resample_grad_params_from_forward(self.scales, self.input_pixel_offsets, self.output_pixel_offsets)

    def as_resample2(self) -> DmlResampleParams:
        """The equivalent RESAMPLE2 parameters. RESAMPLE1's nearest rule ``floor(x + 0.5)`` is
        RESAMPLE2 DECREASING with every InputPixelOffset lowered by 0.5 (SPEC 0.6; the doc's
        remark names OutputPixelOffsets, which is wrong, SPEC 8.2). Linear is unchanged."""
        if self.operator == "RESAMPLE2":
            return self
        if self.mode == "linear":
            return replace(self, operator="RESAMPLE2")
        return replace(self, operator="RESAMPLE2", rounding_direction="decreasing",
                       input_pixel_offsets=tuple(ipo - 0.5 for ipo in self.input_pixel_offsets))

    def as_resample1(self) -> DmlResampleParams:
        """The equivalent RESAMPLE1 parameters: the inverse of :meth:`as_resample2`. RESAMPLE2
        INCREASING (ceil) has no RESAMPLE1 form, since ``floor(x + 0.5)`` cannot round an
        integer coordinate up (SPEC 3.3)."""
        if self.operator == "RESAMPLE1":
            return self
        if self.mode == "linear":
            return replace(self, operator="RESAMPLE1", rounding_direction=None)
        if self.rounding_direction == "increasing":
            raise UnsupportedError("rounding_direction", "RESAMPLE2 'increasing' (ceil) has no RESAMPLE1 "
                                   "equivalent: RESAMPLE1 rounds with floor(x + 0.5) (SPEC 3.3)")
        return replace(self, operator="RESAMPLE1", rounding_direction=None,
                       input_pixel_offsets=tuple(ipo + 0.5 for ipo in self.input_pixel_offsets))

    def forward(self, x: np.ndarray, output_sizes: Sequence[int], *, out: np.ndarray | None = None,
                backend: str | None = None) -> np.ndarray:
        """Run the forward op (``resample1`` or ``resample2``) on ``x`` (float32 or float16,
        rank = ``self.rank``), producing an array of shape ``output_sizes``."""
        x = self._array("x", x)
        output_sizes = self._sizes("output_sizes", output_sizes)
        params, in_shape, out_shape = self._fit_rank(x.shape, output_sizes, "x")
        x, out_view = x.reshape(in_shape), self._out_view(out, out_shape, output_sizes)
        kwargs = dict(mode=params.mode, scales=params.scales, input_pixel_offsets=params.input_pixel_offsets,
                      output_pixel_offsets=params.output_pixel_offsets, out=out_view, backend=backend)
        if params.operator == "RESAMPLE1":
            y = resample1(x, out_shape, **kwargs)
        else:
            y = resample2(x, out_shape, rounding_direction=params.rounding_direction, **kwargs)
        return out if out is not None else y.reshape(output_sizes)

    def gradient(self, dy: np.ndarray, input_sizes: Sequence[int], *, out: np.ndarray | None = None,
                 backend: str | None = None) -> np.ndarray:
        """Run the gradient op (``resample_grad`` or ``resample_grad1`` with
        :meth:`grad_params`): ``dy`` has the forward output's shape, the result has the forward
        input's shape ``input_sizes``."""
        dy = self._array("dy", dy)
        input_sizes = self._sizes("input_sizes", input_sizes)
        params, in_shape, out_shape = self._fit_rank(input_sizes, dy.shape, "dy")
        dy, out_view = dy.reshape(out_shape), self._out_view(out, in_shape, input_sizes)
        scales, grad_ipo, grad_opo = params.grad_params()
        kwargs = dict(mode=params.mode, scales=scales, input_pixel_offsets=grad_ipo, output_pixel_offsets=grad_opo,
                      offset_convention="per-tensor", out=out_view, backend=backend)
        if params.operator == "RESAMPLE1":
            dx = resample_grad(dy, in_shape, **kwargs)
        else:
            dx = resample_grad1(dy, in_shape, rounding_direction=params.rounding_direction, **kwargs)
        return out if out is not None else dx.reshape(input_sizes)

    # --- rank adaptation -----------------------------------------------------------------------

    def _array(self, name: str, value: Any) -> np.ndarray:
        if not isinstance(value, np.ndarray):
            raise DataTypeError.expected(name, "a NumPy array", value)
        if value.ndim != self.rank:
            raise ShapeError.expected(f"{name}.ndim", f"{self.rank} (one axis per scale)", value.ndim)
        return value

    def _sizes(self, name: str, sizes: Any) -> tuple[int, ...]:
        return _shape(name, sizes, ranks=(self.rank,))

    def _rule(self) -> Rule:
        if self.operator == "RESAMPLE1":
            return "half_up"
        return "ceil" if self.rounding_direction == "increasing" else "floor"

    def _is_identity(self, axis: int, n_in: int, n_out: int) -> bool:
        """Whether ``axis`` maps every output index to the same input index with weight 1."""
        if n_in != n_out:
            return False
        index, weight = axis_taps(n_in, n_out, *self.axes[axis], self.mode, self._rule())
        return bool(np.array_equal(index[:, 0], np.arange(n_in)) and np.all(weight[:, 0] == 1))

    def _fit_rank(self, in_shape: Sequence[int], out_shape: Sequence[int], name: str
                  ) -> tuple[DmlResampleParams, tuple[int, ...], tuple[int, ...]]:
        """Parameters and forward (input, output) shapes with a rank the operator accepts."""
        ranks = _DML_RANKS[self.operator]
        if self.rank in ranks:
            return self, tuple(in_shape), tuple(out_shape)
        if self.rank < ranks.start:  # RESAMPLE1 below 4-D: leading identity axes of size 1
            pad = ranks.start - self.rank
            params = self._with_axes((_IDENTITY,) * pad + self.axes)
            return params, (1,) * pad + tuple(in_shape), (1,) * pad + tuple(out_shape)
        merged_axes: list[Axis] = []
        merged_in: list[int] = []
        merged_out: list[int] = []
        previous_identity = False
        for d, (n_in, n_out) in enumerate(zip(in_shape, out_shape)):
            identity = self._is_identity(d, n_in, n_out)
            if identity and previous_identity:
                merged_in[-1] *= n_in
                merged_out[-1] *= n_out
            else:
                merged_axes.append(_IDENTITY if identity else self.axes[d])
                merged_in.append(n_in)
                merged_out.append(n_out)
            previous_identity = identity
        if len(merged_axes) not in ranks:
            raise ShapeError(f"{name}.ndim", f"{self.operator} resamples at most {ranks.stop - 1} axes (SPEC 3.1); "
                             f"merging adjacent axes that are not resampled leaves {len(merged_axes)}")
        return self._with_axes(tuple(merged_axes)), tuple(merged_in), tuple(merged_out)

    def _with_axes(self, axes: Sequence[Axis]) -> DmlResampleParams:
        scales, ipo, opo = zip(*axes)
        return replace(self, scales=scales, input_pixel_offsets=ipo, output_pixel_offsets=opo)

    @staticmethod
    def _out_view(out: Any, shape: tuple[int, ...], sizes: tuple[int, ...]) -> Any:
        """``out`` seen with the operator's ``shape`` (``sizes`` with axes padded or merged);
        the operator validates it further."""
        if out is None or shape == sizes or not isinstance(out, np.ndarray):
            return out
        if out.shape != sizes:
            raise ShapeError.expected("out.shape", sizes, out.shape)
        try:
            return np.reshape(out, shape, copy=False)
        except ValueError as exc:
            raise ShapeError("out", f"expected an array that can be viewed with shape {shape} (its unresampled "
                             "axes merged) without a copy, e.g. a C-contiguous one") from exc

    # --- constructors ---------------------------------------------------------------------------

    @classmethod
    def _from_axes(cls, operator: Operator, mode: Mode, rounding_direction: RoundingDirection | None,
                   axes: Sequence[Axis]) -> DmlResampleParams:
        scales, ipo, opo = zip(*axes)
        return cls(operator, mode, rounding_direction, scales, ipo, opo)

    @classmethod
    def from_tensorflow(cls, input_shape: Sequence[int], output_size: Sequence[int], method: str = "nearest",
                        align_corners: bool = False, half_pixel_centers: bool = False) -> DmlResampleParams:
        """``tf.raw_ops.ResizeNearestNeighbor`` / ``ResizeBilinear`` (and their Grad ops) on an
        NHWC tensor of shape ``input_shape``, resized to ``output_size = (H, W)`` (SPEC 6.1).

        ``method``: ``"nearest"`` or ``"bilinear"``. RESAMPLE1, as TensorFlow-DirectML calls it,
        with ``S = fl32(1 / tf_scale)`` where ``tf_scale`` is TensorFlow's float32
        ``CalculateResizeScale``: ``in/out``, or ``(in-1)/(out-1)`` with ``align_corners`` and
        ``out > 1``. Offsets (forward ipo, opo) on H and W:

        ========================  ===============  ================
        attributes                nearest          bilinear
        ========================  ===============  ================
        (default)                 (0.5, 0)         (0, 0)
        ``align_corners``         (0, 0)           (0, 0)
        ``half_pixel_centers``    (0.5, -0.5)      (0.5, -0.5)
        ========================  ===============  ================

        TensorFlow rejects ``align_corners`` together with ``half_pixel_centers``, and so does
        this. With ``align_corners`` and an input of size 1, TensorFlow's scale is 0 and every
        output reads that one element; DirectML needs ``S > 0``, and TensorFlow-DirectML then
        substitutes one over its input size (in TensorFlow's in/out direction), i.e.
        ``S = out/in``. Any ``S > 0`` gives the same result on a size-1 axis, where every sample
        clamps to index 0 (SPEC 6.1).
        """
        in_shape = _shape("input_shape", input_shape, ranks=(4,), what="an NHWC shape")
        out_hw = _shape("output_size", output_size, ranks=(2,), what="(height, width)")
        mode = _choice("method", method, _TF_METHODS)
        align_corners = _flag("align_corners", align_corners)
        half_pixel_centers = _flag("half_pixel_centers", half_pixel_centers)
        if align_corners and half_pixel_centers:
            raise DescriptorError("half_pixel_centers", "if half_pixel_centers is True, align_corners must be False "
                                  "(as TensorFlow requires)")
        if mode == "nearest":
            offsets = (0.0 if align_corners else 0.5, -0.5 if half_pixel_centers else 0.0)
        else:
            offsets = (0.5, -0.5) if half_pixel_centers else (0.0, 0.0)
        spatial = [(_tensorflow_scale(n_in, n_out, align_corners), *offsets)
                   for n_in, n_out in zip(in_shape[1:3], out_hw)]
        return cls._from_axes("RESAMPLE1", mode, None, [_IDENTITY, *spatial, _IDENTITY])

    @classmethod
    def from_torch(cls, input_shape: Sequence[int], output_size: int | Sequence[int] | None = None,
                   mode: str = "nearest", align_corners: bool | None = None,
                   scale_factor: float | Sequence[float] | None = None) -> DmlResampleParams:
        """``torch.nn.functional.interpolate`` (and the ``aten.upsample_*`` ops and their
        backward ops) on an ``(N, C, *spatial)`` tensor with 1..3 spatial axes (SPEC 6.2).

        ``mode``: ``"nearest"``, ``"nearest-exact"``, or ``"linear"`` / ``"bilinear"`` /
        ``"trilinear"`` for 1 / 2 / 3 spatial axes, as torch requires. ``align_corners`` is for
        the linear modes only (default False). Pass exactly one of ``output_size`` and
        ``scale_factor`` (``recompute_scale_factor`` not True: the factor reaches the kernel).

        RESAMPLE2 (1..4-D; a 3-D resample of a 5-D tensor merges N and C). Per spatial axis:
        nearest DECREASING (0, 0); nearest-exact DECREASING (0, -0.5); linear (0.5, -0.5), or
        (0, 0) with ``S = (out-1)/(in-1)`` for ``align_corners`` (``S = out/in`` when either size
        is 1: torch's scale 0 maps every output to index 0, as any ``S > 0`` does here). Scales
        are ``fl32(out/in)``, or ``fl32(scale_factor)``, which torch uses as ``1/scale_factor``.

        With ``scale_factor``, torch's kernels ignore the factor in some cases, and so does this
        mapping: the linear kernels leave an axis whose size is unchanged alone (identity), and
        the nearest kernels' index function maps ``out == in`` to the identity and
        ``out == 2*in`` to ``o // 2`` (here ``S = 2``). torch's ``upsample_nearest1d`` and
        ``upsample_nearest3d`` *forward* kernels do not take those shortcuts although their
        backward kernels do, so there torch's forward disagrees with its own gradient and with
        this mapping [RUN, torch 2.13].
        """
        in_shape = _shape("input_shape", input_shape, ranks=(3, 4, 5), what="an (N, C, *spatial) shape")
        spatial_in = in_shape[2:]
        count = len(spatial_in)
        if not isinstance(mode, str) or mode not in _TORCH_NEAREST and mode not in _TORCH_LINEAR_RANKS:
            raise DescriptorError.expected("mode", "'nearest', 'nearest-exact', 'linear', 'bilinear' or 'trilinear'",
                                           mode)
        if mode in _TORCH_LINEAR_RANKS and _TORCH_LINEAR_RANKS[mode] != count:
            raise ShapeError.expected("input_shape", f"a {_TORCH_LINEAR_RANKS[mode] + 2}-D shape for mode {mode!r}",
                                      tuple(input_shape))
        if mode in _TORCH_NEAREST and align_corners is not None:
            raise DescriptorError.expected("align_corners", "None for the nearest modes (torch accepts it only "
                                           "with the linear modes)", align_corners)
        align_corners = _flag("align_corners", False if align_corners is None else align_corners)
        if (output_size is None) == (scale_factor is None):
            raise DescriptorError("output_size", "pass exactly one of output_size and scale_factor (as torch does)")
        factors: tuple[float | None, ...]
        if output_size is not None:
            sizes = (output_size,) * count if isinstance(output_size, (int, np.integer)) else output_size
            spatial_out = _shape("output_size", sizes, ranks=(count,), what="one size per spatial axis")
            factors = (None,) * count
        else:
            factors = _positive_numbers("scale_factor", scale_factor, count)
            # torch: math.floor(float(input size) * scale_factor), in double precision
            spatial_out = tuple(math.floor(float(n) * f) for n, f in zip(spatial_in, factors))
            for d, n_out in enumerate(spatial_out):
                if n_out < 1:
                    raise ShapeError.expected(f"scale_factor[{d}]", f"a factor giving an output size >= 1 for input "
                                              f"size {spatial_in[d]}", factors[d])
        spatial = [_torch_axis(mode, align_corners, n_in, n_out, factor)
                   for n_in, n_out, factor in zip(spatial_in, spatial_out, factors)]
        dml_mode: Mode = "nearest" if mode in _TORCH_NEAREST else "linear"
        return cls._from_axes("RESAMPLE2", dml_mode, "decreasing" if dml_mode == "nearest" else None,
                              [_IDENTITY, _IDENTITY, *spatial])

    @classmethod
    def from_jax(cls, input_shape: Sequence[int], output_shape: Sequence[int], method: str = "nearest",
                 antialias: bool = False) -> DmlResampleParams:
        """``jax.image.resize(x, output_shape, method, antialias=False)`` (SPEC 6.3): every axis
        whose size changes is resampled, batch and channel axes included.

        RESAMPLE2 with ``S = fl32(out/in)``: nearest DECREASING (0, -0.5), i.e.
        ``floor((o + 0.5) * in / out)``; ``"linear"`` (also ``"bilinear"``, ``"trilinear"``, which
        JAX treats alike) on the half-pixel grid (0.5, -0.5). ``antialias=True`` widens JAX's
        linear filter when an axis shrinks; DirectML has no gradient for an antialiased filter
        (RESAMPLE3, SPEC 3.8), so that combination raises. JAX's cubic and lanczos methods have
        no DirectML mode.
        """
        in_shape = _shape("input_shape", input_shape)
        out_shape = _shape("output_shape", output_shape, ranks=(len(in_shape),), what="one size per input axis")
        if isinstance(method, str) and method in ("cubic", "lanczos3", "lanczos5"):
            raise UnsupportedError("method", f"DirectML has no {method} interpolation (only nearest and linear)")
        mode = _choice("method", method, _JAX_METHODS)
        antialias = _flag("antialias", antialias)
        if antialias and mode == "linear" and any(o < i for i, o in zip(in_shape, out_shape)):
            raise UnsupportedError("antialias", "jax's antialiased linear filter (an axis shrinks) has no DirectML "
                                   "gradient (RESAMPLE3 has none, SPEC 3.8); use antialias=False")
        offsets = (0.0, -0.5) if mode == "nearest" else (0.5, -0.5)
        axes = [_IDENTITY if n_in == n_out else (_f32_div(n_out, n_in), *offsets)
                for n_in, n_out in zip(in_shape, out_shape)]
        return cls._from_axes("RESAMPLE2", mode, "decreasing" if mode == "nearest" else None, axes)

    @classmethod
    def from_onnx(cls, input_shape: Sequence[int], output_shape: Sequence[int], mode: str = "nearest",
                  coordinate_transformation_mode: str = "half_pixel", nearest_mode: str = "round_prefer_floor",
                  scales: Sequence[float] | None = None, roi: Sequence[float] | None = None,
                  extrapolation_value: float = 0.0) -> DmlResampleParams:
        """ONNX ``Resize`` (``mode`` ``"nearest"`` or ``"linear"``) as RESAMPLE2 (SPEC 6.4 and the
        ``nearest_mode`` table of SPEC 3.3). Defaults are ONNX's.

        ``output_shape`` is the Resize output (it decides which indices exist, SPEC 3.5);
        ``scales`` are ONNX's per-axis scales, by default ``fl32(out/in)``; ``roi``
        (``[starts..., ends...]`` normalised) is required by ``tf_crop_and_resize``. Every axis
        gets the coordinate transform, as ONNX defines it:

        ==========================  ============================  ======  ==========================
        coordinate_transformation   ipo                           opo     Scale
        ==========================  ============================  ======  ==========================
        half_pixel                  0.5                           -0.5    scale
        half_pixel_symmetric        0.5 - (in/2)(1 - out/(S in))  -0.5    scale
        pytorch_half_pixel          0.5 (0 if in or out <= 1)     -0.5    scale (FLT_MAX if <= 1)
        align_corners               0                             0       (out-1)/(in-1) (FLT_MAX)
        asymmetric                  0                             0       scale
        tf_half_pixel_for_nn        0                             -0.5    scale
        tf_crop_and_resize          -start (in-1)                 0       (out-1)/((end-start)(in-1))
        ==========================  ============================  ======  ==========================

        then, in nearest mode, ``round_prefer_floor`` -> INCREASING with ipo + 0.5,
        ``round_prefer_ceil`` -> DECREASING with ipo - 0.5, ``floor`` -> DECREASING,
        ``ceil`` -> INCREASING.

        half_pixel_symmetric's ipo is computed in float32, one rounding per step, as ONNX
        Runtime's DML provider and CPU kernel compute it (``fl32(S * in)`` is ``out`` exactly when
        ``S = fl32(out/in)``, so the offset is then 0.5). ``length_resized`` is the output size
        ``out`` (ONNX Runtime's CPU and DML kernels) [DECISION], not ONNX's reference ``in * scale``,
        which is fractional when ``scales`` are given (align_corners 4 -> 2 at scale 0.6 samples
        x = 3 here and in ONNX Runtime, x = 3 / 1.4 in the reference, SPEC 6.4).

        Two rows follow ONNX where ONNX Runtime's DML provider (SPEC 6.4's source) does not:
        pytorch_half_pixel also degenerates when ``out <= 1`` (ONNX: "length_resized > 1 ? ...
        : 0"; ORT tests only ``in <= 1``), and tf_crop_and_resize uses the exact scale (ORT
        clamps the denominator to >= 1); with ``out == 1`` it samples the roi centre
        ``(start + end)/2 (in - 1)`` as ONNX says. ONNX's tf_crop_and_resize writes
        ``extrapolation_value`` where a sample falls outside the input; DirectML clamps there
        (SPEC 3.5) and has no such value, so a roi that samples outside (a start below 0 or an
        end above 1 on an axis of size > 1) raises :class:`UnsupportedError`, whatever
        ``extrapolation_value`` is. A roi with ``end <= start`` has no DirectML form (scales must
        be > 0).
        """
        in_shape = _shape("input_shape", input_shape)
        rank = len(in_shape)
        out_shape = _shape("output_shape", output_shape, ranks=(rank,), what="one size per input axis")
        if isinstance(mode, str) and mode == "cubic":
            raise UnsupportedError("mode", "DirectML has no cubic interpolation (SPEC 6.4)")
        dml_mode = _choice("mode", mode, {"nearest": "nearest", "linear": "linear"})
        transform = _choice("coordinate_transformation_mode", coordinate_transformation_mode,
                            {name: name for name in _ONNX_TRANSFORMS})
        if dml_mode == "nearest":
            rounding_direction, ipo_shift = _choice("nearest_mode", nearest_mode, _ONNX_NEAREST_MODES)
        else:
            rounding_direction, ipo_shift = None, 0.0
        onnx_scales = (tuple(_f32_div(o, i) for i, o in zip(in_shape, out_shape)) if scales is None
                       else tuple(float(np.float32(s)) for s in _positive_numbers("scales", scales, rank)))
        if transform == "tf_crop_and_resize":
            if roi is None:
                raise DescriptorError("roi", "required by coordinate_transformation_mode 'tf_crop_and_resize'")
            bounds = _numbers("roi", roi, 2 * rank)
            crops = [(float(np.float32(bounds[d])), float(np.float32(bounds[d + rank]))) for d in range(rank)]
            _check_extrapolation(in_shape, out_shape, crops, extrapolation_value)
        else:
            crops = [(0.0, 1.0)] * rank
        axes = []
        for d, (n_in, n_out, scale, crop) in enumerate(zip(in_shape, out_shape, onnx_scales, crops)):
            s, ipo, opo = _onnx_axis(transform, n_in, n_out, scale, crop, d)
            axes.append((s, float(np.float32(ipo) + np.float32(ipo_shift)), opo))  # float32, as ORT's DML EP
        return cls._from_axes("RESAMPLE2", dml_mode, rounding_direction, axes)


# --- per-axis mappings ---------------------------------------------------------------------------

def _tensorflow_scale(n_in: int, n_out: int, align_corners: bool) -> float:
    """DML ``S = fl32(1 / tf_scale)`` with TensorFlow's float32 ``CalculateResizeScale`` (SPEC 6.1)."""
    tf_scale = _f32_div(n_in - 1, n_out - 1) if align_corners and n_out > 1 else _f32_div(n_in, n_out)
    if tf_scale == 0:  # align_corners with n_in == 1: see from_tensorflow
        return _f32_div(n_out, n_in)
    return _f32_div(1, tf_scale)


def _torch_axis(mode: str, align_corners: bool, n_in: int, n_out: int, factor: float | None) -> Axis:
    """One spatial axis of :meth:`DmlResampleParams.from_torch` (SPEC 6.2)."""
    if mode in _TORCH_NEAREST:
        offsets = (0.0, 0.0) if mode == "nearest" else (0.0, -0.5)
        if factor is None:
            return (_f32_div(n_out, n_in), *offsets)
        if mode == "nearest" and n_out == n_in:
            return _IDENTITY
        if mode == "nearest" and n_out == 2 * n_in:
            return (2.0, *offsets)
        return (float(np.float32(factor)), *offsets)
    if align_corners:  # torch ignores scale_factor with align_corners
        scale = _f32_div(n_out - 1, n_in - 1) if n_in > 1 and n_out > 1 else _f32_div(n_out, n_in)
        return (scale, 0.0, 0.0)
    if factor is None:
        return (_f32_div(n_out, n_in), 0.5, -0.5)
    if n_out == n_in:
        return _IDENTITY
    return (float(np.float32(factor)), 0.5, -0.5)


def _onnx_axis(transform: str, n_in: int, n_out: int, scale: float, crop: tuple[float, float], d: int) -> Axis:
    """One axis of :meth:`DmlResampleParams.from_onnx` before the nearest_mode shift (SPEC 6.4),
    in float64 from float32 operands; the result is rounded to float32 once."""
    if transform == "half_pixel":
        return (scale, 0.5, -0.5)
    if transform == "half_pixel_symmetric":  # float32 steps, as ORT: 0.5 - (in/2)(1 - out/(S in))
        f32 = np.float32
        adjustment = f32(n_out) / (f32(scale) * f32(n_in))
        return (scale, float(f32(0.5) - f32(n_in) / f32(2) * (f32(1) - adjustment)), -0.5)
    if transform == "pytorch_half_pixel":
        return (_FLT_MAX, 0.0, 0.0) if n_in <= 1 or n_out <= 1 else (scale, 0.5, -0.5)
    if transform == "align_corners":
        return (_FLT_MAX, 0.0, 0.0) if n_in <= 1 or n_out <= 1 else (_f32_div(n_out - 1, n_in - 1), 0.0, 0.0)
    if transform == "asymmetric":
        return (scale, 0.0, 0.0)
    if transform == "tf_half_pixel_for_nn":
        return (scale, 0.0, -0.5)
    start, end = np.float32(crop[0]), np.float32(crop[1])  # tf_crop_and_resize, float32 steps as ORT's DML EP
    span = np.float32(n_in - 1)
    if n_out == 1:  # ONNX: x = (start + end) / 2 * (in - 1)
        return (1.0, float(-(np.float32(0.5) * (start + end) * span)), 0.0)
    if n_in == 1:  # every sample clamps to the single element
        return (1.0, 0.0, 0.0)
    if not end > start:
        raise UnsupportedError(f"roi[{d}]", f"end ({end}) must exceed start ({start}): DirectML scales are > 0")
    return (float(np.float32(n_out - 1) / ((end - start) * span)), float(-(start * span)), 0.0)


def _check_extrapolation(in_shape: Sequence[int], out_shape: Sequence[int], crops: Sequence[tuple[float, float]],
                         extrapolation_value: Any) -> None:
    """ONNX tf_crop_and_resize writes ``extrapolation_value`` at samples outside [0, in - 1];
    they exist iff the roi leaves [0, 1] on an axis of size > 1 (samples run from
    ``start (in-1)`` to ``end (in-1)``, or sit at the centre when ``out == 1``)."""
    if isinstance(extrapolation_value, bool) or not isinstance(extrapolation_value, (int, float, np.integer,
                                                                                      np.floating)):
        raise DescriptorError.expected("extrapolation_value", "a number", extrapolation_value)
    rank = len(in_shape)
    for d, (n_in, n_out, (start, end)) in enumerate(zip(in_shape, out_shape, crops)):
        outside = [] if n_in == 1 else [i for i, r in ((d, start), (d + rank, end)) if not 0 <= r <= 1]
        if n_out == 1:  # the one sample sits at the roi's centre
            outside = outside[:1] if n_in > 1 and not 0 <= (start + end) / 2 <= 1 else []
        if outside:
            raise UnsupportedError(f"roi[{outside[0]}]", f"axis {d}'s roi ({start:g}, {end:g}) samples outside the "
                                   f"input, where ONNX writes extrapolation_value ({float(extrapolation_value):g}); "
                                   "DirectML clamps to the edge and has no such value (SPEC 3.5, 6.4)")


# --- argument checks -------------------------------------------------------------------------------

def _shape(name: str, value: Any, *, ranks: Sequence[int] | None = None, what: str = "a shape") -> tuple[int, ...]:
    """A tuple of integer sizes >= 1, with a length in ``ranks`` (any length >= 1 if None)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise ShapeError.expected(name, f"{what} (a sequence of sizes)", value)
    if ranks is not None and len(value) not in ranks or len(value) == 0:
        wanted = " or ".join(str(r) for r in ranks) if ranks else "at least 1"
        raise ShapeError.expected(name, f"{what} with {wanted} entries", tuple(value))
    for d, size in enumerate(value):
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ShapeError.expected(f"{name}[{d}]", "an integer size >= 1", size)
    return tuple(int(size) for size in value)


def _numbers(name: str, value: Any, count: int) -> tuple[float, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)) or len(value) != count:
        raise DescriptorError.expected(name, f"a sequence of {count} numbers", value)
    for d, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
            raise DescriptorError.expected(f"{name}[{d}]", "a finite number", v)
    return tuple(float(v) for v in value)


def _positive_numbers(name: str, value: Any, count: int) -> tuple[float, ...]:
    """``count`` finite numbers > 0; a single number stands for all of them."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        value = (value,) * count
    numbers = _numbers(name, value, count)
    for d, v in enumerate(numbers):
        if not v > 0:
            raise DescriptorError.expected(f"{name}[{d}]", "a number > 0", v)
    return numbers


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise DescriptorError.expected(name, "True or False", value)
    return bool(value)


def _choice(name: str, value: Any, choices: dict[str, Any]) -> Any:
    if not isinstance(value, str) or value not in choices:
        raise DescriptorError.expected(name, " or ".join(repr(c) for c in choices), value)
    return choices[value]
