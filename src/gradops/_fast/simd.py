"""Explicit SIMD vectors for numba kernels: 64-byte vectors of float32 (16 lanes) or float64 (8).

LLVM's loop vectoriser only vectorises innermost loops and keeps accumulators in memory, so a
kernel that wants several output vectors to stay in registers across a loop over filter taps
(register blocking) cannot be written with scalar loops. Here a vector is a numba value whose
data model is an LLVM vector: kernels load, multiply, add and store whole vectors, and LLVM
maps them onto whatever the CPU has (one AVX-512 register, two AVX2 registers, four NEON ...).

Arithmetic is exactly IEEE per lane: ``muladd(acc, x, w)`` is a multiply and then an add, two
roundings, never contracted into an FMA (no fast-math flags), so a lane computes the same bits
as the scalar expression ``acc + x * w``. Loads and stores assume unit-stride 1-D arrays
(``flat_view`` buffers) and need no alignment; ``load_first`` / ``store_first`` touch only the
first ``count`` elements (masked), for the part of a row shorter than a vector.
"""

from __future__ import annotations

import platform

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

from .target import codegen_target, last_level_cache_bytes

# 64 bytes on every target: one AVX-512 register, two AVX2 ones. Every lane computes the same bits
# whatever the width; 32-byte vectors at the AVX2 tier were faster for 5- and 7-tap filter rows
# and slower for 3-tap rows and the filter gradient (docs/performance.md, "Depthwise").
VECTOR_BYTES = 64
LINE_BYTES = 64  # a cache line: what prefetches and non-temporal writes work in
# Outputs at least this large are written with non-temporal stores (``store_stream``): a normal
# store first reads the destination line (read for ownership), so a kernel reading one array and
# writing one moves three array-sizes over the memory bus. Smaller outputs stay in the cache,
# where the next operator finds them. A quarter of the last-level cache: with the inputs beside
# it, an output that large no longer stays there. Measured on a 32 MiB L3 (8 MiB rather than
# 16: docs/performance.md); the plans read it through this module at each call.
STREAMING_THRESHOLD_BYTES = last_level_cache_bytes() // 4
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


class FloatVector(types.Type):
    """``lanes`` values of ``dtype`` (float32 or float64) in one LLVM vector: ``VECTOR_BYTES``
    unless ``vector_bytes`` says otherwise (``zeros_of``)."""

    def __init__(self, dtype: types.Float, vector_bytes: int = VECTOR_BYTES) -> None:
        self.dtype = dtype
        self.lanes = vector_bytes // (dtype.bitwidth // 8)
        super().__init__(name=f"FloatVector({dtype}x{self.lanes})")


@register_model(FloatVector)
class _FloatVectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type: FloatVector) -> None:
        element = ir.FloatType() if fe_type.dtype == types.float32 else ir.DoubleType()
        super().__init__(dmm, fe_type, ir.VectorType(element, fe_type.lanes))


def _float_array(array) -> bool:
    return isinstance(array, types.Array) and array.ndim == 1 and array.dtype in (types.float32, types.float64)


def _pointer(context, builder, array_type, array_value, index_type, index_value, vector: ir.VectorType):
    array = context.make_array(array_type)(context, builder, array_value)
    index = context.cast(builder, index_value, index_type, types.intp)
    return builder.bitcast(builder.gep(array.data, [index]), vector.as_pointer())


@intrinsic
def lanes(typingctx, array):
    """The number of lanes of ``array``'s vectors (a constant)."""
    if not _float_array(array):
        return None
    count = FloatVector(array.dtype).lanes

    def codegen(context, builder, signature, args):
        return context.get_constant(types.intp, count)
    return types.intp(array), codegen


def _zeros_codegen(vector_type: FloatVector):
    def codegen(context, builder, signature, args):
        return ir.Constant(context.get_value_type(vector_type), None)
    return codegen


