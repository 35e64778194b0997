"""gradops.torch's modules, replace_modules, torch.compile, threads and import isolation."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
gt = pytest.importorskip("gradops.torch")

from torch import nn  # noqa: E402

from gradops import GradopsError  # noqa: E402
from gradops.torch.segnet import SegNet, make_batch  # noqa: E402

pytestmark = [pytest.mark.peers, pytest.mark.usefixtures("one_torch_thread")]



SRC = str(Path(__file__).resolve().parents[1] / "src")


def _outputs_and_grads(model: nn.Module, x: torch.Tensor, dy_seed: int = 3):
    x = x.detach().requires_grad_(True)
    y = model(x)
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(dy_seed))
    y.backward(dy)
    grads = {name.removeprefix("_orig_mod."): p.grad.clone() for name, p in model.named_parameters()}
    return y.detach(), x.grad, grads


def test_modules_keep_torch_parameter_names_and_match_torch():
    torch.manual_seed(0)
    pairs = [(nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=4), gt.DepthwiseConv2d(4, 8, 3, stride=2, padding=1)),
             (nn.Conv2d(4, 4, (2, 3), padding="same", dilation=2, groups=4, bias=False),
              gt.DepthwiseConv2d(4, 4, (2, 3), padding="same", dilation=2, bias=False)),
             (nn.Upsample(scale_factor=2, mode="bilinear"), gt.Upsample(scale_factor=2, mode="bilinear")),
             (nn.Upsample(size=(5, 9), mode="nearest-exact"), gt.Upsample(size=(5, 9), mode="nearest-exact")),
             (nn.ReLU(), gt.ReLU())]
    x = torch.randn(2, 4, 7, 6).contiguous(memory_format=torch.channels_last)
    for native, ours in pairs:
        assert list(dict(native.named_parameters())) == list(dict(ours.named_parameters()))
        ours.load_state_dict(native.state_dict())
        y0, dx0, g0 = _outputs_and_grads(native, x)
        y1, dx1, g1 = _outputs_and_grads(ours, x)
        torch.testing.assert_close(y1, y0, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(dx1, dx0, rtol=1e-5, atol=1e-5)
        for name in g0:
            torch.testing.assert_close(g1[name], g0[name], rtol=1e-5, atol=1e-4)
        assert y1.is_contiguous(memory_format=torch.channels_last)


def test_depthwise_module_rejects_what_it_cannot_compute():
    with pytest.raises(GradopsError, match="^out_channels:"):
        gt.DepthwiseConv2d(4, 6, 3)
    with pytest.raises(GradopsError, match="^padding_mode:"):
        gt.DepthwiseConv2d(4, 4, 3, padding=1, padding_mode="reflect")


class _Mixed(nn.Module):
    """Eligible and ineligible modules side by side."""

    def __init__(self) -> None:
        super().__init__()
        self.depthwise = nn.Conv2d(4, 8, 3, padding=1, groups=4)
        self.pointwise = nn.Conv2d(8, 4, 1)
        self.grouped = nn.Conv2d(4, 4, 3, padding=1, groups=2)
        self.reflect = nn.Conv2d(4, 4, 3, padding=1, groups=4, padding_mode="reflect")
        self.act = nn.ReLU(inplace=True)
        self.up = nn.UpsamplingBilinear2d(scale_factor=2)
        self.cubic = nn.Upsample(scale_factor=0.5, mode="bicubic")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.pointwise(self.act(self.depthwise(x))))
        return self.cubic(self.up(self.reflect(self.grouped(x))))


def test_replace_modules_reports_and_keeps_parameters():
    torch.manual_seed(1)
    native = _Mixed()
    ours = copy.deepcopy(native)
    weight = ours.depthwise.weight
    report = gt.replace_modules(ours)
    assert dict(report.replaced).keys() == {"depthwise", "act", "up"}
    left = dict(report.left_alone)
    assert left.keys() == {"pointwise", "grouped", "reflect", "cubic"}
    assert "not a depthwise convolution" in left["grouped"] and "padding_mode" in left["reflect"]
    assert "bicubic" in left["cubic"]
    assert isinstance(ours.depthwise, gt.DepthwiseConv2d) and ours.depthwise.weight is weight
    assert isinstance(ours.up, gt.Upsample) and ours.up.align_corners
    x = torch.randn(2, 4, 6, 5)
    y0, dx0, g0 = _outputs_and_grads(native, x)
    y1, dx1, g1 = _outputs_and_grads(ours, x)
    torch.testing.assert_close(y1, y0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dx1, dx0, rtol=1e-5, atol=1e-5)
    for name in g0:
        torch.testing.assert_close(g1[name], g0[name], rtol=1e-4, atol=1e-4)
    assert gt.replace_modules(ours).replaced == []  # nothing left to replace


def _max_error(actual, truth) -> float:
    return float((actual.double() - truth).abs().max())


def test_segnet_replaced_matches_torch_in_train_mode():
    """Batch norm on small batches amplifies float32 rounding, so the truth is torch in float64
    and gradops' float32 error may be at most a few times torch's own float32 error."""
    torch.manual_seed(2)
    native = SegNet(8).to(memory_format=torch.channels_last)
    ours = copy.deepcopy(native)
    truth = copy.deepcopy(native).double()
    report = gt.replace_modules(ours)
    kinds = [what.split(" -> ")[1].split(" ")[0] for _, what in report.replaced]
    assert {kind: kinds.count(kind) for kind in set(kinds)} == {"DepthwiseConv2d": 10, "Upsample": 3, "ReLU": 24}
    x, _ = make_batch(4, 32, torch.Generator().manual_seed(3))
    x = x.contiguous(memory_format=torch.channels_last)
    results = [_outputs_and_grads(model, x.double() if model is truth else x) for model in (native, ours, truth)]
    (y0, dx0, g0), (y1, dx1, g1), (y64, dx64, g64) = results
    for what, torch32, gradops32, exact in [("y", y0, y1, y64), ("dx", dx0, dx1, dx64)] + [
            (name, g0[name], g1[name], g64[name]) for name in g64]:
        assert _max_error(gradops32, exact) <= max(4 * _max_error(torch32, exact), 1e-5), what


def test_torch_compile_fullgraph_no_graph_break():
    """One small graph through inductor: forward and backward of every op, no graph break."""
    torch._dynamo.reset()
    model = nn.Sequential(gt.DepthwiseConv2d(3, 6, 3, padding=1), gt.ReLU(), gt.Upsample(scale_factor=2,
                                                                                         mode="bilinear"))
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last)
    y0, dx0, g0 = _outputs_and_grads(model, x)
    for parameter in model.parameters():
        parameter.grad = None
    y1, dx1, g1 = _outputs_and_grads(compiled, x)
    torch.testing.assert_close(y1, y0, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(dx1, dx0, rtol=1e-6, atol=1e-6)
    for name in g0:
        torch.testing.assert_close(g1[name], g0[name], rtol=1e-6, atol=1e-5)
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_gradops_uses_torch_thread_count_and_leaves_openmp_to_torch():
    out = _run(
        "import torch, numba, gradops.torch as gt\n"
        "from gradops._fast.pool import thread_count\n"
        "torch.set_num_threads(1); gt.relu(torch.randn(8)); print(thread_count(), torch.get_num_threads())\n"
        "torch.set_num_threads(2); gt.relu(torch.randn(8)); print(thread_count(), torch.get_num_threads())\n"
        "print(numba.threading_layer())\n")
    assert out.split("\n")[:3] == ["1 1", f"{min(2, _numba_threads())} 2", "workqueue"]


def _numba_threads() -> int:
    import numba

    return numba.config.NUMBA_NUM_THREADS
