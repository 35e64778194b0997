"""The contenders: gradops and the peer frameworks.

Each runner module provides ``setup() -> dict`` (imports the framework, fixes its thread counts,
returns version information) and ``variants(workload, inputs) -> list[Variant]`` (every layout
and output policy it runs). Modules are imported only inside worker processes.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field

THREADS = 2


@dataclass(frozen=True)
class Runner:
    name: str
    label: str
    module: str
    requires: str  # the top-level package that must be installed
    env: dict[str, str] = field(default_factory=dict)  # set before the worker starts

    def installed(self) -> bool:
        return importlib.util.find_spec(self.requires) is not None


_PREFIX = "gradops.bench.runners."
GRADOPS = Runner("gradops", "gradops", _PREFIX + "run_gradops", "gradops")
# TF reads TF_ENABLE_ONEDNN_OPTS once, at import: each configuration needs its own process.
PEERS: dict[str, Runner] = {runner.name: runner for runner in (
    Runner("torch", "PyTorch", _PREFIX + "run_torch", "torch"),
    Runner("tf", "TF", _PREFIX + "run_tf", "tensorflow", {"TF_ENABLE_ONEDNN_OPTS": "0"}),
    Runner("tf-onednn", "TF oneDNN", _PREFIX + "run_tf", "tensorflow", {"TF_ENABLE_ONEDNN_OPTS": "1"}),
    Runner("jax", "JAX", _PREFIX + "run_jax", "jax", {"JAX_PLATFORMS": "cpu"}),
)}
RUNNERS: dict[str, Runner] = {GRADOPS.name: GRADOPS, **PEERS}
