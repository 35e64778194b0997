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

from gradops._fast.pool import ALONE, CALLER  # noqa: E402

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
    env = {**os.environ, "NUMBA_NUM_THREADS": "2", "GRADOPS_FIRST_CALLS": "compile",
           "PYTHONPATH": os.pathsep.join(sys.path), **environment}  # sys.path has tests/ (pool_probes)
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


def test_torch_team_threads_take_chunks_of_a_shared_kernel():
    """``pool.share``'s kernels run on the team too, through their entries (``team_share``): of
    a task's two chunks, the thread that claims chunk 0 waits until another thread claims chunk 1,
    and that thread is the team's (role ALONE), not a helper of gradops' (HELPER) nor the caller
    after giving up waiting (CALLER). The kernel's first call compiles it and runs as without a
    team; the entry is made on the next."""
    report = _run("""
        from pool_probes import who_claims

        relu_grad_through_torch((2, 8), 0)  # a gradops.torch call: the team is joined
        claims = []
        for attempt in range(5):
            claimed_by = np.full(2, -1, np.int64)
            torch.relu(torch.ones(1 << 16))
            pool.share(who_claims, 2, 1 << 30, claimed_by, 1 << 34)
            claims.append(sorted(claimed_by.tolist()))
        print(json.dumps({"later": claims[1:]}))
    """)
    assert report == {"later": [sorted([CALLER, ALONE])] * 4}


def test_shared_depthwise_and_resample_calls_after_torch_keep_their_bits():
    """B7's layer (batch 1, 112x112x32, 3x3) and a 2x linear resample gradient, each right after a
    torch operator, through the team's entries: the bits of the same calls made before the team
    was joined (which the kernels' own tests check against brute-force sums)."""
    report = _run("""
        from gradops._fast import team_share
        rng = np.random.default_rng(5)
        dy, f = rng.standard_normal((1, 112, 112, 32), np.float32), rng.standard_normal((3, 3, 32, 1), np.float32)
        g = rng.standard_normal((4, 64, 64, 16), np.float32)
        def calls():
            torch.relu(torch.ones(1 << 16))
            dx = gradops.depthwise_conv2d_native_backprop_input(dy.shape, f, dy, (1, 1, 1, 1), "SAME")
            torch.relu(torch.ones(1 << 16))
            return dx, gradops.resample_grad(g, (4, 32, 32, 16), mode="linear")
        before = calls()
        relu_grad_through_torch((2, 8), 0)  # joins the team
        same = True
        for _ in range(4):
            same = all(np.array_equal(a.view(np.uint32), b.view(np.uint32)) for a, b in zip(calls(), before)) and same
        print(json.dumps({"same": same, "entries": sum(1 for address in team_share._entries.values() if address)}))
    """)
    assert report == {"same": True, "entries": 2}


def test_a_first_call_asks_the_compile_process_for_the_entry(tmp_path):
    """With an empty kernel cache and the default first calls (``numpy``), nothing compiles in
    the calling process: the calls are answered meanwhile (NumPy tier, then the kernel with
    gradops' helpers) with the same bits, and the compile process makes the entry, which later
    calls load from the disk cache and use."""
    report = _run("""
        import time
        from gradops._fast import first_calls, team_share
        rng = np.random.default_rng(6)
        dy, f = rng.standard_normal((1, 56, 56, 32), np.float32), rng.standard_normal((3, 3, 32, 1), np.float32)
        relu_grad_through_torch((2, 8), 0)  # joins the team
        first = gradops.depthwise_conv2d_native_backprop_input(dy.shape, f, dy, (1, 1, 1, 1), "SAME")
        same, deadline = True, time.monotonic() + 240
        while not any(team_share._entries.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
            torch.relu(torch.ones(1 << 16))
            dx = gradops.depthwise_conv2d_native_backprop_input(dy.shape, f, dy, (1, 1, 1, 1), "SAME")
            same = np.array_equal(dx.view(np.uint32), first.view(np.uint32)) and same
        asked = {recipe[1]: status for (recipe, _), status in first_calls.compile_status().items()}
        print(json.dumps({"entry": any(team_share._entries.values()), "same": same,
                          "asked": asked.get("team_entry")}))
    """, GRADOPS_FIRST_CALLS="numpy", NUMBA_CACHE_DIR=str(tmp_path))
    assert report == {"entry": True, "same": True, "asked": "done"}
