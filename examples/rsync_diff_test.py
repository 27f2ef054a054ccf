#!/usr/bin/env python3
"""Differential test of the treesync CLI against the real rsync (issue 24, item 8).

    python3 rsync_diff_test.py --cli PATH/TO/treesync [--work DIR] [--cases N] [--seed S] [--case K]
                               [--rsync PATH] [--keep] [--verbose]

For each case a seeded generator makes a source tree (files of varied sizes, empty ones, nested and
empty directories, symlinks to files, to directories and dangling ones, hard links, FIFOs, varied
modes and owners, names with spaces, a leading dash, Unicode and newlines), an initial destination
(missing, empty, a previous mirror, a previous mirror with extra and changed entries, unrelated
content) and churn of the source (edits, same-size rewrites with the mtime kept or changed, deletes,
file <-> directory <-> symlink swaps, chmod, chown, touch, new and broken hard links).  It picks a
random set of the options both tools have (those `treesync --help` lists), SRC with or without a
trailing slash, and runs `treesync` and `rsync` with the same arguments into two destinations made
identically.  Then it compares the exit statuses, the final trees (type, bytes, mode, mtime, link
target, owner and group, hard-link grouping) and the `-i` lines.

The only differences accepted are the ones README's table of differences from rsync documents; each
is a named rule in RULES below, and the run prints how often each one applied.  Any other
difference fails the test with the seed, the case number, both command lines and a short diff;
`--seed S --case K` reruns that case alone (`--keep` leaves its trees in --work).

Seeds: by default every case comes from a fixed seed (the same cases in every run, so CI passes or
fails for the code); TREESYNC_DIFF_EXPLORE=1 draws a seed for the second half (printed at the
start) to look for new differences; TREESYNC_DIFF_SEED or --seed makes every case come from that
seed.  TREESYNC_DIFF_CASES=N runs at most N cases, whatever --cases says (`tests/run.sh --quick`).
`--shard K/N` runs the cases whose place in the plan is K modulo N (tests/run.sh gives each plain
configuration one share of the fixed seed's cases, and the sanitizer configuration all of them);
`--check-shards N` checks that N shards split the plan into disjoint parts that cover it, and exits.
Needs Python 3.6+, rsync and root (owners, devices)
for the full set; without root the owner options and chown churn are left out.
"""

import argparse
import hashlib
import io
import multiprocessing
import os
import random
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

DEFAULT_SEED = 240008
DEFAULT_CASES = 2000


def capped_cases(cases):
    """--cases, at most TREESYNC_DIFF_CASES when that is set (tests/run.sh --quick: a few hundred)."""
    cap = os.environ.get("TREESYNC_DIFF_CASES", "")
    if not cap:
        return cases
    if not cap.isdigit() or int(cap) == 0:
        raise SystemExit("rsync_diff_test: TREESYNC_DIFF_CASES=%r is not a positive number of cases" % cap)
    if int(cap) < cases:
        print("rsync_diff_test: %s of the %d cases (TREESYNC_DIFF_CASES=%s)" % (cap, cases, cap))
    return min(cases, int(cap))


def parse_shard(text):
    """'K/N' -> (K, N) with 0 <= K < N."""
    m = re.match(r"^([0-9]+)/([0-9]+)$", text or "")
    if not m or int(m.group(2)) == 0 or int(m.group(1)) >= int(m.group(2)):
        raise SystemExit("rsync_diff_test: --shard %r is not K/N with 0 <= K < N" % text)
    return int(m.group(1)), int(m.group(2))


def shard_plan(plan, shard):
    """The cases of `plan` that shard (K, N) runs: those at a place in the plan equal to K modulo N."""
    k, n = shard
    return [case for place, case in enumerate(plan) if place % n == k]


def check_shards(plan, n):
    """0 when shards 0/n .. n-1/n of `plan` are disjoint, each within one case of len(plan)/n, and
    together the whole plan; 1 (saying what is wrong) otherwise."""
    parts = [shard_plan(plan, (k, n)) for k in range(n)]
    seen = [case for part in parts for case in part]
    problems = []
    if len(seen) != len(set(seen)):
        problems.append("a case runs in two shards")
    if set(seen) != set(plan):
        problems.append("%d case(s) run in no shard" % len(set(plan) - set(seen)))
    if max(len(p) for p in parts) - min(len(p) for p in parts) > 1:
        problems.append("shard sizes %s are uneven" % [len(p) for p in parts])
    print("rsync_diff_test: %d shards of %d cases: %s" % (
        n, len(plan), "; ".join(problems) or "disjoint, %s cases, all covered" % "+".join(str(len(p)) for p in parts)))
    return 1 if problems else 0


DEFAULT_JOBS = min(4, max(2, os.cpu_count() or 2))  # a process pool; each case in its own directory
# --temp-dir as drawn: run_case puts the case's own directory in its place
TEMP_DIR_OPTION = "--temp-dir=@CASE_TMP@"
RSYNC_TIMEOUT = 20  # seconds: rsync 3.5 -H can hang (rule rsync_hard_link_failure)

