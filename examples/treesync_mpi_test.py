#!/usr/bin/env python3
"""Tests of examples/treesync_mpi.cpp against the serial CLI (examples/treesync.cpp).

    treesync_mpi_test.py --mpi BIN --cli BIN --mpirun MPIRUN [--mpirun-flags=FLAGS] --np N --work DIR
                         [--group mirror|parity]

On a generated tree (~3,000 files in ~300 directories, symlinks, modes), in sequence: cold, warm
no-op, churn (with -i), excludes, a global --max-delete (and -n), per-entry errors.  Each step runs
the serial CLI into DIR/ref and `mpirun -np N treesync_mpi` into DIR/out with the same options and
checks that both destinations are identical (relative path, type, size, mode, mtime ns, content
hash, link target), that the --json counts and entry lists are equal, and for the warm run that no
rank wrote anything (per-rank counts, and the ctime of every destination entry is unchanged).

--group parity: both tools share the CLI's code (examples/cli/), so for the same runs (cold, after a
churn, with -l) they print the same: the same --json keys, recursively (the MPI tool's "ranks",
"frontier_depth" and "per_rank" aside), the same actions and entry lists in the same order, and the
same -i lines, sorted and as printed.
"""
import argparse
import atexit
import glob
import hashlib
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
import time

OLD = 1_577_836_800_000_000_000  # 2020-01-01: far outside the racy window
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what, flush=True)


def manifest(root, with_ctime=False):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in ["."] if dirpath == root else []:
            st = os.lstat(dirpath)
            out["."] = ("d", 0, stat.S_IMODE(st.st_mode), st.st_mtime_ns, "", "", st.st_ctime_ns if with_ctime else 0)
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            ctime = st.st_ctime_ns if with_ctime else 0
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", 0, 0, 0, "", os.readlink(p), ctime)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", 0, stat.S_IMODE(st.st_mode), st.st_mtime_ns, "", "", ctime)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    h = hashlib.sha256(f.read()).hexdigest()
                out[rel] = ("f", st.st_size, stat.S_IMODE(st.st_mode), st.st_mtime_ns, h, "", ctime)
            else:
                out[rel] = ("s", 0, stat.S_IMODE(st.st_mode), st.st_mtime_ns, "", "", ctime)
    return out


def diff(a, b):
    lines = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            lines.append(f"  {k}: serial {a.get(k)} mpi {b.get(k)}")
    return "\n".join(lines[:10])


def write(path, data, mode=0o644, mtime=OLD):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(data)
    os.chmod(path, mode)
    os.utime(path, ns=(mtime, mtime))


def make_tree(src, rng):
    for i in range(300):
        d = os.path.join(src, f"a{i % 6}", f"b{i % 25}", f"c{i}")
        for j in range(10):
            write(os.path.join(d, f"f{j}.txt"), "x" * rng.randint(0, 300) + str(i * j), 0o644 if j % 4 else 0o600)
    for k in range(40):  # files at the shallow levels too
        write(os.path.join(src, f"a{k % 6}", f"top{k}.dat"), str(k) * k)
    write(os.path.join(src, "root.txt"), "root")
    os.symlink("b1", os.path.join(src, "a0", "link_to_b1"))  # a directory through a link (dereferenced)
    os.symlink("../root.txt", os.path.join(src, "a2", "link_to_root"))
    os.mkdir(os.path.join(src, "empty"))
    os.chmod(os.path.join(src, "a3"), 0o750)


def age_dirs(src):
    for dirpath, dirnames, _ in os.walk(src):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                os.utime(p, ns=(OLD, OLD))
    os.utime(src, ns=(OLD, OLD))


