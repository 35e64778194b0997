"""The DirectML resample descriptors (SPEC 3.1) and their registry entries (``gradops ops`` /
``gradops run``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property, partial
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from ._arrays import prepare_out
from ._backend import resolve_backend
from ._resample_params import (_DML_FIELDS, _DML_V0_FIELDS, _RESAMPLE, _RESAMPLE1, _RESAMPLE2, _RESAMPLE_GRAD,
                               _RESAMPLE_GRAD1, AxisDirection, InterpolationMode, _Op, _Plan, _plan)
from ._resample_reference import _dispatch
from .dml import DataType, FeatureLevel, OperatorDesc, TensorDesc, dml_name, require_feature_level
from .errors import DataTypeError, DescriptorError, ShapeError, UnsupportedError
from .registry import OpInfo, run_dml_json


# --- DirectML operator descriptors -----------------------------------------------------------

class _ResampleOperator(OperatorDesc):
    """Validation and execution shared by the five descriptors (SPEC 3.1)."""

    OP: ClassVar[_Op]
    COUNT_FIELD: ClassVar[str] = "dimension_count"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """The operator's constants follow from ``OP``: type, value, level and tensor fields."""
        super().__init_subclass__(**kwargs)
        op = cls.OP
        cls.OPERATOR_TYPE, cls.OPERATOR_VALUE, cls.FEATURE_LEVEL = op.operator_type, op.operator_value, op.feature_level
        cls.INPUTS, cls.OUTPUTS = (("input_gradient_tensor",), ("output_gradient_tensor",)) if op.gradient \
            else (("input_tensor",), ("output_tensor",))

    def validate(self, feature_level: FeatureLevel | str | int | None = None) -> None:
        """Apply every rule of SPEC 3.1; raise naming the field at fault."""
        op = self.OP
        level = None if feature_level is None else FeatureLevel.of(feature_level)
        require_feature_level(level, op.feature_level, op.operator_type)
        (source_field,), (target_field,) = self.INPUTS, self.OUTPUTS
        source_name, target_name = dml_name(source_field), dml_name(target_field)
        source, target = getattr(self, source_field), getattr(self, target_field)
        for name, desc in ((source_name, source), (target_name, target)):
            if not isinstance(desc, TensorDesc):
                raise DescriptorError.expected(name, "a TensorDesc", desc)
        source.validate(source_name, ranks=op.ranks)
        target.validate(target_name, output=True, ranks=op.ranks)
        rank = source.dimension_count
        if target.dimension_count != rank:
            raise ShapeError.expected(f"{target_name}.DimensionCount", f"{rank} (as {source_name})",
                                      target.dimension_count)
        count_name, count = dml_name(self.COUNT_FIELD), getattr(self, self.COUNT_FIELD)
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count != rank:
            raise ShapeError.expected(count_name, f"{rank} (the rank of {source_name} and {target_name})", count)
        if target.data_type != source.data_type:
            raise DataTypeError.expected(f"{target_name}.DataType", f"{source.data_type.name} (as {source_name})",
                                         target.data_type.name)
        if source.data_type not in (DataType.FLOAT32, DataType.FLOAT16):
            if op is _RESAMPLE2 and source.data_type in (DataType.INT8, DataType.UINT8):
                raise UnsupportedError(f"{source_name}.DataType", f"{source.data_type.name} is documented for "
                                       "RESAMPLE2 from DML_FEATURE_LEVEL_6_2; gradops implements FLOAT32 and "
                                       "FLOAT16 only")
            raise DataTypeError.expected(f"{source_name}.DataType", "FLOAT32 or FLOAT16", source.data_type.name)
        self._plan  # noqa: B018 - validates the enums, scales and offsets, and builds the taps once

    @cached_property
    def _plan(self) -> _Plan:
        """The validated parameters and per-axis taps, computed once per descriptor."""
        op = self.OP
        source, target = getattr(self, self.INPUTS[0]), getattr(self, self.OUTPUTS[0])
        forward_in, forward_out = (target.sizes, source.sizes) if op.gradient else (source.sizes, target.sizes)
        names = _DML_FIELDS if self.COUNT_FIELD == "dimension_count" else _DML_V0_FIELDS
        return _plan(op, forward_in, forward_out, names, source.data_type.numpy_dtype.itemsize,
                     mode=self.interpolation_mode,  # type: ignore[attr-defined]
                     rounding_direction=getattr(self, "rounding_direction", None),
                     scales=self.scales,  # type: ignore[attr-defined]
                     input_pixel_offsets=getattr(self, "input_pixel_offsets", None),
                     output_pixel_offsets=getattr(self, "output_pixel_offsets", None),
                     offset_convention=getattr(self, "offset_convention", "per-tensor"))

    def _execute(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], backend: str | None) -> None:
        source, target = inputs[0], outputs[0]
        prepare_out(target, shape=target.shape, dtype=source.dtype, inputs={dml_name(self.INPUTS[0]): source},
                    name=dml_name(self.OUTPUTS[0]))
        _dispatch(source, target, self._plan, resolve_backend(backend), gradient=self.OP.gradient)

    def __post_init__(self) -> None:
        """Normalise what is unambiguous (enum names and values, lists to tuples, so that
        descriptors are hashable); :meth:`validate` judges everything."""
        set_ = object.__setattr__
        for name, enum_cls in (("interpolation_mode", InterpolationMode), ("rounding_direction", AxisDirection)):
            if hasattr(self, name):
                try:
                    set_(self, name, enum_cls.of(getattr(self, name)))
                except DescriptorError:
                    pass  # validate() reports it, naming the field
        for name in ("scales", "input_pixel_offsets", "output_pixel_offsets"):
            value = getattr(self, name, None)
            if isinstance(value, (list, np.ndarray)):
                set_(self, name, tuple(v.item() if isinstance(v, np.generic) else v for v in value))


