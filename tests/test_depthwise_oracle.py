"""Depthwise family against an independent brute-force oracle (the scatter loops of SPEC 5.4,
written out here element by element) and the adjoint identities
``<dY, conv(X)> == <BackpropInput(dY), X> == <BackpropFilter(X, dY), F>``, over random shapes,
strides, dilations, multipliers, paddings and layouts (hypothesis), in float64.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from gradops import (ShapeError, depthwise_conv2d_native, depthwise_conv2d_native_backprop_filter,
                     depthwise_conv2d_native_backprop_input)




# --- the oracle ---------------------------------------------------------------------------------

def oracle_window(size: int, k: int, stride: int, dilation: int, padding: str,
                  explicit: tuple[int, int]) -> tuple[int, int]:
    """(output size, pad before) along one dim, as SPEC 5.3 states it."""
    effective = (k - 1) * dilation + 1
    if padding == "SAME":
        out = math.ceil(size / stride)
        need = max(0, (out - 1) * stride + effective - size)
        return out, need // 2
    before, after = explicit if padding == "EXPLICIT" else (0, 0)
    return math.trunc((size + before + after - effective + stride) / stride), before


def scatter_oracle(x: np.ndarray, f: np.ndarray, dy: np.ndarray, strides: tuple[int, int],
                   dilations: tuple[int, int], pads: tuple[int, int]):
    """Y, dX and dF by the SPEC 5.4 loops over every (b, oy, ox, c, m, ky, kx). NHWC, float64."""
    n, h, w, c_in = x.shape
    fh, fw, _, mult = f.shape
    _, oh, ow, _ = dy.shape
    y, dx, df = np.zeros(dy.shape), np.zeros(x.shape), np.zeros(f.shape)
    for b, oy, ox, c, m, ky, kx in itertools.product(range(n), range(oh), range(ow), range(c_in), range(mult),
                                                     range(fh), range(fw)):
        iy = oy * strides[0] - pads[0] + ky * dilations[0]
        ix = ox * strides[1] - pads[1] + kx * dilations[1]
        if 0 <= iy < h and 0 <= ix < w:
            k = c * mult + m
            y[b, oy, ox, k] += x[b, iy, ix, c] * f[ky, kx, c, m]
            dx[b, iy, ix, c] += dy[b, oy, ox, k] * f[ky, kx, c, m]
            df[ky, kx, c, m] += dy[b, oy, ox, k] * x[b, iy, ix, c]
    return y, dx, df


def test_oracle_reproduces_e12_and_e14():
    """The oracle itself against SPEC numbers, so a wrong oracle cannot hide a wrong library."""
    f = np.zeros((3, 3, 1, 2))
    f[:, :, 0, 0] = np.arange(1, 10).reshape(3, 3)
    f[:, :, 0, 1] = 1
    dy = np.zeros((1, 3, 3, 2))
    dy[..., 0] = np.arange(1, 10).reshape(3, 3)
    dy[..., 1] = 10
    x = np.arange(1, 26, dtype=np.float64).reshape(1, 5, 5, 1)
    assert oracle_window(5, 3, 2, 1, "SAME", (0, 0)) == (3, 1)
    y, dx, _ = scatter_oracle(x, f, dy, (2, 2), (1, 1), (1, 1))
    assert dx[0, :, :, 0].tolist()[1] == [36, 80, 46, 100, 56]
    assert y[0, :, :, 0].tolist() == [[128, 241, 184], [441, 681, 453], [320, 457, 280]]
    assert y[0, :, :, 1].tolist() == [[16, 33, 28], [69, 117, 87], [76, 123, 88]]
    f14 = np.array([[1, 0, -1], [0, 2, 0], [1, 0, 1]], np.float64).reshape(3, 3, 1, 1)
    assert oracle_window(5, 3, 1, 2, "VALID", (0, 0)) == (1, 0)
    assert oracle_window(4, 7, 2, 1, "VALID", (0, 0)) == (0, 0)  # trunc(-1/2)
    y14, _, _ = scatter_oracle(x, f14, np.zeros((1, 1, 1, 1)), (1, 1), (2, 2), (0, 0))
    assert y14.item() == 68


# --- random configurations ------------------------------------------------------------------------

@st.composite
def configurations(draw, max_size: int = 7, max_channels: int = 3):
    padding = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
    return {
        "batch": draw(st.integers(1, 2)), "height": draw(st.integers(1, max_size)),
        "width": draw(st.integers(1, max_size)), "channels": draw(st.integers(1, max_channels)),
        "multiplier": draw(st.integers(1, 3)), "filter": (draw(st.integers(1, 4)), draw(st.integers(1, 4))),
        "strides": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        "dilations": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        "padding": padding,
        "pads": tuple(draw(st.integers(0, 3)) for _ in range(4)) if padding == "EXPLICIT" else None,
        "data_format": draw(st.sampled_from(["NHWC", "NCHW"])),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


def _attributes(cfg) -> dict:
    """TF attributes in data_format order."""
    (sh, sw), (dh, dw), pads = cfg["strides"], cfg["dilations"], cfg["pads"]
    if cfg["data_format"] == "NHWC":
        strides, dilations = [1, sh, sw, 1], [1, dh, dw, 1]
        explicit = [0, 0, *pads, 0, 0] if pads else []
    else:
        strides, dilations = [1, 1, sh, sw], [1, 1, dh, dw]
        explicit = [0, 0, 0, 0, *pads] if pads else []
    return {"strides": strides, "padding": cfg["padding"], "explicit_paddings": explicit,
            "data_format": cfg["data_format"], "dilations": dilations}


def _geometry(cfg):
    pads = cfg["pads"] or (0, 0, 0, 0)
    out_h, top = oracle_window(cfg["height"], cfg["filter"][0], cfg["strides"][0], cfg["dilations"][0],
                               cfg["padding"], pads[:2])
    out_w, left = oracle_window(cfg["width"], cfg["filter"][1], cfg["strides"][1], cfg["dilations"][1],
                                cfg["padding"], pads[2:])
    return out_h, out_w, top, left


def _to_format(nhwc: np.ndarray, data_format: str) -> np.ndarray:
    return np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2)) if data_format == "NCHW" else nhwc


def _from_format(array: np.ndarray, data_format: str) -> np.ndarray:
    return array.transpose(0, 2, 3, 1) if data_format == "NCHW" else array


def _arrays(cfg, out_h: int, out_w: int):
    rng = np.random.default_rng(cfg["seed"])
    x = rng.standard_normal((cfg["batch"], cfg["height"], cfg["width"], cfg["channels"]))
    f = rng.standard_normal((*cfg["filter"], cfg["channels"], cfg["multiplier"]))
    dy = rng.standard_normal((cfg["batch"], out_h, out_w, cfg["channels"] * cfg["multiplier"]))
    return x, f, dy


@settings(max_examples=60, deadline=None)
@given(cfg=configurations())
def test_matches_scatter_oracle(backend, cfg):
    out_h, out_w, top, left = _geometry(cfg)
    attrs, fmt = _attributes(cfg), cfg["data_format"]
    event("negative output size" if min(out_h, out_w) < 0 else "empty output" if min(out_h, out_w) == 0
          else "non-empty output")
    if out_h < 0 or out_w < 0:  # SPEC 5.3: "Computed output size would be negative"
        x, f, dy = _arrays(cfg, 0, 0)
        x, dy = _to_format(x, fmt), _to_format(dy, fmt)
        with pytest.raises(ShapeError, match="Computed output size would be negative"):
            depthwise_conv2d_native(x, f, backend=backend, **attrs)
        with pytest.raises(ShapeError, match="Computed output size would be negative"):
            depthwise_conv2d_native_backprop_input(list(x.shape), f, dy, backend=backend, **attrs)
        with pytest.raises(ShapeError, match="Computed output size would be negative"):
            depthwise_conv2d_native_backprop_filter(x, list(f.shape), dy, backend=backend, **attrs)
        return
    x, f, dy = _arrays(cfg, out_h, out_w)
    y_expected, dx_expected, df_expected = scatter_oracle(x, f, dy, cfg["strides"], cfg["dilations"], (top, left))
    y = depthwise_conv2d_native(_to_format(x, fmt), f, backend=backend, **attrs)
    dx = depthwise_conv2d_native_backprop_input(list(_to_format(x, fmt).shape), f, _to_format(dy, fmt),
                                                backend=backend, **attrs)
    df = depthwise_conv2d_native_backprop_filter(_to_format(x, fmt), list(f.shape), _to_format(dy, fmt),
                                                 backend=backend, **attrs)
    np.testing.assert_allclose(_from_format(y, fmt), y_expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_from_format(dx, fmt), dx_expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(df, df_expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(cfg=configurations(max_size=20, max_channels=6))
def test_adjoint_identities(backend, cfg):
    out_h, out_w, _, _ = _geometry(cfg)
    if out_h < 0 or out_w < 0:
        return  # covered by test_matches_scatter_oracle
    attrs, fmt = _attributes(cfg), cfg["data_format"]
    x, f, dy = _arrays(cfg, out_h, out_w)
    x, dy = _to_format(x, fmt), _to_format(dy, fmt)
    y = depthwise_conv2d_native(x, f, backend=backend, **attrs)
    dx = depthwise_conv2d_native_backprop_input(list(x.shape), f, dy, backend=backend, **attrs)
    df = depthwise_conv2d_native_backprop_filter(x, list(f.shape), dy, backend=backend, **attrs)
    forward, through_input, through_filter = np.vdot(dy, y), np.vdot(dx, x), np.vdot(df, f)
    scale = np.vdot(np.abs(dy), depthwise_conv2d_native(np.abs(x), np.abs(f), backend="reference", **attrs))
    assert abs(forward - through_input) <= 1e-12 * scale + 1e-300
    assert abs(forward - through_filter) <= 1e-12 * scale + 1e-300
