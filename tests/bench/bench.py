#!/usr/bin/env python3
"""treesync benchmark driver: datasets, scenarios, peers, timing, verification.

Called by tests/bench/run.sh once per filesystem (run.sh builds the programs and mounts the
filesystems); writes raw figures into OUT/ (runs.csv, syscalls.csv, datasets.csv, verify.log).
report.py turns them into results.json, results.md and results.svg.

    bench.py --root DIR [--view DIR] [--src-root DIR] --fs NAME --bin DIR --out OUT
             [--datasets usr_include,synth,mem] [--scenarios cold,noop,touch,modify,churn]
             [--runs 5] [--jobs 16] [--strace] [--verify first|all|none]
             [--settle] [--sftp-log FILE] [--mtime-resolution-ns N]

--root is where the trees live (written directly for preparation, untimed); --view is the same
directory as the measured programs see it (a FUSE or sshfs mount of --root), by default --root
itself. --src-root puts the sources elsewhere, seen directly (local -> sshfs: the source on a
local disk, the destinations on the mount); by default they live beside the destinations.
--settle: treesync's warm no-op is timed after one untimed run of the same program on the same
state (the "settling run" a filesystem without ctime may need). --sftp-log: the sshfs fixture's
sftp-server log; the warm no-op's SFTP requests are counted there (syscalls.csv).
--mtime-resolution-ns: what the destination keeps of an mtime (sshfs: 1000000000), for the check
of each destination against its source.

Only the Python standard library is used.
"""

import argparse
import contextlib
import csv
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

SCENARIOS = ["cold", "noop", "touch", "modify", "churn"]
SCENARIO_TITLES = {
    "cold": "cold",
    "noop": "warm no-op",
    "touch": "touch 1%",
    "modify": "modify 1%",
    "churn": "churn",
}
RUN_TIMEOUT = 1800  # seconds; a run that takes longer is killed and recorded as failed
BASE_MTIME = 1717243200  # 2024-06-01 12:00:00 UTC: generated trees are old, never "racily clean"


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- peers -------------------------------------------------------------------------------------
class Tool:
    """One measured program. `argv(src, dst)` is its command line; `links` says what the
    destination should look like ('follow': source symlinks dereferenced, 'keep': copied as
    symlinks); `scenarios` which runs it takes part in."""

    def __init__(self, ident, name, argv, links, scenarios, dir_mtime=True, writes=True, state=None):
        self.ident = ident  # for --tools
        self.name = name
        self.argv = argv
        self.links = links
        self.scenarios = scenarios
        self.dir_mtime = dir_mtime  # sets directory mtimes (checked by verify)
        self.writes = writes        # stat_walk only reads
        # treesync --state=FILE --verify=LEVEL: (state file, level). Such a tool brings its own
        # destination back itself (verify=full, so its state file stays true) and always reads the
        # source from one path (the state file is bound to it): see Bench.dataset
        self.state = state

    @property
    def settles(self):
        """Needs a settling run before a warm no-op (--settle): treesync marks racy copies on a
        destination without ctime and settles them on its next run; the peers keep no such marks
        (rsync's own steady state is the restore, an rsync run)."""
        return self.ident.startswith("treesync")

    @property
    def slug(self):
        return "".join(c if c.isalnum() else "_" for c in self.name)


def make_tools(bindir, jobs, has_jobs, rsync_extra=(), state_dir=None):
    cli = os.path.join(bindir, "treesync")
    walk = os.path.join(bindir, "stat_walk")
    mirror = os.path.join(bindir, "fs_mirror")
    everything = set(SCENARIOS)
    warm = everything - {"cold"}
    # serial: the library's default; the CLI may default to some workers, so ask for one.  -L: the
    # library's default (follow links), which the CLI, like rsync, has only when asked
    serial = ["--jobs", "1"] if has_jobs else []
    tools = [Tool("treesync", "treesync", lambda s, d: [cli, "-L", "--delete"] + serial + [s + "/", d], "follow",
                  everything)]
    if has_jobs:
        tools.append(Tool("treesync-j", f"treesync -j{jobs}", lambda s, d: [cli, "-L", "--delete", "--jobs", str(jobs), s + "/", d],
                          "follow", everything))
        # the state file (--state) at each verify level, -j like treesync-j; the files live on the
        # local disk (state_dir), whatever the destination is
        for level in ("full", "dirs", "none"):
            state = (os.path.join(state_dir or "/tmp", f"treesync-{level}.state"), level)

            def argv(s, d, state=state):
                return [cli, "-L", "--delete", "--jobs", str(jobs), f"--state={state[0]}", f"--verify={state[1]}", s + "/", d]
            tools.append(Tool(f"treesync-{level}", f"treesync -j{jobs} --state --verify={level}", argv,
                              "follow", everything, state=state))
    tools += [
        Tool("rsync", "rsync -a", lambda s, d: ["rsync", "-a", "--delete", *rsync_extra, s + "/", d + "/"], "keep",
             everything),
        Tool("rsyncL", "rsync -aL", lambda s, d: ["rsync", "-aL", "--delete", *rsync_extra, s + "/", d + "/"],
             "follow", everything),
        Tool("cp", "cp -a", lambda s, d: ["cp", "-a", s, d], "keep", {"cold"}),
        Tool("tar", "tar | tar", lambda s, d: [
            "sh", "-c", 'mkdir "$2" && cd "$1" && tar --format=posix -cf - . | (cd "$2" && tar -xf -)',
            "tar_pipe", s, d], "keep", {"cold"}),
        Tool("fs_mirror", "fs_mirror", lambda s, d: [mirror, s, d], "follow", everything, dir_mtime=False),
        Tool("walk", "stat walk", lambda s, d: [walk, s, d], "follow", warm, writes=False),
        Tool("walk-j", f"stat walk -j{jobs}", lambda s, d: [walk, "-j", str(jobs), s, d], "follow", warm,
             writes=False),
    ]
    return tools


