#!/usr/bin/env python3
"""The Python package as a user gets it: the ctest tests `treesync.python` and
`treesync.python.nonroot` (python/CMakeLists.txt registers them).

    python3 python/ci_test.py --work BUILD/python-test [--werror]

1. the sdist, made from the repository root as the README says (pyproject.toml, meson-python:
   `meson dist`, i.e. the files git tracks at HEAD):
       python3 -m build --sdist --no-isolation --outdir WORK/dist REPO
2. the wheel, built from that sdist alone: unpacked into an empty temporary directory (no checkout
   beside it), `python3 -m build --wheel --no-isolation` there (-Csetup-args=-Dwerror=true with
   --werror); its members must be deflated (python/backend/treesync_wheel_backend.py), or FAIL;
3. a fresh venv (python3 -m venv --system-site-packages WORK/venv), the wheel installed into it
   (pip --no-index); `treesync --version` from its bin/ and `python -m treesync --version`;
4. the sdist's pytest suite (python/tests, with README.md and python/README.md, which it reads; it
   runs mypy on their Python examples where Debian's mypy is installed) copied to WORK/suite and run
   there with the venv's interpreter, after checking that `import treesync` is the installed package
   (tmp_path under WORK/pytest-tmp, removed after).

The sdist holds what is committed: uncommitted changes are not in it (said so at the start).
Needs Debian's python3-mesonpy python3-build python3-pybind11 pybind11-dev python3-pytest
python3-venv patchelf, and meson, ninja and git, for the interpreter they were installed for
(/usr/bin/python3, tried first); without them, or outside a git checkout, the test is skipped (exit
77), saying why.

    python3 python/ci_test.py --work BUILD/python-test --nonroot

is `treesync.python.nonroot`: the same suite as an unprivileged user (uid/gid 65534, through
`setpriv --reuid=65534 --regid=65534 --clear-groups`), run by root.  It reuses the wheel the run
above built in WORK when HEAD's tree is the one it was built from (WORK/built.stamp), builds it
otherwise; installs it into a fresh venv in a directory under /tmp that user owns (HOME and TMPDIR
too), with the suite, runs pytest there as that user and removes the directory.  Not root: skipped
(exit 77), as treesync.python already runs unprivileged.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

SKIP = 77
PACKAGES = "python3-mesonpy python3-build python3-pybind11 pybind11-dev python3-pytest python3-venv patchelf meson ninja-build git"
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
NOBODY = 65534  # the unprivileged user and group of --nonroot
T0 = time.monotonic()


def say(text):
    print("==== [%5.1f s] %s" % (time.monotonic() - T0, text), flush=True)


def usable(python):
    """Whether `python` has what the build needs; the reason when it has not."""
    probe = ("import importlib.util as u, os\n"
             "missing = [m for m in ('mesonpy', 'build', 'pybind11', 'pytest', 'venv', 'ensurepip') if not u.find_spec(m)]\n"
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


def git(*args):
    return subprocess.run(["git", "-C", REPO] + list(args), capture_output=True, text=True)


def head_tree():
    """HEAD's tree (what the sdist holds), or None with the reason."""
    r = git("rev-parse", "HEAD^{tree}")
    if r.returncode != 0:
        return None, (r.stderr.strip() or "git rev-parse failed")
    return r.stdout.strip(), ""


def env_for_build():
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", NO_COLOR="1")
    env.pop("PYTHONPATH", None)
    return env


def run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, **kw).returncode


