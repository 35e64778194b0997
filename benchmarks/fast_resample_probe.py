"""Probe: gradops' fast resample gradient against its peers on SUITE.md N1-N3, L1-L3, P1, P2.

A quick look for the kernel's author, not the suite runner (that is ``gradops bench``). Every
contender runs in its own process with ``--threads`` threads (2) and reports, per workload and
layout (NCHW, and the same logical tensor in an NHWC / channels_last buffer), the median and
minimum wall time and the median CPU time of ``--reps`` timed calls after a warm-up, with
preallocated outputs where the API has them (gradops and torch ``out=``). The gradops process
also checks its result against a float64 reference built from dense per-axis matrices, and
measures the memory bandwidth (a streaming copy) for the lower bound ``(dy + dx bytes) /
bandwidth``. Peers: torch (``_upsample_nearest_exact2d_backward``, ``upsample_nearest2d_backward``,
``upsample_bilinear2d_backward``), TensorFlow (``ResizeNearestNeighborGrad``,
``ResizeBilinearGrad``; NHWC only) and JAX (``jit(vjp)`` of an index gather for nearest, of
``jax.image.resize(linear, antialias=False)`` for linear).

On a shared machine wall times with 2 threads mostly measure the neighbours; ``--threads 1``
compares CPU time per call, which other processes disturb much less.

    .venv/bin/python benchmarks/fast_resample_probe.py [--workloads N1,L1] [--peers torch,tf,jax]
        [--threads 1] [--reps 9]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

# forward input -> forward output (logical NCHW), mode, grid, dtype (SUITE.md)
WORKLOADS = {
    "N1": ((16, 64, 64, 64), (16, 64, 128, 128), "nearest", "half", "float32"),
    "N2": ((16, 64, 64, 64), (16, 64, 128, 128), "nearest", "asymmetric", "float32"),
    "N3": ((8, 32, 100, 100), (8, 32, 150, 50), "nearest", "half", "float32"),
    "L1": ((16, 64, 64, 64), (16, 64, 128, 128), "linear", "half", "float32"),
    "L2": ((16, 64, 128, 128), (16, 64, 64, 64), "linear", "half", "float32"),
    "L3": ((16, 64, 64, 64), (16, 64, 128, 128), "linear", "half", "float16"),
    "P1": ((8, 32, 20, 20), (8, 32, 46, 54), "nearest", "half", "float32"),
    "P2": ((8, 32, 20, 20), (8, 32, 92, 108), "nearest", "asymmetric", "float32"),
}
LAYOUTS = ("NCHW", "NHWC")
PEERS = ("torch", "tf", "jax")
THREADS = int(os.environ.get("PROBE_THREADS", "2"))


def taps(name: str) -> list:
    """Per-axis forward taps: identity for N and C, PyTorch's grids for H and W (SPEC 6.2)."""
    from gradops._resample_plan import axis_taps

    shape_in, shape_out, mode, grid, _ = WORKLOADS[name]
    result = []
    for n_in, n_out in zip(shape_in, shape_out):
        if n_in == n_out:
            result.append(axis_taps(n_in, n_out, 1.0, 0.0, 0.0, mode, "half_up"))
        elif grid == "half":  # nearest-exact: floor((o + 0.5) / S); bilinear align_corners=False
            result.append(axis_taps(n_in, n_out, n_out / n_in, 0.5, -0.5, mode, "half_up"))
        else:  # nearest: floor(o / S)
            result.append(axis_taps(n_in, n_out, n_out / n_in, 0.0, 0.0, mode, "floor"))
    return result


def gradient(name: str, layout: str):
    """dy (the same values for every contender), as a logical NCHW array in ``layout``'s buffer."""
    import numpy as np

    shape_out, dtype = WORKLOADS[name][1], WORKLOADS[name][4]
    dy = np.random.default_rng(0).standard_normal(shape_out, dtype=np.float32).astype(dtype)
    return nhwc(dy) if layout == "NHWC" else dy


