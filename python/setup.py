# The extension treesync._treesync (pyproject.toml holds the metadata).  The C++ headers are the
# library's own include/ next to this folder, or TREESYNC_INCLUDE_DIR; the version is the header's.
# TREESYNC_WERROR=1 adds -Werror (CI); the warnings are always -Wall -Wextra -Wpedantic.
import os
import re

from pybind11.setup_helpers import Pybind11Extension
from setuptools import setup

here = os.path.dirname(os.path.abspath(__file__))
include = os.environ.get("TREESYNC_INCLUDE_DIR") or os.path.join(here, "..", "include")
header = os.path.join(include, "treesync", "treesync.hpp")
if not os.path.isfile(header):
    raise SystemExit("treesync: %s is missing (set TREESYNC_INCLUDE_DIR to the library's include/)" % header)
with open(header) as f:
    version = re.search(r'^#define TREESYNC_VERSION_STRING "([0-9.]+)"', f.read(), re.M).group(1)

flags = ["-Wall", "-Wextra", "-Wpedantic"]
if os.environ.get("TREESYNC_WERROR") == "1":
    flags.append("-Werror")

setup(
    version=version,
    ext_modules=[
        Pybind11Extension(
            "treesync._treesync",
            ["src/_treesync.cpp"],
            include_dirs=[include],
            cxx_std=17,
            extra_compile_args=flags,
            extra_link_args=["-pthread"],
        )
    ],
)