def build(python, work, werror, tree):
    """sdist, then the wheel from the unpacked sdist alone; (wheel path, sdist path) or None."""
    dist = os.path.join(work, "dist")
    stamp = os.path.join(work, "built.stamp")
    if os.path.exists(stamp):
        os.remove(stamp)
    shutil.rmtree(dist, ignore_errors=True)
    os.makedirs(dist)
    env = env_for_build()

    say("the sdist, from the repository root")
    if run([python, "-m", "build", "--sdist", "--no-isolation", "--outdir", dist, REPO], env=env, cwd=work) != 0:
        print("FAIL: python3 -m build --sdist failed")
        return None
    sdists = glob.glob(os.path.join(dist, "*.tar.gz"))
    if len(sdists) != 1:
        print("FAIL: expected one sdist in %s, found %s" % (dist, sdists))
        return None
    sdist = sdists[0]
    top = os.path.basename(sdist)[:-len(".tar.gz")]
    with tarfile.open(sdist) as tar:
        names = set(tar.getnames())
    needed = ["PKG-INFO", "pyproject.toml", "meson.build", "meson_options.txt", "include/treesync/treesync.hpp",
              "include/treesync/engine.cpp", "examples/treesync.cpp", "python/meson.build",
              "python/src/_treesync.cpp", "python/treesync/__init__.py", "python/treesync/__main__.py",
              "python/tests/test_treesync.py", "python/backend/treesync_wheel_backend.py", "README.md", "LICENSE"]
    missing = [n for n in needed if top + "/" + n not in names]
    if missing:
        print("FAIL: the sdist %s lacks %s" % (sdist, ", ".join(missing)))
        return None
    print("sdist: %s (%d bytes, %d members)" % (sdist, os.path.getsize(sdist), len(names)))

    tmp = tempfile.mkdtemp(prefix="treesync-sdist-")
    try:
        say("the wheel, from the sdist unpacked alone in %s" % tmp)
        with tarfile.open(sdist) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(tmp, filter="data")
            else:
                tar.extractall(tmp)
        if os.listdir(tmp) != [top]:
            print("FAIL: the sdist unpacks to %s, not %s/" % (os.listdir(tmp), top))
            return None
        cmd = [python, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist]
        if werror:
            cmd.append("-Csetup-args=-Dwerror=true")
        if env.get("CCACHE_BASEDIR"):  # tests/run.sh's ccache (which meson picks itself): paths
            env = dict(env, CCACHE_BASEDIR=tmp)  # below the unpacked sdist hashed relative to it
        if run(cmd + [os.path.join(tmp, top)], env=env, cwd=tmp) != 0:
            print("FAIL: the wheel did not build from the sdist")
            return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wheels = glob.glob(os.path.join(dist, "*.whl"))
    if len(wheels) != 1:
        print("FAIL: expected one wheel in %s, found %s" % (dist, wheels))
        return None
    print("wheel: %s (%d bytes)" % (wheels[0], os.path.getsize(wheels[0])))
    with zipfile.ZipFile(wheels[0]) as whl:
        stored = [m.filename for m in whl.infolist() if m.file_size and m.compress_type != zipfile.ZIP_DEFLATED]
        print("wheel members: %d bytes uncompressed, %d deflated" % (
            sum(m.file_size for m in whl.infolist()), sum(m.compress_size for m in whl.infolist())))
    if stored:  # python/backend/treesync_wheel_backend.py deflates what meson-python stored
        print("FAIL: the wheel stores these members uncompressed: %s" % ", ".join(stored))
        return None
    with open(stamp, "w") as f:
        f.write("%s werror=%d\n" % (tree, werror))
    return wheels[0], sdist


def suite_from(sdist, dest):
    """The sdist's python/tests, README.md and python/README.md (which the suite reads) into dest
    (recreated)."""
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    top = os.path.basename(sdist)[:-len(".tar.gz")]
    with tarfile.open(sdist) as tar:
        for m in tar.getmembers():
            rel = m.name[len(top) + 1:] if m.name.startswith(top + "/") else None
            if rel and (rel in ("README.md", "python/README.md") or rel.startswith("python/tests/")) and m.isfile():
                out = os.path.join(dest, rel)
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with tar.extractfile(m) as src, open(out, "wb") as f:
                    shutil.copyfileobj(src, f)
    return os.path.join(dest, "python", "tests")


