"""Corpus cases of the ReLU family (SPEC section 4): every case is bitwise, both operators are
selects (``X > 0 ? dY : +0`` and ``X > 0 ? X : +0``).

Covered: E11 and E17, the special-value cross product of SPEC 4.2 (NaN payloads, signed zeros,
infinities, extremes; no subnormal X, which a GPU may flush, SPEC 4.2), ranks 1-8, integer types
(FL 5.1), strided / padded / permuted / broadcast descriptors and oversized buffers, size-1
axes, and a seeded random set.
"""

from __future__ import annotations

import numpy as np

from ..dml import TensorDesc
from ..relu import ActivationReluDesc, ActivationReluGradDesc
from .cases import Case, CaseList, dml_case, rng_for, strided_desc

FAMILY = "relu"
nan, inf = np.nan, np.inf

E11_X = [1, 2, -1, 0, -0.0, nan, 3, -2, inf, -inf]
E11_DY = [inf, nan, inf, nan, -5, 7, -0.0, -3, 2, 2]
E17_X = [-2, -0.0, 0, 3, nan, inf, -inf]

_FLOAT_TYPES = {"FLOAT32": np.float32, "FLOAT16": np.float16}
_INT_TYPES = {"INT32": np.int32, "INT16": np.int16, "INT8": np.int8}
_NAN_BITS = {np.float32: (0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FC0BEEF),
             np.float16: (0x7E00, 0xFE00, 0x7C01, 0x7E5A)}  # quiet, negative, signalling, payload


def special_values(dtype: type) -> np.ndarray:
    """SPEC 4.2 value classes: signed zeros, +-1, +-0.5, infinities, the largest finite, the
    smallest normal, and NaNs with several bit patterns (dY passes bit for bit)."""
    info = np.finfo(dtype)
    finite = np.array([0.0, -0.0, 1, -1, 0.5, -0.5, inf, -inf, info.max, -info.max, info.tiny, -info.tiny],
                      dtype=dtype)
    bits = np.array(_NAN_BITS[dtype], dtype=np.uint32 if dtype == np.float32 else np.uint16)
    return np.concatenate([finite, bits.view(dtype)])


def _grad(x: TensorDesc, dy: TensorDesc | None = None, dx: TensorDesc | None = None) -> ActivationReluGradDesc:
    packed = TensorDesc(x.data_type, x.sizes)
    return ActivationReluGradDesc(x, dy or packed, dx or packed)


def _forward(x: TensorDesc, y: TensorDesc | None = None) -> ActivationReluDesc:
    return ActivationReluDesc(x, y or TensorDesc(x.data_type, x.sizes))


def _random_floats(rng: np.random.Generator, shape: tuple[int, ...], dtype: type, special_share: float) -> np.ndarray:
    """Normal values with a share of SPEC 4.2 special values mixed in."""
    values = rng.normal(0, 4, shape).astype(dtype)
    specials = special_values(dtype)
    mask = rng.random(shape) < special_share
    values[mask] = specials[rng.integers(0, specials.size, int(mask.sum()))]
    values[(np.abs(values) < np.finfo(dtype).tiny) & (values != 0)] = 0  # no subnormals: a GPU may flush them (SPEC 4.2)
    return values


