"""Depthwise family (SPEC 5): worked examples E12-E16, layouts, dtypes and accumulation, strided
views, out=, empty tensors, descriptors and `gradops run`.

Expected numbers are typed in from SPEC section 7 or written out here by hand; the brute-force
oracle and the adjoint identities are in test_depthwise_oracle.py, validation in
test_depthwise_validation.py.
"""

from __future__ import annotations

import dataclasses
import json

import ml_dtypes
import numpy as np
import pytest

import gradops
from gradops import (AliasingError, DataTypeError, DepthwiseConv2dNativeBackpropFilterDesc,
                     DepthwiseConv2dNativeBackpropInputDesc, DepthwiseConv2dNativeDesc, ShapeError,
                     depthwise_conv2d_native, depthwise_conv2d_native_backprop_filter,
                     depthwise_conv2d_native_backprop_input)
from gradops.cli import main as cli_main
from gradops.examples import all_examples


BF16 = np.dtype(ml_dtypes.bfloat16)
EXAMPLE_IDS = ["E12", "E13", "E14", "E15", "E16"]


def _nchw(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2))


def _nhwc_order(values: list[int]) -> list[int]:
    """[N, H, W, C] -> [N, C, H, W] for strides / dilations."""
    return [values[0], values[3], values[1], values[2]]


# --- worked examples -------------------------------------------------------------------------

@pytest.mark.parametrize("example_id", EXAMPLE_IDS)
def test_worked_example(example_id, backend):
    (example,) = [ex for ex in all_examples() if ex.id == example_id]
    checks = example.run(backend)
    assert checks
    assert not [(c.label, c.result, c.expected) for c in checks if not c.passed]


def test_examples_cli(capsys):
    assert cli_main(["examples", "--only", *EXAMPLE_IDS, "--backend", "reference"]) == 0
    assert "MISMATCH" not in capsys.readouterr().out


def test_e12_by_hand(backend):
    """Two entries of E12 worked by hand in SPEC 7, independently of the examples module."""
    filt = np.zeros((3, 3, 1, 2), np.float32)
    filt[:, :, 0, 0] = np.arange(1, 10).reshape(3, 3)
    filt[:, :, 0, 1] = 1
    dy = np.zeros((1, 3, 3, 2), np.float32)
    dy[..., 0] = np.arange(1, 10).reshape(3, 3)
    dy[..., 1] = 10
    dx = depthwise_conv2d_native_backprop_input([1, 5, 5, 1], filt, dy, [1, 2, 2, 1], "SAME", backend=backend)
    assert dx[0, 0, 0, 0] == 5 + 10  # dY0[0,0]*F0[1,1] + 10*1
    assert dx[0, 1, 1, 0] == 9 + 2 * 7 + 4 * 3 + 5 * 1 + 4 * 10


# --- layouts, multipliers, dtypes --------------------------------------------------------------

LAYOUT_CASES = [
    # (N, H, W, C, fh, fw, M, strides_hw, dilations_hw, padding, explicit pads t,b,l,r)
    (2, 7, 6, 3, 3, 3, 2, (2, 2), (1, 1), "SAME", None),
    (1, 9, 8, 2, 3, 2, 1, (1, 2), (2, 1), "VALID", None),
    (2, 5, 7, 4, 2, 3, 3, (3, 1), (1, 2), "EXPLICIT", (1, 2, 0, 3)),
    (1, 4, 4, 1, 5, 5, 2, (1, 1), (1, 1), "SAME", None),
]


def _case_arrays(case, dtype=np.float64, seed=0):
    n, h, w, c, fh, fw, m, (sh, sw), (dh, dw), padding, pads = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, h, w, c)).astype(dtype)
    filt = rng.standard_normal((fh, fw, c, m)).astype(dtype)
    kwargs = {"strides": [1, sh, sw, 1], "padding": padding, "dilations": [1, dh, dw, 1],
              "explicit_paddings": [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0] if pads else []}
    y = depthwise_conv2d_native(x, filt, backend="reference", **kwargs)
    dy = rng.standard_normal(y.shape).astype(dtype)
    return x, filt, dy, kwargs


