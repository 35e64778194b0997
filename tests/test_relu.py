"""ReLU family (SPEC section 4): semantics bit for bit, validation, out=, descriptors, both backends."""

from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numba import njit

import gradops
from gradops import (ActivationReluDesc, ActivationReluGradDesc, AliasingError, DataTypeError,
                     FeatureLevelError, ShapeError, TensorDesc, relu, relu_grad)
from gradops._fast import simd

FLOATS = [np.float32, np.float16]
INTS = [np.int32, np.int16, np.int8]
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(_UINT[a.itemsize])


def expected_select(x: np.ndarray, value: np.ndarray) -> np.ndarray:
    """SPEC 4.2 written independently of gradops: X counts as positive when it is not NaN,
    not a zero and has no sign bit; everything else gives +0."""
    if x.dtype.kind == "f":
        positive = ~np.isnan(x) & (x != 0) & ~np.signbit(x)
    else:
        positive = x.astype(np.int64) >= 1
    result = np.zeros(x.shape, dtype=value.dtype)
    result[positive] = value[positive]
    return result


# --- SPEC tables, exactly ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_e11_every_row(backend, dtype):
    # SPEC 4.2 table / E11: X, dY -> dX (DML column).
    rows = [(1, np.inf, np.inf), (2, np.nan, np.nan), (-1, np.inf, 0.0), (0, np.nan, 0.0), (-0.0, -5, 0.0),
            (np.nan, 7, 0.0), (3, -0.0, -0.0), (-2, -3, 0.0), (np.inf, 2, 2), (-np.inf, 2, 0.0)]
    x, dy, dx = (np.array(col, dtype=dtype) for col in zip(*rows))
    result = relu_grad(x, dy, backend=backend)
    assert result.dtype == dtype
    np.testing.assert_array_equal(bits(result), bits(dx))  # bitwise: sign of zero and NaN included
    assert np.signbit(result).tolist() == [False] * 6 + [True] + [False] * 3


def test_subnormal_x_counts_as_positive(backend):
    # SPEC 4.2 [DECISION]: exact IEEE comparison, no flush-to-zero.
    x = np.array([1e-45, -1e-45, 6e-8], np.float32)
    np.testing.assert_array_equal(relu_grad(x, np.full(3, 4, np.float32), backend=backend), [4, 0, 4])
    x16 = np.array([6e-8, -6e-8], np.float16)  # the smallest float16 subnormal
    np.testing.assert_array_equal(relu_grad(x16, np.full(2, 4, np.float16), backend=backend), [4, 0])


@pytest.mark.parametrize("dtype", FLOATS)
def test_e17_relu_forward(backend, dtype):
    x = np.array([-2, -0.0, 0, 3, np.nan, np.inf, -np.inf], dtype)
    y = relu(x, backend=backend)
    np.testing.assert_array_equal(bits(y), bits(np.array([0, 0, 0, 3, 0, np.inf, 0], dtype)))
    assert not np.signbit(y).any()  # -0 and NaN give +0 (SPEC 4.3)


@pytest.mark.parametrize("dtype", INTS)
def test_integer_types(backend, dtype):
    # SPEC 4.2: integers follow the same select (TF's int ReluGrad agrees).
    info = np.iinfo(dtype)
    x = np.array([1, 0, -1, info.max, info.min], dtype)
    dy = np.array([5, -5, 7, info.min, info.max], dtype)
    np.testing.assert_array_equal(relu_grad(x, dy, backend=backend), [5, 0, 0, info.min, 0])
    np.testing.assert_array_equal(relu(x, backend=backend), [1, 0, 0, info.max, 0])


# --- properties over shapes, strides and special values ---------------------------------------

SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, -1e-45, 1.0, -1.0, 65504.0, -2.5]


@st.composite
def strided_pair(draw):
    """Two arrays of one shape and dtype, each a possibly strided / reversed / broadcast view."""
    dtype = draw(st.sampled_from(FLOATS + INTS))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=8, min_side=1, max_side=4))
    if np.dtype(dtype).kind == "f":
        elements = st.one_of(st.sampled_from(SPECIAL), st.floats(-1e4, 1e4, width=32)).map(
            lambda v: np.array(v).astype(dtype))
    else:
        info = np.iinfo(dtype)
        elements = st.integers(int(info.min), int(info.max))

    def view(shape):
        kind = draw(st.sampled_from(["contiguous", "strided", "reversed", "broadcast", "fortran"]))
        if kind == "strided":
            base = draw(hnp.arrays(dtype, tuple(2 * n for n in shape), elements=elements))
            return base[tuple(slice(None, None, 2) for _ in shape)]
        if kind == "broadcast":
            axis = draw(st.integers(0, len(shape) - 1))
            small = list(shape)
            small[axis] = 1
            return np.broadcast_to(draw(hnp.arrays(dtype, tuple(small), elements=elements)), shape)
        arr = draw(hnp.arrays(dtype, shape, elements=elements))
        if kind == "reversed":
            return arr[tuple(slice(None, None, -1) for _ in shape)]
        return np.asfortranarray(arr) if kind == "fortran" else arr

    return view(shape), view(shape)