@dataclass(frozen=True)
class ResampleDesc(_ResampleOperator):
    """``DML_RESAMPLE_OPERATOR_DESC { InputTensor; OutputTensor; InterpolationMode; ScaleCount;
    Scales; }`` (SPEC 3.1): 4-D, FL 2.0; RESAMPLE1 with half-pixel offsets."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc
    interpolation_mode: InterpolationMode
    scale_count: int
    scales: tuple[float, ...]

    OP = _RESAMPLE
    COUNT_FIELD = "scale_count"


@dataclass(frozen=True)
class Resample1Desc(_ResampleOperator):
    """``DML_RESAMPLE1_OPERATOR_DESC { InputTensor; OutputTensor; InterpolationMode;
    DimensionCount; Scales; InputPixelOffsets; OutputPixelOffsets; }`` (SPEC 3.1): 4-D, FL 2.1."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc
    interpolation_mode: InterpolationMode
    dimension_count: int
    scales: tuple[float, ...]
    input_pixel_offsets: tuple[float, ...]
    output_pixel_offsets: tuple[float, ...]

    OP = _RESAMPLE1


@dataclass(frozen=True)
class Resample2Desc(_ResampleOperator):
    """``DML_RESAMPLE2_OPERATOR_DESC { InputTensor; OutputTensor; InterpolationMode;
    RoundingDirection; DimensionCount; Scales; InputPixelOffsets; OutputPixelOffsets; }``
    (SPEC 3.1): 1..4-D, FL 5.1."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc
    interpolation_mode: InterpolationMode
    rounding_direction: AxisDirection
    dimension_count: int
    scales: tuple[float, ...]
    input_pixel_offsets: tuple[float, ...]
    output_pixel_offsets: tuple[float, ...]

    OP = _RESAMPLE2


@dataclass(frozen=True)
class ResampleGradDesc(_ResampleOperator):
    """``DML_RESAMPLE_GRAD_OPERATOR_DESC { InputGradientTensor; OutputGradientTensor;
    InterpolationMode; DimensionCount; Scales; InputPixelOffsets; OutputPixelOffsets; }``
    (SPEC 3.1): 4-D, FL 3.0, the adjoint of RESAMPLE1.

    ``offset_convention`` is not a struct field: "per-tensor" (default, SPEC 3.6) or
    "doc-literal" says how the offsets relate to the forward op's.
    """

    input_gradient_tensor: TensorDesc
    output_gradient_tensor: TensorDesc
    interpolation_mode: InterpolationMode
    dimension_count: int
    scales: tuple[float, ...]
    input_pixel_offsets: tuple[float, ...]
    output_pixel_offsets: tuple[float, ...]
    offset_convention: str = field(default="per-tensor", kw_only=True)

    OP = _RESAMPLE_GRAD


@dataclass(frozen=True)
class ResampleGrad1Desc(_ResampleOperator):
    """``DML_RESAMPLE_GRAD1_OPERATOR_DESC { InputGradientTensor; OutputGradientTensor;
    InterpolationMode; RoundingDirection; DimensionCount; Scales; InputPixelOffsets;
    OutputPixelOffsets; }`` (SPEC 3.1): 1..4-D, FL 5.1, the adjoint of RESAMPLE2.
    ``offset_convention`` as in :class:`ResampleGradDesc`."""

    input_gradient_tensor: TensorDesc
    output_gradient_tensor: TensorDesc
    interpolation_mode: InterpolationMode
    rounding_direction: AxisDirection
    dimension_count: int
    scales: tuple[float, ...]
    input_pixel_offsets: tuple[float, ...]
    output_pixel_offsets: tuple[float, ...]
    offset_convention: str = field(default="per-tensor", kw_only=True)

    OP = _RESAMPLE_GRAD1


# --- registry (gradops ops / gradops run) -----------------------------------------------------

def _run_json(desc_cls: type[_ResampleOperator], spec: Mapping[str, Any], base: Path) -> dict[str, np.ndarray]:
    """``run_dml_json`` with a clear error for a missing struct field. The output tensor desc is
    required: its sizes are free (SPEC 3.1 rule 4), so they cannot be derived."""
    tensors = set(desc_cls.INPUTS + desc_cls.OUTPUTS)
    for struct_field in fields(desc_cls):
        label = dml_name(struct_field.name)
        if struct_field.name not in tensors and struct_field.kw_only is False and label not in spec:
            raise DescriptorError(label, f"missing: {desc_cls.OPERATOR_TYPE} needs every struct field")
    return run_dml_json(desc_cls, spec, base, derive_outputs=lambda descs, document: {})


def _op_info(desc_cls: type[_ResampleOperator], function: str) -> OpInfo:
    op = desc_cls.OP
    ranks = "4" if op.ranks == range(4, 5) else "1..4"
    return OpInfo(op.operator_type, "DirectML", function, ranks, ("FLOAT32", "FLOAT16"), op.feature_level.label,
                  partial(_run_json, desc_cls))


OPS = (
    _op_info(ResampleDesc, "resample"),
    _op_info(Resample1Desc, "resample1"),
    _op_info(Resample2Desc, "resample2"),
    _op_info(ResampleGradDesc, "resample_grad"),
    _op_info(ResampleGrad1Desc, "resample_grad1"),
)