def _nchw_kwargs(kwargs):
    pads = kwargs["explicit_paddings"]
    return {"strides": _nhwc_order(kwargs["strides"]), "padding": kwargs["padding"],
            "dilations": _nhwc_order(kwargs["dilations"]), "data_format": "NCHW",
            "explicit_paddings": pads[:2] + pads[6:8] + pads[2:6] if pads else []}


@pytest.mark.parametrize("case", LAYOUT_CASES)
def test_nhwc_equals_nchw(case, backend):
    x, filt, dy, kwargs = _case_arrays(case)
    nchw = _nchw_kwargs(kwargs)
    y = depthwise_conv2d_native(x, filt, backend=backend, **kwargs)
    y_nchw = depthwise_conv2d_native(_nchw(x), filt, backend=backend, **nchw)
    np.testing.assert_allclose(y_nchw, _nchw(y), rtol=1e-13, atol=1e-13)
    dx = depthwise_conv2d_native_backprop_input(list(x.shape), filt, dy, backend=backend, **kwargs)
    dx_nchw = depthwise_conv2d_native_backprop_input(list(_nchw(x).shape), filt, _nchw(dy), backend=backend, **nchw)
    np.testing.assert_allclose(dx_nchw, _nchw(dx), rtol=1e-13, atol=1e-13)
    df = depthwise_conv2d_native_backprop_filter(x, list(filt.shape), dy, backend=backend, **kwargs)
    df_nchw = depthwise_conv2d_native_backprop_filter(_nchw(x), list(filt.shape), _nchw(dy), backend=backend, **nchw)
    np.testing.assert_allclose(df_nchw, df, rtol=1e-13, atol=1e-13)


def test_multiplier_channel_order(backend):
    """Output channel k = c*M + m (SPEC 5.2): channel c's M outputs are contiguous."""
    x = np.zeros((1, 1, 1, 3), np.float32)
    x[..., :] = [1, 10, 100]
    filt = np.array([[1, 2], [3, 4], [5, 6]], np.float32).reshape(1, 1, 3, 2)
    y = depthwise_conv2d_native(x, filt, [1, 1, 1, 1], "VALID", backend=backend)
    assert y.ravel().tolist() == [1, 2, 30, 40, 500, 600]


def test_unequal_strides_and_stride_beyond_filter(backend):
    """Row stride 3 > filter 2 skips input rows, which get 0 (SPEC 5.4); column stride 1."""
    filt = np.ones((2, 1, 1, 1), np.float32)
    dy = np.ones((1, 3, 4, 1), np.float32)
    dx = depthwise_conv2d_native_backprop_input([1, 8, 4, 1], filt, dy, [1, 3, 1, 1], "VALID", backend=backend)
    assert dx[0, :, :, 0].tolist() == [[1] * 4, [1] * 4, [0] * 4, [1] * 4, [1] * 4, [0] * 4, [1] * 4, [1] * 4]


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.float64])
def test_dtypes_preserved(dtype, backend):
    x, filt, dy, kwargs = _case_arrays(LAYOUT_CASES[0], dtype=dtype)
    y = depthwise_conv2d_native(x, filt, backend=backend, **kwargs)
    dx = depthwise_conv2d_native_backprop_input(np.array(x.shape, np.int32), filt, dy, backend=backend, **kwargs)
    df = depthwise_conv2d_native_backprop_filter(x, np.array(filt.shape, np.int32), dy, backend=backend, **kwargs)
    assert y.dtype == dx.dtype == df.dtype == np.dtype(dtype)
    assert dx.shape == x.shape and df.shape == filt.shape


@pytest.mark.parametrize("dtype, sequential_limit", [(np.float16, 2048), (BF16, 256)])
def test_half_types_accumulate_wide(dtype, sequential_limit, backend):
    """E18 for depthwise: 4096 unit contributions give 4096, where a half accumulator stops at
    2048 (bfloat16: 256). SPEC 5.6 decision: accumulate in float32, round once."""
    one = np.ones((1, 64, 64, 1), dtype)
    # forward: one output with a 64x64 window
    y = depthwise_conv2d_native(one, np.ones((64, 64, 1, 1), dtype), [1, 1, 1, 1], "VALID", backend=backend)
    # BackpropFilter: a 1x1 filter sees all 4096 positions
    df = depthwise_conv2d_native_backprop_filter(one, [1, 1, 1, 1], one, [1, 1, 1, 1], "VALID", backend=backend)
    # BackpropInput: multiplier 4096 feeds one input element
    dx = depthwise_conv2d_native_backprop_input([1, 1, 1, 1], np.ones((1, 1, 1, 4096), dtype),
                                                np.ones((1, 1, 1, 4096), dtype), [1, 1, 1, 1], "VALID",
                                                backend=backend)
    for result in (y, df, dx):
        assert result.dtype == np.dtype(dtype) and float(result.item()) == 4096 != sequential_limit


