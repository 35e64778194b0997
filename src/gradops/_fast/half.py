"""float16 and bfloat16 <-> float32 for numba kernels, which have no half arithmetic on the CPU.

Half arrays reach the kernels as their uint16 bits. Where the CPU converts float16 in hardware
(x86 F16C, every 64-bit ARM) LLVM's ``half`` type does it: one vectorised instruction per 8-16
values. Elsewhere the conversions run on raw bits: branch-free select chains, exact (round to
nearest even; subnormals, inf and NaN handled), which vectorise too but cost about ten integer
operations per value. bfloat16 is always converted on bits (a shift one way, a rounding add the
other). ``decode`` and ``encode`` pick the float16 route when the kernel is compiled.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from .target import codegen_target

# Whether LLVM converts half <-> float with instructions for the target (target.py).
HARDWARE_HALF = codegen_target().half


def _conversion(name: str, argument, result, emit, doc: str):
    """An intrinsic ``result(argument)`` whose body is the one LLVM instruction ``emit`` builds."""
    def convert(typingctx, value):
        if value != argument:
            return None

        def codegen(context, builder, signature, args):
            return emit(builder, args[0])
        return result(argument), codegen
    convert.__name__ = convert.__qualname__ = name
    convert.__doc__ = doc
    return intrinsic(convert)


half_bits_to_float = _conversion(
    "half_bits_to_float", types.uint16, types.float32,
    lambda b, v: b.fpext(b.bitcast(v, ir.HalfType()), ir.FloatType()),
    "float16 bits -> float32 with LLVM's ``fpext half``.")
float_to_half_bits = _conversion(
    "float_to_half_bits", types.float32, types.uint16,
    lambda b, v: b.bitcast(b.fptrunc(v, ir.HalfType()), ir.IntType(16)),
    "float32 -> float16 bits with LLVM's ``fptrunc`` (round to nearest even).")
_f32_from_bits = _conversion("_f32_from_bits", types.uint32, types.float32,
                             lambda b, v: b.bitcast(v, ir.FloatType()), "uint32 bits -> float32.")
_bits_from_f32 = _conversion("_bits_from_f32", types.float32, types.uint32,
                             lambda b, v: b.bitcast(v, ir.IntType(32)), "float32 -> uint32 bits.")


# The conversions work on uint32 and truncate after every operation (numba widens integer
# arithmetic to 64 bits otherwise), with selects instead of branches: loops over them vectorise.
_U32 = np.uint32


@njit(inline="always")
def half_to_float(h):
    """IEEE binary16 bits -> float32, exact (subnormals, inf, NaN payload kept)."""
    bits = _U32(h)
    wide = _U32(_U32(bits & _U32(0x7FFF)) << _U32(13))
    exponent = _U32(wide & _U32(0x0F800000))
    wide = _U32(wide + _U32((127 - 15) << 23))  # rebias the exponent
    normal = _U32(wide + _U32((128 - 16) << 23)) if exponent == _U32(0x0F800000) else wide  # inf / NaN
    # zero / subnormal: as the normal 1.m * 2**-14, minus 2**-14 (exact)
    subnormal = _f32_from_bits(_U32(wide + _U32(1 << 23))) - np.float32(2.0 ** -14)
    value = subnormal if exponent == _U32(0) else _f32_from_bits(normal)
    return _f32_from_bits(_U32(_bits_from_f32(value) | _U32(_U32(bits & _U32(0x8000)) << _U32(16))))


@njit(inline="always")
def bf16_to_float(h):
    return _f32_from_bits(_U32(_U32(h) << _U32(16)))


@njit(inline="always")
def float_to_half(value):
    """float32 -> binary16 bits, round to nearest even; overflow gives inf, NaN a quiet NaN."""
    bits = _bits_from_f32(np.float32(value))
    sign = _U32(_U32(bits >> _U32(16)) & _U32(0x8000))
    magnitude = _U32(bits & _U32(0x7FFFFFFF))
    # normal: rebias (-112 << 23, as uint32) and round the 13 dropped bits to nearest even
    odd = _U32(_U32(magnitude >> _U32(13)) & _U32(1))
    normal = _U32(_U32(magnitude + _U32(0xC8000FFF) + odd) >> _U32(13))
    # below 2**-14: adding 0.5 makes the float adder round the subnormal for us
    subnormal = _U32(_bits_from_f32(_f32_from_bits(magnitude) + np.float32(0.5)) - _U32(0x3F000000))
    overflow = _U32(0x7E00) if magnitude > _U32(0x7F800000) else _U32(0x7C00)  # NaN / inf
    half = overflow if magnitude >= _U32(0x47800000) else (subnormal if magnitude < _U32(0x38800000) else normal)
    return _U32(half | sign)


@njit(inline="always")
def float_to_bf16(value):
    """float32 -> bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN."""
    bits = _bits_from_f32(np.float32(value))
    rounded = _U32(_U32(bits + _U32(0x7FFF) + _U32(_U32(bits >> _U32(16)) & _U32(1))) >> _U32(16))
    quiet = _U32(_U32(bits >> _U32(16)) | _U32(0x40))
    return quiet if _U32(bits & _U32(0x7FFFFFFF)) > _U32(0x7F800000) else rounded


def decode(bits):
    """float16 bits -> float32: in hardware where there is F16C (or ARM64), else on bits."""


def encode(value):
    """float32 -> float16 bits, round to nearest even: in hardware where possible, else on bits."""


@overload(decode, inline="always")
def _decode_impl(bits):
    if HARDWARE_HALF:
        return lambda bits: half_bits_to_float(np.uint16(bits))
    return lambda bits: half_to_float(bits)


@overload(encode, inline="always")
def _encode_impl(value):
    if HARDWARE_HALF:
        return lambda value: float_to_half_bits(np.float32(value))
    return lambda value: np.uint16(float_to_half(value))