def _load_codegen(vector_type: FloatVector, array_at: int):
    """A vector load of ``vector_type`` from the array and index at arguments ``array_at`` and
    ``array_at + 1`` (no alignment needed)."""
    def codegen(context, builder, signature, args):
        pointer = _pointer(context, builder, signature.args[array_at], args[array_at], signature.args[array_at + 1],
                           args[array_at + 1], context.get_value_type(vector_type))
        return builder.load(pointer, align=vector_type.dtype.bitwidth // 8)
    return codegen


@intrinsic
def zeros(typingctx, array):
    """A vector of +0.0 of ``array``'s dtype."""
    if not _float_array(array):
        return None
    vector_type = FloatVector(array.dtype)
    return vector_type(array), _zeros_codegen(vector_type)


@intrinsic
def zeros_of(typingctx, array, vector_bytes):
    """``zeros`` in a vector of ``vector_bytes`` (a literal: 16, 32 or 64), for microkernels whose
    width the selection table chooses per CPU; ``load_as`` loads vectors of its width."""
    if not (_float_array(array) and isinstance(vector_bytes, types.IntegerLiteral)
            and vector_bytes.literal_value in (16, 32, 64)):
        return None
    vector_type = FloatVector(array.dtype, vector_bytes.literal_value)
    return vector_type(array, vector_bytes), _zeros_codegen(vector_type)


@intrinsic
def load_as(typingctx, like, array, index):
    """``array[index : index + lanes]`` as a vector of ``like``'s type (its width)."""
    if not (isinstance(like, FloatVector) and _float_array(array) and array.dtype == like.dtype
            and isinstance(index, types.Integer)):
        return None
    return like(like, array, index), _load_codegen(like, 1)


@intrinsic
def load(typingctx, array, index):
    """``array[index : index + lanes]`` as a vector."""
    if not (_float_array(array) and isinstance(index, types.Integer)):
        return None
    vector_type = FloatVector(array.dtype)
    return vector_type(array, index), _load_codegen(vector_type, 0)


@njit(inline="always")
def line_head(dst, start, n):
    """How many of ``dst[start : start + n]`` come before the first 64-byte line boundary: the
    elements a streamed run writes with plain stores before its whole lines (``dst`` need only be
    element-aligned)."""
    return min(n, (-(dst.ctypes.data + start * dst.itemsize)) % LINE_BYTES // dst.itemsize)


def mark_nontemporal(builder, store) -> None:
    """Mark an LLVM store non-temporal: the line is written without first being read for ownership."""
    store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))


def _store_intrinsic(streaming: bool, half: bool, doc: str):
    """A vector store intrinsic; ``streaming`` adds the non-temporal hint (and alignment to the
    vector's size). ``half``: a float32 vector stored as float16 bits into a uint16 array (LLVM
    ``fptrunc``: round to nearest even, as ``half.encode``), only where the CPU converts half in
    hardware (``half.HARDWARE_HALF``): elsewhere LLVM would call a library routine that numba's
    JIT does not link."""
    def store(typingctx, array, index, value):
        if not (isinstance(index, types.Integer) and isinstance(value, FloatVector)):
            return None
        if half and not (isinstance(array, types.Array) and array.ndim == 1 and array.dtype == types.uint16
                         and value.dtype == types.float32):
            return None
        if not half and not (_float_array(array) and value.dtype == array.dtype):
            return None

        def codegen(context, builder, signature, args):
            data = args[2]
            if half:
                bits = ir.VectorType(ir.IntType(16), value.lanes)
                data = builder.bitcast(builder.fptrunc(data, ir.VectorType(ir.HalfType(), value.lanes)), bits)
            pointer = _pointer(context, builder, signature.args[0], args[0], signature.args[1], args[1], data.type)
            element_bytes = 2 if half else array.dtype.bitwidth // 8
            written = builder.store(data, pointer,
                                    align=value.lanes * element_bytes if streaming else element_bytes)
            if streaming:
                mark_nontemporal(builder, written)
            return context.get_dummy_value()
        return types.void(array, index, value), codegen
    store.__doc__ = doc
    return intrinsic(store)


