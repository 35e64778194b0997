"""gradops.jax under JAX's transformations (jit, grad, vmap and their compositions), its errors
(bad arguments at trace time, forward mode), and that ``import gradops`` does not import JAX.

Results are compared with the same transformation of native JAX (``lax.conv_general_dilated``
with ``feature_group_count``, ``jax.image.resize``, ``jax.nn.relu``) in float32.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import gradops.jax as gj  # noqa: E402
from gradops import DataTypeError, DescriptorError, GradopsError, ShapeError, UnsupportedError  # noqa: E402

pytestmark = pytest.mark.peers

ATTRS = dict(strides=(2, 1), padding=((1, 0), (2, 1)), dilations=(1, 2), data_format="NCHW")
OURS = partial(gj.depthwise_conv2d, backend="reference", **ATTRS)


def _native_conv(x: Any, filt: Any, strides, padding, dilations, data_format: str) -> Any:
    kh, kw, c, m = filt.shape
    return lax.conv_general_dilated(x, filt.reshape(kh, kw, 1, c * m), strides, padding, rhs_dilation=dilations,
                                    dimension_numbers=(data_format, "HWIO", data_format), feature_group_count=c,
                                    precision=lax.Precision.HIGHEST)


NATIVE = partial(_native_conv, **ATTRS)


def _random(*shape: int, seed: int = 0) -> jax.Array:
    return jnp.asarray(np.random.default_rng([seed, *shape]).standard_normal(shape).astype(np.float32))


def _loss(conv, x: Any, filt: Any) -> Any:
    """A non-linear scalar of the output, so the cotangent differs per element."""
    return jnp.sum(jnp.sin(conv(x, filt)))


def _close(got: Any, expected: Any) -> None:
    for g, e in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)):
        scale = max(1.0, float(np.max(np.abs(np.asarray(e)), initial=0)))
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5, atol=1e-5 * scale)


# --- depthwise under transformations -----------------------------------------------------------------

def test_depthwise_jit_grad() -> None:
    x, filt = _random(2, 3, 9, 8), _random(3, 2, 3, 2, seed=1)
    _close(jax.jit(OURS)(x, filt), NATIVE(x, filt))
    _close(jax.jit(jax.grad(partial(_loss, OURS), (0, 1)))(x, filt), jax.grad(partial(_loss, NATIVE), (0, 1))(x, filt))


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0), (1, None)], ids=str)
def test_depthwise_vmap(in_axes: tuple) -> None:
    """A shared filter folds the vmap axis into the batch; per-example filters run one call each."""
    x = _random(3, 2, 3, 9, 8) if in_axes[0] == 0 else _random(2, 3, 3, 9, 8) if in_axes[0] == 1 \
        else _random(2, 3, 9, 8)
    filt = _random(3, 3, 2, 3, 2, seed=1) if in_axes[1] == 0 else _random(3, 2, 3, 2, seed=1)
    _close(jax.vmap(OURS, in_axes)(x, filt), jax.vmap(NATIVE, in_axes)(x, filt))
    grads = jax.jit(jax.vmap(jax.grad(partial(_loss, OURS), (0, 1)), in_axes))(x, filt)
    _close(grads, jax.vmap(jax.grad(partial(_loss, NATIVE), (0, 1)), in_axes)(x, filt))


def test_depthwise_nested_vmap_and_jacobian() -> None:
    """vmap of vmap (x batched twice, filter batched on the outer axis), and jacrev, which vmaps
    the backward pass over the cotangent basis."""
    x, filt = _random(2, 3, 1, 3, 5, 4), _random(2, 3, 2, 3, 2, seed=1)
    ours = jax.vmap(jax.vmap(OURS, (0, None)), (0, 0))
    native = jax.vmap(jax.vmap(NATIVE, (0, None)), (0, 0))
    _close(ours(x, filt), native(x, filt))
    _close(jax.grad(partial(_loss, ours), (0, 1))(x, filt), jax.grad(partial(_loss, native), (0, 1))(x, filt))
    small_x, small_filter = _random(1, 2, 4, 3), _random(2, 2, 2, 1, seed=2)
    _close(jax.jit(jax.jacrev(OURS, (0, 1)))(small_x, small_filter),
           jax.jacrev(NATIVE, (0, 1))(small_x, small_filter))


def test_depthwise_unused_filter_gradient_is_not_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under jit, XLA drops a pure callback whose result is unused: a gradient with respect to x
    alone never runs BackpropFilter."""
    from gradops.jax import _depthwise

    calls = []
    original = _depthwise._backprop_filter_host
    monkeypatch.setattr(_depthwise, "_backprop_filter_host", lambda *args: calls.append(1) or original(*args))
    x, filt = _random(2, 3, 9, 8), _random(3, 2, 3, 2, seed=1)
    conv = partial(gj.depthwise_conv2d, backend="reference", padding="VALID", data_format="NCHW")
    jax.jit(jax.grad(partial(_loss, conv)))(x, filt).block_until_ready()
    assert calls == []
    jax.jit(jax.grad(partial(_loss, conv), 1))(x, filt).block_until_ready()
    assert calls == [1]


