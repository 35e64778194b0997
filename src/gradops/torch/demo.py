"""The end-to-end demo: train :class:`~gradops.torch.segnet.SegNet` twice from the same initial
weights, once with torch's layers and once with gradops' (``replace_modules``), on the same
batches; print both loss curves and the time per step, and plot the curves to a PNG.

    python -m gradops.torch.demo --steps 40 --png train-demo.png

Exit status 1 when the two loss curves differ by more than ``--rtol`` at some step. The first
step's losses agree to float32 rounding (about 1e-7 relative); after that, both runs update
weights that differ by rounding, and training amplifies such differences (as it does between
two torch runs with different summation orders), so later steps agree to about 1e-2.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from typing import Sequence

import torch
from torch import nn

from .modules import Replacements, replace_modules
from .segnet import SegNet, make_batch

__all__ = ["model_pair", "train", "main"]


def model_pair(seed: int, width: int, channels_last: bool) -> tuple[nn.Module, nn.Module, Replacements]:
    """A torch SegNet and its gradops copy (same initial weights), and what was replaced."""
    torch.manual_seed(seed)
    native = SegNet(width)
    ours = copy.deepcopy(native)
    replacements = replace_modules(ours)
    if channels_last:
        native = native.to(memory_format=torch.channels_last)
        ours = ours.to(memory_format=torch.channels_last)
    return native, ours, replacements


def train(model: nn.Module, batches: Sequence[tuple[torch.Tensor, torch.Tensor]], lr: float,
          channels_last: bool) -> tuple[list[float], list[float]]:
    """SGD with momentum over ``batches``: (loss per step, seconds per step)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    losses, seconds = [], []
    for images, labels in batches:
        if channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        seconds.append(time.perf_counter() - start)
        losses.append(loss.item())
    return losses, seconds


def _plot(path: str, native: list[float], ours: list[float], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    axis.plot(range(1, len(native) + 1), native, label="torch layers", linewidth=2.5)
    axis.plot(range(1, len(ours) + 1), ours, label="gradops layers", linestyle="--", linewidth=1.5)
    axis.set_xlabel("step")
    axis.set_ylabel("cross-entropy loss")
    axis.set_title(title, fontsize=9)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gradops.torch.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=64, help="image height and width")
    parser.add_argument("--width", type=int, default=16, help="channels of the first encoder stage")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nchw", action="store_true", help="NCHW tensors instead of channels_last")
    parser.add_argument("--rtol", type=float, default=0.05, help="largest relative loss difference accepted")
    parser.add_argument("--png", default="train-demo.png", help="where to write the plot ('' for none)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    channels_last = not args.nchw
    native, ours, replacements = model_pair(args.seed, args.width, channels_last)
    print(replacements)
    generator = torch.Generator().manual_seed(args.seed + 1)
    batches = [make_batch(args.batch, args.size, generator) for _ in range(args.steps)]
    native_losses, native_seconds = train(native, batches, args.lr, channels_last)
    our_losses, our_seconds = train(ours, batches, args.lr, channels_last)
    print(f"\n{'step':>4} {'torch loss':>12} {'gradops loss':>12} {'rel. diff':>10}")
    worst = 0.0
    for step, (a, b) in enumerate(zip(native_losses, our_losses), 1):
        difference = abs(a - b) / max(abs(a), 1e-12)
        worst = max(worst, difference)
        print(f"{step:>4} {a:>12.6f} {b:>12.6f} {difference:>10.2e}")
    # The first steps include kernel loading (and, in a fresh install, compiling): medians.
    native_ms, our_ms = (1e3 * statistics.median(s[len(s) // 4:]) for s in (native_seconds, our_seconds))
    layout = "channels_last" if channels_last else "NCHW"
    print(f"\ntime per step (median of the last 3/4; batch {args.batch}, {args.size}x{args.size}, {layout}, "
          f"{torch.get_num_threads()} threads): torch {native_ms:.1f} ms, gradops {our_ms:.1f} ms, "
          f"speedup {native_ms / our_ms:.2f}x")
    print(f"largest relative loss difference {worst:.2e} (accepted: {args.rtol:g})")
    if args.png:
        _plot(args.png, native_losses, our_losses,
              f"SegNet, batch {args.batch}, {layout}: torch {native_ms:.1f} ms/step, gradops {our_ms:.1f} ms/step")
        print(f"wrote {args.png}")
    return 0 if worst <= args.rtol else 1


if __name__ == "__main__":
    sys.exit(main())
