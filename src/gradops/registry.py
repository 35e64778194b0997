"""The operator registry: one :class:`OpInfo` per operator, for ``gradops ops`` and ``gradops run``.

Each operator family module defines ``OPS: tuple[OpInfo, ...]``; :func:`all_ops` collects them
from :data:`FAMILY_MODULES`. ``gradops run FILE.json`` looks the operator up here and calls its
``run_json``, which turns a JSON document written in the API's own field names into a call.

JSON for a DirectML operator (field names as in the C struct, SPEC 2-4)::

    {"operator": "DML_OPERATOR_ACTIVATION_RELU_GRAD",
     "InputTensor": {"DataType": "FLOAT16", "Sizes": [2, 3]},          # optional for inputs
     "OutputGradientTensor": {"DataType": "FLOAT16", "Sizes": [2, 3]},  # optional if derivable
     "inputs": {"InputTensor": [[1, -2, 3], [4, 5, -6]],
                "InputGradientTensor": {"file": "dy.npy"}}}

An input tensor desc that is omitted is the packed desc of its data. With ``Strides`` the data
is the flat buffer (elements from offset 0). Data is inline (nested lists; "nan"/"inf" strings
allowed), ``{"file": "x.npy"}`` or ``{"file": "x.npz", "key": "x"}``; relative paths are
resolved next to the JSON file.
"""

from __future__ import annotations

import importlib
import json
import math
import stat
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .dml import DataType, OperatorDesc, TensorDesc, dml_name
from .errors import DescriptorError

FAMILY_MODULES = ("gradops.relu", "gradops.resample", "gradops.depthwise")


@dataclass(frozen=True)
class OpInfo:
    """What ``gradops ops`` lists and how ``gradops run`` calls one operator."""

    name: str  # the API's own name: DML_OPERATOR_... or the TensorFlow op name
    api: str  # "DirectML" or "TensorFlow"
    function: str  # the NumPy-level gradops function
    ranks: str
    dtypes: tuple[str, ...]
    feature_level: str | None  # DirectML feature level that introduced the op
    run_json: Callable[[Mapping[str, Any], Path], dict[str, np.ndarray]] = field(repr=False)
    aliases: tuple[str, ...] = ()

    def matches(self, name: str) -> bool:
        key = name.upper().removeprefix("DML_OPERATOR_")
        candidates = (self.name, self.function, *self.aliases)
        return any(key == c.upper().removeprefix("DML_OPERATOR_") for c in candidates)


def all_ops() -> list[OpInfo]:
    return [op for module in FAMILY_MODULES for op in importlib.import_module(module).OPS]


def find_op(name: Any) -> OpInfo:
    if isinstance(name, str):
        for op in all_ops():
            if op.matches(name):
                return op
    known = ", ".join(op.name for op in all_ops())
    raise DescriptorError.expected("operator", f"one of {known}", name)


# --- JSON helpers -----------------------------------------------------------------------------

