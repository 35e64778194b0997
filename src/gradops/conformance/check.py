"""``gradops check``: gradops against the installed frameworks, live (SPEC sections 4.4, 5.6, 6).

For every operator and every framework convention that an installed framework can express,
both sides run on edge cases and seeded random cases, and the outcome is one row of a table:

* ``agrees``: every element matches (bitwise for selects and copies, exactly for sums of
  dyadic data, else within a relative tolerance scaled by the sum of |terms|);
* ``known``: they differ, and every difference is a divergence the SPEC documents (ReLU-grad
  NaN/inf and signed zero, TensorFlow ignoring or rejecting dilations, half accumulation,
  inexact ties); the row names the SPEC section and counts the elements;
* ``differs``: an unexplained difference, shown with its first element and both values;
* ``skipped``: the framework is not installed, or no installed framework expresses the
  convention.

Frameworks are imported lazily, once. Resample conventions go through
:class:`gradops.conventions.DmlResampleParams`, the documented framework -> DirectML mappings.
ONNX has no runtime here: its conventions are checked against the framework whose resize
implements the same formula (e.g. ONNX ``half_pixel`` linear = ``jax.image.resize`` linear).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Callable, Sequence

import numpy as np

FRAMEWORKS = ("tensorflow", "pytorch", "jax", "onnx")
_MODULES = {"tensorflow": "tensorflow", "pytorch": "torch", "jax": "jax"}
Explain = Callable[[tuple[int, ...]], "str | None"]


# --- outcome of one comparison --------------------------------------------------------------------

@dataclass
class Trial:
    """gradops' result against the framework's for one input. ``theirs`` may be the exception
    the framework raised. ``rtol == 0`` means bitwise (NaN matches NaN). ``explain`` names the
    documented divergence behind a differing element (None if there is none); ``known`` names
    one behind every differing element of the trial (e.g. a kernel that ignores an attribute),
    ``raises`` one that makes the framework raise (e.g. a kernel that rejects NCHW)."""

    label: str
    ours: np.ndarray
    theirs: np.ndarray | BaseException
    rtol: float = 0.0
    atol: float = 0.0
    explain: Explain | None = None
    known: str | None = None
    raises: str | None = None


@dataclass
class Row:
    operator: str
    framework: str
    convention: str
    status: str = "agrees"
    detail: str = ""
    trials: int = 0
    known: dict[str, list[int]] = field(default_factory=dict)  # reason -> [differing elements, raising trials]

    def note(self, reason: str, elements: int = 0, raised: int = 0) -> None:
        counts = self.known.setdefault(reason, [0, 0])
        counts[0] += elements
        counts[1] += raised


def _differing(ours: np.ndarray, theirs: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    a, b = ours.astype(np.float64), theirs.astype(ours.dtype).astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    if rtol == 0:
        same = (a == b) & (np.signbit(a) == np.signbit(b))
    else:
        with np.errstate(invalid="ignore"):
            same = (a == b) | (np.abs(a - b) <= atol + rtol * np.abs(b))
    return ~(same | both_nan)


def judge(row: Row, trial: Trial) -> None:
    """Fold one trial into its row (the worst outcome wins: differs > known > agrees)."""
    row.trials += 1
    if isinstance(trial.theirs, BaseException):
        if trial.raises:
            row.note(trial.raises, raised=1)
        else:
            _differs(row, f"{trial.label}: the framework raised {_exception_text(trial.theirs)}")
        return
    theirs = np.asarray(trial.theirs)
    if theirs.shape != trial.ours.shape:
        _differs(row, f"{trial.label}: shape {list(trial.ours.shape)} vs framework {list(theirs.shape)}")
        return
    bad = _differing(trial.ours, theirs, trial.rtol, trial.atol)
    if not bad.any():
        return
    unexplained = []
    for index in map(tuple, np.argwhere(bad)):
        reason = trial.known or (trial.explain(index) if trial.explain else None)
        if reason is None:
            unexplained.append(index)
        else:
            row.note(reason, elements=1)
    if unexplained:
        i = unexplained[0]
        _differs(row, f"{trial.label}: {len(unexplained)} of {bad.size} elements differ, first at {list(map(int, i))}: "
                      f"gradops {trial.ours[i]}, framework {theirs[i]}")


def _exception_text(exc: BaseException) -> str:
    """``Type: message`` without TensorFlow's ``{{function_node ...}}`` prefix, one line."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = text.split("}} ")[-1]
    return f"{type(exc).__name__}: {text[:100]}"


