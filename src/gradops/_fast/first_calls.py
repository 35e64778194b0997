"""First calls: answer in NumPy, in the kernels' own order, while another process compiles them
(issue 23, cold start).

A kernel that is neither in memory nor in the disk cache takes numba seconds to compile, tens of
seconds on a slow machine: a first call would look like a hang. So a call that would compile
(``numba:compile``, which numba raises only on a miss of both) is refused before anything runs
(:class:`KernelNotReady`), the kernel is handed to a compile process, and the call is answered by
the family's NumPy tier instead: the same sums in the same order, so the same bits
(``depthwise/ordered.py``, ``resample/ordered.py``, tested bit for bit against the kernels). A later call
finds the kernel in the disk cache once the compile process has put it there, and runs it.

``GRADOPS_FIRST_CALLS``: ``numpy`` (the default) as above; ``compile`` compiles in the calling
process, before the call runs, as numba does (what the tests of the kernels, the benchmark and
``gradops warmup`` need). Where the compile process cannot start or fails on a kernel, that
kernel compiles in the calling process.

The compile process (``compile_service``) is one per process that uses gradops, started on the
first kernel it needs, at a lower priority; it compiles one kernel at a time and exits when its
parent closes the pipe, after the kernels already asked for (so a short program still leaves
them in the cache). A kernel travels as its recipe, where its dispatcher comes from (a module's
function, or a kernel factory and its arguments: :func:`kernel_factory`), and numba's argument
types.

Helper threads (``pool``) never compile: a helper that would raises :class:`KernelNotReady` before
it claims any work, and the calling thread compiles or refuses the kernel itself.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import logging
import os
import pickle
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from .._backend import environment_reader

log = logging.getLogger("gradops")

MODE_VARIABLE = "GRADOPS_FIRST_CALLS"
MODES = ("numpy", "compile")


class KernelNotReady(Exception):
    """A call would compile ``recipe`` for ``signature`` (numba argument types) first."""

    def __init__(self, recipe: tuple | None, signature: tuple) -> None:
        super().__init__(recipe, signature)
        self.recipe, self.signature = recipe, signature


# Per thread: ``gated``, a call that may be answered by a NumPy tier is running (:func:`gated`);
# ``helper``, a pool helper thread.
thread_state = threading.local()


_read_mode = environment_reader(MODE_VARIABLE, "numpy")


def mode() -> str:
    """``GRADOPS_FIRST_CALLS`` as the environment has it now (an unknown value counts as the
    default: this is a performance setting, never a reason to fail a call)."""
    value = _read_mode()
    return value if value in MODES else "numpy"


def kernel_factory(factory: Callable[..., Any]) -> Callable[..., Any]:
    """A cached kernel factory whose kernels carry their recipe, so that a compile process can
    make the same kernel: ``(module, factory name, arguments)``."""
    @functools.lru_cache(maxsize=None)
    @functools.wraps(factory)
    def make(*arguments: Any) -> Any:
        kernel = factory(*arguments)
        kernel.gradops_recipe = (factory.__module__, factory.__qualname__, arguments)
        return kernel
    return make


def recipe_of(dispatcher: Any) -> tuple | None:
    """Where a compile process finds ``dispatcher``: its factory's recipe, or ``(module, name,
    None)`` for a module's own function; None for anything else (it compiles where it is called)."""
    recipe = getattr(dispatcher, "gradops_recipe", None)
    if recipe is not None:
        return recipe
    function = dispatcher.py_func
    module = sys.modules.get(function.__module__)
    if "<" not in function.__qualname__ and getattr(module, function.__qualname__, None) is dispatcher:
        return function.__module__, function.__qualname__, None
    return None


def make_kernel(recipe: tuple) -> Any:
    """The dispatcher a recipe names (in the compile process)."""
    module_name, name, arguments = recipe
    made = getattr(importlib.import_module(module_name), name)
    return made if arguments is None else made(*arguments)


def before_compile(dispatcher: Any, signature: tuple) -> None:
    """Called as numba starts compiling a kernel that a call dispatched (the outermost compile of
    a thread): raises :class:`KernelNotReady` on a helper thread, and in a gated call unless the
    kernel cannot go to a compile process or failed there; else returns, and it compiles here."""
    if getattr(thread_state, "helper", False):
        raise KernelNotReady(None, signature)
    if not getattr(thread_state, "gated", False):
        return
    recipe = recipe_of(dispatcher)
    if recipe is None or _compiles.refused(recipe, signature):
        return
    raise KernelNotReady(recipe, signature)


def request(recipe: tuple, signature: tuple | None) -> None:
    """Ask the compile process for a kernel, once: ``make_kernel(recipe).compile(signature)``, or
    for a signature None ``make_kernel(recipe)`` alone (a factory whose making compiles)."""
    _compiles.request(recipe, signature)


def status(recipe: tuple, signature: tuple | None) -> str | None:
    """``pending``, ``done`` or ``failed`` for a kernel asked of the compile process, else None."""
    return _compiles.status_of(recipe, signature)


