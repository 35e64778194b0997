"""ReLU's lane tasks served by torch's OpenMP threads (gradops._fast.openmp_team): once gradops.torch
has made a fast call, a shared select is handed to the calling thread's OpenMP team, whose
threads spin between torch's operators, instead of to gradops' own helpers. Each case runs in a
fresh process with 2 threads (the pytest workers keep torch on one), with a timeout: a team
thread left waiting would hang the call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")
pytest.importorskip("gradops.torch")

pytestmark = pytest.mark.peers

_PRELUDE = """
import json, os, numpy as np, torch
torch.set_num_threads(2)
import gradops, gradops.torch
from gradops import GradopsError
from gradops._fast import pool

def relu_grad_through_torch(shape, seed):
    generator = torch.Generator().manual_seed(seed)
    x, dy = torch.randn(shape, generator=generator), torch.randn(shape, generator=generator)
    x.view(-1)[:8] = torch.tensor([0.0, -0.0, float("nan"), float("inf"), -1.0, 1e-45, 2.0, -2.0])
    torch.relu(x)  # torch's team has just run, as in a training step
    dx = torch.ops.gradops.relu_backward(x, dy)
    expected = torch.where(x > 0, dy, torch.zeros(()))  # SPEC 4.2: x > 0 ? dy : +0
    return bool(torch.equal(dx.view(torch.int32), expected.view(torch.int32)))
"""


def _run(body: str, **environment: str) -> dict:
    env = {**os.environ, "NUMBA_NUM_THREADS": "2", "GRADOPS_FIRST_CALLS": "compile", **environment}
    result = subprocess.run([sys.executable, "-c", _PRELUDE + textwrap.dedent(body)], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_torch_team_threads_serve_the_select_with_the_same_bits():
    """4 MiB selects (shared, below streaming) right after a torch operator: the team's thread
    joins one (``_LANE_JOINED``; on a busy machine it may come after the caller has claimed every
    chunk, so calls are repeated until it does) while gradops never starts a helper thread of its
    own; every call gives the bits of ``torch.where``."""
    report = _run("""
        same, joined = True, 0
        for seed in range(200):
            same = relu_grad_through_torch((4, 16, 128, 128), seed) and same
            joined = max(joined, int(pool._epoch[pool._LANE_JOINED]))
            if joined and seed >= 4:
                break
        print(json.dumps({"team": pool._lane_team is not None, "same": same, "joined": joined,
                          "helpers": len(pool._helpers)}))
    """)
    assert report == {"team": True, "same": True, "joined": 1, "helpers": 0}


def test_a_refused_select_releases_the_team():
    """A select whose ``out`` overlaps an input is refused by the kernel before it publishes
    anything: the team thread waiting for that task must be let go (else the call hangs), the
    call raises GradopsError from the checked path, and the next call runs. The refused task is
    the process's first lane task (a small call joins the team), so no published task number can
    stand in for the release."""
    report = _run("""
        relu_grad_through_torch((2, 8), 0)  # on the calling thread alone: joins the team, publishes nothing
        assert pool._lane_team is not None and pool._epoch[pool._LANE_TASK] == 0
        x = np.random.default_rng(0).standard_normal(2 * 4 * 16 * 128 * 128).astype(np.float32)
        try:
            gradops.relu_grad(x[: x.size // 2], x[: x.size // 2], out=x[1 : x.size // 2 + 1])
            raised = False
        except GradopsError as error:
            raised = "out" in str(error)
        print(json.dumps({"raised": raised, "next": relu_grad_through_torch((4, 16, 128, 128), 1)}))
    """)
    assert report == {"raised": True, "next": True}


def test_the_team_can_be_declined_and_is_not_used_in_a_fork():
    declined = _run("""
        same = relu_grad_through_torch((4, 16, 128, 128), 0)
        print(json.dumps({"team": pool._lane_team is not None, "same": same}))
    """, GRADOPS_OPENMP_TEAM="0")
    assert declined == {"team": False, "same": True}
    forked = _run("""
        relu_grad_through_torch((4, 16, 128, 128), 0)
        x = np.random.default_rng(1).standard_normal(4 << 20).astype(np.float32)
        pid = os.fork()
        if pid == 0:  # the child's OpenMP runtime is not its parent's team: gradops' own helpers
            ok = np.array_equal(gradops.relu_grad(x, x[::-1].copy()), np.where(x > 0, x[::-1], np.float32(0)))
            os._exit(0 if ok and pool._lane_team is None else 1)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"child": os.waitstatus_to_exitcode(status)}))
    """)
    assert forked == {"child": 0}