def _differs(row: Row, detail: str) -> None:
    if row.status != "differs":
        row.status, row.detail = "differs", detail


def _finish(row: Row) -> Row:
    if row.status == "agrees" and row.known:
        row.status = "known"
        parts = []
        for reason, (elements, raised) in sorted(row.known.items()):
            counts = ([f"{elements} element(s) differ"] if elements else []) + \
                ([f"{raised} case(s) raised"] if raised else [])
            parts.append(f"{reason} ({', '.join(counts)})")
        row.detail = "; ".join(parts)
    elif row.status == "agrees":
        row.detail = f"{row.trials} case(s)"
    return row


# --- frameworks -----------------------------------------------------------------------------------------

class Missing(Exception):
    """A framework that is not installed."""


@cache
def framework(name: str) -> Any:
    """The framework's top-level module, imported once; raises :class:`Missing`."""
    if name == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        module = importlib.import_module(_MODULES[name])
    except ImportError as exc:
        raise Missing(f"{_MODULES[name]} is not installed") from exc
    if name == "jax":
        module.config.update("jax_platforms", "cpu")
    return module


def _call(function: Callable[[], Any]) -> np.ndarray | BaseException:
    """The framework's result as a NumPy array, or the exception it raised."""
    try:
        return np.asarray(function())
    except Exception as exc:  # noqa: BLE001 - a framework error is a result to report
        return exc


def _numpy(value: Any) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


# --- probes -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Probe:
    operator: str
    framework: str
    convention: str
    run: Callable[[np.random.Generator, str | None], list[Trial]] | None  # None: not expressible
    reason: str = ""  # why it is skipped when run is None
    peer: str = ""  # the framework that runs the other side, when it is not ``framework`` (ONNX)


def _relu_values(dtype: type) -> np.ndarray:
    """SPEC 4.2 value classes, plus a subnormal positive and negative value."""
    info = np.finfo(dtype)
    return np.array([0.0, -0.0, 1, -1, 2.5, -3, np.inf, -np.inf, np.nan, info.max, -info.max, info.tiny,
                     info.smallest_subnormal, -info.smallest_subnormal], dtype)


def _relu_inputs(rng: np.random.Generator) -> list[tuple[str, np.ndarray, np.ndarray]]:
    inputs = []
    for dtype in (np.float32, np.float16):
        values = _relu_values(dtype)
        x, dy = np.meshgrid(values, values, indexing="ij")
        inputs.append((f"special values {np.dtype(dtype).name}", x.copy(), dy.copy()))
        inputs.append((f"random {np.dtype(dtype).name}", rng.normal(0, 3, (4, 33)).astype(dtype),
                       rng.normal(0, 3, (4, 33)).astype(dtype)))
    return inputs


def _is_subnormal(value: np.floating) -> bool:
    return bool(value != 0 and abs(value) < np.finfo(value.dtype).tiny)