@pytest.mark.parametrize("dtype, ulp, tiny", [(np.float16, 2.0 ** -10, 2.0 ** -20), (BF16, 2.0 ** -7, 2.0 ** -30)])
def test_reference_rounds_once_from_the_exact_sum(dtype, ulp, tiny):
    """1 + ulp/2 + tiny lies just above a tie, so one rounding of the exact sum goes up. Rounding
    twice lands on the tie and goes to even (1): for bfloat16, ml_dtypes' float64 -> float32 ->
    bfloat16 conversion does exactly that."""
    x = np.ones((1, 1, 3, 1), dtype)
    filt = np.array([1, ulp / 2, tiny], dtype).reshape(1, 3, 1, 1)
    y = depthwise_conv2d_native(x, filt, [1, 1, 1, 1], "VALID", backend="reference")
    assert float(y.item()) == 1 + ulp


def test_float32_results_are_rounded_from_wide_sums(backend):
    """2^24 + 1 - 2^24: the reference accumulates float32 in float64 and gets 1; a float32
    accumulator in tap order (allowed for the fast backend) gets 0."""
    x = np.ones((1, 1, 3, 1), np.float32)
    filt = np.array([2.0 ** 24, 1, -(2.0 ** 24)], np.float32).reshape(1, 3, 1, 1)
    y = depthwise_conv2d_native(x, filt, [1, 1, 1, 1], "VALID", backend="reference")
    assert y.item() == 1
    assert depthwise_conv2d_native(x, filt, [1, 1, 1, 1], "VALID", backend=backend).item() in (0, 1)


def _rounding_bound(got: np.ndarray, dtype, abs_sum: np.ndarray, accumulation_eps: float) -> np.ndarray:
    """Half a unit in the last place of ``got`` in ``dtype`` (one correct rounding), plus the
    error an accumulator of relative precision ``accumulation_eps`` may add to a sum of terms
    whose magnitudes add up to ``abs_sum``."""
    info = ml_dtypes.finfo(dtype)
    magnitude = np.maximum(np.abs(got.astype(np.float64)), float(info.smallest_normal))
    return 0.5 * 2.0 ** (np.floor(np.log2(magnitude)) - info.nmant) + accumulation_eps * abs_sum


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32])
def test_results_are_the_wide_sum_rounded_once(dtype, backend):
    """Each result is the float64 result rounded to T, up to the accumulator's error: float64 in
    the reference, float32 (SPEC 5.6) in the fast backend. The sum of |terms| is the same op
    applied to |inputs|."""
    accumulation_eps = 2.0 ** -52 if backend == "reference" else 2.0 ** -20
    for case in LAYOUT_CASES:
        x, filt, dy, kwargs = _case_arrays(case, dtype=dtype, seed=3)
        x64, f64, dy64 = (a.astype(np.float64) for a in (x, filt, dy))
        ops = [
            (lambda a, b, c, **k: depthwise_conv2d_native(a, b, **k), (x, filt, None), (x64, f64, None)),
            (lambda a, b, c, **k: depthwise_conv2d_native_backprop_input(list(x.shape), b, c, **k),
             (None, filt, dy), (None, f64, dy64)),
            (lambda a, b, c, **k: depthwise_conv2d_native_backprop_filter(a, list(filt.shape), c, **k),
             (x, None, dy), (x64, None, dy64)),
        ]
        for op, narrow, wide in ops:
            got = op(*narrow, backend=backend, **kwargs).astype(np.float64)
            exact = op(*wide, backend="reference", **kwargs)
            abs_sum = op(*(None if a is None else np.abs(a) for a in wide), backend="reference", **kwargs)
            assert np.all(np.abs(got - exact) <= _rounding_bound(got, dtype, abs_sum, accumulation_eps)), case


