"""``gradops check`` rows against ONNX's two implementations (SPEC 4.3, 5.6, 6.4, 6.5):
onnxruntime's CPU provider (framework ``"onnxruntime"``) and the ``onnx`` package's reference
evaluator (framework ``"onnx"``), each running a one-node graph built with ``onnx.helper``.

* ``relu``: ``Relu``. ONNX defines no ReLU gradient (``com.microsoft.ReluGrad`` and
  ``ai.onnx.preview.training.Gradient`` exist in neither implementation), so ``relu_grad``'s
  ONNX rows are ``absent``: TensorFlow, PyTorch and JAX cover it.
* ``resample``: ``Resize`` through :meth:`DmlResampleParams.from_onnx`, one row per
  coordinate_transformation_mode, each with linear and the four nearest modes, output sizes
  given as ``sizes`` and as fractional ``scales``.
* ``depthwise``: ``Conv`` with ``group = C`` (SPEC 6.5), SAME as ``auto_pad="SAME_UPPER"``.

ONNX has no gradient operators, so the gradient rows use what it offers: Resize and Conv are
linear in the differentiated input, and the adjoint of the ONNX forward is ``J^T dY`` with
``J`` probed exactly by running it on unit inputs (one per input element, batched along a
leading axis where the operator treats that axis independently), summed in float64.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Sequence

import numpy as np

from .check_depthwise import DEPTHWISE_CONFIGS, DEPTHWISE_OPS, DILATED_CONFIGS, depthwise_probe
from .check_relu import relu_probe
from .check_resample import FORWARD, GRADIENT, INEXACT_TIE, SIZES_2D, resample_data, resample_rtol, robust
from .peers import call, framework
from .verdict import Probe, Trial, TrialRun

RUNTIMES = ("onnxruntime", "onnx")
_OPSET = 19  # Resize-19: half_pixel_symmetric, antialias, axes
_NAMES = {"onnxruntime": "onnxruntime CPU", "onnx": "onnx.reference"}

_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_crop_and_resize", "tf_half_pixel_for_nn")
_MODES = (("linear", "round_prefer_floor"), ("nearest", "round_prefer_floor"), ("nearest", "round_prefer_ceil"),
          ("nearest", "floor"), ("nearest", "ceil"))
_RESIZE_SIZES = SIZES_2D + [((4, 6), (4, 6))]  # unchanged sizes: every scale is 1
# (start, end) per NCHW axis, inside [0, 1]; one non-dyadic bound, whose float32 and float64 products differ
_CROP = ((0.0, 1.0), (0.0, 1.0), (0.2, 0.875), (0.125, 1.0))

_TIE_FLOAT64 = "SPEC 3.7: inexact tie (onnx.reference computes coordinates in float64, gradops in float32)"
_LENGTH_RESIZED = ("SPEC 6.4 [DECISION]: onnx.reference takes length_resized = in * scale (fractional); gradops "
                   "and onnxruntime the output size")
_SIZE_FROM_SCALES = ("SPEC 6.4: ONNX's two implementations size the output differently: floor(in * scale) is "
                     "multiplied in float64 by onnx.reference and in float32 by onnxruntime (3 * fl32(7/3): 6 vs 7)")
_UNSCALED_AXIS = ("SPEC 6.4: onnxruntime's CPU Resize leaves an axis of scale 1 unchanged, skipping its coordinate "
                  "transform (tf_crop_and_resize's roi; tf_half_pixel_for_nn's x = o + 0.5)")
NO_RELU_GRAD = ("ONNX defines no ReLU gradient: com.microsoft ReluGrad and ai.onnx.preview.training Gradient are "
                "in neither onnxruntime's CPU package nor onnx.reference (TensorFlow, PyTorch, JAX cover it)")


# --- one-node graphs -------------------------------------------------------------------------------------

def _frozen(attrs: dict[str, Any]) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()))


@lru_cache(maxsize=256)
def _graph(runtime: str, op: str, attrs: tuple, inputs: tuple[tuple[str, str], ...]) -> Callable[..., np.ndarray]:
    """``run(**feeds)`` of a graph with one ONNX node ``op`` on the named inputs (name, dtype),
    in the node's input order; an empty name skips an optional input."""
    framework("onnx")  # builds the graph for either runtime; raises Missing
    from onnx import helper

    values = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), None)
              for name, dtype in inputs if name]
    node = helper.make_node(op, [name for name, _ in inputs], ["Y"],
                            **{k: list(v) if isinstance(v, tuple) else v for k, v in attrs})
    output = helper.make_tensor_value_info("Y", values[0].type.tensor_type.elem_type, None)
    model = helper.make_model(helper.make_graph([node], op, values, [output]),
                              opset_imports=[helper.make_opsetid("", _OPSET)])
    if runtime == "onnxruntime":
        ort = framework("onnxruntime")
        ort.set_default_logger_severity(3)  # no warning line that tf_half_pixel_for_nn is deprecated
        options = ort.SessionOptions()
        options.log_severity_level = 4  # a failing run is a result to report, not a log line
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return lambda **feeds: session.run(None, feeds)[0]
    evaluator = framework("onnx").ReferenceEvaluator(model)
    return lambda **feeds: evaluator.run(None, feeds)[0]