def _relu_grad_probe(name: str) -> Callable[[np.random.Generator, str | None], list[Trial]]:
    from .. import relu_grad

    def run(rng: np.random.Generator, backend: str | None) -> list[Trial]:
        trials = []
        for label, x, dy in _relu_inputs(rng):
            ours = relu_grad(x, dy, backend=backend)

            def explain(i: tuple[int, ...], x: np.ndarray = x, dy: np.ndarray = dy) -> str | None:
                positive = bool(x[i] > 0)
                if name != "pytorch" and (_is_subnormal(x[i]) or positive and _is_subnormal(dy[i])):
                    return "SPEC 4.2: CPU flush-to-zero of a subnormal X or dY"
                if name == "tensorflow" and not positive and not np.isfinite(dy[i]):
                    return "SPEC 4.2: ReluGrad multiplies by the mask (inf*0 = NaN)"
                if name == "tensorflow" and not positive and np.signbit(dy[i]):
                    return "SPEC 4.2: ReluGrad multiplies by the mask (dY*0 keeps the sign: -0)"
                if name == "pytorch" and np.isnan(x[i]):
                    return "SPEC 4.2: threshold_backward passes dY where X is NaN"
                return None

            if name == "tensorflow":
                tf = framework("tensorflow")
                theirs = _call(lambda: tf.raw_ops.ReluGrad(gradients=dy, features=x).numpy())
            elif name == "pytorch":
                torch = framework("pytorch")
                theirs = _call(lambda: torch.ops.aten.threshold_backward(torch.from_numpy(dy), torch.from_numpy(x),
                                                                         0.0).numpy())
            else:
                jax = framework("jax")
                theirs = _call(lambda: jax.vjp(jax.nn.relu, x)[1](dy)[0])
            trials.append(Trial(label, ours, theirs, explain=explain))
        return trials

    return run


def _relu_probe(name: str) -> Callable[[np.random.Generator, str | None], list[Trial]]:
    from .. import relu

    def run(rng: np.random.Generator, backend: str | None) -> list[Trial]:
        trials = []
        for label, x, _ in _relu_inputs(rng):
            ours = relu(x, backend=backend)

            def explain(i: tuple[int, ...], x: np.ndarray = x) -> str | None:
                if np.isnan(x[i]):
                    return "SPEC 4.3: frameworks propagate NaN (gradops: +0)"
                if x[i] == 0 and np.signbit(x[i]):
                    return "SPEC 4.3: -0 is kept (gradops: +0)"
                if _is_subnormal(x[i]):
                    return "SPEC 4.2: CPU flush-to-zero of a subnormal X or dY"
                return None

            if name == "tensorflow":
                tf = framework("tensorflow")
                theirs = _call(lambda: tf.raw_ops.Relu(features=x).numpy())
            elif name == "pytorch":
                torch = framework("pytorch")
                theirs = _call(lambda: torch.relu(torch.from_numpy(x)).numpy())
            else:
                jax = framework("jax")
                theirs = _call(lambda: jax.nn.relu(x))
            trials.append(Trial(label, ours, theirs, explain=explain))
        return trials

    return run


# --- resample ----------------------------------------------------------------------------------------------

_INEXACT_TIE = "SPEC 3.7: inexact tie (the float32 quotient lands on the other side)"
_HALF_ACCUMULATION = "SPEC 3.7 / E18: the framework accumulates float16 in float16"


def _robust(params: Any, in_shape: Sequence[int], out_shape: Sequence[int]) -> bool:
    """Whether no nearest sample of ``params`` is an inexact tie (SPEC 3.7)."""
    from .cases_resample import robust_axis

    if params.mode == "linear":
        return True
    rule = params._rule()
    return all(robust_axis(n_in, n_out, *axis, rule) for n_in, n_out, axis in zip(in_shape, out_shape, params.axes))


def _resample_data(rng: np.random.Generator, shape: Sequence[int], mode: str, dtype: type) -> np.ndarray:
    """Small integers for nearest (every sum exact), positive values for linear (no cancellation)."""
    if mode == "nearest":
        return rng.integers(-4, 5, tuple(shape)).astype(dtype)
    return rng.uniform(0.5, 1.5, tuple(shape)).astype(dtype)


@dataclass(frozen=True)
class ResizeCase:
    """One resize: gradops' params, the forward shapes, and the framework's forward and
    gradient as functions of (x, dy)."""

    label: str
    params: Any
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    forward: Callable[[np.ndarray], Any]
    gradient: Callable[[np.ndarray, np.ndarray], Any]
    known: str | None = None  # a documented reason why the two sides may differ on this resize


