"""The build step of the attnlab package (pyproject.toml has the rest):
the shared library the package loads is built by the checkout's Makefile
(`make build/libattnlab.so` in the folder above this one) and copied into
the package, so an installed attnlab needs no checkout. ATTNLAB_LIB names
an already built library instead (then no make is run)."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        lib = os.environ.get("ATTNLAB_LIB")
        if not lib:
            if not (os.path.isfile(os.path.join(ROOT, "Makefile")) and
                    os.path.isfile(os.path.join(ROOT, "include", "attnlab", "api.h"))):
                raise SystemExit("attnlab: build the package from its checkout "
                                 "(pip install --no-build-isolation ./python), or set ATTNLAB_LIB "
                                 "to a built libattnlab.so")
            subprocess.run(["make", "-C", ROOT, "--no-print-directory", "build/libattnlab.so"],
                           check=True)
            lib = os.path.join(ROOT, "build", "libattnlab.so")
        dst = os.path.join(self.build_lib, "attnlab")
        os.makedirs(dst, exist_ok=True)
        shutil.copyfile(lib, os.path.join(dst, "libattnlab.so"))


class BinaryDistribution(Distribution):
    """The wheel holds a compiled library: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