class Runner:
    def __init__(self, a):
        self.a = a
        # a session directory of this run's own: Open MPI 4's mpirun runs that start and end at
        # once (ctest -j, Meson's parallel tests) share /tmp/ompi.HOST.UID, and one's cleanup can
        # remove it under another's start ("orte_session_dir failed"); a short path under /tmp
        # (its sockets' names must fit 108 bytes)
        self.session = tempfile.mkdtemp(prefix="ompi-")
        atexit.register(shutil.rmtree, self.session, True)
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                        OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_orte_tmpdir_base=self.session,
                        TMPDIR=self.session)

    def serial(self, opts, src, dst):
        p = subprocess.run([self.a.cli, "--json", "-j2"] + mirror(opts, src, dst), capture_output=True, text=True,
                           timeout=120)
        return p.returncode, json.loads(p.stdout) if p.stdout.strip() else None, p.stderr

    def raw(self, tool, opts, src, dst):
        """Runs the CLI ("cli") or the MPI tool ("mpi") as given: (exit status, stdout, stderr)."""
        cmd = ([self.a.cli] if tool == "cli" else self.a.mpirun + ["-np", str(self.a.np), self.a.mpi]) + opts
        p = subprocess.run(cmd + mirror([], src, dst, follow=not keeps_links(opts)), capture_output=True, text=True,
                           timeout=120, env=self.env)
        return p.returncode, p.stdout, p.stderr

    def mpi(self, opts, src, dst):
        cmd = self.a.mpirun + ["-np", str(self.a.np), self.a.mpi, "--json", "-j2"] + mirror(opts, src, dst)
        t = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=self.env)
        self.last_seconds = time.monotonic() - t
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        return p.returncode, json.loads(lines[-1]) if lines else None, p.stderr


def keeps_links(opts):
    return any(o in ("-l", "--links", "-a", "--archive") for o in opts)


def mirror(opts, src, dst, follow=None):
    """Both tools follow rsync since issue 24 (SRC without a trailing slash goes into DST/NAME;
    nothing is deleted without --delete): these runs mirror SRC's contents, so they say --delete
    (first: a later --no-delete still wins) and SRC/.  --ignore-errors: the MPI tool's subtrees are
    separate runs, so rsync's "IO error encountered -- skipping file deletion" (the CLI's default
    since issue 24) cannot hold across them; with it, both delete alike after a source error.  -L
    unless the options keep links: the tree's links are followed (without -l or -L both tools skip
    them, as rsync does since issue 32)."""
    if follow is None:
        follow = not keeps_links(opts)
    return ["--delete", "--ignore-errors"] + (["-L"] if follow else []) + list(opts) + \
        [src if src.endswith("/") else src + "/", dst]


def entries(j, key):
    return sorted((e["path"], e["operation"], e["code"], e["category"]) for e in j[key])


def actions(j):
    return sorted((a["kind"], a["type"], a["path"], a["itemize"]) for a in j.get("actions", []))


def both(r, step, opts, work, expect_code=0, compare_actions=False):
    src, ref, out = (os.path.join(work, n) for n in ("src", "ref", "out"))
    rc_s, js, err_s = r.serial(opts, src, ref)
    rc_m, jm, err_m = r.mpi(opts, src, out)
    print(f"{step}: serial exit {rc_s}, mpi exit {rc_m} ({r.last_seconds:.2f} s, depth "
          f"{jm and jm.get('frontier_depth')}, per rank {jm and [p['subtrees'] for p in jm['per_rank']]})", flush=True)
    check(rc_s == expect_code, f"{step}: serial exit {rc_s}, expected {expect_code}: {err_s[-500:]}")
    check(rc_m == expect_code, f"{step}: mpi exit {rc_m}, expected {expect_code}: {err_m[-500:]}")
    if js is None or jm is None:
        check(False, f"{step}: no JSON (serial {js is not None}, mpi {jm is not None}): {err_m[-500:]}")
        return None, None
    check(js["counts"] == jm["counts"], f"{step}: counts differ: serial {js['counts']} mpi {jm['counts']}")
    check(js["bytes_copied"] == jm["bytes_copied"], f"{step}: bytes_copied differ")
    check(js["status"] == jm["status"], f"{step}: status {js['status']} vs {jm['status']}")
    for key in ("errors", "vanished", "skipped"):
        check(entries(js, key) == entries(jm, key), f"{step}: {key} differ: {js[key]} vs {jm[key]}")
    check([(e["path"], e["operation"]) for e in jm["errors"]] == [(e["path"], e["operation"]) for e in js["errors"]],
          f"{step}: mpi errors not in the CLI's order")
    if compare_actions:
        check(actions(js) == actions(jm), f"{step}: -i actions differ")
    ms, mm = manifest(ref), manifest(out)
    check(ms == mm, f"{step}: destinations differ:\n{diff(ms, mm)}")
    return js, jm