# --- resize and relu under transformations --------------------------------------------------------------

@pytest.mark.parametrize("method", ["nearest", "linear"])
@pytest.mark.parametrize("shapes", [((4, 6, 5, 3), (4, 12, 10, 3)), ((4, 6, 5, 3), (2, 9, 4, 5))], ids=str)
def test_resize_vmap_jit_grad(method: str, shapes: tuple) -> None:
    """vmap folds into an unresampled axis when DirectML's 4 axes allow (first shapes), and runs
    one call per example when all 4 axes are resampled (second shapes)."""
    in_shape, out_shape = shapes
    x = _random(3, *in_shape)
    ours = partial(gj.resize, shape=out_shape, method=method, backend="reference")
    native = partial(jax.image.resize, shape=out_shape, method=method, antialias=False)

    def loss(resize, v):
        return jnp.sum(jnp.sin(resize(v)) * jnp.arange(np.prod(out_shape)).reshape(out_shape))
    _close(jax.jit(jax.vmap(ours))(x), jax.vmap(native)(x))
    _close(jax.jit(jax.vmap(jax.grad(partial(loss, ours))))(x), jax.vmap(jax.grad(partial(loss, native)))(x))
    nested = _random(2, 3, *in_shape)
    _close(jax.vmap(jax.vmap(ours), 1)(nested), jax.vmap(jax.vmap(native), 1)(nested))


def test_relu_vmap_jit_grad() -> None:
    x = _random(3, 4, 5)
    ours = partial(gj.relu, backend="reference")
    _close(jax.vmap(ours, 1)(x), jax.vmap(jax.nn.relu, 1)(x))
    grad = jax.jit(jax.vmap(jax.grad(lambda v: jnp.sum(jnp.cos(ours(v)))), 2))(x)
    _close(grad, jax.vmap(jax.grad(lambda v: jnp.sum(jnp.cos(jax.nn.relu(v)))), 2)(x))
    assert ours(jnp.float32(-2)).shape == () and float(jax.grad(ours)(jnp.float32(3))) == 1
    assert ours(jnp.zeros((0, 3))).shape == (0, 3)


# --- errors -----------------------------------------------------------------------------------------

def test_forward_mode_raises_a_clear_error() -> None:
    """custom_vjp functions have no jvp: JAX says so. Second order differentiates the backward
    callback, which JAX also refuses with a message that names it."""
    x = _random(2, 3, 4, 4)
    for function in (partial(gj.relu, backend="reference"),
                     partial(gj.resize, shape=(2, 3, 8, 8), method="linear", backend="reference"),
                     partial(gj.depthwise_conv2d, filter=_random(2, 2, 4, 1), backend="reference")):
        with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function"):
            jax.jvp(function, (x,), (x,))
        with pytest.raises(TypeError, match="forward-mode"):
            jax.jacfwd(function)(x)
    with pytest.raises(ValueError, match="(Buffer|Pure) callbacks do not support JVP"):
        jax.grad(jax.grad(lambda v: jnp.sum(gj.relu(v, backend="reference") ** 3)))(jnp.float32(2))


X = np.zeros((1, 5, 5, 2), np.float32)
FILTER = np.zeros((3, 3, 2, 1), np.float32)


