"""The package imports without a GPU and without torch, and reports the C
library's version."""
import os
import re
import subprocess
import sys
from pathlib import Path

import fadsl


def test_version_is_the_librarys():
    import ctypes
    lib = ctypes.CDLL(fadsl._lib.core_path)
    lib.fadsl_version.restype = ctypes.c_char_p
    assert fadsl.__version__ == lib.fadsl_version().decode()
    configure = Path(__file__).resolve().parents[2] / "configure.ac"
    if configure.exists():
        want = re.search(r"AC_INIT\(\[fadsl\],\s*\[([^\]]+)\]", configure.read_text()).group(1)
        assert fadsl.__version__ == want


def test_import_needs_neither_torch_nor_gpu():
    env = dict(os.environ, FADSL_NO_DRIVER="1", CUDA_VISIBLE_DEVICES="")
    code = ("import sys, fadsl; assert 'torch' not in sys.modules, 'fadsl imported torch'; "
            "print(fadsl.__version__)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == fadsl.__version__


def test_errors_are_exceptions_with_the_message():
    e = fadsl.FadslInvalidArgument("x")
    assert isinstance(e, fadsl.FadslError) and isinstance(e, ValueError)
    assert isinstance(fadsl.FadslBindingError("x"), TypeError)
