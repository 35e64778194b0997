"""Depthwise family against peer frameworks (SPEC 6.5): TensorFlow's raw ops (NHWC, dilation 1,
the only configurations where its CPU kernels are right), the gradient of tf.nn.depthwise_conv2d
for dilation > 1, jax.vjp of lax.conv_general_dilated with feature_group_count (any padding,
NCHW via dimension numbers), and torch.ops.aten.convolution_backward with groups=C (symmetric
padding). Also: the TF error messages gradops quotes are the ones TF really raises.
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

from gradops import (GradopsError, depthwise_conv2d_native, depthwise_conv2d_native_backprop_filter,
                     depthwise_conv2d_native_backprop_input)

pytestmark = pytest.mark.peers

# TF's native CPU kernels are the ones SPEC 5 describes; oneDNN replaces them when enabled.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

BF16 = np.dtype(ml_dtypes.bfloat16)




@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def jax_modules():
    jax = pytest.importorskip("jax")
    from jax import lax

    return jax, lax


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _random_case(seed: int, *, max_dilation: int = 1, equal_strides: bool = True,
                 paddings=("SAME", "VALID", "EXPLICIT"), symmetric_pads: bool = False):
    """A random NHWC configuration with a non-negative output size."""
    rng = np.random.default_rng(seed)
    while True:
        n, c, m = rng.integers(1, 3), rng.integers(1, 5), rng.integers(1, 4)
        h, w = rng.integers(1, 12, size=2)
        fh, fw = rng.integers(1, 5, size=2)
        sh, sw = rng.integers(1, 4, size=2)
        if equal_strides:
            sw = sh
        dh, dw = rng.integers(1, max_dilation + 1, size=2)
        padding = str(rng.choice(paddings))
        pads = [int(p) for p in rng.integers(0, 3, size=4)] if padding == "EXPLICIT" else None
        if pads and symmetric_pads:
            pads = [pads[0], pads[0], pads[2], pads[2]]
        if padding == "SAME" or (h + sum((pads or [0, 0])[:2]) >= (fh - 1) * dh + 1
                                 and w + sum((pads or [0, 0, 0, 0])[2:]) >= (fw - 1) * dw + 1):
            break
    attrs = {"strides": [1, int(sh), int(sw), 1], "padding": padding, "dilations": [1, int(dh), int(dw), 1],
             "explicit_paddings": [0, 0, *pads, 0, 0] if pads else []}
    x = rng.standard_normal((n, h, w, c))
    f = rng.standard_normal((fh, fw, c, m))
    y = depthwise_conv2d_native(x, f, backend="reference", **attrs)
    dy = rng.standard_normal(y.shape)
    return x, f, dy, attrs


def _gradops_all(x, f, dy, attrs, dtype, backend):
    x, f, dy = (a.astype(dtype) for a in (x, f, dy))
    return (depthwise_conv2d_native(x, f, backend=backend, **attrs),
            depthwise_conv2d_native_backprop_input(list(x.shape), f, dy, backend=backend, **attrs),
            depthwise_conv2d_native_backprop_filter(x, list(f.shape), dy, backend=backend, **attrs))


def _close(got, expected, rtol, label=""):
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    scale = max(1.0, float(np.max(np.abs(expected), initial=0)))
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * scale, err_msg=label)


# --- TensorFlow raw ops -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-5), (np.float16, 1e-2),
                                         (BF16, 2e-2)])
@pytest.mark.parametrize("seed", range(8))
def test_tf_raw_ops(tf, backend, seed, dtype, rtol):
    """NHWC, dilation 1, equal strides. TF's half kernels accumulate in half (SPEC 5.6): 1e-2."""
    x, f, dy, attrs = _random_case(seed)
    x, f, dy = (a.astype(dtype) for a in (x, f, dy))
    raw = tf.raw_ops
    tf_attrs = {k: v for k, v in attrs.items() if k != "dilations"}
    expected = (raw.DepthwiseConv2dNative(input=x, filter=f, **tf_attrs).numpy(),
                raw.DepthwiseConv2dNativeBackpropInput(input_sizes=np.array(x.shape, np.int32), filter=f,
                                                       out_backprop=dy, **tf_attrs).numpy(),
                raw.DepthwiseConv2dNativeBackpropFilter(input=x, filter_sizes=np.array(f.shape, np.int32),
                                                        out_backprop=dy, **tf_attrs).numpy())
    results = _gradops_all(x, f, dy, attrs, dtype, backend)
    for label, got, want in zip(("forward", "input", "filter"), results, expected):
        assert got.dtype == want.dtype and got.shape == want.shape, label
        _close(got, want, rtol, f"{label} {attrs}")


