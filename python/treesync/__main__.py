"""``python -m treesync [OPTIONS] SRC DST``: the treesync command-line tool installed with this
package (the C++ program ``treesync``, the wheel's script, in the environment's ``bin``), run with
the same arguments: the process is replaced by it, so its output, signals and exit status are the
tool's own (``python -m treesync --help``)."""

import os
import signal
import sys
import sysconfig

__all__ = ["tool_path", "main"]


def _candidates():
    """Where the installer put the tool: the package's own record of its files first (right for a
    venv, --user, --prefix, --target), then the interpreter's scripts directory."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from importlib import metadata
        dist = metadata.distribution("treesync")
        files = list(dist.files or ())
    except Exception:  # not installed from a wheel (a source tree on sys.path), or no metadata
        files = []
    # only the distribution this very package came from
    if any(os.path.abspath(str(f.locate())) == os.path.join(here, "__main__.py") for f in files):
        for f in files:
            if f.name == "treesync" and f.parent.name in ("bin", "scripts"):
                yield os.path.abspath(str(f.locate()))
    for scheme in (None, "posix_user" if "posix_user" in sysconfig.get_scheme_names() else None):
        scripts = sysconfig.get_path("scripts") if scheme is None else sysconfig.get_path("scripts", scheme)
        if scripts:
            yield os.path.join(scripts, "treesync")


def tool_path():
    """The path of the installed ``treesync`` program; None when it is not installed."""
    for path in _candidates():
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    path = tool_path()
    if path is None:
        sys.stderr.write("python -m treesync: the treesync program is not installed with this package "
                         "(install the package from its wheel or sdist: pip install .)\n")
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: the tool
    # gets the dispositions it has when run from a shell
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    os.execv(path, ["treesync"] + args)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