def load_data(value: Any, *, field_name: str, dtype: np.dtype, base: Path) -> np.ndarray:
    """Inline nested lists, or ``{"file": ..., "key": ...}`` naming a .npy / .npz file."""
    if isinstance(value, Mapping):
        if set(value) - {"file", "key"} or "file" not in value:
            raise DescriptorError.expected(field_name, '{"file": PATH} or {"file": PATH, "key": NAME}', value)
        path = regular_file(base / str(value["file"]), field_name)
        try:
            loaded = np.load(path, allow_pickle=False)
            if isinstance(loaded, np.lib.npyio.NpzFile):
                with loaded:
                    keys = list(loaded.keys())
                    key = value.get("key", keys[0] if len(keys) == 1 else None)
                    if key not in keys:
                        raise DescriptorError.expected(f"{field_name}.key", f"one of {keys}", key)
                    loaded = loaded[key]
        except DescriptorError:
            raise
        except Exception as exc:  # noqa: BLE001 - an unreadable, empty or corrupt file: any of many types
            raise DescriptorError(field_name, f"cannot read {path} as .npy or .npz: {exc}") from exc
        return loaded
    try:
        return np.array(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise DescriptorError.expected(field_name, f"numbers convertible to {np.dtype(dtype).name}", value) from exc


def tensor_desc_from_json(value: Any, field_name: str) -> TensorDesc:
    if not isinstance(value, Mapping):
        raise DescriptorError.expected(field_name, 'an object such as {"DataType": "FLOAT32", "Sizes": [...]}',
                                       value)
    known = {dml_name(f.name): f.name for f in fields(TensorDesc)}
    unknown = set(value) - set(known)
    if unknown:
        raise DescriptorError.expected(field_name, f"only the fields {sorted(known)}", sorted(unknown))
    if "DataType" not in value or "Sizes" not in value:
        raise DescriptorError(field_name, "expected at least DataType and Sizes")
    return TensorDesc(**{known[k]: v for k, v in value.items()})


def run_dml_json(desc_cls: type[OperatorDesc], spec: Mapping[str, Any], base: Path,
                 derive_outputs: Callable[[dict[str, TensorDesc], Mapping[str, Any]], dict[str, TensorDesc]]
                 ) -> dict[str, np.ndarray]:
    """Build ``desc_cls`` from a JSON document in DirectML field names, bind the data and run.

    ``derive_outputs`` returns default descs for output tensors the document leaves out, from the
    input descs and the document (e.g. RELU's output has its input's desc).
    """
    struct_fields = {dml_name(f.name): f.name for f in fields(desc_cls)}
    tensor_fields = {dml_name(n) for n in desc_cls.INPUTS + desc_cls.OUTPUTS}
    allowed = set(struct_fields) | {"operator", "inputs", "feature_level", "backend", "DataType"}
    unknown = set(spec) - allowed
    if unknown:
        raise DescriptorError.expected("JSON", f"only the fields {sorted(allowed)}", sorted(unknown))
    inputs = spec.get("inputs")
    if not isinstance(inputs, Mapping):
        raise DescriptorError.expected("inputs", "an object mapping each input tensor to its data", inputs)
    default_type = DataType.of(spec.get("DataType", "FLOAT32"))
    descs: dict[str, TensorDesc] = {}
    buffers: list[np.ndarray] = []
    for name in desc_cls.INPUTS:
        label = dml_name(name)
        if label not in inputs:
            raise DescriptorError(f"inputs.{label}", "missing: every input tensor needs data")
        desc = tensor_desc_from_json(spec[label], label) if label in spec else None
        dtype = (desc.data_type if desc else default_type).numpy_dtype
        data = load_data(inputs[label], field_name=f"inputs.{label}", dtype=dtype, base=base)
        if data.dtype != dtype:
            raise DescriptorError.expected(f"inputs.{label}.dtype", dtype.name, data.dtype.name)
        if desc is None:
            desc = TensorDesc(DataType.of(data.dtype), data.shape)
        elif desc.strides is None and data.size == math.prod(desc.sizes):
            data = data.reshape(desc.sizes)
        descs[name] = desc
        buffers.append(np.ascontiguousarray(data).reshape(-1))
    extra = set(inputs) - {dml_name(n) for n in desc_cls.INPUTS}
    if extra:
        raise DescriptorError.expected("inputs", f"data for {[dml_name(n) for n in desc_cls.INPUTS]} only",
                                       sorted(extra))
    defaults = derive_outputs(descs, spec)
    for name in desc_cls.OUTPUTS:
        label = dml_name(name)
        if label in spec:
            descs[name] = tensor_desc_from_json(spec[label], label)
        elif name in defaults:
            descs[name] = defaults[name]
        else:
            raise DescriptorError(label, "missing: give the output tensor desc (DataType, Sizes)")
    kwargs = {struct_fields[k]: v for k, v in spec.items() if k in struct_fields and k not in tensor_fields}
    desc_obj = desc_cls(**descs, **kwargs)
    compiled = desc_obj.compile(feature_level=spec.get("feature_level"), backend=spec.get("backend"))
    results = compiled(*buffers)
    return {dml_name(name): np.array(descs[name].view(buf)) for name, buf in zip(desc_cls.OUTPUTS, results)}


def regular_file(path: Path, field: str) -> Path:
    """``path`` if it names a regular file. Checked before opening: opening a FIFO blocks until
    someone writes to it, and a device or a folder is never an operator's data."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise DescriptorError(field, f"cannot read {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(mode):
        raise DescriptorError(field, f"cannot read {path}: not a regular file")
    return path


def read_json(path: Path) -> Any:
    regular_file(path, str(path))
    try:
        text = path.read_bytes().decode("utf-8")
        return json.loads(text)
    except OSError as exc:
        raise DescriptorError(str(path), f"cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise DescriptorError(str(path), f"expected UTF-8 text, got byte {exc.object[exc.start]:#04x} at offset "
                              f"{exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise DescriptorError(str(path), f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    except RecursionError as exc:
        raise DescriptorError(str(path), "expected JSON nested less deeply (Python's parser gave up)") from exc
