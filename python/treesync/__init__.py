"""treesync: incremental directory mirroring, from the header-only C++ library of the same name.

    import treesync
    report = treesync.sync("build/include", "pkg/include", exclude=["*.pyc", "__pycache__/"])
    treesync.sync_tree(src, dst, exclude=("*.pyc",))   # drop-in for a rmtree + copytree helper

``sync(src, dst)`` mirrors the *contents* of ``src`` into ``dst`` (``rsync -a --delete src/ dst/``),
``dst`` made when missing (not its parents).  The GIL is released while it runs; Ctrl-C stops it
within a tick (20 ms) and raises ``KeyboardInterrupt`` after the run has removed its temporaries.
"""

import errno as _errno
import os as _os
import shutil as _shutil
import threading as _threading
from typing import NamedTuple as _NamedTuple

from . import _treesync

__all__ = ["sync", "sync_tree", "Report", "EntryError", "Action", "Progress", "Error", "Refused", "Partial",
           "__version__"]

__version__ = _treesync.version

_COMPARE = {"size_mtime": 0, "size_only": 1, "update": 2, "checksum": 3, "ignore_times": 4}  # treesync::compare::kind
_LINKS = {"follow": 0, "copy_links": 0, "preserve": 1, "links": 1, "copy_unsafe_links": 2, "unsafe": 2,
          "skip": 3, "no_links": 3, "safe_links": 4, "preserve_safe": 4}
_VERIFY = {"full": 0, "dirs": 1, "none": 2}


class EntryError(_NamedTuple):
    """One per-entry outcome that is not a plain success (report.errors, .vanished, .skipped_entries,
    .notices).  ``path`` is relative to the roots ("" for a root), str or bytes like the ``src``
    given; ``side`` is "source" or "destination"; ``errno`` is None for treesync's own codes (then
    ``category`` is "treesync" and ``code`` its value)."""
    path: object
    operation: str
    side: str
    errno: object
    code: int
    category: str
    message: str
    detail: str


class Action(_NamedTuple):
    """What on_action receives, once per change: kind is create, update, update_meta, remove, skip,
    error or vanished; type file, directory, symlink, fifo, socket, ...; path as EntryError.path."""
    kind: str
    type: str
    path: object
    src_size: int
    dst_size: int
    errno: object
    message: object
    changes: list
    method: str
    sparse: bool


class Progress(_NamedTuple):
    """What progress receives, every progress_interval seconds and once at the end (final=True):
    the actions so far, the bytes of the files created or updated so far, the seconds elapsed."""
    actions: int
    bytes: int
    elapsed: float
    final: bool


class Report:
    """The outcome of a run: the counts (scanned, created, updated, meta_updated, deleted, excluded,
    skipped, cleaned, settled, bytes_copied), the lists of EntryError (errors, vanished,
    skipped_entries, notices), elapsed seconds, and whether the run was cancelled.

    ``settled`` counts racily clean files (copied within the racy window, 1 s, of their source's
    mtime) that a later run verified by content and whose mtime, already the source's, it set
    again so that runs after it trust size + mtime: nothing differed, no action is reported for
    them, and ``writes`` leaves them out; ``unchanged`` is False (their ctime moved)."""

    __slots__ = ("scanned", "created", "updated", "meta_updated", "deleted", "excluded", "skipped", "cleaned",
                 "settled", "bytes_copied", "errors", "vanished", "skipped_entries", "notices", "elapsed",
                 "cancelled", "dry_run")

    _COUNTS = ("scanned", "created", "updated", "meta_updated", "deleted", "excluded", "skipped", "cleaned",
               "settled", "bytes_copied")
    _LISTS = ("errors", "vanished", "skipped_entries", "notices")

    def __init__(self, raw, decode, dry_run=False):
        for key, value in raw["counts"].items():
            setattr(self, key, value)
        for key in self._LISTS:
            setattr(self, key, [_entry(e, decode) for e in raw[key]])
        self.elapsed = raw["elapsed"]
        self.cancelled = raw["cancelled"]
        self.dry_run = dry_run

    @property
    def ok(self):
        """True when no entry failed."""
        return not self.errors

    @property
    def unchanged(self):
        """True when the destination was not touched at all (not even a settled file's mtime set
        again to the value it had)."""
        return self.writes + self.settled == 0

    @property
    def writes(self):
        """The number of entries made, rewritten, changed (mode, mtime) or removed, temporaries of an
        earlier run included: the changes on_action reports.  0 for a warm no-op, settled files or
        not (``settled`` counts those apart)."""
        return self.created + self.updated + self.meta_updated + self.deleted + self.cleaned

    def __repr__(self):
        return "Report(%s, %s, elapsed=%.3f%s%s)" % (
            ", ".join("%s=%d" % (k, getattr(self, k)) for k in self._COUNTS),
            ", ".join("%s=%d" % (k, len(getattr(self, k))) for k in self._LISTS), self.elapsed,
            ", cancelled=True" if self.cancelled else "", ", dry_run=True" if self.dry_run else "")


