"""Framework conventions (SPEC 6.1-6.3) checked against the real peers.

Each case builds :class:`gradops.DmlResampleParams` from a framework's resize arguments, runs
the forward op and its gradient through gradops (both backends, and the equivalent
RESAMPLE1/RESAMPLE2 form of the same parameters), and compares with the framework itself:

* TensorFlow: ``tf.raw_ops.ResizeNearestNeighbor(Grad)`` and ``ResizeBilinear(Grad)`` for the
  three valid (align_corners, half_pixel_centers) combinations (SPEC 6.1);
* PyTorch: ``aten.upsample_nearest{1,2,3}d``, ``_upsample_nearest_exact{1,2,3}d``,
  ``upsample_{linear1d,bilinear2d,trilinear3d}`` (align_corners both ways) and their
  ``*_backward`` ops, from sizes and from scale factors (SPEC 6.2);
* JAX: ``jax.image.resize`` (nearest, linear with antialias=False) and ``jax.vjp``, on any
  axes including batch and channel (SPEC 6.3).

Shapes are random but seeded (sizes 1..9 in, 1..13 out, so non-integer ratios, downsampling
and size-1 axes all occur). Tolerances: nearest forward exactly; nearest gradients exactly too,
because their dY holds small integers, which every accumulation order and precision sums
exactly (so TF's float16 accumulation, SPEC 3.7, is exact here as well); linear rtol 1e-5 in
float32 (SPEC 3.4) on positive data, 2e-3 in float16.

Inexact ties (SPEC 3.7): a nearest-neighbour case is skipped when some sample coordinate lies,
in real arithmetic, exactly on a rounding boundary of the rule (x = k + 0.5 for RESAMPLE1's
floor(x + 0.5), an integer for floor/ceil) that separates two distinct input indices, while
the float32 quotient fl32(fl32(o - opo) / S) is not that exact real number. There the
framework's arithmetic and DirectML's may land on either side (TF align_corners 8 -> 5 is the
SPEC's example). :func:`_inexact_tie` implements the filter; every other case is compared.
"""

from __future__ import annotations

import zlib
from fractions import Fraction
from functools import cache
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from gradops import DmlResampleParams

pytestmark = pytest.mark.peers

BACKENDS = ("reference", "fast")
CASES_PER_CONFIG = 24


# --- shared helpers ------------------------------------------------------------------------------

def _rng(*key: Any) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(repr(key).encode())])


def _inexact_tie(params: DmlResampleParams, in_shape: tuple[int, ...], out_shape: tuple[int, ...],
                 real_scales: dict[int, Fraction]) -> bool:
    """True if a nearest sample of one of the axes in ``real_scales`` (axis -> the framework's
    exact scale out/in as a rational) sits exactly on a rounding boundary between two distinct
    indices while DirectML's float32 quotient differs from the exact one (SPEC 3.7)."""
    if params.mode != "nearest":
        return False
    rule = "half_up" if params.operator == "RESAMPLE1" else {"decreasing": "floor",
                                                              "increasing": "ceil"}[params.rounding_direction]
    for axis, real_scale in real_scales.items():
        n_in = in_shape[axis]
        scale, ipo, opo = params.scales[axis], params.input_pixel_offsets[axis], params.output_pixel_offsets[axis]
        for o in range(out_shape[axis]):
            quotient = (o - Fraction(opo)) / real_scale
            x = quotient - Fraction(ipo)
            boundary = x + Fraction(1, 2) if rule == "half_up" else x
            if boundary.denominator != 1:
                continue
            k = int(boundary)  # the rule changes index at k: (k-1 | k) for floor rules, (k | k+1) for ceil
            low = k if rule == "ceil" else k - 1
            if not 0 <= low < n_in - 1:
                continue  # both neighbours clamp to the same index
            single = np.float32(np.float32(o - opo) / np.float32(scale))
            if Fraction(float(single)) != quotient:
                return True
    return False


def _both_operators(params: DmlResampleParams) -> Iterator[DmlResampleParams]:
    """The parameters and their RESAMPLE1 <-> RESAMPLE2 equivalent where one exists (SPEC 0.6)."""
    yield params
    if params.operator == "RESAMPLE1":
        yield params.as_resample2()
    elif len(params.scales) == 4 and params.rounding_direction != "increasing":
        yield params.as_resample1()


def _check(params: DmlResampleParams, x: np.ndarray, out_shape: tuple[int, ...], dy: np.ndarray,
           y_peer: np.ndarray, dx_peer: np.ndarray, compare: Callable[[np.ndarray, np.ndarray, str], None]) -> None:
    for variant in _both_operators(params):
        for backend in BACKENDS:
            label = f"{variant.operator} {backend}"
            compare(variant.forward(x, out_shape, backend=backend), y_peer, f"forward, {label}")
            compare(variant.gradient(dy, x.shape, backend=backend), dx_peer, f"gradient, {label}")