# --- strided views and out= --------------------------------------------------------------------

def _strided_views(a: np.ndarray) -> dict[str, np.ndarray]:
    """The same values as ``a`` in three non-contiguous layouts."""
    padded = np.zeros((a.shape[0], a.shape[1] * 2, a.shape[2], a.shape[3] + 3), a.dtype)
    padded[:, ::2, :, 1:-2] = a
    reversed_ = np.ascontiguousarray(a[:, ::-1, :, ::-1])[:, ::-1, :, ::-1]
    fortran = np.asfortranarray(a)
    return {"padded": padded[:, ::2, :, 1:-2], "negative": reversed_, "fortran": fortran}


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_any_input_strides(data_format, backend):
    x, filt, dy, kwargs = _case_arrays(LAYOUT_CASES[0], seed=5)
    if data_format == "NCHW":
        x, dy, kwargs = _nchw(x), _nchw(dy), _nchw_kwargs(kwargs)
    y = depthwise_conv2d_native(x, filt, backend=backend, **kwargs)
    dx = depthwise_conv2d_native_backprop_input(list(x.shape), filt, dy, backend=backend, **kwargs)
    df = depthwise_conv2d_native_backprop_filter(x, list(filt.shape), dy, backend=backend, **kwargs)
    for (name, xv), fv, dyv in zip(_strided_views(x).items(), _strided_views(filt).values(),
                                   _strided_views(dy).values()):
        assert not xv.flags.c_contiguous
        np.testing.assert_allclose(depthwise_conv2d_native(xv, fv, backend=backend, **kwargs), y, rtol=1e-13,
                                   err_msg=name)
        np.testing.assert_allclose(depthwise_conv2d_native_backprop_input(list(x.shape), fv, dyv, backend=backend,
                                                                          **kwargs), dx, rtol=1e-13, err_msg=name)
        np.testing.assert_allclose(depthwise_conv2d_native_backprop_filter(xv, list(filt.shape), dyv,
                                                                           backend=backend, **kwargs),
                                   df, rtol=1e-13, err_msg=name)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_out_argument(data_format, backend):
    x, filt, dy, kwargs = _case_arrays(LAYOUT_CASES[2], seed=7)
    if data_format == "NCHW":
        x, dy, kwargs = _nchw(x), _nchw(dy), _nchw_kwargs(kwargs)
    calls = {
        "forward": (lambda out: depthwise_conv2d_native(x, filt, out=out, backend=backend, **kwargs), dy.shape),
        "input": (lambda out: depthwise_conv2d_native_backprop_input(list(x.shape), filt, dy, out=out,
                                                                     backend=backend, **kwargs), x.shape),
        "filter": (lambda out: depthwise_conv2d_native_backprop_filter(x, list(filt.shape), dy, out=out,
                                                                       backend=backend, **kwargs), filt.shape),
    }
    for name, (call, shape) in calls.items():
        expected = call(None)
        holder = np.full((shape[0], shape[1] * 2, *shape[2:]), -7.0)
        view = holder[:, 1::2]  # a strided output; the other rows must stay untouched
        assert call(view) is view
        np.testing.assert_allclose(view, expected, rtol=1e-13, err_msg=name)
        assert np.all(holder[:, ::2] == -7), name
        fresh = np.full(shape, -7.0)
        with pytest.raises(DataTypeError) as info:
            call(fresh.astype(np.float32))
        assert info.value.field == "out.dtype"
        with pytest.raises(ShapeError) as info:
            call(np.zeros((1, *shape)))
        assert info.value.field == "out.shape"
        readonly = fresh.copy()
        readonly.flags.writeable = False
        with pytest.raises(AliasingError) as info:
            call(readonly)
        assert info.value.field == "out"
        # a failed call leaves out untouched
        assert np.all(fresh == -7)