REFERENCE = "rsync -a"  # ratios are taken against `rsync -a --delete`, run by run


# ---- running one measured command --------------------------------------------------------------
def resolve(argv0):
    found = shutil.which(argv0)
    if not found:
        raise SystemExit(f"bench: {argv0} not found")
    return found


def timed(argv, errlog, bindir, sample_ms=0):
    """Runs argv under the timeit wrapper (timeit.c), stdout to /dev/null, stderr appended to
    errlog. Returns (wall s, user s, sys s, peak RSS KiB of the largest process, exit status,
    peak PSS KiB of the whole process tree sampled every sample_ms, or 0)."""
    result = os.path.join(os.path.dirname(errlog), "timeit.out")
    sampling = ["-m", str(sample_ms)] if sample_ms else []
    argv = [os.path.join(bindir, "timeit")] + sampling + [result, resolve(argv[0])] + argv[1:]
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, errlog, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
    ]
    if os.path.exists(result):
        os.unlink(result)
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
    killer = threading.Timer(RUN_TIMEOUT, lambda: os.kill(pid, signal.SIGKILL))
    killer.start()
    _, status, _ = os.wait4(pid, 0)
    killer.cancel()
    try:
        with open(result) as f:
            wall, user, sys_, rss, code, pss = f.read().split()
        return float(wall), float(user), float(sys_), int(rss), int(code), int(pss)
    except (OSError, ValueError):
        return float("nan"), float("nan"), float("nan"), 0, os.waitstatus_to_exitcode(status) or 125, 0


# System calls that change a filesystem (or write a pipe: rsync's processes talk through pipes,
# so its figures include that traffic), and those that read file data (or a pipe).
WRITE_CALLS = {
    "write", "pwrite64", "writev", "pwritev", "pwritev2", "utimensat", "futimesat", "utimes", "utime",
    "fchmod", "fchmodat", "fchmodat2", "chmod", "fchown", "fchownat", "lchown", "chown", "rename",
    "renameat", "renameat2", "unlink", "unlinkat", "rmdir", "mkdir", "mkdirat", "symlink", "symlinkat",
    "link", "linkat", "mknod", "mknodat", "copy_file_range", "sendfile", "splice", "ftruncate",
    "truncate", "fallocate", "fsync", "fdatasync", "sync_file_range", "setxattr", "lsetxattr",
    "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
}
READ_CALLS = {"read", "pread64", "readv", "preadv", "preadv2"}


