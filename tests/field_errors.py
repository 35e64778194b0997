"""``raises``: ``pytest.raises`` for a ``GradopsError`` that must name a given field (the rule that
every bad input raises an error whose message starts with the argument or field name)."""

from __future__ import annotations

import pytest


def raises(error: type, field: str):
    """pytest.raises that also checks the error names ``field`` first in its message."""

    class _Check:
        def __enter__(self):
            self._ctx = pytest.raises(error)
            self.info = self._ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self._ctx.__exit__(*exc)
            assert self.info.value.field == field, str(self.info.value)
            assert str(self.info.value).startswith(field + ":")
            return handled

    return _Check()
