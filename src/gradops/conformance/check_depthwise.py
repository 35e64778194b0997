"""``gradops check`` rows of TensorFlow's depthwise convolution and its gradients against
TensorFlow, JAX and PyTorch (SPEC 5.6, 6.5). ONNX ``Conv`` rows are in :mod:`.check_onnx`."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .peers import call, framework, to_numpy
from .verdict import Probe, Trial, TrialRun


DEPTHWISE_OPS = ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter")
DEPTHWISE_CONFIGS = [  # (N, H, W, C), (fh, fw, M), stride, padding, explicit (t, b, l, r), dilation
    ((1, 5, 5, 1), (3, 3, 2), 2, "SAME", None, 1),
    ((2, 6, 7, 3), (3, 2, 1), 2, "SAME", None, 1),
    ((1, 7, 6, 2), (2, 3, 3), 1, "VALID", None, 1),
    ((2, 5, 6, 2), (3, 3, 2), 2, "EXPLICIT", (2, 0, 1, 3), 1),
    ((1, 8, 8, 2), (3, 3, 1), 3, "VALID", None, 1),
]
DILATED_CONFIGS = [((1, 7, 7, 2), (3, 3, 2), 1, "SAME", None, 2), ((2, 9, 8, 1), (2, 3, 2), 2, "VALID", None, 3),
                    ((1, 6, 6, 2), (3, 2, 1), 1, "EXPLICIT", (1, 1, 0, 2), 2)]


def depthwise_attrs(config: tuple, data_format: str = "NHWC") -> tuple[dict[str, Any], tuple[int, ...], tuple]:
    shape, (fh, fw, m), stride, padding, explicit, dilation = config
    n, h, w, c = shape
    spatial = (1, stride, stride, 1) if data_format == "NHWC" else (1, 1, stride, stride)
    dilations = (1, dilation, dilation, 1) if data_format == "NHWC" else (1, 1, dilation, dilation)
    pads: list[int] = []
    if explicit:
        t, b, left, r = explicit
        pads = [0, 0, t, b, left, r, 0, 0] if data_format == "NHWC" else [0, 0, 0, 0, t, b, left, r]
    attrs = {"strides": list(spatial), "padding": padding, "explicit_paddings": pads, "data_format": data_format,
             "dilations": list(dilations)}
    in_shape = (n, h, w, c) if data_format == "NHWC" else (n, c, h, w)
    return attrs, in_shape, (fh, fw, c, m)


def _depthwise_trials(configs: Sequence[tuple], op: str, peer: Callable[..., Any], rng: np.random.Generator,
                      backend: str | None, *, data_format: str = "NHWC", dtypes: Sequence[type] = (np.float32,),
                      known: str | None = None, raises: str | None = None, half_known: str | None = None
                      ) -> list[Trial]:
    from .. import depthwise

    trials = []
    for config in configs:
        attrs, in_shape, filter_shape = depthwise_attrs(config, data_format)
        for dtype in dtypes:
            x = rng.normal(0, 1, in_shape).astype(dtype)
            f = rng.normal(0, 1, filter_shape).astype(dtype)
            y = depthwise.depthwise_conv2d_native(x, f, backend="reference", **attrs)
            dy = rng.normal(0, 1, y.shape).astype(dtype)
            operands = {"DepthwiseConv2dNative": (x, f),
                        "DepthwiseConv2dNativeBackpropInput": (np.array(in_shape, np.int32), f, dy),
                        "DepthwiseConv2dNativeBackpropFilter": (x, np.array(filter_shape, np.int32), dy)}[op]
            function = getattr(depthwise, snake(op))
            ours = function(*operands, **attrs, backend=backend)
            magnitude = function(*(np.abs(a) if a.dtype.kind != "i" else a for a in operands), **attrs,
                                 backend="reference")
            rtol = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 1e-2, np.dtype(np.float64): 1e-12}[np.dtype(dtype)]
            theirs = call(lambda: to_numpy(peer(op, operands, attrs)))
            label = f"{'x'.join(map(str, in_shape))} {attrs['padding']} s{config[2]} d{config[5]} {np.dtype(dtype).name}"
            trial_known = half_known if dtype == np.float16 and op != "DepthwiseConv2dNativeBackpropInput" else known
            trials.append(Trial(label, ours, theirs, rtol, rtol * float(np.max(np.abs(magnitude), initial=1)),
                                known=trial_known, raises=raises))
    return trials


def snake(op: str) -> str:
    return {"DepthwiseConv2dNative": "depthwise_conv2d_native",
            "DepthwiseConv2dNativeBackpropInput": "depthwise_conv2d_native_backprop_input",
            "DepthwiseConv2dNativeBackpropFilter": "depthwise_conv2d_native_backprop_filter"}[op]


def _tf_raw(op: str, operands: tuple, attrs: dict[str, Any]) -> Any:
    raw = framework("tensorflow").raw_ops
    names = {"DepthwiseConv2dNative": ("input", "filter"),
             "DepthwiseConv2dNativeBackpropInput": ("input_sizes", "filter", "out_backprop"),
             "DepthwiseConv2dNativeBackpropFilter": ("input", "filter_sizes", "out_backprop")}[op]
    return getattr(raw, op)(**dict(zip(names, operands)), **attrs)


def _tf_nn(op: str, operands: tuple, attrs: dict[str, Any]) -> Any:
    """``tf.nn.depthwise_conv2d`` (which implements dilations) and its gradients by GradientTape."""
    tf = framework("tensorflow")
    strides, padding = attrs["strides"], attrs["padding"]
    if padding == "EXPLICIT":
        pads = attrs["explicit_paddings"]
        padding = [pads[0:2], pads[2:4], pads[4:6], pads[6:8]]
    rate = attrs["dilations"][1:3]

    def conv(x: Any, f: Any) -> Any:
        return tf.nn.depthwise_conv2d(x, f, strides, padding, data_format="NHWC", dilations=rate)

    if op == "DepthwiseConv2dNative":
        return conv(*operands)
    if op == "DepthwiseConv2dNativeBackpropInput":
        sizes, f, dy = operands
        x = tf.Variable(np.zeros(sizes, f.dtype))
    else:
        x_value, sizes, dy = operands
        x = tf.constant(x_value)
        f = tf.Variable(np.zeros(sizes, dy.dtype))
    with tf.GradientTape() as tape:
        y = conv(x, f)
    target = x if op == "DepthwiseConv2dNativeBackpropInput" else f
    return tape.gradient(y, target, output_gradients=tf.constant(dy))


def _jax_conv(op: str, operands: tuple, attrs: dict[str, Any]) -> Any:
    """SPEC 6.5: ``lax.conv_general_dilated`` with feature_group_count = C; vjp for the gradients."""
    jax = framework("jax")
    from jax import lax

    fmt = attrs["data_format"]
    h, w = (1, 2) if fmt == "NHWC" else (2, 3)
    strides = (attrs["strides"][h], attrs["strides"][w])
    dilation = (attrs["dilations"][h], attrs["dilations"][w])

    def conv(x: Any, f: Any) -> Any:
        fh, fw, c, m = f.shape
        if attrs["padding"] == "EXPLICIT":
            pads = attrs["explicit_paddings"]
            padding: Any = [(pads[2 * h], pads[2 * h + 1]), (pads[2 * w], pads[2 * w + 1])]
        else:
            padding = attrs["padding"]
        return lax.conv_general_dilated(x, f.reshape(fh, fw, 1, c * m), strides, padding, rhs_dilation=dilation,
                                        dimension_numbers=(fmt, "HWIO", fmt), feature_group_count=c)

    if op == "DepthwiseConv2dNative":
        return conv(*operands)
    if op == "DepthwiseConv2dNativeBackpropInput":
        sizes, f, dy = operands
        return jax.vjp(lambda x: conv(x, f), np.zeros(sizes, f.dtype))[1](dy)[0]
    x, sizes, dy = operands
    return jax.vjp(lambda f: conv(x, f), np.zeros(sizes, x.dtype))[1](dy)[0]


def _torch_conv(op: str, operands: tuple, attrs: dict[str, Any]) -> Any:
    """SPEC 6.5: ``conv2d(groups=C)`` on NCHW with the filter as ``[C*M, 1, fh, fw]``; asymmetric
    padding by ``F.pad``; autograd for the gradients."""
    torch = framework("pytorch")
    functional = torch.nn.functional
    fmt = attrs["data_format"]
    h, w = (1, 2) if fmt == "NHWC" else (2, 3)
    stride = (attrs["strides"][h], attrs["strides"][w])
    dilation = (attrs["dilations"][h], attrs["dilations"][w])

    def pads(x_shape: Sequence[int], f_shape: Sequence[int]) -> tuple[int, int, int, int]:
        from .. import depthwise

        desc = depthwise.DepthwiseConv2dNativeDesc(np.float64, attrs["strides"], attrs["padding"],
                                                   attrs["explicit_paddings"], fmt, attrs["dilations"])
        g = desc.geometry(x_shape, f_shape)
        return g.pad_left, g.pad_right, g.pad_top, g.pad_bottom

    def conv(x: Any, f: Any, x_shape: Sequence[int]) -> Any:
        fh, fw, c, m = f.shape
        weight = f.permute(2, 3, 0, 1).reshape(c * m, 1, fh, fw)
        nchw = x if fmt == "NCHW" else x.permute(0, 3, 1, 2)
        nchw = functional.pad(nchw, pads(x_shape, tuple(f.shape)))
        y = functional.conv2d(nchw, weight, stride=stride, dilation=dilation, groups=c)
        return y if fmt == "NCHW" else y.permute(0, 2, 3, 1)

    if op == "DepthwiseConv2dNative":
        x, f = operands
        return conv(torch.from_numpy(x), torch.from_numpy(f), x.shape).numpy()
    if op == "DepthwiseConv2dNativeBackpropInput":
        sizes, f, dy = operands
        leaf = torch.zeros(tuple(sizes), dtype=torch.from_numpy(f).dtype, requires_grad=True)
        conv(leaf, torch.from_numpy(f), tuple(sizes)).backward(torch.from_numpy(dy))
        return leaf.grad.numpy()
    x, sizes, dy = operands
    leaf = torch.zeros(tuple(sizes), dtype=torch.from_numpy(x).dtype, requires_grad=True)
    conv(torch.from_numpy(x), leaf, x.shape).backward(torch.from_numpy(dy))
    return leaf.grad.numpy()


def depthwise_probe(peer: Callable[..., Any], op: str, configs: Sequence[tuple], **options: Any
                     ) -> TrialRun:
    def run(rng: np.random.Generator, backend: str | None) -> list[Trial]:
        trials = []
        for data_format in options.get("formats", ("NHWC",)):
            trials += _depthwise_trials(configs, op, peer, rng, backend, data_format=data_format,
                                        dtypes=options.get("dtypes", (np.float32,)), known=options.get("known"),
                                        raises=options.get("raises"), half_known=options.get("half_known"))
        if options.get("accumulation"):  # SPEC 5.6: 4096 unit contributions per element in half
            from .. import depthwise

            x = np.ones((1, 64, 64, 1), np.float16)
            attrs = {"strides": [1, 1, 1, 1], "padding": "VALID", "explicit_paddings": [], "data_format": "NHWC",
                     "dilations": [1, 1, 1, 1]}
            if op == "DepthwiseConv2dNative":
                operands: tuple = (x, np.ones((64, 64, 1, 1), np.float16))
            elif op == "DepthwiseConv2dNativeBackpropInput":
                operands = (np.array([1, 64, 64, 1], np.int32), np.ones((64, 64, 1, 1), np.float16),
                            np.ones((1, 1, 1, 1), np.float16))
            else:
                operands = (x, np.array([1, 1, 1, 1], np.int32), np.ones((1, 64, 64, 1), np.float16))
            ours = getattr(depthwise, snake(op))(*operands, **attrs, backend=backend)
            theirs = call(lambda: to_numpy(peer(op, operands, attrs)))
            trials.append(Trial("4096 unit contributions, float16", ours, theirs, 1e-3, 0.0,
                                known="SPEC 5.6: TensorFlow's CPU kernel accumulates half in half"))
        return trials

    return run



def probes() -> list[Probe]:
    result = []
    for op in DEPTHWISE_OPS:
        half = "SPEC 5.6: TensorFlow's CPU kernel accumulates half in half"
        result.append(Probe(op, "tensorflow", "raw_ops NHWC, dilation 1", depthwise_probe(
            _tf_raw, op, DEPTHWISE_CONFIGS, dtypes=(np.float32, np.float16, np.float64), half_known=half,
            accumulation=True)))
        if op == "DepthwiseConv2dNative":
            dilation = {"raises": "SPEC 5.6: the CPU raw kernel rejects dilations"}
        else:  # a kernel that ignores dilations computes other values, or rejects out_backprop's sizes
            ignores = "SPEC 5.6: the CPU raw kernel silently ignores dilations"
            dilation = {"known": ignores, "raises": ignores}
        result.append(Probe(op, "tensorflow", "raw_ops dilations > 1",
                            depthwise_probe(_tf_raw, op, DILATED_CONFIGS, **dilation)))
        result.append(Probe(op, "tensorflow", "raw_ops NCHW", depthwise_probe(
            _tf_raw, op, DEPTHWISE_CONFIGS[:2], formats=("NCHW",),
            raises="SPEC 5.6: the CPU raw kernels reject NCHW")))
        result.append(Probe(op, "tensorflow", "tf.nn.depthwise_conv2d (+ GradientTape), dilations",
                            depthwise_probe(_tf_nn, op, DEPTHWISE_CONFIGS[:3] + [
                                c for c in DILATED_CONFIGS if c[2] == 1])))  # tf.nn: no stride with dilation
        result.append(Probe(op, "jax", "lax.conv_general_dilated groups=C (+ vjp), NHWC and NCHW",
                            depthwise_probe(_jax_conv, op, DEPTHWISE_CONFIGS + DILATED_CONFIGS,
                                             formats=("NHWC", "NCHW"))))
        result.append(Probe(op, "pytorch", "conv2d groups=C (+ autograd), NHWC and NCHW",
                            depthwise_probe(_torch_conv, op, DEPTHWISE_CONFIGS + DILATED_CONFIGS,
                                             formats=("NHWC", "NCHW"))))
    return result