def strace_count(argv, outfile):
    """System calls of argv and its children (`strace -f -c`): (total, failed, write-type, read)."""
    subprocess.run(["strace", "-f", "-c", "-o", outfile] + argv, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    calls = errors = None
    writes = reads = 0
    with open(outfile) as f:
        for line in f:
            parts = line.split()
            # % time, seconds, usecs/call, calls, [errors], syscall
            if len(parts) < 5 or not parts[3].isdigit():
                continue
            if parts[-1] == "total":
                calls = int(parts[3])
                errors = int(parts[4]) if len(parts) > 5 else 0
            elif parts[-1] in WRITE_CALLS:
                writes += int(parts[3])
            elif parts[-1] in READ_CALLS:
                reads += int(parts[3])
    return calls, errors, writes, reads


# ---- SFTP requests, as the sshfs fixture's sftp-server logs them (-l DEBUG1) -------------------
SFTP_WRITES = ("write \"", "set \"", "rename old ", "posix-rename old ", "remove name ", "mkdir name ",
               "rmdir name ", "symlink old ", "hardlink old ", "fsync \"")


def count_sftp(lines):
    """Requests in sftp-server log lines, by kind: requests (one per reply: "sent status ..." or
    "request N: sent ..."), write-type (open for writing, write, set, rename, remove, mkdir, rmdir,
    symlink, hardlink, fsync: what tests/test_sshfs.cpp counts), read (file data), open for
    read, stat (lstat, stat, fstat) and readdir (opendir, readdir) requests."""
    c = {"requests": 0, "writes": 0, "reads": 0, "read_opens": 0, "stats": 0, "readdirs": 0}
    for line in lines:
        msg = line
        if msg.startswith("debug1: request "):
            msg = msg[msg.find(": ", 16) + 2:]
        if msg.startswith("sent "):
            c["requests"] += 1
        elif msg.startswith("open \""):
            flags = msg[msg.find(" flags "):] if " flags " in msg else ""
            if any(f in flags for f in ("WRITE", "CREATE", "TRUNCATE", "APPEND")):
                c["writes"] += 1
            else:
                c["read_opens"] += 1
        elif msg.startswith(SFTP_WRITES):
            c["writes"] += 1
        elif msg.startswith("read \""):
            c["reads"] += 1
        elif msg.startswith(("lstat name ", "stat name ", "fstat \"")):
            c["stats"] += 1
        elif msg.startswith(("opendir \"", "readdir \"")):
            c["readdirs"] += 1
    return c


class SftpLog:
    """The sftp-server's request log (append-only, one connection: requests logged in order)."""

    def __init__(self, path, view_root):
        self.path = path
        self.view_root = view_root
        self.serial = 0

    def clear(self):
        os.truncate(self.path, 0)  # the server appends (O_APPEND): it goes on at the new end

    def settle(self, timeout=60):
        """Lines logged since clear(), up to a lookup made now: the server logs a request before
        it answers, in order, so everything the measured program sent is in by then."""
        self.serial += 1
        marker = f".bench-marker-{os.getpid()}-{self.serial}"
        try:
            os.lstat(os.path.join(self.view_root, marker))
        except FileNotFoundError:
            pass
        deadline = time.monotonic() + timeout
        while True:
            with open(self.path, errors="replace") as f:
                lines = f.read().splitlines()
            for i, line in enumerate(lines):
                if marker in line:
                    return lines[:i]
            if time.monotonic() > deadline:
                log(f"  !! the sftp-server log never showed the lookup of {marker}")
                return lines
            time.sleep(0.05)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(cmd, **kw):
    subprocess.run(cmd, check=True, **kw)


def rm_rf(path):
    if os.path.lexists(path):
        run(["rm", "-rf", "--one-file-system", path])


# ---- datasets ----------------------------------------------------------------------------------
class Rng(random.Random):
    def __init__(self, *key):
        super().__init__("/".join(str(k) for k in key))


def data_pool(rng, size=1 << 20):
    return rng.randbytes(size)


def write_file(path, data, mode, mtime_ns):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    finally:
        os.close(fd)
    os.chmod(path, mode)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def make_usr_include(base):
    """A copy of /usr/include; symlinks that leave the tree (into /usr/lib, /etc/alternatives)
    are replaced by copies of what they point to, so the copy is self-contained like a build
    tree and has no dangling links. Links inside the tree stay links."""
    run(["cp", "-a", "/usr/include", base])
    for _ in range(4):
        escaping = []
        for dirpath, dirnames, filenames in os.walk(base):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                if os.path.islink(p):
                    target = os.path.realpath(p)
                    if not (target + "/").startswith(os.path.realpath(base) + "/"):
                        rel = os.path.relpath(p, base)
                        escaping.append((p, os.path.realpath(os.path.join("/usr/include", rel))))
        if not escaping:
            return
        for p, real in escaping:
            os.unlink(p)
            if os.path.exists(real):
                run(["cp", "-a", real, p])


def make_synth(base, seed="synth"):
    """A build-output tree: ~40,000 small files (objects, headers, Python modules) in ~2,000
    directories, three 200 MB libraries, ~300 file symlinks and 4 directory symlinks."""
    rng = Rng(seed)
    pool = data_pool(rng)
    kinds = [(".o", 0o644), (".h", 0o644), (".py", 0o644), (".pyc", 0o644), (".so", 0o755),
             (".json", 0o644), ("", 0o755)]
    os.makedirs(base)
    files = []
    leaf_dirs = []
    for c in range(16):
        comp = os.path.join(base, f"component{c:02d}")
        for m in range(8):
            mid = os.path.join(comp, ["lib", "include", "bin", "python", "share", "obj", "gen", "test"][m])
            for leaf in range(15):
                d = os.path.join(mid, f"pkg{leaf:02d}")
                os.makedirs(d)
                leaf_dirs.append(d)
                for i in range(rng.randint(8, 33)):
                    ext, mode = kinds[rng.randrange(len(kinds))]
                    size = min(int(rng.lognormvariate(7.3, 1.2)), 256 * 1024)
                    off = rng.randrange(len(pool))
                    data = (pool[off:] + pool[:off])[:size] if size else b""
                    p = os.path.join(d, f"f{i:03d}{ext}")
                    write_file(p, data, mode, BASE_MTIME * 10**9 + rng.randrange(10**9) +
                               rng.randrange(86400) * 10**9)
                    files.append(p)
    big_dir = os.path.join(base, "component00", "lib")
    for b in range(3):
        p = os.path.join(big_dir, f"libhuge{b}.so")
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755)
        for chunk in range(200):
            off = (chunk * 7919 + b * 104729) % len(pool)
            os.write(fd, pool[off:] + pool[:off])
        os.close(fd)
        os.utime(p, ns=(BASE_MTIME * 10**9 + 123456789, BASE_MTIME * 10**9 + 123456789))
    for i in range(300):
        d = leaf_dirs[rng.randrange(len(leaf_dirs))]
        target = files[rng.randrange(len(files))]
        os.symlink(os.path.relpath(target, d), os.path.join(d, f"link{i:03d}"))
    for i in range(4):  # lib64 -> lib style: a directory link to a sibling
        comp = os.path.join(base, f"component{i * 4:02d}")
        os.symlink("lib/pkg00", os.path.join(comp, "lib64"))
    set_dir_mtimes(base, BASE_MTIME * 10**9 + 5 * 10**8)


