"""gradops: exact, portable, fast backward-pass operators of DirectML and TensorFlow.

NumPy in, NumPy out. Operator families: ReLU (``relu``, ``relu_grad``); resample (``resample``,
``resample1``, ``resample2``, ``resample_grad``, ``resample_grad1``). Each DirectML operator
also has a descriptor (``ActivationReluGradDesc`` ...) built from :class:`TensorDesc` objects,
compiled once and run on raw buffers. Importing gradops compiles nothing; the fast backend's
kernels load on first use.
"""

from .dml import CompiledOperator, DataType, FeatureLevel, TensorDesc, calc_buffer_tensor_size
from .errors import (AliasingError, BindingError, DataTypeError, DescriptorError, FeatureLevelError,
                     GradopsError, ShapeError, UnsupportedError)
from .depthwise import (DepthwiseConv2dNativeBackpropFilterDesc, DepthwiseConv2dNativeBackpropInputDesc,
                        DepthwiseConv2dNativeDesc, depthwise_conv2d_native,
                        depthwise_conv2d_native_backprop_filter, depthwise_conv2d_native_backprop_input)
from .relu import ActivationReluDesc, ActivationReluGradDesc, relu, relu_grad
from .resample import (AxisDirection, InterpolationMode, Resample1Desc, Resample2Desc, ResampleDesc,
                       ResampleGrad1Desc, ResampleGradDesc, resample, resample1, resample2, resample_grad,
                       resample_grad1, resample_grad_params_from_forward)
from .conventions import DmlResampleParams

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
    # TensorFlow depthwise family
    "depthwise_conv2d_native", "depthwise_conv2d_native_backprop_input", "depthwise_conv2d_native_backprop_filter",
    "DepthwiseConv2dNativeDesc", "DepthwiseConv2dNativeBackpropInputDesc", "DepthwiseConv2dNativeBackpropFilterDesc",
    # resample family
    "resample", "resample1", "resample2", "resample_grad", "resample_grad1", "resample_grad_params_from_forward",
    "InterpolationMode", "AxisDirection", "ResampleDesc", "Resample1Desc", "Resample2Desc", "ResampleGradDesc",
    "ResampleGrad1Desc",
    # framework conventions (SPEC 6)
    "DmlResampleParams",
]
