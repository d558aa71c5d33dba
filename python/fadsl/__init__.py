"""fadsl from Python.

    import fadsl
    out = fadsl.attention(q, k, v, causal=True)    # in place of scaled_dot_product_attention
    prog = fadsl.load("kernels.fa")                 # any fadsl kernel, Triton-style
    prog.my_kernel(x, y, n, BLOCK=256)

torch CUDA tensors run on the GPU (autograd, torch.compile and CUDA graphs
included); numpy arrays and torch CPU tensors run the same kernels on fadsl's
CPU interpreter.  Importing fadsl needs neither a GPU nor torch.
"""
import sys as _sys

from ._lib import VERSION as __version__
from ._lib import FadslBindingError, FadslError, FadslInvalidArgument
from ._lib import attention_path as _attention_lib_path
from ._lib import core_path as _core_lib_path
from ._attention import attention, attention_backward
from ._program import Kernel, LaunchInfo, Program, load, load_string


def _attention_fa():
    from pathlib import Path
    p = Path(__file__).resolve().parent / "_native" / "attention.fa"
    return str(p) if p.exists() else None


#: The attention.fa the package was built with (None for an installed-library setup).
ATTENTION_FA = _attention_fa()

__all__ = ["attention", "attention_backward", "load", "load_string", "Program", "Kernel", "LaunchInfo",
           "FadslError", "FadslInvalidArgument", "FadslBindingError", "ATTENTION_FA", "__version__"]

# With torch already imported, register the custom ops now, so that a model
# traced by torch.compile finds them; otherwise the first call on a tensor does.
# (A torch too old for custom operators leaves the numpy path usable; calls
# on tensors then raise the ImportError that says why.)
if "torch" in _sys.modules:
    try:
        from . import _torch_ops  # noqa: F401
    except ImportError:
        pass
