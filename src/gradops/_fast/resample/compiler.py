"""The one numba internal the fast resample uses: a compiler pipeline with ``noalias``.

``_NoAliasCompiler`` subclasses ``numba.core.compiler.CompilerBase`` (numba's own pipeline
machinery, not its public API) so that LLVM may assume the array arguments do not alias. The
kernel (``kernels.py``) and the per-row functions (``writers.py``, ``columns_first.py``) pass it
as ``pipeline_class``; a numba release that changes that machinery is adapted to here alone.
"""

from __future__ import annotations

from numba.core.compiler import CompilerBase, DefaultPassBuilder


class _NoAliasCompiler(CompilerBase):
    """numba's nopython pipeline, with LLVM ``noalias`` on the array arguments: ``dst`` never
    overlaps ``src`` (callers reject such an ``out``) and the scratch rows are private, so LLVM
    can drop the runtime alias checks of the short row loops."""

    def define_pipelines(self):
        self.state.flags.noalias = True
        return [DefaultPassBuilder.define_nopython_pipeline(self.state)]
