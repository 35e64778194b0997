"""gradops: exact, portable, fast backward-pass operators of DirectML and TensorFlow.

NumPy in, NumPy out. Operator families: ReLU (``relu``, ``relu_grad``). Each DirectML operator
also has a descriptor (``ActivationReluGradDesc`` ...) built from :class:`TensorDesc` objects,
compiled once and run on raw buffers. Importing gradops compiles nothing; the fast backend's
kernels load on first use.
"""

from .dml import CompiledOperator, DataType, FeatureLevel, TensorDesc, calc_buffer_tensor_size
from .errors import (AliasingError, BindingError, DataTypeError, DescriptorError, FeatureLevelError,
                     GradopsError, ShapeError, UnsupportedError)
from .relu import ActivationReluDesc, ActivationReluGradDesc, relu, relu_grad

__version__ = "0.1.0"

__all__ = [
    "__version__",
    # tensor layer
    "DataType", "FeatureLevel", "TensorDesc", "calc_buffer_tensor_size", "CompiledOperator",
    # errors
    "GradopsError", "DescriptorError", "ShapeError", "DataTypeError", "AliasingError", "BindingError",
    "FeatureLevelError", "UnsupportedError",
    # ReLU family
    "relu", "relu_grad", "ActivationReluDesc", "ActivationReluGradDesc",
]
