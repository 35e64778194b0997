"""Every numba internal gradops relies on, in one place (issue 23): numba's public API has no way
to say these things, so a numba release that changes one of them is adapted to here alone.
``pyproject.toml`` pins numba to the range CI tests.

* ``NoAliasCompiler``: a compiler pipeline with LLVM ``noalias`` on the array arguments (the fast
  resample's kernels and per-row functions).
* ``add_cache_locators``: numba's disk-cache locators, which ``_fast/__init__`` extends to stamp
  every kernel with a digest of the package's sources.
* ``unique_symbols_across_processes``: random ids in the symbol names of compiled functions
  (below: why the disk cache needs them).
* ``native_thread_count``: the threading layer's C getter behind ``numba.get_num_threads()``
  (``pool.thread_count``).
* ``threading_layer_started``: whether numba's threading layer is up (``gradops.torch``).
* ``codegen_cpu``: the CPU name and features numba generates code for (``target.codegen_target``).
* ``cached_cfunc``: a ``numba.cfunc`` taken from the disk cache under a key given as text, or
  compiled only when allowed (``team_share``'s entries, which the compile process makes).
* ``NO_REFCOUNT``: the jit option that compiles a function without reference counting of its
  array arguments (``_fast/__init__`` says why), and ``row_njit``, ``njit`` with it.

numba's documented extension API (``numba.extending``, ``numba.core.cgutils`` in intrinsics, the
``numba.core.event`` listeners) is used where it is needed, not here.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
from typing import Callable

import numba
from numba import njit
from numba.core import bytecode, caching, sigutils
from numba.core.ccallback import CFunc
from numba.core.compiler_lock import global_compiler_lock
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.np.ufunc import parallel as _parallel


NO_REFCOUNT = {"_nrt": False}
row_njit = njit(**NO_REFCOUNT)


class NoAliasCompiler(CompilerBase):
    """numba's nopython pipeline, with LLVM ``noalias`` on the array arguments: ``dst`` never
    overlaps ``src`` (callers reject such an ``out``) and the scratch rows are private, so LLVM
    can drop the runtime alias checks of the short row loops. Passed as ``pipeline_class``."""

    def define_pipelines(self):
        self.state.flags.noalias = True
        return [DefaultPassBuilder.define_nopython_pipeline(self.state)]


def add_cache_locators(mixin: type) -> None:
    """Put ``mixin`` in front of each of numba's file-backed cache locators (the same cache
    folders, in numba's order), ahead of numba's own. Must run before any ``cache=True`` function
    is defined: numba picks a function's locator then."""
    caching.CacheImpl._locator_classes[:0] = [
        type(f"Gradops{base.__name__}", (mixin, base), {})
        for base in (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator, caching.UserWideCacheLocator)]


def unique_symbols_across_processes() -> None:
    """Make the symbol name of every function numba compiles from now on unique across processes.

    numba names a compiled function by module, qualified name, argument types and an id from a
    counter that starts at 1 in every process. Functions made by a factory (``rows._taps_rows_for``,
    the kernel factories, ``@overload`` implementations per literal set) share module and name, so
    two processes that compile different ones in the same order give them the same symbol. When a
    later process loads both from the disk cache, the JIT links every call of that symbol to the
    first body loaded: the other kernel then runs the wrong code. (Found at the AVX2 tier: a 5x5
    backprop input, then a 5x5 forward, both loaded from a cache filled by other processes, made
    the forward run the adjoint's filter rows. numba issue #10486 describes the same collision.)
    Random ids make such a clash as unlikely as a 63-bit collision. The cache index does not
    include the id, so cached kernels are found as before."""
    bytecode.FunctionIdentity._unique_ids = iter(functools.partial(secrets.randbits, 63), -1)  # endless: never -1


def native_thread_count() -> Callable[[], int] | None:
    """The threading layer's own getter of this thread's ``numba.get_num_threads()``, without the
    public function's locks (None where numba has none). The layer must be up."""
    getter = getattr(_parallel, "_get_num_threads", None)
    return getter if callable(getter) else None


def threading_layer_started() -> bool:
    """Whether numba has started its threading layer (after which it cannot be chosen)."""
    return bool(_parallel._is_initialized)


def codegen_cpu() -> tuple[str | None, str | None]:
    """``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` as numba read them (None: the host's)."""
    return numba.config.CPU_NAME, numba.config.CPU_FEATURES



class _KeyedFunctionCache(caching.FunctionCache):
    """numba's cache of one function, with the closure's part of its index key given as text:
    numba hashes the pickle of the closure's values, and a numba type pickles with a number
    that counts the types made before it in the process (``Type._code``), so a closure holding
    types would be found only by a process that made the same types in the same order."""

    def __init__(self, py_func: Callable, key: str) -> None:
        super().__init__(py_func)
        self._closure_key = key

    def _index_key(self, sig, codegen):
        digest = [hashlib.sha256(data).hexdigest() for data in (self._py_func.__code__.co_code,
                                                                 self._closure_key.encode())]
        return sig, codegen.magic_tuple(), tuple(digest)


def cached_cfunc(function: Callable, signature, *, key: str, compile_if_missing: bool) -> CFunc | None:
    """``numba.cfunc(signature, cache=True, nogil=True)(function)``, cached under ``key`` (which must
    name everything its closure holds), but None instead of a compile when the disk cache lacks
    it and ``compile_if_missing`` is False (numba's decorator compiles on every miss, and raises
    no ``numba:compile`` event for a cfunc that ``first_calls`` could refuse)."""
    arguments, return_type = sigutils.normalize_signature(signature)
    made = CFunc(function, (arguments, return_type), locals={}, options={"nogil": True})
    made._cache = _KeyedFunctionCache(function, key)
    with global_compiler_lock:  # as numba's CFunc.compile, which this is without its compile on a miss
        compiled = made._cache.load_overload(made._sig, made._targetdescr.target_context)
        if compiled is None:
            if not compile_if_missing:
                return None
            compiled = made._compile_uncached()
            made._cache.save_overload(made._sig, compiled)
    made._library = compiled.library
    made._wrapper_name = compiled.fndesc.llvm_cfunc_wrapper_name
    made._wrapper_address = made._library.get_pointer_to_function(made._wrapper_name)
    return made