# The builtin OSError subclasses, each picked by OSError(errno, ...) for its errno values.
_BUILTIN_ERRORS = sorted({type(OSError(e, "")) for e in _errno.errorcode} - {OSError}, key=lambda c: c.__name__)


def _restore(cls, errno, message, path, args, state):
    err = cls(errno, message, path)
    err.args = args
    err.__dict__.update(state)
    return err


class Error(OSError):
    """A run that failed as a whole (refused before it began, or an entry sync_tree could not copy).
    ``errno`` (None for treesync's own refusals), ``strerror`` the message as the CLI prints it,
    ``filename`` the path at fault; ``code``/``category`` the C++ std::error_code; ``report`` the
    Report of what was done before (None for a refusal).

    What is raised is also the builtin class OSError(errno, ...) picks: Error.FileNotFoundError
    (a subclass of Error and of FileNotFoundError), Error.PermissionError, Error.NotADirectoryError,
    ... (Refused.FileNotFoundError, Partial.PermissionError, ... likewise); plain Error when the
    errno has no class of its own.  ``except FileNotFoundError`` and ``except treesync.Error``
    both catch it."""

    def __init__(self, errno, message, path=None, *, code=0, category="generic", report=None, entry=None):
        if path is None:
            super().__init__(errno, message)
        else:
            super().__init__(errno, message, path)
        self.message = message
        self.path = path
        self.code = code
        self.category = category
        self.report = report
        self.entry = entry

    def __str__(self):
        return self.message

    def __reduce__(self):  # pickles (multiprocessing) with its class, args and attributes
        return (_restore, (type(self), self.errno, self.message, self.path, self.args, dict(self.__dict__)))


class Refused(Error):
    """The library refused the run by a rule of its own, before anything was touched: same or nested
    directories, an empty source over a non-empty destination, a missing source or parent of dst,
    a backup, temporary or state file path it may not use; or it would delete more than max_delete
    (``count``: how many): then every other change was made and none of the deletions."""

    def __init__(self, errno, message, path=None, *, count=None, **kw):
        super().__init__(errno, message, path, **kw)
        self.count = count


class Partial(Error, _shutil.Error):
    """sync_tree copied all it could and these entries failed: errno, filename, strerror, entry
    are the first failure's; ``errors`` every EntryError (report.errors); ``args[0]`` the list of
    (source path, destination path, message), as shutil.copytree's shutil.Error has it."""

    def __init__(self, errno, message, path=None, *, errors=(), failures=(), **kw):
        super().__init__(errno, message, path, **kw)
        self.errors = list(errors)
        self.args = (list(failures),)


def _derive(base):
    for builtin in _BUILTIN_ERRORS:
        name = builtin.__name__
        setattr(base, name, type(name, (base, builtin), {
            "__module__": __name__, "__qualname__": "%s.%s" % (base.__qualname__, name),
            "__doc__": "%s that is also a %s (errno %s)." % (base.__name__, name, ", ".join(
                sorted(_errno.errorcode[e] for e in _errno.errorcode if type(OSError(e, "")) is builtin)))}))


