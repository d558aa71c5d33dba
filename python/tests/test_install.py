"""Installation as a user does it: a clean clone of this repository, a fresh
virtual environment, `pip install ./python` (which builds the C libraries from
the clone), then the package used from elsewhere.  Needs git, the venv module
and PyPI (pip fetches setuptools and numpy); FADSL_TEST_INSTALL=0 skips it."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]


def _git_checkout():
    if not shutil.which("git"):
        return False
    r = subprocess.run(["git", "-C", str(TOP), "rev-parse", "--is-inside-work-tree"], capture_output=True, text=True)
    return r.returncode == 0 and r.stdout.strip() == "true"


@pytest.mark.skipif(os.environ.get("FADSL_TEST_INSTALL") == "0", reason="FADSL_TEST_INSTALL=0")
@pytest.mark.skipif(not _git_checkout(), reason="not in a git checkout (nothing to clone)")
def test_clean_clone_into_a_fresh_venv(tmp_path):
    src, venv = tmp_path / "src", tmp_path / "venv"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FADSL_", "PYTHON", "PIP_", "VIRTUAL_ENV"))}
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(TOP), str(src)], check=True, env=env)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(src / "python")],
                         capture_output=True, text=True, env=env, timeout=1800)
    assert pip.returncode == 0, pip.stdout[-4000:] + pip.stderr[-4000:]
    shutil.rmtree(src)   # the installed package must not need the clone any more
    code = ("import numpy as np, fadsl\n"
            "q = np.random.default_rng(0).standard_normal((1, 2, 50, 32)).astype(np.float16)\n"
            "o = fadsl.attention(q, q, q, causal=True)\n"
            "assert o.shape == q.shape and np.isfinite(o.astype(np.float32)).all()\n"
            "print(fadsl.__version__, fadsl._lib.core_path)\n")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=str(tmp_path), capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stderr
    version, lib = out.stdout.split()
    import fadsl
    assert version == fadsl.__version__
    assert lib.startswith(str(venv)), f"the installed package loaded {lib}, not its own copy"
