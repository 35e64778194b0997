"""Drop-in modules and :func:`replace_modules`.

Each module subclasses the torch module it replaces, so it has the same constructor, the same
parameter names (``weight``, ``bias``), the same ``state_dict`` and initialisation; only
``forward`` runs gradops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ..errors import DescriptorError, UnsupportedError
from . import functional as F

__all__ = ["DepthwiseConv2d", "Upsample", "ReLU", "Replacements", "replace_modules"]


class DepthwiseConv2d(nn.Conv2d):
    """``nn.Conv2d(in_channels, out_channels, kernel_size, ..., groups=in_channels)`` computed by
    gradops. ``out_channels`` must be a multiple of ``in_channels``; ``padding_mode`` "zeros"."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        for name, value in (("in_channels", in_channels), ("out_channels", out_channels)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise DescriptorError.expected(name, "an int >= 1", value)
        if out_channels % in_channels:
            raise DescriptorError.expected("out_channels", f"a multiple of in_channels = {in_channels}", out_channels)
        if padding_mode != "zeros":
            raise UnsupportedError("padding_mode", f"expected 'zeros' (the depthwise ops pad with zeros), "
                                   f"got {padding_mode!r}")
        if isinstance(padding, str) and padding not in ("same", "valid"):
            raise DescriptorError.expected("padding", "an int, a pair of ints, 'same' or 'valid'", padding)
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation,
                         groups=in_channels, bias=bias, padding_mode=padding_mode, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.depthwise_conv2d(x, self.weight, self.stride, self.padding, self.dilation)
        return y if self.bias is None else y + self.bias.view(1, -1, 1, 1)


class Upsample(nn.Upsample):
    """``nn.Upsample`` computed by gradops (modes nearest, nearest-exact, linear, bilinear,
    trilinear; float32 and float16)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)


class ReLU(nn.ReLU):
    """``nn.ReLU`` computed by gradops. ``inplace=True`` is accepted and computes out of place
    (the result and gradient are the same; the input is left unchanged)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x)


@dataclass
class Replacements:
    """What :func:`replace_modules` did: ``(qualified name, description)`` pairs."""

    replaced: list[tuple[str, str]] = field(default_factory=list)
    left_alone: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"replaced {len(self.replaced)}, left alone {len(self.left_alone)}"]
        lines += [f"  replaced   {name}: {what}" for name, what in self.replaced]
        lines += [f"  left alone {name}: {why}" for name, why in self.left_alone]
        return "\n".join(lines)


# The torch classes whose forward gradops' modules reproduce (the Upsampling* classes are
# nn.Upsample with fixed modes).
_TORCH_TYPES = (nn.Conv2d, nn.Upsample, nn.UpsamplingNearest2d, nn.UpsamplingBilinear2d, nn.ReLU)


def _depthwise_obstacle(conv: nn.Conv2d) -> str:
    if conv.groups != conv.in_channels:
        return f"groups={conv.groups} != in_channels={conv.in_channels}: not a depthwise convolution"
    if conv.padding_mode != "zeros":
        return f"padding_mode={conv.padding_mode!r}: the depthwise ops pad with zeros only"
    if conv.weight.dtype not in F.DEPTHWISE_DTYPES:
        return f"dtype {conv.weight.dtype}: gradops' depthwise ops take {F.DEPTHWISE_DTYPES}"
    if conv.weight.device.type != "cpu":
        return f"device {conv.weight.device}: gradops runs on the CPU"
    return ""


def _replacement(module: nn.Module) -> tuple[nn.Module | None, str]:
    """The gradops module for ``module`` (sharing its parameters), or None and why not."""
    if isinstance(module, DepthwiseConv2d | Upsample | ReLU):
        return None, "already a gradops module"
    if isinstance(module, nn.Conv2d | nn.Upsample | nn.ReLU) and type(module) not in _TORCH_TYPES:
        return None, f"{type(module).__name__} subclasses a torch module and may have its own forward"
    if isinstance(module, nn.Conv2d):
        obstacle = _depthwise_obstacle(module)
        if obstacle:
            return None, obstacle
        new = DepthwiseConv2d.__new__(DepthwiseConv2d)
        new.__dict__.update(module.__dict__)  # the same Parameter objects, hooks and attributes
        new.__dict__["_parameters"] = dict(module._parameters)
        new.__dict__["_buffers"] = dict(module._buffers)
        new.__dict__["_modules"] = dict(module._modules)
        return new, f"Conv2d({module.in_channels}, {module.out_channels}, groups={module.groups}) -> DepthwiseConv2d"
    if isinstance(module, nn.Upsample):
        if module.mode not in ("nearest", "nearest-exact", "linear", "bilinear", "trilinear"):
            return None, f"mode={module.mode!r}: DirectML resamples with nearest and linear modes only"
        new = Upsample(module.size, module.scale_factor, module.mode, module.align_corners,
                       module.recompute_scale_factor)
        return new, f"{type(module).__name__}(mode={module.mode!r}) -> Upsample"
    if isinstance(module, nn.ReLU):
        new = ReLU(module.inplace)
        note = " (inplace=True computes out of place)" if module.inplace else ""
        return new, f"ReLU -> ReLU{note}"
    return None, ""


def replace_modules(model: nn.Module) -> Replacements:
    """Swap, in place, every eligible ``nn.Conv2d(groups=in_channels)``, ``nn.Upsample`` (and its
    subclasses) and ``nn.ReLU`` inside ``model`` for gradops' module. Convolutions keep their
    very ``weight`` and ``bias`` Parameter objects (optimizers and ``state_dict`` are unaffected).

    Returns what was replaced and what was left alone, and why: convolutions that are not
    depthwise, or pad other than with zeros, or have another dtype or device, and upsampling
    modes DirectML lacks. ``model`` itself is never replaced, only its submodules.
    """
    if not isinstance(model, nn.Module):
        raise DescriptorError.expected("model", "a torch.nn.Module", model)
    report = Replacements()
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            name = f"{parent_name}.{child_name}" if parent_name else child_name
            new, why = _replacement(child)
            if new is not None:
                setattr(parent, child_name, new)
                report.replaced.append((name, why))
            elif why:
                report.left_alone.append((name, why))
    return report