def _relu(runtime: str) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: _graph(runtime, "Relu", (), (("X", x.dtype.str),))(X=x)


# --- Resize --------------------------------------------------------------------------------------------------

class _Resize:
    """One Resize node: the runtime's forward of ``x`` and the adjoint of its forward."""

    def __init__(self, runtime: str, mode: str, transform: str, nearest_mode: str, by_scales: bool) -> None:
        self.runtime, self.by_scales, self.transform = runtime, by_scales, transform
        self.attrs = _frozen({"mode": mode, "coordinate_transformation_mode": transform, "nearest_mode": nearest_mode})

    def _run(self, x: np.ndarray, factors: Sequence[float], out_shape: Sequence[int],
             crop: Sequence[tuple[float, float]]) -> np.ndarray:
        sizing = (("scales", "<f4"),) if self.by_scales else (("", ""), ("sizes", "<i8"))
        run = _graph(self.runtime, "Resize", self.attrs, (("X", x.dtype.str), ("roi", "<f4"), *sizing))
        roi = np.array([s for s, _ in crop] + [e for _, e in crop], np.float32)
        if self.transform != "tf_crop_and_resize":
            roi = np.zeros(0, np.float32)
        size = np.array(factors, np.float32) if self.by_scales else np.array(out_shape, np.int64)
        return run(X=x, roi=roi, **{sizing[-1][0]: size})

    def forward(self, x: np.ndarray, factors: Sequence[float], out_shape: Sequence[int]) -> np.ndarray:
        return self._run(x, factors, out_shape, _CROP)

    def adjoint(self, dy: np.ndarray, in_shape: Sequence[int], factors: Sequence[float]) -> np.ndarray:
        """``J^T dy``: ``J`` is the forward on every unit input, stacked on a leading axis that
        the node leaves alone (scale 1, roi [0, 1])."""
        count = int(np.prod(in_shape))
        units = np.eye(count, dtype=np.float32).reshape(count, *in_shape)
        jacobian = self._run(units, (1.0, *factors), (count, *dy.shape), ((0.0, 1.0), *_CROP))
        return (jacobian.reshape(count, -1).astype(np.float64) @ dy.astype(np.float64).ravel()).reshape(in_shape)


