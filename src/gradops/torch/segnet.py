"""A small segmentation network and the data it trains on, for the demo, the training
benchmark and the data-parallel test.

The network uses only layers gradops covers plus 1x1 convolutions and batch norm: a
MobileNet-style encoder (depthwise-separable blocks: 3x3 depthwise convolution, batch norm,
ReLU, 1x1 convolution, batch norm, ReLU; strides 1 and 2) and a U-Net-style decoder (bilinear
2x upsampling, concatenation with the encoder's skip connection, a 1x1 convolution and a
depthwise-separable block). It is built from torch's own modules; ``gradops.torch.replace_modules``
turns a copy of it into the gradops version with the same parameters.

The data are images of random discs and squares on a noisy background; each pixel is labelled
background (0), disc (1) or square (2).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["SegNet", "make_batch", "CLASSES"]

CLASSES = 3


def _separable(in_channels: int, out_channels: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_channels, in_channels, 3, stride=stride, padding=1, groups=in_channels, bias=False),
        nn.BatchNorm2d(in_channels), nn.ReLU(),
        nn.Conv2d(in_channels, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels), nn.ReLU())


class _Up(nn.Module):
    """Bilinear 2x upsampling, concatenation with the skip, 1x1 fusion and a separable block."""

    def __init__(self, in_channels: int, skip_channels: int, out_channels: int) -> None:
        super().__init__()
        self.upsample = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.fuse = nn.Sequential(nn.Conv2d(in_channels + skip_channels, out_channels, 1, bias=False),
                                  nn.BatchNorm2d(out_channels), nn.ReLU())
        self.block = _separable(out_channels, out_channels, 1)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.block(self.fuse(torch.cat([self.upsample(x), skip], dim=1)))


class SegNet(nn.Module):
    """Encoder widths ``width * (1, 2, 4, 8)`` at strides 1, 2, 4, 8; a 3-class per-pixel output."""

    def __init__(self, width: int = 16, in_channels: int = 3) -> None:
        super().__init__()
        w = width
        self.stem = nn.Sequential(nn.Conv2d(in_channels, w, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(),
                                  _separable(w, w, 1))
        self.down1 = nn.Sequential(_separable(w, 2 * w, 2), _separable(2 * w, 2 * w, 1))
        self.down2 = nn.Sequential(_separable(2 * w, 4 * w, 2), _separable(4 * w, 4 * w, 1))
        self.down3 = nn.Sequential(_separable(4 * w, 8 * w, 2), _separable(8 * w, 8 * w, 1))
        self.up3 = _Up(8 * w, 4 * w, 4 * w)
        self.up2 = _Up(4 * w, 2 * w, 2 * w)
        self.up1 = _Up(2 * w, w, w)
        self.head = nn.Conv2d(w, CLASSES, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s0 = self.stem(x)
        s1 = self.down1(s0)
        s2 = self.down2(s1)
        s3 = self.down3(s2)
        return self.head(self.up1(self.up2(self.up3(s3, s2), s1), s0))


def make_batch(batch: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` RGB images ``[batch, 3, size, size]`` with 1-3 random discs and squares each,
    and their int64 label maps ``[batch, size, size]``; deterministic given ``generator``."""
    rows = torch.arange(size, dtype=torch.float32).view(size, 1)
    cols = torch.arange(size, dtype=torch.float32).view(1, size)
    images = 0.2 * torch.randn(batch, 3, size, size, generator=generator)
    labels = torch.zeros(batch, size, size, dtype=torch.int64)
    for n in range(batch):
        shapes = int(torch.randint(1, 4, (), generator=generator))
        for _ in range(shapes):
            centre = torch.rand(2, generator=generator) * size
            radius = (0.08 + 0.12 * torch.rand((), generator=generator)) * size
            colour = torch.rand(3, 1, 1, generator=generator) * 2 - 1
            is_disc = bool(torch.rand((), generator=generator) < 0.5)
            if is_disc:
                mask = (rows - centre[0]) ** 2 + (cols - centre[1]) ** 2 <= radius ** 2
            else:
                mask = ((rows - centre[0]).abs() <= radius) & ((cols - centre[1]).abs() <= radius)
            images[n] = torch.where(mask, colour, images[n])
            labels[n][mask] = 1 if is_disc else 2
    return images, labels