@pytest.mark.parametrize("call, error, field", [
    (lambda: gj.depthwise_conv2d([[1.0]], FILTER), DataTypeError, "x"),
    (lambda: gj.depthwise_conv2d(X.astype(np.int32), FILTER), DataTypeError, "x.dtype"),
    (lambda: gj.depthwise_conv2d(X, FILTER.astype(np.float16)), DataTypeError, "filter.dtype"),
    (lambda: gj.depthwise_conv2d(X[0], FILTER), ShapeError, "x.ndim"),
    (lambda: gj.depthwise_conv2d(X, FILTER[0]), ShapeError, "filter.ndim"),
    (lambda: gj.depthwise_conv2d(X, FILTER, strides=(0, 1)), DescriptorError, "strides[0]"),
    (lambda: gj.depthwise_conv2d(X, FILTER, strides=(1, 1, 1, 1)), DescriptorError, "strides"),
    (lambda: gj.depthwise_conv2d(X, FILTER, dilations=1.5), DescriptorError, "dilations"),
    (lambda: gj.depthwise_conv2d(X, FILTER, padding="same"), DescriptorError, "padding"),
    (lambda: gj.depthwise_conv2d(X, FILTER, padding=((1,), (1, 1))), DescriptorError, "padding[0]"),
    (lambda: gj.depthwise_conv2d(X, FILTER, padding=((0, 0), (-1, 0))), DescriptorError, "padding[1]"),
    (lambda: gj.depthwise_conv2d(X, FILTER, data_format="NCWH"), DescriptorError, "data_format"),
    (lambda: gj.depthwise_conv2d(X, FILTER, data_format="NCHW"), ShapeError, "filter.shape[2]"),
    (lambda: gj.depthwise_conv2d(X[:, :1], FILTER, padding="VALID"), ShapeError, "x.shape[1]"),
    (lambda: gj.depthwise_conv2d(X, FILTER, backend="gpu"), DescriptorError, "backend"),
    (lambda: gj.resize(X.astype(np.float64), (1, 10, 10, 2)), DataTypeError, "x.dtype"),
    (lambda: gj.resize(X, (10, 10)), ShapeError, "shape"),
    (lambda: gj.resize(X, (1, 0, 10, 2)), ShapeError, "shape[1]"),
    (lambda: gj.resize(X, (1, 10, 10, 2), method="cubic"), UnsupportedError, "method"),
    (lambda: gj.resize(X, (1, 10, 10, 2), method="area"), DescriptorError, "method"),
    (lambda: gj.resize(X, (1, 2, 2, 2), method="linear", antialias=True), UnsupportedError, "antialias"),
    (lambda: gj.resize(X[None], (2, 2, 6, 6, 3)), ShapeError, "shape"),
    (lambda: gj.relu(X.astype(np.float64)), DataTypeError, "x.dtype"),
    (lambda: gj.relu(1.0), DataTypeError, "x"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_bad_arguments(call, error: type, field: str) -> None:
    """Checked when traced, before any callback: a GradopsError that starts with the argument."""
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, GradopsError) and str(info.value).startswith(f"{field}: "), str(info.value)


def test_bad_arguments_under_jit() -> None:
    with pytest.raises(ShapeError, match=r"^filter\.shape\[2\]: "):
        jax.jit(partial(gj.depthwise_conv2d, data_format="NCHW"))(X, FILTER)
    with pytest.raises(DataTypeError, match=r"^x\.dtype: "):
        with jax.enable_x64(True):
            jax.jit(gj.relu)(jnp.zeros(3, jnp.float64))


def test_pure_callback_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where JAX has no buffer_callback, the ops run over jax.pure_callback: same results, vmap and
    gradients included."""
    from gradops.jax import _host

    monkeypatch.setattr(_host, "_buffer_callback", None)
    x, filt = _random(3, 2, 3, 9, 8), _random(3, 3, 2, 3, 2, seed=1)
    for in_axes, filters in (((0, None), filt[0]), ((0, 0), filt)):
        grads = jax.jit(jax.vmap(jax.grad(partial(_loss, OURS), (0, 1)), in_axes))(x, filters)
        _close(grads, jax.vmap(jax.grad(partial(_loss, NATIVE), (0, 1)), in_axes)(x, filters))
    image = _random(3, 2, 5, 4)
    for method in ("nearest", "linear"):
        ours = partial(gj.resize, shape=(2, 10, 7), method=method, backend="reference")
        native = partial(jax.image.resize, shape=(2, 10, 7), method=method, antialias=False)
        _close(jax.vmap(jax.grad(lambda v: jnp.sum(jnp.sin(ours(v)))))(image),
               jax.vmap(jax.grad(lambda v: jnp.sum(jnp.sin(native(v)))))(image))
    relu = partial(gj.relu, backend="reference")
    _close(jax.vmap(jax.grad(lambda v: jnp.sum(jnp.cos(relu(v)))))(image),
           jax.vmap(jax.grad(lambda v: jnp.sum(jnp.cos(jax.nn.relu(v)))))(image))
