"""float16 conversions of ``gradops._fast.half`` (SPEC 3.7): the bit-manipulation fallback and
LLVM's hardware conversions, against NumPy's float16 over all 65536 bit patterns and ties."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from gradops._fast.half import HARDWARE_HALF, float_to_half, float_to_half_bits, half_bits_to_float, half_to_float


@numba.njit
def _decode_bits(bits):
    out = np.empty(bits.size, np.float32)
    for i in range(bits.size):
        out[i] = half_to_float(bits[i])
    return out


@numba.njit
def _encode_bits(values):
    out = np.empty(values.size, np.uint16)
    for i in range(values.size):
        out[i] = float_to_half(values[i])
    return out


@numba.njit
def _decode_hardware(bits):
    out = np.empty(bits.size, np.float32)
    for i in range(bits.size):
        out[i] = half_bits_to_float(bits[i])
    return out


@numba.njit
def _encode_hardware(values):
    out = np.empty(values.size, np.uint16)
    for i in range(values.size):
        out[i] = float_to_half_bits(values[i])
    return out


CONVERSIONS = [pytest.param(_decode_bits, _encode_bits, id="bits"),
               pytest.param(_decode_hardware, _encode_hardware, id="hardware",
                            marks=pytest.mark.skipif(not HARDWARE_HALF, reason="no hardware half conversions"))]


@pytest.mark.parametrize("decode,encode", CONVERSIONS)
def test_half_decoding_is_exact_for_all_65536_patterns(decode, encode):
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    got = decode(bits)
    expected = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), expected[~nan].view(np.uint32))
    assert np.isnan(got[nan]).all()


@pytest.mark.parametrize("decode,encode", CONVERSIONS)
def test_half_encoding_rounds_to_nearest_even(decode, encode):
    rng = np.random.default_rng(2)
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    finite = halves[np.isfinite(halves)]
    finite.sort()
    midpoints = (finite[:-1] + finite[1:]) / 2  # exact ties, representable in float32
    values = np.concatenate([
        rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        midpoints.astype(np.float32), np.nextafter(midpoints.astype(np.float32), np.float32(np.inf)),
        np.nextafter(midpoints.astype(np.float32), np.float32(-np.inf)), finite.astype(np.float32),
        np.array([65504, 65519.996, 65520, 2.0 ** -25, 2.0 ** -26, 1e-45, np.inf, -np.inf], np.float32),
    ])
    with np.errstate(over="ignore"):
        expected = values.astype(np.float16)
    got = encode(values).view(np.float16)
    nan = np.isnan(values)
    np.testing.assert_array_equal(got[~nan].view(np.uint16), expected[~nan].view(np.uint16))
    assert np.isnan(got[nan]).all()
