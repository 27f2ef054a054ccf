#!/usr/bin/env python3
"""Tests of the treesync command-line tool (examples/treesync.cpp) on real temporary trees.

    python3 cli_test.py --cli PATH/TO/treesync --work SCRATCH_DIR [GROUP ...]
    python3 cli_test.py --example PATH/TO/PROGRAM --work SCRATCH_DIR --expect REGEX... [--reject REGEX...]

Runs every group, or the named ones; prints what it checks and exits non-zero if a check failed.
The second form runs another example program (custom_policy, copy_back) with SCRATCH_DIR as its
argument and checks its exit status and that its output matches every --expect and no --reject.
CMake (examples/CMakeLists.txt) and Meson (examples/meson.build) register one test per group and
per example.  Needs Python 3.6+ and nothing else.
"""

import argparse
import ctypes
import difflib
import fcntl
import hashlib
import json
import os
import pty
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import termios
import threading
import time

CLI = None
WORK = None
FAILURES = []


def check(cond, what):
    if cond:
        print("  ok   " + what)
    else:
        print("  FAIL " + what)
        FAILURES.append(what)
    return cond


def mirror_args(args):
    """The cases written before issue 24 run the CLI as a mirror, which it was by default then:
    SRC's contents into DST, deleting what SRC lacks.  Since issue 24 the CLI follows rsync (SRC
    without a trailing slash is copied into DST/NAME, nothing is deleted without --delete), so those
    cases say it as rsync users do: `--delete` first (a later --no-delete or --delete-excluded
    still decides) and a trailing slash on SRC, when the last two arguments are SRC DST.  New cases
    that are about the operands or the default use run_as_given()."""
    args = [a if isinstance(a, bytes) else str(a) for a in args]
    operands = [a for a in args[-2:] if not (a.startswith(b"-" if isinstance(a, bytes) else "-"))]
    if len(args) < 2 or len(operands) != 2 or (len(args) > 2 and args[-3] in OPTIONS_WITH_VALUE):
        return args
    src = args[-2]
    slash = b"/" if isinstance(src, bytes) else "/"
    if not src.endswith(slash):
        src += slash
    return ["--delete"] + args[:-2] + [src, args[-1]]


# options whose value is the next argument (so "--exclude-from FILE SRC" is not SRC DST)
OPTIONS_WITH_VALUE = {"--max-delete", "--exclude", "--exclude-from", "--include", "--include-from", "--filter",
                      "-f", "--modify-window", "--jobs", "-j", "--backup-dir", "--info", "--state", "--verify",
                      "--state-memory", "--temp-dir", "-T"}


def run_as_given(*args, stdin=None, timeout=300, cwd=None):
    """Runs the CLI with exactly these arguments; returns (exit status, stdout text, stderr text)."""
    p = subprocess.run([CLI] + [a if isinstance(a, bytes) else str(a) for a in args], input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, cwd=cwd)
    out = p.stdout.decode("utf-8", "surrogateescape")
    err = p.stderr.decode("utf-8", "surrogateescape")
    return p.returncode, out, err


def run(*args, stdin=None, timeout=300):
    """Runs the CLI as a mirror (mirror_args: --delete, SRC/); returns (exit status, stdout text,
    stderr text)."""
    p = subprocess.run([CLI] + mirror_args(args), input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    out = p.stdout.decode("utf-8", "surrogateescape")
    err = p.stderr.decode("utf-8", "surrogateescape")
    return p.returncode, out, err


def show(args, rc, out, err):
    print("  $ treesync " + " ".join(str(a) for a in args) + "  -> exit %d" % rc)
    for line in (out + err).splitlines()[:40]:
        print("    | " + line)


def fresh(name):
    d = os.path.join(WORK, name)
    if os.path.lexists(d):
        make_writable(d)
        shutil.rmtree(d)
    os.makedirs(d)
    return d


def make_writable(root):
    for dirpath, dirnames, _ in os.walk(root):
        for n in dirnames:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                os.chmod(p, 0o755)


def write(path, data=b"", mode=None, mtime=None):
    if isinstance(data, str):
        data = data.encode()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    if mode is not None:
        os.chmod(path, mode)
    if mtime is not None:
        os.utime(path, ns=(mtime, mtime))


def snapshot(root):
    """{relative path (bytes): (kind, size, mtime_ns, mode, sha256 or link target)} of a tree."""
    root = os.fsencode(root)
    out = {}

    def entry(path):
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return ("link", 0, 0, 0, os.readlink(path))
        if stat.S_ISDIR(st.st_mode):
            return ("dir", 0, st.st_mtime_ns, stat.S_IMODE(st.st_mode), None)
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        return ("file", st.st_size, st.st_mtime_ns, stat.S_IMODE(st.st_mode), digest)

    out[b""] = entry(root)
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = entry(p)
    return out


def temporaries(root):
    """Relative paths of the .treesync-tmp-* entries below root (names only: no file is read)."""
    rootb = os.fsencode(root)
    return [os.path.relpath(os.path.join(d, n), rootb) for d, dirs, files in os.walk(rootb) for n in dirs + files
            if n.startswith(b".treesync-tmp-")]


def same_tree(src, dst, what):
    a, b = snapshot(src), snapshot(dst)
    if a == b:
        return check(True, what)
    diff = sorted(set(a) ^ set(b))[:5] + [k for k in sorted(set(a) & set(b)) if a[k] != b[k]][:5]
    return check(False, "%s (differences: %r)" % (what, diff))


def lines(text):
    return [l for l in text.split("\n") if l]


def age(root, ns=1_500_000_000_000_000_000):
    """Sets every mtime below root (and root's) to `ns`: far from now, so no file is "racily clean"
    (README, Guarantees, racily clean files: a file copied within the racy window of its source's
    mtime is settled by content on the next run and its mtime re-stamped: counted as settled, not
    itemized)."""
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for n in filenames + dirnames:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                os.utime(p, ns=(ns, ns))
    os.utime(root, ns=(ns, ns))


def data_changes(out):
    """Itemized lines other than mtime re-stamps of racily clean files."""
    return [l for l in lines(out) if not l.startswith(".f..t...... ")]


# ---- groups ------------------------------------------------------------------------------------------

def test_help_version():
    rc, out, err = run("--help")
    check(rc == 0 and err == "", "--help exits 0, prints nothing on stderr")
    for opt in ["--dry-run", "--delete", "--no-delete", "--delete-excluded", "--max-delete=N", "--exclude=PATTERN",
                "--exclude-from=FILE", "--allow-empty-source", "--copy-links", "--links", "--copy-unsafe-links", "--safe-links",
                "--no-links", "--checksum", "--size-only", "--update", "--ignore-times", "--modify-window=SECS", "--inplace",
                "--jobs=N", "--itemize-changes", "--verbose", "--quiet", "--stats", "--progress", "--json",
                "--help", "--version", "--insecure-links", "--hard-links", "--owner", "--group", "--one-file-system", "--specials",
                "--devices", "--backup-dir=DIR", "--fsync", "--max-size=SIZE", "--acls", "-H,", "-o,", "-g,", "-x,", "-n,", "-L,", "-l,", "-c,", "-u,", "-I,", "-j,", "-i,", "-v,", "-q,"]:
        check(re.search(r"^\s+(-\w, )?" + re.escape(opt.rstrip(",")) + r"\b", out, re.M) is not None
              or ("  " + opt) in out or (", " + opt + " ") in out, "--help documents " + opt)
    check("Examples:" in out and "Exit status:" in out, "--help has examples and the exit codes")
    check(all(len(l) <= 110 for l in out.splitlines()), "--help lines fit 110 columns")
    # what --help calls a usage error is one: --no-p is accepted, --no-r and --no-t are not
    called = set(re.findall(r"--no-\w+", " ".join(re.findall(r"\(([^()]*)are usage errors\)", out))))
    accepted = {o for o in ["--no-p", "--no-perms", "--no-r", "--no-t"]
                if run_as_given(o, "-n", "-q", "/nonexistent-src/", "/nonexistent-dst")[0] != 1}
    check(called == {"--no-r", "--no-t"} and accepted == {"--no-p", "--no-perms"},
          "--help's usage errors (%s) are those refused, --no-p is accepted (%s)" % (sorted(called), sorted(accepted)))
    check(not re.search(r"-L, --copy-links.*default", out) and "the default without -l, -L, -a" in " ".join(out.split()),
          "--help: -L is not the default; skipping symlinks is")
    # the README's option block (## The CLI) lists what --help lists (from the option table,
    # examples/cli/options.hpp) and no option --help does not know (issue 46)
    readme = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")).read()
    cli = readme[readme.index("## The CLI"):]
    block = cli[cli.index("```\ntreesync [OPTIONS] SRC DST\n"):]
    block = block[4:block.index("\n```", 4)]
    sections = out[out.index("What is synced:"):out.index("\nOptions refused together")]
    # the library's refusals (treesync::option_rules), as --help words them, are the README's too
    refusals = out[out.index("\nOptions refused together"):out.index("\nFilter rules")].splitlines()[2:]
    refusals = [line.strip() for line in refusals if line.strip()]
    readme_lines = set(line.strip() for line in cli.splitlines())
    check(len(refusals) >= 4 and all(line in readme_lines for line in refusals),
          "the README lists the options refused together as --help does (%s)" %
          [line for line in refusals if line not in readme_lines])
    listed = set()
    for line in sections.splitlines():
        if line.startswith("  ") and not line.startswith("    " * 7) and line[:28].strip():
            for one in line[:28].strip().split(", "):
                listed.add(re.sub(r"[=\[].*", "", one))
    listed.discard("--no-OPTION")
    block_tokens = set(re.findall(r"(?<![\w/-])(--?[A-Za-z][\w-]*)", block))
    shorts = {t[1] for t in block_tokens if not t.startswith("--") and len(t) == 2} | \
             {c for t in re.findall(r"(?<![\w-])-([A-Za-z])(?=/)", block) for c in t}
    missing = sorted(o for o in listed if (o[2:] if o.startswith("--") else o[1]) and
                     not (o in block_tokens if o.startswith("--") else o[1] in shorts))
    check(len(listed) > 60 and not missing, "the README's option block lists every option --help lists (%d; missing: %s)"
          % (len(listed), missing))
    known = set(re.findall(r"(?<![\w-])(--[A-Za-z][\w-]*)", out))
    unknown = sorted(t for t in block_tokens if t.startswith("--") and t not in known and
                     not (t.startswith("--no-") and "--" + t[5:] in known) and t != "--no-OPTION")
    check(not unknown, "the README's option block names no option --help does not know (%s)" % unknown)
    rc, out, err = run("--version")
    header = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "include", "treesync",
                               "treesync.hpp")).read()
    version = re.search(r'#define TREESYNC_VERSION_STRING "([^"]+)"', header).group(1)
    check(rc == 0 and out == "treesync %s\n" % version, "--version prints 'treesync %s'" % version)


def test_usage_errors():
    w = fresh("usage")
    src = os.path.join(w, "src")
    write(os.path.join(src, "a"), "a")
    dst = os.path.join(w, "dst")
    cases = [
        (["--no-such-option", src, dst], "unknown option"),
        (["-Z", src, dst], "unknown option"),
        ([src], "SRC and DST are required"),
        ([src, dst, dst], "too many operands"),
        (["--jobs=many", src, dst], "--jobs"),
        (["-j"], "needs a value"),
        (["--max-delete=-1", src, dst], "--max-delete"),
        (["--modify-window=-1", src, dst], "--modify-window"),
        (["--modify-window=abc", src, dst], "--modify-window"),
        (["--stats=yes", src, dst], "takes no value"),
        (["-c", "--size-only", src, dst], "exclude each other"),
        (["--inplace", "--backup-dir=b", src, dst], "--inplace and --backup-dir exclude each other (a backup"),
        (["--state=st", "-H", src, dst], "--state and -H exclude each other (hard links"),
        (["--state=st", "--backup-dir=b", src, dst], "--state and --backup-dir exclude each other (backups"),
        (["--include-dirs=x", src, dst], "unknown option --include-dirs"),
        (["--exclude-from=" + os.path.join(w, "missing"), src, dst], "No such file"),
    ]
    for opt in ["-A", "--acls"]:
        cases.append(([opt, src, dst], "not supported yet"))
    cases.append((["--backup-dir=", src, dst], "--backup-dir"))
    for args, message in cases:
        rc, out, err = run(*args)
        check(rc == 1 and message in err and out == "",
              "treesync %s: exit 1, stderr says %r (got %d, %r)" % (" ".join(args[:1]), message, rc, err[:120]))
    check(not os.path.exists(dst), "no usage error touched DST")
    rc, out, err = run("-nvi", "-j2", "-r", "-t", "-p", "--delete", src, dst)
    check(rc == 0 and not os.path.exists(dst), "combined short options and rsync's always-on ones are accepted")


def test_itemize():
    w = fresh("itemize")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    t0 = 1_600_000_000_000_000_000
    write(os.path.join(src, "same.txt"), "unchanged\n", 0o644, t0)
    write(os.path.join(src, "grow.txt"), "short\n", 0o644, t0)
    write(os.path.join(src, "touch.txt"), "same size\n", 0o644, t0)
    write(os.path.join(src, "mode.sh"), "#!/bin/sh\n", 0o644, t0)
    write(os.path.join(src, "gone.txt"), "deleted later\n", 0o644, t0)
    write(os.path.join(src, "sub", "inner.txt"), "inner\n", 0o644, t0)
    os.symlink("same.txt", os.path.join(src, "link"))
    os.utime(os.path.join(src, "sub"), ns=(t0, t0))

    rc, out, err = run("-i", "-l", src, dst)
    show(["-i", "-l", "SRC", "DST"], rc, out, err)
    # rsync's order: the directory, its files by name, then its sub-directories and their contents
    expected = ["cd+++++++++ ./", ">f+++++++++ gone.txt", ">f+++++++++ grow.txt", "cL+++++++++ link -> same.txt",
                ">f+++++++++ mode.sh", ">f+++++++++ same.txt", ">f+++++++++ touch.txt", "cd+++++++++ sub/",
                ">f+++++++++ sub/inner.txt"]
    got = [l for l in lines(out) if not re.match(r"^\d+ scanned", l)]
    check(rc == 0 and got == expected, "cold run: one created line per entry, in rsync's order (%r)" % got)
    summary = [l for l in lines(out) if re.match(r"^\d+ scanned", l)]
    check(len(summary) == 1 and "9 created" in summary[0], "cold run: the summary line counts 9 created")

    write(os.path.join(src, "grow.txt"), "a longer line now\n", 0o644, t0 + 5_000_000_000)
    write(os.path.join(src, "touch.txt"), "same size\n", 0o644, t0 + 7_000_000_000)
    os.chmod(os.path.join(src, "mode.sh"), 0o755)
    os.unlink(os.path.join(src, "gone.txt"))
    os.mkdir(os.path.join(src, "newdir"))
    os.utime(os.path.join(src, "sub"), ns=(t0 + 9_000_000_000, t0 + 9_000_000_000))
    os.chmod(os.path.join(src, "sub"), 0o750)
    rc, out, err = run("-i", "-l", "-q", src, dst)
    show(["-i", "-l", "-q", "SRC", "DST"], rc, out, err)
    got = sorted(lines(out))
    for want in [">f.st...... grow.txt", ">f..t...... touch.txt", ".f...p..... mode.sh", "*deleting   gone.txt",
                 "cd+++++++++ newdir/", ".d..tp..... sub/"]:
        check(want in got, "update run itemizes %r" % want)
    check(not any("same.txt" in l or "inner.txt" in l or "link" in l for l in got),
          "update run: unchanged entries are not listed")
    check(all(re.match(r"^([<>ch.*][fdLDS][.+cstp]{9}|\*deleting  ) \S", l) for l in got),
          "every line is an 11-character code, a space and a path")

    # -c: same size, same mtime, different content
    inner = os.path.join(src, "sub", "inner.txt")
    st = os.stat(os.path.join(dst, "sub", "inner.txt"))
    write(inner, "INNER\n", 0o644, st.st_mtime_ns)
    rc, out, err = run("-i", "-q", src, dst)
    check(rc == 0 and "inner.txt" not in out, "size+mtime does not see a same-size, same-mtime edit")
    rc, out, err = run("-i", "-q", "-c", src, dst)
    check(rc == 0 and ">fc........ sub/inner.txt" in lines(out), "-c itemizes a content change as >fc........")

    # -v: one word per action
    os.unlink(os.path.join(src, "touch.txt"))
    write(os.path.join(src, "v.txt"), "v\n", None, t0)
    os.utime(os.path.join(src, "sub"), ns=(t0, t0))
    os.utime(src, ns=(t0, t0))
    rc, out, err = run("-v", src, dst)
    check(rc == 0 and "delete   touch.txt" in lines(out) and "create   v.txt" in lines(out),
          "-v prints 'create   PATH' / 'delete   PATH' lines (%r)" % lines(out))
    rc, out, err = run("-q", src, dst)
    check(rc == 0 and out == "" and err == "", "-q on an unchanged tree prints nothing")