# The documented differences (README, "Where treesync differs from rsync on purpose"), one rule each.
# The generator or the comparison applies a rule only where its row says the tools differ; the
# count of each is printed at the end.
RULES = {
    "rpt_always_on":
        "README: -r and -t are always on in treesync, -p unless --no-perms -> every option set carries -a or -r -p -t",
    "src_is_directory":
        "README: SRC must be a directory -> SRC is always a directory",
    "dst_name_not_directory":
        "README: DST/NAME that is not a directory is refused, nothing touched (rsync replaces it) -> "
        "treesync must exit 2 and leave DST as it was (unless the filters exclude NAME itself: then both "
        "touch nothing and exit 0)",
    "empty_source_refused":
        "README: an empty SRC with --delete is refused without --allow-empty-source -> treesync must "
        "exit 2 and leave DST as it was",
    "max_delete_whole_run":
        "README: over --max-delete treesync deletes nothing (rsync the first N): both exit 25 -> when rsync exits "
        "25, treesync must exit 25 with no *deleting line, and DST entries treesync kept unchanged where rsync "
        "deleted them are accepted (never the other way round); under the cap the tools must agree",
    "user_opened_entry_kept":
        "README: as a user other than root rsync makes a DST entry without write permission writable (u+w) to "
        "delete it (or in it) and leaves it so when it stays (entries excluded, of another type that cannot "
        "replace it, or --max-delete stopped); treesync gives it back its mode -> such an entry's mode is "
        "accepted when treesync's is DST's before and rsync's that plus u+w",
    "user_unreadable_kept":
        "README: a SRC file the user cannot read where DST has an entry of another type: rsync removes DST's "
        "entry, then fails to open the file (exit 23); treesync fails the copy and leaves DST's entry -> DST "
        "entries treesync kept unchanged at such a NAME (from 'copy NAME (source ...): Permission denied' on its "
        "stderr) where rsync has none are accepted; where DST's entry is a non-empty directory both keep it, and "
        "rsync's 'cannot delete non-empty directory: NAME' has treesync's copy error for its counterpart "
        "(seed 3051977 case 857)",
    "user_readonly_dir_replaced":
        "README: as a user other than root rsync cannot replace a DST directory holding a directory without "
        "write permission by another type ('delete_file: rmdir(NAME) failed: Permission denied', 'could not "
        "make way for new ... file: NAME', exit 23; unlink too); treesync opens it up and replaces it -> under such a NAME "
        "the trees and -i lines are not compared, and treesync's exit 0 is accepted where rsync's is 23 for "
        "these errors alone",
    "backup_dir_relative":
        "README: a relative --backup-dir is relative to the mirrored directory -> --backup-dir is not generated",
    "delete_timing":
        "README: --del/--delete-after/... all plan deletions first; rsync may print some deletions "
        "earlier -> each tool's *deleting lines are compared as a set per directory, and the other "
        "lines in order",
    "verbose_format":
        "README: -v prints create/update/meta/delete/skip -> -v is not generated (only -i is compared)",
    "compare_exclusive":
        "README: -c, --size-only and -u exclude each other (usage error, exit 1, nothing touched) "
        "-> treesync must exit 1 and leave DST as it was",
    "created_directory_notice":
        "README: rsync -i prints 'created directory DST' when it makes DST; treesync does not -> that "
        "line of rsync's is dropped",
    "name_escaping":
        "README: -i escapes control characters as \\n, \\t, \\x1b and '\\' as '\\\\', whatever the locale; rsync as "
        "\\#012, and what the locale (LC_CTYPE) cannot print too (in a C locale every byte of a UTF-8 name above "
        "0x7f) -> both are decoded to bytes before the lines are compared, so the test passes under LC_ALL=C "
        "and a UTF-8 locale alike",
    "skip_notice_stderr":
        "README: 'skipping non-regular file \"NAME\"' and 'IO error encountered -- skipping file deletion' go "
        "to stderr (rsync: stdout) -> rsync's lines are taken out of its -i output and must be on treesync's stderr",
    "fresh_inode_breaks_dst_links":
        "README: a file whose owner/group must change, or that has other links and needs metadata, is "
        "written afresh (rsync chowns/chmods it in place) -> without -H a hard link already in DST may "
        "be split by treesync: each treesync group must lie inside an rsync group; in -i, a path linked in "
        "DST is compared without its p/o/g/t letters, and a line changing only those on one side is dropped; "
        "in the tree, such a file's metadata may be SRC's or DST's own, and its data SRC's (a same-size, "
        "same-mtime edit rsync's quick check misses is copied by the fresh write: seed 240008 case 440)",
    "hardlink_leader":
        "README: -H picks as the group's first member (>f, the others hf ... => FIRST) the first name its "
        "walk reaches, copied afresh when its metadata changes; rsync an existing DST member it keeps (chmod/"
        "chown in place) or the last name of its file list -> under -H, the file lines (>f, hf, .f) of names "
        "in a hard-link group of SRC or DST are not compared (the others are, in order); in the tree such a "
        "name's mode, mtime, owner and group, and the grouping of those names, may differ; its type must "
        "not, and its content must be SRC's, rsync's, or (a first name -u or --ignore-existing kept) that of "
        "a DST member of its group (rule hardlink_first_kept), and never other than DST's where rsync kept "
        "DST's (seed 240008 cases 53 155 322 340 422 463 494 503 585); under -L SRC's content is that of the file "
        "a path below a symlinked directory reaches (seed 5150331 case 173)",
    "hardlink_first_kept":
        "README: -H with a first name -u or --ignore-existing left as DST has it: rsync syncs the group's "
        "other names each on its own; treesync leaves an existing one alone and links a new one to DST's copy "
        "of the first name -> a name of a SRC group whose content is that of a DST member of its group (not "
        "SRC's) is accepted where DST had nothing rsync kept at that name (seed 240008 case 340); and under -u or "
        "--ignore-existing a name of a SRC group that treesync left as DST had it, of another type (a symlink "
        "where rsync, -L, made SRC's file: seed 6620913 case 307; a directory with all it holds, which rsync "
        "--delete replaced: seed 3051977 case 395, as a user) where rsync has a file",
    "hardlink_existing_replaced":
        "README: -H --existing where DST has an entry of another type at a name of a SRC hard-link group: "
        "rsync removes DST's entry, then makes nothing there when the group's last name is new (without -H it "
        "makes the file); treesync replaces the entry with the file, as without -H -> under -H --existing, a "
        "file treesync has with SRC's content at a name of a SRC group where DST had another type and rsync "
        "has nothing is accepted (seed 4418207 case 932, as a user)",
    "special_no_perms_old_mode":
        "README: --no-perms, a FIFO or other special file replacing a DST entry of another type: rsync gives "
        "it the replaced entry's permission bits (a file or directory replacing one gets SRC's, umask "
        "applied); treesync gives it SRC's, umask applied, as for any new entry -> such an entry's mode is "
        "accepted when rsync's bits are those of DST's entry before and treesync's SRC's without the umask's "
        "(seed 1290577 case 318, as a user)",
    "rule_files_both_sides":
        "README: with -F (dir-merge) and --delete an extraneous DST entry that the rule files of SRC or of "
        "DST exclude is kept; rsync reads only DST's where it deletes -> DST entries treesync kept unchanged "
        "(and their directory's mtime) where rsync deleted them are accepted, never the other way round "
        "(seed 240008 cases 159 233 247 340 342 1169 1380); a DST directory SRC replaces by another type that "
        "holds what DST's rule files exclude is replaced by rsync, kept by treesync ('rmdir NAME ...: Directory "
        "not empty', exit 23 where rsync's is 0: seed 563300701 case 252, seed 31292831 case 144)",
    "rsync_single_entry_dst":
        "README: rsync copies a one-entry file list (SRC without a slash that is an empty directory, or "
        "whose contents are all filtered out) to DST itself when DST is missing; treesync makes DST/NAME "
        "as for any SRC; with --existing such a list makes nothing at all, where treesync makes DST (empty) "
        "-> accepted when DST was missing, rsync's DST is empty and treesync's holds NAME alone, or (--existing) "
        "rsync's DST does not exist and treesync's is empty",
    "nonempty_dir_message":
        "README: without --delete an entry of another type cannot replace a non-empty directory in both; "
        "rsync says 'cannot delete non-empty directory: NAME' on stdout, treesync 'rmdir NAME (destination "
        "...): Directory not empty' on stderr -> rsync's line is taken out of its -i output and treesync's "
        "stderr must name NAME so",
    "extraneous_dir_kept_message":
        "README: with --delete (without --delete-excluded) an extraneous DST directory that holds excluded "
        "entries is kept by both (the rest of it deleted, its mode left as it was); rsync says 'cannot delete "
        "non-empty directory: NAME' on stdout, treesync says nothing (nothing failed: exit 0 in both) -> "
        "rsync's line is taken out of its -i output where SRC has nothing at NAME, or (an excluded SRC "
        "entry of that name: seed 31292831 case 629) under --delete; the exit statuses and trees are compared",
    "io_error_deletion_order":
        "README: after a source error neither deletes any more; rsync may already have deleted in the "
        "directories it finished before the error reached it, treesync deletes nothing (its deletions wait "
        "for the end of the run) -> when treesync says 'IO error encountered' and rsync exits 23, DST "
        "entries treesync kept unchanged where rsync deleted them are accepted (never the other way round)",
    "run_time_dir_mtime":
        "both tools leave a directory they could not complete (an entry of another type could not "
        "replace it) with the mtime of the run ('now'), a few ms apart -> mtimes both within the run "
        "are equal",
    "setid_owner_itemize":
        "README: rsync itemizes an owner or group change of a set-user/group-ID file as a mode change "
        "('.f...p.....': its chown clears the bit, which it sets again), or under --no-perms not at all; "
        "treesync as the change it is ('.f....o....', '.f.....g...') -> for such a file (a set-ID bit in "
        "SRC's or DST's mode) rsync's line without o/g and treesync's with them are accepted when their "
        "other letters agree, and treesync's o/g-only line when rsync has none (the trees are compared: "
        "seed 240008 cases 105 343 1383 1533 1838, seed 1306349741 case 375, seed 563300701 case 453)",
    "setid_without_owner":
        "README: as root, rsync -p (without -o/-g) keeps a set-user/group-ID bit on root's copy of another "
        "user's file, and under --no-perms DST's set-ID bits on a file it rewrites with another user's data; "
        "treesync keeps set-user-ID only where the copy's owner is SRC's (-o, or a file of root's) and "
        "set-group-ID only where the copy's group is SRC's (-g, or the group the kernel gives the copy: its "
        "directory's if set-group-ID, root's otherwise) -> a file's mode that lacks only those bits is "
        "accepted, and -i lines that differ only by that 'p' (or a 'p'-only line one tool has and the other "
        "not) (seed 5150331 case 205)",
    "summary_line":
        "README: without -q treesync ends with a summary line (rsync -i prints none) -> that line is dropped",
}
# Differences that belong to work in flight (issue 24 item 5).  Each is accepted only in its exact
# shape, counted, and reported at the end; once the CLI matches rsync the rule simply stops firing.
PENDING = {
    "pending_symlink_mtime":
        "issue 24 item 5: treesync does not set symlink mtimes yet (probed at start; enforced once it does)",
    "pending_existing_makes_dst_name":
        "issue 24 item 5 (--existing): with SRC without a slash treesync makes DST/NAME (cd+++++++++ NAME/) "
        "where rsync --existing creates nothing -> --existing is only generated with SRC/",
}
# Differences that delete or overwrite what rsync keeps: never documented away.  Until fixed the
# generator avoids them (counted and named at the end, so the exclusion stays visible).  None is
# left: the four this test found (an extraneous directory's mode when it keeps excluded entries, a
# non-empty directory's mode when another type cannot replace it, a parallel deletion before an
# earlier directory's source error, root's owner on a file written afresh) are fixed and covered
# by the generated cases; tests/test_options.cpp and cli_test.py group rsync_diff_fixes pin each.
BLOCKERS = {
}
GENERATOR = {
    "max_delete_replacement":
        "README (--max-delete): a directory replaced by an entry of another type is emptied when the walk "
        "comes to it, if its entries fit the cap; rsync counts in its own order -> --max-delete is dropped from "
        "a case where SRC replaces a DST directory by another type",
    "max_delete_rule_files":
        "rule rule_files_both_sides: with -F and --delete rsync deletes entries DST's rule files protect, which "
        "treesync keeps, so the two count different deletions against --max-delete -> --max-delete is dropped "
        "from a case with -F",
    "rsync_hlink_foreign_group":
        "rsync 3.5 -H as a user other than root tries to give a hard-linked file a group the user is not in "
        "('chgrp NAME failed: Operation not permitted', exit 23: its generator's, or its receiver's on the temporary "
        "file of a copy, seed 4418207 case 610), where -g alone skips such a group silently; treesync skips it -> "
        "treesync's exit 0 is accepted where rsync's 23 comes from those errors alone",
    "user_unreadable_file":
        "as a user other than root: a SRC file made unreadable (0o000) in a case without hard links (-H or "
        "links in DST: there treesync reads SRC for a fresh copy where rsync chmods in place, rule "
        "fresh_inode_breaks_dst_links)",
    "state_tampered_ignored":
        "treesync's --state (rsync has none): after a case that both tools passed with exit 0, the state file "
        "gets an entry '../canary' (outside DST) and treesync runs again with --verify=none: the file must be "
        "ignored, the canary kept, DST unchanged, exit 0",
    "rsync_L_symlink_cycle":
        "README (row '-L and a symlink cycle'): under -L a symlink loop in SRC (a link to an ancestor "
        "directory): rsync copies round the loop until the kernel's 40 links (ELOOP), which with two such "
        "links is more paths than a test can wait for; treesync reports 'symbolic link cycle', does not enter "
        "it and deletes nothing (cli_test.py group links_rule_files compares both on one loop) -> such a "
        "case runs with -l instead of -L",
    "rsync_ignore_existing_dir_over_other":
        "rsync 3.5 --ignore-existing with a SRC directory where DST has a file or symlink: rsync sets that "
        "entry's mtime to the directory's and may look for entries below it ('failed to stat NAME/...', exit "
        "23); treesync leaves the existing entry alone, as --ignore-existing says (seed 240008 cases 17 221 "
        "476 846) -> --ignore-existing is dropped from such a case",
    "rsync_hard_link_failure":
        "rsync 3.5 -H sometimes fails on its own: 'File-list index N not in M - K (finish_hard_link)' (or "
        "'(got_flist_entry_status)': -H --existing as a user, seed 4418207 case 476), or 'Hlink node data for N "
        "already has path=NAME', exit 13 (errors with program diagnostics: a group's name that could not be made, "
        "seed 9183507 case 447), "
        "protocol incompatibility, exit 2 (seed 240008 case 1764), or hangs, its three processes polling each "
        "other (a case with -H --ignore-existing) -> such a case (rsync exit 2 or 13 with these, or no "
        "exit within %d s, under -H only) is not compared" % RSYNC_TIMEOUT,
    "rsync_untrusted_symlink":
        "rsync 3.5 refuses to follow (-L) a symlink owned by another user ('refusing to follow a "
        "symlink owned by an untrusted user'); treesync follows it -> under -L links in SRC are root's",
}
FIRED = {}


def fire(rule):
    FIRED[rule] = FIRED.get(rule, 0) + 1


IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
UMASK = os.umask(0o022)  # the tools' umask (rule special_no_perms_old_mode); read, and set back
os.umask(UMASK)
# --foreign DIR (the non-root run: tests/rsync_diff_nonroot.py makes it as root): regular files of
# another owner and a group the user is not in, mode 0666, which the generator hard-links into SRC
# (protected_hardlinks allows a link to a file the user may read and write)
FOREIGN = []
UNREADABLE_RATE = 0.15
NAMES = ["a", "b", "c.txt", "d.o", "x.c", "e.tmp", "sub", "Z", "with space", "-dash", "--opt", "ünï",
         "名前", "a-b", "a.b", "tab\tname", "nl\nname", ".hidden", "keep.o"]
UIDS = [0, 1000, 1234, 65534]
GIDS = [0, 100, 1234, 65534]
FILE_MODES = [0o644, 0o644, 0o600, 0o755, 0o444, 0o640, 0o700, 0o711, 0o4755, 0o666]
DIR_MODES = [0o755, 0o755, 0o700, 0o750, 0o775, 0o555, 0o1777, 0o2755]
if not IS_ROOT:  # what only matters to a user: read-only directories, entries the user cannot read
    FILE_MODES += [0o444]
    DIR_MODES += [0o555, 0o500]
T0 = 1600000000 * 10**9


class Entry:
    __slots__ = ("kind", "data", "mode", "mtime", "uid", "gid", "target", "group", "foreign")

    def __init__(self, kind, data=b"", mode=0o644, mtime=T0, uid=0, gid=0, target="", group=None, foreign=None):
        self.kind, self.data, self.mode, self.mtime = kind, data, mode, mtime
        self.uid, self.gid, self.target, self.group = uid, gid, target, group
        self.foreign = foreign  # a FOREIGN file this entry is a hard link to (its metadata is that file's)

    def copy(self):
        return Entry(self.kind, self.data, self.mode, self.mtime, self.uid, self.gid, self.target, self.group,
                     self.foreign)


def parent(path):
    return path.rsplit("/", 1)[0] if "/" in path else ""


