"""Dask path against the in-memory call, on data that fits (issue 26's benchmark).

    python -m gradops.dask.bench --gib 2 --chunk-mib 64 256

For each workload, the same arrays are processed by the in-memory NumPy call (the fast
backend, ``--threads`` threads, in this process) and by the gradops.dask call on a
LocalCluster of ``--workers`` worker processes with 1 thread each, the input already in the
workers' memory (generated there, persisted, one copy, an equal share on each worker) and the
result kept there (``persist``), so that both sides time the operator and not a transfer to or
from this process. Each side's
median of ``--reps`` runs is reported as throughput (GiB of input + output per second), the
in-memory call both with a fresh output (as it is usually called; an output larger than
gradops' cache of released buffers, ``GRADOPS_OUTPUT_CACHE_MB``, faults in new pages) and with
``out=`` (a preallocated output), and the ratio dask time / in-memory ``out=`` time (overhead =
ratio - 1). The ``out=`` call and the dask run take turns, so that both meet the machine in
the same state. Each timed dask run builds its graph (as every call does) and computes it
again: it starts once the workers have released the last run's result. The workers' outputs
come from their own caches of released buffers, so a worker holding more than
``GRADOPS_OUTPUT_CACHE_MB`` of results faults in pages for the rest (set it in the environment
to change it on both sides). The dask result is checked bit for bit against the in-memory one
before timing: a BLAKE2 digest of each block, computed on the worker that holds it, so that
this process holds two arrays (the input and the in-memory result, which is also the
``out=``), not three.

The last column is dask's own floor at that chunking: a run of tasks that do nothing (each
returns one element) over the same input blocks, one task per block (the fewest any blockwise
graph runs), as a ratio ``1 + floor time / in-memory out= time``: no operator on dask can come
closer to the in-memory call than that on the same cluster and chunks.

``--breakdown`` runs each cell ``--reps`` more times under distributed's task stream and says
where the dask time goes: how long from the start of the run (graph build and ``persist``) to
the first task, between a worker's consecutive tasks, in the busiest worker's tasks, and from the
last task to the end of the run.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import statistics
import time
from dataclasses import astuple, dataclass
from typing import Callable

import numpy as np

from .._cpuinfo import cpu_model

GIB, MIB = 1 << 30, 1 << 20


@dataclass(frozen=True)
class Workload:
    name: str
    describe: str
    source_shape: Callable[[float], tuple[int, ...]]  # GiB of input -> its shape
    numpy_call: Callable
    dask_call: Callable
    rows_axis: int  # the axis the chunks split (with N)


def _images(gib: float, height: int, width: int, channels: int) -> tuple[int, ...]:
    return max(1, round(gib * GIB / (height * width * channels * 4))), height, width, channels


def workloads() -> list[Workload]:
    import gradops
    import gradops.dask as gd

    filt = np.random.default_rng(1).random((3, 3, 32, 1), dtype=np.float32)
    depthwise = dict(strides=[1, 1, 1, 1], padding="SAME")
    return [
        Workload("relu_grad", "relu_grad [N,512,512,32] float32",
                 lambda gib: _images(gib, 512, 512, 32),
                 lambda x, out=None: gradops.relu_grad(x, x, out=out), lambda x: gd.relu_grad(x, x), 1),
        Workload("resample_grad", "resample_grad linear 2x [N,2048,2048,16] -> [N,1024,1024,16]",
                 lambda gib: _images(gib, 2048, 2048, 16),
                 lambda dy, out=None: gradops.resample_grad(dy, (dy.shape[0], 1024, 1024, 16), mode="linear", out=out),
                 lambda dy: gd.resample_grad(dy, (dy.shape[0], 1024, 1024, 16), mode="linear"), 1),
        Workload("depthwise_backprop_input", "depthwise_conv2d_native_backprop_input 3x3 SAME [N,1024,1024,32]",
                 lambda gib: _images(gib, 1024, 1024, 32),
                 lambda dy, out=None: gradops.depthwise_conv2d_native_backprop_input(dy.shape, filt, dy, out=out,
                                                                                     **depthwise),
                 lambda dy: gd.depthwise_conv2d_native_backprop_input(dy.shape, filt, dy, **depthwise), 1),
    ]


def _chunks(shape: tuple[int, ...], rows_axis: int, chunk_bytes: int) -> tuple:
    """Chunks of about ``chunk_bytes`` float32: whole images along N, or rows of one image."""
    image = int(np.prod(shape[1:])) * 4
    if chunk_bytes >= image:
        return (max(1, chunk_bytes // image),) + (-1,) * (len(shape) - 1)
    rows = max(1, chunk_bytes // (image // shape[rows_axis]))
    return (1,) + tuple(rows if axis == rows_axis else -1 for axis in range(1, len(shape)))


def _digest(block: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(block).view(np.uint8)).digest()


def _block_digests(array) -> list[bytes]:
    """A digest of each block's bytes, computed on the worker that holds the block: the result
    is compared with the in-memory one without bringing a third copy of it here."""
    import dask

    return list(dask.compute(*(dask.delayed(_digest)(block) for block in array.to_delayed().ravel())))


def _local_digests(array: np.ndarray, chunks: tuple) -> list[bytes]:
    """``_digest`` of ``array``'s blocks at ``chunks``, in ``_block_digests``' order."""
    edges = [np.concatenate(([0], np.cumsum(sizes))) for sizes in chunks]
    return [_digest(array[tuple(slice(e[i], e[i + 1]) for e, i in zip(edges, index))])
            for index in itertools.product(*(range(len(sizes)) for sizes in chunks))]


def _source_rows(images: range, rows: range, image_shape: tuple[int, ...]) -> np.ndarray:
    """Rows ``rows`` of images ``images`` of the benchmark's input, uniform in [-0.5, 0.5): each
    row from its own seed (image, row), so that a block holds the same values at any chunking,
    here and on the workers."""
    block = np.empty((len(images), len(rows)) + image_shape[1:], np.float32)
    for i, image in enumerate(images):
        for j, row in enumerate(rows):
            np.random.default_rng((image, row)).random(out=block[i, j], dtype=np.float32)
    block -= np.float32(0.5)
    return block


def _source_block(image_shape: tuple[int, ...], first_image: int, block_info=None) -> np.ndarray:
    (image_lo, image_hi), (row_lo, row_hi) = block_info[None]["array-location"][:2]
    return _source_rows(range(first_image + image_lo, first_image + image_hi), range(row_lo, row_hi), image_shape)


def _placed_source(client, shape: tuple[int, ...], chunks: tuple, name: str):
    """The benchmark's input at ``chunks``, generated on the workers and held there once, each
    worker holding an equal run of consecutive images (as a pipeline's reads, spread by dask's
    scheduler, would leave them). Where a block lies is where dask runs the operator on it:
    left to the rechunk that made it, 8 blocks lay 5 and 3, and a run timed the busier worker's
    fifth block, not gradops.dask."""
    import dask.array as da
    from dask.array.core import normalize_chunks
    from distributed import wait

    chunks = normalize_chunks(chunks, shape=shape, dtype=np.float32)
    image_chunks = chunks[0]
    workers = sorted(client.scheduler_info()["workers"])
    shares = [image_chunks[len(image_chunks) * w // len(workers):len(image_chunks) * (w + 1) // len(workers)]
              for w in range(len(workers))]
    parts, first_image = [], 0
    for number, (address, share) in enumerate(zip(workers, shares)):
        if not share:
            continue
        part = da.map_blocks(_source_block, image_shape=shape[1:], first_image=first_image,
                             chunks=(share,) + chunks[1:], dtype=np.float32,
                             meta=np.empty((0,) * len(shape), np.float32), name=f"{name}-part-{number}")
        parts.append(client.persist(part, workers=[address], allow_other_workers=False))
        first_image += sum(share)
    placed = client.persist(da.concatenate(parts, axis=0))
    wait(placed)
    return placed


def _keys(array) -> set:
    """The keys of a dask array's blocks, as the scheduler names them."""
    from dask.core import flatten

    return set(flatten(array.__dask_keys__()))


