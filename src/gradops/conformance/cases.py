"""Test cases of the corpus: what a case holds, how it becomes JSON, and how its expected
outputs are computed by the gradops reference backend.

A family module (``cases_relu``, ``cases_resample``, ``cases_depthwise``) builds cases with
:func:`dml_case` (a DirectML operator descriptor plus logical input tensors) or :func:`tf_case`
(a TensorFlow raw op: attributes plus input tensors). The builder encodes the inputs as raw
buffers, runs the reference backend on exactly those buffers, and records the outputs with the
comparison rule the SPEC gives for the case.
"""

from __future__ import annotations

import enum
import importlib
import math
import zlib
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..dml import FeatureLevel, OperatorDesc, TensorDesc, dml_name
from ..errors import GradopsError
from .format import FORMAT_VERSION, POISON_BYTE, Comparison, Layout, float32_json, is_float

BASE_SEED = 20240601  # every random case derives its generator from this and its own name


@dataclass(frozen=True)
class Relative:
    """A tolerance whose ``atol`` is derived from the data: ``rtol`` times the largest output of
    the same operator run on the absolute values of the inputs, i.e. of the sum of |terms| behind
    an output element. It absorbs any summation order, including cancellation."""

    rtol: float


CompareSpec = Comparison | Relative
BITWISE = Comparison("bitwise")


@dataclass(frozen=True)
class Binding:
    """One tensor of a case: its layout, its raw buffer and (outputs only) the comparison rule."""

    layout: Layout
    data: bytes
    compare: Comparison | None = None

    def document(self, file: str) -> dict[str, Any]:
        doc = {"file": file, **self.layout.to_json()}
        if self.compare is not None:
            doc["compare"] = self.compare.to_json()
        return doc

    def values(self) -> np.ndarray:
        return self.layout.view(self.data)


@dataclass(frozen=True)
class Case:
    """One test vector. ``operation`` holds the API fields: ``{"desc": ..., "feature_level": ...}``
    for DirectML, ``{"attrs": ...}`` for TensorFlow."""

    family: str
    name: str
    title: str
    api: str
    operator: str
    spec: tuple[str, ...]
    tags: tuple[str, ...]
    operation: dict[str, Any]
    inputs: dict[str, Binding]
    outputs: dict[str, Binding]

    @property
    def id(self) -> str:
        return f"{self.family}/{self.name}"

    def file_name(self, tensor: str) -> str:
        return f"{self.name}.{tensor}.bin"

    def document(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "id": self.id,
            "title": self.title,
            "api": self.api,
            "operator": self.operator,
            "spec": list(self.spec),
            "tags": sorted(self.tags),
            **self.operation,
            "inputs": {k: b.document(self.file_name(k)) for k, b in self.inputs.items()},
            "outputs": {k: b.document(self.file_name(k)) for k, b in self.outputs.items()},
        }

    def files(self) -> dict[str, bytes]:
        """Every binary file of the case, by file name."""
        return {self.file_name(k): b.data for k, b in {**self.inputs, **self.outputs}.items()}


def rng_for(name: str) -> np.random.Generator:
    """A generator seeded by the case name, so a case's data does not depend on which other
    cases exist or in which order they are built."""
    return np.random.default_rng([BASE_SEED, zlib.crc32(name.encode())])


# --- DirectML ----------------------------------------------------------------------------------

_ENUM_PREFIXES = {"InterpolationMode": "DML_INTERPOLATION_MODE_", "AxisDirection": "DML_AXIS_DIRECTION_"}
_FLAG_NAMES = {0: "DML_TENSOR_FLAG_NONE", 1: "DML_TENSOR_FLAG_OWNED_BY_DML"}


def tensor_desc_json(desc: TensorDesc) -> dict[str, Any]:
    """``DML_BUFFER_TENSOR_DESC`` with every field; ``Strides`` is null when packed (nullptr)."""
    return {
        "DataType": f"DML_TENSOR_DATA_TYPE_{desc.data_type.name}",
        "Flags": _FLAG_NAMES[desc.flags],
        "DimensionCount": desc.dimension_count,
        "Sizes": list(desc.sizes),
        "Strides": None if desc.strides is None else list(desc.strides),
        "TotalTensorSizeInBytes": desc.size_in_bytes,
        "GuaranteedBaseOffsetAlignment": desc.guaranteed_base_offset_alignment,
    }


def tensor_desc_from_json(doc: Mapping[str, Any]) -> TensorDesc:
    flags = {v: k for k, v in _FLAG_NAMES.items()}[doc["Flags"]]
    return TensorDesc(doc["DataType"], doc["Sizes"], doc["Strides"], doc["TotalTensorSizeInBytes"],
                      doc["GuaranteedBaseOffsetAlignment"], flags)