def join(a, b):
    return a + "/" + b if a else b


class Gen:
    """Makes trees (dicts relpath -> Entry; "" is the root directory) from one random.Random."""

    def __init__(self, rng, names, unsafe=None):
        self.rng = rng
        self.names = names
        self.next_group = 1
        # --safe-links cases (issue 46): a generator of their own that sometimes gives a link a
        # target rsync calls unsafe, or one just safe; None (every other case) draws nothing more
        self.unsafe = unsafe

    def mtime(self):
        r = self.rng
        t = T0 + r.randrange(0, 10**6) * 10**9
        return t + (r.randrange(1, 10**9) if r.random() < 0.5 else 0)

    def owner(self, e):
        if IS_ROOT and self.rng.random() < 0.3:
            e.uid, e.gid = self.rng.choice(UIDS), self.rng.choice(GIDS)
        return e

    def data(self):
        r = self.rng
        k = r.random()
        if k < 0.15:
            return b""
        if k < 0.8:
            return bytes(r.randrange(256) for _ in range(r.randrange(1, 40)))
        return bytes([r.randrange(256)]) * r.choice([511, 4096, 5000, 70000])

    def file(self):
        if FOREIGN and self.rng.random() < 0.1:
            return Entry("f", foreign=self.rng.choice(FOREIGN))
        return self.owner(Entry("f", self.data(), self.rng.choice(FILE_MODES), self.mtime()))

    def dir(self):
        return self.owner(Entry("d", mode=self.rng.choice(DIR_MODES), mtime=self.mtime()))

    def dirs(self, tree):
        return [p for p, e in tree.items() if e.kind == "d"]

    def link(self, tree, at):
        """A symlink at `at`: to a file, to a directory that does not contain it, or dangling."""
        r = self.rng
        k = r.random()
        files = [p for p, e in tree.items() if e.kind == "f"]
        dirs = [p for p in self.dirs(tree) if p and not (at + "/").startswith(p + "/")]
        if k < 0.4 and files:
            dest = r.choice(files)
        elif k < 0.7 and dirs:
            dest = r.choice(dirs)
        else:
            return self.owner(Entry("l", target=r.choice(["nowhere", "../gone/x", "/nonexistent/treesync-diff"]),
                                    mtime=self.mtime()))
        # relative to the link's directory
        up = parent(at).count("/") + 1 if parent(at) else 0
        return self.unsafe_target(tree, at, self.owner(Entry("l", target="../" * up + dest, mtime=self.mtime())))

    def unsafe_target(self, tree, at, e):
        """Under --safe-links, half the links get a target by rsync's rule unsafe or just safe, all
        dangling but one through a directory of the tree (a ".." after a name), so that -L follows
        nothing outside the case: climbing one level past SRC (safe for SRC without a slash: the
        top of the transfer is then SRC's parent), two past it, to SRC's own level, a ".." after a
        name, one ending in "/..", absolute."""
        u = self.unsafe
        if u is None or u.random() >= 0.5:
            return e
        up = parent(at).count("/") + 1 if parent(at) else 0
        files = [p for p, x in tree.items() if x.kind == "f"]
        dirs = [p for p in self.dirs(tree) if p]
        choices = ["../" * (up + 1) + "zz-none", "../" * (up + 2) + "zz-none", "../" * up + "zz-none",
                   "zz-none/../zz-none", "../" * up + "zz-none/..", "/nonexistent/treesync-diff/zz"]
        if files and dirs:
            choices.append("../" * up + u.choice(dirs) + "/../" + u.choice(files))
        e.target = u.choice(choices)
        return e

    def free_name(self, tree, d):
        for _ in range(20):
            n = self.rng.choice(self.names)
            if join(d, n) not in tree:
                return join(d, n)
        return None

    def add_random(self, tree, specials):
        r = self.rng
        d = r.choice(self.dirs(tree))
        if d.count("/") >= 3:
            d = ""
        p = self.free_name(tree, d)
        if p is None:
            return
        k = r.random()
        if k < 0.45:
            tree[p] = self.file()
        elif k < 0.65:
            tree[p] = self.dir()
        elif k < 0.8:
            tree[p] = self.link(tree, p)
        elif k < 0.93:
            files = [q for q, e in tree.items() if e.kind == "f"]
            if files:
                src = tree[r.choice(files)]
                if src.group is None:
                    src.group = self.next_group
                    self.next_group += 1
                tree[p] = src.copy()
        elif specials:
            tree[p] = self.owner(Entry("p", mode=r.choice([0o644, 0o600]), mtime=self.mtime()))

    def tree(self, n, specials):
        t = {"": Entry("d", mode=0o755, mtime=self.mtime())}
        for _ in range(n):
            self.add_random(t, specials)
        return t

    def churn(self, tree, n, specials):
        r = self.rng
        for _ in range(n):
            paths = [p for p in tree if p]
            if not paths:
                self.add_random(tree, specials)
                continue
            p = r.choice(paths)
            e = tree[p]
            k = r.randrange(12)
            members = [q for q, x in tree.items() if e.group is not None and x.group == e.group]
            if k == 0 and e.kind == "f":  # edit
                for q in members or [p]:
                    tree[q].data, tree[q].mtime = self.data(), self.mtime()
            elif k == 1 and e.kind == "f" and e.data:  # same-size rewrite, mtime kept or changed
                new = bytes((b + 1) % 256 for b in e.data)
                keep = r.random() < 0.5
                for q in members or [p]:
                    tree[q].data = new
                    if not keep:
                        tree[q].mtime = self.mtime()
            elif k == 2:  # delete (with what is below)
                for q in [q for q in tree if q == p or q.startswith(p + "/")]:
                    del tree[q]
            elif k == 3:  # type swap
                for q in [q for q in tree if q.startswith(p + "/")]:
                    del tree[q]
                if e.kind == "f":
                    tree[p] = self.dir() if r.random() < 0.5 else self.link(tree, p)
                elif e.kind == "d":
                    tree[p] = self.file() if r.random() < 0.5 else self.link(tree, p)
                else:
                    tree[p] = self.file() if r.random() < 0.5 else self.dir()
            elif k == 4 and e.kind in "fdp":  # chmod
                mode = r.choice(DIR_MODES if e.kind == "d" else FILE_MODES)
                for q in members or [p]:
                    tree[q].mode = mode
            elif k == 5 and e.kind != "l":  # touch
                t = self.mtime()
                for q in members or [p]:
                    tree[q].mtime = t
            elif k == 6 and IS_ROOT:  # chown
                u, g = r.choice(UIDS), r.choice(GIDS)
                for q in members or [p]:
                    tree[q].uid, tree[q].gid = u, g
            elif k == 7 and e.kind == "f" and e.group is not None:  # break a hard link
                tree[p] = e.copy()
                tree[p].group = None
            else:
                self.add_random(tree, specials)


def has_dangling_link(root):
    for r, dirs, files in os.walk(root):
        for n in dirs + files:
            full = os.path.join(r, n)
            if os.path.islink(full) and not os.path.exists(full):
                return True
    return False


def dir_over_other(src_root, dst_tree, name, follow):
    """Whether SRC has a directory (followed, under -L) where DST has another type (generator
    constraint rsync_ignore_existing_dir_over_other)."""
    for p, e in dst_tree.items():
        if name:
            if not p.startswith(name + "/"):
                continue
            p = p[len(name) + 1:]
        if not p or e.kind == "d":
            continue
        full = os.path.join(src_root, p)
        try:
            st = os.stat(full) if follow else os.lstat(full)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            return True
    return False


def source_link_groups(root, follow):
    """The names (relative to root) that reach one regular file by more than one path: hard links,
    and under -L (`follow`) symlinks to files and paths through symlinked directories too (rule
    hardlink_leader)."""
    inodes = {}
    for dirpath, dirs, files in os.walk(root, followlinks=follow):
        for n in dirs + files:
            full = os.path.join(dirpath, n)
            try:
                st = os.stat(full) if follow else os.lstat(full)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                inodes.setdefault((st.st_dev, st.st_ino), []).append(os.path.relpath(full, root))
    return [tuple(sorted(g)) for g in inodes.values() if len(g) > 1]


def has_link_loop(root):
    """A directory reached through symlinks that is one of its own ancestors (followed, -L)."""
    todo = [(root, (os.path.realpath(root),))]
    while todo:
        path, chain = todo.pop()
        try:
            names = os.listdir(path)
        except OSError:
            continue
        for n in names:
            full = os.path.join(path, n)
            if not os.path.isdir(full):
                continue
            real = os.path.realpath(full)
            if real in chain:
                return True
            if len(chain) < 40:
                todo.append((full, chain + (real,)))
    return False


def materialize(tree, root):
    """Makes `tree` at `root` (which must not exist); hard-link groups become one inode."""
    os.mkdir(root)
    paths = sorted(tree, key=lambda p: (p.count("/"), p))
    made = {}
    for p in paths:
        if not p:
            continue
        e, full = tree[p], os.path.join(root, p)
        if e.kind == "d":
            os.mkdir(full)
        elif e.kind == "f" and e.foreign:
            os.link(e.foreign, full)
        elif e.kind == "f":
            if e.group is not None and e.group in made:
                os.link(made[e.group], full)
                continue
            with open(full, "wb") as f:
                f.write(e.data)
            if e.group is not None:
                made[e.group] = full
        elif e.kind == "l":
            os.symlink(e.target, full)
        elif e.kind == "p":
            os.mkfifo(full)
    # owners, modes, then times, deepest first so a directory's mtime is set after its contents
    for p in sorted(tree, key=lambda p: (-p.count("/"), p), reverse=False):
        e = tree[p]
        full = os.path.join(root, p) if p else root
        if e.kind == "f" and e.foreign:
            continue  # not the user's: its owner, group, mode and mtime are the FOREIGN file's
        if IS_ROOT:
            os.lchown(full, e.uid, e.gid)
        if e.kind not in "ld":
            os.chmod(full, e.mode)
        os.utime(full, ns=(e.mtime, e.mtime), follow_symlinks=False)
    # directories: times, then modes (deepest first: a user cannot reach below a directory it
    # made 0o000 or 0o300)
    dirs = sorted((p for p in tree if tree[p].kind == "d"), key=lambda p: -p.count("/"))
    for p in dirs:
        full = os.path.join(root, p) if p else root
        os.utime(full, ns=(tree[p].mtime, tree[p].mtime))
    for p in dirs:
        full = os.path.join(root, p) if p else root
        os.chmod(full, tree[p].mode)


def rmtree(path):
    """shutil.rmtree, after giving the user back access to directories it cannot enter or change."""
    if not IS_ROOT and os.path.isdir(path) and not os.path.islink(path):
        try:
            os.chmod(path, 0o700)
        except OSError:
            pass
        for dirpath, dirs, files in os.walk(path):
            for n in dirs:
                full = os.path.join(dirpath, n)
                if not os.path.islink(full):
                    try:
                        os.chmod(full, 0o700)
                    except OSError:
                        pass
    shutil.rmtree(path, ignore_errors=True)


