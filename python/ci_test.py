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

    python3 python/ci_test.py --work BUILD/python-test --nonroot

is `treesync.python.nonroot`: the same pytest suite as an unprivileged user (uid/gid 65534, through
`setpriv --reuid=65534 --regid=65534 --clear-groups`), run by root.  It reuses the package the run
above built in WORK when its sources are unchanged (WORK/built.stamp: their digest), builds it
otherwise; copies the installed package and the tests into a fresh directory under /tmp that user
owns (HOME and TMPDIR too), runs pytest there with the interpreter the venv was made from, and
removes the directory.  Not root: skipped (exit 77), as treesync.python already runs unprivileged.
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
PACKAGES = "python3-pybind11 pybind11-dev python3-pytest python3-venv python3-setuptools"
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
IGNORE = ("build", "*.egg-info", "__pycache__", ".venv", "*.so", ".pytest_cache")
NOBODY = 65534  # the unprivileged user and group of --nonroot


def source_digest():
    """A digest of what the package is built from: python/ (its tests aside) and include/."""
    h = hashlib.sha256()
    ignore = shutil.ignore_patterns(*IGNORE)
    for top in ("python", "include"):
        for d, dirs, files in os.walk(os.path.join(REPO, top)):
            skip = ignore(d, dirs + files)
            dirs[:] = sorted(n for n in dirs if n not in skip and not (top == "python" and n == "tests" and
                                                                        d == os.path.join(REPO, "python")))
            for n in sorted(files):
                if n in skip:
                    continue
                path = os.path.join(d, n)
                h.update(os.path.relpath(path, REPO).encode() + b"\0")
                with open(path, "rb") as f:
                    h.update(f.read() + b"\0")
    return h.hexdigest()


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


def build(python, work, werror):
    """Copies the sources to WORK/src, installs the package into WORK/venv; the venv's python, or None."""
    digest = source_digest()
    src = os.path.join(work, "src")
    stamp = os.path.join(work, "built.stamp")
    if os.path.exists(stamp):
        os.remove(stamp)
    shutil.rmtree(src, ignore_errors=True)
    ignore = shutil.ignore_patterns(*IGNORE)
    shutil.copytree(os.path.join(REPO, "python"), os.path.join(src, "python"), ignore=ignore)
    shutil.copytree(os.path.join(REPO, "include"), os.path.join(src, "include"), ignore=ignore)
    shutil.copy(os.path.join(REPO, "README.md"), os.path.join(src, "README.md"))

    venv = os.path.join(work, "venv")
    vpy = os.path.join(venv, "bin", "python")
    if not os.path.exists(vpy):
        subprocess.run([python, "-m", "venv", "--system-site-packages", venv], check=True)
    env = build_env(werror)
    print("==== pip install --no-build-isolation --no-index %s" % os.path.join(src, "python"), flush=True)
    r = subprocess.run([vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--force-reinstall",
                        "--no-deps", os.path.join(src, "python")], env=env, cwd=work)
    if r.returncode != 0:
        print("FAIL: the package did not build (pip exit %d)" % r.returncode)
        return None
    with open(stamp, "w") as f:
        f.write(digest + "\n")
    return vpy


def build_env(werror):
    env = dict(os.environ, TREESYNC_WERROR="1" if werror else "0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    return env


def nonroot(python, work, werror, pytest_args):
    """The suite as uid/gid 65534 in a directory of its own (see the module's docstring)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        print("SKIP: setpriv (util-linux) is not installed")
        return SKIP
    vpy = os.path.join(work, "venv", "bin", "python")
    stamp = os.path.join(work, "built.stamp")
    current = os.path.exists(vpy) and os.path.exists(stamp) and open(stamp).read().strip() == source_digest()
    if current:
        print("==== reusing the package built in %s (its sources are unchanged)" % work, flush=True)
    else:
        vpy = build(python, work, werror)
        if vpy is None:
            return 1
    out = subprocess.run([vpy, "-c", "import os, treesync; print(os.path.dirname(treesync.__file__))"],
                         capture_output=True, text=True, env=build_env(werror), cwd=work)
    if out.returncode != 0:
        print(out.stderr)
        return 1
    package = out.stdout.strip()
    home = tempfile.mkdtemp(prefix="treesync-python-nonroot-")
    try:
        shutil.copytree(package, os.path.join(home, "lib", "treesync"), ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(os.path.join(REPO, "python", "tests"), os.path.join(home, "src", "python", "tests"),
                        ignore=shutil.ignore_patterns(*IGNORE))
        shutil.copy(os.path.join(REPO, "README.md"), os.path.join(home, "src", "README.md"))
        for d, dirs, files in os.walk(home):
            for n in [d] + [os.path.join(d, x) for x in dirs + files]:
                os.lchown(n, NOBODY, NOBODY)
        os.chmod(home, 0o755)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
               "PYTHONPATH": os.path.join(home, "lib"), "PYTHONDONTWRITEBYTECODE": "1"}
        for key in ("TREESYNC_CANCEL_LIMIT",):
            if key in os.environ:
                env[key] = os.environ[key]
        print("==== pytest as uid/gid %d in %s (%s)" % (NOBODY, home, python), flush=True)
        cmd = [setpriv, "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", python, "-c",
               "import os, sys, treesync, pytest\n"
               "assert os.geteuid() == %d and treesync.__file__.startswith(%r), treesync.__file__\n"
               "sys.exit(pytest.main(sys.argv[1:]))" % (NOBODY, os.path.join(home, "lib")),
               "-q", "-rs", "-p", "no:cacheprovider", os.path.join(home, "src", "python", "tests")] + pytest_args
        return subprocess.run(cmd, env=env, cwd=home).returncode
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--werror", action="store_true", help="build the extension with -Werror")
    ap.add_argument("--nonroot", action="store_true",
                    help="as root: run the suite as uid/gid %d (treesync.python.nonroot)" % NOBODY)
    ap.add_argument("pytest_args", nargs="*")
    a = ap.parse_args()
    if a.nonroot and os.geteuid() != 0:
        print("SKIP: not root: treesync.python already runs the suite as this unprivileged user (uid %d)"
              % os.geteuid())
        return SKIP

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
    os.makedirs(work, exist_ok=True)
    if a.nonroot:
        return nonroot(python, work, a.werror, a.pytest_args)
    vpy = build(python, work, a.werror)
    if vpy is None:
        return 1
    env = build_env(a.werror)
    # the documented one-liner works from any directory
    r = subprocess.run([vpy, "-c", "import treesync, sys; print('treesync', treesync.__version__, treesync.__file__)"],
                       env=env, cwd=work)
    if r.returncode != 0:
        return 1
    print("==== pytest", flush=True)
    r = subprocess.run([vpy, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        os.path.join(work, "src", "python", "tests")] + a.pytest_args, env=env, cwd=work)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