@pytest.mark.parametrize("seed", range(6))
def test_tf_nn_depthwise_conv2d_gradient_with_dilation(tf, backend, seed):
    """tf.nn.depthwise_conv2d implements dilation (space-to-batch); its gradient is an oracle where
    the raw CPU kernels are not (SPEC 5.6). Stride 1 (TF requires it with dilation)."""
    x, f, dy, attrs = _random_case(100 + seed, max_dilation=3, paddings=("SAME", "VALID"))
    attrs["strides"] = [1, 1, 1, 1]
    y = depthwise_conv2d_native(x, f, backend="reference", **attrs)
    dy = np.random.default_rng(seed).standard_normal(y.shape)
    x_var, f_var = tf.Variable(x), tf.Variable(f)
    with tf.GradientTape() as tape:
        y_tf = tf.nn.depthwise_conv2d(x_var, f_var, strides=[1, 1, 1, 1], padding=attrs["padding"],
                                      dilations=attrs["dilations"][1:3])
        loss = tf.reduce_sum(y_tf * dy)
    dx_tf, df_tf = tape.gradient(loss, [x_var, f_var])
    for label, got, want in zip(("forward", "input", "filter"), _gradops_all(x, f, dy, attrs, np.float64, backend),
                                (y_tf.numpy(), dx_tf.numpy(), df_tf.numpy())):
        _close(got, want, 1e-10, f"{label} {attrs}")


