#!/usr/bin/env python3
"""The differential test (rsync_diff_test.py) as a user other than root (issue 32, item 2).

    python3 rsync_diff_nonroot.py --cli PATH/TO/treesync --work DIR [--cases N] [--seed S] [--uid 65534]
    python3 rsync_diff_nonroot.py --cli PATH/TO/treesync --work DIR --cli-test GROUP...

With --cli-test, examples/cli_test.py's GROUPs run the same way instead (the CLI suite's non-root pass).

As root: makes DIR/nonroot owned by the user (uid and gid --uid), copies the CLI and the test there
(a build tree need not be readable by that user), makes DIR/nonroot/foreign: root-owned files of
groups the user is not in, mode 0666 (the test hard-links them into SRC: files of a foreign group),
and runs the test under `setpriv --reuid=U --regid=U --clear-groups`.  Not as root: runs the test
as the current user, without the foreign files.  Exit status: the test's (77: skipped).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

DEFAULT_SEED = 99120  # the seed of issue 32's report
DEFAULT_CASES = 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cases", type=int, default=DEFAULT_CASES)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--uid", type=int, default=65534)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--cli-test", nargs="+", default=None, metavar="GROUP")
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    test = os.path.join(here, "cli_test.py" if a.cli_test else "rsync_diff_test.py")
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    extra = ["--seed", str(a.seed), "--cases", str(a.cases)] + (["--jobs", str(a.jobs)] if a.jobs else [])
    if a.cli_test:
        extra = a.cli_test
    if os.geteuid() != 0:
        print("rsync_diff_nonroot: not root: the test runs as uid %d itself" % os.geteuid())
        sys.stdout.flush()
        return subprocess.call([python, test, "--cli", a.cli, "--work", a.work] + extra)
    setpriv = shutil.which("setpriv")
    if not setpriv:
        print("rsync_diff_nonroot: no setpriv (util-linux) to drop to uid %d: skipped" % a.uid)
        return 77
    base = os.path.join(os.path.abspath(a.work), "nonroot")
    if os.path.lexists(base):
        subprocess.call(["rm", "-rf", base])  # as root: whatever modes a kept case left
    os.makedirs(base)
    # the path down to it must be traversable by the user; else a directory of /tmp
    p = os.path.dirname(base)
    while p != "/":
        if not os.stat(p).st_mode & 0o001:
            os.rmdir(base)
            base = tempfile.mkdtemp(prefix="treesync-nonroot-")
            print("rsync_diff_nonroot: %s cannot be entered by uid %d: working in %s" % (p, a.uid, base))
            break
        p = os.path.dirname(p)
    os.chown(base, a.uid, a.uid)
    os.chmod(base, 0o755)
    cli = os.path.join(base, "treesync")
    shutil.copy2(a.cli, cli)
    script = os.path.join(base, os.path.basename(test))
    shutil.copy2(test, script)
    for f in (cli, script):
        os.chown(f, a.uid, a.uid)
    foreign = os.path.join(base, "foreign")
    os.mkdir(foreign)
    os.chmod(foreign, 0o755)
    for k, (uid, gid) in enumerate([(0, 0), (0, 0), (1234, 1234), (0, 4321)]):
        f = os.path.join(foreign, "f%d" % k)
        with open(f, "wb") as out:
            out.write(b"foreign %d\n" % k)
        os.chown(f, uid, gid)
        os.chmod(f, 0o666)
        os.utime(f, ns=(1600000000 * 10**9, 1600000000 * 10**9))
    work = os.path.join(base, "w")
    os.mkdir(work)
    os.chown(work, a.uid, a.uid)
    cmd = [setpriv, "--reuid=%d" % a.uid, "--regid=%d" % a.uid, "--clear-groups", python, script,
           "--cli", cli, "--work", work] + ([] if a.cli_test else ["--foreign", foreign]) + extra
    print("rsync_diff_nonroot: " + " ".join(cmd))
    sys.stdout.flush()
    rc = subprocess.call(cmd, cwd=base)
    if rc == 0:
        subprocess.call(["rm", "-rf", base])
    return rc


if __name__ == "__main__":
    sys.exit(main())
