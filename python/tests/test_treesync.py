"""pytest suite of the treesync Python package: every keyword of sync(), the errors, cancellation
(Ctrl-C and an Event, from another thread), callbacks (raising, one at a time), path types and
non-UTF-8 names, the seed's behaviours of sync_tree and its errors beside the old rmtree + copytree helper,
the README's migration snippet (also past the racy window), and the command the package installs
(`treesync`, the C++ tool, and `python -m treesync`).  ctest runs it against the package installed
from the wheel built from the sdist, as root and, through setpriv, as uid 65534
(treesync.python.nonroot; python/ci_test.py)."""

import _thread
import ast
import errno
import importlib.util
import inspect
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import threading
import time

import pytest

import treesync

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TEMP_PREFIX = ".treesync-tmp-"
# Ctrl-C / cancel: the run must return within this many seconds of the request.  The default only
# catches a run that does not stop (it would go on to copy the whole tree): a loaded CI machine can
# hold a thread for longer than the usual 100 ms, and a timing assertion that fails under load is a
# flaky test.  TREESYNC_CANCEL_LIMIT=0.1 checks the usual figure on a quiet machine.
CANCEL_LIMIT = float(os.environ.get("TREESYNC_CANCEL_LIMIT", "5"))


def write(path, data=b"x", mtime=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    if mtime is not None:
        os.utime(path, ns=(mtime, mtime))


def tree(root):
    """{relative path: ('d',) | ('l', target) | ('f', bytes)} of everything below root (bytes names)."""
    out = {}
    root = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("l", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("d",)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("f", f.read())
    return out


def ctimes(root):
    """The ctime and mtime of every entry (a write of any kind changes the ctime)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames + ["."]:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_ctime_ns, st.st_mtime_ns)
    return out


def temporaries(root):
    return [os.path.join(d, n) for d, ds, fs in os.walk(root) for n in ds + fs if n.startswith(TEMP_PREFIX)]


@pytest.fixture
def src(tmp_path):
    s = tmp_path / "src"
    write(str(s / "a.txt"), b"alpha")
    write(str(s / "sub" / "b.h"), b"beta")
    write(str(s / "sub" / "deep" / "c.h"), b"gamma")
    write(str(s / "sub" / "x.pyc"), b"bytecode")
    write(str(s / "__pycache__" / "m.cpython-311.pyc"), b"cache")
    return s


def test_version_and_stubs():
    assert re.match(r"^\d+\.\d+\.\d+$", treesync.__version__)
    stub = os.path.join(os.path.dirname(treesync.__file__), "__init__.pyi")
    assert os.path.isfile(stub)
    text = open(stub).read()
    # every keyword of sync() is in the stub, with the same default, and nothing else
    fn = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "sync")
    stubbed = {a.arg: ast.literal_eval(d) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults)}
    real = {name: p.default for name, p in inspect.signature(treesync.sync).parameters.items()
            if p.kind is p.KEYWORD_ONLY}
    assert stubbed == real
    assert ("def sync_tree(src: _Path, dst: _Path, exclude: _Patterns = (), *, delete_excluded: bool = True, "
            "follow_dst_symlink: bool = False) -> None") in text
    assert (str(inspect.signature(treesync.sync_tree)) ==
            "(src, dst, exclude=(), *, delete_excluded=True, follow_dst_symlink=False)")


def test_every_switch_of_the_library_table_is_a_keyword_documented_and_stubbed():
    params = inspect.signature(treesync.sync).parameters
    doc = " ".join(treesync.sync.__doc__.split())
    stub = open(os.path.join(os.path.dirname(treesync.__file__), "__init__.pyi")).read()
    switches = treesync._treesync.switches
    assert len(switches) >= 11
    for member, cli, help_text, value in switches:
        assert member in params and params[member].kind is params[member].KEYWORD_ONLY, member
        assert params[member].default is (None if value else False), member
        assert member in doc and ("    %s: " % member) in stub, member
        assert member in treesync._KEYWORDS, member


# sync()'s keywords no CLI option has: the callbacks, their interval, the cancel event, errors::stop
_PYTHON_ONLY = {"on_action", "progress", "progress_interval", "cancel", "stop_on_error"}


def test_the_cli_table_names_each_python_keyword_and_every_keyword_has_a_row(src, tmp_path):
    params = inspect.signature(treesync.sync).parameters
    keywords = {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
    named = set()
    for cli, py in treesync._treesync.cli_options:
        if not py:
            continue
        keyword, _, value = py.partition("=")
        assert keyword in keywords, (cli, py)
        named.add(keyword)
        if value:  # the value is one sync() takes: a dry run with it is not refused
            arg = {"False": False, "True": True}.get(value, value)
            treesync.sync(src, tmp_path / "d", dry_run=True, **{keyword: arg})
    switches = {member for member, _cli, _help, _value in treesync._treesync.switches}
    assert keywords - named - switches == _PYTHON_ONLY


def test_case_collisions_reports_names_that_differ_only_in_case(tmp_path):
    s = tmp_path / "s"
    write(str(s / "Readme"), b"a")
    write(str(s / "README"), b"b")
    r = treesync.sync(s, tmp_path / "d", case_collisions=True)
    assert [n for n in r.notices + r.errors if n.code == treesync._treesync.errc["case_collision"]]
    r = treesync.sync(s, tmp_path / "d2")
    assert not [n for n in r.notices + r.errors if n.code == treesync._treesync.errc["case_collision"]]


def test_keywords_are_checked_before_anything_is_read(src, tmp_path):
    for kw, match in [({"max_delete": -1}, "max_delete=-1: expected a count"),
                      ({"max_size": True}, "max_size=True: expected a size in bytes"),
                      ({"jobs": 2000}, "jobs=2000: expected a worker count"),
                      ({"dry_run": True, "state_memory": 0}, "state_memory=0: expected a size in bytes above 0"),
                      ({"compare": "sometimes"}, "compare='sometimes': expected one of")]:
        with pytest.raises(ValueError, match=re.escape(match)):
            treesync.sync(src, tmp_path / "never", **kw)
    assert not os.path.exists(str(tmp_path / "never"))
    with pytest.raises(TypeError, match="on_action: expected a callable"):
        treesync.sync(src, tmp_path / "never", on_action=1)


# ---- sync(): the keywords ------------------------------------------------------------------------

def test_cold_then_warm_report(src, tmp_path):
    dst = tmp_path / "dst"
    r = treesync.sync(src, dst)
    assert isinstance(r, treesync.Report)
    assert r.created == len(tree(src)) + 1 and r.errors == [] and r.ok and r.bytes_copied == 5 + 4 + 5 + 8 + 5
    assert r.elapsed >= 0 and not r.cancelled
    assert tree(dst) == tree(src)
    r = treesync.sync(src, dst)
    assert r.unchanged and r.writes == 0 and r.scanned > 0


def test_max_size_skips_larger_files(tmp_path):
    src, dst = tmp_path / "s", tmp_path / "d"
    src.mkdir()
    (src / "small").write_bytes(b"12345")
    (src / "large").write_bytes(b"1234567890")
    r = treesync.sync(src, dst, max_size=5)
    assert r.ok and (dst / "small").read_bytes() == b"12345" and not (dst / "large").exists()
    with pytest.raises(ValueError):
        treesync.sync(src, dst, max_size=-1)


def test_existing_creates_nothing_and_updates_what_exists(src, tmp_path):
    dst = tmp_path / "dst"
    write(str(dst / "a.txt"), b"old")
    r = treesync.sync(src, dst, existing=True)
    assert r.ok and r.created == 0 and r.updated == 1
    assert tree(dst) == {b"a.txt": ("f", b"alpha")}


def test_ignore_existing_leaves_what_exists_and_creates_the_rest(src, tmp_path):
    dst = tmp_path / "dst"
    write(str(dst / "a.txt"), b"old")
    r = treesync.sync(src, dst, ignore_existing=True)
    assert r.ok and r.updated == 0 and r.created > 0
    expected = tree(src)
    expected[b"a.txt"] = ("f", b"old")
    assert tree(dst) == expected


def test_delete_and_dry_run(src, tmp_path):
    dst = tmp_path / "dst"
    treesync.sync(src, dst)
    write(str(dst / "extra" / "e.txt"))
    r = treesync.sync(src, dst, dry_run=True)
    assert r.deleted == 2 and r.dry_run and (dst / "extra" / "e.txt").exists()
    r = treesync.sync(src, dst, delete=False)
    assert r.deleted == 0 and (dst / "extra").exists()
    r = treesync.sync(src, dst, delete=True)
    assert r.deleted == 2 and not (dst / "extra").exists()


def test_exclude_include_filter(src, tmp_path):
    r = treesync.sync(src, tmp_path / "d1", exclude=["*.pyc", "__pycache__/"])
    assert set(tree(tmp_path / "d1")) == {b"a.txt", b"sub", b"sub/b.h", b"sub/deep", b"sub/deep/c.h"}
    assert r.excluded == 2
    treesync.sync(src, tmp_path / "d2", include=["*/", "*.h"], exclude="*")
    assert {k for k, v in tree(tmp_path / "d2").items() if v[0] == "f"} == {b"sub/b.h", b"sub/deep/c.h"}
    treesync.sync(src, tmp_path / "d3", filter=["- /sub/deep/", "- *.pyc", "- __pycache__/"])
    assert b"sub/deep" not in tree(tmp_path / "d3") and b"sub/b.h" in tree(tmp_path / "d3")
    with pytest.raises(ValueError, match="not a rule"):
        treesync.sync(src, tmp_path / "d4", filter=["bogus rule"])


def test_exclude_from_include_from(src, tmp_path):
    ex = tmp_path / "ex.txt"
    ex.write_text("# comment\n*.pyc\n__pycache__/\n")
    inc = tmp_path / "inc.txt"
    inc.write_text("a.txt\n")
    treesync.sync(src, tmp_path / "d", exclude_from=ex)
    assert b"sub/x.pyc" not in tree(tmp_path / "d") and b"a.txt" in tree(tmp_path / "d")
    treesync.sync(src, tmp_path / "e", include_from=inc, exclude=["*"])
    assert set(tree(tmp_path / "e")) == {b"a.txt"}


def test_delete_excluded(src, tmp_path):
    dst = tmp_path / "dst"
    treesync.sync(src, dst)
    r = treesync.sync(src, dst, exclude=["*.pyc"])
    assert r.deleted == 0 and (dst / "sub" / "x.pyc").exists()
    r = treesync.sync(src, dst, exclude=["*.pyc"], delete_excluded=True)
    assert r.deleted == 2 and not (dst / "sub" / "x.pyc").exists()


def test_max_delete_refusal(src, tmp_path):
    dst = tmp_path / "dst"
    treesync.sync(src, dst)
    for i in range(5):
        write(str(dst / ("extra%d" % i)))
    before = tree(dst)
    with pytest.raises(treesync.Refused) as info:
        treesync.sync(src, dst, max_delete=4)
    assert info.value.count == 5 and "would delete 5 entries" in str(info.value)
    assert isinstance(info.value, treesync.Error) and isinstance(info.value, OSError)
    assert tree(dst) == before
    assert treesync.sync(src, dst, max_delete=5).deleted == 5


def test_refusals_say_the_clis_words_with_the_keywords_names(src, tmp_path):
    dst = tmp_path / "dst"
    treesync.sync(src, dst)
    for i in range(3):
        write(str(dst / ("extra%d" % i)))
    with pytest.raises(treesync.Refused) as info:
        treesync.sync(src, dst, max_delete=2)
    assert str(info.value) == "would delete 3 entries, max_delete=2 (none of them was made)"
    assert info.value.filename == str(dst)
    state = tmp_path / "no-such-dir" / "state"
    with pytest.raises(treesync.Refused) as info:  # the library's rule, as the CLI's kit classes it
        treesync.sync(src, dst, state=state)
    assert str(info.value).startswith("state=%s: state file: its directory does not exist" % state)
    assert str(info.value).endswith("(nothing was touched)") and info.value.filename == str(state)
    assert info.value.count is None


def test_allow_empty_source(tmp_path):
    empty, dst = tmp_path / "empty", tmp_path / "dst"
    empty.mkdir()
    write(str(dst / "keep"))
    with pytest.raises(treesync.Refused, match="is empty") as info:
        treesync.sync(empty, dst)
    assert info.value.filename == str(empty)
    assert treesync.sync(empty, dst, allow_empty_source=True).deleted == 1


@pytest.mark.parametrize("compare", ["size_mtime", "checksum", "size_only", "update", "ignore_times"])
def test_compare(tmp_path, compare):
    s, d = tmp_path / "s", tmp_path / "d"
    t = 1_600_000_000 * 10**9
    write(str(s / "f"), b"new!", mtime=t)
    write(str(d / "f"), b"old!", mtime=t + 10**9)  # same size, destination newer
    r = treesync.sync(s, d, compare=compare)
    expect = {"size_mtime": b"new!", "checksum": b"new!", "size_only": b"old!", "update": b"old!",
              "ignore_times": b"new!"}[compare]
    assert (d / "f").read_bytes() == expect, r


def test_compare_ignore_times_rewrites_an_unchanged_tree(tmp_path):
    s, d = tmp_path / "s", tmp_path / "d"
    write(str(s / "f"), b"data")
    write(str(s / "sub" / "g"), b"more")
    assert treesync.sync(s, d).created == 4  # d too
    ino = os.stat(d / "f").st_ino
    assert treesync.sync(s, d).updated == 0
    r = treesync.sync(s, d, compare="ignore_times")  # the CLI's -I: no file is current
    assert r.ok and r.updated == 2 and r.bytes_copied == 8, r
    assert os.stat(d / "f").st_ino != ino and (d / "f").read_bytes() == b"data"


def test_modify_window(tmp_path):
    s, d = tmp_path / "s", tmp_path / "d"
    t = 1_600_000_000 * 10**9
    write(str(s / "f"), b"same", mtime=t)
    write(str(d / "f"), b"SAME", mtime=t + 10**9)
    assert treesync.sync(s, d, modify_window=2).updated == 0
    assert (d / "f").read_bytes() == b"SAME"
    assert treesync.sync(s, d).updated == 1


@pytest.mark.parametrize("links", ["follow", "preserve", "copy_unsafe_links", "safe_links", "skip"])
def test_links(tmp_path, links):
    s, d = tmp_path / "s", tmp_path / "d"
    write(str(s / "real" / "f"), b"data")
    os.symlink("real", s / "inside")
    outside = tmp_path / "outside"
    write(str(outside / "g"), b"out")
    os.symlink(str(outside), s / "escape")
    treesync.sync(s, d, links=links)
    t = tree(d)
    if links == "follow":
        assert t[b"inside"] == ("d",) and t[b"escape"] == ("d",)
    elif links == "preserve":
        assert t[b"inside"] == ("l", b"real") and t[b"escape"] == ("l", os.fsencode(str(outside)))
    elif links == "copy_unsafe_links":
        assert t[b"inside"] == ("l", b"real") and t[b"escape"] == ("d",)
    elif links == "safe_links":
        assert t[b"inside"] == ("l", b"real") and b"escape" not in t
    else:
        assert b"inside" not in t and b"escape" not in t
    with pytest.raises(ValueError, match="links="):
        treesync.sync(s, d, links="sideways")


def test_safe_links_skips_unsafe_keeps_dst_entry(tmp_path):
    s, d = tmp_path / "s", tmp_path / "d"
    write(str(s / "sub" / "f"), b"data")
    os.symlink("../sub/f", s / "sub" / "ok")
    os.symlink("sub/../sub/f", s / "mid")  # '..' after a name: unsafe to rsync 3.5
    os.symlink("../elsewhere", s / "out")
    write(str(d / "out"), b"mine")
    r = treesync.sync(s, d, links="safe_links")
    t = tree(d)
    assert t[b"sub/ok"] == ("l", b"../sub/f") and b"mid" not in t
    assert (d / "out").read_bytes() == b"mine"  # kept, though delete=True
    assert r.skipped == 2 and sorted(e.path for e in r.skipped_entries) == ["mid", "out"]
    assert treesync.sync(s, d, links="preserve_safe").skipped == 2


def test_inplace_jobs_durable(src, tmp_path):
    for jobs in (1, 2, 4, 0):
        dst = tmp_path / ("d%d" % jobs)
        treesync.sync(src, dst, jobs=jobs, durable=True)
        assert tree(dst) == tree(src)
        write(str(src / "a.txt"), b"ALPHA+" * jobs)
        ino = os.stat(dst / "a.txt").st_ino
        r = treesync.sync(src, dst, jobs=jobs, inplace=True)
        assert r.updated == 1 and os.stat(dst / "a.txt").st_ino == ino
    with pytest.raises(ValueError, match="jobs"):
        treesync.sync(src, tmp_path / "x", jobs=-1)


def test_hard_links_owner_group_specials_one_file_system_xattrs(tmp_path):
    s, d = tmp_path / "s", tmp_path / "d"
    write(str(s / "f"), b"linked")
    os.link(s / "f", s / "g")
    os.mkfifo(s / "fifo")
    r = treesync.sync(s, d)
    assert r.skipped == 1 and not (d / "fifo").exists() and r.skipped_entries[0].path == "fifo"
    r = treesync.sync(s, tmp_path / "h", hard_links=True, specials=True, group=True, one_file_system=True,
                      owner=os.geteuid() == 0, xattrs=True)
    assert r.ok, r.errors
    assert os.stat(tmp_path / "h" / "f").st_ino == os.stat(tmp_path / "h" / "g").st_ino
    assert stat.S_ISFIFO(os.lstat(tmp_path / "h" / "fifo").st_mode)
    assert os.stat(tmp_path / "h" / "f").st_gid == os.stat(s / "f").st_gid


def test_backup_dir(src, tmp_path):
    dst, bak = tmp_path / "dst", tmp_path / "bak"
    treesync.sync(src, dst)
    write(str(src / "a.txt"), b"ALPHA2")
    treesync.sync(src, dst, backup_dir=bak)
    assert (bak / "a.txt").read_bytes() == b"alpha" and (dst / "a.txt").read_bytes() == b"ALPHA2"
    with pytest.raises(ValueError, match="exclude each other"):
        treesync.sync(src, dst, backup_dir=bak, inplace=True)


def test_temp_dir(src, tmp_path):
    dst, tmp = tmp_path / "dst", tmp_path / "tmp"
    tmp.mkdir()
    treesync.sync(src, dst)
    write(str(src / "a.txt"), b"ALPHA2")
    os.utime(str(tmp), ns=(1, 1))
    r = treesync.sync(src, dst, temp_dir=tmp)
    assert r.ok and (dst / "a.txt").read_bytes() == b"ALPHA2"
    assert os.listdir(str(tmp)) == [] and os.stat(str(tmp)).st_mtime_ns != 1  # made there, moved into place
    # relative: inside dst, never deleted; missing: refused (rsync's "The temp-dir does not exist")
    (dst / ".tmp").mkdir()
    write(str(src / "a.txt"), b"ALPHA3")
    assert treesync.sync(src, dst, temp_dir=".tmp").ok and (dst / ".tmp").is_dir()
    before = tree(dst)
    with pytest.raises(treesync.Refused, match="temp_dir=.*does not exist") as info:
        treesync.sync(src, dst, temp_dir=tmp_path / "nosuch")
    assert info.value.code == treesync._treesync.errc["temp_dir_missing"] and tree(dst) == before
    os.symlink(str(tmp), str(tmp_path / "link"))  # the caller's own link: the library follows none
    with pytest.raises(treesync.Refused, match="symbolic link") as info:
        treesync.sync(src, dst, temp_dir=tmp_path / "link")
    assert info.value.code == treesync._treesync.errc["unsafe_temp_dir"] and tree(dst) == before


@pytest.mark.parametrize("verify", ["full", "dirs", "none"])
def test_state_verify(src, tmp_path, verify):
    dst, state = tmp_path / "dst", tmp_path / "state"
    treesync.sync(src, dst, state=state)
    assert state.exists()
    r = treesync.sync(src, dst, state=state, verify=verify)
    assert r.unchanged
    with pytest.raises(ValueError, match="needs state"):
        treesync.sync(src, dst, verify="dirs")


def test_state_memory_ignores_a_larger_state_file_with_a_notice(src, tmp_path):
    dst, state = tmp_path / "dst", tmp_path / "state"
    treesync.sync(src, dst, state=state)
    assert state.stat().st_size > 64
    r = treesync.sync(src, dst, state=state, verify="none", state_memory=64)
    assert r.unchanged
    ignored = [n for n in r.notices if n.code == treesync._treesync.errc["state_ignored"]]
    assert ignored and "too large" in ignored[0].detail
    assert not [n for n in treesync.sync(src, dst, state=state, verify="none").notices
                if n.code == treesync._treesync.errc["state_ignored"]]
    for bad in (0, -1, 1.5, True, "1M"):
        with pytest.raises(ValueError, match="state_memory"):
            treesync.sync(src, dst, state=state, state_memory=bad)


def test_errc_names_every_code():
    codes = sorted(treesync._treesync.errc.values())
    assert codes == list(range(1, len(codes) + 1)) and len(codes) >= 25
    assert treesync._treesync.errc["temp_dir_missing"] == codes[-1]  # the last code: none left out after it


def test_option_rules_each_refused_in_the_librarys_words_before_anything_is_touched(src, tmp_path):
    rules = treesync._treesync.option_rules
    assert len(rules) >= 4
    codes = set(treesync._treesync.errc.values())
    for i, (code, first, second, needs, why) in enumerate(rules):
        # the keywords that set each option the library's option_rules name
        sets = {"inplace": {"inplace": True}, "backup_dir": {"backup_dir": tmp_path / ("bak%d" % i)},
                "state": {"state": tmp_path / ("state%d" % i)}, "hard_links": {"hard_links": True},
                "verify": {"verify": "dirs"}}
        assert code in codes and first in sets and second in sets, (first, second)
        dst = tmp_path / ("dst%d" % i)
        kw = dict(sets[first], **({} if needs else sets[second]))
        words = ("%s needs %s (%s)" if needs else "%s and %s exclude each other (%s)") % (first, second, why)
        with pytest.raises(ValueError) as e:
            treesync.sync(src, dst, **kw)
        assert str(e.value) == words
        assert not os.path.exists(str(dst)) and not os.path.exists(str(tmp_path / ("state%d" % i))), words
        alone = dict(sets[first], **(sets[second] if needs else {}))
        treesync.sync(src, dst, **alone)  # the first alone (with the second, for needs) runs
        assert os.path.isdir(str(dst))


def test_paths_str_bytes_pathlike(src, tmp_path):
    for i, (s, d) in enumerate([(str(src), str(tmp_path / "d0")), (os.fsencode(str(src)), os.fsencode(str(tmp_path / "d1"))),
                                (src, tmp_path / "d2")]):
        paths = []
        treesync.sync(s, d, on_action=lambda a: paths.append(a.path))
        assert all(type(p) is (bytes if isinstance(s, bytes) else str) for p in paths)
        assert tree(d) == tree(src)
    with pytest.raises(TypeError):
        treesync.sync(42, tmp_path / "x")


def test_nul_in_a_path_raises_value_error_like_os(src, tmp_path):
    # the C++ side would stop at the NUL: b"VICTIM\0/../dst" named VICTIM, which was emptied
    victim = tmp_path / "VICTIM"
    write(str(victim / "keep.txt"), b"canary")
    bad = os.fsencode(str(victim)) + b"\0/../dst"
    with pytest.raises(ValueError) as ref:
        open(bad, "rb")  # Python's own wording (os.lstat(str) has it too)
    cases = [((bad, tmp_path / "d"), {}), ((src, bad), {}), ((src, os.fsdecode(bad)), {}),
             ((src, tmp_path / "d"), {"state": bad}), ((src, tmp_path / "d"), {"backup_dir": bad}),
             ((src, tmp_path / "d"), {"temp_dir": bad}),
             ((os.fsencode(str(src)) + b"\0x", tmp_path / "d"), {})]
    for args, kw in cases:
        with pytest.raises(ValueError) as info:
            treesync.sync(*args, **kw)
        assert str(info.value) == str(ref.value) == "embedded null byte", (args, kw)
    for args in ((bad, tmp_path / "d"), (src, bad)):
        with pytest.raises(ValueError, match="^embedded null byte$"):
            treesync.sync_tree(*args)
    assert tree(victim) == {b"keep.txt": ("f", b"canary")} and not (tmp_path / "d").exists()


def test_nul_in_a_pattern_raises_value_error_like_os(src, tmp_path):
    d = tmp_path / "d"
    for kw in ({"exclude": "a\0b"}, {"exclude": [b"*.o", b"x\0"]}, {"include": "a\0"}, {"filter": "- a\0"},
               {"filter": ["dir-merge .rules\0/../x"]}, {"exclude_from": str(tmp_path / "r\0")},
               {"include_from": b"r\0"}):
        with pytest.raises(ValueError, match="^embedded null byte$"):
            treesync.sync(src, d, **kw)
    with pytest.raises(ValueError, match="^embedded null byte$"):
        treesync.sync_tree(src, d, exclude=["*.pyc", "a\0"])
    assert not d.exists()


def test_non_utf8_names_round_trip(tmp_path):
    s, d = os.fsencode(str(tmp_path / "s")), os.fsencode(str(tmp_path / "d"))
    os.makedirs(s)
    name = b"caf\xe9-\xff.txt"
    write(os.path.join(s, name), b"latin-1")
    got = []
    r = treesync.sync(os.fsdecode(s), os.fsdecode(d), on_action=lambda a: got.append(a.path))
    assert r.created == 2
    assert os.fsdecode(name) in got and os.fsencode(os.fsdecode(name)) == name  # surrogateescape
    assert os.listdir(d) == [name]
    got = []
    treesync.sync(s, tmp_path / "e", on_action=lambda a: got.append(a.path))
    assert name in got
    # sync_tree: an exclude on such a name, given as str (surrogateescape) or bytes
    treesync.sync_tree(s, tmp_path / "f", exclude=[os.fsdecode(b"caf\xe9*")])
    assert os.listdir(tmp_path / "f") == []
    treesync.sync_tree(s, tmp_path / "g", exclude=[b"*\xff.txt"])
    assert os.listdir(tmp_path / "g") == []


# ---- errors ---------------------------------------------------------------------------------------

def test_refusals(src, tmp_path):
    with pytest.raises(treesync.Refused) as info:
        treesync.sync(tmp_path / "missing", tmp_path / "d")
    assert info.value.errno == errno.ENOENT and info.value.filename == str(tmp_path / "missing")
    assert isinstance(info.value, FileNotFoundError) and type(info.value) is treesync.Refused.FileNotFoundError
    with pytest.raises(treesync.Refused, match="same directory"):
        treesync.sync(src, src)
    with pytest.raises(treesync.Refused, match="nested"):
        treesync.sync(src, src / "sub" / "inner")
    with pytest.raises(treesync.Refused, match="parent directory does not exist") as info:
        treesync.sync(src, tmp_path / "no" / "such" / "dst")
    assert info.value.errno == errno.ENOENT and info.value.count is None
    write(str(tmp_path / "file"))
    with pytest.raises(NotADirectoryError) as info:
        treesync.sync(src, tmp_path / "file")
    assert info.value.errno == errno.ENOTDIR and isinstance(info.value, treesync.Error)
    assert not isinstance(info.value, treesync.Refused)


def test_errors_are_the_builtin_class_of_their_errno(src, tmp_path):
    # as OSError(errno, ...) picks it, and a treesync.Error (or Refused) too; strerror and filename kept
    for errno_value in (errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        builtin = type(OSError(errno_value, "x"))
        for base in (treesync.Error, treesync.Refused, treesync.Partial):
            e = treesync._error(base, errno_value, "what failed", "/the/path")
            assert isinstance(e, builtin) and isinstance(e, base) and e.errno == errno_value
            assert e.strerror == "what failed" and e.filename == "/the/path" and str(e) == "what failed"
    assert type(treesync._error(treesync.Error, errno.EROFS, "read-only", "/p")) is treesync.Error
    assert type(treesync._error(treesync.Refused, None, "refused")) is treesync.Refused
    # a refusal of treesync's own has no errno and no builtin class
    with pytest.raises(treesync.Refused) as info:
        treesync.sync(src, src)
    assert info.value.errno is None and type(info.value) is treesync.Refused


def test_errors_pickle_with_their_class(tmp_path):
    import pickle
    with pytest.raises(FileNotFoundError) as info:
        treesync.sync(tmp_path / "missing", tmp_path / "d")
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is treesync.Refused.FileNotFoundError
    assert (back.errno, back.strerror, back.filename, back.code) == (
        info.value.errno, info.value.strerror, info.value.filename, info.value.code)


def test_entry_errors_collected_and_stop_on_error(tmp_path):
    s, d = tmp_path / "s", tmp_path / "d"
    write(str(s / "a"), b"a")
    write(str(s / "z"), b"z")
    os.symlink("nowhere", s / "m-dangling")
    r = treesync.sync(s, d, jobs=1)
    assert len(r.errors) == 1 and not r.ok
    e = r.errors[0]
    assert e.path == "m-dangling" and e.side == "source" and e.category == "treesync" and e.message
    assert (d / "a").exists() and (d / "z").exists()
    r = treesync.sync(s, tmp_path / "e", jobs=1, stop_on_error=True)
    assert len(r.errors) == 1


# ---- callbacks ------------------------------------------------------------------------------------

def test_on_action_and_progress(src, tmp_path):
    actions, progress = [], []
    r = treesync.sync(src, tmp_path / "d", on_action=actions.append, progress=progress.append, progress_interval=0)
    assert len(actions) == r.created and all(isinstance(a, treesync.Action) for a in actions)
    a = next(a for a in actions if a.path == "a.txt")
    assert a.kind == "create" and a.type == "file" and a.src_size == 5 and a.errno is None
    assert progress and progress[-1].final and progress[-1].actions == len(actions) and progress[-1].bytes == r.bytes_copied


@pytest.mark.parametrize("which", ["on_action", "progress"])
def test_callback_raising_stops_the_run(tmp_path, which):
    s = tmp_path / "s"
    for i in range(300):
        write(str(s / ("f%03d" % i)), b"x" * 1000)

    class Boom(Exception):
        pass

    def cb(_):
        raise Boom("from the callback")

    with pytest.raises(Boom, match="from the callback"):
        treesync.sync(s, tmp_path / "d", **{which: cb})
    assert temporaries(tmp_path / "d") == []
    if which == "on_action":
        assert len(os.listdir(tmp_path / "d")) < 300  # stopped early


def test_callbacks_one_at_a_time(tmp_path):
    s = tmp_path / "s"
    for i in range(400):
        write(str(s / ("dir%02d" % (i % 20)) / ("f%03d" % i)), b"y" * 100)
    inside, peak, lock = [0], [0], threading.Lock()

    def cb(_):
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        time.sleep(0.0005)  # the GIL is given up here: another callback could come in
        with lock:
            inside[0] -= 1

    treesync.sync(s, tmp_path / "d", jobs=4, on_action=cb, progress=cb, progress_interval=0)
    assert peak[0] == 1


def test_gil_released_during_run(tmp_path):
    s = tmp_path / "s"
    for i in range(1500):
        write(str(s / ("d%02d" % (i % 30)) / ("f%04d" % i)), b"z" * 2000)
    ticks, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.01)
    before = ticks[0]
    r = treesync.sync(s, tmp_path / "d", jobs=1)
    during = ticks[0] - before
    stop.set()
    t.join()
    assert r.created == 1531
    assert during >= 3, "the Python thread did not run during the sync (%d ticks in %.3f s)" % (during, r.elapsed)


# ---- cancellation ---------------------------------------------------------------------------------

def _slow_tree(root, n=3000):
    for i in range(n):
        write(str(root / ("d%02d" % (i % 40)) / ("f%04d" % i)), b"w" * 4096)


def test_keyboard_interrupt_from_another_thread(tmp_path):
    s, d = tmp_path / "s", tmp_path / "d"
    _slow_tree(s)
    started = threading.Event()
    sent = [0.0]

    def interrupter():
        started.wait()
        time.sleep(0.05)
        sent[0] = time.monotonic()
        _thread.interrupt_main()  # as Ctrl-C: SIGINT's handler raises KeyboardInterrupt in the main thread

    t = threading.Thread(target=interrupter)
    t.start()
    first = [True]

    def on_action(a):
        if first[0]:
            first[0] = False
            started.set()
        time.sleep(0.001)  # keep the run long enough to be interrupted

    with pytest.raises(KeyboardInterrupt):
        treesync.sync(s, d, jobs=2, on_action=on_action)
    took = time.monotonic() - sent[0]
    t.join()
    assert took < CANCEL_LIMIT, "KeyboardInterrupt took %.3f s" % took
    assert temporaries(d) == []
    assert tree(d) != tree(s), "the interrupted run went on to the end"
    # the next run completes the mirror
    treesync.sync(s, d)
    assert tree(d) == tree(s)


def test_keyboard_interrupt_during_a_large_copy(tmp_path):
    s, d = tmp_path / "s", tmp_path / "d"
    s.mkdir()
    with open(s / "big", "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(256):
            f.write(block)
    sent = [0.0]

    def interrupter():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # wait for the temporary to appear
            if os.path.isdir(d) and temporaries(d):
                break
            time.sleep(0.001)
        sent[0] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=interrupter)
    t.start()
    try:
        treesync.sync(s, d)
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    took = time.monotonic() - sent[0]
    t.join()
    if interrupted:
        assert took < CANCEL_LIMIT, "KeyboardInterrupt took %.3f s" % took
    assert temporaries(d) == []
    assert not (d / "big").exists() or (d / "big").stat().st_size == 256 << 20


def test_cancel_event_from_another_thread(tmp_path):
    s, d = tmp_path / "s", tmp_path / "d"
    _slow_tree(s)
    ev = threading.Event()
    sent = [0.0]

    def on_action(a):
        if sent[0] == 0.0:
            threading.Timer(0.05, lambda: (sent.__setitem__(0, time.monotonic()), ev.set())).start()
            sent[0] = -1.0
        time.sleep(0.001)

    r = treesync.sync(s, d, on_action=on_action, cancel=ev)
    took = time.monotonic() - sent[0]
    assert r.cancelled and r.created < 3041
    assert took < CANCEL_LIMIT, "cancel took %.3f s" % took
    assert temporaries(d) == []


def test_sync_from_a_worker_thread(src, tmp_path):
    out = []
    t = threading.Thread(target=lambda: out.append(treesync.sync(src, tmp_path / "d")))
    t.start()
    t.join()
    assert out[0].created == 9


# ---- sync_tree: the seed's behaviours -------------------------------------------------------------

def test_sync_tree_cold_and_warm_no_op(src, tmp_path):
    dst = tmp_path / "dst"
    assert treesync.sync_tree(src, dst) is None
    assert tree(dst) == tree(src)
    before = ctimes(dst)
    time.sleep(0.01)
    treesync.sync_tree(src, dst)
    assert ctimes(dst) == before  # zero writes: no entry's ctime moved


def test_sync_tree_excludes_like_ignore_patterns(src, tmp_path):
    write(str(src / "sub" / "deep" / "__pycache__" / "z.pyc"), b"z")
    write(str(src / "Keep.PYC"), b"case")
    write(str(src / "sub" / "log1.txt"), b"1")
    write(str(src / "sub" / "logx.txt"), b"x")
    patterns = ("*.pyc", "__pycache__", "log[0-9].txt", "[!a-z]eep*")
    ref = tmp_path / "ref"
    shutil.copytree(src, ref, ignore=shutil.ignore_patterns(*patterns))
    treesync.sync_tree(src, tmp_path / "dst", exclude=patterns)
    assert tree(tmp_path / "dst") == tree(ref)
    treesync.sync_tree(str(src), str(tmp_path / "dst2"), exclude=list(patterns))
    assert tree(tmp_path / "dst2") == tree(ref)


def test_sync_tree_fnmatch_rules():
    from treesync import _treesync
    import fnmatch
    names = ["a.pyc", "b.PYC", "[x]", "x", "-", "]", "a]b", "é.h", "dir", "ab", "a*b", "a?b"]
    pats = ["*.pyc", "?.PYC", "[[]x]", "[!a]", "[]]", "a]b", "[a-]", "[z-a]", "?.h", "*", "a[*]b", "a[?]b", "[!]]", "[", "a\\*b"]
    for n in names:
        for p in pats:
            assert _treesync.fnmatch(n.encode(), p.encode()) == fnmatch.fnmatchcase(n, p), (n, p)


def test_sync_tree_deletion(src, tmp_path):
    dst = tmp_path / "dst"
    treesync.sync_tree(src, dst)
    shutil.rmtree(src / "sub" / "deep")
    os.remove(src / "a.txt")
    write(str(dst / "stray" / "s.txt"))
    treesync.sync_tree(src, dst)
    assert tree(dst) == tree(src)


def test_sync_tree_symlink_to_dir(tmp_path):
    s, d = tmp_path / "s", tmp_path / "d"
    write(str(tmp_path / "elsewhere" / "inc" / "h.h"), b"h")
    s.mkdir()
    os.symlink(str(tmp_path / "elsewhere" / "inc"), s / "inc")
    os.symlink("inc/h.h", s / "alias.h")
    treesync.sync_tree(s, d)
    assert not os.path.islink(d / "inc") and (d / "inc" / "h.h").read_bytes() == b"h"
    assert not os.path.islink(d / "alias.h") and (d / "alias.h").read_bytes() == b"h"
    ref = tmp_path / "ref"
    shutil.copytree(s, ref)
    assert tree(d) == tree(ref)


def test_sync_tree_refuses_a_destination_symlink_like_rmtree(src, tmp_path):
    # the old helper's rmtree(dst) refused a link: sync_tree neither deletes nor writes through it
    target = tmp_path / "elsewhere"
    write(str(target / "keep.txt"), b"canary")
    d = tmp_path / "d"
    os.symlink(str(target), d)
    with pytest.raises(OSError) as ref:
        shutil.rmtree(d)
    with pytest.raises(treesync.Refused) as info:
        treesync.sync_tree(src, d)
    assert isinstance(info.value, OSError) and info.value.filename == str(d)
    assert str(ref.value) in str(info.value) and "follow_dst_symlink=True" in str(info.value)
    assert tree(target) == {b"keep.txt": ("f", b"canary")} and os.readlink(d) == str(target)
    os.symlink(str(tmp_path / "nowhere"), tmp_path / "dangling")  # also a link to nothing
    with pytest.raises(treesync.Refused, match="Cannot call rmtree on a symbolic link"):
        treesync.sync_tree(src, tmp_path / "dangling")
    assert not (tmp_path / "nowhere").exists()


def test_sync_tree_follow_dst_symlink_mirrors_into_the_link_target(src, tmp_path):
    target = tmp_path / "elsewhere"
    write(str(target / "extra.txt"), b"gone")
    d = tmp_path / "d"
    os.symlink(str(target), d)
    treesync.sync_tree(src, d, follow_dst_symlink=True)
    assert os.path.islink(d) and tree(target) == tree(src)


# issue 45 item 5: the check of dst is made on the descriptor the run uses. Each test swaps dst for
# a link to a victim directory at the exact point between the check and the run (a wrapper around
# the extension's run(), which the check precedes), and the victim must be untouched.
def _swap_before_run(monkeypatch, swap):
    real = treesync._treesync.run

    def run(options):
        swap()
        return real(options)

    monkeypatch.setattr(treesync._treesync, "run", run)


def _victim(tmp_path):
    v = tmp_path / "victim"
    write(str(v / "precious"), b"canary")
    return v


@pytest.mark.parametrize("mirror", ["sync_tree", "sync"])
def test_runs_in_the_dst_it_checked_though_dst_became_a_link_since(src, tmp_path, monkeypatch, mirror):
    v, d = _victim(tmp_path), tmp_path / "d"
    os.mkdir(d)

    def swap():
        os.rename(d, tmp_path / "d-checked")
        os.symlink(str(v), d)

    _swap_before_run(monkeypatch, swap)
    getattr(treesync, mirror)(src, d)
    assert tree(v) == {b"precious": ("f", b"canary")}
    assert tree(tmp_path / "d-checked") == tree(src)


def test_sync_tree_refuses_a_link_put_at_a_missing_dst_after_the_check(src, tmp_path, monkeypatch):
    v, d = _victim(tmp_path), tmp_path / "d"
    _swap_before_run(monkeypatch, lambda: os.symlink(str(v), d))
    with pytest.raises(treesync.Error) as info:
        treesync.sync_tree(src, d)
    assert info.value.errno == errno.ELOOP
    assert tree(v) == {b"precious": ("f", b"canary")}


def test_sync_refuses_a_dst_whose_parent_was_missing_at_the_check_though_a_link_is_there_by_the_run(
        src, tmp_path, monkeypatch):
    v, d = _victim(tmp_path), tmp_path / "gone" / "d"
    _swap_before_run(monkeypatch, lambda: os.symlink(str(v), tmp_path / "gone"))
    with pytest.raises(treesync.Refused) as info:
        treesync.sync(src, d)
    assert info.value.errno == errno.ENOENT
    assert tree(v) == {b"precious": ("f", b"canary")}


def _link_of_another_user(target, link):
    os.symlink(str(target), link)
    os.lchown(link, 65534, 65534)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant a link owned by another user")
def test_sync_refuses_another_users_link_in_dst_as_the_cli_does(src, tmp_path):
    v = _victim(tmp_path)
    _link_of_another_user(v, tmp_path / "d")
    with pytest.raises(treesync.Refused) as info:
        treesync.sync(src, tmp_path / "d")
    assert info.value.errno == errno.ELOOP and "owned by uid 65534" in str(info.value)
    assert "insecure_links=True" in str(info.value)
    assert tree(v) == {b"precious": ("f", b"canary")}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant a link owned by another user")
def test_sync_insecure_links_follows_another_users_link_in_dst(src, tmp_path):
    v = _victim(tmp_path)
    _link_of_another_user(v, tmp_path / "d")
    treesync.sync(src, tmp_path / "d", insecure_links=True)
    assert tree(v) == tree(src)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant a link owned by another user")
def test_sync_refuses_an_exclude_from_file_behind_another_users_link(src, tmp_path):
    write(str(tmp_path / "secret"), b"root's\n")
    _link_of_another_user(tmp_path / "secret", tmp_path / "rules")
    with pytest.raises(treesync.Refused, match="exclude_from .*owned by uid 65534"):
        treesync.sync(src, tmp_path / "d", exclude_from=tmp_path / "rules")
    assert not (tmp_path / "d").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant a link owned by another user")
def test_sync_refuses_a_temp_dir_behind_another_users_link(src, tmp_path):
    (tmp_path / "t").mkdir()
    _link_of_another_user(tmp_path / "t", tmp_path / "tl")
    with pytest.raises(treesync.Refused, match="temp_dir .*owned by uid 65534"):
        treesync.sync(src, tmp_path / "d", temp_dir=tmp_path / "tl")
    assert not (tmp_path / "d").exists()


def test_sync_exclude_from_a_missing_file_raises_file_not_found(src, tmp_path):
    with pytest.raises(FileNotFoundError):
        treesync.sync(src, tmp_path / "d", exclude_from=tmp_path / "none")


def test_sync_tree_racy_mtime(tmp_path):
    s, d = tmp_path / "s", tmp_path / "d"
    write(str(s / "gen.h"), b"version 1")
    treesync.sync_tree(s, d)
    # rewritten with the same size within the same mtime: size and mtime equal, content not
    mtime = os.stat(s / "gen.h").st_mtime_ns
    write(str(s / "gen.h"), b"version 2", mtime=mtime)
    treesync.sync_tree(s, d)
    assert (d / "gen.h").read_bytes() == b"version 2"


def test_sync_tree_deletes_excluded_leftovers_by_default(src, tmp_path):
    dst = tmp_path / "dst"
    write(str(dst / "pkg" / "stale.pyc"), b"an earlier build's")
    write(str(dst / "pkg" / "__pycache__" / "old.pyc"), b"an earlier build's")
    write(str(dst / "pkg" / "__pycache__" / "notes.txt"), b"inside an excluded directory")
    write(str(src / "pkg" / "mod.py"), b"source")
    treesync.sync_tree(src, dst, exclude=("__pycache__", "*.pyc"))
    assert tree(dst) == {k: v for k, v in tree(src).items() if not k.endswith(b".pyc") and b"__pycache__" not in k}


def test_sync_tree_delete_excluded_false_keeps_excluded_leftovers(src, tmp_path):
    dst = tmp_path / "dst"
    leftovers = {b"pkg/stale.pyc": ("f", b"kept"), b"pkg/__pycache__": ("d",),
                 b"pkg/__pycache__/old.pyc": ("f", b"kept too")}
    for rel, v in leftovers.items():
        if v[0] == "f":
            write(os.path.join(os.fsencode(str(dst)), rel), v[1])
    write(str(dst / "pkg" / "stray.py"), b"not excluded: deleted all the same")
    write(str(src / "pkg" / "mod.py"), b"source")
    treesync.sync_tree(src, dst, exclude=("__pycache__", "*.pyc"), delete_excluded=False)
    copied = {k: v for k, v in tree(src).items() if not k.endswith(b".pyc") and b"__pycache__" not in k}
    assert tree(dst) == {**copied, **leftovers}


EXCLUDED = ("__pycache__", "*.pyc", "tmp?", "[!a-z]*.o")
NAMES = ("a", "b.txt", "pkg", "mod.py", "x.pyc", "__pycache__", "tmp1", "tmpdir", "Z.o", "z.o", "data", "README")
FILE_MODES = (0o644, 0o600, 0o755, 0o444, 0o640)
DIR_MODES = (0o755, 0o750, 0o700)


def excluded_name(name):
    import fnmatch
    return any(fnmatch.fnmatchcase(name, p) for p in EXCLUDED)


def random_tree(rng, root, depth=0):
    """A seeded random tree under root (made): files and directories named from NAMES, so excluded
    names turn up at every depth, as files and as directories."""
    os.makedirs(root, exist_ok=True)
    for name in rng.sample(NAMES, rng.randint(2, 7)):
        p = os.path.join(root, name)
        if depth < 3 and rng.random() < 0.4:
            random_tree(rng, p, depth + 1)
        else:
            write(p, bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64))))
            os.chmod(p, rng.choice(FILE_MODES))
    os.chmod(root, rng.choice(DIR_MODES))


def snapshot(root):
    """{relative path: (type, mode, content)} of root and everything below it."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in ["."] + dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            content = open(p, "rb").read() if stat.S_ISREG(st.st_mode) else None
            out[os.path.normpath(os.path.relpath(p, root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                                                              content)
    return out


def earlier_build(rng, src, dst):
    """dst as an earlier build left it: src's directories, some of src's files (some of them
    changed), and leftovers: excluded files and excluded directories with content (some where src
    has the name as the other type), non-excluded strays.  What kinds of excluded leftover it made."""
    kinds = set()
    for dirpath, dirnames, filenames in os.walk(src):
        here = os.path.join(dst, os.path.relpath(dirpath, src))
        if os.path.lexists(here) and not os.path.isdir(here):  # a leftover file where src has a directory
            dirnames[:] = []
            continue
        os.makedirs(here, exist_ok=True)
        for name in filenames:
            if rng.random() < 0.6 and not os.path.lexists(os.path.join(here, name)):
                data = open(os.path.join(dirpath, name), "rb").read()
                write(os.path.join(here, name), data if rng.random() < 0.5 else data + b" (older)")
        for name in rng.sample(NAMES, rng.randint(1, 4)):
            p, in_src = os.path.join(here, name), os.path.join(dirpath, name)
            if os.path.lexists(p):
                continue
            if rng.random() < 0.5:
                random_tree(rng, p, depth=2)  # a directory with content
                kind = "directory"
            else:
                write(p, b"left over")
                kind = "file"
            if excluded_name(name):
                kinds.add("excluded " + kind + (" (a file in src)" if os.path.isfile(in_src) else
                                                " (a directory in src)" if os.path.isdir(in_src) else ""))
    return kinds


def test_sync_tree_matches_the_old_helper_over_random_trees_with_excluded_leftovers(tmp_path):
    import random
    kinds = set()
    for seed in range(12):
        base = tmp_path / str(seed)
        src = str(base / "src")
        random_tree(random.Random(seed), src)
        for name in ("old", "new"):  # the same earlier build twice (the same seed)
            kinds |= earlier_build(random.Random(1000 + seed), src, str(base / name))
        assert snapshot(base / "old") == snapshot(base / "new")
        old_sync_tree(src, base / "old", EXCLUDED)
        treesync.sync_tree(src, base / "new", exclude=EXCLUDED)
        assert snapshot(base / "new") == snapshot(base / "old"), seed
    # the leftovers the comparison went through (the seeds are fixed: this checks the generator)
    assert kinds >= {"excluded file", "excluded directory", "excluded file (a file in src)",
                     "excluded directory (a file in src)", "excluded file (a directory in src)",
                     "excluded directory (a directory in src)"}, kinds


def old_sync_tree(src, dst, exclude=()):
    """The helper sync_tree replaces (README: "before:")."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*exclude))


def both_helpers(src, old_dst, new_dst):
    """(the exception the old helper raised, sync_tree's), each None when it raised none."""
    raised = []
    for helper, dst in ((old_sync_tree, old_dst), (treesync.sync_tree, new_dst)):
        try:
            helper(src, dst)
            raised.append(None)
        except OSError as e:
            raised.append(e)
    return raised


def failed_pairs(err, src, dst):
    """shutil.Error's args[0] as (source, destination) paths relative to the roots, sorted."""
    return sorted((os.path.relpath(s, src), os.path.relpath(d, dst)) for s, d, _ in err.args[0])


def test_sync_tree_raises_on_first_error(tmp_path):
    s, d = tmp_path / "s", tmp_path / "d"
    write(str(s / "a"), b"a")
    os.symlink("nowhere", s / "broken")
    with pytest.raises(treesync.Error) as info:
        treesync.sync_tree(s, d)
    e = info.value
    assert isinstance(e, OSError) and e.filename == str(s / "broken") and "broken" in str(e)
    assert e.report is not None and e.entry.path == "broken"
    with pytest.raises(treesync.Refused) as info:
        treesync.sync_tree(tmp_path / "missing", d)
    assert info.value.errno == errno.ENOENT
    # an empty source empties the destination, as rmtree + copytree did
    (tmp_path / "empty").mkdir()
    treesync.sync_tree(tmp_path / "empty", d)
    assert os.listdir(d) == []


def test_sync_tree_dangling_link_copies_the_rest_like_the_old_helper(tmp_path):
    s = tmp_path / "s"
    write(str(s / "a.h"), b"a")
    write(str(s / "sub" / "b.h"), b"b")
    write(str(s / "sub" / "deep" / "c.h"), b"c")
    os.symlink("nowhere", s / "m-dangling")
    old, new = both_helpers(s, tmp_path / "old", tmp_path / "new")
    assert type(old) is shutil.Error  # copytree copied the rest, then raised every failure at once
    assert isinstance(new, type(old)) and isinstance(new, treesync.Partial) and isinstance(new, treesync.Error)
    assert isinstance(new, FileNotFoundError) and new.errno == errno.ENOENT  # what opening the link raised
    assert new.filename == str(s / "m-dangling") and "dangling" in new.strerror
    assert tree(tmp_path / "new") == tree(tmp_path / "old") == {
        k: v for k, v in tree(s).items() if k != b"m-dangling"}
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == stat.S_IMODE(os.stat(s).st_mode)
    assert failed_pairs(new, s, tmp_path / "new") == failed_pairs(old, s, tmp_path / "old") == [
        ("m-dangling", "m-dangling")]


def test_sync_tree_every_failed_entry_is_attached(tmp_path):
    s = tmp_path / "s"
    write(str(s / "a.h"), b"a")
    os.symlink("nowhere", s / "first")
    write(str(s / "sub" / "b.h"), b"b")
    os.symlink("nowhere", s / "sub" / "second")
    old, new = both_helpers(s, tmp_path / "old", tmp_path / "new")
    assert type(old) is shutil.Error and isinstance(new, shutil.Error)
    assert failed_pairs(new, s, tmp_path / "new") == failed_pairs(old, s, tmp_path / "old")
    assert len(new.args[0]) == 2 and sorted(e.path for e in new.errors) == ["first", "sub/second"]
    assert new.errors == new.report.errors and new.entry == new.errors[0] and "1 more" in str(new)
    assert tree(tmp_path / "new") == tree(tmp_path / "old")


def test_sync_tree_missing_source_like_the_old_helper(tmp_path):
    old, new = both_helpers(tmp_path / "missing", tmp_path / "old", tmp_path / "new")
    assert type(old) is FileNotFoundError
    assert isinstance(new, FileNotFoundError) and isinstance(new, treesync.Refused)
    assert new.errno == errno.ENOENT and new.filename == str(tmp_path / "missing")
    assert not (tmp_path / "old").exists() and not (tmp_path / "new").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a mode-0555 directory; the non-root pass "
                    "(ctest treesync.python.nonroot) runs this case")
def test_sync_tree_unwritable_destination_like_the_old_helper(src, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        old, new = both_helpers(src, ro / "old", ro / "new")
    finally:
        ro.chmod(0o755)
    assert type(old) is PermissionError
    assert isinstance(new, PermissionError) and isinstance(new, treesync.Error) and new.errno == errno.EACCES
    assert str(ro / "new") in str(new)
    assert os.listdir(ro) == []


def test_sync_tree_destination_a_file_raises_file_exists_error_like_the_old_helper(src, tmp_path):
    # rmtree(dst, ignore_errors=True) leaves a file alone; copytree's makedirs(dst) then raises EEXIST
    for name in ("old", "new"):
        write(str(tmp_path / name), b"a file, not a directory")
    old, new = both_helpers(src, tmp_path / "old", tmp_path / "new")
    assert type(old) is FileExistsError
    assert isinstance(new, FileExistsError) and isinstance(new, treesync.Error) and new.errno == errno.EEXIST
    assert new.filename == str(tmp_path / "new") and not isinstance(new, NotADirectoryError)
    assert (tmp_path / "new").read_bytes() == (tmp_path / "old").read_bytes() == b"a file, not a directory"


def test_sync_tree_destination_under_a_file_like_the_old_helper(src, tmp_path):
    write(str(tmp_path / "file"), b"not a directory")
    old, new = both_helpers(src, tmp_path / "file" / "old", tmp_path / "file" / "new")
    assert type(old) is NotADirectoryError
    assert isinstance(new, NotADirectoryError) and isinstance(new, treesync.Error) and new.errno == errno.ENOTDIR
    assert (tmp_path / "file").read_bytes() == b"not a directory"


# ---- the command the package installs: `treesync` (the C++ tool) and `python -m treesync` ----------

def _tool():
    import treesync.__main__ as main
    path = main.tool_path()
    assert path is not None, "the treesync program is not installed with the package"
    return path


def test_the_package_installs_the_cli_in_the_scripts_directory():
    """`treesync` lands where the installer puts commands (a venv's bin/, on PATH once activated), and
    it is the C++ program (an ELF executable), not a Python re-implementation."""
    tool = _tool()
    assert shutil.which("treesync", path=sysconfig.get_path("scripts")) == tool
    with open(tool, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    out = subprocess.run([tool, "--version"], capture_output=True, text=True)
    assert (out.returncode, out.stdout) == (0, "treesync %s\n" % treesync.__version__)


def elf_section_types(path):
    """The sh_type of every section of the 64-bit little-endian ELF file at path."""
    import struct
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, path  # ELFCLASS64, ELFDATA2LSB
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    return [struct.unpack_from("<I", data, shoff + i * shentsize + 4)[0] for i in range(shnum)]


SHT_SYMTAB = 2  # the symbol table `strip` removes (the dynamic one, SHT_DYNSYM, stays)


@pytest.mark.skipif(sys.byteorder != "little" or sys.maxsize < 2 ** 32, reason="the check reads 64-bit little-endian ELF")
def test_the_installed_extension_and_tool_are_stripped():
    from treesync import _treesync
    for path in (_treesync.__file__, _tool()):
        types = elf_section_types(path)
        assert types and SHT_SYMTAB not in types, "%s has a symbol table (not stripped)" % path


def test_python_m_treesync_is_the_installed_cli():
    tool = _tool()
    for args in (["--version"], ["--help"]):
        direct = subprocess.run([tool] + args, capture_output=True)
        via = subprocess.run([sys.executable, "-m", "treesync"] + args, capture_output=True)
        assert (via.returncode, via.stdout, via.stderr) == (direct.returncode, direct.stdout, direct.stderr)
        assert via.returncode == 0 and via.stdout


def test_python_m_treesync_passes_the_exit_status_through(tmp_path):
    """A usage error and a missing source: python -m treesync exits as the tool does (not 0, not 1
    for both), with the tool's message."""
    tool = _tool()
    cases = (["--no-such-option", "a", "b"], [str(tmp_path / "missing") + "/", str(tmp_path / "dst")])
    codes = set()
    for args in cases:
        direct = subprocess.run([tool] + args, capture_output=True)
        via = subprocess.run([sys.executable, "-m", "treesync"] + args, capture_output=True)
        assert direct.returncode not in (0, None)
        assert (via.returncode, via.stderr) == (direct.returncode, direct.stderr)
        codes.add(via.returncode)
    assert len(codes) == 2, codes


def test_python_m_treesync_gives_the_cli_the_shells_sigpipe():
    """Python ignores SIGPIPE, and an ignored signal stays ignored across exec: python -m treesync
    resets it, so the tool writing into a closed pipe dies of SIGPIPE as when run directly (the
    subprocess module resets it for the direct run)."""
    tool = _tool()
    codes = []
    for cmd in ([tool, "--help"], [sys.executable, "-m", "treesync", "--help"]):
        r, w = os.pipe()
        os.close(r)  # no reader: the first write raises SIGPIPE
        try:
            codes.append(subprocess.run(cmd, stdout=w, stderr=subprocess.DEVNULL).returncode)
        finally:
            os.close(w)
    assert codes == [-signal.SIGPIPE, -signal.SIGPIPE]


def test_python_m_treesync_mirrors_a_tree(src, tmp_path):
    dst = tmp_path / "dst"
    write(str(dst / "stale.txt"), b"old")
    r = subprocess.run([sys.executable, "-m", "treesync", "--delete", str(src) + "/", str(dst)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert tree(str(dst)) == tree(str(src))
    # and the installed command the same way: a second run finds nothing to do
    r = subprocess.run([_tool(), "-i", "-q", "--delete", str(src) + "/", str(dst)], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, "")


# ---- the README's migration snippet ---------------------------------------------------------------

def readme_python_blocks(path, section=None):
    """The ```python blocks of the README at path (REPO-relative), only those of `section` (a "## "
    heading) when given."""
    text = open(os.path.join(REPO, path), encoding="utf-8").read()
    if section is not None:
        m = re.search(r"^## %s\n(.*?)(?=^## )" % re.escape(section), text, re.S | re.M)
        assert m, "%s has no section %r" % (path, section)
        text = m.group(1)
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_python_readme_examples_print_what_their_comments_say(tmp_path, monkeypatch, capsys):
    """python/README.md (the package's description): its examples run as written in an empty
    directory, and each print gives the line its comment shows (up to a parenthesis)."""
    blocks = readme_python_blocks("python/README.md")
    assert len(blocks) == 2, "the example and the errors"
    expected = [re.sub(r" \(.*\)$", "", m) for b in blocks for m in re.findall(r"^\s*print\(.*\)\s+# (.*)$", b, re.M)]
    monkeypatch.chdir(tmp_path)
    for i, code in enumerate(blocks):
        exec(compile(code, "python/README.md:block%d" % i, "exec"), {})
    assert capsys.readouterr().out.splitlines() == expected


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed for this Python (Debian: apt-get install mypy)")
def test_mypy_passes_on_the_readme_python_examples(tmp_path):
    """The README's Python section and python/README.md type-check against the installed stubs
    (mypy --strict): the names and exception classes they use are in __init__.pyi."""
    blocks = readme_python_blocks("README.md", "Python") + readme_python_blocks("python/README.md")
    assert len(blocks) >= 3
    files = []
    for i, code in enumerate(blocks):
        files.append(str(tmp_path / ("example%d.py" % i)))
        with open(files[-1], "w") as f:
            f.write(code)
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-color-output", "--cache-dir",
                        str(tmp_path / "cache")] + files, capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout


def test_stubs_list_every_derived_error_class():
    """Error, Refused and Partial each have one subclass per builtin OSError class (Refused.FileNotFoundError,
    ...): the stub declares exactly those, each deriving from its base and the builtin."""
    stub = ast.parse(open(os.path.join(os.path.dirname(treesync.__file__), "__init__.pyi")).read())
    classes = {n.name: n for n in stub.body if isinstance(n, ast.ClassDef)}
    for base in (treesync.Error, treesync.Refused, treesync.Partial):
        runtime = {name for name, v in vars(base).items()
                   if isinstance(v, type) and issubclass(v, base) and issubclass(v, OSError)}
        assert len(runtime) >= 10
        nested = {n.name: [ast.unparse(b) for b in n.bases] for n in classes[base.__name__].body
                  if isinstance(n, ast.ClassDef)}
        assert nested == {name: [base.__name__, "builtins." + name] for name in runtime}


def test_readme_migration_snippet(src, tmp_path, monkeypatch):
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    m = re.search(r"<!-- python-migration-snippet -->\s*```python\n(.*?)```", readme, re.S)
    assert m, "README.md has no python-migration-snippet block"
    code = m.group(1)
    assert len(code.strip().splitlines()) <= 12
    monkeypatch.chdir(tmp_path)
    shutil.copytree(src, tmp_path / "python")
    ns = {}
    exec(compile(code, "README.md:python-migration-snippet", "exec"), ns)
    assert tree(tmp_path / "staged" / "python") == {
        k: v for k, v in tree(tmp_path / "python").items()
        if not k.endswith(b".pyc") and b"__pycache__" not in k}


# the racy window of the real filesystem (posix_fs: 1 s): a copy made within it of its source's
# mtime is verified by content on the next run past it, and its mtime set again (settled)
RACY_WINDOW = 1.0


def test_readme_migration_snippet_past_the_racy_window(src, tmp_path, monkeypatch):
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    code = re.search(r"<!-- python-migration-snippet -->\s*```python\n(.*?)```", readme, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(src, tmp_path / "python")
    newest = max(os.lstat(os.path.join(d, n)).st_mtime for d, ds, fs in os.walk(tmp_path / "python") for n in fs)
    real_sync = treesync.sync

    def sync_later(*args, **kw):  # the snippet's second run, just past the window of the first's copies
        time.sleep(max(0.0, newest + RACY_WINDOW + 0.05 - time.time()))
        return real_sync(*args, **kw)

    monkeypatch.setattr(treesync, "sync", sync_later)
    ns = {}
    exec(compile(code, "README.md:python-migration-snippet", "exec"), ns)  # its assert holds
    report = ns["report"]
    assert report.settled == 3 and report.writes == 0 and not report.unchanged  # the settle did happen
    for key in ("scanned", "created", "updated", "meta_updated", "deleted", "excluded", "skipped", "cleaned",
                "settled", "bytes_copied", "errors", "vanished", "skipped_entries", "notices"):
        assert key + "=" in repr(report)
    assert "settled=3" in repr(report)
