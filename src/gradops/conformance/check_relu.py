"""``gradops check`` rows of ``relu`` and ``relu_grad`` against TensorFlow, PyTorch and JAX
(SPEC 4.2-4.4). ONNX's ``Relu`` rows are in :mod:`.check_onnx`."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .peers import call, framework
from .verdict import Probe, Trial, TrialRun


def _relu_values(dtype: type) -> np.ndarray:
    """SPEC 4.2 value classes, plus a subnormal positive and negative value."""
    info = np.finfo(dtype)
    return np.array([0.0, -0.0, 1, -1, 2.5, -3, np.inf, -np.inf, np.nan, info.max, -info.max, info.tiny,
                     info.smallest_subnormal, -info.smallest_subnormal], dtype)


def relu_inputs(rng: np.random.Generator) -> list[tuple[str, np.ndarray, np.ndarray]]:
    inputs = []
    for dtype in (np.float32, np.float16):
        values = _relu_values(dtype)
        x, dy = np.meshgrid(values, values, indexing="ij")
        inputs.append((f"special values {np.dtype(dtype).name}", x.copy(), dy.copy()))
        inputs.append((f"random {np.dtype(dtype).name}", rng.normal(0, 3, (4, 33)).astype(dtype),
                       rng.normal(0, 3, (4, 33)).astype(dtype)))
    return inputs


def _is_subnormal(value: np.floating) -> bool:
    return bool(value != 0 and abs(value) < np.finfo(value.dtype).tiny)


def _relu_grad_probe(name: str) -> TrialRun:
    from .. import relu_grad

    def run(rng: np.random.Generator, backend: str | None) -> list[Trial]:
        trials = []
        for label, x, dy in relu_inputs(rng):
            ours = relu_grad(x, dy, backend=backend)

            def explain(i: tuple[int, ...], x: np.ndarray = x, dy: np.ndarray = dy) -> str | None:
                positive = bool(x[i] > 0)
                if name != "pytorch" and (_is_subnormal(x[i]) or positive and _is_subnormal(dy[i])):
                    return "SPEC 4.2: CPU flush-to-zero of a subnormal X or dY"
                if name == "tensorflow" and not positive and not np.isfinite(dy[i]):
                    return "SPEC 4.2: ReluGrad multiplies by the mask (inf*0 = NaN)"
                if name == "tensorflow" and not positive and np.signbit(dy[i]):
                    return "SPEC 4.2: ReluGrad multiplies by the mask (dY*0 keeps the sign: -0)"
                if name == "pytorch" and np.isnan(x[i]):
                    return "SPEC 4.2: threshold_backward passes dY where X is NaN"
                return None

            if name == "tensorflow":
                tf = framework("tensorflow")
                theirs = call(lambda: tf.raw_ops.ReluGrad(gradients=dy, features=x).numpy())
            elif name == "pytorch":
                torch = framework("pytorch")
                theirs = call(lambda: torch.ops.aten.threshold_backward(torch.from_numpy(dy), torch.from_numpy(x),
                                                                         0.0).numpy())
            else:
                jax = framework("jax")
                theirs = call(lambda: jax.vjp(jax.nn.relu, x)[1](dy)[0])
            trials.append(Trial(label, ours, theirs, explain=explain))
        return trials

    return run


def relu_explain(x: np.ndarray) -> Callable[[tuple[int, ...]], str | None]:
    """The documented reason why a framework's ReLU of ``x`` differs from gradops' at an index."""

    def explain(i: tuple[int, ...]) -> str | None:
        if np.isnan(x[i]):
            return "SPEC 4.3: frameworks propagate NaN (gradops: +0)"
        if x[i] == 0 and np.signbit(x[i]):
            return "SPEC 4.3: -0 is kept (gradops: +0)"
        if _is_subnormal(x[i]):
            return "SPEC 4.2: CPU flush-to-zero of a subnormal X or dY"
        return None

    return explain


def relu_probe(forward: Callable[[np.ndarray], object]) -> TrialRun:
    """Trials of ``relu`` against ``forward(x)``, a framework's ReLU."""
    from .. import relu

    def run(rng: np.random.Generator, backend: str | None) -> list[Trial]:
        return [Trial(label, relu(x, backend=backend), call(lambda x=x: forward(x)), explain=relu_explain(x))
                for label, x, _ in relu_inputs(rng)]

    return run


def _tf_relu(x: np.ndarray) -> object:
    return framework("tensorflow").raw_ops.Relu(features=x).numpy()


def _torch_relu(x: np.ndarray) -> object:
    torch = framework("pytorch")
    return torch.relu(torch.from_numpy(x)).numpy()


def _jax_relu(x: np.ndarray) -> object:
    return framework("jax").nn.relu(x)


def probes() -> list[Probe]:
    result = []
    for name in ("tensorflow", "pytorch", "jax"):
        raw = {"tensorflow": "raw_ops.ReluGrad", "pytorch": "aten.threshold_backward", "jax": "vjp(jax.nn.relu)"}
        result.append(Probe("relu_grad (ACTIVATION_RELU_GRAD)", name, raw[name], _relu_grad_probe(name)))
        label, forward = {"tensorflow": ("raw_ops.Relu", _tf_relu), "pytorch": ("torch.relu", _torch_relu),
                          "jax": ("jax.nn.relu", _jax_relu)}[name]
        result.append(Probe("relu (ACTIVATION_RELU)", name, label, relu_probe(forward)))
    return result