@settings(max_examples=150, deadline=None)
@given(pair=strided_pair())
def test_relu_grad_matches_select_bitwise(backend, pair):
    x, dy = pair
    np.testing.assert_array_equal(bits(relu_grad(x, dy, backend=backend)), bits(expected_select(x, dy)))


@settings(max_examples=100, deadline=None)
@given(pair=strided_pair())
def test_relu_matches_select_bitwise(backend, pair):
    x, _ = pair
    np.testing.assert_array_equal(bits(relu(x, backend=backend)), bits(expected_select(x, x)))


def test_out_with_arbitrary_strides(backend):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    dy = rng.standard_normal((3, 4, 5)).astype(np.float32)
    base = np.full((6, 4, 10), 9.0, np.float32)
    out = base[::2, ::-1, 1::2]  # every other row and column, one axis reversed
    assert out.shape == x.shape
    result = relu_grad(x, dy, out=out, backend=backend)
    assert result is out
    np.testing.assert_array_equal(out, expected_select(x, dy))
    assert np.count_nonzero(base == 9.0) == base.size - x.size  # nothing outside the view written


# --- argument validation ------------------------------------------------------------------------

def test_rejects_unsupported_dtype_and_lists():
    with pytest.raises(DataTypeError, match=r"^x\.dtype: expected float32, float16, int32, int16 or int8, "
                                            r"got 'float64'"):
        relu(np.zeros(3))
    with pytest.raises(DataTypeError, match="^x: expected a NumPy array"):
        relu([1.0, -1.0])


@pytest.mark.parametrize("shape, field", [((), "x.ndim"), ((1,) * 9, "x.ndim"), ((2, 0), r"x.shape\[1\]")])
def test_rejects_bad_rank_and_size(shape, field):
    with pytest.raises(ShapeError, match=f"^{field}:"):
        relu_grad(np.zeros(shape, np.float32), np.zeros(shape, np.float32))


def test_rejects_mismatched_dy():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ShapeError, match=r"^dy\.shape: expected \(2, 3\)"):
        relu_grad(x, np.zeros((3, 2), np.float32))
    with pytest.raises(DataTypeError, match=r"^dy\.dtype: expected float32"):
        relu_grad(x, np.zeros((2, 3), np.float16))


def test_out_validation_and_untouched_on_error():
    x = np.array([1, -1, 2], np.float32)
    dy = np.array([3, 4, 5], np.float32)
    bad = [
        (np.zeros(4, np.float32), ShapeError, r"^out\.shape"),
        (np.zeros(3, np.float16), DataTypeError, r"^out\.dtype"),
        (np.broadcast_to(np.zeros(1, np.float32), (3,)), AliasingError, "^out: expected a writeable"),
        (np.lib.stride_tricks.as_strided(np.zeros(2, np.float32), (3,), (0,)), AliasingError,
         "^out: expected an array whose elements do not overlap"),
        ([0, 0, 0], AliasingError, "^out: expected a NumPy array"),
    ]
    for out, error, pattern in bad:
        with pytest.raises(error, match=pattern):
            relu_grad(x, dy, out=out)
    sentinel = np.full(3, 7, np.float32)
    with pytest.raises(ShapeError):
        relu_grad(x, np.zeros(2, np.float32), out=sentinel)
    np.testing.assert_array_equal(sentinel, 7)