for _base in (Error, Refused, Partial):
    _derive(_base)
del _base


def _error(base, errno, message, path=None, **kw):
    """base(...), as the subclass of it that is also the builtin class OSError(errno, ...) picks."""
    builtin = OSError if errno is None else type(OSError(errno, ""))
    cls = base if builtin is OSError else getattr(base, builtin.__name__)
    return cls(errno, message, path, **kw)


# treesync's own per-entry codes with an errno meaning: what the copy shutil.copytree makes would
# have raised (a dangling link: the open of its target, ENOENT; a link cycle, ELOOP)
_ENTRY_ERRNO = {"dangling_symlink": _errno.ENOENT, "symlink_cycle": _errno.ELOOP, "vanished": _errno.ENOENT}


def _untrusted(what, link, owner):
    """Refused: the CLI's wording for another user's symbolic link on a path the caller named."""
    return _error(Refused, _errno.ELOOP, "%s: symbolic link %s is owned by uid %d, neither root nor the caller: "
                  "not followed (rsync 3.5's rule; insecure_links=True follows it; nothing was written)"
                  % (what, _os.fsdecode(link), owner), _os.fsdecode(link))


def _read_trusted(path, what):
    """The bytes of the file `path`, opened by the walk that checked it (no other user's symlink
    followed at any component, as the CLI reads --exclude-from); open()'s errors otherwise."""
    fd, parent, _leaf, link, owner, err, _final = _treesync.walk(_fspath_bytes(path, what), 0)
    if link is not None:
        raise _untrusted("%s %s" % (what, _os.fsdecode(_fspath_bytes(path, what))), link, owner)
    if fd < 0:
        raise OSError(err, _os.strerror(err), _os.fsdecode(_fspath_bytes(path, what)))
    with open(fd, "rb") as f:
        return f.read()


def _walk_dst(bdst, mode, what="destination"):
    """dst walked as the run will use it (_treesync.walk mode 1: the CLI's rule, 2: no link as its
    last component): (fd, parent fd, errno when mode 1 reached neither), for run()'s dst_fd /
    dst_parent_fd / dst_error; the caller closes the descriptors."""
    fd, parent, _leaf, link, owner, err, final_link = _treesync.walk(bdst, mode)
    if link is not None:
        raise _untrusted("%s %s" % (what, _os.fsdecode(bdst)), link, owner)
    if mode == 1:  # not reached (a parent missing, ...): the run is refused for what the walk met
        return fd, parent, (err if fd < 0 and parent < 0 and not final_link else 0)
    if final_link:
        d = _os.fsdecode(bdst)
        raise _error(Refused, None, "Cannot call rmtree on a symbolic link: %s (sync_tree refuses it as "
                     "shutil.rmtree does; follow_dst_symlink=True mirrors into its target)" % d, d)
    # neither reached (not a directory, ...): the run is refused with the walk's errno, never run
    # by a path that may lead through a link put there since
    return fd, parent, (err if fd < 0 and parent < 0 else 0)


def _close(*fds):
    for fd in fds:
        if fd >= 0:
            _os.close(fd)


def _fspath_bytes(p, what):
    if p is None:
        return None
    try:
        b = _os.fsencode(p)
    except TypeError:
        raise TypeError("%s: expected str, bytes or os.PathLike, not %s" % (what, type(p).__name__)) from None
    if b"\0" in b:  # the C++ side would stop at it: b"VICTIM\0/../dst" names VICTIM (os raises the same)
        raise ValueError("embedded null byte")
    return b


def _decoder(src):
    return (lambda b: b) if isinstance(_os.fspath(src), bytes) else _os.fsdecode


def _entry(t, decode):
    return EntryError(decode(t[0]), t[1], t[2], t[3], t[4], t[5], t[6], t[7])