TF_ERROR_CASES = [
    ("BI", {"strides": [1, 1, 1]}),
    ("BI", {"strides": [1, 0, 0, 1]}),
    ("F", {"strides": [2, 1, 1, 1]}),
    ("F", {"padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 1]}),
    ("F", {"padding": "EXPLICIT", "explicit_paddings": [0, 0, -1, 1, 1, 1, 0, 0]}),
    ("F", {"explicit_paddings": [0, 0, 1, 1, 1, 1, 0, 0]}),
    ("F", {"padding": "EXPLICIT", "explicit_paddings": [1, 0, 1, 1, 1, 1, 0, 0]}),
    ("BI", {"input_sizes": [1, 5, 5]}),
    ("BI", {"filter": np.ones((3, 2, 1))}),
    ("BI", {"input_sizes": [1, 5, 5, 3]}),
    ("BF", {"filter_sizes": [3, 3, 3, 1]}),
    ("BI", {"out_backprop": np.ones((1, 5, 5, 3))}),
    ("BF", {"out_backprop": np.ones((2, 5, 5, 2))}),
    ("BI", {"out_backprop": np.ones((1, 4, 5, 2))}),
    ("BF", {"out_backprop": np.ones((1, 5, 4, 2))}),
    ("F", {"filter": np.ones((3, 3, 3, 1))}),
    ("F", {"input": np.ones((1, 2, 2, 2)), "filter": np.ones((7, 7, 2, 1)), "strides": [1, 2, 2, 1],
           "padding": "VALID"}),
    ("BI", {"input_sizes": [1, -5, 5, 2]}),
    ("F", {"padding": "same"}),
    ("F", {"data_format": "NHCW"}),
]


@pytest.mark.parametrize("op, change", TF_ERROR_CASES)
def test_tf_raises_the_message_gradops_quotes(tf, op, change):
    base = {"F": {"input": np.ones((1, 5, 5, 2)), "filter": np.ones((3, 3, 2, 1))},
            "BI": {"input_sizes": [1, 5, 5, 2], "filter": np.ones((3, 3, 2, 1)), "out_backprop": np.ones((1, 5, 5, 2))},
            "BF": {"input": np.ones((1, 5, 5, 2)), "filter_sizes": [3, 3, 2, 1], "out_backprop": np.ones((1, 5, 5, 2))}}
    args = {**base[op], "strides": [1, 1, 1, 1], "padding": "SAME", **change}
    args = {k: v.astype(np.float32) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    tf_op = {"F": tf.raw_ops.DepthwiseConv2dNative, "BI": tf.raw_ops.DepthwiseConv2dNativeBackpropInput,
             "BF": tf.raw_ops.DepthwiseConv2dNativeBackpropFilter}[op]
    with pytest.raises(Exception) as tf_error:  # noqa: PT011 - TF's error classes vary by row
        tf_op(**args)
    tf_message = str(tf_error.value).split("}} ", 1)[-1].rsplit(" [Op:", 1)[0].split("\n")[0]
    ours = {"F": depthwise_conv2d_native, "BI": depthwise_conv2d_native_backprop_input,
            "BF": depthwise_conv2d_native_backprop_filter}[op]
    with pytest.raises(GradopsError) as error:
        ours(**args, backend="reference")
    assert tf_message in str(error.value), (tf_message, str(error.value))


# --- JAX ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("seed", range(8))
def test_jax_vjp(jax_modules, backend, seed, data_format):
    """SPEC 6.5: lax.conv_general_dilated with the filter as [fh, fw, 1, C*M] (index c*M+m kept)
    and feature_group_count=C; jax.vjp gives both gradients. Unequal strides and any dilation."""
    jax, lax = jax_modules
    x, f, dy, attrs = _random_case(200 + seed, max_dilation=3, equal_strides=False)
    fh, fw, c, m = f.shape
    (_, sh, sw, _), (_, dh, dw, _) = attrs["strides"], attrs["dilations"]
    pads = attrs["explicit_paddings"]
    padding = [(pads[2], pads[3]), (pads[4], pads[5])] if pads else attrs["padding"]
    x32, f32, dy32 = (a.astype(np.float32) for a in (x, f, dy))
    if data_format == "NCHW":
        x32, dy32 = x32.transpose(0, 3, 1, 2).copy(), dy32.transpose(0, 3, 1, 2).copy()

    def conv(lhs, rhs):
        return lax.conv_general_dilated(lhs, rhs.reshape(fh, fw, 1, c * m), window_strides=(int(sh), int(sw)),
                                        padding=padding, rhs_dilation=(int(dh), int(dw)),
                                        dimension_numbers=(data_format, "HWIO", data_format),
                                        feature_group_count=c, precision=lax.Precision.HIGHEST)

    y_jax, vjp = jax.vjp(conv, x32, f32)
    dx_jax, df_jax = vjp(dy32)
    ours = dict(attrs)
    if data_format == "NCHW":
        order = [0, 3, 1, 2]
        ours.update(strides=[attrs["strides"][i] for i in order], dilations=[attrs["dilations"][i] for i in order],
                    explicit_paddings=pads[:2] + pads[6:] + pads[2:6] if pads else [], data_format="NCHW")
    y = depthwise_conv2d_native(x32, f32, backend=backend, **ours)
    dx = depthwise_conv2d_native_backprop_input(list(x32.shape), f32, dy32, backend=backend, **ours)
    df = depthwise_conv2d_native_backprop_filter(x32, list(f32.shape), dy32, backend=backend, **ours)
    for label, got, want in (("forward", y, y_jax), ("input", dx, dx_jax), ("filter", df, df_jax)):
        assert got.shape == want.shape, label
        _close(got, np.asarray(want), 1e-5, f"{label} {ours}")


# --- PyTorch --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_torch_convolution_backward(torch, backend, seed):
    """SPEC 6.5: groups=C, weight = filt.transpose(2,3,0,1).reshape(C*M, 1, fh, fw); symmetric
    padding only, so EXPLICIT (p, p, q, q) or VALID."""
    x, f, dy, attrs = _random_case(300 + seed, max_dilation=3, equal_strides=False, paddings=("VALID", "EXPLICIT"),
                                   symmetric_pads=True)
    p, q = (attrs["explicit_paddings"] or [0] * 8)[2:6:2]
    fh, fw, c, m = f.shape
    weight = torch.from_numpy(np.ascontiguousarray(f.transpose(2, 3, 0, 1).reshape(c * m, 1, fh, fw)))
    x_t = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
    dy_t = torch.from_numpy(np.ascontiguousarray(dy.transpose(0, 3, 1, 2)))
    stride, dilation = attrs["strides"][1:3], attrs["dilations"][1:3]
    y_t = torch.nn.functional.conv2d(x_t, weight, stride=stride, padding=(p, q), dilation=dilation, groups=c)
    dx_t, dw_t, _ = torch.ops.aten.convolution_backward(dy_t, x_t, weight, None, stride, [p, q], dilation, False,
                                                        [0, 0], c, [True, True, False])
    expected = (y_t.numpy().transpose(0, 2, 3, 1), dx_t.numpy().transpose(0, 2, 3, 1),
                dw_t.numpy().reshape(c, m, fh, fw).transpose(2, 3, 0, 1))
    results = _gradops_all(x, f, dy, attrs, np.float64, backend)
    for label, got, want in zip(("forward", "input", "filter"), results, expected):
        assert got.shape == want.shape, label
        _close(got, want, 1e-10, f"{label} {attrs}")