def nhwc(array):
    import numpy as np

    return np.ascontiguousarray(array.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def timed(fn, reps: int) -> dict:
    import numpy as np

    start = time.perf_counter()
    fn()
    cold = time.perf_counter() - start
    fn()
    times, cpu = [], []
    for _ in range(reps):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {"cold_ms": cold * 1e3, "median_ms": float(np.median(times)) * 1e3, "min_ms": min(times) * 1e3,
            "cpu_ms": float(np.median(cpu)) * 1e3}


def gradops_fn(name: str, layout: str) -> tuple:
    """The timed call, and the worst error against the float64 reference in units of the
    summation bound ``2**-24 * sum |w * dy|`` (float16: plus half an ulp of the result)."""
    import numpy as np

    from gradops._fast.resample import resample_backward

    shape_in, dtype = WORKLOADS[name][0], WORKLOADS[name][4]
    dy, axis_taps = gradient(name, layout), taps(name)
    dx = np.empty(shape_in, dtype)
    dx = nhwc(dx) if layout == "NHWC" else dx
    resample_backward(dy, dx, axis_taps)
    exact, abs_sum = dy.astype(np.float64), np.abs(dy.astype(np.float64))
    for axis, (index, weight) in enumerate(axis_taps):
        if index.shape[0] == shape_in[axis] and np.all(index[:, 0] == np.arange(index.shape[0])) \
                and np.all(weight[:, 1] == 0):
            continue
        matrix = np.zeros((index.shape[0], shape_in[axis]))
        np.add.at(matrix, (np.repeat(np.arange(index.shape[0]), 2), index.ravel()), weight.ravel())
        exact = np.moveaxis(np.tensordot(matrix.T, exact, axes=([1], [axis])), 0, axis)
        abs_sum = np.moveaxis(np.tensordot(np.abs(matrix.T), abs_sum, axes=([1], [axis])), 0, axis)
    unit = 2.0 ** -24 * abs_sum + (np.abs(exact) * 2.0 ** -11 if dtype == "float16" else 0) + 1e-30
    error = float(np.max(np.abs(dx.astype(np.float64) - exact) / unit))
    return (lambda: resample_backward(dy, dx, axis_taps)), error


def torch_fn(name: str, layout: str):
    import numpy as np
    import torch

    torch.set_num_threads(THREADS)
    shape_in, shape_out, mode, grid, _ = WORKLOADS[name]
    dy = gradient(name, layout)
    format_ = torch.channels_last if layout == "NHWC" else torch.contiguous_format
    g = torch.from_numpy(np.ascontiguousarray(dy)).contiguous(memory_format=format_)
    out = torch.empty(shape_in, dtype=g.dtype).contiguous(memory_format=format_)
    sizes, aten = (list(shape_out[2:]), list(shape_in)), torch.ops.aten
    if mode == "linear":
        return lambda: aten.upsample_bilinear2d_backward.grad_input(g, *sizes, False, None, None, grad_input=out)
    op = aten._upsample_nearest_exact2d_backward if grid == "half" else aten.upsample_nearest2d_backward
    return lambda: op.grad_input(g, *sizes, None, None, grad_input=out)


def tf_fn(name: str, layout: str):
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    shape_in, _, mode, grid, dtype = WORKLOADS[name]
    dy = np.ascontiguousarray(gradient(name, layout).transpose(0, 2, 3, 1))
    if mode == "nearest":
        g = tf.constant(dy)
        size = tf.constant(shape_in[2:], dtype=tf.int32)
        return lambda: tf.raw_ops.ResizeNearestNeighborGrad(grads=g, size=size, align_corners=False,
                                                             half_pixel_centers=grid == "half").numpy()
    g = tf.constant(dy.astype(np.float32))  # ResizeBilinearGrad takes float32 grads for every T
    image = tf.zeros([shape_in[0], shape_in[2], shape_in[3], shape_in[1]], dtype=dtype)
    return lambda: tf.raw_ops.ResizeBilinearGrad(grads=g, original_image=image, align_corners=False,
                                                 half_pixel_centers=True).numpy()


def jax_fn(name: str, layout: str):
    import jax
    import jax.numpy as jnp

    shape_in, shape_out, mode, _, dtype = WORKLOADS[name]
    dy = gradient(name, layout)
    nhwc_layout = layout == "NHWC"
    if nhwc_layout:  # the same tensor in NHWC axis order
        dy, shape_in, shape_out = dy.transpose(0, 2, 3, 1), [shape_in[i] for i in (0, 2, 3, 1)], \
            [shape_out[i] for i in (0, 2, 3, 1)]
    h_axis, w_axis = (1, 2) if nhwc_layout else (2, 3)
    x = jnp.zeros(shape_in, dtype=dtype)
    if mode == "nearest":
        index_h, index_w = (jnp.asarray(t[0][:, 0]) for t in taps(name)[2:])

        def forward(x):
            return jnp.take(jnp.take(x, index_h, axis=h_axis), index_w, axis=w_axis)
    else:
        def forward(x):
            return jax.image.resize(x, shape_out, "linear", antialias=False)
    backward = jax.jit(lambda x, dy: jax.vjp(forward, x)[1](dy)[0])
    dy = jnp.asarray(dy)
    return lambda: backward(x, dy).block_until_ready()


def bandwidth() -> float:
    """Streaming copy with THREADS threads: bytes read + written per second."""
    import numba
    import numpy as np
    from numba import njit, prange

    @njit(parallel=True)
    def copy(src, dst):
        for i in prange(src.size):
            dst[i] = src[i]

    src = np.ones(1 << 24, np.float32)
    dst = np.empty_like(src)
    numba.set_num_threads(THREADS)
    return 2 * src.nbytes / timed(lambda: copy(src, dst), 9)["median_ms"] * 1e3


def worker(peer: str, names: list[str], reps: int) -> None:
    if peer == "gradops":
        import numba

        numba.set_num_threads(THREADS)
        print(json.dumps({"peer": peer, "bandwidth": bandwidth()}), flush=True)
    for name in names:
        for layout in LAYOUTS:
            if peer == "tf" and layout == "NCHW":
                continue  # TF's CPU resize grads are NHWC only
            extra = {}
            try:
                if peer == "gradops":
                    fn, extra["error"] = gradops_fn(name, layout)
                else:
                    fn = {"torch": torch_fn, "tf": tf_fn, "jax": jax_fn}[peer](name, layout)
                result = timed(fn, reps)
            except Exception as exc:  # noqa: BLE001 - a peer failing on a workload is reported, not fatal
                result = {"failure": f"{type(exc).__name__}: {str(exc)[:120]}"}
            print(json.dumps({"peer": peer, "workload": f"{name} {layout}", **result, **extra}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.workloads.split(",")
    if args.worker:
        worker(args.worker, names, args.reps)
        return
    peers = [p for p in args.peers.split(",") if p]
    results: dict[tuple[str, str], dict] = {}
    rate = None
    for peer in ["gradops", *peers]:
        # One BLAS thread: the reference check's tensordot must not leave BLAS threads spinning
        # on the cores the timed kernels use.
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS="1",
                   PROBE_THREADS=str(args.threads), TF_CPP_MIN_LOG_LEVEL="3",
                   XLA_FLAGS=f"--xla_cpu_multi_thread_eigen={'true' if args.threads > 1 else 'false'} "
                             f"intra_op_parallelism_threads={args.threads}")
        proc = subprocess.run([sys.executable, __file__, "--worker", peer, "--workloads", args.workloads,
                               "--reps", str(args.reps)], env=env, capture_output=True, text=True)
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                if "bandwidth" in record:
                    rate = record["bandwidth"]
                else:
                    results[record["workload"], peer] = record
        if proc.returncode:
            print(f"{peer}: exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    if rate:
        print(f"{args.threads} thread(s): copy bandwidth {rate / 1e9:.1f} GB/s")
    for key, title in (("median_ms", "wall median"), ("min_ms", "wall min"), ("cpu_ms", "CPU median")):
        print(f"\n{title}, ms{'':7}" + " ".join(f"{p:>9}" for p in ["gradops", *peers])
              + "  vs best peer   bound  vs bound  error/bound")
        for name in names:
            shape_in, shape_out, dtype = WORKLOADS[name][0], WORKLOADS[name][1], WORKLOADS[name][4]
            nbytes = (math.prod(shape_in) + math.prod(shape_out)) * (2 if dtype == "float16" else 4)
            for layout in LAYOUTS:
                row = f"{name} {layout}"
                values = {p: results.get((row, p), {}).get(key) for p in ["gradops", *peers]}
                ours = values.pop("gradops")
                best = min((v for v in values.values() if v), default=None)
                cells = " ".join(f"{v:9.2f}" if v else f"{'-':>9}" for v in [ours, *values.values()])
                line = f"{row:20}{cells}"
                line += f"  {ours / best:11.2f}" if ours and best else f"  {'-':>11}"
                if ours and rate and key != "cpu_ms":
                    bound = nbytes / rate * 1e3
                    line += f"   {bound:5.2f}  {ours / bound:8.2f}"
                    error = results.get((row, "gradops"), {}).get("error")
                    line += f"  {error:11.2f}" if error is not None else ""
                print(line)


if __name__ == "__main__":
    main()
