# Type stubs for the treesync package (so an editor completes sync()'s keywords).
import builtins
import os
import shutil
import threading
from typing import Callable, Iterable, List, Literal, NamedTuple, Optional, Protocol, Union

_Path = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
_Patterns = Union[str, bytes, Iterable[Union[str, bytes]]]

__version__: str

class EntryError(NamedTuple):
    path: Union[str, bytes]
    operation: str
    side: Literal["source", "destination"]
    errno: Optional[int]
    code: int
    category: str
    message: str
    detail: str

class Action(NamedTuple):
    kind: Literal["create", "update", "update_meta", "remove", "skip", "error", "vanished"]
    type: str
    path: Union[str, bytes]
    src_size: int
    dst_size: int
    errno: Optional[int]
    message: Optional[str]
    changes: List[str]
    method: str
    sparse: bool

class Progress(NamedTuple):
    actions: int
    bytes: int
    elapsed: float
    final: bool

class Report:
    scanned: int
    created: int
    updated: int
    meta_updated: int
    deleted: int
    excluded: int
    skipped: int
    cleaned: int
    settled: int
    bytes_copied: int
    errors: List[EntryError]
    vanished: List[EntryError]
    skipped_entries: List[EntryError]
    notices: List[EntryError]
    elapsed: float
    cancelled: bool
    dry_run: bool
    @property
    def ok(self) -> bool: ...
    @property
    def unchanged(self) -> bool: ...
    @property
    def writes(self) -> int: ...

# What is raised is the subclass of Error, Refused or Partial that also derives from the builtin
# class OSError(errno, ...) picks, e.g. Error.PermissionError, Refused.FileNotFoundError,
# Partial.FileNotFoundError (one per builtin OSError subclass, as class attributes, listed below:
# `except treesync.Refused.FileNotFoundError` type-checks); plain Error, Refused or Partial when the
# errno has none.
class Error(OSError):
    message: str
    path: Optional[str]
    code: int
    category: str
    report: Optional[Report]
    entry: Optional[EntryError]
    class BlockingIOError(Error, builtins.BlockingIOError): ...
    class BrokenPipeError(Error, builtins.BrokenPipeError): ...
    class ChildProcessError(Error, builtins.ChildProcessError): ...
    class ConnectionAbortedError(Error, builtins.ConnectionAbortedError): ...
    class ConnectionRefusedError(Error, builtins.ConnectionRefusedError): ...
    class ConnectionResetError(Error, builtins.ConnectionResetError): ...
    class FileExistsError(Error, builtins.FileExistsError): ...
    class FileNotFoundError(Error, builtins.FileNotFoundError): ...
    class InterruptedError(Error, builtins.InterruptedError): ...
    class IsADirectoryError(Error, builtins.IsADirectoryError): ...
    class NotADirectoryError(Error, builtins.NotADirectoryError): ...
    class PermissionError(Error, builtins.PermissionError): ...
    class ProcessLookupError(Error, builtins.ProcessLookupError): ...
    class TimeoutError(Error, builtins.TimeoutError): ...

class Refused(Error):
    count: Optional[int]
    class BlockingIOError(Refused, builtins.BlockingIOError): ...
    class BrokenPipeError(Refused, builtins.BrokenPipeError): ...
    class ChildProcessError(Refused, builtins.ChildProcessError): ...
    class ConnectionAbortedError(Refused, builtins.ConnectionAbortedError): ...
    class ConnectionRefusedError(Refused, builtins.ConnectionRefusedError): ...
    class ConnectionResetError(Refused, builtins.ConnectionResetError): ...
    class FileExistsError(Refused, builtins.FileExistsError): ...
    class FileNotFoundError(Refused, builtins.FileNotFoundError): ...
    class InterruptedError(Refused, builtins.InterruptedError): ...
    class IsADirectoryError(Refused, builtins.IsADirectoryError): ...
    class NotADirectoryError(Refused, builtins.NotADirectoryError): ...
    class PermissionError(Refused, builtins.PermissionError): ...
    class ProcessLookupError(Refused, builtins.ProcessLookupError): ...
    class TimeoutError(Refused, builtins.TimeoutError): ...

class Partial(Error, shutil.Error):
    # sync_tree: every other entry was copied; args[0] is [(source, destination, message), ...]
    errors: List[EntryError]
    class BlockingIOError(Partial, builtins.BlockingIOError): ...
    class BrokenPipeError(Partial, builtins.BrokenPipeError): ...
    class ChildProcessError(Partial, builtins.ChildProcessError): ...
    class ConnectionAbortedError(Partial, builtins.ConnectionAbortedError): ...
    class ConnectionRefusedError(Partial, builtins.ConnectionRefusedError): ...
    class ConnectionResetError(Partial, builtins.ConnectionResetError): ...
    class FileExistsError(Partial, builtins.FileExistsError): ...
    class FileNotFoundError(Partial, builtins.FileNotFoundError): ...
    class InterruptedError(Partial, builtins.InterruptedError): ...
    class IsADirectoryError(Partial, builtins.IsADirectoryError): ...
    class NotADirectoryError(Partial, builtins.NotADirectoryError): ...
    class PermissionError(Partial, builtins.PermissionError): ...
    class ProcessLookupError(Partial, builtins.ProcessLookupError): ...
    class TimeoutError(Partial, builtins.TimeoutError): ...

class _Event(Protocol):
    def is_set(self) -> bool: ...

def sync(
    src: _Path,
    dst: _Path,
    *,
    delete: bool = True,
    delete_excluded: bool = False,
    max_delete: Optional[int] = None,
    exclude: _Patterns = (),
    include: _Patterns = (),
    filter: _Patterns = (),
    exclude_from: Optional[_Path] = None,
    include_from: Optional[_Path] = None,
    allow_empty_source: bool = False,
    compare: Literal["size_mtime", "checksum", "size_only", "update", "ignore_times"] = "size_mtime",
    modify_window: float = 0,
    links: Literal["follow", "copy_links", "preserve", "links", "copy_unsafe_links", "unsafe", "skip", "no_links",
                   "safe_links", "preserve_safe"] = "follow",
    inplace: bool = False,
    jobs: int = 0,
    hard_links: bool = False,
    owner: bool = False,
    group: bool = False,
    one_file_system: bool = False,
    specials: bool = False,
    xattrs: bool = False,
    backup_dir: Optional[_Path] = None,
    state: Optional[_Path] = None,
    verify: Literal["full", "dirs", "none"] = "full",
    durable: bool = False,
    dry_run: bool = False,
    stop_on_error: bool = False,
    on_action: Optional[Callable[[Action], object]] = None,
    progress: Optional[Callable[[Progress], object]] = None,
    progress_interval: float = 0.1,
    cancel: Optional[Union[threading.Event, _Event]] = None,
    max_size: Optional[int] = None,
    existing: bool = False,
    ignore_existing: bool = False,
    insecure_links: bool = False,
    state_memory: Optional[int] = None,
    case_collisions: bool = False,
    temp_dir: Optional[_Path] = None,
) -> Report: ...

# dst becomes src minus the excluded names (excluded leftovers in dst deleted; delete_excluded=False keeps them)
def sync_tree(src: _Path, dst: _Path, exclude: _Patterns = (), *, delete_excluded: bool = True, follow_dst_symlink: bool = False) -> None: ...
