"""Probe: gradops' fast depthwise BackpropInput against its peers on SUITE.md D1-D7.

A quick look for the kernel's author, not the suite runner (that is ``gradops bench``). Every
contender runs in its own process with ``--threads`` threads (2); each reports the median and
minimum wall time and the median CPU time of ``--reps`` timed calls after a warm-up, with
preallocated outputs where the API has them (gradops ``out=``) and fresh outputs otherwise. The
gradops process also measures the memory bandwidth (a streaming copy) and the float32 matmul
rate with as many threads, and prints the lower bound ``max(bytes / bandwidth, flops / matmul
rate)`` with ``bytes = dy + filter + dx``.

On a shared machine wall times with 2 threads mostly measure the neighbours. ``--threads 1``
compares CPU time per call, which other processes disturb much less.

    .venv/bin/python benchmarks/fast_depthwise_probe.py [--workloads D1,D2] [--peers torch,tf_onednn]
        [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

# (N, H, W, C, fh, fw, M, stride, dilation, layout, dtype), SUITE.md
WORKLOADS = {
    "D1": (32, 112, 112, 32, 3, 3, 1, 1, 1, "NHWC", "float32"),
    "D2": (32, 112, 112, 64, 3, 3, 1, 2, 1, "NHWC", "float32"),
    "D3": (32, 14, 14, 512, 3, 3, 1, 1, 1, "NHWC", "float32"),
    "D4": (8, 56, 56, 128, 5, 5, 2, 1, 1, "NHWC", "float32"),
    "D5": (32, 112, 112, 32, 3, 3, 1, 1, 2, "NHWC", "float32"),
    "D6": (32, 112, 112, 32, 3, 3, 1, 1, 1, "NCHW", "float32"),
    "D7": (32, 112, 112, 32, 3, 3, 1, 1, 1, "NHWC", "float16"),
}
PEERS = ("torch", "torch_nchw", "tf_onednn", "tf", "jax")
THREADS = int(os.environ.get("PROBE_THREADS", "2"))


def workload(name: str, seed: int = 0) -> dict:
    import numpy as np

    n, h, w, c, fh, fw, m, s, d, layout, dtype = WORKLOADS[name]

    def same(size: int, k: int) -> tuple[int, int, int]:  # SPEC 5.3
        out = (size + s - 1) // s
        need = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        return out, need // 2, need - need // 2

    oh, pt, pb = same(h, fh)
    ow, pl, pr = same(w, fw)
    rng = np.random.default_rng(seed)
    dy = rng.standard_normal((n, oh, ow, c * m), dtype=np.float32).astype(dtype)
    filt = rng.standard_normal((fh, fw, c, m), dtype=np.float32).astype(dtype)
    return dict(N=n, H=h, W=w, C=c, fh=fh, fw=fw, M=m, s=s, d=d, layout=layout, dtype=dtype, OH=oh, OW=ow,
                pt=pt, pb=pb, pl=pl, pr=pr, dy=dy, f=filt)


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


def gradops_fn(w: dict):
    import numpy as np

    from gradops._fast import depthwise as fast

    n, h, wd, c = w["N"], w["H"], w["W"], w["C"]
    dy = w["dy"]
    if w["layout"] == "NCHW":
        dy = np.ascontiguousarray(dy.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)
        dx = np.empty((n, c, h, wd), dy.dtype).transpose(0, 2, 3, 1)
    else:
        dx = np.empty((n, h, wd, c), dy.dtype)
    args = (w["s"], w["s"], w["d"], w["d"], w["pt"], w["pl"])
    return lambda: fast.backprop_input(dy, w["f"], dx, *args)


def torch_fn(w: dict, channels_last: bool):
    import numpy as np
    import torch

    torch.set_num_threads(THREADS)
    c, m = w["C"], w["M"]
    dy = torch.from_numpy(np.ascontiguousarray(w["dy"].transpose(0, 3, 1, 2)))
    weight = torch.from_numpy(np.ascontiguousarray(w["f"].transpose(2, 3, 0, 1).reshape(c * m, 1, w["fh"], w["fw"])))
    # PyTorch pads symmetrically: give it the input grown by the extra SAME row / column (SPEC 6.5)
    x = torch.empty((w["N"], c, w["H"] + w["pb"] - w["pt"], w["W"] + w["pr"] - w["pl"]), dtype=dy.dtype)
    if channels_last:
        dy, x = dy.contiguous(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    s, d = w["s"], w["d"]
    return lambda: torch.ops.aten.convolution_backward(dy, x, weight, None, [s, s], [w["pt"], w["pl"]], [d, d], False,
                                                       [0, 0], c, [True, False, False])[0]


def tf_fn(w: dict):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    dy, f = tf.constant(w["dy"]), tf.constant(w["f"])
    s, d = w["s"], w["d"]
    if d == 1:
        sizes = tf.constant([w["N"], w["H"], w["W"], w["C"]], dtype=tf.int32)
        return lambda: tf.raw_ops.DepthwiseConv2dNativeBackpropInput(
            input_sizes=sizes, filter=f, out_backprop=dy, strides=[1, s, s, 1], padding="SAME").numpy()
    x = tf.zeros([w["N"], w["H"], w["W"], w["C"]], dtype=w["dtype"])

    @tf.function
    def grad(x, dy):  # the raw op ignores dilations (SPEC 5.6): differentiate tf.nn instead
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.nn.depthwise_conv2d(x, f, [1, s, s, 1], "SAME", dilations=[d, d])
        return tape.gradient(y, x, output_gradients=dy)
    return lambda: grad(x, dy).numpy()


def jax_fn(w: dict):
    import jax
    import jax.numpy as jnp
    from jax import lax

    c, m = w["C"], w["M"]
    f = jnp.asarray(w["f"].reshape(w["fh"], w["fw"], 1, c * m))
    x = jnp.zeros((w["N"], w["H"], w["W"], c), dtype=w["dtype"])
    dy = jnp.asarray(w["dy"])
    numbers = ("NHWC", "HWIO", "NHWC")
    if w["layout"] == "NCHW":
        x, dy, numbers = jnp.transpose(x, (0, 3, 1, 2)), jnp.transpose(dy, (0, 3, 1, 2)), ("NCHW", "HWIO", "NCHW")
    s, d = w["s"], w["d"]

    def forward(x):
        return lax.conv_general_dilated(x, f, (s, s), [(w["pt"], w["pb"]), (w["pl"], w["pr"])], rhs_dilation=(d, d),
                                        dimension_numbers=numbers, feature_group_count=c)

    backward = jax.jit(lambda x, dy: jax.vjp(forward, x)[1](dy)[0])
    return lambda: backward(x, dy).block_until_ready()


def machine_rates() -> dict:
    """2-thread streaming copy bandwidth (bytes read + written per second) and float32 matmul rate."""
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
    copy_ms = timed(lambda: copy(src, dst), 9)["median_ms"]
    a = np.ones((1024, 1024), np.float32)
    matmul_ms = timed(lambda: a @ a, 7)["median_ms"]
    return {"bandwidth": 2 * src.nbytes / copy_ms * 1e3, "flops": 2 * 1024 ** 3 / matmul_ms * 1e3}


def worker(peer: str, names: list[str], reps: int) -> None:
    if peer == "gradops":
        import numba

        numba.set_num_threads(THREADS)
        print(json.dumps({"peer": peer, "rates": machine_rates()}), flush=True)
    for name in names:
        w = workload(name)
        try:
            if peer == "gradops":
                fn = gradops_fn(w)
            elif peer in ("torch", "torch_nchw"):
                fn = torch_fn(w, channels_last=peer == "torch" and w["layout"] == "NHWC")
            elif peer.startswith("tf"):
                if w["layout"] == "NCHW":
                    continue  # TF's CPU kernels reject NCHW (SPEC 5.6)
                fn = tf_fn(w)
            else:
                fn = jax_fn(w)
            result = timed(fn, reps)
        except Exception as exc:  # noqa: BLE001 - a peer failing on a workload is reported, not fatal
            result = {"error": f"{type(exc).__name__}: {str(exc)[:120]}"}
        print(json.dumps({"peer": peer, "workload": name, **result}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.workloads.split(",")
    if args.worker:
        worker(args.worker, names, args.reps)
        return
    results: dict[tuple[str, str], dict] = {}
    rates = {}
    threads = args.threads
    for peer in ["gradops", *[p for p in args.peers.split(",") if p]]:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   PROBE_THREADS=str(threads), TF_CPP_MIN_LOG_LEVEL="3",
                   TF_ENABLE_ONEDNN_OPTS="1" if peer == "tf_onednn" else "0",
                   XLA_FLAGS=f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'} "
                             f"intra_op_parallelism_threads={threads}")
        proc = subprocess.run([sys.executable, __file__, "--worker", peer, "--workloads", args.workloads,
                               "--reps", str(args.reps)], env=env, capture_output=True, text=True)
        for line in proc.stdout.splitlines():
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if "rates" in record:
                rates = record["rates"]
            else:
                results[record["workload"], peer] = record
        if proc.returncode:
            print(f"{peer}: exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    if rates:
        print(f"{threads} thread(s): bandwidth {rates['bandwidth'] / 1e9:.1f} GB/s, "
              f"matmul {rates['flops'] / 1e9:.0f} GFLOP/s")
    peers = [p for p in args.peers.split(",") if p]
    for key, title in (("median_ms", "wall median"), ("cpu_ms", "CPU median")):
        print(f"\n{title}, ms{'':9}" + " ".join(f"{p:>10}" for p in ["gradops", *peers])
              + "   vs best peer   bound   vs bound")
        for name in names:
            values = {p: results.get((name, p), {}).get(key) for p in ["gradops", *peers]}
            ours = values.pop("gradops")
            best = min((v for v in values.values() if v), default=None)
            w = workload(name)
            nbytes = (w["dy"].size + w["f"].size + w["N"] * w["H"] * w["W"] * w["C"]) * w["dy"].itemsize
            flops = 2 * w["dy"].size * w["fh"] * w["fw"]
            bound = max(nbytes / rates["bandwidth"], flops / rates["flops"]) * 1e3 if rates else None
            cells = " ".join(f"{v:10.2f}" if v else f"{'-':>10}" for v in [ours, *values.values()])
            line = f"{name:24}{cells}"
            line += f"   {ours / best:12.2f}" if ours and best else f"   {'-':>12}"
            if ours and bound and key == "median_ms":
                line += f"   {bound:5.2f}   {ours / bound:8.2f}"
            print(line)


if __name__ == "__main__":
    main()