def make_mem(base, seed="mem"):
    """200,000 small files (0-64 bytes) in 100 x 100 directories: the memory test."""
    rng = Rng(seed)
    pool = data_pool(rng, 4096)
    os.makedirs(base)
    for a in range(100):
        for b in range(100):
            d = os.path.join(base, f"d{a:02d}", f"e{b:02d}")
            os.makedirs(d)
            for i in range(20):
                size = rng.randrange(65)
                fd = os.open(os.path.join(d, f"file{i:02d}.dat"), os.O_WRONLY | os.O_CREAT, 0o644)
                if size:
                    os.write(fd, pool[i * 64:i * 64 + size])
                os.utime(fd, ns=(BASE_MTIME * 10**9, BASE_MTIME * 10**9 + i))
                os.close(fd)
    set_dir_mtimes(base, BASE_MTIME * 10**9)


def set_dir_mtimes(base, mtime_ns):
    for dirpath, _, _ in os.walk(base, topdown=False):
        os.utime(dirpath, ns=(mtime_ns, mtime_ns), follow_symlinks=False)


DATASETS = {"usr_include": make_usr_include, "synth": make_synth, "mem": make_mem}
# the memory tree is there for peak RSS: a cold and a warm run are enough
DATASET_SCENARIOS = {"mem": {"cold", "noop"}}


def tree_stats(base):
    files = dirs = links = 0
    size = 0
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISLNK(st.st_mode):
                links += 1
            elif stat.S_ISDIR(st.st_mode):
                dirs += 1
            else:
                files += 1
                size += st.st_size
    return files, dirs, links, size


# ---- scenarios: a source that differs from the base by a known, deterministic change -----------
def list_regular_files(base, max_size=16 << 20):
    out = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and st.st_size <= max_size:
                out.append(p)
    return out