def _patterns(value, what):
    if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
        value = (value,)
    return [_fspath_bytes(v, what) for v in value]


def _choice(table, value, what):
    try:
        return table[value]
    except (KeyError, TypeError):
        raise ValueError("%s=%r: expected one of %s" % (what, value, ", ".join(sorted(table)))) from None


# the codes of a run refused before anything was touched (treesync.Refused); any other run-level
# failure is a treesync.Error
def _refusal(ec, ec_category, ec_errno, planned, words, dst):
    """The exception for a run that failed as a whole, in the CLI's words and of the kind the CLI's
    kit says (examples/cli/refusal.hpp, with the keywords' names): (message, path at fault, refused
    by the library's own rule) from the binding.  Refused for the library's rules, Error for the
    system's failures."""
    message, path, by_rule = words[0], _os.fsdecode(words[1] or dst), words[2]
    if not by_rule:
        return _error(Error, ec_errno, message, path, code=ec, category=ec_category)
    count = planned if ec == _treesync.errc["max_delete_exceeded"] else None
    return _error(Refused, ec_errno, message, path, count=count, code=ec, category=ec_category)


def _flag(value, name):
    return bool(value)


def _size(what, low=0):
    """A count or size keyword: an int from `low` up (below 2**64), or None."""
    def check(value, name):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or
                                  not low <= value < 2 ** 64):
            raise ValueError("%s=%r: expected %s or None" % (name, value, what))
        return value
    return check


def _jobs(value, name):
    if not isinstance(value, int) or not 0 <= value <= 1024:
        raise ValueError("jobs=%r: expected a worker count (0-1024)" % (value,))
    return value


def _path(value, name):
    return _fspath_bytes(value, name)


def _choices(table):
    return lambda value, name: _choice(table, value, name)


def _callback(value, name):
    if value is not None and not callable(value):
        raise TypeError("%s: expected a callable or None" % name)
    return value


# sync()'s keywords that pass to the run as they are, checked and converted: keyword -> check(value,
# keyword).  The library's switches (treesync::switch_table, _treesync.switches) are added below:
# each is a keyword named as its member, a flag or (max_size) a size.  The others (delete,
# delete_excluded, max_delete, the rules, modify_window, the callbacks, insecure_links) are read
# by _options().
_KEYWORDS = {
    "src": _path, "dst": _path, "compare": _choices(_COMPARE), "links": _choices(_LINKS),
    "verify": _choices(_VERIFY), "inplace": _flag, "jobs": _jobs, "backup_dir": _path, "temp_dir": _path,
    "state": _path,
    "state_memory": _size("a size in bytes above 0 (an int)", 1), "stop_on_error": _flag,
    "existing": _flag, "ignore_existing": _flag, "progress_interval": lambda v, n: float(v), "cancel": lambda v, n: v,
}
for _member, _cli, _help, _value in _treesync.switches:
    _KEYWORDS[_member] = _size("a size in bytes (an int >= 0)") if _value else _flag


def _options(kw):
    """The run's option dict for sync()'s keywords `kw`: every keyword checked (ValueError, TypeError)."""
    options = {name: check(kw[name], name) for name, check in _KEYWORDS.items()}
    if kw["max_delete"] is not None:
        _size("a count (an int >= 0)")(kw["max_delete"], "max_delete")
    options["max_delete"] = -1 if kw["max_delete"] is None else kw["max_delete"]
    options["deletion"] = 0 if kw["delete_excluded"] is False and kw["delete"] else (2 if kw["delete_excluded"] else 1)
    options["modify_window_ns"] = int(round(float(kw["modify_window"]) * 1e9))
    options["rules"] = _rules(kw)
    options["check_signals"] = _threading.current_thread() is _threading.main_thread()
    on_action, progress = _callback(kw["on_action"], "on_action"), _callback(kw["progress"], "progress")
    decode = _decoder(kw["src"])
    options["on_action"] = None if on_action is None else (
        lambda t: on_action(Action(t[0], t[1], decode(t[2]), t[3], t[4], t[5], t[6], t[7], t[8], t[9])))
    options["progress"] = None if progress is None else (lambda t: progress(Progress(*t)))
    return options


