"""Builds graphrun's Python package (graphrun._graphrun, a CPython extension
over include/graphrun.h) against libgraphrun.  Nothing comes from PyPI:
setuptools, wheel, numpy and the Python headers are Debian packages
(scripts/bootstrap.sh installs them).

    python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation ./python

Which libgraphrun (docs/python.md, "Installing"):
  GRAPHRUN_PREFIX=/opt/graphrun   an installed graphrun (cmake --install):
                                  PREFIX/include and PREFIX/lib*/libgraphrun.so,
                                  found again at run time through an rpath;
  otherwise, in the source tree,  the build folder GRAPHRUN_BUILD_DIR (relative to
                                  the source tree; default build), which is configured if missing and
                                  brought up to date (cmake --build --target
                                  graphrun_shared; GRAPHRUN_NO_BUILD=1 skips
                                  that); its libgraphrun.so.0 is copied into
                                  the package, so the install does not depend
                                  on the build folder afterwards;
  otherwise                       pkg-config graphrun.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("GRAPHRUN_SOURCE_DIR") or os.path.dirname(HERE)


def note(msg):
    print("graphrun setup: " + msg, file=sys.stderr)


def version():
    # include/graphrun.h is the version's one source (GR_VERSION_MAJOR...)
    try:
        with open(os.path.join(ROOT, "include", "graphrun.h")) as f:
            text = f.read()
        parts = [re.search(r"^#define GR_VERSION_%s +([0-9]+)$" % k, text, re.M)
                 for k in ("MAJOR", "MINOR", "PATCH")]
        if all(parts):
            return ".".join(m.group(1) for m in parts)
    except OSError:
        pass
    return "0.1.0"


def from_prefix(prefix):
    for sub in ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu"):
        if glob.glob(os.path.join(prefix, sub, "libgraphrun.so*")):
            return [os.path.join(prefix, "include")], os.path.join(prefix, sub), None
    sys.exit(f"graphrun setup: no libgraphrun.so under {prefix}/lib*")


def from_build_tree():
    header = os.path.join(ROOT, "include", "graphrun.h")
    if not os.path.exists(header) or not os.path.exists(os.path.join(ROOT, "CMakeLists.txt")):
        return None
    # relative to the source tree: pip runs this file from a folder of its choice
    build = os.path.join(ROOT, os.environ.get("GRAPHRUN_BUILD_DIR") or "build")
    if os.environ.get("GRAPHRUN_NO_BUILD") != "1":
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            note(f"configuring {build}")
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release"])
        note(f"building libgraphrun in {build}")
        subprocess.check_call(["cmake", "--build", build, "--target", "graphrun_shared",
                               "-j" + os.environ.get("JOBS", "2")])
    lib = os.path.join(build, "libgraphrun.so")
    if not os.path.exists(lib):
        sys.exit(f"graphrun setup: {lib} is missing (build it: cmake --build {build})")
    return [os.path.join(ROOT, "include")], build, os.path.realpath(lib)


def from_pkg_config():
    try:
        flags = subprocess.check_output(["pkg-config", "--cflags-only-I", "--libs-only-L",
                                         "graphrun"], text=True).split()
    except (OSError, subprocess.CalledProcessError):
        sys.exit("graphrun setup: no libgraphrun found: build this source tree first "
                 "(make build), or set GRAPHRUN_PREFIX, or PKG_CONFIG_PATH for an install")
    inc = [f[2:] for f in flags if f.startswith("-I")]
    lib = [f[2:] for f in flags if f.startswith("-L")]
    return inc, (lib[0] if lib else None), None


def locate():
    if os.environ.get("GRAPHRUN_PREFIX"):
        return from_prefix(os.environ["GRAPHRUN_PREFIX"])
    return from_build_tree() or from_pkg_config()


class BuildExt(build_ext):
    """Copies the in-tree libgraphrun.so.0 next to the extension, whose
    rpath ($ORIGIN) finds it there, and the modules that were built
    (libgraphrun-cuda.so, libgraphrun-mpi.so), which libgraphrun opens
    from its own folder when a program first needs them."""

    def run(self):
        super().run()
        if BUNDLE:
            files = [(BUNDLE, "libgraphrun.so.0")]
            for mod in sorted(glob.glob(os.path.join(os.path.dirname(BUNDLE), "libgraphrun-*.so"))):
                files.append((mod, os.path.basename(mod)))
            dirs = [os.path.join(self.build_lib, "graphrun")]
            if self.inplace:
                dirs.append(os.path.join(HERE, "graphrun"))
            for d in dirs:
                os.makedirs(d, exist_ok=True)
                for src, name in files:
                    shutil.copyfile(src, os.path.join(d, name))


# Only a build needs the library (not `setup.py --version`, clean, egg_info).
needs_lib = any(a.startswith(("build", "bdist", "install", "develop", "editable_wheel"))
                for a in sys.argv[1:])
INCLUDE, LIBDIR, BUNDLE = locate() if needs_lib else (None, None, None)
ext = Extension(
    "graphrun._graphrun",
    sources=["graphrun/_graphrun.c"],
    include_dirs=INCLUDE or [],
    library_dirs=[LIBDIR] if LIBDIR else [],
    libraries=["graphrun"],
    runtime_library_dirs=["$ORIGIN"] if BUNDLE else ([LIBDIR] if LIBDIR else []),
    extra_compile_args=["-std=c11", "-Wall", "-Wextra"],
)

setup(
    name="graphrun",
    version=version(),
    description="Python bindings of graphrun, a dataflow-graph runtime (.graph models)",
    packages=["graphrun"],
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExt},
    python_requires=">=3.9",
    install_requires=[],  # numpy: Debian's python3-numpy (not pinned, so pip never fetches it)
    zip_safe=False,
)