def test_json():
    w = fresh("json")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    srcb = os.fsencode(src)
    newline = b"two\nlines"
    invalid = b"latin1-\xe9-\xff"
    control = b"esc-\x1b[31m-tab\t\"quote\"\\"
    for name in [newline, invalid, control, "ünïcødé.txt".encode()]:
        write(os.path.join(srcb, name), b"x")
    os.symlink(b"nowhere", os.path.join(srcb, b"dangling\nlink"))
    rc, out, err = run("--json", "-i", "-L", src, dst)  # -L: the link is followed, and fails
    check(rc == 23, "--json run with a dangling link exits 23 (got %d)" % rc)
    check(out.count("\n") == 1 and out.endswith("}\n"), "--json prints one object on one line")
    v = subprocess.run([sys.executable, "-c", "import json,sys; json.load(sys.stdin)"], input=out.encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(v.returncode == 0, "python3 -c 'import json,sys; json.load(sys.stdin)' accepts it " + v.stderr.decode())
    try:
        doc = json.loads(out)
    except ValueError as e:
        check(False, "the JSON parses: %s" % e)
        return
    for key, kind in [("schema", int), ("version", str), ("source", str), ("destination", str), ("dry_run", bool),
                      ("jobs", int), ("status", str), ("exit_code", int), ("cancelled", bool), ("counts", dict),
                      ("bytes_copied", int), ("elapsed_seconds", float), ("bytes_per_second", int),
                      ("errors", list), ("vanished", list), ("skipped", list), ("actions", list)]:
        check(isinstance(doc.get(key), kind), "schema: %s is a %s" % (key, kind.__name__))
    check(doc["status"] == "errors" and doc["exit_code"] == 23 and doc["refusal"] is None and doc["signal"] is None,
          "status 'errors', exit_code 23, no refusal, no signal")
    check(set(doc["counts"]) == {"scanned", "created", "updated", "meta_updated", "deleted", "excluded", "skipped",
                                 "cleaned", "settled", "errors", "vanished"}, "counts has the documented keys")
    check(doc["counts"]["created"] == 5 and doc["counts"]["errors"] == 1, "counts: 5 created, 1 error")
    errs = doc["errors"]
    check(len(errs) == 1 and errs[0]["path"] == "dangling\nlink" and errs[0]["operation"]
          and isinstance(errs[0]["code"], int) and errs[0]["category"] and errs[0]["message"],
          "errors[0]: path (with its newline), operation, code, category, message")
    paths = {a["path"]: a for a in doc["actions"]}
    check("two\nlines" in paths, "a name with a newline round-trips through JSON")
    check(control.decode() in paths, "control characters, quotes and backslashes round-trip")
    check("ünïcødé.txt" in paths and "path_hex" not in paths["ünïcødé.txt"], "valid UTF-8 is kept as text")
    lossy = "latin1-\u00e9-\u00ff"
    check(lossy in paths and paths[lossy].get("path_hex") == invalid.hex(),
          "invalid UTF-8: \\u00XX per byte, plus path_hex with the exact bytes")
    check("\\u00e9" in out and "\\u001b" in out and "\\n" in out, "the escapes are \\u00e9, \\u001b, \\n")
    check(all(c >= " " for c in out.rstrip("\n")), "no raw control character in the JSON text")
    a = paths[""]
    check(a["kind"] == "create" and a["type"] == "directory" and a["itemize"] == "cd+++++++++"
          and a["changes"] == ["size", "mtime", "mode"], "an action: kind, type, itemize, changes")
    io = "IO error encountered -- skipping file deletion\n"  # rsync's line: --delete met a source error
    check("dangling" in err and "\n" not in err.replace(io, "").rstrip("\n"), "stderr still reports the error, on one line")

    rc, out, err = run("--json", src, dst)
    doc = json.loads(out)
    check("actions" not in doc, "without -i/-v there is no actions array")
    rc, out, err = run("--json", os.path.join(w, "missing"), dst)
    doc = json.loads(out)
    check(rc == 23 and doc["status"] == "refused" and doc["exit_code"] == 23 and doc["refusal"]["message"],
          "a refusal: status 'refused', exit 23 for a missing source (rsync's), refusal.message")
    check("treesync: refused" in err, "a refusal is also reported on stderr")


def test_exit_codes():
    w = fresh("exit")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    write(os.path.join(src, "a"), "a")
    write(os.path.join(src, "sub", "b"), "b")
    rc, out, err = run(src, dst)
    check(rc == 0, "0: a clean sync")
    rc, out, err = run("--bogus", src, dst)
    check(rc == 1, "1: a usage error")

    before = snapshot(dst)
    rc, out, err = run(os.path.join(w, "missing"), dst)
    check(rc == 23 and "treesync: refused" in err, "23: a missing source (rsync's status)")
    rc, out, err = run(src, os.path.join(src, "sub", "inside"))
    check(rc == 2 and not os.path.exists(os.path.join(src, "sub", "inside")), "2: DST inside SRC")
    rc, out, err = run(src, src)
    check(rc == 2, "2: SRC and DST the same directory")
    empty = fresh("exit-empty")
    rc, out, err = run(empty, dst)
    check(rc == 2 and "empty" in err, "2: an empty source over a non-empty destination")
    os.unlink(os.path.join(src, "a"))
    os.unlink(os.path.join(src, "sub", "b"))
    check(snapshot(dst) == before, "refusals touched nothing")
    rc, out, err = run("--max-delete=1", src, dst)
    check(rc == 25 and "would delete 2 entries, --max-delete=1" in err,
          "25: --max-delete=1 against a run deleting 2, with the counts in CLI spelling (%r)" % err)
    check(sorted(snapshot(dst)) == sorted(before), "--max-delete=1: no deletion made")
    rc, out, err = run("--max-delete=2", "-i", src, dst)
    check(rc == 0 and out.count("*deleting") == 2, "--max-delete=2 lets a run deleting 2 proceed")
    rc, out, err = run("--allow-empty-source", "-i", empty, dst)
    check(rc == 0 and "*deleting   sub/" in out and os.listdir(dst) == [], "--allow-empty-source empties DST")

    write(os.path.join(src, "ok"), "ok")
    os.symlink("missing-target", os.path.join(src, "dangling"))
    rc, out, err = run("-L", src, dst)  # followed (-L): it fails
    check(rc == 23 and re.search(r"^treesync: \S+ dangling \(source \S+/dangling\): ", err, re.M),
          "23: a dangling link, reported as 'treesync: OPERATION PATH (SIDE FULL-PATH): reason' (%r)" % err)
    check(os.path.exists(os.path.join(dst, "ok")), "23: every other entry was still synced")

    # 24: a file that keeps growing while it is copied is reported as vanished (changed during copy)
    src24, dst24 = os.path.join(w, "src24"), os.path.join(w, "dst24")
    grow = os.path.join(src24, "growing.log")
    write(grow, b"x" * (48 << 20))
    got = None
    for attempt in range(6):
        stop = threading.Event()

        def writer():
            with open(grow, "ab", buffering=0) as f:
                while not stop.is_set():
                    f.write(b"y" * 512)
                    time.sleep(0.0005)

        t = threading.Thread(target=writer)
        t.start()
        try:
            time.sleep(0.01)
            rc, out, err = run("-j1", src24, dst24)
        finally:
            stop.set()
            t.join()
        got = (rc, err)
        if rc == 24:
            break
        if os.path.exists(dst24):
            shutil.rmtree(dst24)
    check(got[0] == 24 and "growing.log" in got[1], "24: a source file changed during the run (%r)" % (got,))


def test_forged_lines():
    w = fresh("forge")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    srcb = os.fsencode(src)
    evil = b"evil\n>f+++++++++ forged"
    write(os.path.join(srcb, evil), b"x")
    write(os.path.join(srcb, b"cr\rline"), b"x")
    write(os.path.join(srcb, b"csi\xc2\x9b31m"), b"x")
    write(os.path.join(srcb, b"bidi\xe2\x80\xaetxt.exe"), b"x")
    write(os.path.join(srcb, b"bad\xff"), b"x")
    os.symlink(b"nowhere", os.path.join(srcb, b"dead\n>f+++++++++ also-forged"))
    rc, out, err = run("-i", "-q", "-L", src, dst)  # -L: the dangling link fails, on stderr
    show(["-i", "-q", "-L", "SRC", "DST"], rc, out, err)
    got = lines(out)
    check(len(got) == 6, "6 itemized lines for 6 created entries (got %d)" % len(got))
    check(not any(l.startswith(">f+++++++++ forged") or "also-forged" in l and not l.startswith("treesync")
                  for l in got), "no forged line on stdout")
    check(">f+++++++++ evil\\n>f+++++++++ forged" in got, "the newline is shown as \\n")
    check(">f+++++++++ cr\\rline" in got and ">f+++++++++ csi\\xc2\\x9b31m" in got
          and ">f+++++++++ bidi\\xe2\\x80\\xaetxt.exe" in got and ">f+++++++++ bad\\xff" in got,
          "\\r, a C1 control, a bidi override and invalid UTF-8 are escaped")
    check(all(0x20 <= ord(c) < 0x7f for c in out.replace("\n", "")), "stdout is printable ASCII only")
    errs = [l for l in lines(err) if l != "IO error encountered -- skipping file deletion"]  # (--delete)
    check(len(errs) == 1 and errs[0].startswith("treesync: ") and "dead\\n>f+++++++++ also-forged" in errs[0],
          "stderr: one line for the dangling link, its newline escaped (%r)" % errs)
    rc, out, err = run("-v", "-q", "-L", src, dst + "-v")
    check(len(lines(out)) == 6 and "create   evil\\n>f+++++++++ forged" in lines(out), "-v escapes the same way")


def test_exclude_from():
    w = fresh("exclude")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    for name in ["keep.py", "mod.pyc", "pkg/__pycache__/mod.cpython-311.pyc", "pkg/keep.py", "build/out.o",
                 "#notes", "; semi", "scratch.tmp", "docs/build/keep.html"]:
        write(os.path.join(src, name), name)
    rules = os.path.join(w, "rules")
    write(rules, "# comment lines start with '#'\n"
                 "; or with ';'\n"
                 "\n"
                 "#notes\n"
                 "*.pyc\r\n"
                 "__pycache__/\n"
                 "/build/\n")
    rc, out, err = run("-i", "-q", "--exclude-from=" + rules, "--exclude", "*.tmp", src, dst)
    show(["-i", "-q", "--exclude-from=RULES", "--exclude", "*.tmp", "SRC", "DST"], rc, out, err)
    for name, present in [("keep.py", True), ("pkg/keep.py", True), ("#notes", True), ("; semi", True),
                          ("docs/build/keep.html", True), ("mod.pyc", False), ("pkg/__pycache__", False),
                          ("build", False), ("scratch.tmp", False)]:
        check(os.path.lexists(os.path.join(dst, name)) == present,
              "%s is %s" % (name, "copied" if present else "excluded"))
    # excluded destination entries are kept, or deleted with --delete-excluded
    write(os.path.join(dst, "local.pyc"), "x")
    rc, out, err = run("-i", "-q", "--exclude-from", rules, src, dst)
    check(rc == 0 and os.path.exists(os.path.join(dst, "local.pyc")), "an excluded DST entry is kept")
    rc, out, err = run("-i", "-q", "--exclude-from", rules, "--delete-excluded", src, dst)
    check(rc == 0 and "*deleting   local.pyc" in lines(out) and not os.path.exists(os.path.join(dst, "local.pyc")),
          "--delete-excluded deletes it")
    rc, out, err = run("-i", "-q", "--exclude-from=-", src, dst + "2", stdin=b"*.py\n")
    check(rc == 0 and not os.path.exists(os.path.join(dst + "2", "keep.py")), "--exclude-from=- reads stdin")


def test_options():
    w = fresh("options")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    t0 = 1_600_000_000_000_000_000
    write(os.path.join(src, "f"), "12345", 0o644, t0)
    write(os.path.join(src, "dir", "g"), "g")
    os.symlink("f", os.path.join(src, "inside"))
    outside = os.path.join(w, "outside.txt")
    write(outside, "outside")
    os.symlink(outside, os.path.join(src, "outside"))
    age(src, t0)
    age(outside, t0)

    rc, out, err = run(src, dst + "-default")
    check(rc == 0 and not os.path.lexists(os.path.join(dst + "-default", "inside")) and
          not os.path.lexists(os.path.join(dst + "-default", "outside")), "no link option: links are skipped (rsync's)")
    rc, out, err = run("-L", src, dst)
    check(rc == 0 and not os.path.islink(os.path.join(dst, "inside")) and
          open(os.path.join(dst, "outside")).read() == "outside", "-L copies what links point to")
    rc, out, err = run("-l", src, dst + "-l")
    check(os.readlink(os.path.join(dst + "-l", "inside")) == "f" and os.path.islink(os.path.join(dst + "-l", "outside")),
          "-l recreates links")
    rc, out, err = run("-l", "-L", src, dst + "-lL")
    check(not os.path.islink(os.path.join(dst + "-lL", "inside")), "-L wins over -l")
    rc, out, err = run("--copy-unsafe-links", src, dst + "-u")
    check(os.path.islink(os.path.join(dst + "-u", "inside")) and not os.path.islink(os.path.join(dst + "-u", "outside")),
          "--copy-unsafe-links keeps the inside link, copies the outside one")
    rc, out, err = run("--no-links", src, dst + "-n")
    check(rc == 0 and not os.path.lexists(os.path.join(dst + "-n", "inside")), "--no-links skips links")

    f = os.path.join(dst, "f")
    write(f, "54321", 0o644, t0)  # same size and mtime, other content
    rc, out, err = run("-i", "-q", src, dst)
    check(rc == 0 and out == "", "size+mtime: a same-size same-mtime file is current")
    write(f, "abc", 0o644, t0 + 10**9)
    rc, out, err = run("-i", "-q", "--size-only", src, dst)
    check(">f.st...... f" in lines(out), "--size-only copies a file whose size differs")
    write(f, "xxxxx", 0o644, t0 + 10**9)
    rc, out, err = run("-i", "-q", "--size-only", src, dst)
    check(lines(out) == [".f..t...... f"] and open(f).read() == "xxxxx" and os.stat(f).st_mtime_ns == t0,
          "--size-only ignores content; a current file gets the source's mtime (like rsync -t)")
    os.utime(f, ns=(t0 + 10**9, t0 + 10**9))
    rc, out, err = run("-i", "-q", "-c", src, dst)
    check(lines(out) == [">fc.t...... f"] and open(f).read() == "12345", "-c copies a same-size different file")
    os.utime(f, ns=(t0 + 10**9, t0 + 10**9))
    rc, out, err = run("-i", "-q", "-c", src, dst)
    check(lines(out) == [".f..t...... f"] and os.stat(f).st_mtime_ns == t0, "-c re-stamps an identical file")
    write(f, "xxxxx", 0o644, t0 + 10**9)
    rc, out, err = run("-i", "-q", "-u", src, dst)
    check(out == "" and open(f).read() == "xxxxx", "-u keeps a newer destination file")
    os.utime(f, ns=(t0 - 10**9, t0 - 10**9))
    rc, out, err = run("-i", "-q", "--update", src, dst)
    check(">f..t...... f" in lines(out) and open(f).read() == "12345", "-u replaces an older one")
    os.utime(f, ns=(t0 + 1_500_000_000, t0 + 1_500_000_000))
    rc, out, err = run("-i", "-q", "--modify-window=1.5", src, dst)
    check(out == "", "--modify-window=1.5: 1.5 s apart counts as equal")
    rc, out, err = run("-i", "-q", "--modify-window=1.4", src, dst)
    check(">f..t...... f" in lines(out), "--modify-window=1.4: 1.5 s apart does not")

    write(os.path.join(src, "f"), "new content", 0o644)
    ino = os.stat(f).st_ino
    rc, out, err = run("--inplace", src, dst)
    check(rc == 0 and os.stat(f).st_ino == ino and open(f).read() == "new content", "--inplace keeps the inode")
    write(os.path.join(src, "f"), "newer content")
    rc, out, err = run(src, dst)
    check(rc == 0 and os.stat(f).st_ino != ino, "the default writes a new file and renames it into place")

    write(os.path.join(dst, "extra"), "x")
    rc, out, err = run("--no-delete", "-i", "-q", src, dst)
    check(rc == 0 and os.path.exists(os.path.join(dst, "extra")) and "extra" not in out,
          "--no-delete keeps extra entries")
    rc, out, err = run("-i", "-q", src, dst)
    check("*deleting   extra" in lines(out), "the default deletes them")

    for j in ["-j1", "-j0", "--jobs=8", "--jobs", "3"]:
        rc, out, err = run(*([j] if j != "3" else []), src, dst + j)
    same_tree(dst + "-j1", dst + "-j0", "-j1 and -j0 give the same tree")
    rc, out, err = run("--stats", src, dst)
    for label in ["Entries scanned:", "Created:", "Updated:", "Deleted:", "Bytes copied:", "Elapsed:", "Rate:"]:
        check(label in out, "--stats prints " + label)


# ---- --progress (cli/progress.hpp) ----------------------------------------------------------------

def human(n):
    """cli/text.hpp's human_bytes()"""
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    u = 0
    n = float(n)
    while n >= 1024.0 and u + 1 < len(units):
        n /= 1024.0
        u += 1
    return "%.0f B" % n if u == 0 else "%.1f %s" % (n, units[u])


def tree_bytes(root):
    return sum(os.lstat(os.path.join(d, n)).st_size for d, _, names in os.walk(root) for n in names
               if stat.S_ISREG(os.lstat(os.path.join(d, n)).st_mode))


def tree_names(root):
    """Relative paths of every entry below root."""
    out = set()
    for d, dirs, names in os.walk(root):
        for n in dirs + names:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def run_pty(args, cols=200, on_output=None):
    """Runs the CLI with stdout on a pseudo-terminal `cols` wide (stderr a pipe) and reads until EOF.
    Returns (exit status, stdout text with the terminal's \r\n turned back into \n, stderr text).
    on_output(p) is called once, at the first output."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    p = subprocess.Popen([CLI] + mirror_args(args), stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    err = []
    reader = threading.Thread(target=lambda: err.append(p.stderr.read()))
    reader.start()
    data = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the last writer closed the terminal
            break
        if not chunk:
            break
        if not data and on_output:
            on_output(p)
        data += chunk
    p.wait()
    reader.join()
    os.close(master)
    text = data.decode("utf-8", "replace").replace("\r\n", "\n")
    return p.returncode, text, err[0].decode("utf-8", "replace")


# the last line of a run: DONE/TOTAL PCT% RATE/s in H:MM:SS to-chk=LEFT/ENTRIES [NAME]
LAST_TTY = re.compile(r"^(\d+(?:\.\d)? (?:B|KiB|MiB|GiB))/(\d+(?:\.\d)? (?:B|KiB|MiB|GiB)) +(\d+)% \S+ \S+/s "
                      r"in \d+:\d\d:\d\d to-chk=(\d+)/(\d+)(?: (.*?))? *$")
LAST_LOG = re.compile(r"^([\d,]+)/([\d,]+) +(\d+)% \S+ \S+/s in \d+:\d\d:\d\d to-chk=(\d+)/(\d+)(?: (.*))?$")


def progress_tree(root, files=400):
    for i in range(files):
        write(os.path.join(root, "d%02d" % (i % 10), "file%03d.dat" % i), bytes([i % 251]) * (1000 + 37 * i))
    write(os.path.join(root, "big", "one.bin"), b"b" * (3 << 20))
    write(os.path.join(root, "skip", "x.tmp"), b"t" * 12345)


def no_summary(text):
    """The lines of `text` but the summary line (its seconds differ from run to run)."""
    return [x for x in lines(text) if not re.match(r"\d+ scanned, ", x)]


def tty_segments(text):
    """The terminal output up to the first newline, split at '\r': the states of the live line;
    and the rest (what was printed after the line was ended)."""
    head, _, rest = text.partition("\n")
    return [x for x in head.split("\r") if x], rest


def check_last_tty(segments, total_bytes, entries, names, what):
    last = segments[-1] if segments else ""
    m = LAST_TTY.match(last)
    if not check(m is not None, "%s: the last line reads DONE/TOTAL PCT%% RATE in TIME to-chk=N/M NAME (%r)"
                 % (what, last)):
        return
    check(m.group(3) == "100", "%s: the percentage reaches 100%% (%s%%)" % (what, m.group(3)))
    check(m.group(2) == human(total_bytes) and m.group(1) == human(total_bytes),
          "%s: done and total bytes are the tree's, %s (%s/%s)" % (what, human(total_bytes), m.group(1), m.group(2)))
    check(m.group(4) == "0" and int(m.group(5)) == entries,
          "%s: to-chk=0/%d, every entry counted and checked (to-chk=%s/%s)" % (what, entries, m.group(4), m.group(5)))
    if names is not None:
        check(m.group(6) is not None and m.group(6) in names,
              "%s: the latest entry is named, a path of the tree (%r)" % (what, m.group(6)))


def test_progress_tty():
    w = fresh("progress-tty")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    progress_tree(src)
    all_bytes, all_entries = tree_bytes(src), len(tree_names(src))

    rc, out, err = run_pty(["--progress", "-j1", src, dst])
    segments, rest = tty_segments(out)
    check(rc == 0, "--progress on a terminal: exit 0")
    same_tree(src, dst, "the run with --progress mirrors the tree")
    check_last_tty(segments, all_bytes, all_entries, tree_names(src), "a cold run on a terminal")
    check(out.count("\n") == 2 and rest.startswith("%d scanned" % all_entries),
          "the live line is one line, rewritten with \\r, ended by a newline before the summary line (%r)" % rest[:60])
    check(all(len(x) <= 199 for x in segments), "no state of the line is wider than the terminal")
    for x in segments:
        if " to-chk=" not in x:
            check(re.search(r"\+  --% .* ETA -:--:-- ir-chk=\d+/\d+\+", x) is not None,
                  "a state before the count ended marks the totals with '+', without percentage or ETA (%r)" % x)
    check(err == "", "nothing on stderr")

    # a second run: nothing to copy, the bytes are done as their files are found current
    rc, out, err = run_pty(["--progress", src, dst])
    check_last_tty(tty_segments(out)[0], all_bytes, all_entries, None, "a run with nothing to do")

    # the count uses the run's filter rules: the totals are what is mirrored
    rc, out, err = run_pty(["--progress", "--exclude=skip/", "--exclude=*.bin", src, dst + "-filtered"])
    mirrored = dst + "-filtered"
    check_last_tty(tty_segments(out)[0], tree_bytes(mirrored), len(tree_names(mirrored)), tree_names(mirrored),
                   "--exclude: the totals are those of the mirrored entries")
    check(tree_bytes(mirrored) < all_bytes, "the excluded bytes are not in the mirror")

    # a narrow terminal: the line never wraps; a name too long is shortened from the left
    rc, out, err = run_pty(["--progress", src, dst + "-narrow"], cols=60)
    segments, rest = tty_segments(out)
    check(rc == 0 and segments and all(len(x) <= 59 for x in segments),
          "60 columns: every state of the line fits in 59 (%r)" % (segments[-1:],))
    long_src = os.path.join(w, "long")
    for i in range(30):
        write(os.path.join(long_src, "a_file_name_far_too_long_for_what_is_left_of_the_line_%02d.dat" % i), b"x" * 100)
    rc, out, err = run_pty(["--progress", long_src, dst + "-long"], cols=80)
    segments, rest = tty_segments(out)
    check(rc == 0 and segments and all(len(x) <= 79 for x in segments) and
          re.search(r" \.\.\.\S*_line_\d\d\.dat$", segments[-1]) is not None,
          "80 columns: a long name is shortened from the left with '...', the line fits (%r)" % (segments[-1:],))

    # -i and -v print the same lines, in the same order, with and without --progress
    rc_a, plain, err_a = run("-i", src, dst + "-i1")
    rc_b, out, err_b = run_pty(["-i", "--progress", src, dst + "-i2"])
    segments, rest = tty_segments(out)
    if not check(rc_a == 0 and rc_b == 0 and no_summary(rest) == no_summary(plain),
                 "-i: after the progress line, exactly what -i prints without --progress"):
        print("    exit %d and %d; stderr %r and %r" % (rc_a, rc_b, err_a[-300:], err_b[-300:]))
        print("\n".join("    " + x for x in difflib.unified_diff(no_summary(plain), no_summary(rest), "without",
                                                                 "with --progress", lineterm="")))
    rc_a, plain, _ = run("-v", src, dst + "-v1")
    rc_b, out, _ = run_pty(["-v", "--info=progress2", src, dst + "-v2"])
    check(rc_a == 0 and rc_b == 0 and no_summary(tty_segments(out)[1]) == no_summary(plain),
          "-v with --info=progress2: the same lines as without")

    # SIGINT, sent at the first output (the first redraw, 0.1 s in): the line is ended before the
    # partial report
    int_src = os.path.join(w, "int-src")
    for attempt in range(1, 6):
        for i in range(3000):
            write(os.path.join(int_src, "a%d" % attempt, "d%02d" % (i % 30), "f%04d" % i), b"i" * 2000)
        target = dst + "-int%d" % attempt
        rc, out, err = run_pty(["--progress", "-j1", int_src, target],
                               on_output=lambda p: p.send_signal(signal.SIGINT))
        if rc == 0:
            print("  attempt %d: the run finished before SIGINT; again with more files" % attempt)
            continue
        segments, rest = tty_segments(out)
        check(rc == 20, "SIGINT during a run with --progress: exit 20 (%d)" % rc)
        check(segments and re.search(r" in \d+:\d\d:\d\d ", segments[-1]) is not None,
              "SIGINT: the last state of the line is drawn (%r)" % (segments[-1:],))
        check(rest.startswith("(interrupted) ") and rest.count("\n") == 1,
              "SIGINT: the summary line starts on a line of its own (%r)" % rest[:60])
        check("interrupted by SIGINT" in err, "SIGINT: stderr says so")
        break
    else:
        check(False, "SIGINT could be sent while the run was unfinished (5 attempts)")


def test_progress_pipe():
    w = fresh("progress-pipe")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    progress_tree(src, files=100)
    all_bytes, all_entries = tree_bytes(src), len(tree_names(src))
    for flag in ["--progress", "--info=progress2", "--progress=auto"]:
        rc, out, err = run(flag, src, dst + flag)
        check(rc == 0 and lines(out) == [x for x in lines(out) if " scanned, " in x] and len(lines(out)) == 1,
              "%s on a pipe: only the summary line (%r)" % (flag, out[:80]))
    rc, out, err = run("--info", "progress2", src, dst + "-info")
    check(rc == 0 and len(lines(out)) == 1, "--info progress2 (separate value) is accepted")

    rc, out, err = run("--progress=always", src, dst)
    outl = lines(out)
    check(rc == 0 and "\r" not in out and len(outl) >= 2 and outl[-1].startswith("%d scanned" % all_entries),
          "--progress=always on a pipe: progress lines, one per update, no \\r, then the summary line")
    m = LAST_LOG.match(outl[-2] if len(outl) >= 2 else "")
    if check(m is not None, "--progress=always: the last line reads DONE/TOTAL PCT%% RATE in TIME to-chk=N/M (%r)"
             % (outl[-2:-1],)):
        check(m.group(2) == "{:,}".format(all_bytes) and m.group(1) == m.group(2) and m.group(3) == "100",
              "--progress=always: exact bytes, total = the tree's %d bytes, 100%% (%s)" % (all_bytes, outl[-2]))
        check(m.group(4) == "0" and int(m.group(5)) == all_entries,
              "--progress=always: to-chk=0/%d (%s/%s)" % (all_entries, m.group(4), m.group(5)))
        check(m.group(6) is not None and m.group(6) in tree_names(src), "--progress=always: names the latest entry")
    rc, out, err = run("--progress=always", "-i", src, dst + "-i")
    rc2, plain, err2 = run("-i", src, dst + "-i2")
    check(rc == 0 and no_summary("\n".join(x for x in lines(out) if not re.search(r" (?:to|ir)-chk=\d", x))) ==
          no_summary(plain),
          "--progress=always -i: the -i lines as without --progress")

    rc, out, err = run("--progress=never", src, dst + "-never")
    check(rc == 0 and len(lines(out)) == 1, "--progress=never: nothing but the summary")
    rc, out, err = run("--progress=always", "--no-progress", src, dst + "-no")
    check(rc == 0 and len(lines(out)) == 1, "--no-progress after --progress=always turns it off")

    for args in (["--progress=always", "--json"], ["--json", "--info=progress2"], ["--progress=always", "-i", "--json"]):
        rc, out, err = run(*(args + [src, dst + "-json"]))
        ok = True
        try:
            doc = json.loads(out)
            ok = isinstance(doc, dict) and doc["status"] == "ok" and out.count("\n") == 1
        except ValueError:
            ok = False
        check(rc == 0 and ok, "%s: stdout is the JSON object alone (%r)" % (" ".join(args), out[:60]))

    rc, out, err = run("--progress=always", os.path.join(w, "missing"), dst + "-missing")
    check(rc == 23 and out == "" and "refused" in err, "--progress=always, a refused run: no progress line (%r)" % out)
    rc, out, err = run("--progress=always", "--max-delete=0", os.path.join(src, "d00"), dst)
    check(rc == 25 and "--max-delete=0" in err, "--progress=always, over --max-delete: exit 25")

    for bad, words in ((["--info=stats"], "--info=stats: not supported"),
                       (["--info=progress2,stats"], "not supported"),
                       (["--progress=sometimes"], "expected auto, always or never")):
        rc, out, err = run(*(bad + [src, dst + "-bad"]))
        check(rc == 1 and words in err and out == "", "%s: a usage error (%r)" % (bad[0], err.splitlines()[:1]))


def test_progress_quiet():
    w = fresh("progress-quiet")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    progress_tree(src, files=100)
    for args in (["-q", "--progress"], ["--progress", "-q"], ["--info=progress2", "-q"], ["-q", "--progress=always"]):
        rc, out, err = run_pty(args + ["-j1", src, dst + "".join(args)])
        check(rc == 0 and out == "" and err == "", "%s on a terminal: nothing at all (%r)" % (" ".join(args), out[:60]))
        rc, out, err = run(*(args + [src, dst + "-pipe" + "".join(args)]))
        check(rc == 0 and out == "", "%s on a pipe: nothing at all" % " ".join(args))
    rc, out, err = run_pty(["-q", "-i", "--progress", src, dst + "-qi"])
    rc2, plain, _ = run("-q", "-i", src, dst + "-qi2")
    check(rc == 0 and out == plain and "%" not in out, "-q -i --progress on a terminal: the -i lines only")
    rc, out, err = run_pty(["--progress", "--json", src, dst + "-json"])
    try:
        doc = json.loads(out)
        ok = doc["status"] == "ok" and out.count("\n") == 1 and "\r" not in out
    except ValueError:
        ok = False
    check(rc == 0 and ok, "--progress --json on a terminal: the JSON object alone (%r)" % out[:60])


def test_dry_run():
    w = fresh("dry")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    write(os.path.join(src, "a"), "a")
    write(os.path.join(src, "sub", "b"), "b")
    rc, out, err = run("-n", "-i", src, dst)
    check(rc == 0 and not os.path.exists(dst), "-n on a missing DST does not create it")
    check(">f+++++++++ a" in lines(out) and "(dry run)" in out, "-n -i still lists what would be done")
    run(src, dst)
    write(os.path.join(src, "a"), "changed")
    os.unlink(os.path.join(src, "sub", "b"))
    os.chmod(os.path.join(src, "sub"), 0o700)
    write(os.path.join(src, "new"), "new")
    write(os.path.join(dst, "extra", "x"), "x")
    before = snapshot(dst)
    for args in (["-n"], ["--dry-run", "-i"], ["-n", "-c"], ["-n", "--delete-excluded", "--exclude=a"],
                 ["-n", "--inplace"], ["-n", "-l"], ["-n", "--json", "-v"], ["-n", "--max-delete=5"]):
        rc, out, err = run(*(args + [src, dst]))
        check(rc == 0 and snapshot(dst) == before, "%s writes nothing" % " ".join(args))
    rc, out, err = run("-n", "--json", src, dst)
    doc = json.loads(out)
    check(doc["dry_run"] is True and doc["counts"]["created"] == 1 and doc["counts"]["deleted"] == 3,
          "the dry run's JSON counts what would be done (%r)" % doc["counts"])


def test_archive_options():
    """-H, -o, -g, -x, --specials, --backup-dir, --fsync: the library's newer policies."""
    w = fresh("archive")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    write(os.path.join(src, "a"), "hard-linked data\n")
    os.link(os.path.join(src, "a"), os.path.join(src, "b"))
    write(os.path.join(src, "keep.txt"), "v1\n")
    write(os.path.join(src, "gone.txt"), "deleted later\n")
    os.mkfifo(os.path.join(src, "fifo"))
    age(src)

    rc, out, err = run("-i", "-q", src, dst)
    check(rc == 0 and os.stat(os.path.join(dst, "a")).st_ino != os.stat(os.path.join(dst, "b")).st_ino,
          "without -H, hard links become separate files")
    check(not os.path.lexists(os.path.join(dst, "fifo")), "without --specials, a FIFO is skipped")
    rc, out, err = run("--json", src, dst)
    doc = json.loads(out)
    check(rc == 0 and [e["path"] for e in doc["skipped"]] == ["fifo"], "...and reported in the JSON's skipped list")

    rc, out, err = run("-i", "-q", "-H", "--specials", src, dst + "-H")
    show(["-i", "-q", "-H", "--specials", "SRC", "DST-H"], rc, out, err)
    sa, sb = os.stat(os.path.join(dst + "-H", "a")), os.stat(os.path.join(dst + "-H", "b"))
    check(rc == 0 and sa.st_ino == sb.st_ino and sa.st_nlink == 2, "-H keeps a and b hard-linked")
    check(stat.S_ISFIFO(os.lstat(os.path.join(dst + "-H", "fifo")).st_mode), "--specials recreates the FIFO")
    check("cS+++++++++ fifo" in lines(out), "the FIFO is itemized as cS+++++++++")
    rc, out, err = run("-i", "-q", "-D", src, dst + "-D")
    check(rc == 0 and stat.S_ISFIFO(os.lstat(os.path.join(dst + "-D", "fifo")).st_mode), "-D does the same")

    # --backup-dir (relative: inside DST) keeps what a run replaces or deletes
    write(os.path.join(src, "keep.txt"), "v2, longer\n")
    os.unlink(os.path.join(src, "gone.txt"))
    rc, out, err = run("-i", "-q", "--backup-dir=.backup", src, dst)
    show(["-i", "-q", "--backup-dir=.backup", "SRC", "DST"], rc, out, err)
    bak = os.path.join(dst, ".backup")
    check(rc == 0 and open(os.path.join(dst, "keep.txt")).read() == "v2, longer\n", "--backup-dir: the update is done")
    check(os.path.exists(os.path.join(bak, "keep.txt")) and open(os.path.join(bak, "keep.txt")).read() == "v1\n",
          "--backup-dir: the replaced version is kept in DST/.backup")
    check(os.path.exists(os.path.join(bak, "gone.txt")), "--backup-dir: the deleted file is kept too")
    rc, out, err = run("-i", "-q", "--backup-dir=.backup", src, dst)
    check(rc == 0 and os.path.isdir(bak) and not any(".backup" in l for l in data_changes(out)),
          "the backup directory inside DST is not deleted as extraneous")
    absolute = os.path.join(w, "outside-backups")
    write(os.path.join(src, "keep.txt"), "v3, longer still\n")
    rc, out, err = run("-q", "--backup-dir", absolute, src, dst)
    check(rc == 0 and open(os.path.join(absolute, "keep.txt")).read() == "v2, longer\n",
          "--backup-dir with an absolute path")

    rc, out, err = run("-q", "--fsync", src, dst + "-fsync")
    check(rc == 0 and open(os.path.join(dst + "-fsync", "keep.txt")).read() == "v3, longer still\n",
          "--fsync syncs (the flushes themselves are not observable here)")

    # -X: extended attributes come along with the data they belong to
    tagged = os.path.join(src, "tagged")
    write(tagged, "with an attribute\n")
    try:
        os.setxattr(tagged, "user.treesync_test", b"blue")
        have_xattrs = True
    except OSError as e:
        print("  (user xattrs unavailable here: %s; -X not exercised)" % e)
        have_xattrs = False
    if have_xattrs:
        rc, out, err = run("-q", "-X", src, dst + "-X")
        check(rc == 0 and os.getxattr(os.path.join(dst + "-X", "tagged"), "user.treesync_test") == b"blue",
              "-X copies a file's extended attributes")
        rc, out, err = run("-q", src, dst + "-noX")
        check(rc == 0 and "user.treesync_test" not in os.listxattr(os.path.join(dst + "-noX", "tagged")),
              "without -X they are not copied")

    # -o / -g: as root, give a file another owner and group
    owned = os.path.join(src, "owned")
    write(owned, "x")
    if os.geteuid() == 0:
        os.chown(owned, 4321, 4322)
        rc, out, err = run("-q", "-o", "-g", src, dst + "-og")
        st = os.stat(os.path.join(dst + "-og", "owned"))
        check(rc == 0 and (st.st_uid, st.st_gid) == (4321, 4322), "-o -g copy the owner and the group")
        rc, out, err = run("-q", "-g", src, dst + "-g")
        st = os.stat(os.path.join(dst + "-g", "owned"))
        check(rc == 0 and (st.st_uid, st.st_gid) == (0, 4322), "-g alone copies the group only")
        rc, out, err = run("-q", src, dst + "-none")
        st = os.stat(os.path.join(dst + "-none", "owned"))
        check(rc == 0 and (st.st_uid, st.st_gid) == (0, 0), "without -o/-g the copy belongs to the caller")
    else:
        rc, out, err = run("-q", "-g", src, dst + "-g")
        check(rc == 0, "-g as an unprivileged user (the file's group is one of ours)")

    # -x: a directory reached through a link onto another filesystem (/dev/shm is a tmpfs)
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.stat(shm).st_dev != os.stat(src).st_dev:
        other = os.path.join(shm, "treesync-cli-test-%d" % os.getpid())
        os.makedirs(other, exist_ok=True)
        try:
            write(os.path.join(other, "elsewhere"), "x")
            os.symlink(other, os.path.join(src, "mnt"))
            rc, out, err = run("-q", "-L", src, dst + "-all")
            check(rc == 0 and os.path.exists(os.path.join(dst + "-all", "mnt", "elsewhere")), "-L enters it")
            rc, out, err = run("--json", "-x", "-L", src, dst + "-x")
            doc = json.loads(out)
            check(rc == 0 and not os.path.exists(os.path.join(dst + "-x", "mnt"))
                  and "mnt" in [e["path"] for e in doc["skipped"]], "-x does not, and reports it as skipped")
        finally:
            shutil.rmtree(other)
    else:
        print("  (no other filesystem at /dev/shm: -x not exercised)")


# ---- filter rules -----------------------------------------------------------------------------------

def filter_fixture(root):
    """A source tree for the filter-rule table: several depths, dotted and bracketed names, symlinks,
    and per-directory rule files (.rsync-filter, rules.txt) at three depths."""
    for name in ["README.md", "setup.py", "a.txt", "b.TXT", ".hidden", "data[1].csv", "data2.csv",
                 "notes.v1.2.txt", "x.h", "top.c", "Makefile",
                 "include/pkg/core.h", "include/pkg/util.h", "include/pkg/detail/impl.h", "include/pkg/detail/impl.c",
                 "src/main.c", "src/main.o", "src/lib/x.c", "src/lib/x.o", "src/lib/x.h", "src/lib/keep.o",
                 "src/lib/deep/d1/d2/leaf.c", "src/lib/deep/d1/d2/leaf.h", "src/lib/deep/d1/mid.c",
                 "src/lib/deep/e.c",
                 "build/out.o", "build/gen/a.h", "build/gen/b.c",
                 "__pycache__/m.cpython-311.pyc",
                 "pkg/__init__.py", "pkg/mod.py", "pkg/mod.pyc", "pkg/__pycache__/mod.cpython-311.pyc",
                 "pkg/sub/__init__.py", "pkg/sub/x.c", "pkg/[weird]/file.txt", "pkg/[weird]/f?.txt",
                 "docs/index.md", "docs/api/ref.md", "docs/api/v1.0/old.md", "docs/.hidden/cache.md",
                 "empty/.keep"]:
        write(os.path.join(root, name), name + "\n")
    os.makedirs(os.path.join(root, "emptydir", "inner"))
    os.symlink("a.txt", os.path.join(root, "link_to_a"))
    os.symlink("include", os.path.join(root, "dirlink"))
    os.symlink("../x.h", os.path.join(root, "src", "lib", "up.h"))
    # per-directory rule files: the root, src/lib (depth 2), src/lib/deep (depth 3), pkg
    write(os.path.join(root, ".rsync-filter"), "# root rules\n- *.o\n; another comment\n\n- /docs/api/\n")
    write(os.path.join(root, "src", "lib", ".rsync-filter"), "+ keep.o\n- *.h\n- /deep/d1/d2/\n")
    write(os.path.join(root, "src", "lib", "deep", ".rsync-filter"), "- mid.c\ninclude *.h\nexclude e.c\n")
    write(os.path.join(root, "pkg", ".rsync-filter"), "- mod.py\n+ mod.pyc\n- *.pyc\n- sub/\n")
    write(os.path.join(root, "rules.txt"), "- *.md\n")
    write(os.path.join(root, "docs", "rules.txt"), "+ ref.md\n- /index.md\n")
    write(os.path.join(root, "docs", "api", "rules.txt"), "- *\n")


def filter_rule_sets(w):
    """The rule sets compared with rsync: each a list of arguments both tools get verbatim."""
    rules1 = os.path.join(w, "rules1")
    write(rules1, "# comment\n; also a comment\n\n*.o\n+ keep.o\n- *.pyc\n__pycache__/\n")
    rules2 = os.path.join(w, "rules2")
    write(rules2, "# headers and docs only\n*/\n*.h\n*.md\n- docs/api/\n")
    rules3 = os.path.join(w, "rules3")
    write(rules3, "+ *.c\n*.h\n")
    return [
        ["--exclude=*.o"],
        ["--exclude=build/"],
        ["--exclude=/build"],
        ["--exclude=/src/lib"],
        ["--exclude=lib/x.c"],
        ["--include=*/", "--include=*.h", "--exclude=*"],
        ["--include=*.h", "--exclude=*"],
        ["--exclude=src/**"],
        ["--exclude=**/d2"],
        ["--exclude=/src/***"],
        ["--include=/src/***", "--exclude=*"],
        ["--include=/include/", "--include=/include/pkg/", "--include=/include/pkg/*.h", "--exclude=*"],
        ["--exclude=?.txt"],
        ["--exclude=*.[ch]"],
        ["--exclude=[!a-m]*"],
        ["--exclude=data\\[1\\].csv"],
        ["--exclude=[[:upper:]]*"],
        ["--exclude=*[[:digit:]]*"],
        ["--exclude=.*"],
        ["--exclude=__pycache__/", "--exclude=*.pyc"],
        ["--exclude=pkg/"],
        ["--exclude=pkg"],
        ["--exclude=link_to_a"],
        ["--exclude=dirlink/"],
        ["--exclude=deep/d1/d2/"],
        ["--exclude=/src/lib/deep/*/d2"],
        ["--exclude=src/*/x.c"],
        ["--filter=- *.c", "--filter=+ *"],
        ["--filter=+ main.c", "--filter=- *.c"],
        ["--exclude=+ *.h", "--exclude=*"],
        ["--include=- *.md", "--include=*/", "--exclude=*"],
        ["--exclude-from=" + rules1],
        ["--include-from=" + rules2, "--exclude=*"],
        ["--exclude-from=" + rules3],
        ["-F"],
        ["-F", "--exclude=*.h"],
        ["--exclude=*.h", "-F"],
        ["--filter=dir-merge .rsync-filter"],
        ["--filter=: .rsync-filter", "--include=*/", "--include=*.c", "--exclude=*"],
        ["--filter=dir-merge rules.txt"],
        ["--include=*.md", "--filter=dir-merge rules.txt", "--exclude=*.c"],
        ["--exclude=*.c", "--filter=!", "--exclude=*.h"],
        ["--exclude=*/"],
        ["--include=docs/", "--exclude=*/"],
        ["--exclude=notes.v1.2.txt"],
        ["--exclude=*.v1.*"],
        ["--exclude=/*/*/"],
        ["--exclude=d1/**/leaf.c"],
        ["--exclude=src/**/x.c"],
        ["--exclude=lib/***"],
        ["--include=*.h", "--include=*/", "--exclude=*", "--exclude=detail/"],
        ["--exclude=***/leaf.*"],
        ["--exclude=**.h"],
        ["--exclude=[[]weird]/"],
        ["--exclude=f\\?.txt"],
        ["--exclude=/emptydir/inner/"],
        ["--include=*.c", "--exclude=/src/lib/deep/", "--exclude=*.o"],
        ["--exclude=docs/api/v1.0/"],
        ["-FF"],
        ["--exclude=/src[/X]lib"],
        ["-F", "-F", "--include=*/", "--include=*.c", "--exclude=*"],
    ]


def tree_paths(root):
    """The relative paths below root (symlinks not followed)."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            out.add(os.path.relpath(os.path.join(dirpath, n), root))
    return out


def test_filter_rsync():
    """The table: the set of paths treesync -a selects equals rsync -a's, rule set by rule set."""
    rsync = shutil.which("rsync")
    if rsync is None:
        print("  SKIPPED: no rsync on PATH: the filter rules are not compared with rsync's")
        return
    w = fresh("filter-rsync")
    src = os.path.join(w, "src")
    filter_fixture(src)
    sets = filter_rule_sets(w)
    agree = 0
    for k, args in enumerate(sets):
        want_dir, got_dir = os.path.join(w, "rsync-%d" % k), os.path.join(w, "treesync-%d" % k)
        p = subprocess.run([rsync, "-a"] + args + [src + "/", want_dir + "/"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if p.returncode != 0:
            check(False, "rsync %s failed: %s" % (" ".join(args), p.stderr.decode()[:200]))
            continue
        rc, out, err = run("-a", "-q", *(args + [src, got_dir]))
        want, got = tree_paths(want_dir), tree_paths(got_dir) if os.path.isdir(got_dir) else set()
        same = rc == 0 and want == got
        agree += same
        check(same, "rule set %d %s: treesync selects what rsync does (exit %d%s%s)" % (
            k + 1, " ".join(args), rc, "; rsync only: %s" % sorted(want - got)[:6] if want - got else "",
            "; treesync only: %s" % sorted(got - want)[:6] if got - want else ""))
    check(len(sets) >= 40, "at least 40 rule sets (%d)" % len(sets))
    print("  %d rule sets, %d agree with rsync %s" % (len(sets), agree, p.args[0]))
    # merges inside rule files (issue 24): ':- .gitignore', ':n-', ':e', '. FILE', 'dir-merge,w'
    cases = {
        "gitignore": {".rsync-filter": ":- .gitignore\n- *.o\n", "a/.gitignore": "*.log\n# c\n", "a/b/.gitignore": "*.tmp\n"},
        "noinherit": {".rsync-filter": ":n- .local\n", ".local": "*.log\n", "a/.local": "*.tmp\n"},
        "self": {".rsync-filter": ":e- .gitignore\n", "a/.gitignore": "*.log\n"},
        # not compared: '. FILE' inside a per-directory file (rsync opens FILE relative to its own
        # working directory and fails; treesync reads it beside the rule file) and 'dir-merge,w'
        # (rsync 3.5 rejects the words above as 'unexpected end of filter rule')
        "clear": {".rsync-filter": "- *.log\n", "a/b/.rsync-filter": "!\n- *.tmp\n"},
    }
    files = ["x.log", "x.tmp", "x.c", "x.o", "keep.o", "a/x.log", "a/x.tmp", "a/x.c", "a/x.o", "a/keep.o",
             "a/b/x.log", "a/b/x.tmp", "a/b/x.c", "a/b/x.o"]
    for name, rules in sorted(cases.items()):
        src = os.path.join(w, "merge-" + name)
        for f in files:
            write(os.path.join(src, f), f)
        for f, text in rules.items():
            write(os.path.join(src, f), text)
        want_dir, got_dir = os.path.join(w, "rsync-m-" + name), os.path.join(w, "treesync-m-" + name)
        p = subprocess.run([rsync, "-a", "-F", src + "/", want_dir + "/"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        rc, out, err = run("-a", "-q", "-F", src + "/", got_dir)
        want, got = tree_paths(want_dir), tree_paths(got_dir) if os.path.isdir(got_dir) else set()
        check(p.returncode == 0 and rc == 0 and want == got, "-F with %s: treesync selects what rsync does (exit %d/%d; "
              "rsync only %s, treesync only %s)" % (name, p.returncode, rc, sorted(want - got)[:6], sorted(got - want)[:6]))
    # a bad line: rsync's "Unknown filter rule", exit 1; at the root nothing is written
    for where in [".rsync-filter", "a/.rsync-filter"]:
        src = os.path.join(w, "bad-" + where.replace("/", "-"))
        for f in files:
            write(os.path.join(src, f), f)
        write(os.path.join(src, where), "garbage\n- *.c\n")
        dst = os.path.join(w, "bad-dst-" + where.replace("/", "-"))
        p = subprocess.run([rsync, "-a", "-F", src + "/", dst + "-rsync/"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        rc, out, err = run("-a", "-q", "-F", src + "/", dst)
        check(p.returncode == 1 and rc == 1 and "Unknown filter rule" in err and "line 1" in err and "garbage" not in err
              and (where != ".rsync-filter" or not os.path.exists(dst)),
              "a bad line in %s stops the run with 'Unknown filter rule' and exit 1 as rsync's (%d/%d: %r)" % (
                  where, p.returncode, rc, err.strip()[:160]))


def test_filter_options():
    """--include, --filter/-f, -F, --include-from, --exclude-from prefixes, as the CLI parses them."""
    w = fresh("filter-options")
    src = os.path.join(w, "src")
    for name in ["a.h", "a.c", "a.o", "keep.o", "sub/b.h", "sub/b.c", "sub/deeper/c.h", "sub/deeper/c.c"]:
        write(os.path.join(src, name), name)
    d = os.path.join(w, "d1")
    rc, out, err = run("-q", "--include=*/", "--include=*.h", "--exclude=*", src, d)
    check(rc == 0 and tree_paths(d) == {"a.h", "sub", "sub/b.h", "sub/deeper", "sub/deeper/c.h"},
          "--include='*/' --include='*.h' --exclude='*' selects the headers, directories entered (%r)" % err)
    d = os.path.join(w, "d2")
    rc, out, err = run("-q", "-f", "- *.o", "--filter=+ sub/", "--filter", "- */", src, d)
    check(rc == 0 and tree_paths(d) == {"a.h", "a.c", "sub", "sub/b.h", "sub/b.c"},
          "-f / --filter take '+ PAT' and '- PAT' rules, first match wins")
    rules = os.path.join(w, "rules")
    write(rules, "# keep one object file\n+ keep.o\n*.o\n; comment\n\n- deeper/\n")
    d = os.path.join(w, "d3")
    rc, out, err = run("-q", "--exclude-from=" + rules, src, d)
    check(rc == 0 and "keep.o" in tree_paths(d) and "a.o" not in tree_paths(d)
          and "sub/deeper" not in tree_paths(d), "--exclude-from honours '+ ' / '- ' prefixes and comments")
    write(rules, "*.h\n*/\n")
    d = os.path.join(w, "d4")
    rc, out, err = run("-q", "--include-from", rules, "--exclude=*", src, d)
    check(rc == 0 and tree_paths(d) == {"a.h", "sub", "sub/b.h", "sub/deeper", "sub/deeper/c.h"},
          "--include-from reads include patterns")
    write(os.path.join(src, ".rsync-filter"), "- *.o\n")
    write(os.path.join(src, "sub", ".rsync-filter"), "- /deeper/c.c\n- *.h\n")
    d = os.path.join(w, "d5")
    rc, out, err = run("-q", "-F", src, d)
    got = tree_paths(d)
    check(rc == 0 and "a.o" not in got and "a.h" in got and "sub/b.h" not in got and "sub/deeper/c.h" not in got
          and "sub/deeper/c.c" not in got and "sub/b.c" in got,
          "-F reads .rsync-filter in each source directory, anchored at its directory (%r)" % sorted(got))
    rc, out, err = run("--filter=merge " + rules, src, os.path.join(w, "d6"))
    check(rc == 1 and "--filter" in err and not os.path.exists(os.path.join(w, "d6")),
          "a --filter rule treesync does not know is a usage error (exit 1)")
    rc, out, err = run("--include=x", "-n", src, os.path.join(w, "d7"))
    check(rc == 0 and "takes no value" not in err, "--include=x is an option (it used to be 'takes no value')")


def test_rsync_habits():
    w = fresh("habits")
    src = os.path.join(w, "src")
    write(os.path.join(src, "a.txt"), "a\n")
    os.symlink("a.txt", os.path.join(src, "link"))
    os.mkfifo(os.path.join(src, "fifo"))
    age(src)
    # -a: rsync's -rlptgoD
    d = os.path.join(w, "archive")
    rc, out, err = run("-a", "-q", src, d)
    check(rc == 0 and os.path.islink(os.path.join(d, "link")) and stat.S_ISFIFO(os.lstat(os.path.join(d, "fifo")).st_mode),
          "-a is accepted and keeps symlinks (-l) and special files (-D) (%r)" % err)
    rc, out, err = run("--help")
    check("-a, --archive" in out and "-rlptgoD" in out, "--help says what -a turns on")
    # the last of an opposite pair wins
    d = os.path.join(w, "delete")
    run("-q", src, d)
    write(os.path.join(d, "extra"), "x")
    rc, out, err = run("-q", "--delete", "--no-delete", src, d)
    check(rc == 0 and os.path.exists(os.path.join(d, "extra")), "--delete --no-delete: the last wins (kept)")
    rc, out, err = run("-q", "--no-delete", "--delete", src, d)
    check(rc == 0 and not os.path.exists(os.path.join(d, "extra")), "--no-delete --delete: the last wins (deleted)")
    d = os.path.join(w, "nol")
    rc, out, err = run("-a", "-q", "--no-l", src, d)
    check(rc == 0 and not os.path.lexists(os.path.join(d, "link")), "-a --no-l: links are skipped")
    rc, out, err = run("-q", "-c", "--no-c", "--size-only", "-n", src, os.path.join(w, "cmp"))
    check(rc == 0, "-c --no-c --size-only: the comparison options no longer conflict once turned off")
    # truly conflicting options are refused, naming both
    rc, out, err = run("--inplace", "--backup-dir=bak", src, os.path.join(w, "conflict"))
    check(rc == 1 and "--inplace" in err and "--backup-dir" in err and not os.path.exists(os.path.join(w, "conflict")),
          "--inplace with --backup-dir is refused with a message naming both")
    # unknown options are reported as unknown, with or without a value
    for arg in ["--frobnicate=1", "--frobnicate", "--no-frobnicate", "--stats-ish=2"]:
        rc, out, err = run(arg, src, os.path.join(w, "unknown"))
        check(rc == 1 and "unknown option" in err, "%s is reported as an unknown option (%r)" % (arg, err.strip()))
    # special files skipped without --specials: named on stderr, counted, exit 0 (-l: the link kept)
    d = os.path.join(w, "specials")
    rc, out, err = run("-l", src, d)
    check(rc == 0 and 'skipping non-regular file "fifo"' in err and "1 skipped" in out
          and not os.path.lexists(os.path.join(d, "fifo")),
          "a FIFO without --specials: 'skipping non-regular file \"fifo\"' on stderr, counted, exit 0 (%r)" % err)
    rc, out, err = run("-q", src, d + "-q")
    check(rc == 0 and "skipping" not in err, "-q silences the notice")
    symlinks_skipped_by_default(w)
    remote_operands_refused(w)


def symlinks_skipped_by_default(w):
    """Without -l, -L, -a or --copy-unsafe-links the CLI skips symlinks as rsync does (the library's
    own default, links::dereference, follows them)."""
    src = os.path.join(w, "links-src")
    write(os.path.join(src, "f"), "f\n")
    os.makedirs(os.path.join(src, "d"))
    write(os.path.join(src, "d", "in"), "in\n")
    os.symlink("f", os.path.join(src, "to-file"))
    os.symlink("d", os.path.join(src, "to-dir"))
    os.symlink("nowhere", os.path.join(src, "dangling"))
    age(src)
    names = ["dangling", "to-dir", "to-file"]
    d = os.path.join(w, "links-default")
    rc, out, err = run_as_given("-r", "-i", src + "/", d)
    notices = sorted(l for l in lines(err) if l.startswith("skipping non-regular file "))
    check(rc == 0 and notices == ['skipping non-regular file "%s"' % n for n in names] and
          not any(os.path.lexists(os.path.join(d, n)) for n in names) and os.path.isfile(os.path.join(d, "d", "in")),
          "-r without -l/-L: every symlink (to a file, to a directory, dangling) is skipped, named on stderr, "
          "exit 0 (%d, %r)" % (rc, err))
    check("3 skipped" in out and not any(n in l for l in lines(out) for n in names),
          "the skipped links are counted, and -i lists no change for them (%r)" % out)
    rsync = rsync_tool()
    if rsync:
        r = os.path.join(w, "links-rsync")
        p = subprocess.run([rsync, "-r", "-i", src + "/", r], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        theirs = sorted(l for l in p.stdout.decode().split("\n") if l.startswith("skipping non-regular file "))
        check(p.returncode == 0 and theirs == notices and tree_paths(r) == tree_paths(d),
              "rsync -r makes the same tree and names the same links (%r)" % theirs)
    rc, out, err = run_as_given("--json", "-r", src + "/", d + "-json")
    doc = json.loads(out)
    check(rc == 0 and sorted(e["path"] for e in doc["skipped"]) == names and doc["errors"] == [],
          "--json: the links are in 'skipped', no error (%r)" % doc["skipped"])
    rc, out, err = run_as_given("-r", "-q", src + "/", d + "-q")
    check(rc == 0 and err == "", "-q silences the notices (%r)" % err)
    rc, out, err = run_as_given("-r", "-l", "-q", src + "/", d + "-l")
    check(rc == 0 and all(os.path.islink(os.path.join(d + "-l", n)) for n in names), "-l keeps them as links")
    rc, out, err = run_as_given("-a", "-q", src + "/", d + "-a")
    check(rc == 0 and all(os.path.islink(os.path.join(d + "-a", n)) for n in names), "-a keeps them as links")
    rc, out, err = run_as_given("-r", "-L", "-q", src + "/", d + "-L")
    check(rc == 23 and os.path.isfile(os.path.join(d + "-L", "to-file")) and
          os.path.isfile(os.path.join(d + "-L", "to-dir", "in")) and "dangling" in err,
          "-L follows them (the dangling one fails: exit 23)")
    rc, out, err = run_as_given("-a", "--no-l", "-q", src + "/", d + "-nol")
    check(rc == 0 and not any(os.path.lexists(os.path.join(d + "-nol", n)) for n in names),
          "-a --no-l skips them again")


def remote_operands_refused(w):
    """HOST:PATH, USER@HOST:PATH, HOST::MODULE and rsync://HOST/ are remote to rsync: refused, exit
    1, nothing made; a '/' before the colon makes an operand local, as in rsync."""
    src = os.path.join(w, "remote-src")
    write(os.path.join(src, "f"), "f\n")
    os.makedirs(os.path.join(w, "sub"))
    before = sorted(os.listdir(w))
    for op, form in [("buildhost:backup", "HOST:PATH"), ("user@buildhost:backup", "USER@HOST:PATH"),
                     ("buildhost::module", "HOST::MODULE"), ("rsync://buildhost/module", "rsync://HOST/MODULE"),
                     ("[fe80::1]:backup", "HOST:PATH"), ("buildhost:", "HOST:PATH")]:
        for args in (["-a", "remote-src/", op], ["-a", op, "dst"], ["-a", "remote-src", op]):
            rc, out, err = run_as_given(*args, cwd=w)
            check(rc == 1 and ("treesync: '%s' names a remote host to rsync (%s" % (op, form)) in err and
                  ("write ./%s for a local path" % op) in err and out == "" and sorted(os.listdir(w)) == before,
                  "%s: refused as rsync's %s, the way out named, exit 1, nothing made (%r)" % (" ".join(args), form, err))
    rc, out, err = run_as_given("--json", "-a", "remote-src/", "buildhost:backup", cwd=w)
    doc = json.loads(out)
    check(rc == 1 and doc["status"] == "usage" and "remote host" in doc["message"], "--json: a usage error")
    for op in ["./buildhost:backup", os.path.join(w, "abs:dir"), "sub/a:b", "host[x:y"]:
        rc, out, err = run_as_given("-a", "-q", "remote-src/", op, cwd=w)
        made = op if os.path.isabs(op) else os.path.join(w, op)
        check(rc == 0 and os.path.isfile(os.path.join(made, "f")), "%s: a local path, copied into (%r)" % (op, err))


def recipe_fixture(root):
    """A checkout: sources under src/pkg, a build tree (build/lib/pkg, build/include), an earlier
    generated include tree (pkg/include), a data directory with an ignore file."""
    old = 1_500_000_000_000_000_000
    for name, text in [("src/pkg/__init__.py", "from ._ext import f\n"), ("src/pkg/core.py", "edited after the build\n"),
                       ("src/pkg/_ext.pyx", "def f(): pass\n"), ("src/pkg/data.json", "{}\n"),
                       ("README.md", "readme\n")]:
        write(os.path.join(root, name), text, mtime=old + 10**12)
    write(os.path.join(root, "src/pkg/__init__.py"), "from ._ext import f\n", mtime=old)
    # the build: copies of the modules (core.py from before the edit), the extension, caches
    write(os.path.join(root, "build/lib/pkg/__init__.py"), "from ._ext import f\n", mtime=old)
    write(os.path.join(root, "build/lib/pkg/core.py"), "stale\n", mtime=old)
    write(os.path.join(root, "build/lib/pkg/_ext.cpython-312-x86_64-linux-gnu.so"), b"\x7fELF", mtime=old)
    write(os.path.join(root, "build/lib/pkg/_version.py"), "version = '1.0'\n", mtime=old)
    write(os.path.join(root, "build/lib/pkg/__pycache__/core.cpython-312.pyc"), b"pyc", mtime=old)
    write(os.path.join(root, "build/lib/pkg/core.pyc"), b"pyc", mtime=old)
    write(os.path.join(root, "build/include/pkg.h"), "int f(void);\n", mtime=old)
    write(os.path.join(root, "build/include/gen/config.h"), "#define X 1\n", mtime=old)
    write(os.path.join(root, "pkg/include/stale.h"), "old\n", mtime=old)
    write(os.path.join(root, "pkg/include/pkg.h"), "old\n", mtime=old)
    write(os.path.join(root, "data/a.csv"), "1\n", mtime=old)
    write(os.path.join(root, "data/scratch.tmp"), "t\n", mtime=old)
    write(os.path.join(root, ".syncignore"), "# not mirrored\n*.tmp\n")
    write(os.path.join(root, "build/out/app"), "bin\n", mtime=old)


def run_recipe(command, cwd, mirror):
    """Runs one recipe line (its `| grep` and `> FILE` done here), /mnt/mirror standing for `mirror`."""
    import shlex
    redirect = None
    if " > " in command:
        command, redirect = command.split(" > ")
        redirect = redirect.strip()
    command = command.split(" | ")[0]
    args = [a.replace("/mnt/mirror", mirror) for a in shlex.split(command)[1:]]
    p = subprocess.run([CLI] + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if redirect:
        with open(os.path.join(cwd, redirect), "wb") as f:
            f.write(p.stdout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_recipes():
    """Every recipe of --help and of the README, run on a checkout shaped like its story."""
    rc, helptext, err = run("--help")
    readme = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")).read()
    cli = readme[readme.index("## The CLI"):]
    cli = cli[:cli.index("\n## ", 5)]
    help_recipes = [l.strip().split("  ")[0] for l in helptext.splitlines() if l.startswith("  treesync ")]
    readme_recipes = [l.strip() for l in cli.splitlines() if l.startswith("treesync ") and "[OPTIONS]" not in l]
    recipes = help_recipes + readme_recipes
    check(len(help_recipes) >= 5 and len(readme_recipes) >= 4, "found the recipes (%d in --help, %d in the README)"
          % (len(help_recipes), len(readme_recipes)))

    def sources(root):
        s = snapshot(root)
        return {k: v for k, v in s.items() if not k.startswith((b"build", b"pkg/include", b"backup", b"artifacts"))
                and not k.endswith((b".so", b"_version.py", b".json")) or k.startswith(b"src/pkg/data")}

    for command in recipes:
        w = fresh("recipe")
        co = os.path.join(w, "checkout")
        recipe_fixture(co)
        mirror = os.path.join(w, "mirror")
        before = snapshot(co)
        rc, out, err = run_recipe(command, co, mirror)
        print("  $ " + command + "  -> exit %d" % rc)
        after = snapshot(co)
        touched = sorted(k.decode() for k in before if k not in after or (after[k] != before[k]
                                                                           and before[k][0] != "dir"))
        if command.endswith(" src/pkg"):  # copy-back
            check(rc == 0 and "--delete" not in command.split(), "copy-back exits 0 and deletes nothing (no --delete)")
            check(touched == [], "copy-back: no file of the checkout changed or deleted (%r)" % touched)
            new = sorted(k.decode() for k in after if k not in before)
            check(new == ["src/pkg/_ext.cpython-312-x86_64-linux-gnu.so", "src/pkg/_version.py"],
                  "copy-back: the extension and the generated module land in src/pkg, nothing else (%r)" % new)
        elif "build/include/ pkg/include" in command:
            check(rc == 0 and touched == ["pkg/include/pkg.h", "pkg/include/stale.h"],
                  "the include mirror changes only pkg/include (%r)" % touched)
            same_tree(os.path.join(co, "build/include"), os.path.join(co, "pkg/include"),
                      "pkg/include mirrors build/include")
        elif " -n " in command:
            check(rc == 0 and touched == [] and not os.path.exists(mirror) and not os.path.exists(os.path.join(co, "backup")),
                  "the dry run writes nothing")
        elif "data" in command:
            check(rc == 0 and touched == [] and sorted(tree_paths(mirror)) == ["a.csv"],
                  "the data mirror leaves data alone and keeps *.tmp out (%r)" % err)
        elif "--json" in command:
            src, dst = shlex_operands(command)
            check(rc == 0 and touched == [], "the JSON recipe changes nothing in its source")
            same_tree(os.path.join(co, src), os.path.join(co, dst), "the JSON recipe mirrors %s into %s" % (src, dst))
            report = [f for f in os.listdir(co) if f.endswith(".json") and "report" in f]
            check(len(report) == 1 and json.load(open(os.path.join(co, report[0])))["status"] == "ok",
                  "the JSON report is one object")
        else:
            check(False, "a recipe this test does not know: %s" % command)


def shlex_operands(command):
    import shlex
    words = shlex.split(command.split(" > ")[0])
    ops = [a for a in words[1:] if not a.startswith("-")]
    return ops[0], ops[1]


def big_tree(root, dirs=20, files=30, big_files=2):
    """dirs x files small files and a few 4 MiB ones; the root gets an old mtime (see run_unfinished).
    Enough entries (about 620) that a frozen run is almost always mid-way, with room left to stop."""
    for d in range(dirs):
        p = os.path.join(root, "d%03d" % d)
        os.makedirs(p)
        for f in range(files):
            with open(os.path.join(p, "f%03d" % f), "wb") as fh:
                fh.write(("%d/%d " % (d, f)).encode() * 300)
    for b in range(big_files):
        with open(os.path.join(root, "d%03d" % (b * 7 % dirs), "big%d.bin" % b), "wb") as fh:
            for k in range(4):
                fh.write(bytes([k + b]) * (1 << 20))
    os.utime(root, ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))


def count_entries(root):
    """Entries below root (files, directories, links), temporary files not counted.  A staged new
    directory (a temporary name) counts, with what it holds: a stopped run puts it in place."""
    return sum(1 for _, dirs, names in os.walk(root) for n in dirs + [m for m in names if not m.startswith(".treesync-tmp-")])


def no_partial_files(src, dst, what):
    """Every file at a final name in dst is complete: the same bytes as in src."""
    srcb, dstb = os.fsencode(src), os.fsencode(dst)
    bad = []
    n = 0
    for dirpath, dirnames, filenames in os.walk(dstb):
        dirnames[:] = [d for d in dirnames if not d.startswith(b".treesync-tmp-")]  # not at a final name
        for name in filenames:
            if name.startswith(b".treesync-tmp-"):
                continue
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, dstb)
            n += 1
            with open(p, "rb") as a, open(os.path.join(srcb, rel), "rb") as b:
                if a.read() != b.read():
                    bad.append(rel)
    check(not bad, "%s: all %d files at final names are complete (partial: %r)" % (what, n, bad[:5]))


# ---- holding a run at a known point (issue 16) -------------------------------------------------------
#
# An interrupt test must not depend on how fast the CLI runs compared with this script: a run that
# ends before its signal arrives, or one that prints its report between two signals, is no failure
# of the CLI, and a test that lets that happen fails now and then under load.  The tests hold the run
# where they need it (Linux /proc; the CLI's handlers: examples/treesync.cpp):
#
#  - run_unfinished(): SIGSTOP freezes the CLI; frozen, it is checked to be still inside its sync
#    (the destination root does not carry the source root's mtime yet: the engine sets it after all
#    of the root's content, so before sync() returns) and the signal is queued on its *main* thread
#    (tgkill).  On SIGCONT that thread takes the signal before it runs any more of its own code, so
#    before it looks at which signal came; the run is cancelled with certainty.
#  - full_pipe() as stdout: the CLI's first write to stdout blocks until the test reads the pipe.
#    The CLI prints its -v lines and its report only after sync() returns, so a cancelled run blocks
#    there (at the latest in exit()'s flush) and can print nothing while the test does not read.
#    The pipe does not slow the sync itself: whether the run is still going when a signal is sent
#    is what run_unfinished() checks, never an assumption.

SIG_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


def wait_for(cond, timeout=60):
    """Polls cond() until it is true; False after `timeout` seconds."""
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            return False
        time.sleep(0.001)
    return True


def proc_status(path):
    fields = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def sig_bit(sig):
    return 1 << (int(sig) - 1)


def handler_installed(pid, sig):
    return int(proc_status("/proc/%d/status" % pid)["SigCgt"], 16) & sig_bit(sig) != 0


def signal_pending(pid, sig):
    """Whether `sig` is still queued for the process or one of its threads (not yet taken).
    A thread or process that ends while its status is read (ENOENT on open, ESRCH on read) has
    nothing pending."""
    gone = (FileNotFoundError, ProcessLookupError)
    try:
        if int(proc_status("/proc/%d/status" % pid)["ShdPnd"], 16) & sig_bit(sig):
            return True
        tids = os.listdir("/proc/%d/task" % pid)
    except gone:
        return False
    for tid in tids:
        try:
            if int(proc_status("/proc/%d/task/%s/status" % (pid, tid))["SigPnd"], 16) & sig_bit(sig):
                return True
        except gone:
            pass
    return False


def main_thread_stopped(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rpartition(")")[2].split()[0] in ("T", "t")


def tgkill(pid, tid, sig):
    """Sends sig to one thread of a process."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        rc = libc.tgkill(pid, tid, int(sig))  # glibc 2.30+
    except AttributeError:
        numbers = {"x86_64": 234, "aarch64": 131, "riscv64": 131, "ppc64le": 250, "s390x": 241}
        rc = libc.syscall(numbers[os.uname().machine], pid, tid, int(sig))
    if rc != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


def run_unfinished(p, sig, src, dst, frozen=None, wanted=lambda seen: True):
    """Freezes the CLI `p` (SIGSTOP) and, if its sync is verifiably not finished, calls frozen()
    while it is still frozen and, if wanted(frozen()'s result), queues `sig` on its main thread; then
    lets it go on (SIGCONT).  Returns (True, frozen()'s result), or (False, None) when the run had
    finished or was not wanted where it stood (nothing was sent)."""
    if p.poll() is not None:
        return False, None
    os.kill(p.pid, signal.SIGSTOP)
    try:
        if not wait_for(lambda: p.poll() is not None or main_thread_stopped(p.pid)) or p.poll() is not None:
            return False, None
        unfinished = os.lstat(dst).st_mtime_ns != os.lstat(src).st_mtime_ns
        if not (unfinished and handler_installed(p.pid, sig)):
            return False, None
        seen = frozen() if frozen else None
        if not wanted(seen):
            return False, None
        tgkill(p.pid, p.pid, sig)
        return True, seen
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)


def full_pipe():
    """A pipe filled to capacity: (read end, write end, bytes in it).  A write to it blocks."""
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)  # the smallest: one page
    except OSError:
        pass
    os.set_blocking(w, False)
    filled = 0
    for size in (65536, 4096, 1):
        while True:
            try:
                filled += os.write(w, b"." * size)
            except BlockingIOError:
                break
    os.set_blocking(w, True)
    return r, w, filled


def read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def start_cold(args, dst, **popen):
    """Starts the CLI with `args` on an empty `dst` (removed first) and returns once the run has made
    its first entries or ended (any moment of the run would do: run_unfinished checks where it is)."""
    if os.path.lexists(dst):
        make_writable(dst)
        shutil.rmtree(dst)
    p = subprocess.Popen([CLI] + mirror_args(args), **popen)
    wait_for(lambda: p.poll() is not None or (os.path.isdir(dst) and len(os.listdir(dst)) >= 3))
    return p


def interrupt_once(sig, extra, src, dst):
    """A cold run cancelled by one signal that certainly lands before the run ends.  Returns
    (exit status, stdout, stderr, entries in DST when the signal was sent; None when it was sent
    with several workers running)."""
    name = SIG_NAMES[sig]
    for attempt in range(1, 6):
        p = start_cold(list(extra) + [src, dst], dst, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        serial = "-j1" in extra
        sent, at_signal = run_unfinished(p, sig, src, dst, (lambda: count_entries(dst)) if serial else None)
        out, err = p.communicate(timeout=120)
        if sent:
            check(True, "%s was queued on the CLI's main thread while its sync was unfinished (attempt %d)"
                  % (name, attempt))
            return p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), at_signal
        print("  attempt %d: the run finished before it could be stopped (exit %s); again" % (attempt, p.returncode))
    check(False, "%s could be sent while the sync was unfinished (5 attempts)" % name)
    return None, "", "", None


def interrupt(sig, twice, extra=()):
    name = SIG_NAMES[sig]
    w = fresh("interrupt-%s-%d" % (name, twice))
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    big_tree(src)
    expected_rc = 20  # rsync's status for SIGINT and SIGTERM alike
    if twice:
        interrupt_twice(sig, extra, src, dst, expected_rc)
    else:
        rc, out, err, at_signal = interrupt_once(sig, extra, src, dst)
        print("  exit %s; stdout %r; stderr %r" % (rc, out[-300:], err[-300:]))
        check(rc == expected_rc, "%s: exit %d (got %s)" % (name, expected_rc, rc))
        if "--json" in extra:
            try:
                doc = json.loads(out)
            except ValueError:
                doc = {}
            check(doc.get("status") == "interrupted" and doc.get("signal") == name and doc.get("cancelled") is True
                  and doc.get("exit_code") == expected_rc, "the partial report is printed as JSON")
        else:
            check("(interrupted)" in out and re.search(r"\d+ created", out), "the partial report is printed")
        check("interrupted by " + name in err, "stderr says it was interrupted")
        check(temporaries(dst) == [], "no temporaries are left behind")
        if at_signal is not None:  # one worker: it finishes the entry in hand and starts no other
            after = count_entries(dst)
            check(after <= at_signal + 1, "no new work after %s: %d entries when it was sent, %d at the end"
                  % (name, at_signal, after))
    no_partial_files(src, dst, "after the interrupt")
    rc, out, err = run("--stats", src, dst)
    check(rc == 0, "a re-run succeeds")
    same_tree(src, dst, "the re-run converges: DST equals SRC")
    check(temporaries(dst) == [], "the re-run left no temporaries")
    rc, out, err = run("-i", "-q", src, dst)
    check(rc == 0 and data_changes(out) == [], "a third run copies and deletes nothing (%r)" % data_changes(out)[:5])


def interrupt_twice(sig, extra, src, dst, expected_rc):
    """Two signals: the second exits at once, without a report.  The run is serial (-j1: its main
    thread is the only worker, so it takes the first signal before it starts another entry) and is
    frozen mid-way, with at least two entries still to do, when the first signal is queued; the
    second is sent once the first has been taken (two pending signals of one kind would merge into
    one).  Its stdout is a full pipe this test reads only once the CLI has exited, so the cancelled
    run blocks at its first write (its -v lines and report come after sync() returns): nothing it
    could print can come before the second signal."""
    name = SIG_NAMES[sig]
    total = count_entries(src)
    errors = os.path.join(os.path.dirname(dst), "stderr.txt")
    for attempt in range(1, 6):
        r, w, filled = full_pipe()
        with open(errors, "wb") as errfile:
            p = start_cold(["-v", "-j1"] + list(extra) + [src, dst], dst, stdout=w, stderr=errfile)
        os.close(w)
        try:
            sent, at_signal = run_unfinished(p, sig, src, dst, lambda: count_entries(dst),
                                             lambda seen: seen + 1 < total)
            if sent:
                taken = wait_for(lambda: p.poll() is not None or not signal_pending(p.pid, sig))
                check(taken and p.poll() is None, "the first %s was taken mid-way (%d of %d entries; attempt %d) "
                      "and the CLI is still running" % (name, at_signal, total, attempt))
                p.send_signal(sig)
                p.wait(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            out = read_all(r)
        if sent:
            break
        print("  attempt %d: the run could not be stopped mid-way (exit %s); again" % (attempt, p.returncode))
    else:
        check(False, "%s could be sent while the sync was mid-way (5 attempts)" % name)
        return
    err = open(errors, "rb").read().decode("utf-8", "replace")
    print("  exit %s; %d bytes of stdout past the pipe's filling; stderr %r" % (p.returncode, len(out) - filled,
                                                                              err[-300:]))
    check(p.returncode == expected_rc, "%s twice: exit %d (got %s)" % (name, expected_rc, p.returncode))
    check(out == b"." * filled, "the second signal exited at once, without a report (got %r)" % out[filled:][:100])
    after = count_entries(dst)
    check(after <= at_signal + 1 < total, "the first signal stopped the run: %d entries when it was sent, %d at "
          "the end, of %d" % (at_signal, after, total))


def test_interrupt():
    interrupt(signal.SIGINT, False)


def complete_files(dst, size):
    """Relative paths of the files of `size` bytes below dst, inside staged directories too."""
    out = []
    for dirpath, _, names in os.walk(dst):
        for n in names:
            p = os.path.join(dirpath, n)
            if not n.startswith(".treesync-tmp-") and os.lstat(p).st_size == size:
                out.append(os.path.relpath(p, dst))
    return out


def test_interrupt_keeps():
    """Issue 32's repro, smaller: big files in a new directory, -i -j1, SIGINT once some but not all
    are complete.  Every file finished is kept (the new directory is put in place with what it holds),
    each -i line names a file that exists with the source's bytes, exit 20; the rerun copies only the
    files that were not finished."""
    w = fresh("interrupt-keeps")
    src, dst = os.path.join(w, "s"), os.path.join(w, "d1")
    size, count = 24 << 20, 6
    os.makedirs(os.path.join(src, "d"))
    for i in range(count):
        with open(os.path.join(src, "d", "big%d" % i), "wb") as fh:
            fh.write(bytes([65 + i]) * size)
    os.utime(src, ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))
    for attempt in range(1, 6):
        if os.path.lexists(dst):
            make_writable(dst)
            shutil.rmtree(dst)
        p = subprocess.Popen([CLI, "-i", "-j1", src + "/", dst], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for(lambda: p.poll() is not None or len(complete_files(dst, size)) >= 1)
        sent, seen = run_unfinished(p, signal.SIGINT, src, dst, lambda: len(complete_files(dst, size)),
                                    lambda n: 1 <= n < count)
        out, err = p.communicate(timeout=120)
        if sent:
            break
        print("  attempt %d: the run could not be stopped with some files finished (exit %s); again"
              % (attempt, p.returncode))
    else:
        check(False, "SIGINT could be sent with some files finished (5 attempts)")
        return
    out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    print("  exit %s; %d files complete at the signal; stdout %r" % (p.returncode, seen, out[-300:]))
    check(p.returncode == 20, "SIGINT: exit 20, as rsync (got %s)" % p.returncode)
    kept = sorted(os.path.relpath(os.path.join(dp, n), dst) for dp, _, names in os.walk(dst) for n in names)
    check(len(kept) >= seen, "every file complete at the signal is kept (%d complete, %d kept: %r)"
          % (seen, len(kept), kept))
    check(temporaries(dst) == [], "no temporaries are left behind (%r)" % temporaries(dst))
    no_partial_files(src, dst, "after SIGINT")
    reported = [l[12:] for l in lines(out) if l.startswith(">f")]
    check(reported and all(os.path.isfile(os.path.join(dst, r)) for r in reported),
          "each file -i reported exists (%r; in DST: %r)" % (reported, kept))
    check(sorted(reported) == kept, "-i reported exactly the files kept (%r vs %r)" % (reported, kept))
    rc, out, err = run("-i", src, dst)
    again = sorted(l[12:] for l in lines(out) if l.startswith(">f"))
    check(rc == 0, "the rerun succeeds (%d: %s)" % (rc, err[-200:]))
    check(again == sorted(set("d/big%d" % i for i in range(count)) - set(kept)),
          "the rerun copies only the files not finished (%r; kept %r)" % (again, kept))
    same_tree(src, dst, "the rerun converges: DST equals SRC")


def test_interrupt_json():
    interrupt(signal.SIGINT, False, ("--json",))


def test_interrupt_twice():
    interrupt(signal.SIGINT, True)


def test_sigterm():
    interrupt(signal.SIGTERM, False, ("-j1",))


# ---- deterministic output (issue 14, item 4) ------------------------------------------------------------

def order_tree(root):
    """A tree whose entries sort differently bytewise, by depth and files-before-directories: names
    like "a", "a-b", "a.txt", "B", nested directories, symlinks, and enough files for -j8 to finish
    them out of order."""
    t0 = 1_500_000_000_000_000_000
    for d in ["", "a", "a/b", "a/b/c", "a-b", "B", "z", "z/deep/er"]:
        for i in range(12):
            write(os.path.join(root, d, "f%02d.txt" % i), ("%s %d\n" % (d, i)) * (i + 1), 0o644, t0)
        write(os.path.join(root, d, "a.txt"), "a\n", 0o644, t0)
        write(os.path.join(root, d, "Z"), "Z\n", 0o644, t0)
    os.symlink("f01.txt", os.path.join(root, "a", "link"))
    os.symlink("../z/deep", os.path.join(root, "a", "b", "up link"))
    os.symlink("nowhere", os.path.join(root, "dangling"))
    age(root, t0)


def churn(src, dst):
    """Changes, additions and deletions in several directories of a mirrored pair (the extra entries
    are put in the destination, so the next run deletes them)."""
    t1 = 1_500_000_100_000_000_000
    write(os.path.join(src, "a", "f03.txt"), "changed and longer\n", 0o644, t1)
    write(os.path.join(src, "a", "b", "c", "f00.txt"), "changed\n", 0o644, t1)
    write(os.path.join(src, "z", "new.txt"), "new\n", 0o644, t1)
    write(os.path.join(src, "a-b", "new dir", "x"), "x\n", 0o644, t1)
    os.chmod(os.path.join(src, "B", "f05.txt"), 0o600)
    os.unlink(os.path.join(src, "a", "f07.txt"))
    os.unlink(os.path.join(src, "z", "deep", "er", "f11.txt"))
    os.unlink(os.path.join(src, "a", "link"))
    os.symlink("f02.txt", os.path.join(src, "a", "link"))
    for d in ["", "a", "a/b", "z/deep"]:
        write(os.path.join(dst, d, "extra.txt"), "extra\n", 0o644, t1)
        write(os.path.join(dst, d, "old", "sub", "g"), "g\n", 0o644, t1)
        write(os.path.join(dst, d, "old", "h"), "h\n", 0o644, t1)
    shutil.rmtree(os.path.join(src, "a", "b", "c"))


def copy_tree(a, b):
    if os.path.exists(b):
        shutil.rmtree(b)
    shutil.copytree(a, b, symlinks=True)
    # copytree keeps mtimes of files; directories get theirs after their contents
    for dirpath, dirnames, filenames in os.walk(a):
        rel = os.path.relpath(dirpath, a)
        st = os.lstat(dirpath)
        os.utime(os.path.join(b, rel), ns=(st.st_atime_ns, st.st_mtime_ns))


def repeated(w, src, base, args, runs):
    """The stdout of `treesync ARGS SRC DST` over `runs` fresh copies of `base` (None: a cold DST)."""
    outs = []
    dst = os.path.join(w, "dst")
    for _ in range(runs):
        if os.path.exists(dst):
            shutil.rmtree(dst)
        if base:
            copy_tree(base, dst)
        rc, out, err = run(*(list(args) + [src, dst]))
        check(rc in (0, 23), "treesync %s exits 0 or 23 (got %d: %s)" % (" ".join(args), rc, err.strip()[:200]))
        outs.append(out)
    return outs


def rsync_order_lines(out):
    return [l for l in lines(out) if not l.startswith("created directory")]


def test_output_order():
    w = fresh("output_order")
    src = os.path.join(w, "src")
    order_tree(src)

    # cold: 20 runs under -j8 give one output, the same as -j1's
    cold = repeated(w, src, None, ["-i", "-l", "-q", "-j8"], 20)
    check(len(set(cold)) == 1, "cold tree: 20 runs of -i -j8 print byte-identical output (%d variants)"
          % len(set(cold)))
    one = repeated(w, src, None, ["-i", "-l", "-q", "-j1"], 1)[0]
    check(cold[0] == one, "cold tree: -i -j8 prints what -i -j1 prints")
    got = lines(cold[0])
    check(got[0] == "cd+++++++++ ./" and got.index("cd+++++++++ a/") < got.index(">f+++++++++ a/a.txt")
          < got.index("cd+++++++++ a/b/"), "cold tree: a directory comes before its files, which come before "
          "its sub-directories (%r)" % got[:5])
    check("cL+++++++++ a/link -> f01.txt" in got and "cL+++++++++ a/b/up link -> ../z/deep" in got,
          "cold tree: symlinks are itemized as 'name -> target'")
    check("cL+++++++++ dangling -> nowhere" in got, "a dangling symlink shows its target too")
    if shutil.which("rsync"):
        rs = subprocess.run(["rsync", "-ai", src + "/", os.path.join(w, "rsync-cold") + "/"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(rs.returncode == 0 and rsync_order_lines(rs.stdout.decode()) == got,
              "cold tree: the same lines in the same order as rsync -ai (%r)"
              % [(a, b) for a, b in zip(rsync_order_lines(rs.stdout.decode()), got) if a != b][:3])
    else:
        print("  skip rsync is not installed: the cold order is not compared with rsync's")
    dry = lines(repeated(w, src, None, ["-i", "-l", "-q", "-n", "-j8"], 1)[0])
    check(dry == got, "--dry-run itemizes the same lines, symlink targets read from the source")

    # churned: changes, additions and deletions in several directories
    base = os.path.join(w, "base")
    rc, out, err = run("-l", "-q", src, base)
    check(rc == 0, "the base mirror is made")
    churn(src, base)
    churned = repeated(w, src, base, ["-i", "-l", "-q", "-j8"], 20)
    check(any(l.startswith("*deleting   a/b/c/") for l in lines(churned[0])), "a directory removed from the source "
          "is deleted")
    check(len(set(churned)) == 1, "churned tree: 20 runs of -i -j8 print byte-identical output (%d variants)"
          % len(set(churned)))
    one = repeated(w, src, base, ["-i", "-l", "-q", "-j1"], 1)[0]
    check(churned[0] == one, "churned tree: -i -j8 prints what -i -j1 prints")
    got = lines(churned[0])
    print("\n".join("    " + l for l in got))
    want = ["*deleting   old/sub/g", "*deleting   old/sub/", "*deleting   old/h", "*deleting   old/",
            "*deleting   extra.txt"]
    check([l for l in got if l in want] == want, "deletions in a directory: sub-directories then files, each "
          "in reverse name order, a directory's contents before it (as rsync)")
    a = [l for l in got if re.match(r"^\S+ +a/[^/]*/?$", l) or l.startswith(".d") and l.endswith(" a/")]
    check(a and a[0].endswith(" a/") and a[1] == "*deleting   a/old/",
          "a directory's own line, then the deletions in it, then its other changes (%r)" % a[:4])
    first_change = next(k for k, l in enumerate(a) if not l.startswith("*deleting") and not l.endswith(" a/"))
    check(all(l.startswith("*deleting") for l in a[1:first_change]) and
          not any(l.startswith("*deleting") for l in a[first_change:]), "all of a/'s deletions come first")
    check("cL.c....... a/link -> f02.txt" in got or any(l.endswith("a/link -> f02.txt") for l in got),
          "churned tree: an updated symlink shows its new target")
    check(got.index(">f+++++++++ z/new.txt") < got.index("*deleting   z/deep/old/sub/g"),
          "a directory's files come before its sub-directories' changes")

    # --json: the actions in the order of -i
    dst = os.path.join(w, "dst")
    copy_tree(base, dst)
    rc, out, err = run("--json", "-i", "-l", "-j8", src, dst)
    doc = json.loads(out)
    as_lines = []
    for x in doc["actions"]:
        if x["itemize"] is None:
            continue
        path = "." if x["path"] == "" else x["path"]
        if x["type"] == "directory":
            path += "/"
        as_lines.append(x["itemize"] + " " + path + (" -> " + x["target"] if "target" in x else ""))
    check(as_lines == got, "--json's actions come in the order of -i's lines")
    check([x["path"] for x in doc["actions"] if x["type"] == "symlink" and x["kind"] != "remove"] ==
          [x["path"] for x in doc["actions"] if "target" in x], "--json: symlinks written carry their target")


def test_output_order_errors():
    w = fresh("output_order_errors")
    src = os.path.join(w, "src")
    # dangling symlinks, copied by their referent (-L): one error each, in several directories
    for d in ["", "a", "a/b", "b", "a-b", "z/y"]:
        for n in ["x", "b", "a"]:
            os.makedirs(os.path.join(src, d), exist_ok=True)
            os.symlink("nowhere", os.path.join(src, d, "dangling-" + n))
        write(os.path.join(src, d, "file"), "f\n")
    age(src)
    outs, errs, docs = set(), set(), set()
    for _ in range(10):
        dst = os.path.join(w, "dst")
        if os.path.exists(dst):
            shutil.rmtree(dst)
        rc, out, err = run("-j8", "-q", "-L", src, dst)
        errs.add(err)
        shutil.rmtree(dst)
        rc, out, err = run("-j8", "--json", "-L", src, dst)
        docs.add(json.dumps(json.loads(out)["errors"]))
    check(len(errs) == 1, "10 runs under -j8 print the errors on stderr in one order (%d variants)" % len(errs))
    paths = [e["path"] for e in json.loads(docs.pop() if len(docs) == 1 else "[]")]
    check(len(paths) == 18, "--json: 18 errors in one order over 10 runs (%r)" % paths)
    # rsync's order: a directory's name compares as if followed by '/', so a-b/ comes before a/
    want = ["dangling-a", "dangling-b", "dangling-x", "a-b/dangling-a", "a-b/dangling-b", "a-b/dangling-x",
            "a/dangling-a", "a/dangling-b", "a/dangling-x", "a/b/dangling-a", "a/b/dangling-b", "a/b/dangling-x",
            "b/dangling-a", "b/dangling-b", "b/dangling-x", "z/y/dangling-a", "z/y/dangling-b",
            "z/y/dangling-x"]
    check(paths == want, "the errors are sorted as the actions: by path, a directory's files before its "
          "sub-directories (%r)" % paths)
    lines_err = [l for l in lines(errs.pop()) if l.startswith("treesync: ")]
    check([re.sub(r"^treesync: \S+ (\S+) \((source|destination) .*", r"\1", l) for l in lines_err] == want,
          "stderr lists the errors in that order too")


def test_settled():
    w = fresh("settled")
    src = os.path.join(w, "src")
    for d in ["", "a", "b"]:
        for i in range(5):
            write(os.path.join(src, d, "f%d" % i), "fresh %d\n" % i)  # mtime: now
    dst1, dst2 = os.path.join(w, "dst1"), os.path.join(w, "dst2")
    for dst in (dst1, dst2):
        rc, out, err = run("-q", src, dst)
        check(rc == 0, "the first run copies the fresh tree")
    time.sleep(2.5)  # past the racy window (1 s) of every source mtime
    rc, out, err = run("-i", "-q", src, dst1)
    check(rc == 0 and out == "", "an unchanged fresh tree itemizes nothing once the racy window has passed (%r)"
          % lines(out)[:3])
    rc, out, err = run("--json", "-i", src, dst2)
    doc = json.loads(out)
    check(doc["actions"] == [], "--json: no action for files whose mtime already matched (%r)" % doc["actions"][:2])
    check(doc["counts"]["meta_updated"] == 0 and doc["counts"]["settled"] == 15,
          "--json: they are counted as settled (15), not as metadata (%r)" % doc["counts"])
    rc, out, err = run("--stats", src, dst2)
    check(rc == 0 and re.search(r"^Settled: +0$", out, re.M) is not None and
          re.search(r"^Metadata updated: +0$", out, re.M) is not None, "--stats: the next run settles nothing")


# ---- messages and JSON (issue 14, item 5) --------------------------------------------------------------

def test_refusal_messages():
    w = fresh("refusal_messages")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    for d in ["a", "b", "c"]:
        for i in range(4):
            write(os.path.join(src, d, "f%d" % i), "x")
    rc, out, err = run("-q", src, dst)
    check(rc == 0, "the mirror is made")
    shutil.rmtree(os.path.join(src, "a"))
    shutil.rmtree(os.path.join(src, "b"))
    before = snapshot(dst)
    rc, out, err = run("--max-delete=3", src, dst)
    check(rc == 25 and "treesync: refused: would delete 10 entries, --max-delete=3" in err,
          "--max-delete: the refusal says how many and the limit, in CLI spelling (%r)" % err)
    check(sorted(snapshot(dst)) == sorted(before), "--max-delete: no deletion made")
    rc, out, err = run("--json", "--max-delete=3", src, dst)
    doc = json.loads(out)
    check(rc == 25 and doc["status"] == "refused" and "would delete 10 entries, --max-delete=3" in
          doc["refusal"]["message"] and doc["refusal"]["path"] == dst, "--json: the refusal, its counts and "
          "the path at fault (%r)" % doc.get("refusal"))
    empty = os.path.join(w, "empty")
    os.mkdir(empty)
    rc, out, err = run(empty, dst)
    check(rc == 2 and "--allow-empty-source" in err and "allow_empty_source" not in err,
          "an empty source: the hint names --allow-empty-source, not the library's identifier (%r)" % err)
    rc, out, err = run("--json", empty, dst)
    doc = json.loads(out)
    check(doc["refusal"]["path"].rstrip("/") == empty and "--allow-empty-source" in doc["refusal"]["message"],
          "--json: an empty source's refusal names the source")
    rc, out, err = run("--json", os.path.join(w, "missing"), dst)
    doc = json.loads(out)
    check(rc == 23 and doc["refusal"]["path"].rstrip("/") == os.path.join(w, "missing"), "--json: a missing source is the "
          "path at fault")
    rc, out, err = run("--json", src, src)
    doc = json.loads(out)
    check(rc == 2 and doc["status"] == "refused" and doc["refusal"]["path"] == src,
          "--json: the same directory twice is refused with a path")
    # DST inside SRC, DST missing: SRC without a slash goes to DST/NAME, and DST would be made first
    # (rsync makes a missing DST); the refusal comes before it: nothing is made
    for dst_in in [os.path.join(src, "c", "in"), os.path.join(src, "new")]:
        before = snapshot(src)
        for args in ([src, dst_in], ["--json", src, dst_in], [src + "/", dst_in]):
            rc, out, err = run_as_given(*args)
            check(rc == 2 and "nested" in (err if "--json" not in args else json.loads(out)["refusal"]["message"])
                  and snapshot(src) == before and not os.path.lexists(dst_in),
                  "treesync %s: refused as nested, nothing made (%d, %r)" % (" ".join(args), rc, err))
    # a refusal the library makes after the CLI made DST (rsync's step for SRC without a slash):
    # DST is taken back, and its parent keeps its mtime
    real = os.path.join(w, "real")
    os.makedirs(real)
    os.symlink(real, os.path.join(w, "via-link"))
    parent = os.path.join(w, "parent")
    os.makedirs(parent)
    os.utime(parent, ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))
    dst_new = os.path.join(parent, "new")
    rc, out, err = run_as_given("--backup-dir=" + os.path.join(w, "via-link", "bak"), src, dst_new)
    check(rc == 2 and "backup directory" in err and not os.path.lexists(dst_new) and
          os.stat(parent).st_mtime_ns == 1_500_000_000_000_000_000 and os.listdir(real) == [],
          "a refused unsafe --backup-dir: the DST made for SRC/NAME is taken back, its parent's mtime kept (%d, %r)"
          % (rc, err))


def test_error_sides():
    """Each per-entry error names its side and the full path there (the operand as given, joined
    with the relative path), in the text on stderr and in --json; refusals name the operand."""
    w = fresh("error_sides")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    write(os.path.join(src, "ok"), "ok")
    os.makedirs(os.path.join(src, "sub"))
    os.symlink("missing-target", os.path.join(src, "sub", "dangling"))
    rc, out, err = run("-L", src, dst)  # followed (-L): it fails
    full = os.path.join(src, "sub", "dangling")
    check(rc == 23 and ("treesync: stat sub/dangling (source %s): " % full) in err,
          "text: a source failure says 'source' and the source's full path (%r)" % err)
    rc, out, err = run("-L", src + "/", dst)
    check(("(source %s)" % full) in err, "text: a trailing '/' on SRC is not doubled in the full path (%r)" % err)
    rc, out, err = run("--json", "-L", src, dst)
    doc = json.loads(out)
    errs = doc["errors"]
    check(len(errs) == 1 and errs[0]["side"] == "source" and errs[0]["full_path"] == full and
          errs[0]["path"] == "sub/dangling" and errs[0]["operation"] == "stat",
          "--json: side and full_path of a source failure (%r)" % errs)

    if os.geteuid() != 0:
        d2 = os.path.join(w, "dst2")
        rc, out, err = run(src, d2)
        os.chmod(os.path.join(d2, "sub"), 0o500)
        write(os.path.join(src, "sub", "new"), "new")
        try:
            rc, out, err = run("--json", src, d2)
        finally:
            os.chmod(os.path.join(d2, "sub"), 0o755)
        doc = json.loads(out)
        dst_errs = [e for e in doc["errors"] if e["side"] == "destination"]
        check(rc == 23 and any(e["full_path"].startswith(os.path.join(d2, "sub")) for e in dst_errs),
              "--json: a write into a read-only destination directory is a destination failure (%r)" % doc["errors"])
    else:
        print("  skip a destination-side failure through permissions: running as root (the doctest suite "
              "covers it with mock_fs)")

    rc, out, err = run_as_given(os.path.join(w, "missing"), dst)
    check(rc == 23 and ("refused: source %s: No such file or directory" % os.path.join(w, "missing")) in err,
          "a missing source is refused as the source (%r)" % err)
    rc, out, err = run(src, os.path.join(w, "no", "parent", "dst"))
    check(rc == 2 and "its parent directory does not exist" in err and "refused: destination " in err
          and not os.path.exists(os.path.join(w, "no")),
          "a missing destination parent is refused as the destination (%r)" % err)
    dangling = os.path.join(w, "dangling-dst")
    os.symlink(os.path.join(w, "nowhere"), dangling)
    rc, out, err = run(src, dangling)
    check(rc == 2 and "is a dangling symbolic link" in err and "File exists" not in err
          and os.path.islink(dangling) and not os.path.exists(os.path.join(w, "nowhere")),
          "a dangling-symlink destination is refused as such, not 'File exists', and left alone (%r)" % err)
    rc, out, err = run("--json", src, dangling)
    doc = json.loads(out)
    check(doc["status"] == "refused" and doc["refusal"]["path"] == dangling, "--json: that refusal names DST")

    # a dangling symlink inside the destination, where the source has a file and a directory: replaced
    d3 = os.path.join(w, "dst3")
    os.makedirs(d3)
    os.symlink("nowhere", os.path.join(d3, "ok"))
    os.symlink("nowhere", os.path.join(d3, "sub"))
    rc, out, err = run("-L", src, d3)
    check(rc == 23 and os.path.isfile(os.path.join(d3, "ok")) and not os.path.islink(os.path.join(d3, "sub"))
          and os.path.isdir(os.path.join(d3, "sub")) and "File exists" not in err,
          "dangling symlinks in the destination are replaced (only the dangling source link fails) (%r)" % err)


def test_state():
    """--state=FILE and --verify: the state file is written, a no-op leaves it alone, each level's
    blind spot is what --help says, a state file inside DST is neither deleted nor mirrored, and
    a FIFO or garbage at its path neither hangs nor misleads the run."""
    w = fresh("state")
    src, dst, state = os.path.join(w, "src"), os.path.join(w, "dst"), os.path.join(w, "mirror.state")
    for i in range(3):
        write(os.path.join(src, "d%d" % i, "f.h"), "file %d\n" % i)
        write(os.path.join(src, "d%d" % i, "g.h"), "other %d\n" % i)
    age(src)
    rc, out, err = run("--state=" + state, src, dst)
    check(rc == 0 and os.path.isfile(state), "a run with --state writes the state file (%r)" % err)
    with open(state, "rb") as f:
        first = f.read()
    check(first.startswith(b"treesync-state 2\n"), "it is a treesync state file")
    before = os.stat(state).st_mtime_ns
    for level in ("full", "dirs", "none"):
        rc, out, err = run("-iq", "--state=" + state, "--verify=" + level, src, dst)
        check(rc == 0 and data_changes(out) == [], "--verify=%s: a no-op changes nothing (%r %r)" % (level, out, err))
    rc, out, err = run("--state=" + state, "--verify=none", src, dst)
    check(os.stat(state).st_mtime_ns == before or open(state, "rb").read() == first,
          "a no-op leaves the state file as it was")
    same_tree(src, dst, "the mirror is exact")

    # the blind spots, as --help states them (once the directories' stamps are older than the racy
    # window, 1 s: a directory changed within it is always read)
    time.sleep(1.2)
    rc, out, err = run("--state=" + state, src, dst)
    os.unlink(os.path.join(dst, "d1", "f.h"))
    rc, out, err = run("--state=" + state, "--verify=none", src, dst)
    check(rc == 0 and not os.path.exists(os.path.join(dst, "d1", "f.h")),
          "--verify=none: a file deleted in DST since the last run is not seen")
    rc, out, err = run("--state=" + state, "--verify=dirs", src, dst)
    check(rc == 0 and os.path.isfile(os.path.join(dst, "d1", "f.h")), "--verify=dirs: the deletion is seen and repaired")
    with open(os.path.join(dst, "d2", "g.h"), "r+b") as f:  # edited in place, same size
        f.write(b"OTHER")
    rc, out, err = run("--state=" + state, "--verify=dirs", src, dst)
    with open(os.path.join(dst, "d2", "g.h"), "rb") as f:
        check(f.read().startswith(b"OTHER"), "--verify=dirs: a file edited in place in DST is not seen")
    rc, out, err = run("--state=" + state, "--verify=full", src, dst)
    same_tree(src, dst, "--verify=full sees the edit and repairs it")

    # a change in SRC is applied at every level
    write(os.path.join(src, "d0", "new.h"), "new")
    rc, out, err = run("-i", "--state=" + state, "--verify=none", src, dst)
    check(rc == 0 and any(l.endswith("d0/new.h") for l in lines(out)), "--verify=none applies a source change (%r)" % out)
    same_tree(src, dst, "and the mirror is exact")

    # a damaged state file: a notice, a full run, a new state file
    with open(state, "wb") as f:
        f.write(first[: len(first) // 2])
    os.unlink(os.path.join(dst, "d0", "g.h"))
    rc, out, err = run("--state=" + state, "--verify=none", src, dst)
    check(rc == 0 and "notice: state file" in err and "ignored" in err and "damaged" in err and "line " in err,
          "a damaged state file is ignored with a notice saying where (%r)" % err)
    same_tree(src, dst, "and the run reads DST in full")
    with open(state, "rb") as f:
        check(f.read().startswith(b"treesync-state 2\n") and f.read() is not None, "and writes a good one")

    # a tampered record naming a path outside DST (issue 23 A): the file is ignored, nothing outside goes
    canary = os.path.join(w, "canary")
    write(os.path.join(canary, "secret"), "keep")
    with open(state, "rb") as f:
        text = f.read().decode("utf-8", "surrogateescape").split("\n")
    at = next(i for i, l in enumerate(text) if l.startswith("D 1 d0 "))
    fields = text[at].split(" ")
    fields[4] = str(int(fields[4]) + 1)
    text[at] = " ".join(fields)
    text.insert(at + 1, "E ..%2F..%2Fcanary%2Fsecret 1 -")
    with open(state, "wb") as f:
        f.write("\n".join(text).encode("utf-8", "surrogateescape"))
    rc, out, err = run("--state=" + state, "--verify=none", src, dst)
    check(rc == 0 and os.path.isfile(os.path.join(canary, "secret")) and "single path component" in err,
          "a state file naming ../../canary/secret is ignored, with the reason, and deletes nothing outside (%r)" % err)
    same_tree(src, dst, "and the mirror is exact")

    # a FIFO or device at the state file's path: never opened, read, removed or replaced; the run is refused
    os.unlink(state)
    os.mkfifo(state)
    snap = snapshot(dst)
    rc, out, err = run("--state=" + state, "--verify=none", src, dst, timeout=60)
    check(rc == 2 and "not a regular file" in err and stat.S_ISFIFO(os.lstat(state).st_mode) and snapshot(dst) == snap,
          "a FIFO at the state path refuses the run, is left in place and nothing is written (%r)" % err)
    rc, out, err = run("--state=/dev/null", src, dst, timeout=60)
    check(rc == 2 and "not a regular file" in err and stat.S_ISCHR(os.lstat("/dev/null").st_mode),
          "--state=/dev/null refuses the run and /dev/null stays a device (%r)" % err)
    os.unlink(state)

    # inside DST: neither deleted nor mirrored; a no-op run does not change DST
    d2 = os.path.join(w, "dst2")
    inner = os.path.join(d2, ".treesync.state")
    write(os.path.join(src, ".treesync.state"), "a source file of that name is not mirrored")
    age(src)
    rc, out, err = run("--state=" + inner, src, d2)
    check(rc == 0 and open(inner, "rb").read().startswith(b"treesync-state 2"), "a state file inside DST is written")
    rc, out, err = run("-iq", "--state=" + inner, src, d2)
    check(rc == 0 and os.path.isfile(inner) and data_changes(out) == [], "it is neither deleted nor replaced (%r)" % out)
    snap = snapshot(d2)
    rc, out, err = run("-iq", "--state=" + inner, "--verify=dirs", src, d2)
    check(rc == 0 and snapshot(d2) == snap, "a no-op leaves DST, its state file included, as it was")
    os.unlink(os.path.join(src, ".treesync.state"))

    rc, out, err = run("--verify=none", src, dst)
    check(rc == 1 and "--verify needs --state (dirs and none trust the state file)" in err,
          "--verify=none without --state is a usage error (%r)" % err)
    rc, out, err = run("--state=" + state, "--verify=some", src, dst)
    check(rc == 1 and "expected full, dirs or none" in err, "an unknown level is a usage error (%r)" % err)
    rc, out, err = run("--help")
    check("--state=FILE" in out and "--verify=LEVEL" in out and "misses" in out, "--help states the levels' blind spots")


def with_phantoms(state, dir_prefix, count):
    """Adds `count` entries named ~0000000, ~0000001, ... (none exists) to the record whose D line
    starts with `dir_prefix`, its count raised to match: a crafted state file that still parses."""
    with open(state, "rb") as f:
        text = f.read().split(b"\n")
    at = next(i for i, l in enumerate(text) if l.startswith(dir_prefix))
    fields = text[at].split(b" ")
    fields[4] = str(int(fields[4]) + count).encode()
    text[at] = b" ".join(fields)
    end = at + 1
    while end < len(text) and text[end].startswith(b"E "):
        end += 1
    added = [b"E ~%07d 1 -" % k for k in range(count)]
    with open(state, "wb") as f:
        f.write(b"\n".join(text[:end] + added + text[end:]))


def test_state_memory():
    """A crafted but valid state file (issue 33): records past --state-memory make it ignored as
    too large; under an address-space limit a 64 MiB file of short names is ignored, never an
    abort; names it records that DST no longer has are one notice, not deletions."""
    w = fresh("state_memory")
    src, dst, state = os.path.join(w, "src"), os.path.join(w, "dst"), os.path.join(w, "mirror.state")
    write(os.path.join(src, "d0", "f.h"), "file\n")
    write(os.path.join(src, "top"), "top\n")
    age(src)
    rc, out, err = run("--state=" + state, src, dst)
    check(rc == 0, "a run with --state writes the state file (%r)" % err)
    with open(state, "rb") as f:
        true_file = f.read()

    with_phantoms(state, b"D 1 d0 ", 2000)
    rc, out, err = run("-v", "--state=" + state, "--verify=none", "--state-memory=64K", src, dst)
    check(rc == 0 and "ignored: too large" in err and "65536 bytes" in err and " delete " not in out,
          "records past --state-memory=64K: the file is ignored as too large (%r %r)" % (out[-300:], err))
    same_tree(src, dst, "and the run reads DST in full")
    rc, out, err = run("--state=" + state, "--state-memory=0", src, dst)
    check(rc == 1 and "--state-memory=0" in err, "--state-memory=0 is a usage error (%r)" % err)

    with open(state, "wb") as f:
        f.write(true_file)
    with_phantoms(state, b"D 1 d0 ", 2000)
    rc, out, err = run("-v", "--stats", "--state=" + state, "--verify=none", src, dst)
    check(rc == 0 and "recorded entries gone" in err and "2000 entries it recorded" in err
          and "delete" not in out.replace("deleted", "") and re.search(r"Deleted:\s+0\n", out) is not None,
          "names recorded but gone from DST: one notice with the count, no deletion (%r %r)" % (out[-400:], err))
    same_tree(src, dst, "and the mirror is exact")

    # 64 MiB of sibling names (4.47 M records, ~0.8 GB in memory) under a 1 GiB address-space limit
    with open(state, "wb") as f:
        f.write(true_file)
    with_phantoms(state, b"D 0 / ", 4473000)
    def limited():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    # a sanitizer build reserves terabytes of shadow memory at start: it cannot run under the limit
    probe = subprocess.run([CLI, "--version"], preexec_fn=limited, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if probe.returncode != 0 and b"Sanitizer" in probe.stderr:
        print("  skipped: the ulimit -v check (this CLI is built with a sanitizer, which cannot start under it)")
        return
    p = subprocess.run([CLI, "--delete", "--state=" + state, "--verify=none", src + "/", dst], preexec_fn=limited,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    err = p.stderr.decode("utf-8", "replace")
    check(p.returncode == 0 and "ignored: too large" in err,
          "ulimit -v 1 GiB: a 64 MiB state file of short names is ignored as too large, no abort (%d %r)"
          % (p.returncode, err[-300:]))
    same_tree(src, dst, "and the mirror is exact")


def test_json_usage():
    w = fresh("json_usage")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    write(os.path.join(src, "f"), "f")
    for args, what in [(["--json", "--bogus", src, dst], "an unknown option"),
                       (["--bogus", "--json", src, dst], "--json after the bad option"),
                       (["--json", src], "a missing operand"),
                       (["--json", "--filter=nonsense x", src, dst], "a --filter that is not a rule"),
                       (["--json", "--exclude-from=" + os.path.join(w, "missing"), src, dst],
                        "an unreadable --exclude-from file")]:
        rc, out, err = run(*args)
        try:
            doc = json.loads(out)
        except ValueError:
            doc = None
        check(rc == 1 and doc is not None and out.count("\n") == 1 and doc["status"] == "usage" and
              doc["exit_code"] == 1 and doc["message"] and err.startswith("treesync: "),
              "--json with %s: exit 1, one JSON object on stdout (status 'usage', the message), the text on "
              "stderr (%r)" % (what, out))
    rc, out, err = run("--bogus", src, dst)
    check(rc == 1 and out == "", "without --json a usage error prints nothing on stdout")


def test_json_utf8():
    w = fresh("json_utf8")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    raw = b"bad-\xff\xfe-name"
    os.makedirs(os.fsencode(os.path.join(src, "d")))
    with open(os.path.join(os.fsencode(src), b"d", raw), "wb") as f:
        f.write(b"x")
    os.symlink(b"nowhere", os.path.join(os.fsencode(src), raw + b"-link"))
    rc, out, err = run("--json", "-i", "-L", src, dst)  # -L: the link is followed, and fails
    out.encode("utf-8")  # the text itself is valid UTF-8
    doc = json.loads(out)
    for key in ("actions", "errors"):
        for x in doc[key]:
            x["path"].encode("utf-8")
    hexed = {x["path_hex"]: x for x in doc["actions"] if "path_hex" in x}
    check((b"d/" + raw).hex() in hexed, "a non-UTF-8 name: path_hex carries the exact bytes (%r)" % list(hexed))
    errs = [e for e in doc["errors"] if "path_hex" in e]
    check(len(errs) == 1 and bytes.fromhex(errs[0]["path_hex"]) == raw + b"-link",
          "an error entry of a non-UTF-8 name has path_hex too")
    check(all("path_hex" not in x for x in doc["actions"] if x["path"] in ("", "d")),
          "a UTF-8 name has no path_hex")


# ---- issue 24: rsync's meaning, never a data loss by an rsync habit ---------------------------------

def rsync_tool():
    return shutil.which("rsync")


def lstate(root):
    """{relative path: (type, mode, mtime_ns, uid, gid, bytes or link target)} below root, root included
    as "."; a symlink's mode is left out, a directory's mtime too (rsync sets it too, but late)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        names = [(dirpath, None)] if dirpath == root else []
        names += [(os.path.join(dirpath, n), n) for n in dirnames + filenames]
        for path, _ in names:
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("L", None, st.st_mtime_ns, st.st_uid, st.st_gid, os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode), None, st.st_uid, st.st_gid, None)
            else:
                with open(path, "rb") as f:
                    out[rel] = ("f", stat.S_IMODE(st.st_mode), st.st_mtime_ns, st.st_uid, st.st_gid, f.read())
    return out


def link_groups(root):
    """The sets of names that share an inode (more than one)."""
    by = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames:
            st = os.lstat(os.path.join(dirpath, n))
            if stat.S_ISREG(st.st_mode):
                by.setdefault(st.st_ino, set()).add(os.path.relpath(os.path.join(dirpath, n), root))
    return sorted(sorted(g) for g in by.values() if len(g) > 1)


def test_copy_back_rsync():
    """Issue 24 items 5 and 6: the options a copy-back needs (--no-perms, --existing,
    --ignore-existing, --chmod, --no-links) and -i for type replacements, owner/group-only changes,
    hard links and symlink mtimes, each run by treesync and by rsync on the same trees: the final
    trees (type, mode, mtime, owner, bytes, link target) and the -i lines must be the same."""
    if rsync_tool() is None:
        print("  SKIPPED: no rsync on PATH")
        return
    w = fresh("copy-back-rsync")
    old_umask = os.umask(0o022)
    root = os.geteuid() == 0
    old = 1_500_000_000_000_000_000

    def case(name, args, src_setup, dst_setup=None, lines_too=True, stderr_has=None, link_times=True):
        base = os.path.join(w, name)
        src, dst0 = os.path.join(base, "s"), os.path.join(base, "d0")
        os.makedirs(src)
        os.makedirs(dst0)
        src_setup(src)
        if dst_setup:
            dst_setup(dst0)
        # rsync compares whole seconds (--modify-window=0), treesync nanoseconds (a documented
        # difference): the fixture's times are whole seconds, and its directories' all the same
        for top in (src, dst0):
            for dirpath, dirnames, filenames in os.walk(top, topdown=False):
                for n in filenames:
                    st = os.lstat(os.path.join(dirpath, n))
                    t = st.st_mtime_ns - st.st_mtime_ns % 1_000_000_000
                    os.utime(os.path.join(dirpath, n), ns=(t, t), follow_symlinks=False)
                os.utime(dirpath, ns=(old, old))
        a, b = os.path.join(base, "rsync"), os.path.join(base, "treesync")
        for d in (a, b):
            subprocess.run(["cp", "-a", dst0, d], check=True)
        rrc, rout, rerr = run_rsync("-i", *args, src + "/", a + "/")
        trc, tout, terr = run("-i", *args, src + "/", b + "/")
        want, got = lstate(a), lstate(b)
        if not link_times:  # rsync leaves a link that replaced another type at the time of the run
            for t in (want, got):
                for k, v in t.items():
                    if v[0] == "L":
                        t[k] = v[:2] + (None,) + v[3:]
        diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
        check(rrc == trc and not diff, "%s (%s): the tree is rsync's (exit %d/%d; differing: %s)" % (
            name, " ".join(args), rrc, trc, [(k, want.get(k), got.get(k)) for k in diff[:3]]))
        if lines_too:
            check(itemized(rout) == itemized(tout), "%s (%s): -i as rsync's\n    rsync:    %s\n    treesync: %s" % (
                name, " ".join(args), itemized(rout), itemized(tout)))
        if stderr_has:
            check(stderr_has in rout + rerr and stderr_has in terr, "%s: both say %r (%r / %r)" % (
                name, stderr_has, (rout + rerr).strip()[:120], terr.strip()[:120]))
        return a, b, rout, tout

    def files(*names, mode=0o644, t=None):
        def setup(root_dir):
            for n in names:
                write(os.path.join(root_dir, n), n + "\n", mode=mode, mtime=t)
        return setup

    # a directory or a symlink replaced by a file: >f+++++++++
    def dir_and_link(d):
        os.makedirs(os.path.join(d, "f"))
        os.symlink("nowhere", os.path.join(d, "g"))
    case("replace-by-file", ["-a"], files("f", "g"), dir_and_link)

    # a file or an empty directory replaced by a symlink: cL+++++++++
    def links(s):
        os.symlink("t1", os.path.join(s, "f"))
        os.symlink("t2", os.path.join(s, "e"))
    def file_and_dir(d):
        write(os.path.join(d, "f"), "data\n")
        os.makedirs(os.path.join(d, "e"))
    case("replace-by-link", ["-a"], links, file_and_dir, link_times=False)

    # symlink mtimes: kept on new links, set on a link whose target is the same (.L..t......), and
    # with a changed target (cLc.t......)
    def dated_links(s):
        for n, t in (("same", "a"), ("moved", "b"), ("new", "c")):
            os.symlink(t, os.path.join(s, n))
            os.utime(os.path.join(s, n), ns=(old, old), follow_symlinks=False)
    def old_links(d):
        os.symlink("a", os.path.join(d, "same"))
        os.symlink("x", os.path.join(d, "moved"))
    case("link-mtime", ["-a"], dated_links, old_links)

    # owner-only and group-only changes: .f....o.... / .f.....g... (as root: -a includes -o)
    if root:
        def owned(d):
            files("f", "g", t=old)(d)
            os.chown(os.path.join(d, "f"), 1234, -1)
            os.chown(os.path.join(d, "g"), -1, 99)
        case("owner-group", ["-a"], files("f", "g", t=old), owned)
    else:
        print("  (not root: the owner case is left out)")

    # hard links: the same groups of names as rsync's, and rsync's line shape hf+++++++++ NAME => FIRST
    def linked(s):
        write(os.path.join(s, "a"), "x\n")
        os.link(os.path.join(s, "a"), os.path.join(s, "b"))
        write(os.path.join(s, "sub", "c"), "y\n")
        os.link(os.path.join(s, "sub", "c"), os.path.join(s, "sub", "d"))
    a, b, rout, tout = case("hard-links", ["-aH"], linked, lines_too=False)
    check(link_groups(a) == link_groups(b) == [["a", "b"], ["sub/c", "sub/d"]],
          "-H: the same hard-link groups as rsync's (%s / %s)" % (link_groups(a), link_groups(b)))
    shape = lambda out: sorted(l.split(" ")[0] for l in itemized(out) if l.startswith("hf"))
    arrows = [l for l in itemized(tout) if l.startswith("hf")]
    check(shape(rout) == shape(tout) == ["hf+++++++++"] * 2 and all(re.match(r"^hf\+{9} \S+ => \S+$", l) for l in arrows),
          "-H: two 'hf+++++++++ NAME => FIRST' lines as rsync's (rsync %s, treesync %s)" % (
              [l for l in itemized(rout) if l.startswith("hf")], arrows))

    # --no-perms / --no-p: existing files keep their modes, also when rewritten; new ones get the
    # source's under the umask, without set-ID bits
    def perms_src(s):
        write(os.path.join(s, "kept"), "new data\n", mode=0o755)
        write(os.path.join(s, "same"), "same\n", mode=0o700, mtime=old)
        write(os.path.join(s, "new"), "n\n", mode=0o4775)
        write(os.path.join(s, "dir", "x"), "x\n", mode=0o666)
        os.chmod(os.path.join(s, "dir"), 0o777)
    def perms_dst(d):
        write(os.path.join(d, "kept"), "old\n", mode=0o600)
        write(os.path.join(d, "same"), "same\n", mode=0o640, mtime=old)
    for spelling in ("--no-perms", "--no-p"):
        case("no-perms" + spelling, ["-a", spelling], perms_src, perms_dst)

    # --existing: only what exists is updated; a new directory is not entered
    def ex_src(s):
        write(os.path.join(s, "there"), "changed\n", mtime=old)
        write(os.path.join(s, "fresh"), "new\n")
        write(os.path.join(s, "newdir", "x"), "x\n")
        write(os.path.join(s, "olddir", "y"), "y\n")
        write(os.path.join(s, "olddir", "z"), "z\n")
    def ex_dst(d):
        write(os.path.join(d, "there"), "old\n")
        write(os.path.join(d, "olddir", "y"), "old y\n")
    case("existing", ["-a", "--existing"], ex_src, ex_dst)
    case("ignore-existing", ["-a", "--ignore-existing"], ex_src, ex_dst)

    # --chmod, rsync's syntax, on new and existing entries
    def chmod_src(s):
        write(os.path.join(s, "f"), "f\n", mode=0o644)
        write(os.path.join(s, "x"), "x\n", mode=0o750)
        write(os.path.join(s, "d", "g"), "g\n", mode=0o600)
        write(os.path.join(s, "old"), "o\n", mode=0o644, mtime=old)
    def chmod_dst(d):
        write(os.path.join(d, "old"), "o\n", mode=0o600, mtime=old)
    for spec in ("Dg+s,ug+w,Fo-w,+X", "D2775,F664", "g=u", "go-rwx", "+x", "a+rX,u-w", "o=g,Fu+s"):
        case("chmod-" + re.sub(r"[^a-zA-Z0-9]", "_", spec), ["-a", "--chmod=" + spec], chmod_src, chmod_dst)
    case("chmod-no-perms", ["-a", "--no-perms", "--chmod=ug+w,o-r"], chmod_src, chmod_dst)

    # --no-links / --no-l: each skipped link named on stderr as rsync does
    def with_link(s):
        write(os.path.join(s, "f"), "f\n")
        os.symlink("f", os.path.join(s, "l"))
    for spelling in ("--no-links", "--no-l"):
        case("no-links" + spelling, ["-a", spelling], with_link, stderr_has='skipping non-regular file "l"')
    os.umask(old_umask)



def run_rsync(*args, cwd=None):
    p = subprocess.run(["rsync"] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    return p.returncode, p.stdout.decode("utf-8", "surrogateescape"), p.stderr.decode("utf-8", "surrogateescape")


def contents(root):
    """{relative path: file bytes, or None for a directory} below root."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames:
            out[os.path.relpath(os.path.join(dirpath, n), root)] = None
        for n in filenames:
            with open(os.path.join(dirpath, n), "rb") as f:
                out[os.path.relpath(os.path.join(dirpath, n), root)] = f.read()
    return out


def itemized(out):
    """The -i lines of an output, without rsync's 'created directory' notice and the summary line."""
    return [l for l in lines(out) if re.match(r"^([<>ch.*][fdLDS]|\*deleting)", l)]


def operand_fixture(w):
    """s/{f, sub/g}, and a destination b/ that already holds something of its own."""
    write(os.path.join(w, "s", "f"), "1\n")
    write(os.path.join(w, "s", "sub", "g"), "2\n")
    write(os.path.join(w, "b", "other", "precious"), "keep\n")


def test_rsync_semantics():
    """Issue 24: operands, deletion, -h, -u, --max-delete and exit statuses as rsync has them, each
    compared with the real rsync where it is installed; the state-file usage errors; the path of a
    refusal of a new destination that cannot be made."""
    have_rsync = rsync_tool() is not None
    if not have_rsync:
        print("  (no rsync on PATH: the cases below check treesync alone, not against rsync)")

    # the blocker: `-a s b/` copies s itself into b/s and deletes nothing
    w = fresh("semantics-repro")
    operand_fixture(w)
    if have_rsync:
        write(os.path.join(w, "r", "other", "precious"), "keep\n")
    rc, out, err = run_as_given("-ai", "s", "b/", cwd=w)
    check(rc == 0 and os.path.isfile(os.path.join(w, "b", "s", "f")) and
          open(os.path.join(w, "b", "other", "precious")).read() == "keep\n" and
          not os.path.exists(os.path.join(w, "b", "f")),
          "-a s b/: b/s/f is made, b/other/precious kept, nothing copied into b itself (exit %d, %r)" % (rc, err))
    if have_rsync:
        rrc, rout, _ = run_rsync("-ai", "s", "r/", cwd=w)
        check(contents(os.path.join(w, "b")) == contents(os.path.join(w, "r")),
              "-a s b/: the same tree as rsync -a s r/")
        check(itemized(out) == itemized(rout), "-ai s b/: the -i lines are rsync's (%r vs %r)"
              % (itemized(out), itemized(rout)))
    # -avh: -h is --human-readable, the run syncs
    write(os.path.join(w, "s", "new"), "n\n")
    rc, out, err = run_as_given("-avh", "s", "b", cwd=w)
    check(rc == 0 and os.path.isfile(os.path.join(w, "b", "s", "new")) and "usage:" not in out,
          "-avh s b syncs (-h is --human-readable), exit %d" % rc)
    for args in (["-h"], ["--help"]):
        rc, out, err = run_as_given(*args)
        check(rc == 0 and out.startswith("usage: treesync"), "%s alone prints the help" % args[0])
    rc, out, err = run_as_given("-h", os.path.join(w, "s") + "/", os.path.join(w, "hr"))
    check(rc == 0 and os.path.isfile(os.path.join(w, "hr", "f")) and re.search(r"\d+ B copied", out),
          "-h with operands: the summary's bytes in units (%r)" % out)

    # the operand forms, against rsync, into a missing and into an existing destination
    forms = [("s", "."), ("s/", "."), ("s/.", "."), ("./s", "."), (".", "s"), ("..", "s/sub"), ("s/sub/..", "."),
             ("s//", ".")]
    for k, (src, cwd) in enumerate(forms):
        for existing in (False, True):
            w = fresh("semantics-forms")
            operand_fixture(w)
            dst, ref = os.path.join(w, "t%d" % k), os.path.join(w, "u%d" % k)
            if existing:
                write(os.path.join(dst, "mine"), "m\n")
                write(os.path.join(ref, "mine"), "m\n")
            rc, out, err = run_as_given("-a", src, dst + "/", cwd=os.path.join(w, cwd))
            what = "SRC %r into %s DST" % (src, "an existing" if existing else "a missing")
            if have_rsync:
                rrc, _, rerr = run_rsync("-a", src, ref + "/", cwd=os.path.join(w, cwd))
                check(rc == rrc == 0 and contents(dst) == contents(ref),
                      "%s: the tree rsync makes (treesync %s, rsync %s)" % (what, sorted(contents(dst)),
                                                                           sorted(contents(ref))))
            else:
                check(rc == 0 and "mine" in contents(dst) if existing else rc == 0, what)
    # a missing DST whose parent is missing: refused, nothing made
    w = fresh("semantics-deep")
    operand_fixture(w)
    rc, out, err = run_as_given("-a", "s", "x/y/z", cwd=w)
    check(rc != 0 and not os.path.exists(os.path.join(w, "x")), "-a s x/y/z: refused, nothing made (exit %d)" % rc)
    # -n with a missing DST: nothing is made, and the plan names s/...
    rc, out, err = run_as_given("-ain", "s", "nd", cwd=w)
    check(rc == 0 and not os.path.exists(os.path.join(w, "nd")) and "cd+++++++++ s/" in out and
          ">f+++++++++ s/f" in out, "-ain s nd: nothing made, the plan is rsync's s/... (%r)" % out)

    # deletion only when asked, in each of rsync's spellings
    spellings = [[], ["--no-delete"], ["--delete", "--no-delete"], ["--delete"], ["--del"], ["--delete-before"],
                 ["--delete-during"], ["--delete-after"], ["--delete-delay"], ["--delete-excluded"],
                 ["--no-delete", "--delete"]]
    for args in spellings:
        w = fresh("semantics-delete")
        operand_fixture(w)
        write(os.path.join(w, "b", "s", "stale"), "x\n")
        write(os.path.join(w, "b", "s", "f.tmp"), "x\n")
        write(os.path.join(w, "r", "s", "stale"), "x\n")
        write(os.path.join(w, "r", "s", "f.tmp"), "x\n")
        write(os.path.join(w, "r", "other", "precious"), "keep\n")
        rc, out, err = run_as_given("-a", "--exclude=*.tmp", *(args + ["s", "b/"]), cwd=w)
        deletes = bool(args) and args[-1] != "--no-delete"
        gone = not os.path.exists(os.path.join(w, "b", "s", "stale"))
        kept_excluded = os.path.exists(os.path.join(w, "b", "s", "f.tmp"))
        check(rc == 0 and gone == deletes and kept_excluded == ("--delete-excluded" not in args) and
              os.path.exists(os.path.join(w, "b", "other", "precious")),
              "%s: %s (b/other, outside the copy, is never touched)" % (" ".join(args) or "no option",
                                                                       "deletes" if deletes else "deletes nothing"))
        if have_rsync and "--no-delete" not in args:  # treesync's own option: rsync has none
            rrc, _, _ = run_rsync("-a", "--exclude=*.tmp", *(args + ["s", "r/"]), cwd=w)
            check(rrc == 0 and contents(os.path.join(w, "b")) == contents(os.path.join(w, "r")),
                  "%s: the tree rsync leaves" % (" ".join(args) or "no option"))

    # filter rules see NAME/path when SRC has no trailing slash, and rule files are read from its parent
    if have_rsync:
        for args in (["--exclude=/sub"], ["--exclude=/s/sub"], ["--exclude=s/f"], ["--include=s/", "--include=s/f",
                                                                                   "--exclude=*"], ["-F"]):
            w = fresh("semantics-filter")
            operand_fixture(w)
            write(os.path.join(w, ".rsync-filter"), "- f\n")
            write(os.path.join(w, "s", ".rsync-filter"), "- g\n")
            rc, out, err = run_as_given("-a", *(args + ["s", "b/"]), cwd=w)
            rrc, _, _ = run_rsync("-a", *(args + ["s", "r/"]), cwd=w)
            check(rc == rrc == 0 and tree_paths(os.path.join(w, "b")) == tree_paths(os.path.join(w, "r")) | {
                "other", "other/precious"}, "%s with SRC s: rsync's selection (%r)" % (
                " ".join(args), sorted(tree_paths(os.path.join(w, "b")))))

    # -u: a destination file newer than its source is left entirely alone
    w = fresh("semantics-update")
    write(os.path.join(w, "s", "f"), "source\n", mode=0o644, mtime=1_500_000_000_000_000_000)
    write(os.path.join(w, "s", "g"), "source\n", mode=0o644, mtime=1_500_000_000_000_000_000)
    for d in ("b", "r"):
        write(os.path.join(w, d, "f"), "edited in DST\n", mode=0o600, mtime=1_600_000_000_000_000_000)
        write(os.path.join(w, d, "g"), "edited\n", mode=0o640, mtime=1_600_000_000_000_000_000)  # the same size
    for d in ("s", "b", "r"):  # the directories agree: only the files are in question
        os.utime(os.path.join(w, d), ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))
    before = snapshot(os.path.join(w, "b"))
    rc, out, err = run_as_given("-ai", "-u", "s/", "b/", cwd=w)
    check(rc == 0 and itemized(out) == [] and snapshot(os.path.join(w, "b")) == before,
          "-u: newer DST files are left alone: data, mode, mtime; nothing itemized (%r)" % itemized(out))
    if have_rsync:
        rrc, rout, _ = run_rsync("-ai", "-u", "s/", "r/", cwd=w)
        check(itemized(out) == itemized(rout) and snapshot(os.path.join(w, "r")) == before,
              "-u: rsync -u leaves them alone too (%r)" % itemized(rout))

    # -n --max-delete=N: the first N deletions listed, exit 25, nothing changed; a missing source: 23
    w = fresh("semantics-maxdel")
    write(os.path.join(w, "s", "a"), "a\n")
    for d in ("b", "r"):
        for i in range(1, 6):
            write(os.path.join(w, d, "x%d" % i), "%d\n" % i)
    for d in ("s", "b", "r"):
        os.utime(os.path.join(w, d), ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))
    before = snapshot(os.path.join(w, "b"))
    rc, out, err = run_as_given("-ain", "--delete", "--max-delete=2", "s/", "b/", cwd=w)
    check(rc == 25 and [l for l in itemized(out) if l.startswith("*")] == ["*deleting   x5", "*deleting   x4"] and
          ">f+++++++++ a" in out and "--max-delete=2" in err and "3 more" in err and
          snapshot(os.path.join(w, "b")) == before,
          "-n --max-delete=2 with 5 to delete: the first 2 listed, exit 25, nothing changed (exit %d, %r, %r)"
          % (rc, out, err))
    rc, out, err = run_as_given("-ain", "--json", "--delete", "--max-delete=2", "s/", "b/", cwd=w)
    doc = json.loads(out) if out.startswith("{") else {}
    check(rc == 25 and doc.get("status") == "max_delete" and doc.get("exit_code") == 25 and
          sum(1 for a in doc.get("actions", []) if a["kind"] == "remove") == 2,
          "-n --max-delete --json: status max_delete, exit 25, two removals")
    if have_rsync:
        rrc, rout, _ = run_rsync("-ain", "--delete", "--max-delete=2", "s/", "r/", cwd=w)
        check(rrc == 25 and sorted(itemized(out)) == sorted(itemized(rout)) if doc == {} else rrc == 25,
              "rsync -n --max-delete=2 exits 25 too")
        rc2, out2, _ = run_as_given("-ain", "--delete", "--max-delete=2", "s/", "b/", cwd=w)
        check(itemized(out2) == itemized(rout), "-n --max-delete=2: the -i lines are rsync's (%r vs %r)"
              % (itemized(out2), itemized(rout)))
    rc, out, err = run_as_given("-a", "--delete", "--max-delete=2", "s/", "b/", cwd=w)
    after = snapshot(os.path.join(w, "b"))
    check(rc == 25 and all(p in after for p in before) and os.path.isfile(os.path.join(w, "b", "a")),
          "--max-delete=2 without -n: exit 25, no deletion made, the copy made (rsync deletes the first 2)")
    rc, out, err = run_as_given("-a", "nosuch/", "b/", cwd=w)
    check(rc == 23 and "nosuch" in err, "a missing source exits 23 (exit %d)" % rc)
    if have_rsync:
        rrc, _, _ = run_rsync("-a", "nosuch/", "r/", cwd=w)
        check(rrc == rc, "rsync exits %d for a missing source too" % rrc)
    rc, out, err = run_as_given("--help")
    check("25" in out and "23" in out and "Where treesync differs from rsync" in out,
          "--help documents exits 23 and 25 and lists the differences from rsync")

    # --state usage errors, before anything is written
    w = fresh("semantics-state")
    write(os.path.join(w, "s", "f"), "f\n")
    for args, what in ((["--state=" + os.path.join(w, "nodir", "state")], "a missing directory"),
                       (["--state=" + os.path.join(w, "st"), "-H"], "-H"),
                       (["--state=" + os.path.join(w, "st"), "--backup-dir=bak"], "--backup-dir")):
        rc, out, err = run_as_given(*(args + [os.path.join(w, "s") + "/", os.path.join(w, "d")]))
        check(rc == 1 and "--state" in err and not os.path.exists(os.path.join(w, "d")) and
              not os.path.exists(os.path.join(w, "st")),
              "--state with %s: a usage error before any write (exit %d, %r)" % (what, rc, err.strip()))

    # a new destination that cannot be made: the refusal's path is that destination
    w = fresh("semantics-rodst")
    write(os.path.join(w, "s", "f"), "f\n")
    ro, target = os.path.join(w, "ro"), os.path.join(w, "ro-mnt")
    os.makedirs(ro)
    os.makedirs(target)
    mounted = subprocess.run(["mount", "--bind", "-o", "ro", ro, target], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE).returncode == 0 if os.geteuid() == 0 else False
    if not mounted and os.geteuid() != 0:
        os.chmod(target, 0o555)
    if mounted or os.geteuid() != 0:
        newdst = os.path.join(target, "newdst")
        rc, out, err = run_as_given("--json", os.path.join(w, "s") + "/", newdst)
        doc = json.loads(out) if out.startswith("{") else {}
        refusal = doc.get("refusal") or {}
        check(rc == 2 and refusal.get("path") == newdst and "destination" in refusal.get("message", ""),
              "an unwritable new destination: refusal.path names it (%r)" % refusal)
    else:
        print("  skip the unwritable new destination: no read-only bind mount here (root ignores modes)")
    if mounted:
        subprocess.run(["umount", target])
    os.chmod(target, 0o755)


def test_io_error_deletions():
    """rsync's rule: a source error (here a dangling link under -L) stops every further deletion;
    --ignore-errors deletes anyway.  "zz" sorts after the extraneous "extra": the deletion waits."""
    w = fresh("io_error")
    src, dst = os.path.join(w, "src"), os.path.join(w, "dst")
    write(os.path.join(src, "a"), "a")
    write(os.path.join(src, "d", "q"), "q")
    os.symlink("nowhere", os.path.join(src, "zz"))
    for d in (dst, os.path.join(dst, "d")):
        os.makedirs(d, exist_ok=True)
    write(os.path.join(dst, "extra"), "x")
    write(os.path.join(dst, "d", "extra2"), "y")
    rc, out, err = run_as_given("-a", "-L", "--delete", "-i", src + "/", dst)
    check(rc == 23, "-L --delete with a dangling link: exit 23 (got %d)" % rc)
    check(err.count("IO error encountered -- skipping file deletion") == 1,
          "the skip is reported once on stderr (%r)" % err)
    check(os.path.exists(os.path.join(dst, "extra")) and os.path.exists(os.path.join(dst, "d", "extra2")),
          "a source error: nothing is deleted")
    check("*deleting" not in out and os.path.exists(os.path.join(dst, "d", "q")), "the rest is synced")
    rc, out, err = run_as_given("-a", "-L", "--delete", "--ignore-errors", "-i", src + "/", dst)
    check(rc == 23 and "IO error encountered" not in err, "--ignore-errors: no skip notice (%r)" % err)
    check(not os.path.exists(os.path.join(dst, "extra")) and not os.path.exists(os.path.join(dst, "d", "extra2")),
          "--ignore-errors: the extraneous entries are deleted")


def test_rsync_diff_fixes():
    """Differences from rsync that examples/rsync_diff_test.py found and that were fixed in the CLI
    or the library (each named for its rule there); compared with rsync itself where it is here."""
    have_rsync = shutil.which("rsync") is not None
    root = os.geteuid() == 0

    # excluded_filter_on_src_name: rsync matches the rules against SRC's NAME itself (SRC without a
    # trailing slash): an excluded NAME copies nothing, deletes nothing and makes no DST
    w = fresh("fixes-name")
    write(os.path.join(w, "s", "a.c"), "a\n")
    write(os.path.join(w, "s", "sub", "b"), "b\n")
    write(os.path.join(w, "d", "s", "old"), "old\n")
    before = snapshot(os.path.join(w, "d"))
    for args in (["-a", "--exclude=*"], ["-a", "--delete", "--include=*.c", "--exclude=*", "--include=*/"],
                 ["-a", "--delete", "--exclude=/s"], ["-a", "--exclude=s/"]):
        rc, out, err = run_as_given(*(args + ["-i", "s", "d"]), cwd=w)
        check(rc == 0 and itemized(out) == [] and snapshot(os.path.join(w, "d")) == before,
              "excluded_filter_on_src_name: %s s d: NAME excluded, nothing done, exit 0 (exit %d, %r)"
              % (" ".join(args), rc, out))
        rc, out, err = run_as_given(*(args + ["-i", "s", "new"]), cwd=w)
        check(rc == 0 and not os.path.lexists(os.path.join(w, "new")),
              "excluded_filter_on_src_name: %s s new: no DST made (exit %d)" % (" ".join(args), rc))
        if have_rsync:
            rrc, rout, _ = run_rsync(*(args + ["-i", "s", "rnew"]), cwd=w)
            check(rrc == 0 and itemized(rout) == [] and not os.path.lexists(os.path.join(w, "rnew")),
                  "excluded_filter_on_src_name: rsync %s does the same" % " ".join(args))
    rc, out, err = run_as_given("-a", "--include=s/", "--exclude=*", "-i", "s", "inc", cwd=w)
    check(rc == 0 and os.path.isdir(os.path.join(w, "inc", "s")) and not os.path.exists(os.path.join(w, "inc", "s", "a.c")),
          "excluded_filter_on_src_name: an included NAME is copied with what the rules include below it")

    # setgid_first (seed 240008 cases 118 366, seed 1306349741 case 841): rsync sets a directory's
    # mode before it fills it, so without -g a new entry's group follows the set-group-ID bit the
    # directory gets from SRC (set or cleared), in DST directories that exist and new ones
    if root:
        w = fresh("fixes-setgid")
        for who in ("t", "r"):
            for d, mode in (("gains", 0o755), ("loses", 0o2755)):
                os.makedirs(os.path.join(w, who, d))
                os.chown(os.path.join(w, who, d), 0, 1234)
                os.chmod(os.path.join(w, who, d), mode)
        for d, mode in (("gains", 0o2755), ("loses", 0o755)):
            write(os.path.join(w, "s", d, "new"), "n\n")
            os.makedirs(os.path.join(w, "s", d, "newdir"))
            write(os.path.join(w, "s", d, "newdir", "f"), "f\n")
            os.chown(os.path.join(w, "s", d), 0, 1234)
            os.chmod(os.path.join(w, "s", d), mode)
        os.makedirs(os.path.join(w, "s", "loses", "plain"))  # made in a set-group-ID parent, without the bit
        write(os.path.join(w, "s", "loses", "plain", "f"), "f\n")
        os.chown(os.path.join(w, "s", "loses", "plain"), 0, 0)
        rc, out, err = run_as_given("-rlpt", "s/", "t", cwd=w)
        groups = lambda top: {p: (os.lstat(os.path.join(w, top, p)).st_gid, oct(os.lstat(os.path.join(w, top, p)).st_mode))
                              for p in ("gains/new", "gains/newdir", "gains/newdir/f", "loses/new", "loses/newdir",
                                        "loses/newdir/f", "loses/plain", "loses/plain/f")}
        got = groups("t")
        check(rc == 0 and got["gains/new"][0] == 1234 and got["loses/new"][0] == 0 and got["loses/plain/f"][0] == 0,
              "setgid_first: without -g a new file's group follows the set-group-ID bit SRC gives its directory (%r)" % got)
        if have_rsync:
            run_rsync("-rlpt", "s/", "r", cwd=w)
            check(got == groups("r"), "setgid_first: groups and modes as rsync's (%r vs %r)" % (got, groups("r")))
    else:
        print("  skip setgid_first: needs root (chown)")

    # blocker_fresh_copy_owner: a file written afresh for its metadata (here: another link in DST
    # and a mode change) keeps DST's owner and group without -o/-g, as rsync's chmod in place does
    if root:
        w = fresh("fixes-owner")
        for who in ("t", "r"):
            write(os.path.join(w, who, "f"), "same\n", mode=0o644, mtime=1_500_000_000_000_000_000)
            os.link(os.path.join(w, who, "f"), os.path.join(w, who + "-elsewhere"))
            os.chown(os.path.join(w, who, "f"), 1000, 1234)
        write(os.path.join(w, "s", "f"), "same\n", mode=0o600, mtime=1_500_000_000_000_000_000)
        rc, out, err = run_as_given("-rlpt", "-i", "s/", "t", cwd=w)
        st = os.lstat(os.path.join(w, "t", "f"))
        check(rc == 0 and (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1000, 1234, 0o600),
              "blocker_fresh_copy_owner: without -o/-g the fresh copy keeps DST's owner and group (%r)"
              % ((st.st_uid, st.st_gid, oct(st.st_mode)),))
        if have_rsync:
            run_rsync("-rlpt", "s/", "r", cwd=w)
            rst = os.lstat(os.path.join(w, "r", "f"))
            check((rst.st_uid, rst.st_gid) == (st.st_uid, st.st_gid), "blocker_fresh_copy_owner: as rsync's")
    else:
        print("  skip blocker_fresh_copy_owner: needs root (chown)")

    # blocker_excluded_in_extraneous_dir: an extraneous directory that keeps an excluded entry
    # keeps its mode; blocker_nonempty_dir_mode: so does one that another type cannot replace
    w = fresh("fixes-modes")
    write(os.path.join(w, "s", "f"), "f\n")
    write(os.path.join(w, "s", "x"), "x is a file now\n")
    for who in ("t", "r"):
        write(os.path.join(w, who, "ex", "keep.o"), "o\n")
        write(os.path.join(w, who, "ex", "junk"), "j\n")
        write(os.path.join(w, who + "2", "x", "inside"), "i\n")
        os.chmod(os.path.join(w, who, "ex"), 0o555)
        os.chmod(os.path.join(w, who + "2", "x"), 0o555)
    rc, out, err = run_as_given("-a", "--delete", "--exclude=*.o", "-i", "s/", "t", cwd=w)
    check(rc == 0 and stat.S_IMODE(os.lstat(os.path.join(w, "t", "ex")).st_mode) == 0o555 and
          os.path.exists(os.path.join(w, "t", "ex", "keep.o")) and not os.path.exists(os.path.join(w, "t", "ex", "junk")),
          "blocker_excluded_in_extraneous_dir: the extraneous directory kept for keep.o keeps mode 0555 (exit %d)" % rc)
    rc2, out, err = run_as_given("-a", "-i", "s/", "t2", cwd=w)
    check(rc2 == 23 and "rmdir x (destination" in err and stat.S_IMODE(os.lstat(os.path.join(w, "t2", "x")).st_mode) == 0o555,
          "blocker_nonempty_dir_mode: without --delete the non-empty directory x stays, mode 0555 (exit %d, %r)" % (rc2, err))
    if have_rsync:
        rrc, _, _ = run_rsync("-a", "--delete", "--exclude=*.o", "s/", "r", cwd=w)
        rrc2, _, _ = run_rsync("-a", "s/", "r2", cwd=w)
        # as a user other than root rsync opens both up (u+w) to delete in them and leaves them so
        # (README, rsync_diff_test.py rule user_opened_entry_kept); treesync gives the mode back
        want = 0o555 if os.geteuid() == 0 else 0o755
        check((rrc, rrc2) == (rc, rc2) and stat.S_IMODE(os.lstat(os.path.join(w, "r", "ex")).st_mode) == want and
              stat.S_IMODE(os.lstat(os.path.join(w, "r2", "x")).st_mode) == want,
              "blocker_*_mode: rsync leaves both modes %o, with the same exit statuses (%d, %d)" % (want, rrc, rrc2))
    make_writable(w)


def test_links_and_rule_files():
    """Issue 24, the last of the differential test's gaps (examples/rsync_diff_test.py): -H's -i
    lines for a name that was a file (rsync's hf.st...... NAME => FIRST, all spaces when nothing
    differs), -H never overwriting a name when the group's first name was left other than SRC (-u),
    -F --delete keeping what DST's own rule files exclude, and -L stopping at a symlink cycle."""
    have_rsync = shutil.which("rsync") is not None
    root = os.geteuid() == 0
    t0 = 1_500_000_000_000_000_000
    files_itemized = lambda text: [l for l in itemized(text) if not l.startswith(".d")]  # DST's own mtime aside

    # -H: the itemize code of a name that existed as a separate file, as rsync's
    w = fresh("links-itemize")
    write(os.path.join(w, "s", "a"), "old\n", mode=0o640, mtime=t0)
    os.link(os.path.join(w, "s", "a"), os.path.join(w, "s", "b"))
    shapes = {"same": ("old\n", 0o640, t0, None, "hf          b => a"),
              "mode_time": ("olx\n", 0o600, t0 - 10**9, None, "hf..tp..... b => a"),
              "size": ("longer\n", 0o640, t0, None, "hf.s....... b => a")}
    if root:
        shapes["owner"] = ("old\n", 0o640, t0, (1000, 100), "hf....og... b => a")
    for what, (data, mode, mtime, owner, want) in sorted(shapes.items()):
        for who in ("t", "r"):
            d = os.path.join(w, what + "-" + who)
            write(os.path.join(d, "a"), "old\n", mode=0o640, mtime=t0)
            write(os.path.join(d, "b"), data, mode=mode, mtime=mtime)
            if owner:
                os.chown(os.path.join(d, "b"), *owner)
        args = ["-rtpl", "-H"] + (["-o", "-g"] if owner else [])
        # -j1: the first name is the first the walk reaches (with more workers, either a or b)
        rc, out, err = run_as_given(*(args + ["-j1", "-i", "s/", what + "-t"]), cwd=w)
        st_a, st_b = (os.lstat(os.path.join(w, what + "-t", n)) for n in ("a", "b"))
        check(rc == 0 and files_itemized(out) == [want] and st_a.st_ino == st_b.st_ino,
              "-H %s: b becomes a link to a, itemized %r (exit %d, %r)" % (what, want, rc, files_itemized(out)))
        if have_rsync:
            rrc, rout, _ = run_rsync(*(args + ["-i", "s/", what + "-r"]), cwd=w)
            check(rrc == 0 and files_itemized(rout) == [want], "-H %s: rsync itemizes it so (%r)" % (what, files_itemized(rout)))

    # -H -u: the first name is newer in DST (kept); another name of the group that DST holds is
    # left alone (rsync syncs it on its own: -u keeps it too), never overwritten by a link to it
    w = fresh("links-update")
    write(os.path.join(w, "s", "a"), "old\n", mtime=t0)
    os.link(os.path.join(w, "s", "a"), os.path.join(w, "s", "b"))
    for who in ("t", "r"):
        write(os.path.join(w, who, "a"), "newer a\n", mtime=t0 + 10**11)
        write(os.path.join(w, who, "b"), "newer b\n", mtime=t0 + 10**11)
    rc, out, err = run_as_given("-a", "-H", "-u", "-i", "s/", "t", cwd=w)
    check(rc == 0 and open(os.path.join(w, "t", "b")).read() == "newer b\n" and files_itemized(out) == [],
          "-H -u: DST's newer b is kept, not replaced by a link to the kept a (exit %d, %r)" % (rc, files_itemized(out)))
    if have_rsync:
        run_rsync("-a", "-H", "-u", "s/", "r", cwd=w)
        check(contents(os.path.join(w, "r")) == contents(os.path.join(w, "t")), "-H -u: as rsync's tree")

    # -F --delete: an extraneous entry that DST's own .rsync-filter excludes is kept (rsync reads
    # DST's rule files where it deletes); one that SRC's excludes is kept too (treesync reads both)
    w = fresh("rule-files-dst")
    write(os.path.join(w, "s", "d", "f"), "f\n")
    write(os.path.join(w, "s", "e", ".rsync-filter"), "- *.tmp\n")
    for who in ("t", "r"):
        write(os.path.join(w, who, "d", ".rsync-filter"), "- x\n")
        write(os.path.join(w, who, "d", "x"), "protected by DST's rule file\n")
        write(os.path.join(w, who, "d", "y"), "extraneous\n")
        write(os.path.join(w, who, "e", "keep.tmp"), "protected by SRC's rule file\n")
    rc, out, err = run_as_given("-a", "-F", "--delete", "-i", "s/", "t", cwd=w)
    got = contents(os.path.join(w, "t"))
    check(rc == 0 and "d/x" in got and "d/y" not in got and "e/keep.tmp" in got and "d/.rsync-filter" not in got,
          "-F --delete: d/x (DST's rule file) and e/keep.tmp (SRC's) kept, d/y deleted (exit %d, %r)" % (rc, sorted(got)))
    if have_rsync:
        run_rsync("-a", "-F", "--delete", "s/", "r", cwd=w)
        rgot = contents(os.path.join(w, "r"))
        check("d/x" in rgot and set(rgot) <= set(got),
              "-F --delete: rsync keeps d/x too, and nothing treesync deletes (%r)" % sorted(rgot))

    # -F --delete: DST's rule file is read before the run copies SRC's over it (seed 1306349741
    # case 77: DST's '- Z' protected Z/, SRC's .rsync-filter replaced it, then Z/ was deleted)
    w = fresh("rule-files-dst-overwritten")
    write(os.path.join(w, "s", ".rsync-filter"), "- sub/\n")
    write(os.path.join(w, "s", "f"), "f\n")
    for who in ("t", "r"):
        write(os.path.join(w, who, ".rsync-filter"), "- Z\n")
        write(os.path.join(w, who, "Z", "kept"), "protected by DST's rule file before the run\n")
    rc, out, err = run_as_given("-a", "-F", "--delete", "-i", "s/", "t", cwd=w)
    got = contents(os.path.join(w, "t"))
    check(rc == 0 and "Z/kept" in got and got.get(".rsync-filter") == b"- sub/\n",
          "-F --delete: Z/ kept by DST's rule file although SRC's was copied over it (exit %d, %r)" % (rc, sorted(got)))
    if have_rsync:
        run_rsync("-a", "-F", "--delete", "s/", "r", cwd=w)
        check(contents(os.path.join(w, "r")) == got, "-F --delete: as rsync's tree")

    # DST's rule files are input someone else may have written (-F --delete reads them up front).
    # A bad line in one: rsync stops with "Unknown filter rule", exit 1, where it meets it;
    # treesync stops before any write, the line not quoted (rsync does not quote it either)
    w = fresh("rule-files-dst-bad")
    write(os.path.join(w, "s", "d", "f"), "f\n")
    for who in ("t", "r"):
        write(os.path.join(w, who, "d", ".rsync-filter"), "canary-bad-line\n")
        write(os.path.join(w, who, "d", "y"), "extraneous\n")
        write(os.path.join(w, who, "z"), "extraneous\n")
    before = contents(os.path.join(w, "t"))
    rc, out, err = run_as_given("-a", "-F", "--delete", "-i", "s/", "t", cwd=w)
    check(rc == 1 and "Unknown filter rule: <rule from d/.rsync-filter line 1>" in err and "canary" not in err + out
          and contents(os.path.join(w, "t")) == before,
          "-F --delete: a bad line in DST's rule file stops the run before any write, unquoted (exit %d, %r)" % (rc, err))
    if have_rsync:
        rrc, _, rerr = run_rsync("-a", "-F", "--delete", "s/", "r", cwd=w)
        rgot = contents(os.path.join(w, "r"))
        check(rrc == 1 and "d/y" in rgot, "-F --delete: rsync stops too, exit 1, d/y kept (exit %d)" % rrc)

    # ... and one that merges a file outside DST the running user can read: refused unread (issue
    # 33: a merge name lies below the rule file's directory), nothing written; a merged file below
    # with a bad line: its text never reaches the output (the canary), nothing written
    w = fresh("rule-files-dst-merge-secret")
    write(os.path.join(w, "outside", "secret"), "canary-secret-line\n")
    write(os.path.join(w, "s", "f"), "f\n")
    write(os.path.join(w, "t", ".rsync-filter"), "merge %s\n" % os.path.join(w, "outside", "secret"))
    write(os.path.join(w, "t", "z"), "extraneous\n")
    before = contents(os.path.join(w, "t"))
    rc, out, err = run_as_given("-a", "-F", "--delete", "-i", "s/", "t", cwd=w)
    check(rc == 1 and "canary" not in err + out and "not below the rule file's directory" in err
          and contents(os.path.join(w, "t")) == before,
          "-F --delete: a merge of a file outside DST is refused, nothing written (exit %d, %r)" % (rc, err))
    write(os.path.join(w, "t", ".rsync-filter"), "merge sub/secret\n")
    write(os.path.join(w, "t", "sub", "secret"), "canary-secret-line\n")
    before = contents(os.path.join(w, "t"))
    rc, out, err = run_as_given("-a", "-F", "--delete", "-i", "s/", "t", cwd=w)
    check(rc == 1 and "canary" not in err + out and "merged at .rsync-filter line 1" in err
          and contents(os.path.join(w, "t")) == before,
          "-F --delete: a merged file's bad line is not quoted, nothing written (exit %d, %r)" % (rc, err))

    # A merge file that merges itself (rsync's testsuite filter-merge-recursion): rsync stops at its
    # include depth limit, 32 files, with "merge-file include depth limit (32) exceeded" and exit
    # 11 (RERR_FILEIO); treesync says the same and exits 11, nothing written (SRC's root rule file)
    w = fresh("rule-files-merge-recursion")
    write(os.path.join(w, "s", ".merge"), ". .merge\n")
    write(os.path.join(w, "s", "file.txt"), "hello\n")
    rc, out, err = run_as_given("-a", "--filter=: .merge", "s/", "t/", cwd=w)
    check(rc == 11 and "merge-file include depth limit (32) exceeded" in err and not os.path.exists(os.path.join(w, "t")),
          "a merge file that merges itself: refused at the depth limit, exit 11, nothing made (exit %d, %r)" % (rc, err))
    rc, out, err = run_as_given("--json", "-a", "--filter=: .merge", "s/", "t/", cwd=w)
    got = json.loads(out) if rc == 11 and out.strip() else {}
    check(got.get("status") == "refused" and got.get("exit_code") == 11 and
          "merge-file include depth limit (32)" in got.get("refusal", {}).get("message", ""),
          "--json: the depth limit is a refusal with exit_code 11 (exit %d, %r)" % (rc, out[:200]))
    if have_rsync:
        rrc, rout, rerr = run_rsync("-a", "--filter=: .merge", "s/", "r/", cwd=w)
        check(rrc == 11 and "merge-file include depth limit (32) exceeded" in rout + rerr,
              "a merge file that merges itself: rsync exits 11 at its depth limit too (exit %d)" % rrc)
    # ... and in DST's rule files (-F --delete, read before any write): refused the same way
    w = fresh("rule-files-dst-merge-recursion")
    write(os.path.join(w, "s", "f"), "f\n")
    write(os.path.join(w, "t", "d", ".rsync-filter"), ". .rsync-filter\n")
    write(os.path.join(w, "t", "d", "y"), "extraneous\n")
    before = contents(os.path.join(w, "t"))
    rc, out, err = run_as_given("-a", "-F", "--delete", "-i", "s/", "t", cwd=w)
    check(rc == 11 and "merge-file include depth limit (32) exceeded" in err and contents(os.path.join(w, "t")) == before,
          "-F --delete: a DST rule file that merges itself is refused, exit 11, nothing written (exit %d, %r)" % (rc, err))

    # ... a rule file that is a symlink (here to a file outside DST) is not followed: what is in its
    # directory is kept whole (rsync reads through it, so it may protect anything there)
    w = fresh("rule-files-dst-symlink")
    write(os.path.join(w, "outside", "rules"), "- y\n")
    write(os.path.join(w, "s", "d", "f"), "f\n")
    for who in ("t", "r"):
        os.makedirs(os.path.join(w, who, "d"))
        os.symlink(os.path.join(w, "outside", "rules"), os.path.join(w, who, "d", ".rsync-filter"))
        write(os.path.join(w, who, "d", "y"), "protected through the link\n")
        write(os.path.join(w, who, "d", "w"), "extraneous\n")
        write(os.path.join(w, who, "z"), "extraneous\n")
    rc, out, err = run_as_given("-a", "-F", "--delete", "-i", "s/", "t", cwd=w)
    got = contents(os.path.join(w, "t"))
    check(rc == 0 and "d/y" in got and "d/w" in got and "z" not in got and "d/f" in got,
          "-F --delete: DST's symlinked rule file keeps its directory whole, the rest syncs (exit %d, %r)" % (rc, sorted(got)))
    if have_rsync:
        run_rsync("-a", "-F", "--delete", "s/", "r", cwd=w)
        rgot = contents(os.path.join(w, "r"))
        check("d/y" in rgot and set(rgot) <= set(got), "-F --delete: rsync keeps d/y too, nothing treesync deletes (%r)" % sorted(rgot))

    # ... and what they hold in memory is bounded (16 MiB): past it nothing more is read, a notice
    # says so, and a directory whose rule files were not recorded keeps everything in it
    w = fresh("rule-files-dst-budget")
    write(os.path.join(w, "s", "f"), "f\n")
    for i in range(5):
        write(os.path.join(w, "t", "a%02d" % i, ".rsync-filter"), ("#" * 99 + "\n") * 40000)
    write(os.path.join(w, "t", "zz", "junk"), "extraneous\n")
    write(os.path.join(w, "t", "top"), "extraneous\n")
    rc, out, err = run_as_given("-a", "-F", "--delete", "-q", "s/", "t", cwd=w, timeout=120)
    check(rc == 0 and "hold more than 16 MiB" in err and os.path.exists(os.path.join(w, "t", "zz", "junk"))
          and os.path.exists(os.path.join(w, "t", "f")),
          "-F --delete: DST's rule files past 16 MiB: a notice, and zz/junk (rule files not recorded) kept (exit %d, %r)" % (rc, err))

    # ... and the files they merge, 2 MiB (issue 45 item 4: a chain of rule files each merging a
    # large file held them all): past it, the directory whose merged file was not kept keeps all
    w = fresh("rule-files-dst-merge-budget")
    write(os.path.join(w, "s", "f"), "f\n")
    for d in ("a", "b"):
        write(os.path.join(w, "t", d, ".rsync-filter"), "merge big\n")
        write(os.path.join(w, "t", d, "big"), ("#" * 99 + "\n") * 12000 + "- big\n")
        write(os.path.join(w, "t", d, "junk"), "extraneous\n")
    rc, out, err = run_as_given("-a", "-F", "--delete", "-q", "s/", "t", cwd=w, timeout=120)
    got = contents(os.path.join(w, "t"))
    check(rc == 0 and "the files they merge more than 2 MiB" in err and "a/big" in got and "a/junk" not in got
          and "b/junk" in got,
          "-F --delete: DST's merged files past 2 MiB: a notice, a/junk deleted, b/junk kept (exit %d, %r, %r)"
          % (rc, err, sorted(got)))

    # ... and the rules they hold have a budget of their own, 4,000 (SRC's is 1,000,000; issue 45
    # items 4, 5): a rule file past it is not parsed further, its directory keeps everything, and a
    # notice says so; what DST's other directories exclude still counts
    w = fresh("rule-files-dst-rule-cap")
    write(os.path.join(w, "s", "f"), "f\n")
    write(os.path.join(w, "t", "d", ".rsync-filter"), "".join("- k%d\n" % i for i in range(4001)))
    write(os.path.join(w, "t", "d", "junk"), "extraneous\n")
    write(os.path.join(w, "t", "e", ".rsync-filter"), "- k1\n")
    write(os.path.join(w, "t", "e", "k1"), "protected\n")
    write(os.path.join(w, "t", "e", "junk"), "extraneous\n")
    rc, out, err = run_as_given("-a", "-F", "--delete", "-q", "s/", "t", cwd=w, timeout=120)
    got = contents(os.path.join(w, "t"))
    check(rc == 0 and "hold more than 4000 rules" in err and "d/junk" in got and "e/k1" in got
          and "e/junk" not in got and "f" in got,
          "-F --delete: a DST rule file of 4,001 rules: a notice, d/junk kept, e's rules applied (exit %d, %r, %r)"
          % (rc, err, sorted(got)))

    # ... which caps the rules in force in a directory: in a chain of 100 rules a level, the 41st
    # level (4,100 rules) keeps everything, the 40th (4,000) deletes what its rules do not exclude
    w = fresh("rule-files-dst-rule-cap-chain")
    write(os.path.join(w, "s", "f"), "f\n")
    level = os.path.join(w, "t")
    for i in range(1, 42):
        level = os.path.join(level, "d")
        write(os.path.join(level, ".rsync-filter"), "".join("- k%d.%d\n" % (i, j) for j in range(100)))
        write(os.path.join(level, "junk%d" % i), "extraneous\n")
    rc, out, err = run_as_given("-a", "-F", "--delete", "-q", "s/", "t", cwd=w, timeout=120)
    l40 = os.path.join(w, "t", *(["d"] * 40))
    check(rc == 0 and "hold more than 4000 rules" in err and not os.path.exists(os.path.join(l40, "junk40"))
          and os.path.exists(os.path.join(l40, "d", "junk41")),
          "-F --delete: 41 levels of 100 DST rules: level 40's junk deleted, level 41's kept (exit %d, %r)" % (rc, err))

    # ... and a DST hundreds of levels deep is read to the bottom with a few descriptors (issue 33
    # item 3: the read held one per level, so under a limit of 128 it stopped some 120 levels down
    # and silently kept everything below): d^300/gone is deleted, d^300/keep (its rule file) kept
    import resource
    w = fresh("rule-files-dst-deep")
    write(os.path.join(w, "s", "f"), "f\n")
    deep = os.path.join(w, "t", *(["d"] * 300))
    write(os.path.join(deep, ".rsync-filter"), "- keep\n")
    write(os.path.join(deep, "keep"), "protected by DST's rule file\n")
    write(os.path.join(deep, "gone"), "extraneous\n")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    p = subprocess.run([CLI, "-a", "-F", "--delete", "-q", "s/", "t"], cwd=w, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (min(128, hard), hard)))
    check(p.returncode == 0 and not os.path.exists(os.path.join(deep, "gone")) and
          os.path.exists(os.path.join(deep, "keep")) and os.path.exists(os.path.join(w, "t", "f")),
          "-F --delete, 300 levels, 128 descriptors: d^300/gone deleted, d^300/keep kept (exit %d, %r)"
          % (p.returncode, p.stderr[:300]))

    # -L and a symlink cycle (a link to an ancestor): treesync stops at the link with an error
    # naming it, copies the rest, deletes nothing (a source error), exit 23; rsync goes round the
    # loop until the kernel's 40 links (ELOOP), making DST/d/e/up/e/up/... , exit 23 too
    w = fresh("links-cycle")
    write(os.path.join(w, "s", "d", "e", "f"), "f\n")
    os.symlink("..", os.path.join(w, "s", "d", "e", "up"))
    write(os.path.join(w, "t", "old", "k"), "k\n")
    rc, out, err = run_as_given("-a", "-L", "--delete", "-i", "s/", "t", cwd=w, timeout=60)
    got = contents(os.path.join(w, "t"))
    check(rc == 23 and "opendir d/e/up (source s/d/e/up): symbolic link cycle" in err and "d/e/f" in got and
          "old/k" in got and not any(p.startswith("d/e/up") for p in got),
          "-L cycle: reported (symbolic link cycle), not entered, the rest copied, nothing deleted, exit 23 "
          "(exit %d, %r, %r)" % (rc, err, sorted(got)))
    if have_rsync:
        rrc, rout, _ = run_rsync("-a", "-L", "-i", "s/", "r", cwd=w)
        check(rrc == 23 and os.path.isdir(os.path.join(w, "r", "d", "e", "up", "e", "up")),
              "-L cycle: rsync exits 23 too, after copying round the loop (exit %d)" % rrc)


def test_untrusted_links():
    """rsync 3.5's untrusted-symlink rule (issue 33 item 7): a symlink owned by another user than root
    or the caller, at any component of DST, of --backup-dir, of an --exclude-from / --include-from
    file or of --state=FILE, is refused before anything is written (exit 3 for DST, 11 for
    --backup-dir and the files, rsync's statuses); root's own links are followed; --insecure-links follows
    every link.  As root, with links owned by uid 65534 and a canary directory outside DST."""
    if os.geteuid() != 0:
        print("  SKIPPED: needs root (to plant a symlink owned by another user, uid 65534)")
        return
    attacker = 65534

    def plant(target, link):
        os.symlink(target, link)
        os.lchown(link, attacker, attacker)

    def fixture(name):
        w = fresh("untrusted-" + name)
        src, dest, outside = (os.path.join(w, n) for n in ("src", "dest", "outside"))
        for i in range(3):
            write(os.path.join(src, "sub", "f%d" % i), "payload\n")
        write(os.path.join(src, "canary_file"), "would-be-transferred\n")
        write(os.path.join(outside, "canary"), "outside DST\n")
        os.makedirs(dest)
        return w, src, dest, outside

    def outside_untouched(outside, what):
        check(sorted(os.listdir(outside)) == ["canary"] and
              open(os.path.join(outside, "canary")).read() == "outside DST\n",
              what + ": nothing written outside DST (%r)" % sorted(os.listdir(outside)))

    # DST's last component is another user's symlink (rsync's symlink-race-dest)
    w, src, dest, outside = fixture("dest")
    plant(outside, os.path.join(dest, "sub"))
    rc, out, err = run_as_given("-a", src + "/sub/", dest + "/sub/")
    check(rc == 3 and "owned by uid %d" % attacker in err and "--insecure-links" in err,
          "DST that is another user's symlink: refused, exit 3, the link and its owner named (exit %d, %r)" % (rc, err))
    outside_untouched(outside, "DST symlink")
    rc, out, err = run_as_given("--json", "-a", src + "/sub/", dest + "/sub/")
    doc = json.loads(out) if out.strip() else {}
    check(rc == 3 and doc.get("status") == "refused" and doc.get("exit_code") == 3 and
          doc.get("refusal", {}).get("path") == dest + "/sub/",
          "--json: status refused, exit_code 3, the DST operand at fault (%r)" % out)
    # the same through --insecure-links (rsync's opt-out): followed, as before
    rc, out, err = run_as_given("-a", "--insecure-links", src + "/sub/", dest + "/sub/")
    check(rc == 0 and os.path.isfile(os.path.join(outside, "f0")),
          "--insecure-links: the link is followed (exit %d, %r)" % (rc, err))
    # root's own link (the /backup -> /mnt/disk pattern) is followed
    real = os.path.join(w, "real")
    os.makedirs(real)
    os.unlink(os.path.join(dest, "sub"))
    os.symlink(real, os.path.join(dest, "sub"))
    rc, out, err = run_as_given("-a", src + "/sub/", dest + "/sub/")
    check(rc == 0 and os.path.isfile(os.path.join(real, "f0")),
          "a symlinked DST owned by root is followed (exit %d, %r)" % (rc, err))

    # run as uid 65534: its own link is followed, root's too, one of uid 4242 is refused
    w, src, dest, outside = fixture("caller")
    for root_dir, _, files in os.walk(w):
        os.chown(root_dir, attacker, attacker)
        for n in files:
            os.chown(os.path.join(root_dir, n), attacker, attacker)
    as_user = ["setpriv", "--reuid=%d" % attacker, "--regid=%d" % attacker, "--clear-groups", CLI]
    for owner, expected in [(attacker, 0), (0, 0), (4242, 3)]:
        link = os.path.join(dest, "sub")
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(outside, link)
        os.lchown(link, owner, owner)
        p = subprocess.run(as_user + ["-r", src + "/sub/", link + "/"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(p.returncode == expected,
              "as uid %d, a DST link owned by uid %d: exit %d (exit %d, %r)" % (attacker, owner, expected, p.returncode,
                                                                              p.stderr))

    # a relative DST operand that is the link (rsync's symlink-race-relative-dest), and SRC without a
    # trailing slash into DST whose NAME is the link
    w, src, dest, outside = fixture("relative")
    os.rmdir(dest)
    plant(outside, dest)
    rc, out, err = run_as_given("-a", "src/", "dest/", cwd=w)
    check(rc == 3, "a relative DST that is another user's symlink: refused, exit 3 (exit %d, %r)" % (rc, err))
    outside_untouched(outside, "relative DST symlink")
    os.unlink(dest)
    os.makedirs(dest)
    plant(outside, os.path.join(dest, "src"))
    rc, out, err = run_as_given("-a", "src", "dest", cwd=w)
    check(rc == 3, "SRC without a slash: DST/NAME another user's symlink: refused, exit 3 (exit %d, %r)" % (rc, err))
    outside_untouched(outside, "DST/NAME symlink")

    # a parent component of DST is the link (the link leads to a directory where DST exists)
    w, src, dest, outside = fixture("parent")
    os.makedirs(os.path.join(outside, "dst"))
    plant(outside, os.path.join(w, "parent"))
    rc, out, err = run("-q", src, os.path.join(w, "parent", "dst"))
    check(rc == 3 and os.listdir(os.path.join(outside, "dst")) == [],
          "a parent component of DST that is another user's symlink: refused, exit 3, nothing written (exit %d, %r)"
          % (rc, err))

    # --exclude-from / --include-from naming another user's symlink, or through one
    # (rsync's excludefrom-symlink: the leaf and a parent component)
    w, src, dest, outside = fixture("rule-files")
    write(os.path.join(outside, "exclude_list"), "canary_file\n")
    plants = os.path.join(w, "plants")
    os.makedirs(plants)
    plant(os.path.join(outside, "exclude_list"), os.path.join(plants, "leaf"))
    plant(outside, os.path.join(plants, "parent"))
    for option, path in [("--exclude-from", os.path.join(plants, "leaf")),
                         ("--exclude-from", os.path.join(plants, "parent", "exclude_list")),
                         ("--include-from", os.path.join(plants, "leaf"))]:
        d = os.path.join(w, "dst-%d" % len(os.listdir(w)))
        rc, out, err = run("-q", option + "=" + path, src, d)
        kind = "include" if option == "--include-from" else "exclude"
        check(rc == 11 and ("failed to open %s file" % kind) in err and "owned by uid %d" % attacker in err and
              not os.path.lexists(d),
              "%s %s: refused, exit 11, nothing written (exit %d, %r)" % (option, os.path.relpath(path, w), rc, err))
    d = os.path.join(w, "dst-insecure")
    rc, out, err = run("-q", "--insecure-links", "--exclude-from=" + os.path.join(plants, "leaf"), src, d)
    check(rc == 0 and not os.path.lexists(os.path.join(d, "canary_file")) and os.path.isfile(os.path.join(d, "sub", "f0")),
          "--insecure-links: the --exclude-from link is read (exit %d, %r)" % (rc, err))
    trusted = os.path.join(plants, "root-link")
    os.symlink(os.path.join(outside, "exclude_list"), trusted)
    d = os.path.join(w, "dst-trusted")
    rc, out, err = run("-q", "--exclude-from=" + trusted, src, d)
    check(rc == 0 and not os.path.lexists(os.path.join(d, "canary_file")),
          "an --exclude-from link owned by root is read (exit %d, %r)" % (rc, err))

    # --state=FILE in a directory reached through another user's symlink
    w, src, dest, outside = fixture("state")
    plant(outside, os.path.join(w, "statedir"))
    rc, out, err = run("-q", "--state=" + os.path.join(w, "statedir", "mirror.state"), src, dest)
    check(rc == 11 and "--state=" in err and os.listdir(dest) == [],
          "--state through another user's symlink: refused, exit 11, nothing written (exit %d, %r)" % (rc, err))
    outside_untouched(outside, "--state")

    # --backup-dir through another user's symlink, absolute and relative to DST
    w, src, dest, outside = fixture("backup")
    rc, out, err = run("-q", src, dest)
    write(os.path.join(src, "sub", "f0"), "changed\n")
    plant(outside, os.path.join(w, "bk"))
    plant(outside, os.path.join(dest, "bk"))
    for backup in [os.path.join(w, "bk", "old"), "bk"]:
        rc, out, err = run("-q", "--backup-dir=" + backup, "--exclude=/bk", src, dest)
        check(rc == 11 and "--backup-dir=" in err and open(os.path.join(dest, "sub", "f0")).read() == "payload\n",
              "--backup-dir=%s through another user's symlink: refused, exit 11 (rsync's), DST unchanged (exit %d, %r)"
              % (os.path.relpath(backup, w) if os.path.isabs(backup) else backup, rc, err))
        outside_untouched(outside, "--backup-dir")

    # --temp-dir through another user's symlink, absolute and relative to DST
    w, src, dest, outside = fixture("temp")
    rc, out, err = run("-q", src, dest)
    write(os.path.join(src, "sub", "f0"), "changed\n")
    plant(outside, os.path.join(w, "tl"))
    plant(outside, os.path.join(dest, "tl"))
    for temp in [os.path.join(w, "tl"), "tl"]:
        rc, out, err = run("-q", "--temp-dir=" + temp, "--exclude=/tl", src, dest)
        check(rc == 11 and "--temp-dir=" in err and open(os.path.join(dest, "sub", "f0")).read() == "payload\n",
              "--temp-dir=%s through another user's symlink: refused, exit 11, DST unchanged (exit %d, %r)"
              % (os.path.relpath(temp, w) if os.path.isabs(temp) else temp, rc, err))
        outside_untouched(outside, "--temp-dir")
def inotify_opens(path):
    """A probe of opens for I/O of `path` (inotify IN_OPEN; an O_PATH open is none): returns a
    function giving the number of opens since the probe was made."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0 or libc.inotify_add_watch(fd, os.fsencode(path), 0x20) < 0:  # IN_OPEN
        raise OSError(ctypes.get_errno(), "inotify")
    def count():
        n = 0
        while True:
            try:
                buf = os.read(fd, 4096)
            except BlockingIOError:
                return n
            pos = 0
            while pos < len(buf):
                _, mask, _, length = struct.unpack_from("iIII", buf, pos)
                n += 1 if mask & 0x20 else 0
                pos += 16 + length
    return count


def dst_swap_run(w, exchange):
    """Issue 45 item 2: DST's "r" holds the rule file protecting its "precious"; "decoy" is empty.
    The run reads an --exclude-from FIFO twice: make_filter's read for SRC, then keep_dst_rule_files'
    own, which comes after DST's rule files were read and before the run enters DST.  Holding the
    FIFO's second open, "r" and "decoy" are exchanged (`exchange`), an exact point between the
    read and the walk, then the run goes on.  Returns (exit, stdout, stderr, DST's files)."""
    write(os.path.join(w, "s", "r", "keep"), "k\n")
    os.makedirs(os.path.join(w, "s", "decoy"))
    write(os.path.join(w, "d", "r", ".rsync-filter"), "- precious\n")
    write(os.path.join(w, "d", "r", "precious"), "p\n")
    write(os.path.join(w, "d", "r", "junk"), "j\n")
    write(os.path.join(w, "d", "decoy", "junk2"), "j\n")
    fifo = os.path.join(w, "ex")
    os.mkfifo(fifo)
    p = subprocess.Popen([CLI, "-r", "-i", "--delete", "-F", "--exclude-from", fifo, "s/", "d/"], cwd=w,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    opens = [0]
    me = os.stat(fifo)

    def held():  # whether the run has the FIFO open
        try:
            names = os.listdir("/proc/%d/fd" % p.pid)
        except OSError:
            return False
        for f in names:
            try:
                st = os.stat("/proc/%d/fd/%s" % (p.pid, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (me.st_dev, me.st_ino):
                return True
        return False

    def feed():
        for n in (1, 2):
            fd = os.open(fifo, os.O_WRONLY)  # the run's n-th open of it
            opens[0] = n
            while p.poll() is None and not held():  # its descriptor in place: it waits for our EOF
                time.sleep(0.001)
            if n == 2 and exchange:
                d = os.path.join(w, "d")
                os.rename(os.path.join(d, "r"), os.path.join(d, "tmp"))
                os.rename(os.path.join(d, "decoy"), os.path.join(d, "r"))
                os.rename(os.path.join(d, "tmp"), os.path.join(d, "decoy"))
            os.close(fd)
            while p.poll() is None and held():  # until it has closed it: its next open is its next read
                time.sleep(0.001)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    feeder.join(5)
    files = sorted(os.path.relpath(os.path.join(dp, f), os.path.join(w, "d"))
                   for dp, _, fs in os.walk(os.path.join(w, "d")) for f in fs)
    check(opens[0] == 2, "the --exclude-from FIFO opened twice by the run (%d)" % opens[0])
    return p.returncode, out.decode("utf-8", "surrogateescape"), err.decode("utf-8", "surrogateescape"), files


def test_dst_swap():
    """Issue 45 item 2: a DST directory exchanged with a decoy between the read of DST's rule files
    and the walk has nothing deleted in it (its rules are not the ones read for its name), and the
    run says so (exit 23); without the exchange the rules delete what they allow."""
    if not os.path.isdir("/proc/self/fd"):
        return
    w = fresh("rule-file-security/swap")
    rc, out, err, files = dst_swap_run(w, True)
    check("decoy/precious" in files and "decoy/junk" in files and "r/junk2" in files,
          "DST 'r' exchanged with 'decoy' after its rule files were read: nothing deleted in either (%r, %r)"
          % (files, out))
    check(rc == 23 and "treesync: unlink decoy (destination d/decoy): not the directory whose rule files were read "
          "before the run (changed during the run): nothing deleted in it" in err and "*deleting" not in out,
          "the exchange reported on stderr, naming the directory, exit 23 (exit %d, %r)" % (rc, err))
    w = fresh("rule-file-security/no-swap")
    rc, out, err, files = dst_swap_run(w, False)
    check(rc == 0 and files == ["r/keep", "r/precious"],
          "no exchange: DST's rules keep 'precious', the rest SRC lacks is deleted (exit %d, %r, %r)" % (rc, files, err))


def test_rule_file_security():
    """Issue 33 items 1-2: a name merged by a rule file (DST's or SRC's) resolves below the rule
    file's directory: an absolute or '..' name is a bad line (the run refused, exit 1, nothing
    written, whether the named file exists or not and whatever it holds), a symlink on the way is
    not followed, a FIFO is never opened; a canary outside DST."""
    w = fresh("rule-file-security")
    secret = os.path.join(w, "secret")
    write(secret, "guess-me-42\n", mode=0o600)

    def dst_attack(line, guesses=("guess-me-42", "wrong-guess"), setup=None):
        d = fresh("rule-file-security/case")
        write(os.path.join(d, "s", "a"), "a\n")
        write(os.path.join(d, "d", ".rsync-filter"), line + "\n")
        for g in guesses:
            write(os.path.join(d, "d", g), "x\n")
        if setup:
            setup(d)
        rc, out, err = run_as_given("-r", "-F", "--delete", "s/", "d/", cwd=d)
        survivors = sorted(n for n in guesses if os.path.exists(os.path.join(d, "d", n)))
        return rc, err, survivors

    # existence oracle: the same outcome for an existing root-only file and a missing one
    rc1, err1, surv1 = dst_attack("merge " + secret)
    rc2, err2, surv2 = dst_attack("merge " + os.path.join(w, "missing"))
    check(rc1 == 1 and rc2 == 1 and surv1 == surv2 == ["guess-me-42", "wrong-guess"] and
          "not below the rule file's directory" in err1,
          "DST 'merge /ABS': refused (exit 1, nothing deleted) whether the file exists or not "
          "(exit %d/%d, %r/%r, %r)" % (rc1, rc2, surv1, surv2, err1))
    # content oracle: 'merge,- SECRET' would turn each line into an exclude
    for line in ("merge,- " + secret, "merge,- ../../secret", ".- " + secret, "dir-merge,- " + secret):
        rc, err, surv = dst_attack(line)
        check(rc == 1 and surv == ["guess-me-42", "wrong-guess"] and "guess-me" not in err,
              "DST %r: refused, exit 1, nothing deleted, the secret not quoted (exit %d, %r, %r)" % (line, rc, surv, err))
    # a symlink planted in DST: not followed, the guesses deleted alike
    rc, err, surv = dst_attack("merge,- lnk/secret", setup=lambda d: os.symlink(w, os.path.join(d, "d", "lnk")))
    check(rc == 0 and surv == [],
          "DST 'merge,- lnk/secret' (lnk a symlink out of DST): not read, every guess deleted alike (exit %d, %r, %r)"
          % (rc, surv, err))
    rc, err, surv = dst_attack("merge,- direct", setup=lambda d: os.symlink(secret, os.path.join(d, "d", "direct")))
    check(rc == 0 and surv == [], "DST 'merge,- direct' (a symlink to the secret): not read (exit %d, %r)" % (rc, surv))
    # a FIFO named by DST's rule file: never opened for I/O
    fifo = os.path.join(w, "fifo")
    os.mkfifo(fifo)
    opens = inotify_opens(fifo)
    rc, err, surv = dst_attack("merge fifo", setup=lambda d: os.link(fifo, os.path.join(d, "d", "fifo")))
    n = opens()
    check(n == 0 and rc == 0, "DST 'merge fifo': the FIFO never opened (opens %d, exit %d, %r)" % (n, rc, err))
    # SRC's rule files: the same refusal, no existence oracle
    results = []
    for target in (secret, os.path.join(w, "missing")):
        d = fresh("rule-file-security/src")
        write(os.path.join(d, "s", "a"), "a\n")
        write(os.path.join(d, "s", ".rsync-filter"), "merge " + target + "\n")
        rc, out, err = run_as_given("-r", "-F", "s/", "d/", cwd=d)
        results.append((rc, os.path.exists(os.path.join(d, "d", "a"))))
    check(results == [(1, False), (1, False)],
          "SRC 'merge /ABS': refused before any write whether the file exists or not (%r)" % (results,))
    # a merge below the rule file's directory still works
    d = fresh("rule-file-security/below")
    write(os.path.join(d, "s", "a"), "a\n")
    write(os.path.join(d, "d", ".rsync-filter"), "merge,- sub/keep\n")
    write(os.path.join(d, "d", "sub", "keep"), "kept\n")
    write(os.path.join(d, "d", "kept"), "x\n")
    write(os.path.join(d, "d", "gone"), "x\n")
    rc, out, err = run_as_given("-r", "-F", "--delete", "s/", "d/", cwd=d)
    check(rc == 0 and os.path.exists(os.path.join(d, "d", "kept")) and not os.path.exists(os.path.join(d, "d", "gone")),
          "DST 'merge,- sub/keep': read below the rule file's directory, its names kept (exit %d, %r)" % (rc, err))
    # issue 45 item 2: a DST directory exchanged between the read of its rule files and the walk
    test_dst_swap()
    # issue 45 item 3: root reads a file DST's rule files merge only when DST's owner (here uid
    # 65534, who writes them) could: root's 0600 secret in a 0700 priv/ root mirrored into that DST
    # is refused unread, a missing name alike (same exit, same message), the owner's own still works
    if os.geteuid() != 0:
        return
    def owned_dst(line, drop_secret=False, setup=None):
        d = fresh("rule-file-security/owner")
        write(os.path.join(d, "s", "a"), "a\n")
        write(os.path.join(d, "s", "priv", "secret"), "guess-me-42\n", mode=0o600)
        os.chmod(os.path.join(d, "s", "priv"), 0o700)
        os.makedirs(os.path.join(d, "d"))
        os.chown(os.path.join(d, "d"), 65534, 65534)
        rc0, _, err0 = run_as_given("-r", "s/", "d/", cwd=d)  # root mirrors priv/ into nobody's DST
        check(rc0 == 0, "root's first run into uid 65534's DST (exit %d, %r)" % (rc0, err0))
        if drop_secret:
            os.unlink(os.path.join(d, "d", "priv", "secret"))
        rules = os.path.join(d, "d", ".rsync-filter")
        write(rules, line + "\n")
        os.chown(rules, 65534, 65534)
        for g in ("guess-me-42", "wrong-guess"):
            write(os.path.join(d, "d", g), "x\n")
            os.chown(os.path.join(d, "d", g), 65534, 65534)
        if setup:
            setup(d)
        rc, out, err = run_as_given("-r", "-F", "--delete", "s/", "d/", cwd=d)
        survivors = sorted(n for n in ("guess-me-42", "wrong-guess") if os.path.exists(os.path.join(d, "d", n)))
        return rc, err.replace(d, "D"), survivors
    rc1, err1, surv1 = owned_dst("merge,- priv/secret")
    rc2, err2, surv2 = owned_dst("merge,- priv/secret", drop_secret=True)
    check(rc1 == 1 and surv1 == ["guess-me-42", "wrong-guess"] and "refused" in err1 and "guess-me" not in err1,
          "uid 65534's DST 'merge,- priv/secret' (root's 0600 in 0700): refused unread, exit 1, nothing deleted "
          "(exit %d, %r, %r)" % (rc1, surv1, err1))
    check((rc2, err2, surv2) == (rc1, err1, surv1),
          "uid 65534's DST: a missing merge file gives the very outcome of an unreadable one (%r vs %r)"
          % ((rc2, err2, surv2), (rc1, err1, surv1)))
    def mine(d):
        write(os.path.join(d, "d", "mine"), "guess-me-42\n", mode=0o600)
        os.chown(os.path.join(d, "d", "mine"), 65534, 65534)
    rc, err, surv = owned_dst("merge,- mine", setup=mine)
    check(rc == 0 and surv == ["guess-me-42"],
          "uid 65534's DST 'merge,- mine' (its own 0600 file): still merged (exit %d, %r, %r)" % (rc, surv, err))


def test_ignore_times():
    """Issue 46 item 3: rsync's -I / --ignore-times.  A no-op run rewrites every regular file (a new
    inode each, since a rewrite goes through a temporary), listed >f......... as rsync lists it;
    directories and symlinks are not; -c and --size-only win over -I, -u still keeps a newer DST
    file (rsync's order); --no-ignore-times turns it off.  Then the same runs by rsync and by treesync
    on the same trees: the trees and the -i lines must be the same."""
    w = fresh("ignore-times")
    old = 1_500_000_000_000_000_000
    src, dst = os.path.join(w, "s"), os.path.join(w, "d")
    write(os.path.join(src, "a"), "alpha\n", 0o644, old)
    write(os.path.join(src, "sub", "b"), "beta\n", 0o644, old)
    os.symlink("a", os.path.join(src, "l"))
    age(src, old)
    rc, out, err = run_as_given("-a", "-q", src + "/", dst)
    inodes = lambda: {n: os.lstat(os.path.join(dst, n)).st_ino for n in ("a", "sub/b", "l")}
    before = inodes()
    rc, out, err = run_as_given("-a", "-i", src + "/", dst)
    check(rc == 0 and itemized(out) == [] and inodes() == before, "without -I a no-op run writes nothing (%r)" % out)
    for flag in ("-I", "--ignore-times"):
        before = inodes()
        rc, out, err = run_as_given("-a", "-i", flag, src + "/", dst)
        after = inodes()
        check(rc == 0 and itemized(out) == [">f......... a", ">f......... sub/b"] and "2 updated" in out,
              "%s: a no-op run rewrites every file, listed >f......... (directories, symlinks not) (%r)" % (flag, out))
        check(after["a"] != before["a"] and after["sub/b"] != before["sub/b"] and after["l"] == before["l"],
              "%s: each file is written afresh (a new inode), the symlink left alone" % flag)
        check(lstate(dst) == lstate(src), "%s: the tree is still SRC's" % flag)
    rc, out, err = run_as_given("-a", "--json", "-i", "-I", src + "/", dst)
    acts = json.loads(out).get("actions", []) if rc == 0 else []
    check([(a["itemize"], a["path"]) for a in acts] == [(">f.........", "a"), (">f.........", "sub/b")],
          "-I --json: the actions' itemize codes are -i's (%r)" % acts)
    for args in (["-I", "--no-ignore-times"], ["--ignore-times", "--no-I"], ["-I", "-c"], ["-I", "--size-only"],
                 ["--checksum", "-I"]):
        before = inodes()
        rc, out, err = run_as_given("-a", "-i", *args, src + "/", dst)
        check(rc == 0 and itemized(out) == [] and inodes() == before,
              "%s: an unchanged tree is left alone (%d, %r, %r)" % (" ".join(args), rc, out, err))
    # -u -I: a newer DST file is kept (data and all), every other one rewritten
    write(os.path.join(dst, "a"), "newer in DST\n", 0o600, old + 10**9)
    for args in (["-u", "-I"], ["-I", "-u"]):
        rc, out, err = run_as_given("-a", "-i", *args, src + "/", dst)
        check(rc == 0 and itemized(out) == [">f......... sub/b"] and open(os.path.join(dst, "a")).read() == "newer in DST\n"
              and stat.S_IMODE(os.stat(os.path.join(dst, "a")).st_mode) == 0o600,
              "%s: a newer DST file is left alone, the others rewritten (%r, %r)" % (" ".join(args), out, err))
    rc, out, err = run_as_given("-a", "-i", "-u", "-I", "--size-only", src + "/", dst)
    check(rc == 1 and "exclude each other" in err, "-u --size-only is still refused with -I (%r)" % err)
    rc, out, err = run_as_given("--help")
    check(re.search(r"^  -I, --ignore-times +rewrite every file", out, re.M) is not None,
          "--help lists -I, --ignore-times")

    if rsync_tool() is None:
        print("  SKIPPED (the comparison with rsync): no rsync on PATH")
        return

    def case(name, args, dst_setup):
        base = os.path.join(w, name)
        s, d0 = os.path.join(base, "s"), os.path.join(base, "d0")
        write(os.path.join(s, "same"), "same\n", 0o644, old)
        write(os.path.join(s, "perms"), "perms\n", 0o644, old)
        write(os.path.join(s, "time"), "time\n", 0o644, old)
        write(os.path.join(s, "edit"), "edit\n", 0o644, old)
        write(os.path.join(s, "size"), "size\n", 0o644, old)
        write(os.path.join(s, "newer"), "newer\n", 0o644, old)
        write(os.path.join(s, "dir", "f"), "f\n", 0o644, old)
        os.symlink("same", os.path.join(s, "link"))
        os.utime(os.path.join(s, "link"), ns=(old, old), follow_symlinks=False)
        age(s, old)
        subprocess.run(["cp", "-a", s, d0], check=True)
        dst_setup(d0)
        a, b = os.path.join(base, "rsync"), os.path.join(base, "treesync")
        for x in (a, b):
            subprocess.run(["cp", "-a", d0, x], check=True)
        rrc, rout, rerr = run_rsync("-a", "-i", *args, s + "/", a + "/")
        trc, tout, terr = run_as_given("-a", "-i", *args, s + "/", b + "/")
        want, got = lstate(a), lstate(b)
        want["."] = got["."] = None  # the root's mode: cp's, not the runs'
        diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
        check(rrc == trc == 0 and not diff, "%s (%s): the tree is rsync's (exit %d/%d; differing: %s)" % (
            name, " ".join(args), rrc, trc, [(k, want.get(k), got.get(k)) for k in diff[:3]]))
        check(itemized(rout) == itemized(tout), "%s (%s): -i as rsync's\n    rsync:    %s\n    treesync: %s"
              % (name, " ".join(args), itemized(rout), itemized(tout)))

    def changed_dst(d):
        os.chmod(os.path.join(d, "perms"), 0o600)
        os.utime(os.path.join(d, "time"), ns=(old + 5 * 10**9, old + 5 * 10**9))
        write(os.path.join(d, "edit"), "EDIT\n", 0o644, old)  # same size and time, other bytes
        write(os.path.join(d, "size"), "longer\n", 0o644, old)
        write(os.path.join(d, "newer"), "NEWER\n", 0o644, old + 10**9)
        os.utime(os.path.join(d, "dir"), ns=(old, old))
        os.utime(d, ns=(old, old))
    for args in (["-I"], ["-I", "-c"], ["-I", "--size-only"], ["-u", "-I"], ["-I", "--inplace"], ["-I", "-n"]):
        case("same-" + "".join(args).replace("-", ""), args, lambda d: None)
        case("changed-" + "".join(args).replace("-", ""), args, changed_dst)

def test_temp_dir():
    """Issue 46 item 3: rsync's -T DIR / --temp-dir=DIR.  Each changed file is made in DIR and moved
    into place: DIR is written (its opens counted by inotify), empty after, and DST is rsync's.  A
    relative DIR is inside the directory mirrored, never deleted by --delete; a missing DIR is a usage
    error (exit 1, rsync's) before anything is written, -n too; a symlink in DIR's path refuses the run
    (exit 2); --inplace rewrites in place (rsync ignores -T there).  As root, DIR on another
    filesystem (a tmpfs): the files are copied beside their names and renamed, DIR left empty."""
    w = fresh("temp-dir")
    old = 1_500_000_000_000_000_000
    src, dst, tmp = (os.path.join(w, n) for n in ("s", "d", "t"))
    write(os.path.join(src, "a"), "alpha\n", 0o644, old)
    write(os.path.join(src, "sub", "b"), "beta\n", 0o640, old)
    age(src, old)
    os.makedirs(tmp)
    rc, out, err = run_as_given("-a", "-q", src + "/", dst)

    def change():
        write(os.path.join(src, "a"), "alpha two\n", 0o644, old + 10**9)
        write(os.path.join(src, "sub", "b"), "beta two\n", 0o600, old + 2 * 10**9)
    change()
    for flag in (["-T", tmp], ["--temp-dir=" + tmp], ["-T" + tmp]):
        write(os.path.join(dst, "a"), "stale\n", 0o644, old)
        write(os.path.join(dst, "sub", "b"), "stale\n", 0o644, old)
        opens = inotify_opens(tmp)
        rc, out, err = run_as_given("-a", "-i", *flag, src + "/", dst)
        n = opens()
        got = lstate(dst)
        got.pop(".")
        want = lstate(src)
        want.pop(".")
        check(rc == 0 and got == want and len(itemized(out)) == 2,
              "%s: the changed files land, DST is SRC's (exit %d, %r, %r)" % (" ".join(flag), rc, out, err))
        check(n >= 2 and os.listdir(tmp) == [], "%s: each file is made in DIR (%d opens there), DIR empty after (%r)"
              % (" ".join(flag), n, os.listdir(tmp)))
    # without -T, DIR is not written
    write(os.path.join(dst, "a"), "stale\n", 0o644, old)
    opens = inotify_opens(tmp)
    rc, out, err = run_as_given("-a", "-q", src + "/", dst)
    check(rc == 0 and opens() == 0, "without -T nothing is made in DIR")

    # relative: inside the directory mirrored, kept by --delete (not mirrored either)
    os.makedirs(os.path.join(dst, ".tmp"))
    write(os.path.join(dst, ".tmp", "leftover"), "x\n")
    write(os.path.join(dst, "a"), "stale\n", 0o644, old)
    opens = inotify_opens(os.path.join(dst, ".tmp"))
    rc, out, err = run_as_given("-a", "-q", "--delete", "-T", ".tmp", src + "/", dst)
    check(rc == 0 and opens() >= 2 and os.listdir(os.path.join(dst, ".tmp")) == ["leftover"] and
          open(os.path.join(dst, "a")).read() == "alpha two\n",
          "-T .tmp --delete: DIR relative to DST, used, never deleted (exit %d, %r)" % (rc, err))
    shutil.rmtree(os.path.join(dst, ".tmp"))

    # a missing DIR: exit 1 (rsync's "The temp-dir does not exist"), nothing written, -n too
    write(os.path.join(dst, "a"), "stale\n", 0o644, old)
    before = lstate(dst)
    for args in (["-T", os.path.join(w, "nosuch")], ["-T", "nosuch"], ["-n", "-T", "nosuch"]):
        rc, out, err = run_as_given("-a", "-q", *args, src + "/", dst)
        check(rc == 1 and "--temp-dir=" in err and "does not exist" in err and lstate(dst) == before,
              "%s: a missing DIR is refused, exit 1, nothing written (exit %d, %r)" % (" ".join(args), rc, err))
    if rsync_tool():
        p = subprocess.run([rsync_tool(), "-a", "-T", "nosuch", src + "/", dst], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        check(p.returncode == 1 and lstate(dst) == before, "rsync agrees: a missing DIR is exit 1 (%d)" % p.returncode)
    # a symlink in DIR's path (the caller's own): refused before anything is written (exit 2)
    os.symlink(tmp, os.path.join(w, "link"))
    for args in (["-T", os.path.join(w, "link")], ["-T", os.path.join(w, "link") + "/"]):
        rc, out, err = run_as_given("-a", "-q", *args, src + "/", dst)
        check(rc == 2 and "--temp-dir=" in err and "symbolic link" in err and lstate(dst) == before,
              "%s: a symlink in DIR's path is refused, exit 2, nothing written (exit %d, %r)" % (" ".join(args), rc, err))
    # --inplace: the file is rewritten in place (rsync ignores -T there), DIR untouched
    ino = os.lstat(os.path.join(dst, "a")).st_ino
    os.utime(tmp, ns=(old, old))  # a file made in DIR would change its mtime
    rc, out, err = run_as_given("-a", "-q", "--inplace", "-T", tmp, src + "/", dst)
    check(rc == 0 and os.lstat(os.path.join(dst, "a")).st_ino == ino and os.stat(tmp).st_mtime_ns == old and
          open(os.path.join(dst, "a")).read() == "alpha two\n",
          "--inplace -T: rewritten in place, nothing made in DIR (exit %d, %r)" % (rc, err))
    # --temp-dir is listed in --help
    rc, out, err = run_as_given("--help")
    check(re.search(r"^  -T, --temp-dir=DIR +make each changed file's temporary in DIR", out, re.M) is not None,
          "--help lists -T, --temp-dir=DIR")

    # as root: DIR on another filesystem
    if os.geteuid() != 0:
        print("  SKIPPED (DIR on another filesystem): needs root to mount a tmpfs")
        return
    mnt = os.path.join(w, "mnt")
    os.makedirs(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "none", mnt], stderr=subprocess.DEVNULL).returncode != 0:
        print("  SKIPPED (DIR on another filesystem): mount -t tmpfs failed")
        return
    try:
        write(os.path.join(dst, "a"), "stale\n", 0o644, old)
        write(os.path.join(dst, "sub", "b"), "stale\n", 0o644, old)
        opens = inotify_opens(mnt)
        rc, out, err = run_as_given("-a", "-q", "-T", mnt, src + "/", dst)
        n = opens()
        got, want = lstate(dst), lstate(src)
        got.pop(".")
        want.pop(".")
        check(rc == 0 and got == want and os.listdir(mnt) == [] and n >= 3 and
              not [n for n in os.listdir(dst) if n.startswith(".treesync")],
              "-T on another filesystem: copied beside each name and renamed, DIR and DST hold no temporary "
              "(exit %d, %r, %r, %d opens in DIR)" % (rc, err, os.listdir(mnt), n))
    finally:
        subprocess.run(["umount", mnt])


def test_safe_links():
    """--safe-links (rsync's): with -l/-a the links rsync calls unsafe are skipped (counted, listed
    under -v, no notice), DST's entries at their names kept also under --delete; the top of the
    transfer is SRC's parent for SRC without a slash; --copy-unsafe-links and -L win; alone it
    changes nothing (links skipped as without -l)."""
    w = fresh("safe-links")
    src = os.path.join(w, "src")
    write(os.path.join(src, "f"), "f\n")
    write(os.path.join(src, "d", "e", "g"), "g\n")
    write(os.path.join(w, "x"), "outside\n")
    safe = {"to-f": "f", "d/up": "../f", "d/e/root": "../../", "d/e/lead": "..//d/e/g", "d/to-root": ".."}
    unsafe = {"abs": os.path.join(w, "x"), "out": "../x", "d/e/out3": "../../../x", "mid": "d/../f",
              "d/e/ends": "../.."}
    for n, t in list(safe.items()) + list(unsafe.items()):
        os.symlink(t, os.path.join(src, n))
    age(src)
    d = os.path.join(w, "slash")
    rc, out, err = run_as_given("-a", "--safe-links", "-i", src + "/", d)
    check(rc == 0 and all(os.readlink(os.path.join(d, n)) == t for n, t in safe.items()),
          "-a --safe-links keeps the safe links as links, exit 0 (%d, %r)" % (rc, err))
    check(not any(os.path.lexists(os.path.join(d, n)) for n in unsafe),
          "the unsafe ones (absolute, climbing out, '..' after a name, ending in '/..') are not made")
    check("skipping non-regular" not in err and not any(n in l for l in lines(out) for n in unsafe) and
          "5 skipped" in out, "they are counted as skipped, with no notice and no -i line (%r, %r)" % (out, err))
    rc, out, err = run_as_given("-a", "--safe-links", "-v", src + "/", d + "-v")
    check(rc == 0 and all(("skip     " + n) in lines(out) for n in unsafe), "-v lists each as skipped (%r)" % out)
    rc, out, err = run_as_given("--json", "-a", "--safe-links", src + "/", d + "-json")
    doc = json.loads(out)
    check(rc == 0 and sorted(e["path"] for e in doc["skipped"]) == sorted(unsafe),
          "--json: the unsafe links are in 'skipped' (%r)" % doc["skipped"])

    # DST's entries at their names stay, also under --delete; what SRC lacks goes
    k = os.path.join(w, "keep")
    write(os.path.join(k, "abs"), "mine\n")
    os.makedirs(os.path.join(k, "d", "e"))
    os.symlink("/etc", os.path.join(k, "d", "e", "out3"))
    write(os.path.join(k, "extra"), "x\n")
    rc, out, err = run_as_given("-a", "--safe-links", "--delete", "-q", src + "/", k)
    check(rc == 0 and open(os.path.join(k, "abs")).read() == "mine\n" and
          os.readlink(os.path.join(k, "d", "e", "out3")) == "/etc" and not os.path.lexists(os.path.join(k, "extra")),
          "--delete keeps DST's entries where unsafe links are skipped, deletes the rest (%r)" % err)

    # SRC without a slash: judged from SRC's parent (NAME/out -> ../x names DST/x: safe)
    n = os.path.join(w, "noslash")
    rc, out, err = run_as_given("-a", "--safe-links", "-q", src, n)
    check(rc == 0 and os.readlink(os.path.join(n, "src", "out")) == "../x" and
          os.readlink(os.path.join(n, "src", "d", "e", "out3")) == "../../../x" and
          not os.path.lexists(os.path.join(n, "src", "abs")) and not os.path.lexists(os.path.join(n, "src", "mid")),
          "SRC without a slash: a link climbing to SRC's parent is safe, '..' after a name is not (%r)" % err)

    # what wins, what it needs
    rc, out, err = run_as_given("-a", "--safe-links", "--copy-unsafe-links", "-q", src + "/", d + "-u")
    check(open(os.path.join(d + "-u", "out")).read() == "outside\n" and os.path.islink(os.path.join(d + "-u", "to-f")),
          "--copy-unsafe-links wins: unsafe links copied (d/e/ends -> ../.. is a cycle then: %r)" % err)
    rc, out, err = run_as_given("-a", "-L", "--safe-links", "-q", src + "/", d + "-L")
    check(not os.path.islink(os.path.join(d + "-L", "to-f")) and
          open(os.path.join(d + "-L", "out")).read() == "outside\n", "-L wins")
    rc, out, err = run_as_given("-r", "--safe-links", src + "/", d + "-r")
    check(rc == 0 and not any(os.path.lexists(os.path.join(d + "-r", n)) for n in list(safe) + list(unsafe)) and
          'skipping non-regular file "to-f"' in lines(err), "without -l it changes nothing: every link skipped, named (%r)" % err)
    rc, out, err = run_as_given("-a", "--safe-links", "--no-safe-links", "-q", src + "/", d + "-no")
    check(rc == 0 and os.readlink(os.path.join(d + "-no", "out")) == "../x", "--no-safe-links turns it off")

    rsync = rsync_tool()
    if rsync:
        for slash, tag in (("/", "s"), ("", "n")):
            ours, theirs = os.path.join(w, "ours-" + tag), os.path.join(w, "theirs-" + tag)
            for dst in (ours, theirs):
                write(os.path.join(dst, "src" if not slash else "", "abs"), "mine\n")
            rc, out, err = run_as_given("-a", "--safe-links", "--delete", "-q", src + slash, ours)
            p = subprocess.run([rsync, "-a", "--safe-links", "--delete", "-q", src + slash, theirs],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            # mtimes left out: the DST files were written apart, and links' own mtimes are another matter
            a, b = [{k: v[:2] + v[3:] for k, v in lstate(t).items() if k not in (".", "src")} for t in (ours, theirs)]
            check(rc == p.returncode == 0 and a == b,
                  "rsync -a --safe-links --delete SRC%s makes the same tree (%s)" % (
                      slash, sorted(set(a.items()) ^ set(b.items()))))


GROUPS = {
    "rule_file_security": test_rule_file_security,
    "rsync_diff_fixes": test_rsync_diff_fixes,
    "links_rule_files": test_links_and_rule_files,
    "io_error": test_io_error_deletions,
    "help": test_help_version,
    "usage": test_usage_errors,
    "itemize": test_itemize,
    "json": test_json,
    "exit_codes": test_exit_codes,
    "forged_lines": test_forged_lines,
    "exclude_from": test_exclude_from,
    "options": test_options,
    "archive_options": test_archive_options,
    "filter_rsync": test_filter_rsync,
    "filter_options": test_filter_options,
    "rsync_habits": test_rsync_habits,
    "recipes": test_recipes,
    "progress_tty": test_progress_tty,
    "progress_pipe": test_progress_pipe,
    "progress_quiet": test_progress_quiet,
    "dry_run": test_dry_run,
    "interrupt": test_interrupt,
    "interrupt_keeps": test_interrupt_keeps,
    "interrupt_json": test_interrupt_json,
    "interrupt_twice": test_interrupt_twice,
    "sigterm": test_sigterm,
    "output_order": test_output_order,
    "output_order_errors": test_output_order_errors,
    "settled": test_settled,
    "refusal_messages": test_refusal_messages,
    "error_sides": test_error_sides,
    "state": test_state,
    "state_memory": test_state_memory,
    "json_usage": test_json_usage,
    "json_utf8": test_json_utf8,
    "rsync_semantics": test_rsync_semantics,
    "copy_back_rsync": test_copy_back_rsync,
    "untrusted_links": test_untrusted_links,
    "ignore_times": test_ignore_times,
    "safe_links": test_safe_links,
    "temp_dir": test_temp_dir,
}


def run_example(args):
    work = os.path.abspath(args.work)
    p = subprocess.run([os.path.abspath(args.example), work], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300)
    out = p.stdout.decode("utf-8", "replace")
    print(out + p.stderr.decode("utf-8", "replace"))
    name = os.path.basename(args.example)
    check(p.returncode == 0, "%s exits 0 (got %d)" % (name, p.returncode))
    for rx in args.expect:
        check(re.search(rx, out, re.M) is not None, "the output matches %r" % rx)
    for rx in args.reject:
        check(re.search(rx, out, re.M) is None, "the output does not match %r" % rx)
    check(not os.path.exists(work), "%s removed its scratch directory" % name)
    return 1 if FAILURES else 0


def main():
    global CLI, WORK
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli")
    ap.add_argument("--work", required=True)
    ap.add_argument("--example")
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--reject", action="append", default=[])
    ap.add_argument("groups", nargs="*")
    args = ap.parse_args()
    if args.example:
        return run_example(args)
    if not args.cli:
        ap.error("--cli or --example is required")
    CLI = os.path.abspath(args.cli)
    names = args.groups or list(GROUPS)
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        print("unknown group(s): %s (known: %s)" % (", ".join(unknown), ", ".join(GROUPS)))
        return 2
    for name in names:
        WORK = os.path.join(os.path.abspath(args.work), name)
        if os.path.lexists(WORK):
            make_writable(WORK)
            shutil.rmtree(WORK)
        os.makedirs(WORK)
        print("== " + name)
        try:
            GROUPS[name]()
        except Exception:  # a group that crashes is a failure of its own; the others still run
            import traceback
            traceback.print_exc(file=sys.stdout)
            FAILURES.append("group %s crashed: %s" % (name, traceback.format_exc().strip().split("\n")[-1]))
    if FAILURES:
        print("\n%d check(s) failed:" % len(FAILURES))
        for f in FAILURES:
            print("  " + f)
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
