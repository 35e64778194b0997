"""Out-of-core example: the gradient of a 2x linear upsampling of an image stack larger than
memory, read from and written to zarr stores on disk, on a LocalCluster of 2 worker processes.

    python -m gradops.dask.example --store /tmp/gradops-example --gib 26 --verify 2

Writes a seeded random ``dy`` stack ``[N, 2H, 2W, C]`` (float32, NHWC) of about ``--gib`` GiB to
``STORE/dy.zarr`` (once; an existing one is reused), computes ``dx = resample_grad(dy)``
``[N, H, W, C]`` (DirectML RESAMPLE_GRAD, linear, half-pixel: the gradient of ``resample1``)
into ``STORE/dx.zarr`` chunk by chunk (both stores uncompressed: random data does not compress), and prints the throughput and the peak resident memory
of the cluster's processes. ``--verify K`` checks K random images bit for bit against the
in-memory call on that image.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path

import numpy as np

GIB = 1 << 30


class PeakMemory:
    """Samples the resident memory of this process and its children (the cluster's workers and
    nannies) every ``interval`` seconds; ``peak`` is the largest sum seen."""

    def __init__(self, interval: float = 0.2) -> None:
        import psutil

        self._process, self._interval = psutil.Process(), interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0
            for process in [self._process, *self._process.children(recursive=True)]:
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    pass  # a process that ended between listing and reading
            self.peak = max(self.peak, total)
            self._stop.wait(self._interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def stack_shape(gib: float, height: int, width: int, channels: int) -> tuple[int, int, int, int]:
    """``dy``'s shape: enough ``[2H, 2W, C]`` float32 images for ``gib`` GiB."""
    image = 2 * height * 2 * width * channels * 4
    return max(1, round(gib * GIB / image)), 2 * height, 2 * width, channels


def write_input(path: Path, shape: tuple[int, ...], rows_per_chunk: int) -> None:
    import dask.array as da

    chunks = (1, rows_per_chunk, shape[2], shape[3])
    dy = da.random.default_rng(2026).random(shape, dtype=np.float32, chunks=chunks) - np.float32(0.5)
    dy.to_zarr(str(path), compute=True, compressors=None)  # random data does not compress


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gradops.dask.example", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True, help="directory for dy.zarr and dx.zarr")
    parser.add_argument("--gib", type=float, default=1.0, help="size of dy in GiB (default 1)")
    parser.add_argument("--height", type=int, default=1024, help="H of dx (dy has 2H rows; default 1024)")
    parser.add_argument("--width", type=int, default=1024, help="W of dx (default 1024)")
    parser.add_argument("--channels", type=int, default=16, help="C (default 16)")
    parser.add_argument("--chunk-mib", type=float, default=128, help="dy chunk size in MiB (default 128)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes, 1 thread each (default 2)")
    parser.add_argument("--verify", type=int, default=0, metavar="K", help="check K images bit for bit")
    parser.add_argument("--baseline", action="store_true", help="also time reading dy alone (dy.sum()): "
                        "what the store's read speed allows")
    args = parser.parse_args(argv)

    import dask.array as da
    from distributed import Client, LocalCluster

    import gradops
    import gradops.dask as gd

    shape = stack_shape(args.gib, args.height, args.width, args.channels)
    row_bytes = shape[2] * shape[3] * 4
    rows = max(1, min(shape[1], int(args.chunk_mib * (1 << 20) // row_bytes)))
    dy_path, dx_path = args.store / "dy.zarr", args.store / "dx.zarr"
    memory_limit = f"{max(2, int(os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / GIB / (args.workers + 1)))}GiB"
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                      dashboard_address=":0") as cluster, Client(cluster):
        if not dy_path.exists():
            start = time.perf_counter()
            write_input(dy_path, shape, rows)
            print(f"wrote dy {shape} float32 ({np.prod(shape) * 4 / GIB:.2f} GiB) in "
                  f"{time.perf_counter() - start:.1f} s")
        dy = da.from_zarr(str(dy_path))
        input_sizes = (dy.shape[0], dy.shape[1] // 2, dy.shape[2] // 2, dy.shape[3])
        dx = gd.resample_grad(dy, input_sizes, mode="linear")
        with PeakMemory() as memory:
            start = time.perf_counter()
            dx.to_zarr(str(dx_path), overwrite=True, compute=True, compressors=None)
            seconds = time.perf_counter() - start
        moved = dy.nbytes + dx.nbytes
        print(f"resample_grad linear {dy.shape} -> {input_sizes} float32, dy chunks {dy.chunksize} "
              f"({np.prod(dy.chunksize) * 4 / (1 << 20):.0f} MiB), {args.workers} workers x 1 thread")
        print(f"{seconds:.1f} s: {dy.nbytes / GIB / seconds:.2f} GiB/s of dy read, {moved / GIB / seconds:.2f} GiB/s "
              f"read + written; peak resident memory of all processes {memory.peak / GIB:.2f} GiB "
              f"(dy {dy.nbytes / GIB:.2f} GiB, dx {dx.nbytes / GIB:.2f} GiB)")
        if args.baseline:
            start = time.perf_counter()
            dy.sum().compute()
            read = time.perf_counter() - start
            print(f"reading dy alone: {read:.1f} s, {dy.nbytes / GIB / read:.2f} GiB/s")
    if args.verify:
        stored = da.from_zarr(str(dx_path))
        rng = np.random.default_rng()
        for n in rng.choice(shape[0], size=min(args.verify, shape[0]), replace=False):
            image = dy[n:n + 1].compute(scheduler="threads")
            expected = gradops.resample_grad(image, (1, *input_sizes[1:]), mode="linear")
            same = np.array_equal(stored[n:n + 1].compute().view(np.uint32), expected.view(np.uint32))
            print(f"image {n}: {'same bits as' if same else 'DIFFERS from'} the in-memory call")
            if not same:
                return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
