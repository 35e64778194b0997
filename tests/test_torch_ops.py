"""gradops.torch's functions against native torch autograd (F.conv2d groups=C, F.interpolate,
F.relu): values and gradients on random cases of layouts, strides, paddings, dilations, modes
and dtypes; memory formats and zero-copy views; torch.library.opcheck for every op.

Truth is torch computing in float64 on the same (rounded) inputs; tolerances are per dtype,
since summation orders differ (and half types round once from float32 sums, SPEC 5.6).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
gt = pytest.importorskip("gradops.torch")

import gradops  # noqa: E402
from gradops import GradopsError  # noqa: E402
from gradops.torch._convert import as_numpy  # noqa: E402

pytestmark = [pytest.mark.peers, pytest.mark.usefixtures("one_torch_thread")]



# Relative tolerance (of the output's largest magnitude) per dtype.
TOLERANCE = {torch.float64: 1e-12, torch.float32: 2e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    assert actual.dtype == dtype, what
    actual, expected = actual.detach().double(), expected.detach().double()
    scale = max(float(expected.abs().max()), 1.0)
    error = float((actual - expected).abs().max()) if actual.numel() else 0.0
    assert error <= TOLERANCE[dtype] * scale, f"{what}: max error {error:.3g} > {TOLERANCE[dtype]} * {scale:.3g}"


def _layout(tensor: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values as NCHW, channels_last, or a non-contiguous view of a larger tensor."""
    if layout == "channels_last":
        return tensor.contiguous(memory_format=torch.channels_last)
    if layout == "strided":  # every other column of a wider tensor
        wide = torch.zeros(*tensor.shape[:-1], 2 * tensor.shape[-1], dtype=tensor.dtype)
        wide[..., ::2] = tensor
        return wide[..., ::2]
    return tensor.contiguous()


