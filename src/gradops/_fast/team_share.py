"""``pool.share``'s kernels on a foreign thread team (``openmp_team``: torch's OpenMP threads).

A team thread runs native code only (no GIL, no Python thread state), so it cannot take a
kernel's arguments as Python objects. The calling thread packs them into int64 words
(``pack_words``, jitted: an array is its data address, shape and strides; a number or flag one
word; a tuple its members in order), and a C entry per kernel and argument types
(``team_entry``, a numba ``cfunc`` ``void(void *words)``) rebuilds them and runs the kernel with
role ``ALONE`` on the caller's counters: it claims chunks as a helper does, and neither lingers
nor announces anything. The calling thread runs its own share as before; the team's end waits
for the team's chunks. Which thread computes a chunk never changes its result (``pool``), so the
bits are the same.

An entry links its kernel, so compiling one takes about two seconds: like a kernel, it is made
in the compile process (``first_calls``) while calls go on with ``pool``'s own helpers, and is
kept in the disk cache. Its cache key is text: the kernel's recipe and the values' types
(``numba_internals.cached_cfunc``); the dispatcher object and numba's type objects pickle
differently in every process.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable

import numba
import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

from . import first_calls
from .numba_internals import cached_cfunc
from .pool import ALONE

WORDS = 256  # a kernel's packed arguments, the type fingerprint first
_WORD = ir.IntType(64)


def _word_count(value_type: types.Type) -> int:
    """Words that ``_store_words`` writes for a value of ``value_type``."""
    if isinstance(value_type, types.Array):
        return 1 + 2 * value_type.ndim
    if isinstance(value_type, (types.Boolean, types.Integer, types.Float)):
        return 1
    if isinstance(value_type, types.BaseTuple):
        return sum(_word_count(member) for member in value_type)
    raise TypingError(f"team_share: cannot pass a {value_type} as words")


def fingerprint(values_type: types.Type) -> int:
    """A 63-bit digest of the packed values' types: a call's entry is found by it."""
    return int.from_bytes(hashlib.sha256(str(values_type).encode()).digest()[:8], "little") >> 1


def _leaves(context, builder, value_type, value):
    """The words of one value, in ``_word_count``'s order."""
    if isinstance(value_type, types.Array):
        array = context.make_array(value_type)(context, builder, value)
        yield builder.ptrtoint(array.data, _WORD)
        yield from cgutils.unpack_tuple(builder, array.shape, value_type.ndim)
        yield from cgutils.unpack_tuple(builder, array.strides, value_type.ndim)
    elif isinstance(value_type, types.Boolean):
        yield builder.zext(value, _WORD)
    elif isinstance(value_type, types.Integer):
        yield context.cast(builder, value, value_type, types.int64)
    elif isinstance(value_type, types.Float):
        yield builder.bitcast(context.cast(builder, value, value_type, types.float64), _WORD)
    else:
        for index, member in enumerate(value_type):
            yield from _leaves(context, builder, member, builder.extract_value(value, index))


@intrinsic
def _store_words(typingctx, words, values):
    """``words[1:]`` = the words of ``values``; ``words[0]`` = their types' fingerprint."""
    if not (isinstance(words, types.Array) and words.dtype == types.int64 and isinstance(values, types.BaseTuple)):
        return None
    if 1 + _word_count(values) > WORDS:
        raise TypingError(f"team_share: {values} needs more than {WORDS} words")
    stamp = fingerprint(values)

    def codegen(context, builder, signature, args):
        base = context.make_array(signature.args[0])(context, builder, args[0]).data
        builder.store(ir.Constant(_WORD, stamp), base)
        for index, word in enumerate(_leaves(context, builder, signature.args[1], args[1]), start=1):
            builder.store(word, builder.gep(base, [ir.Constant(_WORD, index)]))
        return context.get_dummy_value()
    return types.void(words, values), codegen


@njit(cache=True, nogil=True)
def pack_words(words, values):
    """Pack a kernel's ``values`` (counters, lane words, chunks, arguments) into ``words``;
    returns the words' address."""
    _store_words(words, values)
    return words.ctypes.data


_unpackable: set = set()  # kernels with an argument the words cannot carry: gradops' helpers serve them


def packed(kernel: Any, words: np.ndarray, values: tuple) -> int:
    """``pack_words(words, values)`` for ``kernel``'s call: the words' address, or 0 when an
    argument cannot be packed (then never again for that kernel; nothing was started)."""
    if kernel in _unpackable:
        return 0
    try:
        return pack_words(words, values)
    except TypingError:
        _unpackable.add(kernel)
        return 0


