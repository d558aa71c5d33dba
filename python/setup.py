"""Builds the fadsl Python package, and with it the C libraries it calls.

The package calls libfadsl and libfadsl_attention through ctypes.  By default
`pip install ./python` (from a clone of the repository) builds both from the
repository's sources -- autoreconf if `configure` is missing, configure, and
make of just those two libraries -- and installs them inside the package
(fadsl/_native/).  Variables:

  FADSL_BUILD_DIR=DIR       build in DIR, an existing or a new build tree
                            (default python/build/native); an already built
                            tree costs only make's check that it is current
  FADSL_CONFIGURE_FLAGS=..  extra flags for configure (a new build tree only)
  FADSL_LIB_DIR=DIR[:DIR]   use an installed copy instead: nothing is built,
                            and the package looks for the libraries there at
                            import time (the variable must then be set)
  FADSL_BUILD_LIBS=0|1      0: build nothing (find the libraries at import:
                            FADSL_LIB_DIR, pkg-config, the loader's path);
                            1: build, and fail if the sources are missing
"""
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
TOP = HERE.parent
LIBS = [("runtime", "libfadsl.so.0"), ("examples/attention", "libfadsl_attention.so.0")]


def version():
    ac = TOP / "configure.ac"
    if ac.exists():
        m = re.search(r"AC_INIT\(\[fadsl\],\s*\[([^\]]+)\]", ac.read_text())
        if m:
            return m.group(1)
    return "0.0.0"


def run(cmd, cwd):
    print("fadsl:", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=str(cwd), check=True)


def build_native(dest):
    mode = os.environ.get("FADSL_BUILD_LIBS", "auto")
    if mode == "auto" and os.environ.get("FADSL_LIB_DIR"):
        mode = "0"
    if mode == "0":
        print("fadsl: not building the C libraries; they are found at import time "
              "(FADSL_LIB_DIR, pkg-config fadsl, or the loader's path)")
        return
    if not (TOP / "configure.ac").exists():
        if mode == "1":
            raise RuntimeError(f"fadsl: no sources at {TOP} to build the C libraries from")
        print("fadsl: no C sources beside the package; set FADSL_LIB_DIR at import time")
        return
    build = Path(os.environ.get("FADSL_BUILD_DIR") or HERE / "build" / "native").resolve()
    if not (build / "Makefile").exists():
        if not (TOP / "configure").exists():
            run(["autoreconf", "-fi"], TOP)
        build.mkdir(parents=True, exist_ok=True)
        flags = shlex.split(os.environ.get("FADSL_CONFIGURE_FLAGS", ""))
        run([TOP / "configure", *flags], build)
    jobs = str(os.cpu_count() or 2)
    run(["make", "-j" + jobs] + [f"{d}/{lib[:-5]}.la" for d, lib in LIBS], build)
    dest.mkdir(parents=True, exist_ok=True)
    for d, lib in LIBS:
        src = build / d / ".libs" / lib
        shutil.copyfile(src.resolve(), dest / lib)   # the file the symlink names
    # attention.fa and the modules it imports (attention_core.fa), the
    # variants' programs and decoding: the files a program beside them finds
    attention = TOP / "examples" / "attention"
    for src in sorted(attention.glob("*.fa")) + sorted(attention.glob("variants/*.fa")):
        (dest / src.relative_to(attention)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest / src.relative_to(attention))


class BuildPy(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            build_native(HERE / "fadsl" / "_native")
        else:
            build_native(Path(self.build_lib) / "fadsl" / "_native")


class BinaryDistribution(Distribution):
    """The wheel holds shared libraries: give it a platform tag."""

    def has_ext_modules(self):
        return True


setup(version=version(), cmdclass={"build_py": BuildPy}, distclass=BinaryDistribution)