# --json members only the MPI tool has (documented at the top of examples/treesync_mpi.cpp)
MPI_ONLY_KEYS = {"ranks", "frontier_depth", "per_rank"}


def json_keys(value, prefix=""):
    """Every key of a JSON value, recursively, as dotted paths ("counts.scanned", "actions[].kind")."""
    keys = set()
    if isinstance(value, dict):
        for k, v in value.items():
            keys.add(prefix + k)
            keys |= json_keys(v, prefix + k + ".")
    elif isinstance(value, list):
        for v in value:
            keys |= json_keys(v, prefix.rstrip(".") + "[].")
    return keys


def same_output(r, step, opts, work, expect_code, must_have=()):
    """One step of the parity group: the CLI (into ref) and the MPI tool (into out) print the same.
    First a dry run with --json -i: the same JSON keys, recursively (the MPI tool's own members
    aside), and the same actions in the same order; then the run itself with -i: the same itemize
    lines (sorted, and in the same order), the same exit status, identical destinations."""
    src, ref, out = (os.path.join(work, n) for n in ("src", "ref", "out"))
    rc_c, out_c, err_c = r.raw("cli", ["-n", "--json", "-i", "-j2"] + opts, src, ref)
    rc_m, out_m, err_m = r.raw("mpi", ["-n", "--json", "-i", "-j2"] + opts, src, out)
    check(rc_c == rc_m == expect_code, f"{step} (json): exit cli {rc_c} mpi {rc_m}, expected {expect_code}: "
                                       f"{err_c[-300:]} / {err_m[-300:]}")
    try:
        jc, jm = json.loads(out_c), json.loads(out_m)
    except ValueError as e:
        check(False, f"{step} (json): not one JSON object: {e}: {out_c[-300:]!r} / {out_m[-300:]!r}")
        return
    kc, km = json_keys(jc), json_keys(jm)
    mpi_only = {k for k in km if k.split(".")[0].split("[")[0] in MPI_ONLY_KEYS}
    check(kc == km - mpi_only, f"{step} (json): keys differ: cli only {sorted(kc - km)}, "
                               f"mpi only {sorted(km - kc - mpi_only)}")
    check({k.split(".")[0].split("[")[0] for k in mpi_only} == MPI_ONLY_KEYS,
          f"{step} (json): mpi members {sorted(mpi_only)}")
    # what the MPI tool once lacked, and what this step's entries must bring
    must = {"notices", "actions[].method", "actions[].sparse", "refusal"} | set(must_have)
    check(must <= km, f"{step} (json): mpi lacks {sorted(must - km)}")
    fields = ("kind", "type", "path", "target", "itemize", "changes", "method", "sparse", "message")
    ac = [tuple(str(a.get(f)) for f in fields) for a in jc.get("actions", [])]
    am = [tuple(str(a.get(f)) for f in fields) for a in jm.get("actions", [])]
    check(ac == am, f"{step} (json): actions differ: " +
          "; ".join(f"{x} vs {y}" for x, y in zip(ac, am) if x != y)[:600] + f" ({len(ac)} vs {len(am)})")
    for key in ("errors", "vanished", "skipped", "notices"):
        check(jc.get(key) == jm.get(key), f"{step} (json): {key} differ: {jc.get(key)} vs {jm.get(key)}")
    print(f"{step}: {len(kc)} JSON keys, {len(ac)} actions", flush=True)

    rc_c, out_c, err_c = r.raw("cli", ["-i", "-q", "-j2"] + opts, src, ref)
    rc_m, out_m, err_m = r.raw("mpi", ["-i", "-q", "-j2"] + opts, src, out)
    check(rc_c == rc_m == expect_code, f"{step} (-i): exit cli {rc_c} mpi {rc_m}, expected {expect_code}: "
                                       f"{err_c[-300:]} / {err_m[-300:]}")
    lc, lm = out_c.splitlines(), [ln for ln in out_m.splitlines() if not ln.startswith("-" * 10)]
    check(sorted(lc) == sorted(lm), f"{step} (-i): itemize lines differ: cli only "
                                    f"{sorted(set(lc) - set(lm))[:10]}, mpi only {sorted(set(lm) - set(lc))[:10]}")
    check(lc == lm, f"{step} (-i): the itemize lines are not in the same order")
    tc = sorted(ln for ln in err_c.splitlines() if ln.startswith(("treesync:", "skipping")))
    tm = sorted(ln for ln in err_m.splitlines() if ln.startswith(("treesync:", "skipping")))
    check(tc == tm, f"{step} (-i): stderr differs: cli {tc[:5]} mpi {tm[:5]}")
    print(f"{step}: {len(lc)} itemize lines", flush=True)
    ms, mm = manifest(ref), manifest(out)
    check(ms == mm, f"{step}: destinations differ:\n{diff(ms, mm)}")