def _until_released(client, keys: set) -> None:
    """Wait until no worker holds any of ``keys`` any more. Dropping a persisted result only
    sends a release message: without this wait the next run would start while the workers still
    hold the last one, and its blocks would fault in new pages instead of reusing the buffers
    the last run's blocks release (gradops' cache of released buffers, as the in-memory call
    reuses its last output's). The scheduler forgets a key when it tells the worker to, so the
    workers' own stores are asked too."""
    def held_by(dask_worker) -> bool:
        return any(key in dask_worker.data for key in keys)

    while any(keys & set(held) for held in client.has_what().values()) or any(client.run(held_by).values()):
        time.sleep(0.001)


@dataclass(frozen=True)
class Breakdown:
    """One dask run as the task stream records it; times in seconds, in the order of the
    breakdown table's columns."""

    tasks: int
    to_first_task: float  # from the run's start (graph build, persist) to the first task's start
    between_tasks: float  # median gap between a worker's consecutive tasks
    busiest_compute: float  # the largest sum of one worker's task times
    after_last_task: float  # from the last task's end to the run's end (wait returns)


def _breakdown(records: list[dict], start: float, end: float) -> Breakdown:
    """``records``: distributed's task stream of the run (``get_task_stream``), whose times are
    the workers' ``time.time()`` plus distributed's estimate of their offset to the scheduler's
    clock (``scheduler_delay``), which is off by a few milliseconds; ``start``, ``end``: this
    process's ``time.time()``. So the first and last gaps are good to a few milliseconds, and the
    last may come out negative."""
    per_worker: dict[str, list[tuple[float, float]]] = {}
    for record in records:
        for span in record["startstops"]:
            if span["action"] == "compute":
                per_worker.setdefault(record["worker"], []).append((span["start"], span["stop"]))
    spans = [span for worker in per_worker.values() for span in worker]
    gaps = [later[0] - earlier[1] for worker in per_worker.values()
            for earlier, later in itertools.pairwise(sorted(worker))]
    return Breakdown(len(spans), min(s for s, _ in spans) - start, statistics.median(gaps) if gaps else 0.0,
                     max(sum(e - s for s, e in worker) for worker in per_worker.values()),
                     end - max(e for _, e in spans))