def _resample_trials(cases: Sequence[ResizeCase], gradient: bool, rng: np.random.Generator, backend: str | None,
                     dtypes: Sequence[type] = (np.float32, np.float16), known: str | None = None) -> list[Trial]:
    trials = []
    for case in cases:
        mode = case.params.mode
        for dtype in dtypes:
            x = _resample_data(rng, case.in_shape, mode, dtype)
            dy = _resample_data(rng, case.out_shape, mode, dtype)
            rtol = 0.0 if mode == "nearest" else (1e-5 if dtype == np.float32 else 2e-3)
            label = f"{case.label} {np.dtype(dtype).name}"
            if gradient:
                ours = case.params.gradient(dy, case.in_shape, backend=backend)
                theirs = _call(lambda: _numpy(case.gradient(x, dy)))
            else:
                ours = case.params.forward(x, case.out_shape, backend=backend)
                theirs = _call(lambda: _numpy(case.forward(x)))
            tie = None if _robust(case.params, case.in_shape, case.out_shape) else _INEXACT_TIE
            trials.append(Trial(label, ours, theirs, rtol, rtol * float(np.max(np.abs(ours), initial=1)),
                                known=tie or case.known or known))
    return trials


_SIZES_2D = [((4, 6), (2, 3)), ((3, 5), (7, 8)), ((5, 5), (5, 9)), ((6, 4), (4, 6)), ((1, 3), (3, 1)),
             ((8, 8), (5, 5)), ((2, 7), (9, 3))]


def _tf_resize_cases(method: str, align_corners: bool, half_pixel_centers: bool) -> list[ResizeCase]:
    from ..conventions import DmlResampleParams

    tf = framework("tensorflow")
    raw = tf.raw_ops
    cases = []
    for (h, w), (oh, ow) in _SIZES_2D:
        in_shape, out_shape = (2, h, w, 3), (2, oh, ow, 3)
        params = DmlResampleParams.from_tensorflow(in_shape, (oh, ow), method, align_corners, half_pixel_centers)
        flags = dict(align_corners=align_corners, half_pixel_centers=half_pixel_centers)
        if method == "nearest":
            forward = lambda x, oh=oh, ow=ow: raw.ResizeNearestNeighbor(images=x, size=[oh, ow], **flags)
            grad = lambda x, dy: raw.ResizeNearestNeighborGrad(grads=dy, size=list(x.shape[1:3]), **flags)
        else:  # ResizeBilinear returns float32; its Grad takes float32 grads and returns the image type
            forward = lambda x, oh=oh, ow=ow: raw.ResizeBilinear(images=x, size=[oh, ow], **flags)
            grad = lambda x, dy: raw.ResizeBilinearGrad(grads=dy.astype(np.float32), original_image=x, **flags)
        cases.append(ResizeCase(f"{h}x{w}->{oh}x{ow}", params, in_shape, out_shape, forward, grad))
    return cases


def _tf_resize_probe(method: str, ac: bool, hpc: bool, gradient: bool) -> Callable[..., list[Trial]]:
    def run(rng: np.random.Generator, backend: str | None) -> list[Trial]:
        trials = _resample_trials(_tf_resize_cases(method, ac, hpc), gradient, rng, backend)
        if gradient and method == "nearest":  # E18: a 1x1 -> 64x64 upsample scatters 4096 ones onto 1 pixel
            from ..conventions import DmlResampleParams

            tf = framework("tensorflow")
            params = DmlResampleParams.from_tensorflow((1, 1, 1, 1), (64, 64), method, ac, hpc)
            ones = np.ones((1, 64, 64, 1), np.float16)
            theirs = _call(lambda: tf.raw_ops.ResizeNearestNeighborGrad(grads=ones, size=[1, 1], align_corners=ac,
                                                                        half_pixel_centers=hpc).numpy())
            trials.append(Trial("E18 4096 ones onto 1 pixel float16", params.gradient(ones, (1, 1, 1, 1),
                                                                                     backend=backend),
                                theirs, known=_HALF_ACCUMULATION))
        return trials

    return run