def test_out_may_not_overlap_an_input(backend):
    buffer = np.zeros(2 * 5 * 5 * 2)
    x = buffer[:50].reshape(1, 5, 5, 2)
    overlapping = buffer[25:75].reshape(1, 5, 5, 2)
    filt = np.ones((3, 3, 2, 1))
    with pytest.raises(AliasingError) as info:
        depthwise_conv2d_native(x, filt, [1, 1, 1, 1], "SAME", out=overlapping, backend=backend)
    assert info.value.field == "out"
    with pytest.raises(AliasingError):
        depthwise_conv2d_native_backprop_input([1, 5, 5, 2], filt, x, [1, 1, 1, 1], "SAME", out=x, backend=backend)
    with pytest.raises(AliasingError):
        depthwise_conv2d_native_backprop_filter(x, [1, 1, 2, 1], x, [1, 1, 1, 1], "SAME",
                                                out=buffer[:2].reshape(1, 1, 2, 1), backend=backend)


# --- empty tensors (legal in TF, SPEC 5.3) --------------------------------------------------------

EMPTY_CASES = [
    # (input shape NHWC, filter shape, strides hw, padding, expected output shape)
    ((0, 5, 5, 2), (3, 3, 2, 1), (1, 1), "SAME", (0, 5, 5, 2)),  # no batch
    ((1, 5, 5, 0), (3, 3, 0, 2), (1, 1), "SAME", (1, 5, 5, 0)),  # no channels
    ((1, 5, 5, 2), (3, 3, 2, 0), (1, 1), "VALID", (1, 3, 3, 0)),  # multiplier 0
    ((1, 4, 4, 1), (7, 7, 1, 1), (2, 2), "VALID", (1, 0, 0, 1)),  # trunc(-1/2) = 0 (SPEC 5.3)
    ((1, 5, 5, 2), (0, 3, 2, 1), (1, 1), "VALID", (1, 6, 3, 2)),  # empty window: zeros, as TF
    ((1, 0, 5, 2), (1, 1, 2, 1), (1, 1), "SAME", (1, 0, 5, 2)),  # no rows
]


@pytest.mark.parametrize("in_shape, f_shape, strides, padding, out_shape", EMPTY_CASES)
def test_empty_tensors(in_shape, f_shape, strides, padding, out_shape, backend):
    attrs = {"strides": [1, *strides, 1], "padding": padding, "backend": backend}
    x, filt, dy = np.ones(in_shape, np.float32), np.ones(f_shape, np.float32), np.ones(out_shape, np.float32)
    y = depthwise_conv2d_native(x, filt, **attrs)
    dx = depthwise_conv2d_native_backprop_input(list(in_shape), filt, dy, **attrs)
    df = depthwise_conv2d_native_backprop_filter(x, list(f_shape), dy, **attrs)
    assert y.shape == out_shape and dx.shape == in_shape and df.shape == f_shape
    for result in (y, dx, df):
        assert not np.any(result)  # every element is a sum over no taps, or there are none


def test_padding_only_taps_give_zero(backend):
    """EXPLICIT padding wider than the filter: border outputs see only padding."""
    y = depthwise_conv2d_native(np.ones((1, 1, 1, 1), np.float32), np.ones((1, 1, 1, 1), np.float32),
                                [1, 1, 1, 1], "EXPLICIT", explicit_paddings=[0, 0, 2, 1, 1, 0, 0, 0], backend=backend)
    assert y[0, :, :, 0].tolist() == [[0, 0], [0, 0], [0, 1], [0, 0]]


# --- descriptors -----------------------------------------------------------------------------------