def _nothing(block: np.ndarray) -> np.ndarray:
    """A floor task: one element, so that neither work nor a result's pages are timed."""
    return np.zeros((1,) * block.ndim, block.dtype)


def _seconds(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _median_seconds(run: Callable[[], object], reps: int) -> float:
    return statistics.median(_seconds(run) for _ in range(reps))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gradops.dask.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="input size in GiB (default 1)")
    parser.add_argument("--chunk-mib", type=float, nargs="+", default=[64, 128, 256], help="chunk sizes")
    parser.add_argument("--workers", type=int, default=2, help="worker processes, 1 thread each (default 2)")
    parser.add_argument("--threads", type=int, default=2, help="threads of the in-memory call (default 2)")
    parser.add_argument("--reps", type=int, default=5, help="timed runs per side (default 5)")
    parser.add_argument("--only", nargs="+", help="workload names")
    parser.add_argument("--breakdown", action="store_true",
                        help="--reps more dask runs per cell under the task stream: where the time goes")
    args = parser.parse_args(argv)

    import numba
    from distributed import Client, LocalCluster, get_task_stream, wait

    # Timed calls run the kernels, here and in the workers (which inherit the environment), never
    # the NumPy tier that answers while a kernel compiles (gradops._fast.first_calls).
    os.environ["GRADOPS_FIRST_CALLS"] = "compile"

    numba.set_num_threads(args.threads)
    print(f"{cpu_model()}; in-memory: {args.threads} threads; dask: LocalCluster {args.workers} processes x 1 thread; "
          f"median of {args.reps}")
    print("| workload | chunk MiB | blocks | in-memory GiB/s (fresh / out=) | dask GiB/s | dask / out= time "
          "| dask floor / out= time |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    breakdowns: list[str] = []
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        for workload in workloads():
            if args.only and workload.name not in args.only:
                continue
            shape = workload.source_shape(args.gib)
            source = _source_rows(range(shape[0]), range(shape[1]), shape[1:])
            expected = workload.numpy_call(source)
            fresh = _median_seconds(lambda: workload.numpy_call(source), args.reps)
            moved = (source.nbytes + expected.nbytes) / GIB
            for chunk_mib in args.chunk_mib:
                chunks = _chunks(shape, workload.rows_axis, int(chunk_mib * MIB))
                data = _placed_source(client, shape, chunks, f"bench-source-{workload.name}-{chunk_mib}")
                result = workload.dask_call(data)
                if _block_digests(result) != _local_digests(expected, result.chunks):
                    raise SystemExit(f"{workload.name}: the dask result differs from the in-memory call")
                held: list = []

                def run(call: Callable = workload.dask_call) -> None:
                    result = client.persist(call(data))
                    wait(result)
                    held.append(result)

                def run_floor() -> None:
                    run(lambda data: data.map_blocks(_nothing, chunks=(1,) * data.ndim, dtype=data.dtype))

                def release() -> None:
                    """Between timed runs, as the in-memory side drops its result. Once no
                    worker holds the result, the same graph is computed again, not found."""
                    _until_released(client, _keys(held.pop()))

                run()  # warm-up: every worker has loaded the kernels
                release()
                run_floor()
                release()
                # The two sides in turn, so that both meet the machine in the same state (the
                # memory bandwidth of these VMs moves by 1.3-1.8x over minutes). out= into the
                # expected result itself: the same values again, and no third array here.
                in_memory_times, dask_times, floor_times = [], [], []
                for _ in range(args.reps):
                    in_memory_times.append(_seconds(lambda: workload.numpy_call(source, out=expected)))
                    dask_times.append(_seconds(run))
                    release()
                    floor_times.append(_seconds(run_floor))
                    release()
                in_memory, on_dask = statistics.median(in_memory_times), statistics.median(dask_times)
                floor = statistics.median(floor_times)
                blocks = int(np.prod(data.numblocks))
                cell = f"| {workload.describe} | {np.prod(data.chunksize) * 4 / MIB:.0f} |"
                print(f"{cell} {blocks} | "
                      f"{moved / fresh:.2f} / {moved / in_memory:.2f} | {moved / on_dask:.2f} | "
                      f"{on_dask / in_memory:.2f} | {1 + floor / in_memory:.2f} |", flush=True)
                if args.breakdown:
                    runs = []
                    for _ in range(args.reps):
                        with get_task_stream(client) as stream:
                            start = time.time()
                            run()
                            end = time.time()
                        release()
                        runs.append(_breakdown(stream.data, start, end))
                    times = zip(*(astuple(r)[1:] for r in runs))  # per field after tasks, over the runs
                    breakdowns.append(f"{cell} {runs[0].tasks} | {1e3 * in_memory:.1f} | "
                                      + " | ".join(f"{1e3 * statistics.median(t):.1f}" for t in times) + " |")
                del data, result
            del source, expected
    if breakdowns:
        print(f"\nWhere the dask time goes, ms (medians of {args.reps} more runs under the task stream)")
        print("| workload | chunk MiB | tasks | in-memory out= | run start to first task | between a worker's tasks | "
              "busiest worker's tasks | last task to run end |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        print("\n".join(breakdowns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