def desc_json(desc: OperatorDesc) -> dict[str, Any]:
    """The operator descriptor in DirectML struct field names and enum spellings."""
    doc: dict[str, Any] = {}
    for struct_field in fields(desc):  # type: ignore[arg-type]
        value = getattr(desc, struct_field.name)
        if struct_field.kw_only:  # gradops options that are not struct fields
            if value != struct_field.default:
                raise GradopsError(struct_field.name, "a corpus case uses DirectML semantics only")
            continue
        if isinstance(value, TensorDesc):
            doc[dml_name(struct_field.name)] = tensor_desc_json(value)
        elif isinstance(value, enum.IntEnum):
            doc[dml_name(struct_field.name)] = _ENUM_PREFIXES[type(value).__name__] + value.name
        elif isinstance(value, (tuple, list)):
            doc[dml_name(struct_field.name)] = [float32_json(v) for v in value]
        else:
            doc[dml_name(struct_field.name)] = int(value)
    return doc


def desc_from_json(desc_cls: type[OperatorDesc], doc: Mapping[str, Any]) -> OperatorDesc:
    """Build a gradops descriptor from :func:`desc_json` output (enum names are coerced by the
    descriptor itself)."""
    tensors = set(desc_cls.INPUTS + desc_cls.OUTPUTS)
    kwargs = {}
    for struct_field in fields(desc_cls):  # type: ignore[arg-type]
        if struct_field.kw_only:
            continue
        value = doc[dml_name(struct_field.name)]
        kwargs[struct_field.name] = tensor_desc_from_json(value) if struct_field.name in tensors else value
    return desc_cls(**kwargs)


def minimum_feature_level(desc: OperatorDesc) -> FeatureLevel:
    """The lowest feature level at which ``desc`` validates (operator, rank and data type)."""
    for level in FeatureLevel:
        try:
            desc.validate(level)
        except GradopsError:
            continue
        return level
    desc.validate()  # raises the reason the descriptor is invalid at every level
    raise AssertionError("unreachable")


def run_dml(desc: OperatorDesc, buffers: Sequence[bytes], backend: str) -> list[bytes]:
    """Run ``desc`` on input buffers; outputs start as poison bytes (untouched padding stays so)."""
    compiled = desc.compile(backend=backend)
    inputs = [np.frombuffer(b, dtype=np.uint8) for b in buffers]
    outputs = [np.full(getattr(desc, name).size_in_bytes, POISON_BYTE, dtype=np.uint8) for name in desc.OUTPUTS]
    compiled(*inputs, *outputs)
    return [o.tobytes() for o in outputs]


def dml_case(family: str, name: str, title: str, desc: OperatorDesc, inputs: Mapping[str, np.ndarray], *,
             spec: Sequence[str], tags: Sequence[str] = (), compare: CompareSpec = BITWISE) -> Case:
    """A DirectML case. ``inputs`` maps each input tensor field (snake_case) to its logical values;
    they are written through the field's TensorDesc into a poisoned buffer."""
    in_layouts = {n: Layout.of_tensor_desc(getattr(desc, n)) for n in desc.INPUTS}
    out_layouts = {n: Layout.of_tensor_desc(getattr(desc, n)) for n in desc.OUTPUTS}
    buffers = [in_layouts[n].encode(np.asarray(inputs[n])) for n in desc.INPUTS]
    outputs = run_dml(desc, buffers, "reference")

    def magnitudes() -> list[np.ndarray]:
        absolute = [_absolute(in_layouts[n], b) for n, b in zip(desc.INPUTS, buffers)]
        return [out_layouts[n].view(b) for n, b in zip(desc.OUTPUTS, run_dml(desc, absolute, "reference"))]

    comparison = _resolve(compare, magnitudes)
    level = minimum_feature_level(desc)
    return Case(
        family, name, title, "DirectML", desc.OPERATOR_TYPE, tuple(spec), tuple(tags),
        {"desc": desc_json(desc), "feature_level": f"DML_FEATURE_LEVEL_{level.name[3:]}"},
        {dml_name(n): Binding(in_layouts[n], b) for n, b in zip(desc.INPUTS, buffers)},
        {dml_name(n): Binding(out_layouts[n], b, comparison) for n, b in zip(desc.OUTPUTS, outputs)})


# --- TensorFlow --------------------------------------------------------------------------------