def own_copy(path):
    """The variant shares inodes with the base (cp -al): give `path` an inode of its own,
    keeping bytes, mode and mtime, and its directory's mtime."""
    st = os.lstat(path)
    parent = os.path.dirname(path)
    pst = os.lstat(parent)
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    write_file(path, data, stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    os.utime(parent, ns=(pst.st_atime_ns, pst.st_mtime_ns))
    return data, st


def link_targets(base):
    """Real paths of everything a symlink in base points to (churn must not make links dangle)."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                out.add(os.path.realpath(p))
    return out


def make_variant(base, variant, scenario, dataset):
    """variant = base + the scenario's change. Returns a one-line description."""
    rng = Rng(dataset, scenario)
    run(["cp", "-al", base, variant])
    targets = link_targets(variant)
    files = [f for f in list_regular_files(variant) if os.path.realpath(f) not in targets]
    k = max(1, len(files) // 100)
    if scenario == "touch":  # mtime only
        for p in rng.sample(files, k):
            _, st = own_copy(p)
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_007))
        return f"{k} files touched (mtime + 1 s)"
    if scenario == "modify":
        for i, p in enumerate(rng.sample(files, k)):
            modify(p, grow=(i % 2 == 1))
        return f"{k} files modified (half same size, half +16 bytes)"
    if scenario == "churn":
        picked = rng.sample(files, 3 * k + 4)
        deleted, modified = picked[:k], picked[k:2 * k]
        to_links, to_dirs = picked[2 * k:2 * k + 2], picked[2 * k + 2:2 * k + 4]
        for p in deleted:
            os.unlink(p)
        for i, p in enumerate(modified):
            modify(p, grow=(i % 2 == 1))
        dirs = sorted({os.path.dirname(p) for p in files})
        for i in range(k):
            d = dirs[rng.randrange(len(dirs))]
            write_file(os.path.join(d, f"added{i:05d}.new"), rng.randbytes(rng.randrange(1, 8192)),
                       0o644, BASE_MTIME * 10**9 + 7 * 10**9 + i)
        # type swaps: 2 files become directories, 2 directories become files, 2 files become links
        for p in to_dirs:
            os.unlink(p)
            os.mkdir(p)
            write_file(os.path.join(p, "inside"), b"was a file\n", 0o644, BASE_MTIME * 10**9)
        small_dirs = []
        for dirpath, dirnames, filenames in os.walk(variant):
            if dirnames or not 0 < len(filenames) <= 40 or dirpath == variant or dirpath in to_dirs:
                continue
            real = os.path.realpath(dirpath)
            if any(os.path.islink(os.path.join(dirpath, n)) for n in filenames):
                continue
            if any(t == real or t.startswith(real + "/") for t in targets):
                continue
            small_dirs.append(dirpath)
        small_dirs.sort()
        gone = rng.sample(small_dirs, min(2, len(small_dirs)))
        for d in gone:
            shutil.rmtree(d)
            write_file(d, b"was a directory\n", 0o644, BASE_MTIME * 10**9)
        picked_set = set(picked)
        others = [f for f in files if f not in picked_set
                  and not any(f.startswith(g + "/") for g in gone)]
        to_links = [p for p in to_links if os.path.exists(p)]
        for p in to_links:
            os.unlink(p)
            os.symlink(os.path.relpath(rng.choice(others), os.path.dirname(p)), p)
        return (f"{k} deleted, {k} added, {k} modified, {len(to_dirs)} file->dir, "
                f"{len(gone)} dir->file, {len(to_links)} file->symlink")
    raise ValueError(scenario)


def modify(p, grow):
    data, st = own_copy(p)
    parent = os.path.dirname(p)
    pst = os.lstat(parent)
    b = bytearray(data)
    mid = len(b) // 2
    for i in range(mid, min(mid + 16, len(b))):
        b[i] ^= 0x5A
    if grow or not b:
        b += b"/* modified */\n\0"
    write_file(p, bytes(b), stat.S_IMODE(st.st_mode), st.st_mtime_ns + 2_500_000_000)
    os.utime(parent, ns=(pst.st_atime_ns, pst.st_mtime_ns))


# ---- verification: did the peer produce a faithful mirror? --------------------------------------
def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x = fa.read(1 << 20)
            y = fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def verify(src, dst, links, dir_mtime, limit=20, resolution_ns=1):
    """Differences between the mirror dst and the source src (with source symlinks followed or
    kept, per `links`): names, types, bytes, sizes, permission bits, mtimes (ns, or at the
    destination's resolution: sshfs keeps whole seconds)."""
    problems = []

    def same_time(a, b):
        return a == b if resolution_ns <= 1 else a // resolution_ns == b // resolution_ns

    def note(rel, what):
        if len(problems) < limit:
            problems.append(f"{rel or '.'}: {what}")

    def entries(d, follow):
        out = {}
        with os.scandir(d) as it:
            for e in it:
                try:
                    st = os.stat(e.path) if (follow and e.is_symlink()) else os.lstat(e.path)
                except FileNotFoundError:
                    continue  # dangling link: nobody copies it
                out[e.name] = st
        return out

    def walk(rel, s_dir, d_dir, depth):
        if depth > 64:
            note(rel, "too deep (symlink loop?)")
            return
        s = entries(s_dir, links == "follow")
        d = entries(d_dir, False)
        for name in sorted(set(d) - set(s)):
            note(os.path.join(rel, name), "extraneous in destination")
        for name in sorted(s):
            r = os.path.join(rel, name)
            if name not in d:
                note(r, "missing in destination")
                continue
            ss, ds = s[name], d[name]
            sp, dp = os.path.join(s_dir, name), os.path.join(d_dir, name)
            if stat.S_IFMT(ss.st_mode) != stat.S_IFMT(ds.st_mode):
                note(r, f"type {stat.S_IFMT(ss.st_mode):o} vs {stat.S_IFMT(ds.st_mode):o}")
                continue
            if stat.S_ISLNK(ss.st_mode):
                if os.readlink(sp) != os.readlink(dp):
                    note(r, "symlink target differs")
                continue
            if stat.S_IMODE(ss.st_mode) != stat.S_IMODE(ds.st_mode):
                note(r, f"mode {stat.S_IMODE(ss.st_mode):o} vs {stat.S_IMODE(ds.st_mode):o}")
            if stat.S_ISDIR(ss.st_mode):
                walk(r, sp, dp, depth + 1)
                if dir_mtime and not same_time(ss.st_mtime_ns, ds.st_mtime_ns):
                    note(r + "/", f"directory mtime {ss.st_mtime_ns} vs {ds.st_mtime_ns}")
            elif stat.S_ISREG(ss.st_mode):
                if ss.st_size != ds.st_size:
                    note(r, f"size {ss.st_size} vs {ds.st_size}")
                elif not same_bytes(sp, dp):
                    note(r, "content differs")
                if not same_time(ss.st_mtime_ns, ds.st_mtime_ns):
                    note(r, f"mtime {ss.st_mtime_ns} vs {ds.st_mtime_ns}")

    walk("", src, dst, 0)
    return problems


