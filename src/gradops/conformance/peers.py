"""The peer frameworks of ``gradops check``, imported lazily and once."""

from __future__ import annotations

import importlib
import os
from functools import cache
from typing import Any, Callable

import numpy as np

# "onnx" is the onnx package's reference evaluator (onnx.reference), "onnxruntime" its CPU runtime.
FRAMEWORKS = ("tensorflow", "pytorch", "jax", "onnxruntime", "onnx")
MODULES = {"tensorflow": "tensorflow", "pytorch": "torch", "jax": "jax", "onnxruntime": "onnxruntime",
           "onnx": "onnx.reference"}


class Missing(Exception):
    """A framework that is not installed."""


@cache
def framework(name: str) -> Any:
    """The framework's module (``onnx.reference`` for ``"onnx"``), imported once; raises
    :class:`Missing`."""
    if name == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        module = importlib.import_module(MODULES[name])
    except ImportError as exc:
        raise Missing(f"{MODULES[name].split('.')[0]} is not installed") from exc
    if name == "jax":
        module.config.update("jax_platforms", "cpu")
    return module


def call(function: Callable[[], Any]) -> np.ndarray | BaseException:
    """The framework's result as a NumPy array, or the exception it raised."""
    try:
        return np.asarray(function())
    except Exception as exc:  # noqa: BLE001 - a framework error is a result to report
        return exc


def to_numpy(value: Any) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)
