"""gradops inside PyTorch: custom operators, a functional API, modules and ``replace_modules``.

``import gradops.torch`` registers ``torch.ops.gradops.*`` (see :mod:`gradops.torch.ops`) and needs
torch (``pip install gradops[torch]``); ``import gradops`` alone never imports torch.

- :func:`depthwise_conv2d`, :func:`interpolate`, :func:`relu`: torch's argument conventions
  (``F.conv2d(..., groups=C)``, ``F.interpolate``, ``F.relu``), differentiable;
- :class:`DepthwiseConv2d`, :class:`Upsample`, :class:`ReLU`: the torch modules' drop-ins;
- :func:`replace_modules`: swap them into an existing model.

On the fast backend each call runs on ``torch.get_num_threads()`` threads (README "PyTorch").
"""

try:
    import torch  # noqa: F401 - the dependency this subpackage needs
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("gradops.torch needs PyTorch: pip install 'gradops[torch]' (torch==2.13.0)") from exc

from ._convert import keep_openmp_to_torch

keep_openmp_to_torch()

from . import ops  # noqa: E402 - registers torch.ops.gradops.* after the threading choice
from .functional import depthwise_conv2d, interpolate, relu
from .modules import DepthwiseConv2d, ReLU, Replacements, Upsample, replace_modules

__all__ = ["ops", "depthwise_conv2d", "interpolate", "relu", "DepthwiseConv2d", "Upsample", "ReLU",
           "Replacements", "replace_modules"]
