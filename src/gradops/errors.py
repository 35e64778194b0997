"""The gradops exception hierarchy.

Every error raised for a bad argument or descriptor is a :class:`GradopsError`, which is a
``ValueError``. The message always starts with the field or argument at fault, then says what
was expected and what was given, e.g. ``InputTensor.Sizes[2]: expected an integer >= 1, got 0``.
All validation happens before any kernel runs, so a failed call leaves ``out=`` untouched.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "GradopsError",
    "DescriptorError",
    "ShapeError",
    "DataTypeError",
    "AliasingError",
    "BindingError",
    "FeatureLevelError",
    "UnsupportedError",
]


def _describe(value: Any) -> str:
    """A short, stable rendering of an offending value for error messages."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"an array of shape {tuple(shape)} and dtype {dtype}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class GradopsError(ValueError):
    """Base class: an argument or descriptor field is invalid. ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")

    @classmethod
    def expected(cls, field: str, what: str, got: Any) -> GradopsError:
        """``<field>: expected <what>, got <got>`` with ``got`` rendered briefly."""
        return cls(field, f"expected {what}, got {_describe(got)}")


class DescriptorError(GradopsError):
    """A scalar or list field (scales, offsets, enums, strides, paddings...) is invalid."""


class ShapeError(GradopsError):
    """A rank or size does not match what the operator requires."""


class DataTypeError(GradopsError):
    """A data type is unsupported or differs between tensors that must agree."""


class AliasingError(GradopsError):
    """An output is read-only, overlaps itself, or overlaps an input it may not alias."""


class BindingError(GradopsError):
    """A buffer bound to a tensor descriptor is too small, misaligned or of the wrong kind."""


class FeatureLevelError(GradopsError):
    """The operator, data type or rank needs a higher DirectML feature level than requested."""


class UnsupportedError(GradopsError):
    """A documented option that gradops does not implement (said explicitly, never ignored)."""
