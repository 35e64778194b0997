"""Memoised validation: results of pure checks on a call's small arguments.

A training step calls each operator with the same attributes and shapes again and again. Checking
them (the descriptor's ``__post_init__``, the geometry of SPEC 5.2-5.5) costs tens of microseconds
of Python, as much as a small call's kernel, and always gives the same answer: so the answer is
kept, keyed by the arguments' values *and their types*. ``1`` and ``1.0`` or ``True`` hash alike,
yet only ``1`` is a valid stride; a key that holds the types (``typed_key``) tells them apart, so a
cached answer is only ever returned for arguments the check would treat exactly alike. Arguments
that cannot be keyed (large arrays, objects that do not pickle) are checked every time. A check
that raises caches nothing, so every bad argument still raises its ``GradopsError``.
"""

from __future__ import annotations

import pickle
from typing import Any, Callable, Hashable, TypeVar

import numpy as np

from ._arrays import whole_sizes_checked
from ._backend import environment_backend

Result = TypeVar("Result")

# Entries per table: a program uses a handful of layer configurations; past this the table starts
# over rather than growing without bound (a sweep over many shapes).
_MAX_ENTRIES = 1024


class _ArrayKey:
    """Marks a small numeric ndarray in a key (sizes given as an array, as TensorFlow takes
    them): ``(_ArrayKey, dtype, shape, values)``, all a check reads of it. A class of this
    module, pickled by its name, so that no argument a caller passes pickles alike."""


# ndarrays up to this many elements are keyed by value (``_ArrayKey``); larger ones are no key.
_KEYED_ARRAY_ELEMENTS = 64


def typed_key(value: Any) -> Hashable:
    """``value`` as a hashable key that tells apart everything a check could tell apart: its
    pickle, which holds the type of every element (``1``, ``1.0``, ``True`` and ``np.int64(1)``
    all pickle differently, as do lists and tuples) and every value exactly (floats to the bit),
    and from which equal keys rebuild equal objects. ndarrays among a tuple's elements are keyed
    as ``_ArrayKey`` says (pickling an array costs 30x more), up to ``_KEYED_ARRAY_ELEMENTS``
    elements of a numeric dtype. Raises ``TypeError`` for anything else it cannot key. Pickling
    is done in C: a call's arguments key in about 0.6 us, walking them in Python took 5."""
    if type(value) is tuple and np.ndarray in map(type, value):
        value = tuple(map(_array_key, value))
    try:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - whatever cannot be pickled cannot be a key
        raise TypeError(f"no key for {type(value).__name__}") from exc


def _array_key(item: Any) -> Any:
    if type(item) is not np.ndarray:
        return item
    if item.size > _KEYED_ARRAY_ELEMENTS or item.dtype.kind not in "biuf":
        raise TypeError("only small numeric arrays are part of a key")
    return _ArrayKey, item.dtype.str, item.shape, item.tobytes()


def memoized(table: dict, arguments: tuple, check: Callable[[], Result], keyed: Hashable = None) -> Result:
    """``check()``, or its remembered result for ``arguments`` (see the module docstring) and
    ``keyed``, a part of the key that is a ``typed_key`` already (an object's own attributes, keyed
    once when it was made)."""
    try:
        key = (keyed, typed_key(arguments))
        return table[key]
    except TypeError:
        return check()
    except KeyError:
        pass
    return remember(table, key, check())


def remember(table: dict, key: Hashable, value: Result) -> Result:
    """``table[key] = value``, in a table of at most ``_MAX_ENTRIES`` (full, it starts over)."""
    if len(table) >= _MAX_ENTRIES:
        table.clear()
    table[key] = value
    return value


def find_run(table: dict, owner: Hashable, arguments: tuple, arrays: tuple, out: Any,
             backend: str | None) -> tuple[Hashable | None, Any]:
    """``(key, run)``: the key of a call's prepared run in ``table`` (depthwise's and resample's
    ``_CALLS``) and the run remembered for it, or None. A training step calls each layer's ops
    with the same arguments and layouts again and again, and checking them, planning and
    describing the arrays to a kernel cost as much as a small call's kernel; every one of those
    steps depends only on what the key holds: the operator (``owner``), its other ``arguments``
    with their types (``typed_key``), the dtype, shape and strides of each of ``arrays`` and of
    ``out`` (and whether ``out`` is writeable; None for a fresh output), the backend asked for and
    ``GRADOPS_BACKEND``, and whether whole sizes are checked (``blockwise_validation``). A call
    that cannot have a key (operands that are not plain ndarrays, arguments ``typed_key`` cannot
    key) gets ``(None, None)``: it is prepared for itself alone."""
    try:
        key = (owner, typed_key(arguments), *map(_array_layout, arrays),
               None if out is None else (*_array_layout(out), out.flags.writeable), backend, environment_backend(),
               whole_sizes_checked())
        return key, table.get(key)
    except TypeError:
        return None, None


def _array_layout(array: Any) -> tuple:
    if type(array) is not np.ndarray:
        raise TypeError("only plain ndarrays are part of a key")
    return array.dtype, array.shape, array.strides
