"""Float64 brute force of the depthwise family (SPEC 5.4), written here, and the cases and checks
the fast-kernel tests share (tests/test_fast_depthwise*.py).

Tolerances. A kernel sums each output element's n terms t_i in some fixed order, so
|fast - exact| <= n * u * sum|t_i|, with u = 2**-53 (float64) or 2**-24 (float32 and half types,
which accumulate in float32); half results add one final rounding, half an ulp of the result.
``sum|t_i|`` comes from the same brute force run on |x| and |F|.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np

from gradops._fast import depthwise as fast

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16]
# accumulation unit roundoff, and the relative half-ulp and smallest subnormal of the output type
ACC_EPS = {np.dtype(np.float64): 2.0 ** -53, np.dtype(np.float32): 2.0 ** -24, np.dtype(np.float16): 2.0 ** -24,
           BF16: 2.0 ** -24}
OUT_EPS = {np.dtype(np.float64): 0.0, np.dtype(np.float32): 0.0, np.dtype(np.float16): 2.0 ** -11, BF16: 2.0 ** -8}
OUT_TINY = {np.dtype(np.float64): 0.0, np.dtype(np.float32): 0.0, np.dtype(np.float16): 2.0 ** -24,
            BF16: 2.0 ** -133}


# --- brute force (float64, one tap at a time, padding taps skipped) -----------------------------

def taps(shape_in, shape_out, filt_hw, stride, dil, pad):
    """(ky, kx, iy, ix, oy, ox) for every in-range tap of the forward correlation."""
    (h, w), (oh, ow), (fh, fw) = shape_in, shape_out, filt_hw
    for ky, kx, oy, ox in itertools.product(range(fh), range(fw), range(oh), range(ow)):
        iy, ix = oy * stride[0] - pad[0] + ky * dil[0], ox * stride[1] - pad[1] + kx * dil[1]
        if 0 <= iy < h and 0 <= ix < w:
            yield ky, kx, iy, ix, oy, ox


def brute_forward(x, f, oh, ow, stride, dil, pad):
    x, f = x.astype(np.float64), f.astype(np.float64)
    n, h, w, c = x.shape
    m = f.shape[3]
    y = np.zeros((n, oh, ow, c, m))
    for ky, kx, iy, ix, oy, ox in taps((h, w), (oh, ow), f.shape[:2], stride, dil, pad):
        y[:, oy, ox] += x[:, iy, ix, :, None] * f[ky, kx]
    return y.reshape(n, oh, ow, c * m)


def brute_backprop_input(dy, f, h, w, stride, dil, pad):
    dy, f = dy.astype(np.float64), f.astype(np.float64)
    n, oh, ow, _ = dy.shape
    c, m = f.shape[2:]
    dy = dy.reshape(n, oh, ow, c, m)
    dx = np.zeros((n, h, w, c))
    for ky, kx, iy, ix, oy, ox in taps((h, w), (oh, ow), f.shape[:2], stride, dil, pad):
        dx[:, iy, ix] += (dy[:, oy, ox] * f[ky, kx]).sum(-1)
    return dx


def brute_backprop_filter(x, dy, fh, fw, stride, dil, pad):
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    n, h, w, c = x.shape
    _, oh, ow, k = dy.shape
    dy = dy.reshape(n, oh, ow, c, k // c)
    df = np.zeros((fh, fw, c, k // c))
    for ky, kx, iy, ix, oy, ox in taps((h, w), (oh, ow), (fh, fw), stride, dil, pad):
        df[ky, kx] += (dy[:, oy, ox] * x[:, iy, ix, :, None]).sum(0)
    return df


# --- cases -------------------------------------------------------------------------------------

def out_size(size, k, stride, dil, before, after):
    return (size + before + after - (k - 1) * dil - 1) // stride + 1


def empty_like_layout(shape, dtype, layout):
    if layout == "NCHW":
        n, h, w, c = shape
        return np.empty((n, c, h, w), dtype).transpose(0, 2, 3, 1)
    if layout == "strided":  # every axis padded, W reversed: no unit stride anywhere
        n, h, w, c = shape
        return np.empty((n, h + 1, 2 * w, c + 3), dtype)[:, :h, ::-2, 1:c + 1]
    return np.empty(shape, dtype)


def as_layout(array, layout):
    out = empty_like_layout(array.shape, array.dtype, layout)
    out[...] = array
    return out


def random_case(rng):
    fh, fw = rng.integers(1, 6, 2)
    sh, sw = rng.integers(1, 4, 2)
    dh, dw = rng.integers(1, 3, 2)
    pads = rng.integers(0, 4, 4)
    h, w = rng.integers(1, 12, 2)
    n, c, m = rng.integers(1, 3), rng.integers(1, 6), rng.integers(1, 4)
    oh = out_size(h, fh, sh, dh, pads[0], pads[1])
    ow = out_size(w, fw, sw, dw, pads[2], pads[3])
    if oh < 1 or ow < 1:
        return random_case(rng)
    return dict(n=n, h=h, w=w, c=c, m=m, fh=fh, fw=fw, stride=(sh, sw), dil=(dh, dw), pad=(pads[0], pads[2]),
                oh=oh, ow=ow)


def random_values(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def bits(array):
    return np.ascontiguousarray(array).view(np.uint8)


def bound(exact_abs, terms, dtype):
    """Allowed |fast - exact| for sums of ``terms`` terms with sum|t| = ``exact_abs``."""
    return (terms + 1) * ACC_EPS[dtype] * exact_abs + OUT_EPS[dtype] * exact_abs + OUT_TINY[dtype]


def check(result, exact, exact_abs, terms, dtype):
    assert result.dtype == dtype
    error = np.abs(result.astype(np.float64) - exact)
    allowed = bound(exact_abs, terms, dtype)
    worst = np.unravel_index(np.argmax(error - allowed), error.shape)
    assert np.all(error <= allowed), f"error {error[worst]} > {allowed[worst]} at {worst}"


def run_all(case, dtype, layouts, rng):
    """Run the three kernels on one case and check them against brute force."""
    n, h, w, c, m = case["n"], case["h"], case["w"], case["c"], case["m"]
    fh, fw, oh, ow = case["fh"], case["fw"], case["oh"], case["ow"]
    stride, dil, pad = case["stride"], case["dil"], case["pad"]
    x = random_values(rng, (n, h, w, c), dtype)
    f = random_values(rng, (fh, fw, c, m), dtype)
    dy = random_values(rng, (n, oh, ow, c * m), dtype)
    x_in, dy_in, f_in = as_layout(x, layouts[0]), as_layout(dy, layouts[0]), f
    args = (*stride, *dil, *pad)

    y = empty_like_layout((n, oh, ow, c * m), dtype, layouts[1])
    fast.conv_forward(x_in, f_in, y, *args)
    check(y, brute_forward(x, f, oh, ow, stride, dil, pad),
          brute_forward(np.abs(x), np.abs(f), oh, ow, stride, dil, pad), fh * fw, dtype)

    dx = empty_like_layout((n, h, w, c), dtype, layouts[1])
    fast.backprop_input(dy_in, f_in, dx, *args)
    check(dx, brute_backprop_input(dy, f, h, w, stride, dil, pad),
          brute_backprop_input(np.abs(dy), np.abs(f), h, w, stride, dil, pad), fh * fw * m, dtype)

    df = np.empty((fh, fw, c, m), dtype)
    fast.backprop_filter(x_in, dy_in, df, *args)
    check(df, brute_backprop_filter(x, dy, fh, fw, stride, dil, pad),
          brute_backprop_filter(np.abs(x), np.abs(dy), fh, fw, stride, dil, pad), n * oh * ow, dtype)
    return y, dx, df


def emulate_stride1_adjoint(dy, f, h, w, pad):
    """Backprop input with stride 1 in the fast backend's documented order, bit for bit: for each m,
    ``acc + dy * weight`` (two roundings) over taps (ky, kx) ascending from +0, then the M sums
    added in m order. Taps in the padding add dy = 0 products, which leave a sum from +0 unchanged."""
    fh, fw, c, mult = f.shape
    padded = np.zeros((dy.shape[0], h + 2 * fh, w + 2 * fw, c * mult), dy.dtype)
    padded[:, fh - 1:fh - 1 + dy.shape[1], fw - 1:fw - 1 + dy.shape[2]] = dy
    sums = [np.zeros((dy.shape[0], h, w, c), dy.dtype) for _ in range(mult)]
    for ky, kx in itertools.product(range(fh), range(fw)):
        y0, x0 = pad[0] - ky + fh - 1, pad[1] - kx + fw - 1  # dx (iy, ix) reads dy (iy + pt - ky, ix + pl - kx)
        for m in range(mult):
            sums[m] = sums[m] + padded[:, y0:y0 + h, x0:x0 + w, m::mult] * f[ky, kx, :, m]
    total = sums[0]
    for m in range(1, mult):
        total = total + sums[m]
    return total


def emulate_stride1_forward(x, f, oh, ow, dil, pad):
    """Forward with stride 1 in the fast backend's documented order, bit for bit: ``acc + x * weight``
    (two roundings) over taps (ky, kx) ascending from +0. Taps in the padding add x = 0 products,
    which leave a sum from +0 unchanged."""
    fh, fw, c, mult = f.shape
    n, h, w, _ = x.shape
    top, left = pad
    padded = np.zeros((n, top + oh + (fh - 1) * dil[0] + h, left + ow + (fw - 1) * dil[1] + w, c * mult), x.dtype)
    padded[:, top:top + h, left:left + w] = np.repeat(x, mult, axis=-1)  # channel c*M + m reads x channel c
    total = np.zeros((n, oh, ow, c * mult), x.dtype)
    for ky, kx in itertools.product(range(fh), range(fw)):
        y0, x0 = ky * dil[0], kx * dil[1]  # y (oy, ox) reads padded (oy + ky*dh, ox + kx*dw)
        total = total + padded[:, y0:y0 + oh, x0:x0 + ow] * f[ky, kx].reshape(-1)
    return total