def run_gated(compute: Callable[..., None], arguments: tuple, numpy_tier: Callable[..., None],
              tier_fits: Callable[..., bool], tier_arguments: tuple) -> None:
    """``compute(*arguments)``, or, when it needs a kernel compiled first (and the mode is
    ``numpy``), ``numpy_tier(*tier_arguments)`` while the kernel compiles in the compile process;
    but where the tier would need too much memory (``tier_fits(*tier_arguments)`` False),
    ``compute`` compiles here. ``compute`` may have written part of its output before it met the
    missing kernel: the tier, or the second ``compute``, writes all of it. Nothing is built per
    call (a small resample call costs tens of microseconds: the gate adds about one)."""
    if _read_mode() == "compile":  # any other value is the default, numpy
        compute(*arguments)
        return
    state = thread_state
    outer = getattr(state, "gated", False)
    state.gated = True
    try:
        compute(*arguments)
        return
    except KernelNotReady as refused:
        missing = refused
    finally:
        state.gated = outer
    if tier_fits(*tier_arguments):
        _compiles.request(missing.recipe, missing.signature)
        numpy_tier(*tier_arguments)
    else:
        compute(*arguments)


def gated(compute: Callable[..., None], numpy_tier: Callable[..., None],
          tier_fits: Callable[..., bool]) -> Callable[..., None]:
    """A run of ``*arrays`` through :func:`run_gated`, all three functions taking the same arrays."""
    def run(*arrays: Any) -> None:
        run_gated(compute, arrays, numpy_tier, tier_fits, arrays)
    return run


class _Compiles:
    """The compile process and what it was asked (by recipe and signature): pending, done or
    failed. One per process; threads share it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._status: dict[tuple, str] = {}
        self._numbers = itertools.count()
        self._asked: dict[int, tuple] = {}

    def refused(self, recipe: tuple, signature: tuple) -> bool:
        """Whether the kernel must compile in the calling process: it failed in the compile
        process, or was compiled there and still missed the cache (another numba target, say)."""
        return self.status_of(recipe, signature) in ("failed", "done")

    def status_of(self, recipe: tuple, signature: tuple | None) -> str | None:
        return self._status.get((recipe, signature))

    def status(self) -> dict[tuple, str]:
        """Every kernel asked for, and whether it is ``pending``, ``done`` or ``failed``."""
        return dict(self._status)

    def request(self, recipe: tuple, signature: tuple) -> None:
        """Ask the compile process for a kernel (once), starting it if needed."""
        key = (recipe, signature)
        with self._lock:
            if key in self._status:
                return
            number = next(self._numbers)
            try:
                process = self._running()
                frame = pickle.dumps((number, recipe, signature))
                process.stdin.write(struct.pack("<Q", len(frame)) + frame)
                process.stdin.flush()
            except (OSError, pickle.PicklingError, ValueError) as error:
                log.warning("gradops could not hand a kernel to its compile process (%s); it compiles "
                            "in this process on the next call", error)
                self._status[key] = "failed"
                return
            self._status[key] = "pending"
            self._asked[number] = key
        log.info("compiling %s in the background; until it is ready, calls like this one run in NumPy "
                 "with the same bits", _kernel_name(recipe))

    def forget_process(self) -> None:
        """In a fork's child: the compile process is the parent's, and so are the answers to come;
        what it was asked and has not answered is asked again. The child's copies of the pipes
        are closed (without flushing), so that the compile process still ends with its parent."""
        self._lock = threading.Lock()  # another thread of the parent may have held it
        if self._process is not None:
            for stream in (self._process.stdin, self._process.stdout):
                try:
                    stream.detach().close()
                except (OSError, ValueError):
                    pass
        self._process = None
        self._status = {key: status for key, status in self._status.items() if status != "pending"}
        self._asked = {}

    def _running(self) -> subprocess.Popen:
        """The compile process of this process, started on first use."""
        if self._process is None:
            package_root = str(Path(__file__).resolve().parents[2])
            environment = dict(os.environ)
            environment["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, environment.get("PYTHONPATH")]))
            self._process = subprocess.Popen(
                [sys.executable, "-m", "gradops._fast.compile_service"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment)
            threading.Thread(target=self._read_results, args=(self._process,), daemon=True,
                             name="gradops-compile-results").start()
        return self._process

    def _read_results(self, process: subprocess.Popen) -> None:
        """Record each answer of the compile process (``<number> ok|failed``); when it ends,
        every kernel still pending failed."""
        for line in process.stdout:
            number, _, outcome = line.decode(errors="replace").strip().partition(" ")
            with self._lock:
                key = self._asked.pop(int(number), None)
                if key is not None:
                    self._status[key] = "done" if outcome == "ok" else "failed"
            if key is not None and outcome != "ok":
                log.warning("gradops' compile process failed on %s (%s); it compiles in this process on "
                            "the next call", _kernel_name(key[0]), outcome)
        with self._lock:
            for key in self._asked.values():
                self._status[key] = "failed"
            self._asked.clear()
            if self._process is process:
                self._process = None


def _kernel_name(recipe: tuple) -> str:
    """``depthwise kernel backprop_input_kernel``, as the log of a compile in the process says."""
    module_name, name, _ = recipe
    family = module_name.split("._fast.", 1)[-1].split(".", 1)[0]
    return f"{family} kernel {name.strip('_').removesuffix('_for')}"


_compiles = _Compiles()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _compiles.forget_process())


def compile_status() -> dict[tuple, str]:
    """Every kernel handed to the compile process, by (recipe, signature): ``pending``, ``done``
    or ``failed``."""
    return _compiles.status()
