"""The build backend of pyproject.toml: meson-python's, with the wheel's members compressed.

meson-python 0.12 (Debian 12's python3-mesonpy) opens the wheel with ZIP_DEFLATED but adds every
member with a ZipInfo of its own, whose compress_type is ZIP_STORED: the wheel came out
uncompressed (1.4 MB for about 600 KB of content).  build_wheel here is meson-python's, then each
member still stored is written again deflated: names, order, dates, modes and bytes stay as they
are, so RECORD (hashes and sizes of the uncompressed bytes) stays true.  A meson-python that
compresses leaves nothing to do here.  Every other hook is meson-python's own.
"""
import os
import stat
import tempfile
import zipfile

import mesonpy
from mesonpy import build_sdist, get_requires_for_build_sdist, get_requires_for_build_wheel  # noqa: F401

# hooks a newer meson-python has (editable installs): passed through when present
for _hook in ("build_editable", "get_requires_for_build_editable", "prepare_metadata_for_build_wheel",
              "prepare_metadata_for_build_editable"):
    if hasattr(mesonpy, _hook):
        globals()[_hook] = getattr(mesonpy, _hook)
del _hook


def deflate(path):
    """Rewrites the zip at `path` with every stored member deflated; whether it changed anything."""
    with zipfile.ZipFile(path) as old:
        members = old.infolist()
        if all(m.compress_type == zipfile.ZIP_DEFLATED or m.is_dir() for m in members):
            return False
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".whl.tmp")
        try:
            with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", allowZip64=True) as new:
                for m in members:
                    data = old.read(m)
                    info = zipfile.ZipInfo(m.filename, date_time=m.date_time)
                    info.external_attr = m.external_attr
                    info.create_system = m.create_system
                    info.compress_type = zipfile.ZIP_STORED if m.is_dir() else zipfile.ZIP_DEFLATED
                    new.writestr(info, data, compresslevel=9)
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))  # the mode meson-python gave it
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    return True


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = mesonpy.build_wheel(wheel_directory, config_settings, metadata_directory)
    deflate(os.path.join(wheel_directory, name))
    return name