def _random_ints(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    values = rng.integers(-5, 6, shape).astype(dtype)
    values.flat[: min(4, values.size)] = [info.min, info.max, 0, -1][: min(4, values.size)]
    return values


def cases() -> list[Case]:
    out = CaseList(FAMILY)
    add = out.add

    # E11 and E17, the worked examples.
    for type_name, dtype in _FLOAT_TYPES.items():
        x, dy = np.array(E11_X, dtype), np.array(E11_DY, dtype)
        add(dml_case(FAMILY, f"e11-relu-grad-{type_name.lower()}", "E11: RELU_GRAD special values "
                     "(X > 0 ? dY : +0)", _grad(TensorDesc(type_name, x.shape)),
                     {"input_tensor": x, "input_gradient_tensor": dy}, spec=("4.2", "E11"),
                     tags=("worked-example", "special-values", type_name.lower())))
        add(dml_case(FAMILY, f"e17-relu-{type_name.lower()}", "E17: RELU forward special values "
                     "(X > 0 ? X : +0; NaN and -0 give +0, a DECISION)", _forward(TensorDesc(type_name, (7,))),
                     {"input_tensor": np.array(E17_X, dtype)}, spec=("4.3", "E17"),
                     tags=("worked-example", "special-values", "decision", type_name.lower())))

    # Every pair of special values: X varies along axis 0, dY along axis 1.
    for type_name, dtype in _FLOAT_TYPES.items():
        values = special_values(dtype)
        n = values.size
        x = np.repeat(values[:, None], n, axis=1)
        dy = np.repeat(values[None, :], n, axis=0)
        add(dml_case(FAMILY, f"special-pairs-relu-grad-{type_name.lower()}", "RELU_GRAD on every pair of "
                     "SPEC 4.2 value classes, NaN payloads passed bit for bit",
                     _grad(TensorDesc(type_name, (n, n))), {"input_tensor": x, "input_gradient_tensor": dy},
                     spec=("4.2",), tags=("special-values", "nan-payload", type_name.lower())))
        add(dml_case(FAMILY, f"special-values-relu-{type_name.lower()}", "RELU on the SPEC 4.2 value classes",
                     _forward(TensorDesc(type_name, (n,))), {"input_tensor": values}, spec=("4.3",),
                     tags=("special-values", "decision", type_name.lower())))

    # Ranks 1-8 (RELU_GRAD above rank 4 needs FL 3.1, SPEC 4.1).
    shapes = {1: (7,), 2: (3, 5), 3: (2, 3, 4), 4: (2, 3, 2, 3), 5: (1, 2, 3, 1, 4), 6: (2, 1, 2, 3, 1, 2),
              7: (1, 2, 1, 3, 2, 1, 2), 8: (2, 1, 2, 1, 2, 3, 1, 2)}
    for rank, shape in shapes.items():
        for type_name, dtype in _FLOAT_TYPES.items():
            rng = rng_for(f"rank{rank}-{type_name}")
            x, dy = _random_floats(rng, shape, dtype, 0.2), _random_floats(rng, shape, dtype, 0.2)
            add(dml_case(FAMILY, f"rank{rank}-relu-grad-{type_name.lower()}", f"RELU_GRAD, rank {rank}",
                         _grad(TensorDesc(type_name, shape)), {"input_tensor": x, "input_gradient_tensor": dy},
                         spec=("4.1", "4.2"), tags=(f"rank-{rank}", type_name.lower())))
        rng = rng_for(f"rank{rank}-relu")
        add(dml_case(FAMILY, f"rank{rank}-relu-float32", f"RELU, rank {rank}", _forward(TensorDesc("FLOAT32", shape)),
                     {"input_tensor": _random_floats(rng, shape, np.float32, 0.2)}, spec=("4.1", "4.3"),
                     tags=(f"rank-{rank}", "float32")))

    # Integer types (SPEC 4.1 DECISION: FL 5.1), extremes included.
    for type_name, dtype in _INT_TYPES.items():
        rng = rng_for(f"int-{type_name}")
        x, dy = _random_ints(rng, (4, 6), dtype), _random_ints(rng, (4, 6), dtype)
        add(dml_case(FAMILY, f"int-relu-grad-{type_name.lower()}", f"RELU_GRAD on {type_name} (FL 5.1)",
                     _grad(TensorDesc(type_name, (4, 6))), {"input_tensor": x, "input_gradient_tensor": dy},
                     spec=("4.1", "4.2"), tags=("integer", type_name.lower())))
        add(dml_case(FAMILY, f"int-relu-{type_name.lower()}", f"RELU on {type_name} (FL 5.1)",
                     _forward(TensorDesc(type_name, (3, 5))), {"input_tensor": _random_ints(rng, (3, 5), dtype)},
                     spec=("4.1", "4.3"), tags=("integer", type_name.lower())))

    # Tensor descriptors: padding, NHWC-like permutations, broadcast inputs, oversized buffers.
    layouts = {
        "padded-rows": dict(pad=3),
        "nhwc": dict(order=(0, 2, 3, 1)),
        "nhwc-padded": dict(order=(0, 2, 3, 1), pad=1),
        "reversed-axes": dict(order=(3, 2, 1, 0)),
        "oversized": dict(extra_bytes=24),
    }
    shape = (2, 3, 2, 5)
    for label, options in layouts.items():
        for type_name, dtype in _FLOAT_TYPES.items():
            rng = rng_for(f"layout-{label}-{type_name}")
            x, dy = _random_floats(rng, shape, dtype, 0.1), _random_floats(rng, shape, dtype, 0.1)
            desc = ActivationReluGradDesc(strided_desc(type_name, shape, **options),
                                          strided_desc(type_name, shape, **{**options, "pad": 2}),
                                          strided_desc(type_name, shape, **options))
            add(dml_case(FAMILY, f"layout-{label}-relu-grad-{type_name.lower()}",
                         f"RELU_GRAD with {label} strides on every tensor (outputs compared on described "
                         "elements only)", desc, {"input_tensor": x, "input_gradient_tensor": dy},
                         spec=("2.2", "4.2"), tags=("strided", label, type_name.lower())))
        add(dml_case(FAMILY, f"layout-{label}-relu-float32", f"RELU with {label} strides",
                     ActivationReluDesc(strided_desc("FLOAT32", shape, **options),
                                        strided_desc("FLOAT32", shape, **options)),
                     {"input_tensor": _random_floats(rng_for(f"layout-{label}-relu"), shape, np.float32, 0.1)},
                     spec=("2.2", "4.3"), tags=("strided", label, "float32")))
    for type_name, dtype in _FLOAT_TYPES.items():
        rng = rng_for(f"broadcast-{type_name}")
        per_channel = _random_floats(rng, (1, 3, 1, 1), dtype, 0.2)
        x = np.broadcast_to(per_channel, shape).copy()
        dy = _random_floats(rng, shape, dtype, 0.1)
        desc = ActivationReluGradDesc(strided_desc(type_name, shape, broadcast=(0, 2, 3)),
                                      TensorDesc(type_name, shape), TensorDesc(type_name, shape))
        add(dml_case(FAMILY, f"broadcast-x-relu-grad-{type_name.lower()}", "RELU_GRAD with a per-channel X "
                     "broadcast by 0-strides {0,1,0,0} (SPEC 2.2)", desc,
                     {"input_tensor": x, "input_gradient_tensor": dy}, spec=("2.2", "4.2"),
                     tags=("broadcast", type_name.lower())))
        scalar_dy = np.full(shape, dtype(2.5))
        desc = ActivationReluGradDesc(TensorDesc(type_name, shape), strided_desc(type_name, shape,
                                                                                   broadcast=(0, 1, 2, 3)),
                                      strided_desc(type_name, shape, pad=1))
        add(dml_case(FAMILY, f"broadcast-dy-relu-grad-{type_name.lower()}", "RELU_GRAD with a scalar dY "
                     "(all strides 0) and a padded output", desc,
                     {"input_tensor": _random_floats(rng, shape, dtype, 0.2), "input_gradient_tensor": scalar_dy},
                     spec=("2.2", "4.2"), tags=("broadcast", "strided", type_name.lower())))

    # Size-1 axes.
    for shape in ((1,), (1, 1, 1, 1), (1, 5, 1, 1), (3, 1, 1, 1, 1, 1, 1, 2)):
        rng = rng_for(f"size1-{shape}")
        x, dy = _random_floats(rng, shape, np.float16, 0.3), _random_floats(rng, shape, np.float16, 0.3)
        label = "x".join(map(str, shape))
        add(dml_case(FAMILY, f"size1-{label}-relu-grad-float16", f"RELU_GRAD with sizes {list(shape)}",
                     _grad(TensorDesc("FLOAT16", shape)), {"input_tensor": x, "input_gradient_tensor": dy},
                     spec=("4.2",), tags=("size-1", "float16", f"rank-{len(shape)}")))

    # A seeded random set: rank, sizes, type, layouts and values.
    for index in range(16):
        name = f"random-{index:02d}"
        rng = rng_for(name)
        rank = int(rng.integers(1, 9))
        shape = tuple(int(s) for s in rng.integers(1, 5, rank))
        type_name = str(rng.choice(["FLOAT32", "FLOAT16", "INT32", "INT8"]))
        dtype = {**_FLOAT_TYPES, **_INT_TYPES}[type_name]

        def random_desc() -> TensorDesc:
            order = rng.permutation(rank) if rng.random() < 0.5 else None
            return strided_desc(type_name, shape, order=order, pad=int(rng.integers(0, 3)),
                                extra_bytes=int(rng.integers(0, 3)) * 4)

        def values() -> np.ndarray:
            if type_name in _INT_TYPES:
                return _random_ints(rng, shape, dtype)
            return _random_floats(rng, shape, dtype, 0.15)

        if rng.random() < 0.7:
            desc = ActivationReluGradDesc(random_desc(), random_desc(), random_desc())
            add(dml_case(FAMILY, f"{name}-relu-grad", f"random RELU_GRAD #{index}", desc,
                         {"input_tensor": values(), "input_gradient_tensor": values()}, spec=("4.2",),
                         tags=("random", type_name.lower(), f"rank-{rank}")))
        else:
            desc = ActivationReluDesc(random_desc(), random_desc())
            add(dml_case(FAMILY, f"{name}-relu", f"random RELU #{index}", desc, {"input_tensor": values()},
                         spec=("4.3",), tags=("random", type_name.lower(), f"rank-{rank}")))
    return out.cases
