"""Fixtures shared by the test modules: the two backends, and a check run on each thread count."""

from __future__ import annotations

import os

import pytest

# The tests of the kernels must run the kernels: a first call compiles in the test's process (and
# in the subprocesses tests start) instead of answering in NumPy meanwhile (gradops._fast.first_calls,
# which tests/test_first_calls.py tests in its default mode).
os.environ["GRADOPS_FIRST_CALLS"] = "compile"

BACKENDS = ("reference", "fast")


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request) -> str:
    """Each backend in turn: a test taking ``backend`` runs once on each. Module-scoped, since it is
    a constant: hypothesis tests may take it (they refuse function-scoped fixtures)."""
    return request.param


@pytest.fixture
def on_each_thread_count():
    """``on_each_thread_count(run)``: ``run()`` on 1 thread, then on every thread numba has; returns
    the results. The calling thread's count is restored after the test."""
    numba = pytest.importorskip("numba")
    previous = numba.get_num_threads()

    def run_each(run):
        results = []
        for count in (1, numba.config.NUMBA_NUM_THREADS):
            numba.set_num_threads(count)
            results.append(run())
        return results

    yield run_each
    numba.set_num_threads(previous)


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test: CI runs two test processes on two cores, and torch's
    OpenMP teams of 2 threads would wait on each other's preempted threads (a channels_last batch
    norm measured 68x slower)."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def no_prepared_calls():
    """Each test starts with no depthwise or resample calls prepared by an earlier one (their
    ``_CALLS``): a test that patches a decision made while preparing must see it made."""
    from gradops import depthwise
    from gradops.resample import _CALLS as resample_calls  # gradops.resample is also the function
    depthwise._CALLS.clear()
    resample_calls.clear()