@pytest.mark.parametrize("repeats", [1, 1 << 16])  # 16 bytes, 1 MiB (calls small and large take different paths)
def test_in_place_and_partial_overlap(backend, repeats):
    x = np.tile(np.array([1, -1, 2, -2], np.float32), repeats)
    dy = np.tile(np.array([3, 4, 5, 6], np.float32), repeats)
    assert relu_grad(x, dy, out=dy, backend=backend) is dy
    np.testing.assert_array_equal(dy, np.tile([3, 0, 5, 0], repeats))
    relu_grad(x, x.copy(), out=x, backend=backend)
    np.testing.assert_array_equal(x, np.tile([1, 0, 2, 0], repeats))
    y = np.tile(np.array([-1, 5, -2, 3], np.float32), repeats)
    relu(y, out=y, backend=backend)
    np.testing.assert_array_equal(y, np.tile([0, 5, 0, 3], repeats))
    buf = np.arange(4 * repeats + 2, dtype=np.float32)
    before = buf.copy()
    with pytest.raises(AliasingError, match="^out: expected memory disjoint from `dy` "
                                            r"\(only exactly `dy` itself\)"):
        relu_grad(x, buf[:-2], out=buf[2:], backend=backend)
    with pytest.raises(AliasingError):
        relu(buf[1:], out=buf[:-1], backend=backend)
    np.testing.assert_array_equal(buf, before)  # refused before anything was written


def test_backend_selection(monkeypatch):
    x = np.array([1, -1], np.float32)
    monkeypatch.setenv("GRADOPS_BACKEND", "reference")
    np.testing.assert_array_equal(relu(x), [1, 0])
    monkeypatch.setenv("GRADOPS_BACKEND", "gpu")
    with pytest.raises(gradops.DescriptorError, match="^GRADOPS_BACKEND: expected 'auto', 'fast' or 'reference'"):
        relu(x)
    with pytest.raises(gradops.DescriptorError, match="^backend:"):
        relu(x, backend="cuda")
    # each call reads the variable as os.environ has it then: set, changed, removed
    from gradops._backend import resolve_backend
    monkeypatch.setenv("GRADOPS_BACKEND", "fast")
    assert resolve_backend(None) == "fast"
    monkeypatch.setenv("GRADOPS_BACKEND", "reference")
    assert resolve_backend(None) == "reference"
    monkeypatch.delenv("GRADOPS_BACKEND")
    assert resolve_backend(None) == "fast"  # auto, with numba installed


def test_fast_backend_is_deterministic_across_thread_counts(on_each_thread_count):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 1000)).astype(np.float32)
    dy = rng.standard_normal((64, 1000)).astype(np.float32)
    results = on_each_thread_count(lambda: relu_grad(x, dy, backend="fast"))
    np.testing.assert_array_equal(bits(results[0]), bits(results[1]))


# --- descriptors (SPEC 4.1) ---------------------------------------------------------------------

def _desc(sizes=(2, 3), dtype="FLOAT32", **overrides):
    tensors = {"input_tensor": TensorDesc(dtype, sizes), "input_gradient_tensor": TensorDesc(dtype, sizes),
               "output_gradient_tensor": TensorDesc(dtype, sizes)}
    tensors.update(overrides)
    return ActivationReluGradDesc(**tensors)


@pytest.mark.parametrize("desc, level, error, field", [
    (_desc(input_gradient_tensor=TensorDesc("FLOAT16", (2, 3))), None, DataTypeError,
     "InputGradientTensor.DataType"),
    (_desc(output_gradient_tensor=TensorDesc("FLOAT32", (3, 2))), None, ShapeError, "OutputGradientTensor.Sizes"),
    (_desc(input_tensor=TensorDesc("FLOAT32", (2, 3, 1))), None, ShapeError, "InputGradientTensor.DimensionCount"),
    (_desc(sizes=(1,) * 9), None, ShapeError, "InputTensor.DimensionCount"),
    (_desc(dtype="UINT8"), None, DataTypeError, "InputTensor.DataType"),
    (_desc(dtype="FLOAT64"), None, DataTypeError, "InputTensor.DataType"),
    (_desc(output_gradient_tensor=TensorDesc("FLOAT32", (2, 3), (0, 1))), None, gradops.DescriptorError,
     "OutputGradientTensor.Strides"),
    (_desc(), "2.1", FeatureLevelError, "feature_level"),  # RELU_GRAD arrived in 3.0
    (_desc(sizes=(1, 1, 1, 1, 2)), "3.0", FeatureLevelError, "feature_level"),  # rank > 4 needs 3.1
    (_desc(dtype="INT8"), "5.0", FeatureLevelError, "feature_level"),  # integers need 5.1
])
def test_relu_grad_desc_rules(desc, level, error, field):
    with pytest.raises(error) as info:
        desc.validate(level)
    assert str(info.value).startswith(field + ":")