def _exact(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    assert actual.dtype == expected.dtype, what
    assert_array_equal(actual, expected, err_msg=what)


def _close(rtol: float) -> Callable[[np.ndarray, np.ndarray, str], None]:
    def compare(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
        # atol on the data's scale (~1): a weight of a few ulps on a neighbour is rounding noise
        scale = float(np.max(np.abs(expected), initial=1.0))
        assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=rtol * scale,
                        err_msg=what)
    return compare


def _data(rng: np.random.Generator, shape: tuple[int, ...], mode: str, dtype: Any = np.float32) -> np.ndarray:
    """Forward data: any values for nearest (copied exactly), positive for linear so that rtol
    is meaningful (no cancellation)."""
    if mode == "nearest":
        return rng.standard_normal(shape).astype(dtype)
    return rng.uniform(0.5, 1.5, shape).astype(dtype)


def _grad_data(rng: np.random.Generator, shape: tuple[int, ...], mode: str, dtype: Any = np.float32) -> np.ndarray:
    """dY: small integers for nearest (every accumulation is exact), positive for linear."""
    if mode == "nearest":
        return rng.integers(-4, 5, shape).astype(dtype)
    return rng.uniform(0.5, 1.5, shape).astype(dtype)


# --- TensorFlow (SPEC 6.1) ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tf() -> Any:
    return pytest.importorskip("tensorflow")


TF_CONFIGS = [(method, ac, hpc) for method in ("nearest", "bilinear")
              for ac, hpc in ((False, False), (True, False), (False, True))]


def _tf_config_id(config: tuple[str, bool, bool]) -> str:
    method, ac, hpc = config
    return f"{method}-{'ac' if ac else 'hpc' if hpc else 'legacy'}"


def _tf_real_scale(n_in: int, n_out: int, align_corners: bool) -> Fraction:
    """TF's sampling in real arithmetic: x = o * in/out, or o * (in-1)/(out-1) with AC."""
    if align_corners and n_in > 1 and n_out > 1:
        return Fraction(n_out - 1, n_in - 1)
    return Fraction(n_out, n_in)


@cache
def _tf_cases(method: str, ac: bool, hpc: bool) -> list[tuple[tuple[int, ...], tuple[int, int]]]:
    rng = _rng("tf", method, ac, hpc)
    cases = []
    while len(cases) < CASES_PER_CONFIG:
        n, c = rng.integers(1, 3), rng.integers(1, 4)
        h_in, w_in = rng.integers(1, 10, 2)
        h_out, w_out = rng.integers(1, 14, 2)
        in_shape = (int(n), int(h_in), int(w_in), int(c))
        params = DmlResampleParams.from_tensorflow(in_shape, (int(h_out), int(w_out)), method, ac, hpc)
        real = {1: _tf_real_scale(in_shape[1], int(h_out), ac), 2: _tf_real_scale(in_shape[2], int(w_out), ac)}
        if not _inexact_tie(params, in_shape, (n, h_out, w_out, c), real):
            cases.append((in_shape, (int(h_out), int(w_out))))
    return cases


def _tf_ops(tf: Any, method: str, x: np.ndarray, dy: np.ndarray, ac: bool, hpc: bool
            ) -> tuple[np.ndarray, np.ndarray]:
    size = list(dy.shape[1:3])
    if method == "nearest":
        y = tf.raw_ops.ResizeNearestNeighbor(images=x, size=size, align_corners=ac, half_pixel_centers=hpc)
        dx = tf.raw_ops.ResizeNearestNeighborGrad(grads=dy, size=list(x.shape[1:3]), align_corners=ac,
                                                  half_pixel_centers=hpc)
    else:  # ResizeBilinear returns float32 and its Grad takes float32 grads whatever the image type
        y = tf.raw_ops.ResizeBilinear(images=x, size=size, align_corners=ac, half_pixel_centers=hpc)
        dx = tf.raw_ops.ResizeBilinearGrad(grads=dy.astype(np.float32), original_image=x, align_corners=ac,
                                           half_pixel_centers=hpc)
    return y.numpy(), dx.numpy()


@pytest.mark.parametrize("config", TF_CONFIGS, ids=_tf_config_id)
@pytest.mark.parametrize("case", range(CASES_PER_CONFIG))
def test_tensorflow(tf: Any, config: tuple[str, bool, bool], case: int) -> None:
    method, ac, hpc = config
    in_shape, out_hw = _tf_cases(method, ac, hpc)[case]
    out_shape = (in_shape[0], *out_hw, in_shape[3])
    rng = _rng("tf-data", config, case)
    mode = "nearest" if method == "nearest" else "linear"
    x, dy = _data(rng, in_shape, mode), _grad_data(rng, out_shape, mode)
    y_tf, dx_tf = _tf_ops(tf, method, x, dy, ac, hpc)
    params = DmlResampleParams.from_tensorflow(in_shape, out_hw, method, ac, hpc)
    _check(params, x, out_shape, dy, y_tf, dx_tf, _exact if mode == "nearest" else _close(1e-5))


@pytest.mark.parametrize("config", TF_CONFIGS, ids=_tf_config_id)
def test_tensorflow_float16(tf: Any, config: tuple[str, bool, bool]) -> None:
    """Half data: nearest exact both ways (TF's half gradient accumulates in half, SPEC 3.7,
    which small integers make exact); bilinear's TF forward returns float32, compared with
    gradops' once-rounded float16 at float16 precision."""
    method, ac, hpc = config
    mode = "nearest" if method == "nearest" else "linear"
    for case in range(4):
        in_shape, out_hw = _tf_cases(method, ac, hpc)[case]
        out_shape = (in_shape[0], *out_hw, in_shape[3])
        rng = _rng("tf-half", config, case)
        x, dy = _data(rng, in_shape, mode, np.float16), _grad_data(rng, out_shape, mode, np.float16)
        y_tf, dx_tf = _tf_ops(tf, method, x, dy, ac, hpc)
        params = DmlResampleParams.from_tensorflow(in_shape, out_hw, method, ac, hpc)
        _check(params, x, out_shape, dy, y_tf.astype(np.float16), dx_tf,
               _exact if mode == "nearest" else _close(2e-3))


@pytest.mark.parametrize("method", ["nearest", "bilinear"])
def test_tensorflow_align_corners_size_one(tf: Any, method: str) -> None:
    """align_corners with an input or output of size 1: TF's scale is 0 (in == 1) or unused
    (out == 1); DirectML needs S > 0 and gets out/in (SPEC 6.1)."""
    mode = "nearest" if method == "nearest" else "linear"
    for in_hw, out_hw in [((1, 5), (4, 1)), ((1, 1), (3, 7)), ((6, 1), (1, 1)), ((1, 3), (1, 3))]:
        in_shape, out_shape = (2, *in_hw, 3), (2, *out_hw, 3)
        rng = _rng("tf-ac-one", method, in_hw, out_hw)
        x, dy = _data(rng, in_shape, mode), _grad_data(rng, out_shape, mode)
        y_tf, dx_tf = _tf_ops(tf, method, x, dy, True, False)
        params = DmlResampleParams.from_tensorflow(in_shape, out_hw, method, align_corners=True)
        _check(params, x, out_shape, dy, y_tf, dx_tf, _exact if mode == "nearest" else _close(1e-5))


def test_tensorflow_float16_gradient_accumulates_in_half(tf: Any) -> None:
    """E18: 4096 ones onto one pixel. TF's half ResizeNearestNeighborGrad stops at 2048; the
    contract (float32-or-better accumulation, one rounding) gives 4096 (SPEC 3.7)."""
    dy = np.ones((1, 64, 64, 1), dtype=np.float16)
    dx_tf = tf.raw_ops.ResizeNearestNeighborGrad(grads=dy, size=[1, 1], align_corners=False,
                                                 half_pixel_centers=False).numpy()
    assert dx_tf.item() == 2048
    params = DmlResampleParams.from_tensorflow((1, 1, 1, 1), (64, 64), "nearest")
    for backend in BACKENDS:
        assert params.gradient(dy, (1, 1, 1, 1), backend=backend).item() == 4096


# --- PyTorch (SPEC 6.2) ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


_TORCH_LINEAR_MODE = {1: "linear", 2: "bilinear", 3: "trilinear"}
_TORCH_LINEAR_OP = {1: "upsample_linear1d", 2: "upsample_bilinear2d", 3: "upsample_trilinear3d"}
# (mode, align_corners, spatial axes, from scale factors?)
TORCH_CONFIGS = ([(mode, None, 2, False) for mode in ("nearest", "nearest-exact")]
                 + [("bilinear", ac, 2, False) for ac in (False, True)]
                 + [(mode, None, k, False) for k in (1, 3) for mode in ("nearest", "nearest-exact")]
                 + [(_TORCH_LINEAR_MODE[k], ac, k, False) for k in (1, 3) for ac in (False, True)]
                 + [(mode, None, 2, True) for mode in ("nearest", "nearest-exact")]
                 + [("bilinear", ac, 2, True) for ac in (False, True)]
                 + [("nearest-exact", None, 1, True), ("trilinear", False, 3, True)])
# Factors exact in float32 and not (torch multiplies by fl32(1 / factor) in its kernels).
_FACTORS = (0.5, 0.75, 1.25, 1.5, 2.0, 2.5, 3.0, 0.6, 1.7, 2.3)


def _torch_config_id(config: tuple[str, bool | None, int, bool]) -> str:
    mode, ac, k, factors = config
    return f"{mode}{k}d" + {None: "", False: "-noac", True: "-ac"}[ac] + ("-factor" if factors else "")


def _torch_case_count(config: tuple[str, bool | None, int, bool]) -> int:
    """Many cases for 2-D, a few for 1-D and 3-D."""
    return CASES_PER_CONFIG if config[2] == 2 else 8


@cache
def _torch_cases(config: tuple[str, bool | None, int, bool]) -> list[dict[str, Any]]:
    mode, ac, k, from_factors = config
    count = _torch_case_count(config)
    rng = _rng("torch", config)
    cases: list[dict[str, Any]] = []
    while len(cases) < count:
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
        spatial_in = tuple(int(v) for v in rng.integers(1, 10 if k < 3 else 6, k))
        in_shape = (n, c, *spatial_in)
        if from_factors:
            factors = tuple(float(f) for f in rng.choice(_FACTORS, k))
            kwargs: dict[str, Any] = {"scale_factor": factors}
            spatial_out = tuple(int(np.floor(i * f)) for i, f in zip(spatial_in, factors))
            if min(spatial_out) < 1:
                continue
            # torch's nearest 1d/3d forward kernels skip the out == in / out == 2*in shortcuts
            # that their backward kernels take (see DmlResampleParams.from_torch): not comparable.
            if mode == "nearest" and k != 2 and any(o in (i, 2 * i) for i, o in zip(spatial_in, spatial_out)):
                continue
            real = {2 + d: Fraction(np.float32(f).item()) for d, f in enumerate(factors)}
        else:
            spatial_out = tuple(int(v) for v in rng.integers(1, 14 if k < 3 else 8, k))
            kwargs = {"output_size": spatial_out}
            real = {2 + d: Fraction(o, i) for d, (i, o) in enumerate(zip(spatial_in, spatial_out))}
        params = DmlResampleParams.from_torch(in_shape, mode=mode, align_corners=ac, **kwargs)
        if not _inexact_tie(params, in_shape, (n, c, *spatial_out), real):
            cases.append({"in_shape": in_shape, "out_shape": (n, c, *spatial_out), "kwargs": kwargs,
                          "params": params, "factors": kwargs.get("scale_factor")})
    return cases


def _torch_ops(torch: Any, mode: str, ac: bool | None, x: np.ndarray, dy: np.ndarray,
               factors: tuple[float, ...] | None) -> tuple[np.ndarray, np.ndarray]:
    k = x.ndim - 2
    name = {"nearest": f"upsample_nearest{k}d", "nearest-exact": f"_upsample_nearest_exact{k}d"}.get(
        mode, _TORCH_LINEAR_OP[k])
    forward, backward = getattr(torch.ops.aten, name), getattr(torch.ops.aten, name + "_backward")
    flags = [] if mode.startswith("nearest") else [bool(ac)]
    scales = list(factors) if factors is not None else [None] * k
    out_size, in_size = list(dy.shape[2:]), list(x.shape)
    y = forward(torch.from_numpy(x), out_size, *flags, *scales)
    dx = backward(torch.from_numpy(dy), out_size, in_size, *flags, *scales)
    return y.numpy(), dx.numpy()


@pytest.mark.parametrize("config, case", [pytest.param(config, case, id=f"{_torch_config_id(config)}-{case}")
                                          for config in TORCH_CONFIGS for case in range(_torch_case_count(config))])
def test_torch(torch: Any, config: tuple[str, bool | None, int, bool], case: int) -> None:
    mode, ac, _, _ = config
    c = _torch_cases(config)[case]
    dml_mode = "nearest" if mode.startswith("nearest") else "linear"
    rng = _rng("torch-data", config, case)
    x, dy = _data(rng, c["in_shape"], dml_mode), _grad_data(rng, c["out_shape"], dml_mode)
    y_torch, dx_torch = _torch_ops(torch, mode, ac, x, dy, c["factors"])
    _check(c["params"], x, c["out_shape"], dy, y_torch, dx_torch,
           _exact if dml_mode == "nearest" else _close(1e-5))


@pytest.mark.parametrize("mode, ac", [("nearest", None), ("nearest-exact", None), ("bilinear", False)])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_torch_scale_factor_shortcuts(torch: Any, mode: str, ac: bool | None, k: int) -> None:
    """Factors whose output size equals the input size (first axis) or twice it (second axis):
    torch's linear kernels and its nearest index function ignore the factor there, and so does
    the mapping. torch's nearest 1d/3d forward kernels do not (unlike their own backward
    kernels), so only their gradients are compared."""
    if mode == "bilinear":
        mode = _TORCH_LINEAR_MODE[k]
    spatial_in, factors = ((5, 3, 4), (1.19, 2.2, 1.5))
    in_shape = (2, 2, *spatial_in[:k])
    params = DmlResampleParams.from_torch(in_shape, mode=mode, align_corners=ac, scale_factor=factors[:k])
    out_shape = (2, 2, *(int(np.floor(i * f)) for i, f in zip(spatial_in[:k], factors[:k])))
    dml_mode = "nearest" if mode.startswith("nearest") else "linear"
    rng = _rng("torch-shortcut", mode, k)
    x, dy = _data(rng, in_shape, dml_mode), _grad_data(rng, out_shape, dml_mode)
    y_torch, dx_torch = _torch_ops(torch, mode, ac, x, dy, factors[:k])
    compare = _exact if dml_mode == "nearest" else _close(1e-5)
    for backend in BACKENDS:
        if not (mode == "nearest" and k != 2):
            compare(params.forward(x, out_shape, backend=backend), y_torch, f"forward, {backend}")
        compare(params.gradient(dy, in_shape, backend=backend), dx_torch, f"gradient, {backend}")


@pytest.mark.parametrize("mode, ac", [("nearest", None), ("nearest-exact", None), ("bilinear", False),
                                      ("bilinear", True)])
def test_torch_float16(torch: Any, mode: str, ac: bool | None) -> None:
    """Half data: torch's CPU backward accumulates in float32 and rounds once, as the contract
    does (SPEC 3.7)."""
    dml_mode = "nearest" if mode.startswith("nearest") else "linear"
    for case in _torch_cases((mode, ac, 2, False))[:4]:
        rng = _rng("torch-half", mode, ac, case["in_shape"])
        x = _data(rng, case["in_shape"], dml_mode, np.float16)
        dy = _grad_data(rng, case["out_shape"], dml_mode, np.float16)
        y_torch, dx_torch = _torch_ops(torch, mode, ac, x, dy, None)
        _check(case["params"], x, case["out_shape"], dy, y_torch, dx_torch,
               _exact if dml_mode == "nearest" else _close(2e-3))


# --- JAX (SPEC 6.3) ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def jax() -> Any:
    return pytest.importorskip("jax")


@cache
def _jax_cases(method: str) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Ranks 1..5 (rank 5 exercises the merge of unresampled axes); each axis changes size with
    probability 0.6, so batch and channel axes are resampled too."""
    rng = _rng("jax", method)
    cases = []
    while len(cases) < CASES_PER_CONFIG:
        rank = int(rng.integers(1, 6))
        in_shape = tuple(int(v) for v in rng.integers(1, 8, rank))
        changed = rng.random(rank) < 0.6
        if rank == 5:  # DirectML resamples at most 4 axes: keep two adjacent axes unchanged
            changed[:2] = False
        out_shape = tuple(int(rng.integers(1, 11)) if ch else n for n, ch in zip(in_shape, changed))
        params = DmlResampleParams.from_jax(in_shape, out_shape, method)
        real = {d: Fraction(o, i) for d, (i, o) in enumerate(zip(in_shape, out_shape)) if i != o}
        if not _inexact_tie(params, in_shape, out_shape, real):
            cases.append((in_shape, out_shape))
    return cases


@pytest.mark.parametrize("method", ["nearest", "linear"])
@pytest.mark.parametrize("case", range(CASES_PER_CONFIG))
def test_jax(jax: Any, method: str, case: int) -> None:
    in_shape, out_shape = _jax_cases(method)[case]
    rng = _rng("jax-data", method, case)
    x, dy = _data(rng, in_shape, method), _grad_data(rng, out_shape, method)
    y_jax, vjp = jax.vjp(lambda a: jax.image.resize(a, out_shape, method, antialias=False), x)
    (dx_jax,) = vjp(dy)
    params = DmlResampleParams.from_jax(in_shape, out_shape, method)
    _check(params, x, out_shape, dy, np.asarray(y_jax), np.asarray(dx_jax),
           _exact if method == "nearest" else _close(1e-5))