@dataclass(frozen=True)
class TfOp:
    """How gradops runs a TensorFlow raw op: ``function(*inputs, **attrs, backend=...)`` with
    the op's inputs in order; the single output is named ``output`` as in the op registration."""

    name: str
    module: str
    function: str
    inputs: tuple[str, ...]
    output: str = "output"

    def run(self, inputs: Mapping[str, np.ndarray], attrs: Mapping[str, Any], backend: str) -> np.ndarray:
        function = getattr(importlib.import_module(self.module), self.function)
        kwargs = {k: v for k, v in attrs.items() if k != "T"}  # T is the data type of the tensors
        return np.asarray(function(*(inputs[n] for n in self.inputs), **kwargs, backend=backend))


TF_DTYPE_NAMES = {"FLOAT32": "float", "FLOAT16": "half", "FLOAT64": "double", "BFLOAT16": "bfloat16"}


def tf_case(family: str, name: str, title: str, op: TfOp, attrs: Mapping[str, Any],
            inputs: Mapping[str, np.ndarray], *, spec: Sequence[str], tags: Sequence[str] = (),
            compare: CompareSpec = BITWISE) -> Case:
    """A TensorFlow raw-op case: ``attrs`` in tf.raw_ops names (``T`` is added from the float
    inputs), tensors dense and row-major."""
    arrays = {n: np.ascontiguousarray(inputs[n]) for n in op.inputs}
    layouts = {n: Layout.dense(a.dtype, a.shape) for n, a in arrays.items()}
    float_types = {layouts[n].data_type for n in op.inputs if is_float(arrays[n].dtype)}
    (data_type,) = float_types
    attrs = {"T": TF_DTYPE_NAMES[data_type], **attrs}
    output = op.run(arrays, attrs, "reference")
    out_layout = Layout.dense(output.dtype, output.shape)

    def magnitude() -> list[np.ndarray]:
        absolute = {n: np.abs(a) if is_float(a.dtype) else a for n, a in arrays.items()}
        return [op.run(absolute, attrs, "reference")]

    comparison = _resolve(compare, magnitude)
    return Case(
        family, name, title, "TensorFlow", op.name, tuple(spec), tuple(tags), {"attrs": dict(attrs)},
        {n: Binding(layouts[n], layouts[n].encode(arrays[n])) for n in op.inputs},
        {op.output: Binding(out_layout, out_layout.encode(output), comparison)})


# --- helpers -------------------------------------------------------------------------------------

def _absolute(layout: Layout, buffer: bytes) -> bytes:
    """The buffer with every described float element replaced by its absolute value."""
    values = layout.view(buffer)
    return layout.encode(np.abs(values)) if is_float(values.dtype) else buffer


def _resolve(compare: CompareSpec, magnitudes: Callable[[], list[np.ndarray]]) -> Comparison:
    if isinstance(compare, Comparison):
        return compare
    largest = max((float(np.max(np.abs(m.astype(np.float64)))) for m in magnitudes()), default=0.0)
    return Comparison("tolerance", rtol=compare.rtol, atol=_round_up(compare.rtol * largest))


def _round_up(value: float) -> float:
    """``value`` rounded up to two significant decimal digits (a clean, stable JSON number)."""
    if value <= 0 or not math.isfinite(value):
        return 0.0
    exponent = math.floor(math.log10(value)) - 1
    return float(f"{math.ceil(value / 10.0**exponent)}e{exponent}")


@dataclass
class CaseList:
    """Collects a family's cases and rejects duplicate names."""

    family: str
    cases: list[Case] = field(default_factory=list)

    def add(self, case: Case) -> None:
        if any(c.name == case.name for c in self.cases):
            raise AssertionError(f"duplicate case name {case.id}")
        self.cases.append(case)


def strided_desc(data_type: str, sizes: Sequence[int], *, order: Sequence[int] | None = None, pad: int = 0,
                 broadcast: Sequence[int] = (), extra_bytes: int = 0) -> TensorDesc:
    """A TensorDesc with explicit strides: axes laid out in ``order`` (outermost first, default
    row-major), ``pad`` unused elements after each non-innermost axis's run, stride 0 on the
    ``broadcast`` axes, and ``extra_bytes`` added to the minimum TotalTensorSizeInBytes."""
    rank = len(sizes)
    order = list(range(rank)) if order is None else list(order)
    strides = [0] * rank
    running = 1
    for position, axis in enumerate(reversed(order)):
        if axis in broadcast:
            continue
        strides[axis] = running
        running = running * sizes[axis] + (pad if position < rank - 1 else 0)
    desc = TensorDesc(data_type, tuple(sizes), tuple(strides))
    if extra_bytes:
        desc = TensorDesc(data_type, tuple(sizes), tuple(strides), desc.minimum_size_in_bytes + extra_bytes)
    return desc