def test_relu_grad_desc_accepts():
    _desc().validate("3.0")
    _desc(sizes=(1,) * 8).validate("3.1")
    _desc(dtype="INT16").validate("5.1")
    _desc(dtype="FLOAT16", input_tensor=TensorDesc("FLOAT16", (2, 3), (0, 1))).validate()  # broadcast input


@pytest.mark.parametrize("sizes, level, ok", [((2, 3), "2.0", False), ((1, 1, 2, 3), "1.0", True),
                                              ((1, 1, 1, 2, 3), "1.0", False), ((1, 1, 1, 2, 3), "2.0", True),
                                              ((2, 3), "3.0", True)])
def test_relu_desc_rank_by_feature_level(sizes, level, ok):
    # SPEC 4.1: RELU 4-D at 1.0, 4..5-D at 2.0, 1..8-D from 3.0.
    desc = ActivationReluDesc(TensorDesc("FLOAT32", sizes), TensorDesc("FLOAT32", sizes))
    if ok:
        desc.validate(level)
    else:
        with pytest.raises(FeatureLevelError, match="^feature_level: DimensionCount"):
            desc.validate(level)


def test_descriptor_is_frozen_and_mirrors_the_struct():
    desc = _desc()
    assert [f for f in desc.__dataclass_fields__] == ["input_tensor", "input_gradient_tensor",
                                                       "output_gradient_tensor"]
    assert (desc.OPERATOR_TYPE, desc.OPERATOR_VALUE) == ("DML_OPERATOR_ACTIVATION_RELU_GRAD", 129)
    assert (ActivationReluDesc.OPERATOR_TYPE, ActivationReluDesc.OPERATOR_VALUE) == ("DML_OPERATOR_ACTIVATION_RELU", 44)
    with pytest.raises(AttributeError):
        desc.input_tensor = None  # type: ignore[misc]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
def test_large_dense_arrays_at_every_alignment(backend, dtype):
    # Outputs beyond the cache take the streaming-store path: check unaligned starts and tails.
    rng = np.random.default_rng(2)
    n = (16 << 20) // np.dtype(dtype).itemsize + 37
    x = rng.standard_normal(n + 8).astype(dtype)
    dy = rng.standard_normal(n + 8).astype(dtype)
    for shift in (0, 1, 3):
        out = np.full(n + 8, 5, dtype)
        relu_grad(x[shift:shift + n], dy[:n], out=out[shift:shift + n], backend=backend)
        np.testing.assert_array_equal(bits(out[shift:shift + n]), bits(expected_select(x[shift:shift + n], dy[:n])))
        assert (out[:shift] == 5).all() and (out[shift + n:] == 5).all()


@pytest.mark.parametrize("operator, mib, streamed", [("relu", 1.5, False), ("relu", 2, True),
                                                       ("relu_grad", 1, False), ("relu_grad", 1.5, True)])
def test_streaming_follows_the_bytes_a_select_moves(monkeypatch, operator, mib, streamed):
    # A dense select is written with non-temporal stores when its distinct arrays (relu: x and
    # the output; relu_grad: x, dy and the output) take 3.5 times the streaming threshold (here
    # 1 MiB), 7/8 of the last-level cache; below that, plain stores keep the output cached for
    # the next operator. The same bits either way.
    from gradops._fast import relu as fast_relu
    monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", 1 << 20)
    kernels = []
    share = fast_relu.share

    def spy(kernel, *args):
        kernels.append(kernel)
        return share(kernel, *args)
    monkeypatch.setattr(fast_relu, "share", spy)
    rng = np.random.default_rng(7)
    n = int(mib * (1 << 20)) // 4
    x, dy = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.empty(n, np.float32)
    if operator == "relu":
        gradops.relu(x, out=out, backend="fast")
        expected = expected_select(x, x)
    else:
        gradops.relu_grad(x, dy, out=out, backend="fast")
        expected = expected_select(x, dy)
    assert (fast_relu._select_dense_streaming in kernels) == streamed
    np.testing.assert_array_equal(bits(out), bits(expected))