def _torch_resize_cases(mode: str, align_corners: bool | None, spatial: int = 2) -> list[ResizeCase]:
    from ..conventions import DmlResampleParams

    torch = framework("pytorch")
    functional = torch.nn.functional
    sizes = _SIZES_2D if spatial == 2 else [((3, 4, 2), (5, 2, 3)), ((2, 2, 2), (4, 3, 1))]
    cases = []
    for spatial_in, spatial_out in sizes:
        in_shape, out_shape = (2, 3, *spatial_in), (2, 3, *spatial_out)
        params = DmlResampleParams.from_torch(in_shape, spatial_out, mode, align_corners)
        kwargs = {} if align_corners is None else {"align_corners": align_corners}

        def forward(x: np.ndarray, size: tuple[int, ...] = spatial_out) -> Any:
            return functional.interpolate(torch.from_numpy(x), size=size, mode=mode, **kwargs).numpy()

        def gradient(x: np.ndarray, dy: np.ndarray, size: tuple[int, ...] = spatial_out) -> Any:
            leaf = torch.from_numpy(x).requires_grad_(True)
            functional.interpolate(leaf, size=size, mode=mode, **kwargs).backward(torch.from_numpy(dy))
            return leaf.grad.numpy()

        label = "x".join(map(str, spatial_in)) + "->" + "x".join(map(str, spatial_out))
        cases.append(ResizeCase(label, params, in_shape, out_shape, forward, gradient))
    return cases


def _jax_resize_cases(method: str) -> list[ResizeCase]:
    from ..conventions import DmlResampleParams

    jax = framework("jax")
    shapes = [((2, 3, 4, 5), (3, 6, 2, 5)), ((1, 4, 6, 2), (2, 2, 3, 2)), ((5, 3), (8, 2)), ((3, 1, 4), (3, 5, 7))]
    cases = []
    for in_shape, out_shape in shapes:
        params = DmlResampleParams.from_jax(in_shape, out_shape, method)

        def forward(x: np.ndarray, shape: tuple[int, ...] = out_shape) -> Any:
            return jax.image.resize(x, shape, method, antialias=False)

        def gradient(x: np.ndarray, dy: np.ndarray, shape: tuple[int, ...] = out_shape) -> Any:
            return jax.vjp(lambda a: jax.image.resize(a, shape, method, antialias=False), x)[1](dy)[0]

        label = "x".join(map(str, in_shape)) + "->" + "x".join(map(str, out_shape))
        cases.append(ResizeCase(label, params, in_shape, out_shape, forward, gradient))
    return cases


def _onnx_cases(peer_cases: list[ResizeCase], mode: str, transform: str, nearest_mode: str, layout: str
                ) -> list[ResizeCase]:
    """The peer's resizes, with gradops' parameters from the ONNX mapping instead."""
    from ..conventions import DmlResampleParams

    cases = []
    for case in peer_cases:
        params = DmlResampleParams.from_onnx(case.in_shape, case.out_shape, mode, transform, nearest_mode)
        known = None
        if transform == "pytorch_half_pixel" and 1 in case.out_shape:
            known = ("ONNX pytorch_half_pixel samples x = 0 for an output of size 1, torch the centre "
                     "(from_onnx follows ONNX)")
        cases.append(ResizeCase(f"{case.label} ({layout})", params, case.in_shape, case.out_shape, case.forward,
                                case.gradient, known))
    return cases


def _resample_probe(make_cases: Callable[[], list[ResizeCase]], gradient: bool) -> Callable[..., list[Trial]]:
    def run(rng: np.random.Generator, backend: str | None) -> list[Trial]:
        return _resample_trials(make_cases(), gradient, rng, backend)

    return run


# --- depthwise ----------------------------------------------------------------------------------------------

