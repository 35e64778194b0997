"""Fuzz every descriptor, TensorDesc, the enum parsers, calc_buffer_tensor_size and the framework
conventions (issue 27): any field may be of any type; construction, validate(), compile() and a call
on raw buffers (of random lengths) raise only GradopsError, and a failed call leaves its output
buffers untouched."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gradops
from gradops import DmlResampleParams, TensorDesc

from .harness import call
from .strategies import HUGE, NUMBERS

pytestmark = pytest.mark.xdist_group("fuzz")

DATA_TYPES = ("FLOAT32", "FLOAT16", "INT32", "INT16", "INT8", "UINT8", "FLOAT64", "UNKNOWN", 1, 99, None, "float")
LEVELS = (None, "1.0", "3.0", "5.1", "6.4", 0x5100, "7.0", "bogus", 3.5, -1)
RESAMPLE_DESCS = (gradops.ResampleDesc, gradops.Resample1Desc, gradops.Resample2Desc, gradops.ResampleGradDesc,
                  gradops.ResampleGrad1Desc)
DEPTHWISE_DESCS = (gradops.DepthwiseConv2dNativeDesc, gradops.DepthwiseConv2dNativeBackpropInputDesc,
                   gradops.DepthwiseConv2dNativeBackpropFilterDesc)


@st.composite
def anything(draw):
    return draw(st.one_of(st.sampled_from(NUMBERS), st.sampled_from(HUGE), st.text(max_size=4),
                          st.lists(st.integers(-2, 5), max_size=5), st.just(np.zeros(2))))


@st.composite
def tensor_descs(draw, rank_max: int = 8):
    """Mostly constructible TensorDescs (small sizes, sometimes strides), sometimes junk."""
    if draw(st.integers(0, 9)) == 0:
        return draw(anything())
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=rank_max))
    if draw(st.integers(0, 9)) == 0:
        sizes[draw(st.integers(0, len(sizes) - 1))] = draw(st.sampled_from((0, 2**32 - 1, 2**20)))
    kwargs = {}
    if draw(st.integers(0, 3)) == 0:
        kwargs["strides"] = draw(st.lists(st.integers(0, 20), min_size=len(sizes), max_size=len(sizes)))
    if draw(st.integers(0, 6)) == 0:
        kwargs["total_tensor_size_in_bytes"] = draw(st.sampled_from((0, 3, 64, 2**40, 2**62)))
    if draw(st.integers(0, 9)) == 0:
        kwargs["guaranteed_base_offset_alignment"] = draw(st.sampled_from((0, 3, 16, -1)))
    data_type = draw(st.sampled_from(DATA_TYPES[:5] * 3 + DATA_TYPES))
    try:
        return TensorDesc(data_type, sizes, **kwargs)
    except gradops.GradopsError:
        return TensorDesc("FLOAT32", [1])


@st.composite
def buffers(draw, descs):
    """One raw buffer per tensor: the right size, or a random length, or not a buffer."""
    result = []
    for desc in descs:
        size = desc.size_in_bytes if isinstance(desc, TensorDesc) and desc.size_in_bytes < 1 << 16 else 16
        kind = draw(st.sampled_from(["right", "right", "short", "bytes", "bytearray", "junk", "readonly"]))
        raw = np.random.default_rng(draw(st.integers(0, 99))).integers(0, 256, size, dtype=np.uint8)
        if kind == "short":
            raw = raw[:draw(st.integers(0, max(0, size - 1)))]
        elif kind == "bytes":
            raw = raw.tobytes()
        elif kind == "bytearray":
            raw = bytearray(raw.tobytes())
        elif kind == "junk":
            raw = draw(anything())
        elif kind == "readonly":
            raw.flags.writeable = False
        result.append(raw)
    return result


def _exercise(desc_cls, fields, level, backend, data):
    desc, error = call(desc_cls.__name__, desc_cls, *fields)
    if error is not None:
        return
    _, error = call(f"{desc_cls.__name__}.validate", desc.validate, level)
    if error is not None:
        return
    op, error = call(f"{desc_cls.__name__}.compile", desc.compile, feature_level=level, backend=backend)
    if error is not None:
        return
    tensors = [getattr(desc, name) for name in desc_cls.INPUTS + desc_cls.OUTPUTS]
    bound = data.draw(buffers(tensors))
    n_in = len(desc_cls.INPUTS)
    if data.draw(st.booleans()):
        bound = bound[:n_in]
    outputs = tuple(b for b in bound[n_in:] if isinstance(b, (np.ndarray, bytearray)))
    call(f"{desc_cls.__name__}.__call__", op, *bound, outputs=outputs)


@given(st.data())
def test_relu_descriptors(data):
    desc_cls = data.draw(st.sampled_from([gradops.ActivationReluDesc, gradops.ActivationReluGradDesc]))
    first = data.draw(tensor_descs())
    fields = [first if data.draw(st.integers(0, 3)) else data.draw(tensor_descs())
              for _ in desc_cls.INPUTS + desc_cls.OUTPUTS]
    _exercise(desc_cls, fields, data.draw(st.sampled_from(LEVELS)), data.draw(st.sampled_from(["fast", "reference"])),
              data)


@given(st.data())
def test_resample_descriptors(data):
    desc_cls = data.draw(st.sampled_from(RESAMPLE_DESCS))
    rank = 4 if desc_cls in RESAMPLE_DESCS[:2] + (gradops.ResampleGradDesc,) else data.draw(st.integers(1, 4))
    dtype = data.draw(st.sampled_from(["FLOAT32", "FLOAT16", "FLOAT32", "INT8", "UINT8", "INT32"]))
    tensors = [TensorDesc(dtype, data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
               if data.draw(st.integers(0, 5)) else data.draw(tensor_descs(4)) for _ in range(2)]
    floats = st.lists(st.floats(-2, 4, width=32), min_size=rank, max_size=rank)
    names = [f.name for f in desc_cls.__dataclass_fields__.values() if f.kw_only is False][2:]
    fields = list(tensors)
    for name in names:
        if data.draw(st.integers(0, 6)) == 0:
            fields.append(data.draw(anything()))
        elif name in ("interpolation_mode", "rounding_direction"):
            fields.append(data.draw(st.sampled_from([0, 1, "NEAREST_NEIGHBOR", "LINEAR", "DECREASING", 2])))
        elif name in ("dimension_count", "scale_count"):
            fields.append(rank)
        else:
            fields.append(data.draw(floats))
    _exercise(desc_cls, fields, data.draw(st.sampled_from(LEVELS)), data.draw(st.sampled_from(["fast", "reference"])),
              data)


@given(st.data())
def test_depthwise_descriptors(data):
    desc_cls = data.draw(st.sampled_from(DEPTHWISE_DESCS))
    good = ["float", [1, 1, 1, 1], "SAME", (), "NHWC", [1, 1, 1, 1]]
    fields = [data.draw(anything()) if data.draw(st.integers(0, 3)) == 0 else value for value in good]
    desc, error = call(desc_cls.__name__, desc_cls, *fields)
    if error is None:
        call(f"{desc_cls.__name__}.geometry", desc.geometry, *[data.draw(anything()) for _ in
                                                               range(2 if desc_cls is DEPTHWISE_DESCS[0] else 3)])


@given(st.data())
def test_tensor_desc_and_enums(data):
    fields = [data.draw(st.one_of(st.sampled_from(DATA_TYPES), anything())), data.draw(anything())]
    desc, error = call("TensorDesc", TensorDesc, *fields)
    if error is None:
        call("TensorDesc.validate", desc.validate, "T", output=data.draw(st.booleans()))
        call("TensorDesc.view", desc.view, data.draw(buffers([desc]))[0])
    call("calc_buffer_tensor_size", gradops.calc_buffer_tensor_size, data.draw(st.sampled_from(DATA_TYPES)),
         data.draw(anything()), data.draw(st.one_of(st.none(), anything())))
    call("DataType.of", gradops.DataType.of, data.draw(st.one_of(st.sampled_from(DATA_TYPES), anything())))
    call("FeatureLevel.of", gradops.FeatureLevel.of, data.draw(st.one_of(st.sampled_from(LEVELS), anything())))
    call("InterpolationMode.of", gradops.InterpolationMode.of, data.draw(anything()))
    call("AxisDirection.of", gradops.AxisDirection.of, data.draw(anything()))


@given(st.data())
def test_framework_conventions(data):
    shape = data.draw(st.lists(st.integers(1, 5), min_size=3, max_size=5))
    target = [data.draw(st.integers(1, 6)) for _ in shape]
    hostile = st.one_of(anything(), st.sampled_from(["nearest", "linear", "bilinear", "nearest-exact", "cubic",
                                                     "half_pixel", "align_corners", "asymmetric", "floor"]))
    pick = data.draw(st.sampled_from(["tensorflow", "torch", "jax", "onnx"]))
    arguments = [shape if data.draw(st.integers(0, 4)) else data.draw(anything()),
                 target[1:3] if pick == "tensorflow" else target[2:] if pick == "torch" else target]
    optional = {"tensorflow": 3, "torch": 3, "jax": 2, "onnx": 5}[pick]  # a wrong call signature is not fuzzed
    arguments += [data.draw(hostile) for _ in range(data.draw(st.integers(0, optional)))]
    params, error = call(f"DmlResampleParams.from_{pick}", getattr(DmlResampleParams, f"from_{pick}"), *arguments)
    if error is None:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        call("DmlResampleParams.forward", params.forward, x, data.draw(st.one_of(st.just(target), anything())),
             backend="reference")
        call("DmlResampleParams.gradient", params.gradient, x, data.draw(st.one_of(st.just(target), anything())),
             backend="reference")
