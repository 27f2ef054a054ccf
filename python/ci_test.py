#!/usr/bin/env python3
"""Builds the treesync Python package the way the README says, into a private venv, and runs its
pytest suite: the ctest test `treesync.python` (python/CMakeLists.txt registers it).

    python3 python/ci_test.py --work BUILD/python-test [--werror]

The package and the headers are copied to WORK/src first (so the working tree gets no build/ or
.egg-info), then:  python3 -m venv --system-site-packages WORK/venv;
WORK/venv/bin/pip install --no-build-isolation --no-index WORK/src/python;  pytest.

Debian's python3-pybind11, python3-setuptools, python3-pytest and python3-venv are needed, for the
interpreter they were installed for (/usr/bin/python3, tried first).  Without them the test is
skipped (exit 77), saying what to install.
"""
import argparse
import os
import shutil
import subprocess
import sys

SKIP = 77
PACKAGES = "python3-pybind11 pybind11-dev python3-pytest python3-venv python3-setuptools"
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def usable(python):
    """Whether `python` has what the build needs; the reason when it has not."""
    probe = ("import importlib.util as u, os\n"
             "missing = [m for m in ('pybind11', 'setuptools', 'pytest', 'venv', 'ensurepip') if not u.find_spec(m)]\n"
             "if not missing:\n"
             "    import pybind11\n"
             "    if not os.path.isfile(os.path.join(pybind11.get_include(), 'pybind11', 'pybind11.h')):\n"
             "        missing.append('pybind11 headers')\n"
             "print(' '.join(missing))\n")
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    except OSError as e:
        return str(e)
    if out.returncode != 0:
        return out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "exit %d" % out.returncode
    return ("missing: " + out.stdout.strip()) if out.stdout.strip() else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--werror", action="store_true", help="build the extension with -Werror")
    ap.add_argument("pytest_args", nargs="*")
    a = ap.parse_args()

    candidates = [os.environ.get("TREESYNC_PACKAGE_PYTHON"), "/usr/bin/python3", sys.executable,
                  shutil.which("python3")]
    reasons, python = [], None
    for c in candidates:
        if not c or not os.path.exists(c):
            continue
        why = usable(c)
        if not why:
            python = c
            break
        reasons.append("%s: %s" % (c, why))
    if python is None:
        print("SKIP: no Python with pybind11, setuptools, pytest and venv (%s); apt-get install %s"
              % ("; ".join(reasons) or "no python3 found", PACKAGES))
        return SKIP
    print("python: %s" % python, flush=True)

    work = os.path.abspath(a.work)
    src = os.path.join(work, "src")
    shutil.rmtree(src, ignore_errors=True)
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".venv", "*.so", ".pytest_cache")
    shutil.copytree(os.path.join(REPO, "python"), os.path.join(src, "python"), ignore=ignore)
    shutil.copytree(os.path.join(REPO, "include"), os.path.join(src, "include"), ignore=ignore)
    shutil.copy(os.path.join(REPO, "README.md"), os.path.join(src, "README.md"))

    venv = os.path.join(work, "venv")
    vpy = os.path.join(venv, "bin", "python")
    if not os.path.exists(vpy):
        subprocess.run([python, "-m", "venv", "--system-site-packages", venv], check=True)
    env = dict(os.environ, TREESYNC_WERROR="1" if a.werror else "0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    print("==== pip install --no-build-isolation --no-index %s" % os.path.join(src, "python"), flush=True)
    r = subprocess.run([vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--force-reinstall",
                        "--no-deps", os.path.join(src, "python")], env=env, cwd=work)
    if r.returncode != 0:
        print("FAIL: the package did not build (pip exit %d)" % r.returncode)
        return 1
    # the documented one-liner works from any directory
    r = subprocess.run([vpy, "-c", "import treesync, sys; print('treesync', treesync.__version__, treesync.__file__)"],
                       env=env, cwd=work)
    if r.returncode != 0:
        return 1
    print("==== pytest", flush=True)
    r = subprocess.run([vpy, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(src, "python", "tests")]
                       + a.pytest_args, env=env, cwd=work)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