def _rules(kw):
    """The filter rules in the order that decides: filter, include, include_from, exclude, exclude_from,
    as (kind, text): 0 exclude, 1 include, 2 rule, 3 exclude-from text, 4 include-from text."""
    rules = [(2, r) for r in _patterns(kw["filter"], "filter")]
    rules += [(1, p) for p in _patterns(kw["include"], "include")]
    rules += _rule_file(kw, "include_from", 4)
    rules += [(0, p) for p in _patterns(kw["exclude"], "exclude")]
    return rules + _rule_file(kw, "exclude_from", 3)


def _rule_file(kw, name, kind):
    path = kw[name]
    if path is None:
        return []
    if kw["insecure_links"]:
        with open(path, "rb") as f:
            return [(kind, f.read())]
    return [(kind, _read_trusted(path, name))]


def sync(src, dst, *, delete=True, delete_excluded=False, max_delete=None, exclude=(), include=(), filter=(),
         exclude_from=None, include_from=None, allow_empty_source=False, compare="size_mtime", modify_window=0,
         links="follow", inplace=False, jobs=0, hard_links=False, owner=False, group=False, one_file_system=False,
         specials=False, xattrs=False, backup_dir=None, state=None, verify="full", durable=False, dry_run=False,
         stop_on_error=False, on_action=None, progress=None, progress_interval=0.1, cancel=None, max_size=None,
         existing=False, ignore_existing=False, insecure_links=False, state_memory=None, case_collisions=False,
         temp_dir=None):
    """Mirrors the contents of ``src`` into ``dst`` and returns a Report.

    Keywords (the CLI's option in brackets): delete [--delete / --no-delete], delete_excluded
    [--delete-excluded], max_delete [--max-delete: Refused with .count past it], exclude / include
    [--exclude / --include: rsync patterns], filter [--filter rules: '+ PAT', '- PAT', 'dir-merge
    NAME', '!'], exclude_from / include_from [files of patterns], allow_empty_source, compare
    ("size_mtime", "checksum" [-c], "size_only", "update" [-u], "ignore_times" [-I: every file
    rewritten]), modify_window [seconds], links
    ("follow" [-L, the default], "preserve" [-l], "copy_unsafe_links", "safe_links" [-l --safe-links:
    links rsync calls unsafe skipped, dst's entry at their name kept], "skip" [--no-links]),
    inplace, jobs [-j: 0 one worker per CPU], hard_links [-H], owner [-o], group [-g],
    one_file_system [-x], specials [-D], xattrs [-X], backup_dir, temp_dir [-T: each changed file is made
    there, then moved into place; it must exist], state [--state=FILE], verify
    ("full", "dirs", "none"), state_memory [--state-memory: the most bytes the state file's records
    may take, default 256 MiB; a larger file is ignored with a notice], durable [--fsync], dry_run [-n], max_size [--max-size: a larger
    file is neither copied nor updated; bytes], existing [--existing: nothing is created, what
    exists is updated], ignore_existing [--ignore-existing: what exists is left alone, only the
    missing is created], case_collisions [report SRC names of a directory that differ only in case:
    notices].  Rules apply in the order filter,
    include, include_from, exclude, exclude_from: the first that matches an entry decides.

    The paths you name are walked as the CLI walks them (rsync 3.5's rule): a symbolic link at any
    component of ``dst``, ``exclude_from``, ``include_from``, ``state``, ``backup_dir`` or ``temp_dir`` is
    followed only when root or the caller owns it; another user's raises Refused (ELOOP) before
    anything is written.  ``dst`` is then the directory that walk reached (or, missing, is made in
    the directory it reached), whatever its path names by the time the run starts.
    ``insecure_links=True`` follows every link, by path [--insecure-links].

    stop_on_error stops at the first failed entry (the report then holds it); on_action(Action) is
    called once per change, progress(Progress) every progress_interval seconds and at the end, both
    with the GIL held and one at a time; an exception they raise stops the run and is re-raised.
    ``cancel``: an object with is_set() (threading.Event) that stops the run when set (the report
    says cancelled=True).  Refusals raise Refused, other run-level failures Error.
    """
    kw = dict(locals())  # the keywords, as given: _KEYWORDS and the library's switches check each one
    decode = _decoder(src)
    options = _options(kw)
    refused = _treesync.refused(options)  # the library's option_rules, in its words
    if refused is not None:
        raise ValueError(refused)
    dst_fd = dst_parent = -1
    if not insecure_links:
        for what in ("state", "backup_dir", "temp_dir"):
            path = options[what]
            if path:
                bpath = path if path.startswith(b"/") or what == "state" else _os.path.join(options["dst"], path)
                _fd, _parent, _leaf, link, owner, _err, _final = _treesync.walk(bpath, 3)
                if link is not None:
                    raise _untrusted("%s %s" % (what, _os.fsdecode(path)), link, owner)
        dst_fd, dst_parent, options["dst_error"] = _walk_dst(options["dst"], 1)
    options["dst_fd"], options["dst_parent_fd"] = dst_fd, dst_parent
    try:
        raw, ec, ec_category, _ec_message, ec_errno, planned, words = _treesync.run(options)
    except _treesync.FilterError as e:
        raise Error(_errno.EINVAL, str(e), _os.fsdecode(options["src"])) from None
    finally:
        _close(dst_fd, dst_parent)
    report = Report(raw, decode, dry_run=bool(dry_run))
    if ec and report.cancelled and ec_errno == _errno.ECANCELED:
        return report  # cancel=Event: the partial report, cancelled=True
    if ec and not (stop_on_error and report.errors):
        err = _refusal(ec, ec_category, ec_errno, planned, words, options["dst"])
        err.report = report
        raise err
    return report