store = _store_intrinsic(False, False, """``array[index : index + lanes] = value``.""")
store_stream = _store_intrinsic(True, False, """``store`` with a non-temporal hint: the line is written without
first being read for ownership. ``array[index]`` must be aligned to the vector's size, and whole lines written.""")
store_half = _store_intrinsic(False, True, """``array[index : index + lanes]`` = the float32 lanes of ``value``
rounded to float16 bits (``array``: uint16).""")
store_stream_half = _store_intrinsic(True, True, """``store_half`` with a non-temporal hint; ``array`` is 32-byte
aligned at ``index``.""")


@intrinsic
def load_half(typingctx, array, index):
    """The float16 bits ``array[index : index + 16]`` (uint16) as a float32 vector (LLVM ``fpext``:
    exact, subnormals, inf and NaN included). Only where the CPU converts half in hardware
    (``half.HARDWARE_HALF``), as ``store_stream_half``."""
    if not (isinstance(array, types.Array) and array.ndim == 1 and array.dtype == types.uint16
            and isinstance(index, types.Integer)):
        return None
    vector_type = FloatVector(types.float32)

    def codegen(context, builder, signature, args):
        bits_type = ir.VectorType(ir.IntType(16), vector_type.lanes)
        pointer = _pointer(context, builder, signature.args[0], args[0], signature.args[1], args[1], bits_type)
        halves = builder.bitcast(builder.load(pointer, align=2), ir.VectorType(ir.HalfType(), vector_type.lanes))
        return builder.fpext(halves, context.get_value_type(vector_type))
    return vector_type(array, index), codegen


def broadcast(builder, scalar, lanes: int):
    """LLVM IR: the vector of ``lanes`` copies of ``scalar`` (an insert and a zero shuffle)."""
    vector = ir.VectorType(scalar.type, lanes)
    first = builder.insert_element(ir.Constant(vector, None), scalar, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(first, first, ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))


def _lane_mask(context, builder, count_type, count, lanes: int):
    """``<lanes x i1>``: lane i is on when i < count."""
    index = context.cast(builder, count, count_type, types.intp)
    return builder.icmp_signed("<", ir.Constant(ir.VectorType(index.type, lanes), list(range(lanes))),
                               broadcast(builder, index, lanes))


def _masked_intrinsic(builder, operation: str, vector_type: FloatVector, signature: ir.FunctionType):
    """LLVM's ``llvm.masked.load`` / ``llvm.masked.store`` for one vector type (opaque-pointer
    name mangling, as ``prefetch``)."""
    element = "f32" if vector_type.dtype == types.float32 else "f64"
    return cgutils.get_or_insert_function(builder.module, signature,
                                          f"llvm.masked.{operation}.v{vector_type.lanes}{element}.p0")


