"""Data-parallel training with gradops layers: SegNet under ``DistributedDataParallel`` (gloo),
one replica per process, and the same training in one process for comparison.

    python -m gradops.torch.ddp --rank R --world-size W --init-file PATH --out params.pt

Each step draws one global batch (the same in every process); replica ``r`` trains on rows
``r::W``. DDP averages the replicas' gradients, which equals the gradient of the global batch's
mean loss, so the parameters after training should equal :func:`train_single`'s. Batch norm
runs with frozen statistics (eval mode; its affine parameters still train): in train mode each
replica would normalise by its own shard's statistics (``nn.SyncBatchNorm`` is for GPUs).
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import torch
from torch import nn

from .demo import model_pair
from .segnet import make_batch

__all__ = ["train_single", "train_replica"]

_LR = 0.02


def _model(width: int) -> nn.Module:
    _, ours, _ = model_pair(0, width, channels_last=True)
    ours.train()
    for module in ours.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.eval()
    return ours


def _batches(steps: int, batch: int, size: int):
    generator = torch.Generator().manual_seed(5)
    for _ in range(steps):
        images, labels = make_batch(batch, size, generator)
        yield images.contiguous(memory_format=torch.channels_last), labels


def _train(model: nn.Module, steps: int, batch: int, size: int, shard: slice) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=_LR, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for images, labels in _batches(steps, batch, size):
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(images[shard]), labels[shard]).backward()
        optimizer.step()


def train_single(steps: int, batch: int, size: int, width: int) -> dict[str, torch.Tensor]:
    """The parameters after ``steps`` steps on the whole global batch in this process."""
    model = _model(width)
    _train(model, steps, batch, size, slice(None))
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def train_replica(rank: int, world_size: int, init_file: str, steps: int, batch: int, size: int,
                  width: int) -> dict[str, torch.Tensor]:
    """One DDP replica (gloo, a shared init file); returns its parameters after training."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    try:
        model = nn.parallel.DistributedDataParallel(_model(width))
        _train(model, steps, batch, size, slice(rank, None, world_size))
        return {name: p.detach().clone() for name, p in model.module.named_parameters()}
    finally:
        dist.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gradops.torch.ddp", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--init-file", required=True, help="a path that does not exist yet, the same for all ranks")
    parser.add_argument("--out", required=True, help="where to save this replica's parameters (torch.save)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8, help="the global batch")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    parameters = train_replica(args.rank, args.world_size, args.init_file, args.steps, args.batch, args.size,
                               args.width)
    torch.save(parameters, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
