"""The conformance kit: frozen test vectors and a live check against installed frameworks.

* :mod:`gradops.conformance.format`: the corpus format (docs/vectors.md): tensor bindings as raw
  little-endian buffers, comparison rules, deterministic JSON.
* :mod:`gradops.conformance.vectors`: ``export`` a corpus of cases for every operator and
  ``check`` (replay) one against gradops.
* :mod:`gradops.conformance.check`: ``gradops check``, gradops against TensorFlow / PyTorch / JAX / ONNX
  under every framework convention of SPEC section 6.

Importing this package imports nothing heavy; each command loads what it needs.
"""