# ---- the benchmark -----------------------------------------------------------------------------
class Bench:
    def __init__(self, args):
        self.args = args
        self.root = os.path.abspath(args.root)
        self.view_root = os.path.abspath(args.view or args.root)
        self.src_root = os.path.abspath(args.src_root) if args.src_root else None
        self.sftp = SftpLog(args.sftp_log, self.view_root) if args.sftp_log else None
        os.makedirs(args.out, exist_ok=True)
        self.out = os.path.abspath(args.out)
        help_text = subprocess.run([os.path.join(args.bin, "treesync"), "--help"],
                                   capture_output=True, text=True).stdout
        self.has_jobs = "--jobs" in help_text
        # sshfs sets a symlink's times through the link (SFTPv3 has no lutimes): rsync -a fails
        # (exit 23) on every link made before its target unless told to leave link times alone
        self.tools = make_tools(args.bin, args.jobs, self.has_jobs,
                                ["--omit-link-times"] if args.rsync_omit_link_times else [],
                                state_dir=self.out)
        if "--state" not in help_text:  # an older CLI: no state-file tools
            self.tools = [t for t in self.tools if not t.state]
        if args.tools:
            wanted = set(args.tools.split(","))
            unknown = wanted - {t.ident for t in self.tools} - {"treesync-j", "treesync-full", "treesync-dirs",
                                                                   "treesync-none"}
            if unknown:
                raise SystemExit(f"bench: unknown tools {sorted(unknown)} "
                                 f"(known: {', '.join(t.ident for t in self.tools)})")
            self.tools = [t for t in self.tools if t.ident in wanted or t.name == REFERENCE]
        self.errlog = os.path.join(self.out, "stderr.log")
        self.runs_csv = self._csv("runs.csv", ["fs", "dataset", "scenario", "tool", "run", "wall_s",
                                                "user_s", "sys_s", "maxrss_kib", "exit", "peak_pss_kib"])
        self.sys_csv = self._csv("syscalls.csv", ["fs", "dataset", "scenario", "tool", "calls", "errors",
                                                   "write_calls", "read_calls", "sftp_requests", "sftp_writes",
                                                   "sftp_reads", "sftp_read_opens", "sftp_stats",
                                                   "sftp_readdirs"])
        self.ds_csv = self._csv("datasets.csv", ["fs", "dataset", "files", "dirs", "symlinks", "bytes",
                                                  "variants", "runs", "loadavg_start", "loadavg_end",
                                                  "started", "elapsed_s"])
        log(f"fs={args.fs} root={self.root} view={self.view_root} "
            f"{'src=' + self.src_root + ' ' if self.src_root else ''}treesync --jobs: "
            f"{'yes' if self.has_jobs else 'no (serial only)'}")

    def _csv(self, name, header):
        path = os.path.join(self.out, name)
        new = not os.path.exists(path)
        f = open(path, "a", newline="")
        w = csv.writer(f)
        if new:
            w.writerow(header)
            f.flush()
        return (f, w)

    @staticmethod
    def _row(target, row):
        f, w = target
        w.writerow(row)
        f.flush()

    def view(self, path):
        """The path the measured programs use: trees under --root through --view; sources under
        --src-root as they are."""
        if path == self.root or path.startswith(self.root + "/"):
            return self.view_root + path[len(self.root):]
        return path

    def restore(self, tool, base, dst):
        """Brings dst to the state `tool` leaves after mirroring base (untimed): rsync with the
        tool's symlink semantics; only what a previous run changed is rewritten. A state-file tool
        restores with its own run at verify=full, which reads the whole destination and leaves its
        state file describing it (an rsync behind its back would make the file lie)."""
        if tool.state:
            argv = [a for a in tool.argv(self.view(base), self.view(dst)) if not a.startswith("--verify=")]
            run(argv[:1] + ["-q"] + argv[1:])
            return
        flags = "-aL" if tool.links == "follow" else "-a"
        run(["rsync", flags, "--delete", base + "/", dst + "/"])

    @contextlib.contextmanager
    def at_base(self, tool, base, src):
        """The path a timed run reads `src` from. A state file is bound to its source path, so a
        state-file tool reads a scenario's variant from the base path: the two directories swap
        names for the run (a rename each way, untimed) and swap back."""
        if not tool.state or src == base:
            yield src
            return
        hold = base + ".hold"
        os.rename(base, hold)
        os.rename(src, base)
        try:
            yield base
        finally:
            os.rename(base, src)
            os.rename(hold, base)

    def check(self, label, tool, src, dst):
        try:
            problems = verify(src, dst, tool.links, tool.dir_mtime, resolution_ns=self.args.mtime_resolution_ns)
        except OSError as e:
            problems = [f"cannot compare: {e}"]
        with open(os.path.join(self.out, "verify.log"), "a") as f:
            f.write(f"{label}: {'ok' if not problems else 'DIFFERENT'}\n")
            for p in problems:
                f.write(f"    {p}\n")
        if problems:
            log(f"  !! {label}: destination differs from source ({problems[0]} ...), see verify.log")

    def measure(self, ds, scenario, tool, r, src, dst):
        label = f"{self.args.fs}/{ds}/{scenario}/{tool.name}/run{r}"
        with open(self.errlog, "a") as f:
            f.write(f"== {label}\n")
        os.sync()
        # the memory tree is where memory is the point: sample the whole process tree's PSS there
        sample_ms = 10 if ds == "mem" else 0
        wall, user, sys_, rss, code, pss = timed(tool.argv(self.view(src), self.view(dst)), self.errlog,
                                                 self.args.bin, sample_ms)
        if self.sftp:
            self.sftp.clear()  # the log of every timed run would grow by gigabytes
        self._row(self.runs_csv, [self.args.fs, ds, scenario, tool.name, r, f"{wall:.4f}", f"{user:.4f}",
                                  f"{sys_:.4f}", rss, code, pss])
        if code != 0:
            log(f"  !! {label}: exit status {code} (stderr.log)")
        verify_now = self.args.verify == "all" or (self.args.verify == "first" and r == 0)
        if tool.writes and verify_now:
            self.check(label, tool, src, dst)
        return wall

    def settle(self, ds, tool, src, dst):
        """The settling run before a timed warm no-op (--settle): untimed, same arguments."""
        with open(self.errlog, "a") as f:
            f.write(f"== {self.args.fs}/{ds}/noop/{tool.name}/settle\n")
        _, _, _, _, code, _ = timed(tool.argv(self.view(src), self.view(dst)), self.errlog, self.args.bin)
        if code != 0:
            log(f"  !! {self.args.fs}/{ds}/noop/{tool.name}/settle: exit status {code} (stderr.log)")
        if self.sftp:
            self.sftp.clear()

    def count_noop(self, ds, tool, src, dst):
        """One more warm no-op (untimed), under `strace -f -c` (--strace) and with its SFTP requests
        counted (--sftp-log): a row of syscalls.csv."""
        self.restore(tool, self.base, dst)
        if self.args.settle and tool.settles:
            self.settle(ds, tool, src, dst)
        argv = tool.argv(self.view(src), self.view(dst))
        if self.sftp:
            self.sftp.clear()
        calls = errors = writes = reads = ""
        if self.args.strace:
            calls, errors, writes, reads = strace_count(argv, os.path.join(self.out, "strace.tmp"))
        else:
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        sftp = {}
        if self.sftp:
            sftp = count_sftp(self.sftp.settle())
            self.sftp.clear()
            log(f"  {tool.name}: warm no-op: {sftp['requests']} SFTP requests, {sftp['writes']} write-type, "
                f"{sftp['reads']} read, {sftp['read_opens']} open-for-read"
                + (f"; {calls} system calls, {writes} write-type, {reads} read" if self.args.strace else ""))
        self._row(self.sys_csv, [self.args.fs, ds, "noop", tool.name, calls, errors, writes, reads] +
                  [sftp.get(k, "") for k in ("requests", "writes", "reads", "read_opens", "stats", "readdirs")])

    def dataset(self, ds):
        load_start = loadavg()
        started = time.time()
        top = os.path.join(self.root, ds)
        rm_rf(top)
        os.makedirs(top)
        # the sources: beside the destinations, or under --src-root (local -> sshfs)
        src_top = os.path.join(self.src_root, ds) if self.src_root else top
        if src_top != top:
            rm_rf(src_top)
            os.makedirs(src_top)
        base = os.path.join(src_top, "src")
        self.base = base
        t0 = time.perf_counter()
        DATASETS[ds](base)
        files, dirs, links, size = tree_stats(base)
        log(f"{ds}: {files} files, {dirs} directories, {links} symlinks, {size / 1e6:.0f} MB "
            f"(made in {time.perf_counter() - t0:.1f} s)")
        scenarios = [s for s in self.args.scenarios if s in DATASET_SCENARIOS.get(ds, SCENARIOS)]
        runs = {"mem": self.args.mem_runs, "synth": self.args.synth_runs}.get(ds) or self.args.runs
        variants = {}
        dsts = {}
        for t in self.tools:
            # stat walks read treesync's mirror (they never write, so no copy of their own)
            dsts[t.name] = os.path.join(top, "dst-" + ("treesync" if not t.writes else t.slug))

        for scenario in scenarios:
            tools = [t for t in self.tools if scenario in t.scenarios]
            if scenario == "cold":
                src = base
            elif scenario == "noop":
                src = base
            else:
                src = os.path.join(src_top, "src-" + scenario)
                desc = make_variant(base, src, scenario, ds)
                variants[scenario] = desc
                log(f"{ds}/{scenario}: {desc}")
            log(f"{ds}/{scenario}: {len(tools)} programs x {runs} runs")
            for r in range(runs):
                for tool in tools:
                    dst = dsts[tool.name]
                    if scenario == "cold":
                        rm_rf(dst)
                        if tool.state and os.path.exists(tool.state[0]):
                            os.remove(tool.state[0])
                    else:
                        self.restore(tool, base, dst)
                        if scenario == "noop" and self.args.settle and tool.settles:
                            self.settle(ds, tool, src, dst)
                    with self.at_base(tool, base, src) as read_from:
                        self.measure(ds, scenario, tool, r, read_from, dst)
            # strace: 10x slower on 200k files
            if scenario == "noop" and (self.args.strace or self.sftp) and ds != "mem":
                for tool in tools:
                    self.count_noop(ds, tool, src, dst=dsts[tool.name])
            if scenario == "cold":  # cp -a and tar have no warm runs: free their space
                for t in tools:
                    if "noop" not in t.scenarios:
                        rm_rf(dsts[t.name])
            if scenario not in ("cold", "noop"):
                rm_rf(src)
        self._row(self.ds_csv, [self.args.fs, ds, files, dirs, links, size,
                                "; ".join(f"{k}: {v}" for k, v in variants.items()), runs, load_start,
                                loadavg(), time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
                                round(time.time() - started)])
        log(f"{ds}: done in {time.time() - started:.0f} s; load average {load_start} at the start, "
            f"{loadavg()} at the end")
        if not self.args.keep:
            rm_rf(top)
            if src_top != top:
                rm_rf(src_top)

    def main(self):
        for ds in self.args.datasets:
            self.dataset(ds)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True)
    p.add_argument("--view")
    p.add_argument("--src-root", help="where the sources live, seen directly (default: beside the destinations)")
    p.add_argument("--fs", required=True, help="label of the filesystem (ext4, tmpfs, fuse, local-sshfs, "
                   "sshfs-sshfs)")
    p.add_argument("--bin", required=True, help="directory with treesync, stat_walk, fs_mirror")
    p.add_argument("--out", required=True)
    p.add_argument("--datasets", default="usr_include,synth,mem")
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--tools", default="", help="comma-separated, from treesync,treesync-j,rsync,"
                   "rsyncL,cp,tar,fs_mirror,walk,walk-j (default: all; rsync is always run)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--mem-runs", type=int, default=1)
    p.add_argument("--synth-runs", type=int, default=0, help="default: --runs")
    p.add_argument("--jobs", type=int, default=16)
    p.add_argument("--strace", action="store_true")
    p.add_argument("--settle", action="store_true", help="time a warm no-op after an untimed settling run")
    p.add_argument("--sftp-log", help="sftp-server log (sshfs fixture): count the warm no-op's requests")
    p.add_argument("--rsync-omit-link-times", action="store_true",
                   help="rsync --omit-link-times (sshfs: a link's times cannot be set)")
    p.add_argument("--mtime-resolution-ns", type=int, default=1,
                   help="what the destination keeps of an mtime, for the check (sshfs: 1000000000)")
    p.add_argument("--verify", choices=["first", "all", "none"], default="first")
    p.add_argument("--keep", action="store_true", help="keep the trees afterwards")
    args = p.parse_args()
    args.datasets = [d for d in args.datasets.split(",") if d]
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    for d in args.datasets:
        if d not in DATASETS:
            p.error(f"unknown dataset {d} (known: {', '.join(DATASETS)})")
    for s in args.scenarios:
        if s not in SCENARIOS:
            p.error(f"unknown scenario {s} (known: {', '.join(SCENARIOS)})")
    Bench(args).main()


if __name__ == "__main__":
    main()