_DEPTHWISE_OPS = ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter")
_DEPTHWISE_CONFIGS = [  # (N, H, W, C), (fh, fw, M), stride, padding, explicit (t, b, l, r), dilation
    ((1, 5, 5, 1), (3, 3, 2), 2, "SAME", None, 1),
    ((2, 6, 7, 3), (3, 2, 1), 2, "SAME", None, 1),
    ((1, 7, 6, 2), (2, 3, 3), 1, "VALID", None, 1),
    ((2, 5, 6, 2), (3, 3, 2), 2, "EXPLICIT", (2, 0, 1, 3), 1),
    ((1, 8, 8, 2), (3, 3, 1), 3, "VALID", None, 1),
]
_DILATED_CONFIGS = [((1, 7, 7, 2), (3, 3, 2), 1, "SAME", None, 2), ((2, 9, 8, 1), (2, 3, 2), 2, "VALID", None, 3),
                    ((1, 6, 6, 2), (3, 2, 1), 1, "EXPLICIT", (1, 1, 0, 2), 2)]


def _depthwise_attrs(config: tuple, data_format: str = "NHWC") -> tuple[dict[str, Any], tuple[int, ...], tuple]:
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
        attrs, in_shape, filter_shape = _depthwise_attrs(config, data_format)
        for dtype in dtypes:
            x = rng.normal(0, 1, in_shape).astype(dtype)
            f = rng.normal(0, 1, filter_shape).astype(dtype)
            y = depthwise.depthwise_conv2d_native(x, f, backend="reference", **attrs)
            dy = rng.normal(0, 1, y.shape).astype(dtype)
            operands = {"DepthwiseConv2dNative": (x, f),
                        "DepthwiseConv2dNativeBackpropInput": (np.array(in_shape, np.int32), f, dy),
                        "DepthwiseConv2dNativeBackpropFilter": (x, np.array(filter_shape, np.int32), dy)}[op]
            function = getattr(depthwise, _snake(op))
            ours = function(*operands, **attrs, backend=backend)
            magnitude = function(*(np.abs(a) if a.dtype.kind != "i" else a for a in operands), **attrs,
                                 backend="reference")
            rtol = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 1e-2, np.dtype(np.float64): 1e-12}[np.dtype(dtype)]
            theirs = _call(lambda: _numpy(peer(op, operands, attrs)))
            label = f"{'x'.join(map(str, in_shape))} {attrs['padding']} s{config[2]} d{config[5]} {np.dtype(dtype).name}"
            trial_known = half_known if dtype == np.float16 and op != "DepthwiseConv2dNativeBackpropInput" else known
            trials.append(Trial(label, ours, theirs, rtol, rtol * float(np.max(np.abs(magnitude), initial=1)),
                                known=trial_known, raises=raises))
    return trials


def _snake(op: str) -> str:
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


def _depthwise_probe(peer: Callable[..., Any], op: str, configs: Sequence[tuple], **options: Any
                     ) -> Callable[..., list[Trial]]:
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
            ours = getattr(depthwise, _snake(op))(*operands, **attrs, backend=backend)
            theirs = _call(lambda: _numpy(peer(op, operands, attrs)))
            trials.append(Trial("4096 unit contributions, float16", ours, theirs, 1e-3, 0.0,
                                known="SPEC 5.6: TensorFlow's CPU kernel accumulates half in half"))
        return trials

    return run


# --- the table of probes -----------------------------------------------------------------------------------------

