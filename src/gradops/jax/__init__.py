"""gradops in JAX programs (extra ``gradops[jax]``): differentiable ops whose forward and backward
passes run gradops' operators.

* :func:`depthwise_conv2d` - TensorFlow's ``DepthwiseConv2dNative`` (filter ``[kh, kw, C, M]``);
  gradients ``..._BackpropInput`` and ``..._BackpropFilter``.
* :func:`resize` - ``jax.image.resize(..., antialias=False)``, nearest and linear; gradient
  DirectML ``RESAMPLE_GRAD1``.
* :func:`relu` - DirectML ``ACTIVATION_RELU``; gradient ``ACTIVATION_RELU_GRAD``.

Each is a ``jax.custom_vjp`` over a host callback (``jax.experimental.buffer_callback``, which
writes into XLA's output buffer, or ``jax.pure_callback`` where JAX lacks it): it works under
``jit``, ``grad``, ``vjp`` and ``vmap`` and their compositions. Forward-mode differentiation (``jvp``, ``jacfwd``)
and derivatives of second order are not available: JAX raises its error for them ("can't apply
forward-mode autodiff (jvp) to a custom_vjp function", or "Buffer callbacks do not support JVP").
Arguments are checked when the function is traced; a bad one raises a
:class:`gradops.GradopsError` naming it.

Importing :mod:`gradops` does not import this module or JAX.
"""

from ._depthwise import depthwise_conv2d
from ._relu import relu
from ._resize import resize

__all__ = ["depthwise_conv2d", "relu", "resize"]
