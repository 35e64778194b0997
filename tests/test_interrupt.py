"""Ctrl-C during a long fast-backend call (issue 27): the call stops after the chunks in flight
with KeyboardInterrupt, and the thread pool serves the next call with the same bits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("numba")

# A depthwise call moving 128 MiB (the interruptible threshold) with a 15x15 filter: 0.17 s of
# work on a 2-core Intel Xeon (Sapphire Rapids class), far longer than one of its chunks. The
# signal is timed from a call that compiles nothing.
SCRIPT = r"""
import os, signal, sys, threading, time
import numpy as np, gradops
# Python leaves SIGINT ignored when it starts so (a shell's background job, say): Ctrl-C's default
signal.signal(signal.SIGINT, signal.default_int_handler)
x = np.random.default_rng(0).standard_normal((1, 512, 512, 64)).astype(np.float32)
f = np.ones((15, 15, 64, 1), np.float32)
call = lambda a: gradops.depthwise_conv2d_native(a, f, [1, 1, 1, 1], "SAME", backend="fast")
small = call(x[:, :64, :64])  # compiles or loads its kernel
full = call(x)  # and this one's: a y this large is streamed, by a kernel of its own
start = time.perf_counter(); call(x); whole = time.perf_counter() - start  # the work alone
if sys.argv[1] == "in-process":
    for attempt in range(5):  # a call on a busy machine may, rarely, finish before the signal
        timer = threading.Timer(0.1 * whole, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        start, completed = time.perf_counter(), False
        try:
            call(x)
            completed = True
            timer.join()  # its interrupt lands in the join or right after: wait it out
            time.sleep(0.5)
        except KeyboardInterrupt:
            if not completed:
                print(f"interrupted {time.perf_counter() - start:.3f} {whole:.3f}")
                break
    else:
        print("completed")
    print("same bits after:", np.array_equal(call(x[:, :64, :64]), small), np.array_equal(call(x), full))
else:
    print(f"running {whole:.3f}", flush=True)
    call(x)
    print("completed", flush=True)
"""


def _run(mode: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, **kwargs)


def test_interrupted_call_raises_and_the_pool_serves_the_next_call():
    process = _run("in-process")
    out, err = process.communicate(timeout=900)
    assert process.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("interrupted "), out  # KeyboardInterrupt, before the call completed
    assert lines[1] == "same bits after: True True", out


def test_sigint_from_outside_ends_the_process_with_keyboard_interrupt():
    process = _run("signal")
    line = process.stdout.readline()
    assert line.startswith("running "), line + process.stderr.read()
    whole = float(line.split()[1])
    time.sleep(0.2 * whole)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=900)
    assert "completed" not in out
    assert "KeyboardInterrupt" in err.strip().splitlines()[-1], err
