"""The training-step benchmark: one SGD step (forward, backward, optimizer) of
:class:`~gradops.torch.segnet.SegNet` with gradops' layers against torch's, channels_last.

    python -m gradops.torch.bench_train --batch 32 --threads 2

Both models start from the same weights and train on the same batch. Rounds alternate which
model goes first; each model keeps the median step time of its fastest round (a shared
machine's speed moves between rounds). gradops' share of its step is the CPU time the profiler
puts in ``gradops::*`` operators (forward and backward), over the median step time; the same
is reported for the torch operators they replace in torch's step (depthwise convolutions and
their backward, ReLU, bilinear upsampling). A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Sequence

import torch
from torch import nn

from .._cpuinfo import cpu_model
from .demo import model_pair
from .segnet import make_batch

__all__ = ["main"]


def _step_function(model: nn.Module, images: torch.Tensor, labels: torch.Tensor):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    model.train()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(images), labels).backward()
        optimizer.step()
    return step


def _median_ms(step, steps: int) -> float:
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    return 1e3 * statistics.median(seconds)


def _gradops_ms_per_step(step, steps: int) -> dict[str, float]:
    """Milliseconds per step in each ``gradops::`` operator (profiler CPU time, self and children)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        for _ in range(steps):
            step()
    return {event.key: event.cpu_time_total / 1e3 / steps for event in profile.key_averages()
            if event.key.startswith("gradops::")}


# torch's operators that gradops' layers replace, and where their weight is among the inputs
# (a depthwise convolution is told from a 1x1 one by its weight [C, 1, kh, kw] with kh > 1).
_CONVOLUTIONS = {"aten::convolution": 1, "aten::convolution_backward": 2}
_REPLACED = ("aten::relu", "aten::threshold_backward", "aten::upsample_bilinear2d",
             "aten::upsample_bilinear2d_backward")


def _replaced_torch_ms_per_step(step, steps: int) -> dict[str, float]:
    """Milliseconds per step in each of the torch operators that gradops' layers replace
    (profiler CPU time): the part of torch's step that gradops can speed up."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as profile:
        for _ in range(steps):
            step()
    per_op: dict[str, float] = {}
    for event in profile.key_averages(group_by_input_shape=True):
        shapes = event.input_shapes
        weight_index = _CONVOLUTIONS.get(event.key)
        depthwise = (weight_index is not None and len(shapes) > weight_index and len(shapes[weight_index]) == 4
                     and shapes[weight_index][1] == 1 and shapes[weight_index][2] > 1)
        if depthwise or event.key in _REPLACED:
            key = f"{event.key} (depthwise)" if depthwise else event.key
            per_op[key] = per_op.get(key, 0.0) + event.cpu_time_total / 1e3 / steps
    return per_op


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gradops.torch.bench_train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=64, help="image height and width")
    parser.add_argument("--width", type=int, default=16, help="channels of the first encoder stage")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per model per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--nchw", action="store_true", help="NCHW tensors instead of channels_last")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    channels_last = not args.nchw
    native, ours, _ = model_pair(0, args.width, channels_last)
    images, labels = make_batch(args.batch, args.size, torch.Generator().manual_seed(1))
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    steps = {"torch": _step_function(native, images, labels), "gradops": _step_function(ours, images, labels)}
    for step in steps.values():  # warm-up: kernels load, allocators and caches fill
        for _ in range(3):
            step()
    rounds: dict[str, list[float]] = {name: [] for name in steps}
    for r in range(args.rounds):
        for name in (list(steps) if r % 2 == 0 else list(reversed(steps))):
            rounds[name].append(_median_ms(steps[name], args.steps))
    best = {name: min(times) for name, times in rounds.items()}
    per_op = _gradops_ms_per_step(steps["gradops"], args.steps)
    replaced = _replaced_torch_ms_per_step(steps["torch"], args.steps)
    replaced_ms = sum(replaced.values())
    gradops_ms = sum(per_op.values())
    layout = "channels_last" if channels_last else "NCHW"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"SegNet(width {args.width}) training step, batch {args.batch}, {args.size}x{args.size}, {layout}, "
          f"{args.threads} threads; torch {torch.__version__}; {cpu_model()}, {os.cpu_count()} CPUs; "
          f"1-minute load average at the end {load:.1f}")
    for name, times in rounds.items():
        print(f"  {name:8s} median ms per round: {', '.join(f'{t:.1f}' for t in times)}; best {best[name]:.1f}")
    print(f"  speedup (torch / gradops, best rounds): {best['torch'] / best['gradops']:.2f}x")
    print(f"  gradops operators: {gradops_ms:.1f} ms of the {best['gradops']:.1f} ms step "
          f"({100 * gradops_ms / best['gradops']:.0f}%, profiled)")
    print(f"  the torch operators they replace: {replaced_ms:.1f} ms of the {best['torch']:.1f} ms step "
          f"({100 * replaced_ms / best['torch']:.0f}%, profiled)")
    for name, times in (("gradops", per_op), ("torch", replaced)):
        print(f"  {name}'s, per operator:")
        for key, ms in sorted(times.items(), key=lambda item: -item[1]):
            print(f"    {key:45s} {ms:7.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