def churn(src, rng, tag):
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(src) for f in fs
                   if os.path.isfile(os.path.join(dp, f)) and not os.path.islink(os.path.join(dp, f)))
    for p in rng.sample(files, 30):
        write(p, f"changed {tag} " + p, mtime=OLD + 10**9)
    for p in rng.sample([p for p in files if os.path.exists(p)], 20):
        os.unlink(p)
    for p in rng.sample([p for p in files if os.path.exists(p)], 10):
        os.chmod(p, 0o640)
    shutil.rmtree(os.path.join(src, "a1", "b7"), ignore_errors=True)
    for k in range(20):
        write(os.path.join(src, f"new{k % 3}", f"n{k % 5}", f"{tag}{k}.txt"), "new" * k)
    age_dirs(src)


def parity(r, work, rng):
    """The parity group: the CLI and the MPI tool print the same for the same runs (issue 13)."""
    src = os.path.join(work, "src")
    # entries for every list of the report: a per-entry error (a dangling link under -L) and a
    # skipped FIFO
    os.symlink("does-not-exist", os.path.join(src, "a2", "b2", "c2", "dangling"))
    os.mkfifo(os.path.join(src, "a4", "b4", "c4", "fifo"))
    age_dirs(src)
    entry_keys = ("errors[].path", "errors[].operation", "errors[].code", "skipped[].path")
    same_output(r, "parity cold", [], work, 23, entry_keys)
    churn(src, rng, "x")
    same_output(r, "parity churn", [], work, 23, entry_keys)
    churn(src, rng, "y")
    same_output(r, "parity churn -l (links kept)", ["-l", "--exclude=*.dat"], work, 0, ("actions[].target",))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpi", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--mpirun", required=True, help="mpirun / mpiexec")
    ap.add_argument("--mpirun-flags", default=None,
                    help="flags before -np (default: --oversubscribe, and --allow-run-as-root as root, for Open MPI)")
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--group", choices=("mirror", "parity"), default="mirror",
                    help="mirror: the destinations and reports against the CLI's (the default); "
                         "parity: the same JSON keys and itemize lines as the CLI")
    a = ap.parse_args()
    if a.mpirun_flags is None:
        v = subprocess.run([a.mpirun, "--version"], capture_output=True, text=True)
        openmpi = "Open MPI" in v.stdout + v.stderr or "OpenRTE" in v.stdout + v.stderr
        flags = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else []) if openmpi else []
    else:
        flags = a.mpirun_flags.split()
    a.mpirun = [a.mpirun] + flags
    work = os.path.join(a.work, f"np{a.np}" + ("-parity" if a.group == "parity" else ""))
    shutil.rmtree(work, ignore_errors=True)
    src = os.path.join(work, "src")
    rng = random.Random(8)
    make_tree(src, rng)
    age_dirs(src)
    r = Runner(a)
    t0 = time.monotonic()
    if a.group == "parity":
        parity(r, work, rng)
        print(f"np={a.np} parity: {len(failures)} failure(s) in {time.monotonic() - t0:.1f} s")
        return 1 if failures else 0

    # cold
    both(r, "cold", [], work)

    # warm no-op: zero writes on every rank
    before = manifest(os.path.join(work, "out"), with_ctime=True)
    js, jm = both(r, "warm", [], work)
    if jm:
        c = jm["counts"]
        check(c["created"] + c["updated"] + c["meta_updated"] + c["deleted"] + c["cleaned"] == 0,
              f"warm: the merged report is not a no-op: {c}")
        check(all(p["written"] == 0 for p in jm["per_rank"]), f"warm: some rank wrote: {jm['per_rank']}")
        check(len(jm["per_rank"]) == a.np, "warm: per_rank has not one entry per rank")
    check(manifest(os.path.join(work, "out"), with_ctime=True) == before,
          "warm: some destination entry changed (ctime): the run wrote")

    # churn
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(src) for f in fs
                   if not os.path.islink(os.path.join(dp, f)))
    for p in rng.sample(files, 60):
        write(p, "changed " + p, mtime=OLD + 10**9)
    left = [p for p in files if os.path.exists(p)]
    for p in rng.sample(left, 40):
        os.unlink(p)
    for p in rng.sample([p for p in files if os.path.exists(p)], 20):
        os.chmod(p, 0o640)
    shutil.rmtree(os.path.join(src, "a1", "b7"))
    shutil.rmtree(os.path.join(src, "a4", "b10", "c10"))
    os.unlink(os.path.join(src, "a5", "top5.dat"))
    write(os.path.join(src, "a5", "top5.dat", "now_a_dir.txt"), "d")  # a file becomes a directory
    shutil.rmtree(os.path.join(src, "a2", "b2", "c2"))
    write(os.path.join(src, "a2", "b2", "c2"), "now a file")  # a directory becomes a file
    for k in range(40):
        write(os.path.join(src, f"new{k % 3}", f"n{k % 5}", f"g{k}.txt"), "new" * k)
    age_dirs(src)
    both(r, "churn", ["-i"], work, compare_actions=True)

    # excludes (anchored, unanchored, directories only)
    for k in range(10):
        write(os.path.join(src, f"a{k % 6}", f"b{k}", f"x{k}.log"), "log")
    age_dirs(src)
    ex = ["--exclude", "*.log", "--exclude", "/a1/", "--exclude", "c1*/", "--exclude", "/a0/b3/c78/f1.txt"]
    both(r, "excludes", ex, work)
    both(r, "delete-excluded", ex + ["--delete-excluded", "-i"], work, compare_actions=True)

    # -F --delete: what DST's own rule files exclude is kept in every rank's subtrees, as the CLI
    # (and rsync) keep it; the rule files themselves and the rest of what SRC lacks go
    kept = []
    for k, rel in enumerate(sorted({os.path.dirname(os.path.relpath(p, src)) for p in
                                    glob.glob(os.path.join(src, "a*", "b*", "c*", "f*.txt"))})[:8]):
        for d in ("ref", "out"):
            write(os.path.join(work, d, rel, ".rsync-filter"), "- kept-*\n")
            write(os.path.join(work, d, rel, f"kept-{k}"), "protected by DST's rule file")
            write(os.path.join(work, d, rel, f"gone-{k}"), "extraneous")
        kept.append(os.path.join(rel, f"kept-{k}"))
    both(r, "dst rule files", ["-F"], work)
    for rel in kept:
        check(os.path.exists(os.path.join(work, "out", rel)), f"dst rule files: the MPI tool deleted {rel}")
        for d in ("ref", "out"):  # the steps below run without -F
            os.unlink(os.path.join(work, d, rel))

    # --max-delete holds for the whole run, not per rank: 12 deletions over 12 subtrees
    # (not under a1/ or c1*/: the delete-excluded step removed those from the destinations)
    victims = [os.path.join(src, f"a{i % 6}", f"b{i % 25}", f"c{i}", "f3.txt") for i in range(200, 300, 7) if i % 6 != 1]
    victims = [p for p in victims if os.path.exists(p)][:12]
    for p in victims:
        os.unlink(p)
    age_dirs(src)
    # Over the cap the two differ on purpose (README, the MPI tool): the CLI makes every other
    # change and no deletion; the MPI tool decides the cap by a dry run over the ranks and writes
    # nothing at all.  Both exit 25 (rsync's status) and neither deletes.
    before = manifest(os.path.join(work, "out"), with_ctime=True)
    cap = ["--max-delete", str(len(victims) - 1)]
    rc_s, js, err_s = r.serial(cap, src, os.path.join(work, "ref"))
    rc_m, jm, err_m = r.mpi(cap, src, os.path.join(work, "out"))
    print(f"max-delete refused: serial exit {rc_s}, mpi exit {rc_m}", flush=True)
    check(rc_s == 25 and rc_m == 25, f"max-delete refused: exits {rc_s} {rc_m}, expected 25: {err_s[-300:]} {err_m[-300:]}")
    if js and jm:
        check(js["counts"]["deleted"] == 0 and jm["counts"]["deleted"] == 0, "max-delete refused: something deleted")
        check(jm["refusal"] and jm["refusal"]["category"] == "treesync", f"max-delete: refusal {jm['refusal']}")
    else:
        check(False, "max-delete refused: no JSON")
    check(manifest(os.path.join(work, "out"), with_ctime=True) == before, "max-delete: a refused MPI run wrote")
    for p in victims:
        rel = os.path.relpath(p, src)
        check(os.path.exists(os.path.join(work, "ref", rel)), f"max-delete: the CLI deleted {rel} over the cap")
    # the MPI tool's destination catches up with what the CLI made (everything but the deletions)
    r.mpi(["--no-delete"], src, os.path.join(work, "out"))
    check(manifest(os.path.join(work, "out")) == manifest(os.path.join(work, "ref")),
          "max-delete: after --no-delete the MPI destination differs from the CLI's:\n" +
          diff(manifest(os.path.join(work, "ref")), manifest(os.path.join(work, "out"))))
    before = manifest(os.path.join(work, "out"), with_ctime=True)
    both(r, "dry run", ["-n", "-i"], work, compare_actions=True)
    check(manifest(os.path.join(work, "out"), with_ctime=True) == before, "dry run: wrote")
    both(r, "max-delete allowed", ["--max-delete", str(len(victims))], work)

    # per-entry errors in several subtrees (dangling links under -L), a FIFO (skipped): every rank
    # reports its own, none waits for another
    for i in (20, 120, 220, 290):
        os.symlink("does-not-exist", os.path.join(src, f"a{i % 6}", f"b{i % 25}", f"c{i}", "dangling"))
    os.symlink("nowhere", os.path.join(src, "a3", "dangling_shallow"))
    os.mkfifo(os.path.join(src, "a4", "b4", "c4", "fifo"))
    age_dirs(src)
    js, jm = both(r, "errors", [], work, expect_code=23)
    if jm:
        check(len(jm["errors"]) == 5, f"errors: expected 5 errors, got {jm['errors']}")
    both(r, "errors again (warm)", [], work, expect_code=23)

    print(f"np={a.np}: {len(failures)} failure(s) in {time.monotonic() - t0:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