def _rebuilt(context, builder, value_type, next_word):
    """One value of ``value_type`` from the words (``next_word()`` reads the next one)."""
    if isinstance(value_type, types.Array):
        data = builder.inttoptr(next_word(), context.get_data_type(value_type.dtype).as_pointer())
        shape = [next_word() for _ in range(value_type.ndim)]
        strides = [next_word() for _ in range(value_type.ndim)]
        array = context.make_array(value_type)(context, builder)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(value_type.dtype)))
        populate_array(array, data=data, shape=shape, strides=strides, itemsize=itemsize, meminfo=None)
        return array._getvalue()
    if isinstance(value_type, types.Boolean):
        return builder.icmp_unsigned("!=", next_word(), ir.Constant(_WORD, 0))
    if isinstance(value_type, types.Integer):
        return context.cast(builder, next_word(), types.int64, value_type)
    if isinstance(value_type, types.Float):
        return context.cast(builder, builder.bitcast(next_word(), ir.DoubleType()), types.float64, value_type)
    return context.make_tuple(builder, value_type,
                              [_rebuilt(context, builder, member, next_word) for member in value_type])


@intrinsic
def _load_words(typingctx, words, values_ref):
    """The values that ``_store_words`` packed, of the type ``values_ref`` refers to."""
    if not isinstance(values_ref, types.TypeRef):
        return None
    values_type = values_ref.instance_type

    def codegen(context, builder, signature, args):
        base = context.make_array(signature.args[0])(context, builder, args[0]).data
        position = iter(range(1, WORDS))

        def next_word():
            return builder.load(builder.gep(base, [ir.Constant(_WORD, next(position))]))
        return _rebuilt(context, builder, values_type, next_word)
    return values_type(words, values_ref), codegen


def _entry_function(kernel: Any, values_type: types.Type) -> Callable[[Any], None]:
    """The Python function of ``kernel``'s entry for packed values of ``values_type``."""

    def entry(address):
        values = _load_words(carray(address, (WORDS,), np.int64), values_type)
        # role int64, as from Python: a literal would compile a second copy of the kernel
        kernel(values[0], values[1], np.int64(ALONE), values[2], *values[3:])
    return entry


def team_entry(kernel_recipe: tuple, values_type: types.Type, compile_if_missing: bool = True) -> int:
    """The address of the entry of the kernel ``kernel_recipe`` names for packed values of
    ``values_type``; 0 when it is not in the disk cache and ``compile_if_missing`` is False. (The
    compile process calls it, by its recipe, to compile one.)"""
    made = cached_cfunc(_entry_function(first_calls.make_kernel(kernel_recipe), values_type), types.void(types.voidptr),
                        key=f"{kernel_recipe!r} {values_type}", compile_if_missing=compile_if_missing)
    return 0 if made is None else made.address


_entries: dict[tuple[Any, int], int] = {}  # (kernel, fingerprint): the entry's address, 0 for none
_awaited: dict[tuple[Any, int], tuple] = {}  # (kernel, fingerprint): the entry's recipe, until it is made


def entry_for(kernel: Any, stamp: int, values: tuple) -> int:
    """The entry for ``kernel`` and ``values``, whose packed words carry ``stamp``; 0 while it is
    not ready (the call then runs with ``pool``'s own helpers)."""
    address = _entries.get((kernel, stamp))
    return address if address is not None else _find_entry(kernel, stamp, values)


def _find_entry(kernel: Any, stamp: int, values: tuple) -> int:
    """Load the entry, or compile it, or ask the compile process for it."""
    key = (kernel, stamp)
    recipe = _awaited.get(key)
    if recipe is None:
        kernel_recipe = first_calls.recipe_of(kernel)
        values_type = numba.typeof(values)
        if kernel_recipe is None or fingerprint(values_type) != stamp:
            _entries[key] = 0  # no recipe, or typed otherwise than the packer did: never
            return 0
        signature = (values_type[0], values_type[1], types.int64, values_type[2], *values_type[3:])
        if signature not in kernel.overloads:
            return 0  # the kernel itself first: its call compiles or refuses it as without a team
        recipe = _awaited[key] = (__name__, "team_entry", (kernel_recipe, values_type))
    status = first_calls.status(recipe, None)
    if status == "pending":
        return 0
    # Never compiled in a call but where every kernel is (``compile``), or where the compile
    # process failed on it or made it for another target: the helpers are always there instead.
    here = first_calls.mode() == "compile" or status in ("done", "failed")
    try:
        address = team_entry(*recipe[2], compile_if_missing=here)
    except first_calls.KernelNotReady:
        return 0  # something it links must compile first: asked for by then, tried again later
    except Exception as error:  # noqa: BLE001 - an entry that cannot be made leaves the kernel to the helpers
        first_calls.log.warning("gradops could not make a team entry for %s (%s: %s); its calls use gradops' "
                                "own threads", recipe[2][0][1], type(error).__name__, error)
        _entries[key] = 0
        _awaited.pop(key, None)
        return 0
    if address:
        _entries[key] = address
        _awaited.pop(key, None)
    else:
        first_calls.request(recipe, None)
    return address