def _resize_trials(runtime: str, transform: str, gradient: bool, rng: np.random.Generator,
                   backend: str | None) -> list[Trial]:
    from ..conventions import DmlResampleParams

    trials = []
    for mode, nearest_mode in _MODES:
        for by_scales in (False, True):
            node = _Resize(runtime, mode, transform, nearest_mode, by_scales)
            for (h, w), (oh, ow) in _RESIZE_SIZES:
                in_shape = (1, 1, h, w)  # N and C of size 1: no transform moves them (tf_half_pixel_for_nn would)
                factors = (1.0, 1.0, float(np.float32(oh / h)), float(np.float32(ow / w)))
                for dtype in (np.float32, np.float16):
                    x = resample_data(rng, in_shape, mode, dtype)
                    y = call(lambda: node.forward(x, factors, (1, 1, oh, ow)))
                    label = f"{mode if mode == 'linear' else nearest_mode} {h}x{w}->{oh}x{ow} " + \
                        f"{'scales' if by_scales else 'sizes'} {np.dtype(dtype).name}"
                    out_shape = y.shape if isinstance(y, np.ndarray) else (1, 1, oh, ow)
                    params = DmlResampleParams.from_onnx(
                        in_shape, out_shape, mode, transform, nearest_mode, scales=factors if by_scales else None,
                        roi=[s for s, _ in _CROP] + [e for _, e in _CROP])
                    if gradient:
                        dy = resample_data(rng, out_shape, mode, dtype)
                        ours = params.gradient(dy, in_shape, backend=backend)
                        theirs = call(lambda: node.adjoint(dy, in_shape, factors))
                    else:
                        ours, theirs = params.forward(x, out_shape, backend=backend), y
                    rtol = resample_rtol(mode, dtype)
                    known, notes = _resize_divergence(runtime, transform, params, in_shape, out_shape, factors,
                                                      by_scales)
                    trials.append(Trial(label, ours, theirs, rtol, rtol * float(np.max(np.abs(ours), initial=1)),
                                        known=known, notes=notes))
    return trials


def _resize_divergence(runtime: str, transform: str, params: Any, in_shape: Sequence[int],
                       out_shape: Sequence[int], factors: Sequence[float], by_scales: bool
                       ) -> tuple[str | None, tuple[str, ...]]:
    """The documented reason why this resize may differ (None if none), and the case's notes."""
    fractional = by_scales and any(float(np.float64(n) * f) != o for n, f, o in zip(in_shape, factors, out_shape))
    sizes_differ = by_scales and transform != "tf_crop_and_resize" and any(  # crop sizes by the roi too
        np.floor(np.float64(n) * f) != np.floor(np.float32(n) * np.float32(f)) for n, f in zip(in_shape, factors))
    notes = (_SIZE_FROM_SCALES,) if sizes_differ else ()
    if runtime == "onnxruntime" and transform in ("tf_crop_and_resize", "tf_half_pixel_for_nn") and \
            any(n == o > 1 for n, o in zip(in_shape, out_shape)):
        return _UNSCALED_AXIS, notes
    if runtime == "onnx" and fractional and transform in ("align_corners", "pytorch_half_pixel", "tf_crop_and_resize"):
        return _LENGTH_RESIZED, notes
    if not robust(params, in_shape, out_shape):
        return (INEXACT_TIE if runtime == "onnxruntime" else _TIE_FLOAT64), notes
    return None, notes


def _resize_probe(runtime: str, transform: str, gradient: bool) -> TrialRun:
    return lambda rng, backend: _resize_trials(runtime, transform, gradient, rng, backend)


# --- Conv (depthwise) ---------------------------------------------------------------------------------------