def _with_special_values(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    specials = ([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40 if a.dtype == np.float32 else 1e-7]
                if a.dtype.kind == "f" else [0, -1, 1, np.iinfo(a.dtype).min, np.iinfo(a.dtype).max])
    flat = a.reshape(-1)
    flat[rng.integers(0, flat.size, size=max(1, flat.size // 8))] = rng.choice(np.array(specials, a.dtype),
                                                                             size=max(1, flat.size // 8))
    return a


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("size", [1, 15, 64 + 5, 1000, 3 * 65536 + 7, 300_001])
def test_dense_calls_every_size_and_order(dtype, size):
    # Dense inputs take the vector select (whole vectors, then an element tail), on the calling
    # thread for small calls and on the pool above a few MiB: every size, C, Fortran and
    # channels_last order, the same bits as SPEC 4.2's select.
    rng = np.random.default_rng(size)
    x = _with_special_values((rng.standard_normal(size) * 100).astype(dtype), rng)
    dy = _with_special_values((rng.standard_normal(size) * 100).astype(dtype), rng)
    views = [(x, dy)]
    if size % 4 == 0 or size == 1000:
        shape = (2, 5, 10, 10)[: 4] if size == 1000 else (size // 4, 4)
        views.append((np.asfortranarray(x.reshape(shape)), np.asfortranarray(dy.reshape(shape))))
    if size == 1000:
        nhwc = (2, 10, 10, 5)
        views.append((x.reshape(nhwc).transpose(0, 3, 1, 2), dy.reshape(nhwc).transpose(0, 3, 1, 2)))
    for xv, dyv in views:
        expected = bits(expected_select(xv, dyv))
        np.testing.assert_array_equal(bits(relu_grad(xv, dyv, backend="fast")), expected)
        out = np.empty_like(dyv)
        relu_grad(xv, dyv, out=out, backend="fast")
        np.testing.assert_array_equal(bits(out), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_dense_calls_with_an_unusual_out(dtype):
    """C-contiguous inputs with an ``out`` that the one-check path must not take: not on an
    element boundary (staged), or exactly ``dy``; and inputs that are subclasses. The same bits
    as SPEC 4.2's select every time."""
    rng = np.random.default_rng(5)
    x = _with_special_values((rng.standard_normal(99) * 100).astype(dtype), rng)
    dy = _with_special_values((rng.standard_normal(99) * 100).astype(dtype), rng)
    expected = bits(expected_select(x, dy))
    raw = bytearray(x.nbytes + 1)
    misaligned = np.frombuffer(raw, dtype, count=x.size, offset=1)
    assert not misaligned.flags.aligned and misaligned.flags.c_contiguous
    relu_grad(x, dy, out=misaligned, backend="fast")
    np.testing.assert_array_equal(bits(misaligned), expected)
    in_place = dy.copy()
    assert relu_grad(x, in_place, out=in_place, backend="fast") is in_place
    np.testing.assert_array_equal(bits(in_place), expected)
    class Tagged(np.ndarray):
        pass
    np.testing.assert_array_equal(bits(relu_grad(x.view(Tagged), dy.view(Tagged), backend="fast")), expected)


def test_store_fence_compiles_for_arm(monkeypatch):
    """The streaming path's fence, built as on a non-x86 machine, is portable IR that LLVM can
    compile for aarch64 (the x86 ``sfence`` intrinsic aborts the process there: "Cannot select")."""
    monkeypatch.setattr(simd, "_X86", False)

    @njit
    def fence_only():
        simd.store_fence()

    fence_only()
    ir_text = fence_only.inspect_llvm(fence_only.signatures[0])
    assert "llvm.x86" not in ir_text and "fence seq_cst" in ir_text
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    module = llvm.parse_assembly(ir_text)
    module.triple = "aarch64-unknown-linux-gnu"
    machine = llvm.Target.from_triple(module.triple).create_target_machine()
    assert "dmb" in machine.emit_assembly(module)


@pytest.mark.parametrize("kernel_name", ["_select_alone", "_select_dense"])
def test_dense_select_compiles_to_vector_loads(kernel_name):
    """The dense select's loop must vectorise as contiguous loads and stores: a loop whose indices
    may be negative (they wrap around) compiled to gathers and scatters, 30x slower at 512 KiB,
    with the same bits. Compiled here without the disk cache, whose kernels keep no assembly."""
    from gradops._fast import relu as fast_relu

    kernel = njit(nogil=True)(getattr(fast_relu, kernel_name).py_func)
    x = np.zeros(64, np.float32)
    arguments = (x, x, x.copy(), True)
    if kernel_name == "_select_dense":  # compiles the chunks of the lane too
        from gradops._fast.pool import LANE_ARGUMENTS
        arguments = (np.zeros(LANE_ARGUMENTS + 8, np.int64), 0, 0, 1) + arguments
    kernel(*arguments)
    asm = kernel.inspect_asm(kernel.signatures[0])
    assert "gather" not in asm and "scatter" not in asm
    assert "mm" in asm  # vector registers (xmm on an SSE-only target)