@intrinsic
def load_first(typingctx, array, index, count):
    """``array[index : index + count]`` in the first ``count`` (< lanes) lanes, +0 in the others;
    the elements past ``count`` are not read (a masked load: no access past the array's end)."""
    if not (_float_array(array) and isinstance(index, types.Integer) and isinstance(count, types.Integer)):
        return None
    vector_type = FloatVector(array.dtype)

    def codegen(context, builder, signature, args):
        vector = context.get_value_type(vector_type)
        pointer = _pointer(context, builder, signature.args[0], args[0], signature.args[1], args[1], vector)
        mask = _lane_mask(context, builder, signature.args[2], args[2], vector_type.lanes)
        function = _masked_intrinsic(builder, "load", vector_type,
                                     ir.FunctionType(vector, [pointer.type, ir.IntType(32), mask.type, vector]))
        return builder.call(function, [pointer, ir.Constant(ir.IntType(32), array.dtype.bitwidth // 8), mask,
                                       ir.Constant(vector, None)])
    return vector_type(array, index, count), codegen


@intrinsic
def store_first(typingctx, array, index, value, count):
    """``array[index : index + count] = value[:count]`` (``count`` < lanes): the elements past
    ``count`` are neither read nor written. One masked store where the target has AVX-512; lane by
    lane elsewhere, since AVX2's masked store is microcoded on AMD (and NEON has none)."""
    if not (_float_array(array) and isinstance(index, types.Integer) and isinstance(value, FloatVector)
            and value.dtype == array.dtype and isinstance(count, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        vector = context.get_value_type(signature.args[2])
        pointer = _pointer(context, builder, signature.args[0], args[0], signature.args[1], args[1], vector)
        element_bytes = array.dtype.bitwidth // 8
        if codegen_target().avx512:
            mask = _lane_mask(context, builder, signature.args[3], args[3], value.lanes)
            function = _masked_intrinsic(builder, "store", value, ir.FunctionType(
                ir.VoidType(), [vector, pointer.type, ir.IntType(32), mask.type]))
            builder.call(function, [args[2], pointer, ir.Constant(ir.IntType(32), element_bytes), mask])
        else:
            first = builder.bitcast(pointer, vector.element.as_pointer())
            with cgutils.for_range(builder, context.cast(builder, args[3], signature.args[3], types.intp)) as lane:
                builder.store(builder.extract_element(args[2], lane.index), builder.gep(first, [lane.index]),
                              align=element_bytes)
        return context.get_dummy_value()
    return types.void(array, index, value, count), codegen


@intrinsic
def muladd(typingctx, acc, x, w):
    """``acc + x * w`` per lane: a multiply, then an add (two roundings, as the scalar code)."""
    if not (isinstance(acc, FloatVector) and acc == x == w):
        return None

    def codegen(context, builder, signature, args):
        return builder.fadd(args[0], builder.fmul(args[1], args[2]))
    return acc(acc, x, w), codegen


def _lanewise(operation: str, doc: str):
    """An intrinsic ``f(a, b)`` on two vectors of one type: the LLVM instruction ``operation``
    (``fadd``, ``fmul``) per lane, exactly rounded."""
    def lanewise(typingctx, a, b):
        if not (isinstance(a, FloatVector) and a == b):
            return None

        def codegen(context, builder, signature, args):
            return getattr(builder, operation)(args[0], args[1])
        return a(a, b), codegen
    lanewise.__doc__ = doc
    return intrinsic(lanewise)


add = _lanewise("fadd", """``a + b`` per lane.""")
mul = _lanewise("fmul", """``a * b`` per lane.""")


@intrinsic
def pair_sums(typingctx, a, b):
    """The sums of adjacent lanes of ``a`` then ``b``: lane i is ``a[2i] + a[2i + 1]`` for i < lanes/2,
    then ``b[2i - lanes] + b[2i + 1 - lanes]`` (one add per lane, the even lane first: the sum
    of a pair in memory order)."""
    if not (isinstance(a, FloatVector) and a == b):
        return None

    def codegen(context, builder, signature, args):
        mask = ir.VectorType(ir.IntType(32), a.lanes)
        even = builder.shuffle_vector(args[0], args[1], ir.Constant(mask, [2 * i for i in range(a.lanes)]))
        odd = builder.shuffle_vector(args[0], args[1], ir.Constant(mask, [2 * i + 1 for i in range(a.lanes)]))
        return builder.fadd(even, odd)
    return a(a, b), codegen


@intrinsic
def choose(typingctx, condition, if_true, if_false):
    """``if_true if condition else if_false`` for vectors, as one LLVM ``select`` (no branch)."""
    if not (isinstance(condition, types.Boolean) and isinstance(if_true, FloatVector) and if_true == if_false):
        return None

    def codegen(context, builder, signature, args):
        return builder.select(args[0], args[1], args[2])
    return if_true(condition, if_true, if_false), codegen


@intrinsic
def choose_first(typingctx, count, first, rest):
    """The first ``count`` lanes of ``first``, the others of ``rest``: one LLVM ``select`` on a lane
    mask (a blend, no branch)."""
    if not (isinstance(count, types.Integer) and isinstance(first, FloatVector) and first == rest):
        return None

    def codegen(context, builder, signature, args):
        mask = _lane_mask(context, builder, signature.args[0], args[0], first.lanes)
        return builder.select(mask, args[1], args[2])
    return first(count, first, rest), codegen


@intrinsic
def splat(typingctx, array, value):
    """A vector of ``array``'s element type with ``value`` in every lane."""
    if not (_float_array(array) and isinstance(value, (types.Float, types.Integer))):
        return None
    vector_type = FloatVector(array.dtype)

    def codegen(context, builder, signature, args):
        return broadcast(builder, context.cast(builder, args[1], signature.args[1], array.dtype), vector_type.lanes)
    return vector_type(array, value), codegen


def _prefetch_intrinsic(locality: int, doc: str):
    """A prefetch intrinsic with LLVM's ``locality`` (3: every cache level, 2: L2 and beyond)."""
    def prefetch(typingctx, array, index):
        if not (isinstance(array, types.Array) and isinstance(index, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            byte_pointer = ir.IntType(8).as_pointer()
            data = builder.bitcast(context.make_array(signature.args[0])(context, builder, args[0]).data,
                                   byte_pointer)
            offset = builder.mul(context.cast(builder, args[1], signature.args[1], types.intp),
                                 context.get_constant(types.intp, array.dtype.bitwidth // 8))
            int32 = ir.IntType(32)
            function = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32]), "llvm.prefetch.p0")
            # (address, 0 = read, locality, 1 = data)
            builder.call(function, [builder.gep(data, [offset]), ir.Constant(int32, 0), ir.Constant(int32, locality),
                                    ir.Constant(int32, 1)])
            return context.get_dummy_value()
        return types.void(array, index), codegen
    prefetch.__doc__ = doc
    return intrinsic(prefetch)


prefetch = _prefetch_intrinsic(3, """Start loading the cache line of ``array[index]`` in the background (a hint:
no fault, no effect on results), so that a later load finds it in the cache.""")
prefetch_l2 = _prefetch_intrinsic(2, """``prefetch`` into L2 (and L3) but not L1: for data needed after
the current working set, which a prefetch into L1 would evict.""")


def _lines_of(prefetch_line, name: str):
    """``name(array, first, last)``: ``prefetch_line`` of each 64-byte line of ``array[first:last]``,
    one request a line apart from ``first``."""
    def lines(array, first, last):
        line = LINE_BYTES // array.itemsize
        e = first
        while e < last:  # not range(first, last, line): its trip count costs a division per call
            prefetch_line(array, e)
            e += line
    lines.__name__ = lines.__qualname__ = name
    lines.__doc__ = f"``{name.removesuffix('_range')}`` of the lines of ``array[first:last]``."
    return njit(inline="always")(lines)


prefetch_range = _lines_of(prefetch, "prefetch_range")
prefetch_l2_range = _lines_of(prefetch_l2, "prefetch_l2_range")


@njit(inline="always")
def line_share(elements, parts, line):
    """Elements of a run per part, in whole lines of ``line`` elements, when the run's lines are
    requested a share per part of a loop (``prefetch_l2_range``), so that its memory reads overlap
    the loop's work instead of arriving in one burst: no division per part."""
    return -(-(-(-elements // line)) // max(parts, 1)) * line


@intrinsic
def store_fence(typingctx):
    """Make the preceding non-temporal stores visible before a job is reported done: ``sfence``
    on x86 (a locked instruction need not order write-combining stores there), a full fence in
    portable IR elsewhere (``llvm.x86.sse.sfence`` does not compile for other targets)."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        if _X86:
            fence = builder.module.declare_intrinsic("llvm.x86.sse.sfence", fnty=ir.FunctionType(ir.VoidType(), []))
            builder.call(fence, [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()

    return sig, codegen
