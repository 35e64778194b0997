"""DistributedDataParallel (gloo, 2 processes on this machine) with gradops layers gives the
parameters of one process training on the same global batch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gradops.torch")

from gradops.torch.ddp import train_single  # noqa: E402

pytestmark = pytest.mark.peers

SRC = str(Path(__file__).resolve().parents[1] / "src")
SETTINGS = dict(steps=4, batch=8, size=32, width=8)


def test_ddp_two_processes_match_one_process(tmp_path):
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    init_file = tmp_path / "rendezvous"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    options = [f"--{key}={value}" for key, value in SETTINGS.items()]
    replicas = [subprocess.Popen([sys.executable, "-m", "gradops.torch.ddp", f"--rank={rank}", "--world-size=2",
                                  f"--init-file={init_file}", f"--out={tmp_path / f'rank{rank}.pt'}", *options],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for rank in range(2)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single = train_single(**SETTINGS)
    finally:
        torch.set_num_threads(threads)
    for replica in replicas:
        _, stderr = replica.communicate(timeout=600)
        assert replica.returncode == 0, stderr
    ranks = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(2)]
    assert ranks[0].keys() == single.keys()
    initial = train_single(steps=0, **{k: v for k, v in SETTINGS.items() if k != "steps"})
    moved = max(float((single[name] - initial[name]).abs().max()) for name in single)
    assert moved > 1e-2  # training changed the parameters, so the comparison means something
    for name, value in single.items():
        torch.testing.assert_close(ranks[0][name], ranks[1][name], rtol=0, atol=0)  # DDP keeps replicas equal
        torch.testing.assert_close(ranks[0][name], value, rtol=1e-4, atol=1e-5, msg=name)