def probes() -> list[Probe]:
    result = []
    for name in ("tensorflow", "pytorch", "jax"):
        raw = {"tensorflow": "raw_ops.ReluGrad", "pytorch": "aten.threshold_backward", "jax": "vjp(jax.nn.relu)"}
        result.append(Probe("relu_grad (ACTIVATION_RELU_GRAD)", name, raw[name], _relu_grad_probe(name)))
        forward = {"tensorflow": "raw_ops.Relu", "pytorch": "torch.relu", "jax": "jax.nn.relu"}
        result.append(Probe("relu (ACTIVATION_RELU)", name, forward[name], _relu_probe(name)))
    result.append(Probe("relu (ACTIVATION_RELU)", "onnx", "Relu", None, "no ONNX runtime is installed"))
    result.append(Probe("relu_grad (ACTIVATION_RELU_GRAD)", "onnx", "-", None, "ONNX has no ReLU gradient operator"))

    for gradient, operator in ((False, "resample (RESAMPLE1/2)"), (True, "resample_grad (RESAMPLE_GRAD/GRAD1)")):
        for method in ("nearest", "bilinear"):
            for ac, hpc, label in ((False, False, "legacy"), (True, False, "align_corners"),
                                   (False, True, "half_pixel_centers")):
                op_name = ("ResizeNearestNeighbor" if method == "nearest" else "ResizeBilinear") + \
                    ("Grad" if gradient else "")
                result.append(Probe(operator, "tensorflow", f"{op_name} {label}",
                                    _tf_resize_probe(method, ac, hpc, gradient)))
        for mode, ac in (("nearest", None), ("nearest-exact", None), ("bilinear", False), ("bilinear", True)):
            label = f"interpolate {mode}" + ("" if ac is None else f" align_corners={ac}")
            result.append(Probe(operator, "pytorch", label,
                                _resample_probe(lambda mode=mode, ac=ac: _torch_resize_cases(mode, ac), gradient)))
        result.append(Probe(operator, "pytorch", "interpolate trilinear (3 spatial axes)",
                            _resample_probe(lambda: _torch_resize_cases("trilinear", False, 3), gradient)))
        for method in ("nearest", "linear"):
            result.append(Probe(operator, "jax", f"image.resize {method} (any axes)",
                                _resample_probe(lambda method=method: _jax_resize_cases(method), gradient)))
        onnx = [  # (mode, coordinate_transformation_mode, nearest_mode, peer framework, peer cases)
            ("linear", "half_pixel", "round_prefer_floor", "jax", lambda: _jax_resize_cases("linear")),
            ("linear", "pytorch_half_pixel", "round_prefer_floor", "pytorch",
             lambda: _torch_resize_cases("bilinear", False)),
            ("linear", "align_corners", "round_prefer_floor", "pytorch", lambda: _torch_resize_cases("bilinear", True)),
            ("linear", "asymmetric", "round_prefer_floor", "tensorflow",
             lambda: _tf_resize_cases("bilinear", False, False)),
            ("nearest", "half_pixel", "round_prefer_ceil", "jax", lambda: _jax_resize_cases("nearest")),
            ("nearest", "asymmetric", "floor", "pytorch", lambda: _torch_resize_cases("nearest", None)),
            ("nearest", "tf_half_pixel_for_nn", "floor", "tensorflow",
             lambda: _tf_resize_cases("nearest", False, True)),
            ("nearest", "align_corners", "round_prefer_ceil", "tensorflow",
             lambda: _tf_resize_cases("nearest", True, False)),
        ]
        for mode, transform, nearest_mode, peer, make in onnx:
            label = f"Resize {mode} {transform}" + (f" {nearest_mode}" if mode == "nearest" else "") + \
                f" (oracle: {peer})"
            result.append(Probe(operator, "onnx", label, _resample_probe(
                lambda mode=mode, transform=transform, nearest_mode=nearest_mode, peer=peer, make=make:
                _onnx_cases(make(), mode, transform, nearest_mode, peer), gradient), peer=peer))
        for convention in ("half_pixel_symmetric", "tf_crop_and_resize", "nearest round_prefer_floor", "nearest ceil"):
            result.append(Probe(operator, "onnx", f"Resize {convention}", None,
                                "no ONNX runtime is installed and no installed framework implements it"))

    for op in _DEPTHWISE_OPS:
        half = "SPEC 5.6: TensorFlow's CPU kernel accumulates half in half"
        result.append(Probe(op, "tensorflow", "raw_ops NHWC, dilation 1", _depthwise_probe(
            _tf_raw, op, _DEPTHWISE_CONFIGS, dtypes=(np.float32, np.float16, np.float64), half_known=half,
            accumulation=True)))
        if op == "DepthwiseConv2dNative":
            dilation = {"raises": "SPEC 5.6: the CPU raw kernel rejects dilations"}
        else:  # a kernel that ignores dilations computes other values, or rejects out_backprop's sizes
            ignores = "SPEC 5.6: the CPU raw kernel silently ignores dilations"
            dilation = {"known": ignores, "raises": ignores}
        result.append(Probe(op, "tensorflow", "raw_ops dilations > 1",
                            _depthwise_probe(_tf_raw, op, _DILATED_CONFIGS, **dilation)))
        result.append(Probe(op, "tensorflow", "raw_ops NCHW", _depthwise_probe(
            _tf_raw, op, _DEPTHWISE_CONFIGS[:2], formats=("NCHW",),
            raises="SPEC 5.6: the CPU raw kernels reject NCHW")))
        result.append(Probe(op, "tensorflow", "tf.nn.depthwise_conv2d (+ GradientTape), dilations",
                            _depthwise_probe(_tf_nn, op, _DEPTHWISE_CONFIGS[:3] + [
                                c for c in _DILATED_CONFIGS if c[2] == 1])))  # tf.nn: no stride with dilation
        result.append(Probe(op, "jax", "lax.conv_general_dilated groups=C (+ vjp), NHWC and NCHW",
                            _depthwise_probe(_jax_conv, op, _DEPTHWISE_CONFIGS + _DILATED_CONFIGS,
                                             formats=("NHWC", "NCHW"))))
        result.append(Probe(op, "pytorch", "conv2d groups=C (+ autograd), NHWC and NCHW",
                            _depthwise_probe(_torch_conv, op, _DEPTHWISE_CONFIGS + _DILATED_CONFIGS,
                                             formats=("NHWC", "NCHW"))))
        result.append(Probe(op, "onnx", "-", None, "no ONNX runtime is installed (ONNX Conv with group = C)"))
    return result