def sync_tree(src, dst, exclude=(), *, delete_excluded=True, follow_dst_symlink=False):
    """Makes ``dst`` a mirror of ``src`` and returns None: the drop-in for a ``sync_tree`` helper
    built on ``shutil.rmtree`` + ``shutil.copytree(ignore=shutil.ignore_patterns(*exclude))``.

    New and changed files are copied (size + mtime compared, so an unchanged tree writes nothing),
    entries ``src`` lacks are deleted from ``dst``, symlinks are followed (copytree's default),
    ``dst`` and its missing parents are made (as copytree does).  ``exclude`` patterns match a bare
    name at any depth with ``fnmatch`` rules (``*``, ``?``, ``[seq]``, ``[!seq]``; case-sensitive):
    a matching file or directory is not copied, and one already in ``dst`` (a leftover of an earlier
    run: ``stale.pyc``, a ``__pycache__`` directory and all it holds) is deleted, so ``dst`` holds
    exactly ``src`` minus the excluded names, as after rmtree + copytree.  ``delete_excluded=False``
    keeps such leftovers instead (sync's ``delete_excluded`` keyword, the same meaning; rsync
    without ``--delete-excluded``).

    A ``dst`` that is a symbolic link is refused (treesync.Refused, an OSError: "Cannot call rmtree
    on a symbolic link", as ``shutil.rmtree`` refuses it), nothing touched; ``follow_dst_symlink=True``
    mirrors into the directory it points to instead.  A NUL in ``src``, ``dst`` or a pattern raises
    ValueError("embedded null byte"), as ``os`` functions do.

    Errors, as the original raises them: a run that cannot start raises the builtin class of its
    errno (a missing source FileNotFoundError, a destination it may not make PermissionError, a
    ``dst`` that exists and is not a directory FileExistsError, nothing touched), also a
    treesync.Error (Refused for a refusal).  An entry that fails does not stop the run:
    every other entry is copied, then treesync.Partial is raised (an OSError and a shutil.Error, as
    copytree's, and the builtin class of the first failure's errno): the first failure's errno,
    filename (the full path) and message, ``errors`` every failed entry, ``args[0]`` copytree's
    list of (source, destination, message).
    """
    names = _patterns(exclude, "exclude")
    decode = _os.fsdecode
    bsrc, bdst = _fspath_bytes(src, "src"), _fspath_bytes(dst, "dst")
    if not follow_dst_symlink and _os.path.islink(bdst):  # rmtree's refusal, first (the run's walk holds it)
        _close(*_walk_dst(bdst, 2)[:2])
    if _os.path.isdir(bsrc):  # copytree makes dst's missing parents too (the library makes dst only)
        if _os.path.exists(bdst) and not _os.path.isdir(bdst):  # copytree's makedirs(dst): EEXIST
            d = _os.fsdecode(bdst)
            raise _error(Error, _errno.EEXIST, "destination %s: %s (not a directory; nothing was touched)"
                         % (d, _os.strerror(_errno.EEXIST)), d)
        parent = _os.path.dirname(_os.path.abspath(bdst))
        try:
            _os.makedirs(parent, exist_ok=True)
        except FileExistsError:
            pass  # a parent is not a directory: the run says so (NotADirectoryError), as copytree's did
        except OSError as e:
            name = _os.fsdecode(e.filename if e.filename is not None else parent)
            raise _error(Error, e.errno, "mkdir %s: %s" % (name, e.strerror), name) from None
    # "deletion": treesync::deletion::kind, 2 (excluded) deletes excluded entries of dst too, 0
    # (extraneous) only what src lacks and is not excluded
    options = {"src": bsrc, "dst": bdst, "deletion": 2 if delete_excluded else 0, "name_excludes": names,
               "jobs": 0, "allow_empty_source": True, "stop_on_error": False,
               "check_signals": _threading.current_thread() is _threading.main_thread()}
    # rmtree's refusal of a link at dst, made on the descriptor the run then uses (a link put there
    # after the check is not followed either: the run's open refuses it)
    dst_fd, dst_parent, dst_error = (-1, -1, 0) if follow_dst_symlink else _walk_dst(bdst, 2)
    options["dst_fd"], options["dst_parent_fd"], options["dst_error"] = dst_fd, dst_parent, dst_error
    try:
        raw, ec, ec_category, _ec_message, ec_errno, planned, words = _treesync.run(options)
    except _treesync.FilterError as e:  # pragma: no cover - no rule files here
        raise Error(_errno.EINVAL, str(e), _os.fsdecode(bsrc)) from None
    finally:
        _close(dst_fd, dst_parent)
    report = Report(raw, decode)
    if ec:
        err = _refusal(ec, ec_category, ec_errno, planned, words, bdst)
        err.report = report
        raise err
    if report.errors:
        roots = {"source": _os.fsdecode(bsrc), "destination": _os.fsdecode(bdst)}

        def at(root, e):
            return _os.path.join(root, e.path) if e.path else root

        failures = [(at(roots["source"], e), at(roots["destination"], e),
                     "%s %s: %s" % (e.operation, at(roots[e.side], e), e.message)) for e in report.errors]
        first = report.errors[0]
        message = failures[0][2]
        if len(failures) > 1:
            message += " (and %d more failed entries: .errors)" % (len(failures) - 1)
        errno = first.errno
        if errno is None and first.category == _treesync.category:
            errno = next((v for k, v in _ENTRY_ERRNO.items() if _treesync.errc[k] == first.code), None)
        full = at(roots[first.side], first)
        raise _error(Partial, errno, message, full, code=first.code, category=first.category, report=report,
                     entry=first, errors=report.errors, failures=failures)
    if report.cancelled:  # pragma: no cover - only a cancel would do this, and KeyboardInterrupt is raised
        raise KeyboardInterrupt
