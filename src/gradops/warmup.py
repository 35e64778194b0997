"""Compile the fast backend's kernels ahead of use (``gradops warmup``).

A kernel compiles on its first call in a process with no disk-cache entry for it (issue 23,
"Cold start"). Warming up runs every chosen operator once, on tiny inputs, for each dtype and
layout asked for; the compiled kernels land in numba's disk cache, where every later process
loads them. The cases run in parallel processes, one per core, since numba compiles one
function at a time per process.

Each :class:`WarmupCase` is one (operator, dtype, layout) and makes the calls a real call of
that kind makes: the kernel a call compiles depends on its dtype and layout, not on its sizes.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from .errors import DescriptorError

RELU_OPS = ("relu", "relu_grad")
RESAMPLE_OPS = ("resample", "resample1", "resample2", "resample_grad", "resample_grad1")
DEPTHWISE_OPS = ("depthwise_conv2d_native", "depthwise_conv2d_native_backprop_input",
                 "depthwise_conv2d_native_backprop_filter")
OPS = RELU_OPS + RESAMPLE_OPS + DEPTHWISE_OPS

# The dtypes each family takes (README "Using it"); integer ReLU needs feature level 5.1.
FAMILY_DTYPES = {
    RELU_OPS: ("float32", "float16", "int32", "int16", "int8"),
    RESAMPLE_OPS: ("float32", "float16"),
    DEPTHWISE_OPS: ("float32", "float16", "bfloat16", "float64"),
}
DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int16", "int8")
# Resample: NCHW arrays and channels_last views of them; depthwise: the data_format.
LAYOUTS = ("NCHW", "NHWC")


def op_dtypes(op: str) -> tuple[str, ...]:
    return next(dtypes for ops, dtypes in FAMILY_DTYPES.items() if op in ops)


def _array(shape: Sequence[int], dtype: str, seed: int) -> np.ndarray:
    """Deterministic values with both signs (ReLU takes either branch)."""
    import ml_dtypes

    values = np.random.default_rng(seed).uniform(-4, 4, size=shape)
    return values.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


def _channels_last(array: np.ndarray) -> np.ndarray:
    """The same NCHW-indexed array stored channels-last."""
    return np.ascontiguousarray(array.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def _relu_calls(op: str, dtype: str, layout: str) -> Iterator[Callable[[], object]]:
    import gradops

    x = _array((2, 3, 4, 5), dtype, 1)
    dy = _array((2, 3, 4, 5), dtype, 2)
    # 1 MiB: a call that shares its work with a helper (the pool's lane and its entry)
    large_x = _array((2, 8, 128, 512 // np.dtype(dtype).itemsize), dtype, 3)
    if layout == "NHWC":
        x, dy, large_x = _channels_last(x), _channels_last(dy), _channels_last(large_x)
    if op == "relu":
        yield lambda: gradops.relu(x, backend="fast")
        yield lambda: gradops.relu(large_x, out=np.empty_like(large_x), backend="fast")
    else:
        yield lambda: gradops.relu_grad(x, dy, backend="fast")
        broadcast = np.broadcast_to(dy[:1], dy.shape)
        yield lambda: gradops.relu_grad(x, broadcast, backend="fast")
        yield lambda: gradops.relu_grad(large_x, large_x, backend="fast")


def _resample_calls(op: str, dtype: str, layout: str) -> Iterator[Callable[[], object]]:
    import gradops

    small, large = (1, 3, 4, 5), (1, 3, 8, 10)
    forward = op in ("resample", "resample1", "resample2")
    source = _array(small if forward else large, dtype, 3)
    if layout == "NHWC":
        source = _channels_last(source)
    sizes = large if forward else small
    function = getattr(gradops, op)
    # RESAMPLE2 and RESAMPLE_GRAD1 have no default nearest rounding (SPEC 3.3)
    rounding = {"rounding_direction": "decreasing"} if op in ("resample2", "resample_grad1") else {}
    yield lambda: function(source, sizes, mode="linear", backend="fast")
    yield lambda: function(source, sizes, mode="nearest", backend="fast", **rounding)


def _depthwise_calls(op: str, dtype: str, layout: str) -> Iterator[Callable[[], object]]:
    import gradops

    n, h, w, c, m = 1, 6, 7, 16, 1
    filt = _array((3, 3, c, m), dtype, 4)
    function = getattr(gradops, op)
    for stride in (1, 2):
        strides = (1, stride, stride, 1) if layout == "NHWC" else (1, 1, stride, stride)
        x_shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
        oh, ow = -(-h // stride), -(-w // stride)
        dy_shape = (n, oh, ow, c * m) if layout == "NHWC" else (n, c * m, oh, ow)
        x, dy = _array(x_shape, dtype, 5), _array(dy_shape, dtype, 6)
        attrs = dict(strides=strides, padding="SAME", data_format=layout, backend="fast")
        if op == "depthwise_conv2d_native":
            yield lambda x=x, attrs=attrs: function(x, filt, **attrs)
        elif op == "depthwise_conv2d_native_backprop_input":
            yield lambda x_shape=x_shape, dy=dy, attrs=attrs: function(x_shape, filt, dy, **attrs)
        else:
            yield lambda x=x, dy=dy, attrs=attrs: function(x, filt.shape, dy, **attrs)
    if op == "depthwise_conv2d_native_backprop_filter" and layout == "NHWC":
        # Rows of 16 positions or more keep the filter's lanes in registers, in a kernel of their
        # own (_backprop_filter_kernel_for in _fast/depthwise/filter.py).
        rows16 = _array((n, h, 16, c), dtype, 8)
        yield lambda: function(rows16, filt.shape, rows16, strides=(1, 1, 1, 1), padding="SAME", data_format="NHWC",
                               backend="fast")
    if op in ("depthwise_conv2d_native", "depthwise_conv2d_native_backprop_input") and layout == "NHWC":
        # A y or dx of 8 MiB or more on 64-byte lines is written with non-temporal stores, by a
        # kernel of its own (_forward_kernel_for, _backprop_input_kernel_for in
        # _fast/depthwise/kernels.py).
        large = (1, 256, 256, 64)
        wide = filt[:, :, :1].repeat(64, axis=2)
        source = _array(large, dtype, 7)
        if op == "depthwise_conv2d_native":
            yield lambda: function(source, wide, strides=(1, 1, 1, 1), padding="SAME", data_format="NHWC",
                                   backend="fast")
        else:
            yield lambda: function(large, wide, source, strides=(1, 1, 1, 1), padding="SAME", data_format="NHWC",
                                   backend="fast")


@dataclass(frozen=True)
class WarmupCase:
    op: str
    dtype: str
    layout: str

    def __str__(self) -> str:
        return f"{self.op} {self.dtype} {self.layout}"

    def calls(self) -> Iterator[Callable[[], object]]:
        if self.op in RELU_OPS:
            return _relu_calls(self.op, self.dtype, self.layout)
        if self.op in RESAMPLE_OPS:
            return _resample_calls(self.op, self.dtype, self.layout)
        return _depthwise_calls(self.op, self.dtype, self.layout)

    def run(self) -> None:
        for call in self.calls():
            call()


def _choose(field: str, given: Iterable[str] | None, allowed: Sequence[str]) -> tuple[str, ...]:
    if not given:
        return tuple(allowed)
    chosen = tuple(given)
    for name in chosen:
        if name not in allowed:
            raise DescriptorError.expected(field, f"one of {', '.join(allowed)}", name)
    return chosen


def cases(ops: Iterable[str] | None = None, dtypes: Iterable[str] | None = None,
          layouts: Iterable[str] | None = None) -> list[WarmupCase]:
    """Every (op, dtype, layout) asked for (default: all) that the op supports."""
    chosen_ops = _choose("ops", ops, OPS)
    chosen_dtypes = _choose("dtypes", dtypes, DTYPES)
    chosen_layouts = _choose("layouts", layouts, LAYOUTS)
    return [WarmupCase(op, dtype, layout) for op in chosen_ops for dtype in chosen_dtypes
            if dtype in op_dtypes(op) for layout in chosen_layouts]


def _run_cases(group: Sequence[WarmupCase]) -> Sequence[WarmupCase]:
    os.environ["GRADOPS_FIRST_CALLS"] = "compile"  # compile here, rather than answer in NumPy meanwhile
    for case in group:
        case.run()
    return group


def warm_up(chosen: Sequence[WarmupCase], workers: int | None = None,
            on_done: Callable[[WarmupCase], None] = lambda case: None) -> None:
    """Run each case once in ``workers`` processes (default: one per core), so that its kernels
    compile into the disk cache; ``on_done`` is called as each case finishes."""
    workers = workers or os.cpu_count() or 1
    # The layouts of one (op, dtype) share kernels: one process takes them in turn, so that two
    # processes do not compile the same kernel.
    groups: dict[tuple[str, str], list[WarmupCase]] = {}
    for case in chosen:
        groups.setdefault((case.op, case.dtype), []).append(case)
    # spawn: a fresh interpreter per worker, not a fork of a caller that may hold numba's threads
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, max(1, len(groups))), mp_context=context) as pool:
        futures = [pool.submit(_run_cases, group) for group in groups.values()]
        for future in as_completed(futures):
            for case in future.result():
                on_done(case)


# --- the ``gradops warmup`` command (gradops.cli.COMMANDS) ---------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("--ops", nargs="+", metavar="OP", help=f"operators (default: all): {', '.join(OPS)}")
    parser.add_argument("--dtypes", nargs="+", metavar="DTYPE", help=f"dtypes (default: all): {', '.join(DTYPES)}")
    parser.add_argument("--layouts", nargs="+", metavar="LAYOUT", help="NCHW and/or NHWC (default: both)")
    parser.add_argument("--jobs", type=int, default=None, help="parallel processes (default: one per core)")


def main(args) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ._backend import fast_available

    if not fast_available():
        raise DescriptorError("backend", "warmup compiles the fast backend, which needs numba (pip install numba)")
    if args.jobs is not None and args.jobs < 1:
        raise DescriptorError.expected("--jobs", "an integer >= 1", args.jobs)
    chosen = cases(args.ops, args.dtypes, args.layouts)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns) as progress:
        task = progress.add_task("compiling kernels into the cache", total=len(chosen))

        def done(case: WarmupCase) -> None:
            progress.console.print(f"  ready: {case}")
            progress.advance(task)

        warm_up(chosen, args.jobs, done)
    return 0