def snapshot(root, follow_files=False):
    """relpath -> (type, sha, mode, mtime_ns, uid, gid, target), and the hard-link groups.
    `follow_files`: a symlink to a regular file is taken as that file (SRC under -L)."""
    out, inodes = {}, {}
    if not os.path.lexists(root):
        return None, []
    todo = [""]
    while todo:
        rel = todo.pop()
        full = os.path.join(root, rel) if rel else root
        st = os.lstat(full)
        if follow_files and stat.S_ISLNK(st.st_mode):
            try:
                target = os.stat(full)
                if stat.S_ISREG(target.st_mode):
                    st = target
            except OSError:
                pass
        m = st.st_mode
        if stat.S_ISDIR(m):
            kind, payload = "d", ""
            try:
                names = os.listdir(full)
            except PermissionError:  # a user's directory without read permission
                names, payload = [], "unreadable"
            for n in names:
                todo.append(join(rel, n))
        elif stat.S_ISREG(m):
            kind = "f"
            try:
                with open(full, "rb") as f:
                    payload = hashlib.sha1(f.read()).hexdigest()[:12] + ":%d" % st.st_size
            except PermissionError:  # a user's file without read permission
                payload = "unreadable:%d" % st.st_size
            if st.st_nlink > 1:
                inodes.setdefault(st.st_ino, []).append(rel)
        elif stat.S_ISLNK(m):
            kind, payload = "l", os.readlink(full)
        elif stat.S_ISFIFO(m):
            kind, payload = "p", ""
        else:
            kind, payload = "?", oct(m)
        out[rel] = (kind, payload, stat.S_IMODE(m), st.st_mtime_ns, st.st_uid, st.st_gid)
    groups = sorted(tuple(sorted(g)) for g in inodes.values() if len(g) > 1)
    return out, groups


ESC_RSYNC = re.compile(r"\\#([0-7]{3})")
ESC_TREESYNC = re.compile(r"\\(\\|n|t|r|x[0-9a-f]{2})")


def byte_char(b):
    """The character that stands for the byte `b` in text decoded as UTF-8 with surrogateescape."""
    return chr(b) if b < 0x80 else chr(0xDC00 + b)


