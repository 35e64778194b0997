"""Memoised validation: results of pure checks on a call's small arguments.

A training step calls each operator with the same attributes and shapes again and again. Checking
them (the descriptor's ``__post_init__``, the geometry of SPEC 5.2-5.5) costs tens of microseconds
of Python, as much as a small call's kernel, and always gives the same answer: so the answer is
kept, keyed by the arguments' values *and their types*. ``1`` and ``1.0`` or ``True`` hash alike,
yet only ``1`` is a valid stride; a key made of (type, value) pairs tells them apart, so a cached
answer is only ever returned for arguments the check would treat exactly alike. Arguments that
cannot be hashed (NumPy arrays of sizes, say) are checked every time. A check that raises caches
nothing, so every bad argument still raises its ``GradopsError``.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, TypeVar

import numpy as np

from ._arrays import whole_sizes_checked
from ._backend import environment_backend

Result = TypeVar("Result")

# Entries per table: a program uses a handful of layer configurations; past this the table starts
# over rather than growing without bound (a sweep over many shapes).
_MAX_ENTRIES = 1024


# Element types put in a key as (type, value) in line: a key is built on every call, and these
# are almost all its elements (strides, paddings, sizes, format strings).
_PLAIN = frozenset({int, float, bool, str, type(None)})


# Marks the key of a sequence of plain elements only: (its type, _FLAT, their types, their values),
# built by C-level map/tuple calls. The other keys of sequences never hold it.
_FLAT = object()


def typed_key(value: Any) -> Hashable:
    """``value`` as a hashable key that keeps the type of every element (lists and tuples are
    walked); raises ``TypeError`` for anything unhashable. A sequence of plain elements (a shape,
    strides) keys as its type, ``_FLAT``, the elements' types and their values; any other
    sequence as its type, then per element either the element's type and value (plain types) or
    the element's own key, a tuple: never ``_FLAT`` or a type, so no two different sequences share
    a key."""
    if isinstance(value, (list, tuple)):
        kinds = tuple(map(type, value))
        if _PLAIN.issuperset(kinds):
            return (type(value), _FLAT, kinds, tuple(value))
        parts: list[Any] = [type(value)]
        for item in value:
            kind = type(item)
            if kind in _PLAIN:
                parts += (kind, item)
            else:
                parts.append(typed_key(item))
        return tuple(parts)
    hash(value)
    return (type(value), value)


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
    that cannot have a key (anything but plain ndarrays, unhashable arguments such as sizes given
    as an array) gets ``(None, None)``: it is prepared for itself alone."""
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