def run_checks(ops: Sequence[str] = (), frameworks: Sequence[str] = (), backend: str | None = None,
               seed: int = 0) -> list[Row]:
    """Run every selected probe; ``ops`` and ``frameworks`` filter (substring / exact name)."""
    rows = []
    for probe in probes():
        if ops and not any(o.lower() in probe.operator.lower() for o in ops):
            continue
        if frameworks and probe.framework not in frameworks:
            continue
        row = Row(probe.operator, probe.framework, probe.convention)
        peer = probe.peer or probe.framework
        if probe.run is None:
            row.status, row.detail = "skipped", probe.reason
        else:
            try:
                if peer in _MODULES:
                    framework(peer)
                for trial in probe.run(np.random.default_rng(seed), backend):
                    judge(row, trial)
                _finish(row)
            except Missing as exc:
                row.status, row.detail = "skipped", str(exc)
        rows.append(row)
    return rows


_STYLES = {"agrees": "green", "known": "yellow", "differs": "red bold", "skipped": "dim"}
_LABELS = {"agrees": "agrees", "known": "known divergence", "differs": "DIFFERS", "skipped": "skipped"}


def print_report(rows: Sequence[Row]) -> int:
    """Print the table; return the number of rows that differ without a documented reason."""
    from rich.markup import escape
    from rich.table import Table

    from ..cli import _console

    table = Table(title="gradops against the installed frameworks (SPEC 4.4, 5.6, 6)")
    for column in ("operator", "framework", "convention", "result", "detail"):
        table.add_column(column, overflow="fold")
    for row in rows:
        style = _STYLES[row.status]
        table.add_row(escape(row.operator), row.framework, escape(row.convention),
                      f"[{style}]{_LABELS[row.status]}[/{style}]", escape(row.detail))
    console = _console()
    console.print(table)
    counts = {status: sum(r.status == status for r in rows) for status in _LABELS}
    console.print(", ".join(f"{counts[s]} {_LABELS[s]}" for s in _LABELS))
    return counts["differs"]