def rejoin(text):
    """Bytes an escape stood for, joined with their neighbours: an escaped UTF-8 sequence becomes
    the character it encodes, as if it had been printed raw."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")


def decode_rsync(line):
    """rsync's -i line with its escapes undone.  rsync writes a byte as \\#ooo when it is a control
    character or not printable in the locale (LC_CTYPE): in a C locale every byte of a UTF-8 name
    above 0x7f, in a UTF-8 locale only the bytes of invalid sequences.  treesync's display() does not
    depend on the locale (README, rule name_escaping); undone to bytes, both read the same."""
    if ESC_RSYNC.search(line):
        fire("name_escaping")
    return rejoin(ESC_RSYNC.sub(lambda m: byte_char(int(m.group(1), 8)), line))


def decode_treesync(line):
    def one(m):
        s = m.group(1)
        return {"\\": "\\", "n": "\n", "t": "\t", "r": "\r"}.get(s) or byte_char(int(s[1:], 16))
    if ESC_TREESYNC.search(line):
        fire("name_escaping")
    return rejoin(ESC_TREESYNC.sub(one, line))


SUMMARY = re.compile(r"^(\(dry run\) )?\d+ scanned, \d+ created, ")


def itemized_treesync(out):
    lines = []
    for line in out.split("\n"):
        if not line:
            continue
        if SUMMARY.match(line):
            fire("summary_line")
            continue
        lines.append(decode_treesync(line))
    return lines


def itemized_rsync(out, notices):
    lines = []
    for line in out.split("\n"):
        if not line:
            continue
        if line.startswith("created directory "):
            fire("created_directory_notice")
            continue
        if line.startswith("skipping non-regular file ") or line == "IO error encountered -- skipping file deletion":
            fire("skip_notice_stderr")
            notices.append(decode_rsync(line))
            continue
        if line.startswith("cannot delete non-empty directory: "):
            notices.append(("nonempty", decode_rsync(line[len("cannot delete non-empty directory: "):])))
            continue
        lines.append(decode_rsync(line))
    return lines


def line_path(line):
    """The path of an -i line (the part after the 11-character code and a space, before ' -> ' or ' => ')."""
    rest = line[12:]
    for sep in (" -> ", " => "):
        if sep in rest:
            rest = rest.split(sep, 1)[0]
    return rest


def order_key_groups(lines):
    """Splits -i lines into (non-deletion lines in order, {dir: set of deletion lines}): rule
    delete_timing."""
    others, deletions = [], {}
    for line in lines:
        if line.startswith("*deleting "):
            p = line_path(line).rstrip("/")
            deletions.setdefault(parent(p), set()).add(line)
        else:
            others.append(line)
    return others, deletions


def src_followed(ctx, p):
    """SRC's entry at `p` as a run that follows links reaches it (below a symlinked directory under
    -L: not in the snapshot, which does not follow directory links); None when there is none."""
    m = (ctx.get("src_meta") or {}).get(p)
    if m is not None or ctx.get("src_root") is None:
        return m
    rel = p
    if ctx.get("src_name"):
        if not (p == ctx["src_name"] or p.startswith(ctx["src_name"] + "/")):
            return None
        rel = p[len(ctx["src_name"]) + 1:]
    full = os.path.join(ctx["src_root"], rel)
    try:
        st = os.stat(full)
    except OSError:
        return None
    kind = "f" if stat.S_ISREG(st.st_mode) else "d" if stat.S_ISDIR(st.st_mode) else "?"
    payload = None
    if kind == "f":  # its content as snapshot() gives it (rule hardlink_leader compares it)
        try:
            with open(full, "rb") as f:
                payload = hashlib.sha1(f.read()).hexdigest()[:12] + ":%d" % st.st_size
        except OSError:
            pass
    return (kind, payload, stat.S_IMODE(st.st_mode), st.st_mtime_ns, st.st_uid, st.st_gid)


def setid_dropped(ctx, m, p):
    """Rule setid_without_owner: the set-ID bits treesync's copy at `p` of SRC's entry `m` does not
    keep, as root: set-user-ID unless the copy's owner is SRC's (-o, or a file of root's),
    set-group-ID unless the copy's group is SRC's (-g, or the group the copy gets from the kernel:
    its directory's where that has set-group-ID, root's otherwise).  The bits are SRC's, or under
    --no-perms those of the DST file the data is rewritten into."""
    if not IS_ROOT or m is None or m[0] != "f":
        return 0
    opts = ctx.get("opts") or []
    bits = m[2]
    old = (ctx.get("dst_before") or {}).get(p)
    if "--no-perms" in opts and old is not None and old[0] == "f":
        bits = old[2]
    if not bits & 0o6000:
        return 0
    dropped = 0
    if "-a" not in opts and "-o" not in opts and m[4] != 0:
        dropped |= 0o4000
    if "-a" not in opts and "-g" not in opts:
        d = (ctx.get("t_tree") or {}).get(parent(p))
        given = d[5] if d is not None and d[0] == "d" and d[2] & 0o2000 else 0
        if m[5] != given:
            dropped |= 0o2000
    return dropped & bits


def _without_p(line):
    """An -i line without its 'p' (None for no line, or one that says nothing else)."""
    if line is None:
        return None
    if len(line) > 5 and line[5] == "p":
        line = line[:5] + "." + line[6:]
    return None if re.match(r"^\.f\.{9} ", line) else line


def compare_itemized(t_lines, r_lines, ctx):
    """Returns a list of difference strings ([] when equal under the rules)."""
    gone = ctx.get("user_replaced") or set()
    if gone:  # rule user_readonly_dir_replaced: neither side's lines at or below such a NAME
        def under(l):
            p = line_path(l).rstrip("/")
            return any(p == q or p.startswith(q + "/") for q in gone)
        t_lines = [l for l in t_lines if not under(l)]
        r_lines = [l for l in r_lines if not under(l)]
    t_other, t_del = order_key_groups(t_lines)
    r_other, r_del = order_key_groups(r_lines)
    if [l for l in t_lines if l.startswith("*deleting ")] != [l for l in r_lines if l.startswith("*deleting ")] \
            and t_del == r_del:
        fire("delete_timing")
    diffs = []
    if t_del != r_del:
        for d in sorted(set(t_del) | set(r_del)):
            a, b = t_del.get(d, set()), r_del.get(d, set())
            for l in sorted(a - b):
                diffs.append("-i treesync only: %r" % l)
            for l in sorted(b - a):
                if ctx.get("io_error_both") and line_path(l).rstrip("/") in (ctx.get("dst_before") or {}):
                    continue  # rule io_error_deletion_order (the tree comparison checks what was kept)
                if ctx.get("rule_files_delete") and (line_path(l).rstrip("/") in (ctx.get("dst_before") or {})):
                    continue  # rule rule_files_both_sides (the tree comparison checks what was kept)
                if ctx.get("max_delete_over"):
                    continue  # rule max_delete_whole_run (the tree comparison checks what was kept)
                if any(line_path(l).startswith(q + "/") for q in ctx.get("first_kept") or ()):
                    continue  # rule hardlink_first_kept (the tree comparison checks what was kept)
                diffs.append("-i rsync only:    %r" % l)
    t_other, r_other = split_link_itemize(t_other, r_other, ctx)
    replaced_kept = ctx.get("replaced_kept") or set()
    if replaced_kept:  # rule rule_files_both_sides: rsync's line for the entry that replaced the directory
        r_other = [l for l in r_other if not any(line_path(l).rstrip("/") == q or line_path(l).startswith(q + "/")
                                                for q in replaced_kept)]
    if ctx.get("first_kept"):  # rule hardlink_first_kept: rsync's lines for what it synced there
        r_other = [l for l in r_other if not any(line_path(l).rstrip("/") == q or line_path(l).startswith(q + "/")
                                                for q in ctx["first_kept"])]
    if "-H" in ctx["opts"] and t_other != r_other:
        t_n, r_n = hardlink_normal(t_other, ctx), hardlink_normal(r_other, ctx)
        if t_n == r_n:
            fire("hardlink_leader")
            t_other, r_other = t_n, r_n
    if t_other != r_other:
        diffs.extend(line_diff(t_other, r_other))
    return diffs


HARDLINK = re.compile(r"^hf(\S{9}) (.*) => (.*)$", re.S)  # names may hold a newline


def group_members(ctx):
    """The names in a hard-link group of SRC or of DST (rule hardlink_leader)."""
    return set(p for g in (ctx.get("src_groups") or []) + (ctx.get("dst_groups") or []) for p in g)


def hardlink_normal(lines, ctx):
    """Rule hardlink_leader: the file lines (>f, hf, .f) of names in a hard-link group are left out."""
    members = group_members(ctx)
    return [l for l in lines if l[1] != "f" or line_path(l) not in members]


META_ONLY = re.compile(r"^\.f[.pogt]{9} ")


def split_link_itemize(t_lines, r_lines, ctx):
    """Rule fresh_inode_breaks_dst_links, in the -i lines: a file that was hard-linked in DST is
    changed in place by rsync (its other names change with it, and may need no line of their own)
    and written afresh by treesync (each name gets its own change).  For such a path the letters
    p, o, g and t are not compared, and a line that changes only those on one side alone is
    dropped."""
    linked = ctx.get("dst_linked") or set()

    def norm(l):
        return l[:2] + re.sub(r"[pogt]", ".", l[2:11]) + l[11:]
    t_paths = {line_path(l): l for l in t_lines if l[1:2] == "f"}
    r_paths = {line_path(l): l for l in r_lines if l[1:2] == "f"}
    drop_t, drop_r = set(), set()
    src_meta = ctx.get("src_meta") or {}
    for p in set(t_paths) | set(r_paths):
        a, b = t_paths.get(p), r_paths.get(p)
        if a != b and setid_dropped(ctx, src_followed(ctx, p), p) and _without_p(a) == _without_p(b):
            drop_t.add(a), drop_r.add(b)
            fire("setid_without_owner")
            continue
        if p not in linked:
            # rule setid_owner_itemize: rsync's chown of a set-user/group-ID file clears the bit,
            # which it sets again, and it itemizes the change as a mode change alone ('p'; under
            # --no-perms no line at all)
            setid = any(m is not None and m[0] == "f" and m[2] & 0o6000
                        for m in (src_meta.get(p), (ctx.get("dst_before") or {}).get(p)))
            if not setid or a is None or a[0] != "." or not re.search(r"[og]", a[2:11]):
                continue
            if b is not None and b[0] == "." and not re.search(r"[og]", b[2:11]) and \
                    re.sub(r"[pog]", ".", a[:11]) == re.sub(r"[pog]", ".", b[:11]):
                drop_t.add(a), drop_r.add(b)
                fire("setid_owner_itemize")
            elif b is None and re.match(r"^\.f\.{4}[.o][.g]\.{3} ", a):
                drop_t.add(a)
                fire("setid_owner_itemize")
            continue
        if a is not None and b is not None and a != b and norm(a) == norm(b):
            drop_t.add(a), drop_r.add(b)
        elif a is not None and b is None and META_ONLY.match(a):
            drop_t.add(a)
        elif b is not None and a is None and META_ONLY.match(b):
            drop_r.add(b)
        else:
            continue
        fire("fresh_inode_breaks_dst_links")
    return [l for l in t_lines if l not in drop_t], [l for l in r_lines if l not in drop_r]


def line_diff(a, b):
    import difflib
    out = []
    for l in difflib.unified_diff(b, a, "rsync -i", "treesync -i", n=1, lineterm=""):
        out.append(l)
    return out[:40]


def compare_trees(t_snap, r_snap, ctx):
    t, tg = t_snap
    r, rg = r_snap
    diffs = []
    if t is None or r is None:
        if (t is None) != (r is None):
            diffs.append("destination exists: treesync %s, rsync %s" % (t is not None, r is not None))
        return diffs
    symlink_mtime = ctx["symlink_mtime"]
    kept_io = set()  # rule io_error_deletion_order: kept by treesync, deleted by rsync
    kept_rules = set()  # rule rule_files_both_sides: the same for what SRC's rule files protect
    hard_h = "-H" in ctx["opts"]
    members = group_members(ctx) if hard_h else set()
    before = ctx.get("dst_before") or {}
    unreadable_kept = ctx.get("unreadable_kept") or set()

    def unreadable_at(p):
        return any(p == q or p.startswith(q + "/") for q in unreadable_kept)
    kept_any = set(p for p in t if p not in r and p in before and before[p][:2] == t[p][:2] and
                   (ctx.get("io_error_both") or ctx.get("rule_files_delete") or ctx.get("max_delete_over") or
                    unreadable_at(p)))
    replaced_kept = ctx.get("replaced_kept") or set()
    # rule hardlink_first_kept: under -u / --ignore-existing, a name of a SRC group that treesync
    # left as DST had it (a directory with what it holds too) where rsync made SRC's file
    first_kept = set()
    if hard_h and ("-u" in ctx["opts"] or "--ignore-existing" in ctx["opts"]):
        for q in set(n for g in ctx.get("src_groups") or [] for n in g):
            if q in before and q in t and q in r and r[q][0] == "f" and t[q][:2] == before[q][:2] != r[q][:2] and \
                    all(t[x][:2] == before[x][:2] for x in t if x.startswith(q + "/")) and \
                    all(x in t for x in before if x.startswith(q + "/")):
                first_kept.add(q)
    ctx["first_kept"] = first_kept
    for p in sorted(set(t) | set(r)):
        if any(p == q or p.startswith(q + "/") for q in replaced_kept):
            fire("rule_files_both_sides")
            continue
        if any(p == q or p.startswith(q + "/") for q in first_kept):
            fire("hardlink_first_kept")  # left as DST had it (checked above); rsync synced it on its own
            continue
        if p not in r:
            old = (ctx.get("dst_before") or {}).get(p)
            if ctx.get("io_error_both") and old is not None and old[:2] == t[p][:2]:
                fire("io_error_deletion_order")
                kept_io.add(p)
                continue
            if ctx.get("rule_files_delete") and old is not None and old[:2] == t[p][:2]:
                fire("rule_files_both_sides")
                kept_rules.add(p)
                continue
            if unreadable_at(p) and old is not None and old[:2] == t[p][:2]:
                fire("user_unreadable_kept")
                kept_rules.add(p)
                continue
            if ctx.get("max_delete_over") and old is not None and old[:2] == t[p][:2]:
                fire("max_delete_whole_run")  # rsync deleted the first N; treesync none
                kept_rules.add(p)
                continue
            src = src_followed(ctx, p)
            if hard_h and "--existing" in ctx["opts"] and p in members and t[p][0] == "f" and old is not None and \
                    old[0] != "f" and src is not None and src[0] == "f" and t[p][1] == src[1]:
                fire("hardlink_existing_replaced")  # rsync removed DST's entry and made nothing
                continue
            diffs.append("treesync only: %r %s" % (p, t[p][0]))
            continue
        if p not in t:
            diffs.append("rsync only:    %r %s" % (p, r[p][0]))
            continue
        a, b = t[p], r[p]
        fields = ["type", "content", "mode", "mtime", "uid", "gid"]
        for k, name in enumerate(fields):
            if a[k] == b[k]:
                continue
            if name == "mtime" and a[0] == "d" == b[0] and min(a[k], b[k]) >= ctx.get("started_ns", 1 << 62):
                fire("run_time_dir_mtime")
                continue
            if name == "mtime" and p == "" and ctx["dst_mtime_free"]:
                continue  # DST itself when SRC has no slash: neither tool sets it (made 'now' by both)
            src = src_followed(ctx, p)  # under -L also below a symlinked directory (seed 5150331 case 173)
            old = (ctx.get("dst_before") or {}).get(p)
            if name == "mtime" and a[0] == "d" == b[0] and any(parent(q) == p for q in kept_any):
                # rules rule_files_both_sides / io_error_deletion_order: a directory treesync kept
                # entries in, which rsync emptied ('now')
                fire("io_error_deletion_order" if ctx.get("io_error_both") else
                     "max_delete_whole_run" if ctx.get("max_delete_over") else "rule_files_both_sides")
                continue
            if name == "mode" and "--no-perms" in ctx["opts"] and a[0] == b[0] and a[0] not in ("f", "d", "l") and \
                    old is not None and old[0] != a[0] and src is not None and b[2] & 0o7777 == old[2] & 0o7777 and \
                    a[2] == src[2] & ~UMASK:
                fire("special_no_perms_old_mode")  # rsync kept the replaced entry's bits
                continue
            if name == "mode" and not IS_ROOT and a[0] == b[0] != "l" and old is not None and old[0] == a[0] and \
                    not old[2] & 0o200 and a[2] == old[2] and b[2] == old[2] | 0o200:
                fire("user_opened_entry_kept")  # rsync opened it up to delete in it, and left it so
                continue
            if hard_h and p in members and a[0] == "f" == b[0] and name != "type":
                if name != "content":
                    fire("hardlink_leader")  # the group's inode: another first name's metadata
                    continue
                kept_by_rsync = old is not None and old[0] == "f" and b[1] == old[1]
                group_dst = set()
                for g in ctx.get("src_groups") or []:
                    if p in g:
                        group_dst |= set(v[1] for q, v in (ctx.get("dst_before") or {}).items() if q in g and v[0] == "f")
                if not (kept_by_rsync and a[1] != old[1]) and src is not None and a[1] == src[1]:
                    fire("hardlink_leader")
                    continue
                if not (kept_by_rsync and a[1] != old[1]) and a[1] in group_dst:
                    fire("hardlink_first_kept")  # linked to the first name's copy -u / --ignore-existing kept
                    continue
            if name == "content" and a[0] == "f" == b[0] and src is not None and old is not None and \
                    a[k] == src[k] and b[k] == old[k]:
                # rule fresh_inode_breaks_dst_links: treesync wrote the file afresh (owner, group, or
                # other links) with SRC's data; rsync's quick check kept DST's same-size, same-mtime data
                fire("fresh_inode_breaks_dst_links")
                continue
            if p in ctx.get("dst_linked", ()) and a[0] == "f" == b[0] and ((name in ("mode", "mtime", "uid", "gid", "content") and
                                                                  src is not None and a[k] == src[k]) or
                                                                 (name != "content" and old is not None and a[k] == old[k])):
                # rule fresh_inode_breaks_dst_links: rsync changed the shared inode in place, so this
                # name took another member's metadata; treesync's copy has SRC's, or (not written)
                # DST's own
                fire("fresh_inode_breaks_dst_links")
                continue
            dropped = setid_dropped(ctx, src_followed(ctx, p), p) if name == "mode" and a[0] == "f" == b[0] else 0
            if dropped and (a[k] ^ b[k]) & ~dropped == 0 and a[k] & ~b[k] == 0:
                fire("setid_without_owner")  # treesync's copy lacks only the set-ID bits it may not keep
                continue
            if name == "mtime" and a[0] == "l" == b[0] and not symlink_mtime:
                fire("pending_symlink_mtime")
                continue
            diffs.append("%r %s: treesync %s, rsync %s" % (p, name, fmt(name, a[k]), fmt(name, b[k])))
            break
    if kept_io or kept_rules:  # a hard link of DST that treesync kept where rsync deleted its names
        tg = [g for g in (tuple(p for p in g if p not in kept_io | kept_rules) for g in tg) if len(g) > 1]
    if tg != rg and "-H" not in ctx["opts"] and all(any(set(g) <= set(h) for h in rg) for g in tg):
        fire("fresh_inode_breaks_dst_links")
    elif tg != rg and hard_h and set(p for g in tg + rg for p in g) - set(p for g in tg if g in rg for p in g) <= members:
        fire("hardlink_leader")  # which names a group's first name was linked to
    elif tg != rg:
        diffs.append("hard-link groups: treesync %s, rsync %s" % (tg, rg))
    return diffs


def fmt(name, v):
    if name == "mode":
        return oct(v)
    return repr(v)


def pick_options(rng, have, specials_in_tree, slash, extra=None):
    """Returns the option list: always -a, or -r -p -t plus a link mode or none (rule rpt_always_on),
    and a random subset of the shared options."""
    opts = []
    if rng.random() < 0.5:
        opts.append("-a")
        fire("rpt_always_on")
        if rng.random() < 0.2:
            opts.append("-L")
    else:
        opts += ["-r", "-p", "-t"]
        fire("rpt_always_on")
        link_mode = rng.choice(["-l", "-l", "-L"])
        # a quarter of these sets have no link option: both tools skip symlinks, naming each (drawn
        # from a generator of its own, so the cases' other draws stay those of the fixed seed; seeded
        # by the state's integers alone: its last item is None, whose hash differs from one run to
        # the next before Python 3.12, which made the "fixed" cases differ between runs)
        if random.Random(hash(rng.getstate()[:2])).random() >= 0.25:
            opts.append(link_mode)
        if IS_ROOT and rng.random() < 0.4:
            opts.append("-o")
        if rng.random() < 0.4:
            opts.append("-g")
        if specials_in_tree and rng.random() < 0.5:
            opts.append("-D")
    if rng.random() < 0.3:
        # -H: rule hardlink_leader (which name leads a group), rsync_hard_link_failure (rsync's own)
        opts.append("-H")
    k = rng.random()
    if k < 0.12:
        opts.append("-u")
    elif k < 0.24:
        opts.append("-c")
    elif k < 0.32:
        opts.append("--size-only")
    elif k < 0.35:
        opts += rng.sample(["-u", "-c", "--size-only"], 2)  # rule compare_exclusive
    if rng.random() < 0.5:
        opts.append("--delete")
        if extra and "--max-delete" in have and extra.random() < 0.25:  # rule max_delete_whole_run
            opts.append("--max-delete=%d" % extra.choice([1, 1, 2, 3, 5]))
    if "--existing" in have and rng.random() < 0.1 and slash:  # rule pending_existing_makes_dst_name
        opts.append("--existing")
    if "--ignore-existing" in have and rng.random() < 0.1:
        opts.append("--ignore-existing")
    if "--no-perms" in have and rng.random() < 0.1:
        opts.append("--no-perms")
    return opts


def pick_filters(rng, name):
    """Filter options over the generated names; `name` is SRC's NAME when SRC has no slash."""
    opts = []
    pre = "/" + name if name else ""
    choices = [
        ["--exclude=*.o"], ["--exclude=*.tmp", "--exclude=sub/"], ["--exclude=" + pre + "/a"],
        ["--include=*/", "--include=*.c", "--exclude=*"], ["--exclude=with space"], ["--exclude=-dash"],
        ["--include=keep.o", "--exclude=*.o"], ["--exclude=名前/"], ["--exclude=" + pre + "/sub/**"],
        ["--filter=- Z"], ["--exclude=.hidden"], ["--exclude=*/b"],
    ]
    for _ in range(rng.choice([1, 1, 2])):
        opts += rng.choice(choices)
    return opts


class Runner:
    def __init__(self, cli, rsync, work, verbose, keep):
        self.cli, self.rsync, self.work, self.verbose, self.keep = cli, rsync, work, verbose, keep
        self.have = set(re.findall(r"(--[a-z][a-z-]*)", subprocess.run(
            [cli, "--help"], stdout=subprocess.PIPE, universal_newlines=True).stdout))
        self.symlink_mtime = self.probe_symlink_mtime()
        self.failures = 0

    def probe_symlink_mtime(self):
        d = tempfile.mkdtemp(dir=self.work, prefix="probe-")
        try:
            os.mkdir(os.path.join(d, "s"))
            os.symlink("x", os.path.join(d, "s", "l"))
            os.utime(os.path.join(d, "s", "l"), ns=(T0, T0), follow_symlinks=False)
            subprocess.run([self.cli, "-a", "-q", os.path.join(d, "s") + "/", os.path.join(d, "t")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                return os.lstat(os.path.join(d, "t", "l")).st_mtime_ns == T0
            except OSError:
                return False
        finally:
            rmtree(d)

    def case(self, seed, k):
        rng = random.Random("%d/%d" % (seed, k))
        # the draws added for issue 32 (--max-delete, --state, unreadable files) come from a second
        # generator: the trees and options of every case stay what they were (the case numbers the
        # rules cite still name the same cases)
        extra = random.Random("%d/%d/32" % (seed, k))
        names = list(NAMES)
        # --safe-links (issue 46) from a generator of its own too, as is what it changes in the trees
        links46 = random.Random("%d/%d/46/safe-links" % (seed, k))  # not -I's stream ("%d/%d/46")
        safe_links = "--safe-links" in self.have and links46.random() < 0.3
        gen = Gen(rng, names, links46 if safe_links else None)
        specials = rng.random() < 0.2
        size = rng.choice([0, 3, 8, 15, 25, 40])
        base = gen.tree(size, specials)
        slash = rng.random() < 0.5
        name = "" if slash else "src"
        state = rng.choice(["missing", "empty", "mirror", "mirror", "mirror+", "mirror+", "unrelated"])
        src = {p: e.copy() for p, e in base.items()}
        if state.startswith("mirror") or rng.random() < 0.5:
            gen.churn(src, rng.choice([1, 3, 6, 12]), specials)
        unreadable = not IS_ROOT and extra.random() < UNREADABLE_RATE
        dst = None
        if state == "empty":
            dst = {"": Entry("d", mode=0o755, mtime=gen.mtime())}
        elif state.startswith("mirror"):
            dst = {p: e.copy() for p, e in base.items()}
            if state == "mirror+":
                gen.churn(dst, rng.choice([1, 3, 6]), specials)
        elif state == "unrelated":
            dst = gen.tree(rng.choice([3, 10]), specials)
        if dst is not None and name:
            # the mirror of SRC without a slash lives in DST/NAME; DST may hold other entries
            wrapped = {"": Entry("d", mode=0o755, mtime=gen.mtime())}
            if rng.random() < 0.3:
                wrapped["other"] = gen.file()
            if state != "empty" and rng.random() < 0.96:
                for p, e in dst.items():
                    wrapped[join(name, p)] = e
            elif state != "empty":
                wrapped[name] = gen.file()  # rule dst_name_not_directory
            dst = wrapped
        if rng.random() < 0.15:
            # -F: rule files in SRC's directories
            for d in [p for p, e in src.items() if e.kind == "d"][:3]:
                src[join(d, ".rsync-filter")] = Entry("f", rng.choice([b"- *.tmp\n", b"- e.tmp\n+ *.c\n- x*\n",
                                                                       b"- /a\n", b"- sub/\n"]), 0o644, gen.mtime())
            rule_files = ["-F"] if rng.random() < 0.5 else ["-F", "-F"]
        else:
            rule_files = []
        opts = pick_options(rng, self.have, any(e.kind == "p" for e in src.values()), slash, extra)
        if unreadable and "-H" not in opts and not any(e.group is not None for t_ in (src, dst or {}) for e in t_.values()):
            # what only a user meets: a SRC file it cannot read (mode 0o000).  Not where a file is
            # hard-linked (-H, or links in DST): treesync writes such a file afresh for its metadata
            # (rule fresh_inode_breaks_dst_links), reading SRC where rsync chmods DST's in place
            cands = [p for p, e in src.items() if p and e.kind == "f" and not e.foreign]
            if cands:
                src[extra.choice(cands)].mode = 0o000
                fire("user_unreadable_file")
        if not slash and "--existing" in self.have:
            fire("pending_existing_makes_dst_name")
        if rng.random() < 0.35:
            opts += pick_filters(rng, name)
            if rng.random() < 0.3:
                opts.append("--delete-excluded")
        replaced = dst is not None and any(
            p and e.kind != "d" and (join(name, p) if name else p) in dst and dst[join(name, p) if name else p].kind == "d"
            for p, e in src.items())
        if replaced and any(o.startswith("--max-delete") for o in opts):
            # a DST directory SRC replaces by another type: treesync counts (and makes) its deletions
            # when it comes, rsync in its walk's order with the others, so over the cap the two keep
            # different entries
            opts = [o for o in opts if not o.startswith("--max-delete")]
            fire("max_delete_replacement")
        if rule_files and any(o.startswith("--max-delete") for o in opts):
            # -F --delete: the tools delete different entries (rule rule_files_both_sides), so they
            # count different deletions against the cap
            opts = [o for o in opts if not o.startswith("--max-delete")]
            fire("max_delete_rule_files")
        opts += rule_files
        rng.shuffle(opts)
        # -I (issue 46): drawn from a generator of its own and put in after the shuffle, so every
        # other draw of a case stays what it was (the case numbers the rules cite name the same cases)
        ignore_times = random.Random("%d/%d/46" % (seed, k))
        if "--ignore-times" in self.have and ignore_times.random() < 0.15:
            opts.insert(ignore_times.randrange(len(opts) + 1), "-I")
        if safe_links:  # after the shuffle too, and after -I's draw
            opts.insert(links46.randrange(len(opts) + 1), "--safe-links")
        # --temp-dir (issue 46 item 3): likewise from a generator of its own; a directory of the case's
        # own outside DST (run_case makes it), which each tool must leave empty
        temp_dir = random.Random("%d/%d/46-T" % (seed, k))
        if "--temp-dir" in self.have and temp_dir.random() < 0.15:
            opts.insert(temp_dir.randrange(len(opts) + 1), TEMP_DIR_OPTION)
        jobs = rng.choice([None, 1, 2, 4])
        # --state (treesync's own): a state file kept outside DST, then tampered with (an entry named
        # '../canary') and the run repeated: it must be ignored, nothing outside DST deleted
        # not with -F: the run may replace DST's rule files, and the next run then keeps or deletes
        # other entries than this one did (seed 2604481 case 647), tampered state file or not
        state_phase = "--state" in self.have and "--delete" in opts and "-H" not in opts and extra.random() < 0.25 \
            and not rule_files
        if rule_files and dst is not None and rng.random() < 0.4:
            # rule files in DST's directories too (rsync -F --delete reads those where it deletes)
            for d in [p for p, e in dst.items() if e.kind == "d"][:3]:
                if join(d, ".rsync-filter") not in dst:
                    dst[join(d, ".rsync-filter")] = Entry("f", rng.choice([b"- *.o\n", b"- a\n- Z\n", b"- sub/\n"]),
                                                          0o644, gen.mtime())
        return self.run_case(seed, k, src, dst, opts, slash, name, state, jobs, state_phase)

    def state_phase(self, d, t_cmd, diffs):
        """--state: the state file the run wrote gets an entry named '../canary' in DST's root record
        (a path outside DST); the same run again (--verify=none: it would trust the record) must
        ignore the file, delete nothing outside DST (the canary stays) and change nothing in DST."""
        path = os.path.join(d, "state")
        if not os.path.isfile(path):
            return
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "surrogateescape").split("\n")
        at = next((i for i, l in enumerate(lines) if l.startswith("D 0 ")), None)
        if at is None:
            diffs.append("--state: no root record in the state file")
            return
        end = at + 1
        while end < len(lines) and lines[end].startswith("E "):
            end += 1
        fields = lines[at].split(" ")
        fields[4] = str(int(fields[4]) + 1)
        lines[at] = " ".join(fields)
        from urllib.parse import unquote_to_bytes
        entries = sorted(lines[at + 1:end] + ["E ..%2Fcanary 1 -"], key=lambda l: unquote_to_bytes(l.split(" ")[1]))
        lines[at + 1:end] = entries
        with open(path, "wb") as f:
            f.write("\n".join(lines).encode("utf-8", "surrogateescape"))
        canary = os.path.join(d, "canary")
        with open(canary, "wb") as f:
            f.write(b"keep")
        before = snapshot(os.path.join(d, "t"))
        p = subprocess.run(t_cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        fire("state_tampered_ignored")
        if not os.path.exists(canary):
            diffs.append("--state: a state file naming ../canary made treesync delete it (outside DST)")
        if p.returncode != 0:
            diffs.append("--state: the run with the tampered state file exited %d" % p.returncode)
        if snapshot(os.path.join(d, "t")) != before:
            diffs.append("--state: the run with the tampered state file changed DST")

    def run_case(self, seed, k, src_tree, dst_tree, opts, slash, name, state, jobs=None, state_phase=False):
        d = tempfile.mkdtemp(dir=self.work, prefix="case-")
        materialize(src_tree, os.path.join(d, "src"))
        if "--ignore-existing" in opts and dst_tree is not None and \
                dir_over_other(os.path.join(d, "src"), dst_tree, name, "-L" in opts):
            opts = [o for o in opts if o != "--ignore-existing"]
            fire("rsync_ignore_existing_dir_over_other")
        if "-L" in opts and has_link_loop(os.path.join(d, "src")):
            opts = ["-l" if o == "-L" else o for o in opts]
            fire("rsync_L_symlink_cycle")
        if "-L" in opts:
            for root, dirs, files in os.walk(os.path.join(d, "src")):
                for n in dirs + files:
                    full = os.path.join(root, n)
                    if os.path.islink(full):
                        if IS_ROOT and os.lstat(full).st_uid != 0:
                            os.lchown(full, 0, os.lstat(full).st_gid)
                            fire("rsync_untrusted_symlink")
        if dst_tree is not None and any(e.foreign for e in dst_tree.values()):
            # DST is the user's: a FOREIGN file there becomes a file of the user's with its content,
            # mode and mtime (an unchanged copy the user made)
            dst_tree = dict(dst_tree)
            for p_, e in list(dst_tree.items()):
                if e.foreign:
                    st_ = os.stat(e.foreign)
                    with open(e.foreign, "rb") as f:
                        dst_tree[p_] = Entry("f", f.read(), stat.S_IMODE(st_.st_mode), st_.st_mtime_ns, group=e.group)
        for who in ("t", "r"):
            if dst_tree is not None:
                materialize(dst_tree, os.path.join(d, who))
        src_arg = "src/" if slash else "src"
        temp_dir = os.path.join(d, "tmp")
        if TEMP_DIR_OPTION in opts:
            os.mkdir(temp_dir)
            opts = [("--temp-dir=" + temp_dir) if o == TEMP_DIR_OPTION else o for o in opts]
        # treesync's workers (rsync has no such option): the default (4), or one drawn
        t_extra = ["-j%d" % jobs] if jobs else []
        if state_phase:
            t_extra += ["--state=state", "--verify=none"]
        t_cmd = [self.cli] + opts + t_extra + ["-i", src_arg, "t"]
        r_cmd = [self.rsync] + opts + ["-i", src_arg, "r"]
        before = snapshot(os.path.join(d, "t"))
        src_snap = snapshot(os.path.join(d, "src"), follow_files="-L" in opts)
        started_ns = time.time_ns() - 10**9 if hasattr(time, "time_ns") else int((time.time() - 1) * 1e9)
        tp = subprocess.run(t_cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        temp_left = os.listdir(temp_dir) if os.path.isdir(temp_dir) else []
        rp = run_bounded(r_cmd, d)
        if "-H" in opts and (rp is None or (rp.returncode == 2 and (b"(finish_hard_link)" in rp.stderr or
                                                                   b"(got_flist_entry_status)" in rp.stderr)) or
                             (rp.returncode == 13 and b"Hlink node data for " in rp.stderr)):
            # generator constraint rsync_hard_link_failure: rsync itself failed, nothing to compare
            fire("rsync_hard_link_failure")
            rmtree(d)
            return True
        if rp is None:
            rp = subprocess.CompletedProcess(r_cmd, -9, b"", b"rsync timed out")
        t_out = tp.stdout.decode("utf-8", "surrogateescape")
        r_out = rp.stdout.decode("utf-8", "surrogateescape")
        ctx = {"opts": opts, "symlink_mtime": self.symlink_mtime, "dst_mtime_free": bool(name),
               "dst_linked": set(p for g in (before[1] if before[0] is not None else []) for p in g),
               "dst_before": before[0], "started_ns": started_ns,
               # rule io_error_deletion_order: treesync skipped its deletions for a source error
               # that rsync met too (rsync says so only when a deletion came after it)
               "io_error_both": b"IO error encountered -- skipping file deletion" in tp.stderr and
                                rp.returncode == 23,
               "src_meta": {(join(name, p) if name else p): v for p, v in (src_snap[0] or {}).items()},
               "src_root": os.path.join(d, "src") if "-L" in opts else None, "src_name": name,
               "src_groups": [tuple(join(name, p) if name else p for p in g)
                              for g in (source_link_groups(os.path.join(d, "src"), "-L" in opts) if "-H" in opts else [])],
               "dst_groups": before[1] if before[0] is not None else [],
               # rule max_delete_whole_run: rsync stopped at the cap (the first N deleted)
               "max_delete_over": any(o.startswith("--max-delete") for o in opts) and
                                  b"Deletions stopped due to --max-delete limit" in rp.stderr,
               "rule_files_delete": "-F" in opts and "--delete" in opts and "--delete-excluded" not in opts}
        diffs = []
        if temp_left:
            diffs.append("--temp-dir: treesync left %r in it" % sorted(temp_left)[:3])
        t_snap = snapshot(os.path.join(d, "t"))
        r_snap = snapshot(os.path.join(d, "r"))
        expected_refusal = None
        compare = [o for o in opts if o in ("-u", "-c", "--size-only")]
        src_empty = len(src_tree) == 1
        dst_root = dst_tree if not name else {p[len(name) + 1:]: e for p, e in (dst_tree or {}).items()
                                              if p.startswith(name + "/")}
        if len(set(compare)) > 1:
            expected_refusal = ("compare_exclusive", 1)
        elif name and dst_tree is not None and name in dst_tree and dst_tree[name].kind != "d":
            expected_refusal = ("dst_name_not_directory", 2)
        elif src_empty and dst_root and ("--delete" in opts or "--delete-excluded" in opts) and \
                any(p for p in dst_root):
            expected_refusal = ("empty_source_refused", 2)
        if expected_refusal and expected_refusal[0] == "dst_name_not_directory" and tp.returncode == 0 == \
                rp.returncode and t_snap == before and r_snap == before:
            fire("dst_name_not_directory")  # NAME excluded: nothing done by either
        elif expected_refusal:
            rule, code = expected_refusal
            if tp.returncode != code:
                diffs.append("%s: treesync should refuse with exit %d, exited %d" % (rule, code, tp.returncode))
            if t_snap != before:
                diffs.append("%s: treesync changed DST although it refused" % rule)
            if not diffs:
                fire(rule)
        else:
            # rule rule_files_both_sides: a DST directory SRC replaces by another type, holding what
            # DST's rule files exclude: rsync replaces it, treesync keeps it ('rmdir NAME ...: Directory
            # not empty', exit 23)
            t_err0 = decode_treesync(tp.stderr.decode("utf-8", "surrogateescape"))
            ctx["replaced_kept"] = set()
            if ctx["rule_files_delete"] and t_snap[0] is not None and r_snap[0] is not None:
                for p_, v in t_snap[0].items():
                    rv, ov = r_snap[0].get(p_), (before[0] or {}).get(p_)
                    rel = p_[len(name) + 1:] if name else p_
                    if v[0] == "d" and ov is not None and ov[0] == "d" and rv is not None and rv[0] != "d" and \
                            ("rmdir %s (destination " % rel) in t_err0 and "Directory not empty" in t_err0:
                        ctx["replaced_kept"].add(p_)
            # rule user_readonly_dir_replaced: what rsync could not replace as a user
            # each line decoded on its own: a name's escaped newline must not split its line (seed
            # 4418207 case 260, 'unlink(src/--opt/nl\\#012name) failed')
            r_lines = [decode_rsync(l) for l in rp.stderr.decode("utf-8", "surrogateescape").split("\n")]
            t_lines = [decode_treesync(l) for l in tp.stderr.decode("utf-8", "surrogateescape").split("\n")]
            r_err0 = "\n".join(r_lines)
            user_replaced = set()
            if not IS_ROOT and "failed: Permission denied (13)" in r_err0:
                for m in (re.match(r"could not make way for new [a-z ]*: (.*)$", l, re.S) for l in r_lines):
                    if m:
                        user_replaced.add(m.group(1))
            ctx["replaced_kept"] |= user_replaced
            ctx["unreadable_kept"] = set()
            if not IS_ROOT:
                for m in (re.match(r"treesync: copy (.*) \(source .*\): Permission denied$", l, re.S) for l in t_lines):
                    if m:
                        ctx["unreadable_kept"].add(join(name, m.group(1)) if name else m.group(1))
            ctx["user_replaced"] = user_replaced
            r_errors = [l for l in r_lines if l and not l.startswith("rsync error: ")]
            if tp.returncode != rp.returncode:
                if user_replaced and (tp.returncode, rp.returncode) == (0, 23) and all(
                        ("rmdir(" in l or "unlink(" in l) and "Permission denied" in l or l.startswith("could not make way for new ")
                        for l in r_errors):
                    fire("user_readonly_dir_replaced")
                elif ctx["max_delete_over"] and (tp.returncode, rp.returncode) == (25, 23):
                    fire("max_delete_whole_run")  # another error too: rsync says 23, treesync 25
                elif not IS_ROOT and "-H" in opts and (tp.returncode, rp.returncode) == (0, 23) and r_errors and all(
                        re.match(r'^rsync: \[(generator|receiver)\] chgrp ".*" failed: Operation not permitted \(1\)$', l, re.S)
                        for l in r_errors):
                    fire("rsync_hlink_foreign_group")
                elif ctx["replaced_kept"] and (tp.returncode, rp.returncode) == (23, 0):
                    fire("rule_files_both_sides")
                else:
                    diffs.append("exit status: treesync %d, rsync %d" % (tp.returncode, rp.returncode))
            if state == "missing" and name and r_snap[0] is not None and set(r_snap[0]) == {""} \
                    and t_snap[0] is not None and set(t_snap[0]) == {"", name}:
                fire("rsync_single_entry_dst")
                t_snap = r_snap
                t_out = "\n".join(l for l in t_out.split("\n") if not l.startswith("cd+++++++++ %s/" % name))
                r_out = "\n".join(l for l in r_out.split("\n") if not l.startswith("cd+++++++++ %s/" % name))
            elif state == "missing" and "--existing" in opts and r_snap[0] is None and t_snap[0] is not None \
                    and set(t_snap[0]) == {""}:
                fire("rsync_single_entry_dst")
                t_snap = r_snap
                t_out = "\n".join(l for l in t_out.split("\n") if l != "cd+++++++++ ./")
            if ctx["max_delete_over"] and re.search(r"^\*deleting ", t_out, re.M):
                diffs.append("max_delete_whole_run: over --max-delete treesync deleted (it must delete nothing)")
            ctx["t_tree"] = t_snap[0]  # rule setid_without_owner: the group a copy gets from its directory
            diffs += compare_trees(t_snap, r_snap, ctx)
            notices = []
            diffs += compare_itemized(itemized_treesync(t_out), itemized_rsync(r_out, notices), ctx)
            t_err = decode_treesync(tp.stderr.decode("utf-8", "surrogateescape"))
            for l in notices:
                if isinstance(l, tuple):  # rule nonempty_dir_message: NAME relative to DST
                    rel = l[1][len(name) + 1:] if name else l[1]
                    if ("rmdir %s (destination " % rel) in t_err and "Directory not empty" in t_err:
                        fire("nonempty_dir_message")
                    elif l[1] in ctx["unreadable_kept"]:
                        # rule user_unreadable_kept: treesync failed to read the SRC file before it came
                        # to the directory (both keep it, exit 23: seed 3051977 case 857, as a user)
                        fire("user_unreadable_kept")
                    elif l[1] not in ctx["src_meta"] or "--delete" in opts or "--delete-excluded" in opts:
                        fire("extraneous_dir_kept_message")  # kept by both: the trees are compared
                    else:
                        diffs.append("rsync's 'cannot delete non-empty directory: %s' has no rmdir error on "
                                     "treesync's stderr" % l[1])
                elif l not in t_err:
                    diffs.append("rsync's %r is not on treesync's stderr" % l)
        if state_phase and not diffs and tp.returncode == 0 and rp.returncode == 0:
            self.state_phase(d, t_cmd, diffs)
        if diffs:
            self.failures += 1
            print("FAIL seed %d case %d (destination: %s)" % (seed, k, state))
            print("  cd %s" % d)
            print("  %s" % " ".join(shell_quote(a) for a in t_cmd))
            print("  %s" % " ".join(shell_quote(a) for a in r_cmd))
            for l in diffs[:25]:
                print("    " + l)
            if tp.stderr:
                print("  treesync stderr: %r" % tp.stderr.decode("utf-8", "replace")[:400])
            if rp.stderr:
                print("  rsync stderr:    %r" % rp.stderr.decode("utf-8", "replace")[:400])
            print("  reproduce: %s --cli %s --seed %d --case %d --keep" % (sys.argv[0], self.cli, seed, k))
            if self.keep:
                kept = os.path.join(self.work, "case-%d-%d" % (seed, k))
                os.rename(d, kept)
                print("  kept in %s" % kept)
            sys.stdout.flush()
        elif self.verbose:
            print("ok seed %d case %d: %s %s" % (seed, k, " ".join(opts), src_arg))
        if os.path.lexists(d) and (not diffs or not self.keep):
            rmtree(d)
        return not diffs


def run_bounded(cmd, cwd):
    """Runs rsync in a process group of its own; None when it is still running after RSYNC_TIMEOUT
    (the whole group is killed: its other processes hold the pipes open)."""
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=RSYNC_TIMEOUT)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, 9)
        except OSError:
            pass
        p.communicate()
        return None
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def regressions(r):
    """Fixed cases for the differences this test found and that were fixed in treesync; each failed
    before its fix.  Returns the number that failed."""
    def d(mode=0o755, t=T0, uid=0, gid=0):
        return Entry("d", mode=mode, mtime=t, uid=uid, gid=gid)
    cases = []
    if IS_ROOT:
        # -o/-g on symlinks: a new link gets SRC's owner and group, an existing one with the same
        # target is made afresh with them (.L....og...), one with another target too (cLc...og...)
        src = {"": d(), "l": Entry("l", target="tgt", uid=1000, gid=1234), "m": Entry("l", target="t1", uid=1000, gid=1234),
               "n": Entry("l", target="x", uid=7, gid=7)}
        dst = {"": d(), "l": Entry("l", target="tgt"), "m": Entry("l", target="t2")}
        cases.append(("symlink owner and group", src, dst, ["-a"]))
        cases.append(("symlink group only", src, dst, ["-rptl", "-g"]))
    # a read-only DST directory opened up for a write and restored: no '.d...p.....' line
    src = {"": d(), "ro": d(0o555, uid=1234 if IS_ROOT else 0), "ro/f": Entry("f", b"x", 0o644, T0)}
    dst = {"": d(), "ro": d(0o555, uid=1234 if IS_ROOT else 0)}
    cases.append(("read-only directory written into", src, dst, ["-a"]))
    # an empty SRC without --delete copies nothing and deletes nothing (no refusal)
    cases.append(("empty SRC without --delete", {"": d()}, {"": d(), "keep": Entry("f", b"k", 0o644, T0)}, ["-a"]))
    failed = 0
    for k, (what, src, dst, opts) in enumerate(cases):
        ok = r.run_case(-1, k, src, dst, opts, True, "", "regression: " + what)
        print("  %s regression: %s" % ("ok  " if ok else "FAIL", what))
        failed += not ok
    return failed


RUNNER = None


def pool_init(args):
    global RUNNER
    RUNNER = Runner(*args)


def pool_case(task):
    """One case in a pool process: (ok, its printed text, the rules it fired)."""
    seed, k = task
    FIRED.clear()
    buf, old = io.StringIO(), sys.stdout
    sys.stdout = buf
    try:
        ok = RUNNER.case(seed, k)
    finally:
        sys.stdout = old
    return ok, buf.getvalue(), dict(FIRED)


def shell_quote(a):
    return a if re.match(r"^[\w./=+-]+$", a) else "'" + a.replace("'", "'\\''") + "'"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--rsync", default=shutil.which("rsync"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--cases", type=int, default=DEFAULT_CASES)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--case", type=int, default=None, help="run only this case of --seed")
    ap.add_argument("--keep", action="store_true", help="keep the last (or failing) case's trees")
    ap.add_argument("--max-failures", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="cases run at once (default %d)" % DEFAULT_JOBS)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--shard", default=None, metavar="K/N",
                    help="run only the cases at places K, K+N, K+2N, ... of the plan (0 <= K < N)")
    ap.add_argument("--check-shards", type=int, default=None, metavar="N",
                    help="check that N shards split the plan of --cases into disjoint parts covering it, and exit")
    ap.add_argument("--foreign", default=None,
                    help="a directory of files of another owner and group, mode 0666, to hard-link into SRC (non-root)")
    a = ap.parse_args()
    a.cases = capped_cases(a.cases)
    shard = parse_shard(a.shard) if a.shard is not None else None
    if a.check_shards is not None:
        if a.check_shards < 1:
            raise SystemExit("rsync_diff_test: --check-shards needs a number of shards >= 1")
        return check_shards([(DEFAULT_SEED, k) for k in range(a.cases)], a.check_shards)
    if a.foreign:
        FOREIGN.extend(sorted(os.path.join(os.path.abspath(a.foreign), n) for n in os.listdir(a.foreign)))
    if not a.rsync:
        print("rsync_diff_test: no rsync on PATH: nothing to compare against (skipped)")
        return 77
    cli = os.path.abspath(a.cli)
    if a.work:
        os.makedirs(a.work, exist_ok=True)
        work = tempfile.mkdtemp(dir=a.work, prefix="rsync-diff-")
    else:
        work = tempfile.mkdtemp(prefix="rsync-diff-")
    env_seed = os.environ.get("TREESYNC_DIFF_SEED")
    given = a.seed if a.seed is not None else (int(env_seed) if env_seed else None)
    run_seed = random.SystemRandom().randrange(1, 2**31)
    if given is not None:
        plan = [(given, k) for k in ([a.case] if a.case is not None else range(a.cases))]
        print("rsync_diff_test: seed %d, %d case(s)" % (given, len(plan)))
    elif not os.environ.get("TREESYNC_DIFF_EXPLORE"):
        # CI: the fixed seed only, so that a run passes or fails for the code, never for the draw (a
        # drawn seed found seed 563300701 case 82 in a CI run: a finding belongs in an issue, not in a
        # red CI); TREESYNC_DIFF_EXPLORE=1 adds a drawn seed for the second half, to look for more
        plan = [(DEFAULT_SEED, k) for k in range(a.cases)]
        print("rsync_diff_test: seed %d (fixed), %d cases (TREESYNC_DIFF_EXPLORE=1 adds a drawn seed)" % (DEFAULT_SEED, a.cases))
    else:
        half = a.cases // 2
        plan = [(DEFAULT_SEED, k) for k in range(half)] + [(run_seed, k) for k in range(a.cases - half)]
        print("rsync_diff_test: %d cases: seed %d (fixed) 0..%d, seed %d (this run) 0..%d" % (
            a.cases, DEFAULT_SEED, half - 1, run_seed, a.cases - half - 1))
    if shard is not None:
        whole = len(plan)
        plan = shard_plan(plan, shard)
        print("rsync_diff_test: shard %d/%d: %d of the %d cases (places %d, %d, %d, ...)" % (
            shard[0], shard[1], len(plan), whole, shard[0], shard[0] + shard[1], shard[0] + 2 * shard[1]))
    r = Runner(cli, a.rsync, work, a.verbose, a.keep)
    print("  %s; %s; root: %s; treesync sets symlink mtimes: %s; probed options: %s" % (
        subprocess.run([a.rsync, "--version"], stdout=subprocess.PIPE, universal_newlines=True).stdout.split("\n")[0],
        cli, IS_ROOT, r.symlink_mtime,
        " ".join(o for o in ("--existing", "--ignore-existing", "--no-perms", "--safe-links") if o in r.have) or "none of the pending"))
    sys.stdout.flush()
    start = time.monotonic()
    done = 0
    if given is None or a.case is None:
        regressions(r)
    if a.jobs <= 1 or len(plan) <= 1:
        for seed, k in plan:
            r.case(seed, k)
            done += 1
            if r.failures >= a.max_failures:
                print("stopping after %d failures" % r.failures)
                break
    else:
        with multiprocessing.get_context("fork").Pool(
                a.jobs, pool_init, ((cli, a.rsync, work, a.verbose, a.keep),)) as pool:
            for ok, text, fired in pool.imap_unordered(pool_case, plan, chunksize=8):
                done += 1
                sys.stdout.write(text)
                sys.stdout.flush()
                for rule, n in fired.items():
                    FIRED[rule] = FIRED.get(rule, 0) + n
                if not ok:
                    r.failures += 1
                    if r.failures >= a.max_failures:
                        print("stopping after %d failures" % r.failures)
                        pool.terminate()
                        break
    elapsed = time.monotonic() - start
    print("rsync_diff_test: %d cases in %.1f s, %d with undocumented differences" % (done, elapsed, r.failures))
    print("  documented differences applied (README table):")
    for name in sorted(RULES):
        print("    %-32s %6d  %s" % (name, FIRED.get(name, 0), RULES[name]))
    for title, rules in (("pending (issue 24 work in flight)", PENDING),
                         ("BLOCKERS (delete what rsync keeps; avoided by the generator until fixed)", BLOCKERS),
                         ("generator constraints (rsync's own restrictions and failures)", GENERATOR)):
        print("  %s:" % title)
        for name in sorted(rules):
            print("    %-32s %6d  %s" % (name, FIRED.get(name, 0), rules[name]))
    if not a.keep or r.failures == 0:
        rmtree(work)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