def _leaf(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().requires_grad_(True)


def _grads(output: torch.Tensor, inputs: list[torch.Tensor], dy: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.autograd.grad(output, inputs, dy)


# --- depthwise convolution --------------------------------------------------------------------------

def _depthwise_cases(count: int, seed: int):
    rng = random.Random(seed)
    for i in range(count):
        dtype = [torch.float32, torch.float64, torch.float16, torch.bfloat16][i % 4]
        layout = ["nchw", "channels_last", "strided"][i % 3]
        kernel = rng.choice([(3, 3), (1, 1), (2, 3), (4, 4), (5, 5)])
        padding = rng.choice([0, 1, (1, 2), "same", "valid"])
        stride = 1 if padding == "same" else rng.choice([1, 2, (1, 2), (3, 1)])
        dilation = rng.choice([1, 2, (2, 1)])
        reach = [(k - 1) * d + 1 for k, d in zip(kernel, (dilation, dilation) if isinstance(dilation, int)
                                                  else dilation)]  # the dilated kernel fits the input
        yield dict(dtype=dtype, layout=layout, kernel=kernel, padding=padding, stride=stride, dilation=dilation,
                   channels=rng.choice([1, 3, 8]), multiplier=rng.choice([1, 2]), batch=rng.choice([1, 2]),
                   height=rng.randint(reach[0], reach[0] + 7), width=rng.randint(reach[1], reach[1] + 7),
                   seed=seed + i)


@pytest.mark.parametrize("case", list(_depthwise_cases(36, 100)), ids=lambda c: (
    f"{str(c['dtype'])[6:]}-{c['layout']}-k{c['kernel']}-p{c['padding']}-s{c['stride']}-d{c['dilation']}"
    f"-C{c['channels']}M{c['multiplier']}"))
def test_depthwise_matches_conv2d_groups(case):
    generator = torch.Generator().manual_seed(case["seed"])
    dtype, channels = case["dtype"], case["channels"]
    x = torch.randn(case["batch"], channels, case["height"], case["width"], generator=generator).to(dtype)
    w = torch.randn(channels * case["multiplier"], 1, *case["kernel"], generator=generator).to(dtype)
    args = dict(stride=case["stride"], padding=case["padding"], dilation=case["dilation"])
    x_in, w_in = _leaf(_layout(x, case["layout"])), _leaf(w)
    y = gt.depthwise_conv2d(x_in, w_in, **args)
    x64, w64 = _leaf(x.double()), _leaf(w.double())
    y64 = F.conv2d(x64, w64, groups=channels, **args)
    assert y.shape == y64.shape
    _close(y, y64, dtype, "y")
    # channels_last in, channels_last out; with one channel, x is contiguous in both formats and
    # torch's rule (suggest_memory_format) calls it NCHW
    channels_last = case["layout"] == "channels_last" and channels > 1
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    assert y.is_contiguous(memory_format=memory_format)
    dy = torch.randn(y.shape, generator=generator).to(dtype)
    dx, dw = _grads(y, [x_in, w_in], dy)
    dx64, dw64 = _grads(y64, [x64, w64], dy.double())
    _close(dx, dx64, dtype, "dx")
    _close(dw, dw64, dtype, "dweight")
    assert dx.is_contiguous(memory_format=memory_format)
    assert dw.is_contiguous()


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
def test_depthwise_same_padding_with_even_kernels_matches_torch():
    """torch's 'same' pads d*(k-1) in total, the odd element after: equal kernels 2 and 4,
    dilation 1 and 3 (odd totals) against F.conv2d, exactly in float64."""
    for kernel, dilation in (((2, 2), 1), ((4, 2), 3), ((2, 3), (1, 2))):
        x = torch.randn(1, 2, 7, 9, dtype=torch.float64)
        w = torch.randn(2, 1, *kernel, dtype=torch.float64)
        ours = gt.depthwise_conv2d(x, w, padding="same", dilation=dilation)
        np.testing.assert_allclose(ours, F.conv2d(x, w, padding="same", dilation=dilation, groups=2), rtol=1e-13,
                                   atol=1e-13)


# --- interpolate ----------------------------------------------------------------------------------

def _interpolate_cases(count: int, seed: int):
    rng = random.Random(seed)
    for i in range(count):
        mode = ["nearest", "nearest-exact", "bilinear", "linear", "bilinear"][i % 5]
        rank = 3 if mode == "linear" else 4
        align = rng.choice([None, False, True]) if mode in ("linear", "bilinear") else None
        if rank == 4 and rng.random() < 0.5:
            resize = dict(scale_factor=rng.choice([2, 0.5, 1.5, (2, 3), (0.75, 2.5)]))
        else:
            resize = dict(size=rng.choice([7, 16, 3]) if rank == 3 else rng.choice([(12, 10), (5, 17), (9, 9)]))
        yield dict(mode=mode, rank=rank, align=align, resize=resize, dtype=[torch.float32, torch.float16][i % 2],
                   layout=["nchw", "channels_last", "strided"][i % 3] if rank == 4 else ["nchw", "strided"][i % 2],
                   seed=seed + i)


@pytest.mark.parametrize("case", list(_interpolate_cases(30, 200)), ids=lambda c: (
    f"{c['mode']}-{str(c['dtype'])[6:]}-{c['layout']}-{c['resize']}-ac{c['align']}"))
def test_interpolate_matches_torch(case):
    generator = torch.Generator().manual_seed(case["seed"])
    dtype = case["dtype"]
    shape = (2, 3, 8) if case["rank"] == 3 else (2, 3, 6, 8)
    x = torch.randn(shape, generator=generator).to(dtype)
    args = dict(mode=case["mode"], align_corners=case["align"], **case["resize"])
    x_in = _leaf(_layout(x, case["layout"]) if case["rank"] == 4 or case["layout"] != "channels_last" else x)
    y = gt.interpolate(x_in, **args)
    x64 = _leaf(x.double())
    y64 = F.interpolate(x64, **args)
    assert y.shape == y64.shape
    _close(y, y64, dtype, "y")
    if case["layout"] == "channels_last":
        assert y.is_contiguous(memory_format=torch.channels_last)
    dy = torch.randn(y.shape, generator=generator).to(dtype)
    (dx,) = _grads(y, [x_in], dy)
    (dx64,) = _grads(y64, [x64], dy.double())
    _close(dx, dx64, dtype, "dx")
    if case["layout"] == "channels_last":
        assert dx.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("mode, align_corners", [("trilinear", False), ("trilinear", True), ("nearest", None),
                                                  ("nearest-exact", None)])
def test_interpolate_5d_matches_torch(mode, align_corners):
    x = torch.randn(2, 3, 4, 5, 6, generator=torch.Generator().manual_seed(9))
    x_in, x64 = _leaf(x), _leaf(x.double())
    y = gt.interpolate(x_in, size=(7, 3, 9), mode=mode, align_corners=align_corners)
    y64 = F.interpolate(x64, size=(7, 3, 9), mode=mode, align_corners=align_corners)
    _close(y, y64, torch.float32, "y")
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(10))
    _close(_grads(y, [x_in], dy)[0], _grads(y64, [x64], dy.double())[0], torch.float32, "dx")


def test_nearest_interpolate_forward_is_exact_in_float32():
    x = torch.randn(2, 3, 5, 7)
    for mode in ("nearest", "nearest-exact"):
        for size in ((10, 14), (3, 4), (11, 6)):
            torch.testing.assert_close(gt.interpolate(x, size=size, mode=mode), F.interpolate(x, size=size, mode=mode),
                                       rtol=0, atol=0)


# --- ReLU -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("layout", ["nchw", "channels_last", "strided"])
def test_relu_matches_torch_exactly(dtype, layout):
    x = _leaf(_layout(torch.randn(2, 3, 4, 5).to(dtype), layout))
    y = gt.relu(x)
    torch.testing.assert_close(y, F.relu(x), rtol=0, atol=0)
    dy = torch.randn(y.shape).to(dtype)
    torch.testing.assert_close(_grads(y, [x], dy)[0], _grads(F.relu(x), [x], dy)[0], rtol=0, atol=0)
    if layout != "strided":
        assert y.stride() == x.stride()


def test_relu_integer_and_other_ranks():
    x = torch.tensor([-3, 0, 5, 127, -128], dtype=torch.int8)
    torch.testing.assert_close(gt.relu(x), F.relu(x), rtol=0, atol=0)
    x = torch.randn(2, 1, 3, 1, 2, 1, 2, 2)
    torch.testing.assert_close(gt.relu(x), F.relu(x), rtol=0, atol=0)
    # dense in other axis orders, with axes of size 1 among them: walked as one flat run
    for x in (torch.randn(2, 1, 4, 1).permute(3, 1, 0, 2), torch.randn(3, 1, 5, 1).contiguous(
            memory_format=torch.channels_last), torch.randn(2, 3, 4, 5, 6).permute(4, 0, 3, 1, 2)):
        x = _leaf(x)
        y = gt.relu(x)
        torch.testing.assert_close(y, F.relu(x), rtol=0, atol=0)
        assert y.stride() == x.stride()
        dy = torch.randn(y.shape)
        torch.testing.assert_close(_grads(y, [x], dy)[0], _grads(F.relu(x), [x], dy)[0], rtol=0, atol=0)


# --- zero copy and errors -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_views_share_memory(dtype):
    base = torch.randn(2, 4, 6, 8).to(dtype).contiguous(memory_format=torch.channels_last)
    for tensor in (base, base[:, 1:3, ::2, 1:]):
        array = as_numpy(tensor)
        assert array.ctypes.data == tensor.data_ptr()
        assert array.strides == tuple(s * tensor.element_size() for s in tensor.stride())
        np.testing.assert_array_equal(np.asarray(array, np.float64), tensor.double().numpy())


@pytest.mark.parametrize("call, field", [
    (lambda: gt.depthwise_conv2d(torch.randn(1, 2, 5, 5), torch.randn(2, 1, 3, 3).double()), "weight.dtype"),
    (lambda: gt.depthwise_conv2d(torch.randn(1, 2, 5, 5), torch.randn(3, 1, 3, 3)), "weight.shape"),
    (lambda: gt.depthwise_conv2d(torch.randn(1, 2, 5, 5), torch.randn(2, 1, 3, 3), stride=2, padding="same"),
     "padding"),
    (lambda: gt.depthwise_conv2d(torch.randn(1, 2, 2, 5), torch.randn(2, 1, 3, 3)), "x.shape[2]"),
    (lambda: gt.depthwise_conv2d(torch.randn(1, 2, 5, 5), torch.randn(2, 1, 3, 3), dilation=0), "dilation[0]"),
    (lambda: gt.depthwise_conv2d(np.zeros((1, 2, 5, 5), np.float32), torch.randn(2, 1, 3, 3)), "x"),
    (lambda: gt.interpolate(torch.randn(1, 2, 4, 4), scale_factor=2, mode="bicubic"), "mode"),
    (lambda: gt.interpolate(torch.randn(1, 2, 4, 4).double(), scale_factor=2), "x.dtype"),
    (lambda: gt.interpolate(torch.randn(1, 2, 4, 4), size=3, scale_factor=2), "size"),
    (lambda: gt.interpolate(torch.randn(1, 2, 4, 4), size=8, align_corners=True), "align_corners"),
    (lambda: gt.interpolate(torch.randn(1, 2, 4, 4), size=8, mode="linear"), "x.dim()"),
    (lambda: gt.relu(torch.randn(3).to(torch.bfloat16)), "x.dtype"),
    (lambda: gt.relu(torch.randn(0, 3)), "x.shape"),
])
def test_bad_arguments_raise_gradops_errors_naming_them(call, field):
    with pytest.raises(GradopsError) as info:
        call()
    assert str(info.value).startswith(field + ":")


# --- opcheck --------------------------------------------------------------------------------------

def _opcheck_samples():
    g = torch.Generator().manual_seed(7)
    cl = torch.channels_last
    x = torch.randn(2, 4, 9, 7, generator=g)
    w = torch.randn(8, 1, 3, 2, generator=g)
    dy = torch.randn(2, 8, 5, 5, generator=g)
    yield "depthwise_conv2d", (_leaf(x.contiguous(memory_format=cl)), _leaf(w), [2, 1], [1, 1, 0, 0], [1, 2])
    yield "depthwise_conv2d", (_leaf(x.double()), _leaf(w.double()), [1, 1], [0, 0, 1, 2], [1, 1])
    yield "depthwise_conv2d_backward_input", (dy.contiguous(memory_format=cl), w, x.contiguous(memory_format=cl),
                                              [2, 1], [1, 1, 0, 0], [1, 2])
    yield "depthwise_conv2d_backward_weight", (x, dy, [8, 1, 3, 2], [2, 1], [1, 1, 0, 0], [1, 2])
    yield "interpolate", (_leaf(x.contiguous(memory_format=cl)), [18, 14], "bilinear", False, [2.0, 2.0])
    yield "interpolate", (_leaf(x[:, :, 0].half()), [5], "nearest-exact", False, None)
    yield "interpolate_backward", (torch.randn(2, 4, 4, 10, generator=g), [2, 4, 9, 7], True, "bilinear", True, None)
    yield "relu", (_leaf(x.contiguous(memory_format=cl)),)
    yield "relu_backward", (x, torch.randn(x.shape, generator=g))


@pytest.mark.parametrize("name, args", list(_opcheck_samples()), ids=[name for name, _ in _opcheck_samples()])
def test_opcheck(name, args):
    torch.library.opcheck(getattr(torch.ops.gradops, name).default, args)