def _onnx_conv(runtime: str) -> Callable[[str, tuple, dict[str, Any]], np.ndarray]:
    """The depthwise op ``op`` (TensorFlow operands and attributes, SPEC 5) through ONNX
    ``Conv(group=C)`` on NCHW with the filter as ``[C*M, 1, fh, fw]`` (SPEC 6.5)."""

    def peer(op: str, operands: tuple, attrs: dict[str, Any]) -> np.ndarray:
        nhwc = attrs["data_format"] == "NHWC"
        h, w = (1, 2) if nhwc else (2, 3)
        conv_attrs = {"strides": [attrs["strides"][h], attrs["strides"][w]],
                      "dilations": [attrs["dilations"][h], attrs["dilations"][w]]}
        if attrs["padding"] == "EXPLICIT":
            pads = attrs["explicit_paddings"]
            conv_attrs["pads"] = [pads[2 * h], pads[2 * w], pads[2 * h + 1], pads[2 * w + 1]]
        elif attrs["padding"] == "SAME" and runtime == "onnxruntime" and max(conv_attrs["dilations"]) > 1:
            conv_attrs["pads"] = _same_upper_pads(operands, attrs, h, w)  # ORT: "Dilation not supported" with SAME
        else:  # TensorFlow's SAME puts the odd padding element last: ONNX SAME_UPPER
            conv_attrs["auto_pad"] = "SAME_UPPER" if attrs["padding"] == "SAME" else "VALID"

        def conv(x: np.ndarray, f: np.ndarray) -> np.ndarray:  # NCHW x, TF filter [fh, fw, C, M]
            fh, fw, c, m = f.shape
            weights = np.ascontiguousarray(f.transpose(2, 3, 0, 1).reshape(c * m, 1, fh, fw))
            run = _graph(runtime, "Conv", _frozen({**conv_attrs, "group": c}), (("X", x.dtype.str), ("W", x.dtype.str)))
            return run(X=np.ascontiguousarray(x), W=weights)

        def to_nchw(a: np.ndarray) -> np.ndarray:
            return a.transpose(0, 3, 1, 2) if nhwc else a

        def from_nchw(a: np.ndarray) -> np.ndarray:
            return a.transpose(0, 2, 3, 1) if nhwc else a

        if op == "DepthwiseConv2dNative":
            x, f = operands
            return from_nchw(conv(to_nchw(x), f))
        if op == "DepthwiseConv2dNativeBackpropInput":  # images are independent: probe one, apply to each
            sizes, f, dy = operands
            n, c, height, width = to_nchw(np.empty(tuple(sizes), np.bool_)).shape
            count = c * height * width
            units = np.eye(count, dtype=f.dtype).reshape(count, c, height, width)
            jacobian = conv(units, f).reshape(count, -1).astype(np.float64)
            dx = np.einsum("kj,nj->nk", jacobian, to_nchw(dy).reshape(n, -1).astype(np.float64))
            return from_nchw(dx.reshape(n, c, height, width))
        x, sizes, dy = operands
        dw = np.zeros(tuple(sizes), np.float64)
        for index in np.ndindex(*dw.shape):
            unit = np.zeros(tuple(sizes), x.dtype)
            unit[index] = 1
            dw[index] = np.sum(conv(to_nchw(x), unit).astype(np.float64) * to_nchw(dy).astype(np.float64))
        return dw

    return peer


def _same_upper_pads(operands: tuple, attrs: dict[str, Any], h: int, w: int) -> list[int]:
    """ONNX's SAME_UPPER pads ``[top, left, bottom, right]``: output ``ceil(in / stride)``,
    the odd element of the total padding last."""
    x_shape, filter_shape = (tuple(map(int, a)) if a.ndim == 1 else a.shape for a in operands[:2])  # sizes or arrays
    heads, tails = [], []
    for axis, k in ((h, filter_shape[0]), (w, filter_shape[1])):
        n, stride, dilation = x_shape[axis], attrs["strides"][axis], attrs["dilations"][axis]
        total = max((-(-n // stride) - 1) * stride + (k - 1) * dilation + 1 - n, 0)
        heads.append(total // 2)
        tails.append(total - total // 2)
    return heads + tails


# --- the rows ------------------------------------------------------------------------------------------------

def probes() -> list[Probe]:
    result = []
    for runtime in RUNTIMES:
        result.append(Probe("relu_grad (ACTIVATION_RELU_GRAD)", runtime, "-", None, NO_RELU_GRAD))
        result.append(Probe("relu (ACTIVATION_RELU)", runtime, "Relu", relu_probe(_relu(runtime))))
        for gradient, operator in ((False, FORWARD), (True, GRADIENT)):
            how = "J^T dY of " if gradient else ""
            for transform in _TRANSFORMS:
                if runtime == "onnx" and transform == "tf_half_pixel_for_nn":
                    continue  # removed from Resize in opset 13; onnx.reference rejects it
                result.append(Probe(operator, runtime, f"{how}Resize {transform} (linear, 4 nearest_modes)",
                                    _resize_probe(runtime, transform, gradient)))
        for op in DEPTHWISE_OPS:
            how = "" if op == "DepthwiseConv2dNative" else "J^T dY of "
            result.append(Probe(op, runtime, f"{how}Conv group=C, NHWC and NCHW", depthwise_probe(
                _onnx_conv(runtime), op, DEPTHWISE_CONFIGS + DILATED_CONFIGS, formats=("NHWC", "NCHW"))))
    return result