def install(python, venv, wheel, pip_python=None):
    """A fresh venv with the wheel installed, by the venv's own pip (Debian's python3-venv has it;
    python3-pip need not be installed), or by the pip of `pip_python` (another venv's: quicker, no
    pip to install); its python, or None."""
    shutil.rmtree(venv, ignore_errors=True)
    vpy = os.path.join(venv, "bin", "python")
    if pip_python is None:
        run([python, "-m", "venv", "--system-site-packages", venv], check=True)
        pip = [vpy, "-m", "pip"]
    else:
        run([python, "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True)
        pip = [pip_python, "-m", "pip", "--python", vpy]
    if run(pip + ["install", "--no-index", "--no-deps", "--no-compile", wheel], env=env_for_build()) != 0:
        print("FAIL: pip install of %s" % wheel)
        return None
    return vpy


def check_commands(vpy, version, cwd):
    """`treesync --version` from the venv's bin/ and `python -m treesync --version`."""
    tool = os.path.join(os.path.dirname(vpy), "treesync")
    ok = True
    for cmd in ([tool, "--version"], [vpy, "-m", "treesync", "--version"]):
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env_for_build())
        print("+ %s -> exit %d: %s" % (" ".join(cmd), out.returncode, (out.stdout + out.stderr).strip()))
        if out.returncode != 0 or out.stdout.strip() != "treesync " + version:
            print("FAIL: expected 'treesync %s' and exit 0" % version)
            ok = False
    return ok


def pkg_version(sdist):
    top = os.path.basename(sdist)[:-len(".tar.gz")]
    with tarfile.open(sdist) as tar:
        for line in tar.extractfile(top + "/PKG-INFO").read().decode().splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return "?"


def installed_check(vpy, where, env, cwd, prefix=None):
    """`import treesync` from cwd is the package installed under `where`."""
    r = subprocess.run(prefix + [vpy, "-c", "import treesync; print(treesync.__file__)"] if prefix else
                       [vpy, "-c", "import treesync; print(treesync.__file__)"],
                       capture_output=True, text=True, env=env, cwd=cwd)
    path = r.stdout.strip()
    print("import treesync -> %s" % (path or r.stderr.strip()))
    if r.returncode != 0 or not os.path.realpath(path).startswith(os.path.realpath(where) + os.sep):
        print("FAIL: import treesync is not the package installed in %s" % where)
        return False
    return True


def nonroot(python, work, werror, pytest_args):
    """The suite as uid/gid 65534 in a directory of its own (see the module's docstring)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        print("SKIP: setpriv (util-linux) is not installed")
        return SKIP
    tree, why = head_tree()
    if tree is None:
        print("SKIP: %s is not a git checkout (%s): the sdist is made from git" % (REPO, why))
        return SKIP
    stamp = os.path.join(work, "built.stamp")
    wheels = glob.glob(os.path.join(work, "dist", "*.whl"))
    sdists = glob.glob(os.path.join(work, "dist", "*.tar.gz"))
    current = (len(wheels) == 1 and len(sdists) == 1 and os.path.exists(stamp) and
               open(stamp).read().strip() == "%s werror=%d" % (tree, werror))
    if current:
        say("reusing the wheel built in %s (HEAD's tree unchanged): %s" % (work, wheels[0]))
        wheel, sdist = wheels[0], sdists[0]
    else:
        built = build(python, work, werror, tree)
        if built is None:
            return 1
        wheel, sdist = built
    home = tempfile.mkdtemp(prefix="treesync-python-nonroot-")
    try:
        venv = os.path.join(home, "venv")
        say("a fresh venv in %s, the wheel installed" % venv)
        work_python = os.path.join(work, "venv", "bin", "python")  # treesync.python's venv, with pip
        has_pip = os.path.exists(work_python) and subprocess.run(
            [work_python, "-m", "pip", "--version"], capture_output=True).returncode == 0
        vpy = install(python, venv, wheel, pip_python=work_python if has_pip else None)
        if vpy is None:
            return 1
        tests = suite_from(sdist, os.path.join(home, "suite"))
        for d, dirs, files in os.walk(home):
            for n in [d] + [os.path.join(d, x) for x in dirs + files]:
                os.lchown(n, NOBODY, NOBODY)
        os.chmod(home, 0o755)
        env = {"PATH": os.path.join(venv, "bin") + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
               "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        for key in ("TREESYNC_CANCEL_LIMIT",):
            if key in os.environ:
                env[key] = os.environ[key]
        as_nobody = [setpriv, "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
        cwd = os.path.join(home, "suite")
        if not installed_check(vpy, venv, env, cwd, prefix=as_nobody):
            return 1
        say("pytest as uid/gid %d in %s" % (NOBODY, cwd))
        cmd = as_nobody + [vpy, "-c",
                           "import os, sys, pytest\n"
                           "assert os.geteuid() == %d\n"
                           "sys.exit(pytest.main(sys.argv[1:]))" % NOBODY,
                           "-q", "-rs", "-p", "no:cacheprovider", "--rootdir", cwd,
                           "--basetemp", os.path.join(home, "pytest-tmp"), tests] + pytest_args
        return subprocess.run(cmd, env=env, cwd=cwd).returncode
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--werror", action="store_true", help="build with -Werror (meson's werror)")
    ap.add_argument("--nonroot", action="store_true",
                    help="as root: run the suite as uid/gid %d (treesync.python.nonroot)" % NOBODY)
    ap.add_argument("pytest_args", nargs="*")
    a = ap.parse_args()
    if a.nonroot and os.geteuid() != 0:
        print("SKIP: not root: treesync.python already runs the suite as this unprivileged user (uid %d)"
              % os.geteuid())
        return SKIP

    absent = [p for p in ("meson", "ninja", "git", "patchelf") if shutil.which(p) is None]
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
    if python is None or absent:
        print("SKIP: %s; apt-get install %s" % ("; ".join(
            (["not on PATH: " + " ".join(absent)] if absent else []) +
            ([] if python else [("no Python with meson-python, build, pybind11, pytest and venv (%s)"
                                 % ("; ".join(reasons) or "no python3 found"))])), PACKAGES))
        return SKIP
    print("python: %s" % python, flush=True)

    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    if a.nonroot:
        return nonroot(python, work, a.werror, a.pytest_args)

    tree, why = head_tree()
    if tree is None:
        print("SKIP: %s is not a git checkout (%s): the sdist is made from git (meson dist)" % (REPO, why))
        return SKIP
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    if dirty:
        print("NOTE: the sdist holds the committed files (HEAD); not these uncommitted changes:\n" + dirty)

    built = build(python, work, a.werror, tree)
    if built is None:
        return 1
    wheel, sdist = built
    venv = os.path.join(work, "venv")
    say("a fresh venv %s, the wheel installed" % venv)
    vpy = install(python, venv, wheel)
    if vpy is None:
        return 1
    tests = suite_from(sdist, os.path.join(work, "suite"))
    cwd = os.path.join(work, "suite")
    env = env_for_build()
    if not check_commands(vpy, pkg_version(sdist), cwd) or not installed_check(vpy, venv, env, cwd):
        return 1
    say("pytest, the sdist's suite in %s, against the installed package" % cwd)
    # a base for tmp_path of its own, removed after (not /tmp/pytest-of-USER, shared with any other
    # pytest run, whose old trees of a few hundred MB pytest removes at exit)
    basetemp = os.path.join(work, "pytest-tmp")
    r = subprocess.run([vpy, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--rootdir", cwd,
                        "--basetemp", basetemp, tests] + a.pytest_args, env=env, cwd=cwd)
    shutil.rmtree(basetemp, ignore_errors=True)
    say("done: pytest exit %d" % r.returncode)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
