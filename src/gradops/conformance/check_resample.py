"""``gradops check`` rows of the resample family against TensorFlow, PyTorch and JAX (SPEC 6.1-6.3).

Each convention goes through :class:`gradops.conventions.DmlResampleParams`, the documented
framework -> DirectML mappings. ONNX ``Resize`` rows are in :mod:`.check_onnx`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .peers import call, framework, to_numpy
from .verdict import Probe, Trial, TrialRun


FORWARD = "resample (RESAMPLE1/2)"
GRADIENT = "resample_grad (RESAMPLE_GRAD/GRAD1)"
INEXACT_TIE = "SPEC 3.7: inexact tie (the float32 quotient lands on the other side)"
_HALF_ACCUMULATION = "SPEC 3.7 / E18: the framework accumulates float16 in float16"


def robust(params: Any, in_shape: Sequence[int], out_shape: Sequence[int]) -> bool:
    """Whether no nearest sample of ``params`` is an inexact tie (SPEC 3.7)."""
    from .cases_resample import robust_axis

    if params.mode == "linear":
        return True
    rule = params._rule()
    return all(robust_axis(n_in, n_out, *axis, rule) for n_in, n_out, axis in zip(in_shape, out_shape, params.axes))


def resample_data(rng: np.random.Generator, shape: Sequence[int], mode: str, dtype: type) -> np.ndarray:
    """Small integers for nearest (every sum exact), positive values for linear (no cancellation)."""
    if mode == "nearest":
        return rng.integers(-4, 5, tuple(shape)).astype(dtype)
    return rng.uniform(0.5, 1.5, tuple(shape)).astype(dtype)


def resample_rtol(mode: str, dtype: type) -> float:
    """Nearest moves values (bitwise on the small integers of :func:`resample_data`); linear
    weighs them (SPEC 3.7)."""
    return 0.0 if mode == "nearest" else (1e-5 if dtype == np.float32 else 2e-3)


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


def _resample_trials(cases: Sequence[ResizeCase], gradient: bool, rng: np.random.Generator, backend: str | None,
                     dtypes: Sequence[type] = (np.float32, np.float16)) -> list[Trial]:
    trials = []
    for case in cases:
        mode = case.params.mode
        for dtype in dtypes:
            x = resample_data(rng, case.in_shape, mode, dtype)
            dy = resample_data(rng, case.out_shape, mode, dtype)
            rtol = resample_rtol(mode, dtype)
            label = f"{case.label} {np.dtype(dtype).name}"
            if gradient:
                ours = case.params.gradient(dy, case.in_shape, backend=backend)
                theirs = call(lambda: to_numpy(case.gradient(x, dy)))
            else:
                ours = case.params.forward(x, case.out_shape, backend=backend)
                theirs = call(lambda: to_numpy(case.forward(x)))
            tie = None if robust(case.params, case.in_shape, case.out_shape) else INEXACT_TIE
            trials.append(Trial(label, ours, theirs, rtol, rtol * float(np.max(np.abs(ours), initial=1)), known=tie))
    return trials


SIZES_2D = [((4, 6), (2, 3)), ((3, 5), (7, 8)), ((5, 5), (5, 9)), ((6, 4), (4, 6)), ((1, 3), (3, 1)),
            ((8, 8), (5, 5)), ((2, 7), (9, 3))]


def _tf_resize_cases(method: str, align_corners: bool, half_pixel_centers: bool) -> list[ResizeCase]:
    from ..conventions import DmlResampleParams

    tf = framework("tensorflow")
    raw = tf.raw_ops
    cases = []
    for (h, w), (oh, ow) in SIZES_2D:
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


def _tf_resize_probe(method: str, ac: bool, hpc: bool, gradient: bool) -> TrialRun:
    def run(rng: np.random.Generator, backend: str | None) -> list[Trial]:
        trials = _resample_trials(_tf_resize_cases(method, ac, hpc), gradient, rng, backend)
        if gradient and method == "nearest":  # E18: a 1x1 -> 64x64 upsample scatters 4096 ones onto 1 pixel
            from ..conventions import DmlResampleParams

            tf = framework("tensorflow")
            params = DmlResampleParams.from_tensorflow((1, 1, 1, 1), (64, 64), method, ac, hpc)
            ones = np.ones((1, 64, 64, 1), np.float16)
            theirs = call(lambda: tf.raw_ops.ResizeNearestNeighborGrad(grads=ones, size=[1, 1], align_corners=ac,
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
    sizes = SIZES_2D if spatial == 2 else [((3, 4, 2), (5, 2, 3)), ((2, 2, 2), (4, 3, 1))]
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


def _resample_probe(make_cases: Callable[[], list[ResizeCase]], gradient: bool) -> TrialRun:
    def run(rng: np.random.Generator, backend: str | None) -> list[Trial]:
        return _resample_trials(make_cases(), gradient, rng, backend)

    return run



def probes() -> list[Probe]:
    result = []
    for gradient, operator in ((False, FORWARD), (True, GRADIENT)):
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
    return result