def test_descriptor_normalises_and_is_frozen():
    desc = DepthwiseConv2dNativeBackpropInputDesc("half", np.array([1, 2, 3, 1]), "EXPLICIT",
                                                  explicit_paddings=[0, 0, 1, 2, 3, 4, 0, 0], dilations=(1, 2, 1, 1))
    assert desc.T == np.float16
    assert desc.strides == (1, 2, 3, 1) and all(type(s) is int for s in desc.strides)
    assert desc.explicit_paddings == (0, 0, 1, 2, 3, 4, 0, 0) and desc.dilations == (1, 2, 1, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        desc.padding = "SAME"
    for name, dtype in [("bfloat16", BF16), ("float", np.float32), ("double", np.float64), (np.float32, np.float32)]:
        assert DepthwiseConv2dNativeDesc(name, [1, 1, 1, 1], "VALID").T == dtype
    assert DepthwiseConv2dNativeDesc.OPERATOR == "DepthwiseConv2dNative"
    assert DepthwiseConv2dNativeBackpropFilterDesc.OPERATOR == "DepthwiseConv2dNativeBackpropFilter"


def test_descriptor_geometry():
    desc = DepthwiseConv2dNativeDesc("float32", [1, 1, 2, 1], "SAME", dilations=[1, 2, 1, 1])
    g = desc.geometry((2, 9, 8, 3), (3, 4, 3, 2))
    # rows: eff 5, out 9, need 4 -> 2/2; cols: eff 4, out 4, need (4-1)*2+4-8 = 2 -> 1/1
    assert (g.out_height, g.pad_top, g.pad_bottom, g.out_width, g.pad_left, g.pad_right) == (9, 2, 2, 4, 1, 1)
    assert g.output_shape("NHWC") == (2, 9, 4, 6) and g.filter_shape == (3, 4, 3, 2)
    nchw = DepthwiseConv2dNativeDesc("float32", [1, 1, 1, 2], "SAME", data_format="NCHW", dilations=[1, 1, 2, 1])
    assert nchw.geometry((2, 3, 9, 8), (3, 4, 3, 2)).output_shape("NCHW") == (2, 6, 9, 4)


def test_descriptor_reused_for_many_calls(backend):
    desc = DepthwiseConv2dNativeBackpropInputDesc(np.float64, [1, 2, 2, 1], "SAME")
    for seed, size in enumerate((5, 8, 11)):
        x, filt, dy, kwargs = _case_arrays((1, size, size, 2, 3, 3, 2, (2, 2), (1, 1), "SAME", None), seed=seed)
        expected = depthwise_conv2d_native_backprop_input(list(x.shape), filt, dy, backend=backend, **kwargs)
        np.testing.assert_array_equal(desc(list(x.shape), filt, dy, backend=backend), expected)
    with pytest.raises(DataTypeError) as info:  # T is part of the descriptor
        desc([1, 5, 5, 2], filt.astype(np.float32), dy.astype(np.float32))
    assert info.value.field == "filter.dtype"


def test_public_api_exports():
    for name in ("depthwise_conv2d_native", "depthwise_conv2d_native_backprop_input",
                 "depthwise_conv2d_native_backprop_filter", "DepthwiseConv2dNativeDesc",
                 "DepthwiseConv2dNativeBackpropInputDesc", "DepthwiseConv2dNativeBackpropFilterDesc"):
        assert name in gradops.__all__ and hasattr(gradops, name)


def test_reference_handles_benchmark_size_quickly():
    """SUITE D1 (NHWC [32,112,112,32], 3x3, SAME) in a few seconds on the reference backend."""
    import time

    dy = np.ones((32, 112, 112, 32), np.float32)
    filt = np.ones((3, 3, 32, 1), np.float32)
    start = time.perf_counter()
    dx = depthwise_conv2d_native_backprop_input([32, 112, 112, 32], filt, dy, [1, 1, 1, 1], "SAME",
                                                backend="reference")
    elapsed = time.perf_counter() - start
    assert dx[0, 0, 0, 0] == 4 and dx[0, 0, 1, 0] == 6 and dx[0, 5, 5, 0] == 9  # taps inside the image
    assert elapsed < 20  # about 1.5 s when the machine is quiet


# --- registry and gradops run ----------------------------------------------------------------------

def test_registry_lists_the_three_ops():
    from gradops.registry import all_ops, find_op

    names = {op.name: op for op in all_ops()}
    for name, function in [("DepthwiseConv2dNative", "depthwise_conv2d_native"),
                           ("DepthwiseConv2dNativeBackpropInput", "depthwise_conv2d_native_backprop_input"),
                           ("DepthwiseConv2dNativeBackpropFilter", "depthwise_conv2d_native_backprop_filter")]:
        assert names[name].api == "TensorFlow" and names[name].function == function
        assert find_op(function) is names[name]


def test_gradops_run_backprop_input_json(tmp_path, backend):
    """E12 through `gradops run`, inline data, TF field names."""
    filt = [[[[1, 1]], [[2, 1]], [[3, 1]]], [[[4, 1]], [[5, 1]], [[6, 1]]], [[[7, 1]], [[8, 1]], [[9, 1]]]]
    dy = [[[[1, 10], [2, 10], [3, 10]], [[4, 10], [5, 10], [6, 10]], [[7, 10], [8, 10], [9, 10]]]]
    document = {"operator": "DepthwiseConv2dNativeBackpropInput", "input_sizes": [1, 5, 5, 1], "filter": filt,
                "out_backprop": dy, "strides": [1, 2, 2, 1], "padding": "SAME", "T": "float",
                "data_format": "NHWC", "dilations": [1, 1, 1, 1], "explicit_paddings": [], "backend": backend}
    path = tmp_path / "bi.json"
    path.write_text(json.dumps(document))
    assert cli_main(["run", str(path)]) == 0
    with np.load(tmp_path / "bi.out.npz") as result:
        dx = result["output"]
    assert dx.dtype == np.float32
    assert dx[0, :, :, 0].tolist() == [[15, 34, 20, 44, 25], [36, 80, 46, 100, 56], [30, 64, 35, 74, 40],
                                       [66, 140, 76, 160, 86], [45, 94, 50, 104, 55]]


def test_gradops_run_filter_and_forward_json_with_files(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(1, 10, dtype=np.float64).reshape(1, 3, 3, 1))
    np.savez(tmp_path / "dy.npz", dy=np.array([[[[1, 1], [1, 0]], [[1, 0], [1, 0]]]], np.float64))
    document = {"operator": "DepthwiseConv2dNativeBackpropFilter", "input": {"file": "x.npy"},
                "filter_sizes": [2, 2, 1, 2], "out_backprop": {"file": "dy.npz", "key": "dy"},
                "strides": [1, 1, 1, 1], "padding": "VALID", "T": "double", "backend": "reference"}
    path = tmp_path / "bf.json"
    path.write_text(json.dumps(document))
    assert cli_main(["run", str(path), "-o", str(tmp_path / "bf_out.npz")]) == 0
    with np.load(tmp_path / "bf_out.npz") as result:
        df = result["output"]
    assert df[:, :, 0, 0].tolist() == [[12, 16], [24, 28]] and df[:, :, 0, 1].tolist() == [[1, 2], [4, 5]]  # E16
    forward = {"operator": "depthwise_conv2d_native", "input": [[[[1], [2]], [[3], [4]]]], "filter": [[[[1]]]],
               "strides": [1, 1, 1, 1], "padding": "VALID", "T": "half", "backend": "reference"}
    path.write_text(json.dumps(forward))
    assert cli_main(["run", str(path)]) == 0
    with np.load(tmp_path / "bf.out.npz") as result:
        assert result["output"].dtype == np.float16 and result["output"].ravel().tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("document, message", [
    ({"input_sizes": [1, 1, 1, 1], "filter": [[[[1]]]], "out_backprop": [[[[1]]]], "padding": "VALID"},
     "strides: missing"),
    ({"input_sizes": [1, 1, 1, 1], "filter": [[[[1]]]], "strides": [1, 1, 1, 1], "padding": "VALID"},
     "out_backprop: missing"),
    ({"input_sizes": [1, 1, 1, 1], "filter": [[[[1]]]], "out_backprop": [[[[1]]]], "strides": [1, 1, 1, 1],
      "padding": "VALID", "Strides": [1]}, "JSON: expected only the fields"),
    ({"input_sizes": [1, 1, 1, 1], "filter": [[[[1]]]], "out_backprop": [[[[1]]]], "strides": [1, 1, 1, 1],
      "padding": "VALID", "T": "int32"}, "T: Value for attr 'T'"),
    ({"input_sizes": [1, 1, 1], "filter": [[[[1]]]], "out_backprop": [[[[1]]]], "strides": [1, 1, 1, 1],
      "padding": "VALID"}, "input_sizes: DepthwiseConv2DBackpropInput: input must be 4-dimensional"),
    ({"input_sizes": [1, 1, 1, 1], "filter": [[[["a"]]]], "out_backprop": [[[[1]]]], "strides": [1, 1, 1, 1],
      "padding": "VALID"}, "filter: expected numbers"),
])
def test_gradops_run_json_errors(tmp_path, capsys, document, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"operator": "DepthwiseConv2dNativeBackpropInput", **document}))
    assert cli_main(["run", str(path)]) == 2
    assert f"gradops: error: {message}" in capsys.readouterr().err
