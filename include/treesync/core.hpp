// treesync/core.hpp - the vocabulary: file types, stat_info, actions, the report, error codes
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_CORE_HPP
#define TREESYNC_CORE_HPP

#include "detail/config.hpp"

namespace treesync {
inline namespace v0 {

// [treesync.vocabulary] -------------------------------------------------------------------------

/// What a directory entry is.  `none` means "absent"; `unknown` means "the listing did not say"
/// (no d_type), so the engine has to stat.
enum class file_type : unsigned char { none, regular, directory, symlink, fifo, socket, block, character, unknown };

inline constexpr bool is_special(file_type t) noexcept {
  return t == file_type::fifo || t == file_type::socket || t == file_type::block || t == file_type::character;
}

inline constexpr const char* to_string(file_type t) noexcept {
  switch (t) {
    case file_type::none: return "none";
    case file_type::regular: return "file";
    case file_type::directory: return "directory";
    case file_type::symlink: return "symlink";
    case file_type::fifo: return "fifo";
    case file_type::socket: return "socket";
    case file_type::block: return "block device";
    case file_type::character: return "character device";
    case file_type::unknown: break;
  }
  return "unknown";
}

/// The metadata the engine works with.  Times are nanoseconds since the Unix epoch.
struct stat_info {
  file_type type = file_type::none;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;  ///< last status change: when the file was last written or chmod'ed
  std::uint32_t mode = 0;     ///< permission bits only (07777)
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::uint64_t nlink = 1;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::uint64_t rdev = 0;  ///< device number of a block or character device
  std::uint64_t blocks = std::uint64_t(-1);  ///< 512-byte blocks allocated (fewer than the size needs: holes); unknown: max
};

/// What a filesystem keeps of a file's timestamps, seen through one of its directories.  Local
/// filesystems (ext4, XFS, btrfs, tmpfs) keep nanosecond mtimes and a ctime of their own; SFTPv3
/// (sshfs) keeps whole seconds and reports ctime == mtime; SMB keeps 100 ns units.  The engine
/// asks once per run for the destination (see `timestamps` in [treesync.traits]) and compares
/// mtimes at `resolution_ns`; where `ctime` is false it cannot tell from the destination when a
/// copy was made, so it marks racy copies itself (see file_pair).
struct time_model {
  std::int64_t resolution_ns = 1;  ///< mtimes are stored to this unit (1 ns ... 1 s)
  bool ctime = true;               ///< the ctime changes by itself when the file is written or stamped
};

/// How a file's data was copied.
enum class copy_method : unsigned char {
  none,             ///< nothing copied (dry run, or not a copy)
  reflink,          ///< shared extents (FICLONE): instant, no data written
  copy_file_range,  ///< in-kernel copy; the filesystem may offload or share extents
  sendfile,         ///< in-kernel copy through the page cache
  read_write,       ///< user-space copy with one reusable buffer
  memory,           ///< an in-memory filesystem (mock_fs)
};

inline constexpr const char* to_string(copy_method m) noexcept {
  switch (m) {
    case copy_method::none: return "none";
    case copy_method::reflink: return "reflink";
    case copy_method::copy_file_range: return "copy_file_range";
    case copy_method::sendfile: return "sendfile";
    case copy_method::read_write: return "read_write";
    case copy_method::memory: return "memory";
  }
  return "?";
}

/// What the engine asks of a filesystem's copy_file.
struct copy_options {
  bool follow = false;   ///< the source name is a symlink to follow
  bool replace = false;  ///< truncate the existing destination (in place) instead of creating it exclusively
  bool sync = false;     ///< flush the data to stable storage before returning (durable)
  bool owner = false;    ///< give the copy the source's owner (preserve_owner; needs privilege)
  bool group = false;    ///< give the copy the source's group (preserve_group)
  bool xattrs = false;   ///< copy extended attributes (xattrs)
};

/// What a filesystem's copy_file did.
struct copy_result {
  std::uint64_t bytes = 0;
  copy_method method = copy_method::none;
  bool sparse = false;  ///< holes were kept as holes
};

/// One name from a directory listing; `type` comes from d_type and may be `unknown`.
struct dir_entry {
  std::string name;
  file_type type = file_type::unknown;
};

/// treesync's own error conditions (everything else is a `std::errc` / system error).
enum class errc {
  same_directory = 1,     ///< source and destination are the same directory
  nested_directory,       ///< one of source / destination lies inside the other
  empty_source,           ///< empty source over a non-empty destination, not allowed
  max_delete_exceeded,    ///< the plan deletes more entries than max_delete allows
  symlink_cycle,          ///< following a link would revisit a directory on the current path
  dangling_symlink,       ///< a link to follow points at nothing
  special_file,           ///< FIFO, socket or device: never opened, skipped
  vanished,               ///< the source entry disappeared during the run
  changed_during_copy,    ///< the source file changed while it was copied; not installed
  other_filesystem,       ///< a directory on another filesystem, not entered (one_file_system)
  case_collision,         ///< two names that differ only in case (detect_case_collisions)
  unsafe_backup_dir,      ///< the backup directory's path goes through a symlink or a non-directory
};

namespace detail {
class error_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "treesync"; }
  std::string message(int c) const override {
    switch (static_cast<errc>(c)) {
      case errc::same_directory: return "source and destination are the same directory";
      case errc::nested_directory: return "source and destination are nested in each other";
      case errc::empty_source: return "source is empty and destination is not (allow_empty_source to proceed)";
      case errc::max_delete_exceeded: return "the run would delete more entries than max_delete allows";
      case errc::symlink_cycle: return "symbolic link cycle";
      case errc::dangling_symlink: return "dangling symbolic link";
      case errc::special_file: return "special file (fifo, socket or device) skipped";
      case errc::vanished: return "vanished during the run";
      case errc::changed_during_copy: return "changed while being copied";
      case errc::other_filesystem: return "on another filesystem, not entered";
      case errc::case_collision: return "collides with another name on a case-insensitive filesystem";
      case errc::unsafe_backup_dir:
        return "backup directory: a component of its path is a symbolic link or not a directory (never followed)";
    }
    return "unknown treesync error";
  }
};
}  // namespace detail

inline const std::error_category& error_category() noexcept {
  static const detail::error_category_impl instance;
  return instance;
}
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

}  // namespace v0
}  // namespace treesync

template <>
struct std::is_error_code_enum<treesync::errc> : std::true_type {};

namespace treesync {
inline namespace v0 {

/// What the engine did (or, under dry_run, would do) to one entry.
enum class action_kind {
  create,       ///< a new entry in the destination
  update,       ///< an existing file rewritten, or an entry replaced by one of another type
  update_meta,  ///< data current; permission bits or mtime set
  remove,       ///< an entry deleted from the destination
  skip,         ///< not copied (special file, a link the links policy skips)
  error,        ///< a per-entry failure; also recorded in report::errors
  vanished,     ///< the source entry vanished or changed under us; also in report::vanished
};

inline constexpr const char* to_string(action_kind k) noexcept {
  switch (k) {
    case action_kind::create: return "create";
    case action_kind::update: return "update";
    case action_kind::update_meta: return "update_meta";
    case action_kind::remove: return "remove";
    case action_kind::skip: return "skip";
    case action_kind::error: return "error";
    case action_kind::vanished: return "vanished";
  }
  return "?";
}

/// Passed to the observer.  `path` is relative to the roots, '/'-separated, and only valid during
/// the call.  `type` is the type of the entry written (for removals: of the entry removed).
struct action {
  action_kind kind;
  file_type type;
  std::string_view path;
  std::uint64_t src_size = 0;
  std::uint64_t dst_size = 0;
  std::error_code code{};  ///< set for error / vanished / skip
  unsigned changes = 0;    ///< which attributes differed: a mask of `changed` bits (all of them on create)
  copy_method method = copy_method::none;  ///< for files whose data was copied
  bool sparse = false;                     ///< the copy kept the source's holes
};

/// Bits of action::changes (rsync's itemize letters s, t, p).
namespace changed {
inline constexpr unsigned size = 1;
inline constexpr unsigned mtime = 2;
inline constexpr unsigned mode = 4;
inline constexpr unsigned all = size | mtime | mode;
}  // namespace changed

inline unsigned differences(const stat_info& src, const stat_info* dst) noexcept {
  if (!dst) return changed::all;
  return (src.size != dst->size ? changed::size : 0u) | (src.mtime_ns != dst->mtime_ns ? changed::mtime : 0u) |
         (src.mode != dst->mode ? changed::mode : 0u);
}

/// A per-entry outcome that is not a plain success.
struct entry_error {
  std::string path;       ///< relative to the roots ("" is the root itself)
  std::string operation;  ///< "list", "stat", "copy", "remove", ...
  std::error_code code;
};

/// The outcome of a run.  Under `errors::collect` a run that touched some entries but failed on
/// others returns normally: inspect `errors` (rsync's exit 23 in object form).
struct report {
  std::size_t scanned = 0;       ///< source entries looked at
  std::size_t created = 0;       ///< entries that did not exist in the destination
  std::size_t updated = 0;       ///< files rewritten, entries replaced by another type
  std::size_t meta_updated = 0;  ///< permission bits / mtime set without copying data
  std::size_t deleted = 0;       ///< destination entries removed (each entry of a removed tree counts)
  std::size_t excluded = 0;      ///< source or destination entries left alone by the exclude policy
  std::size_t skipped = 0;       ///< special files and skipped links
  std::size_t cleaned = 0;       ///< temporaries of an interrupted earlier run removed
  /// Racily clean files whose content was verified equal and whose mtime, already the source's,
  /// was set again so that later runs trust the quick check.  Nothing differed: no action is
  /// reported for them, and they are not counted in meta_updated.
  std::size_t settled = 0;
  std::uint64_t bytes_copied = 0;
  std::vector<entry_error> errors;    ///< failures; every other entry was still synced
  std::vector<entry_error> vanished;  ///< source entries that vanished / changed during the run
  std::vector<entry_error> skipped_entries;
  std::vector<entry_error> notices;  ///< case collisions and other things worth knowing
  std::chrono::nanoseconds elapsed{0};

  bool cancelled = false;  ///< stopped early by cancel_on

  bool ok() const noexcept { return errors.empty(); }
  /// true when the destination was not modified at all
  bool unchanged() const noexcept { return created + updated + meta_updated + deleted + cleaned + settled == 0; }
};

/// Writes `name` for a terminal or a log: control characters, DEL and backslash are escaped
/// (`\n`, `\t`, `\x1b`, `\\`) so a file called "a\nb" cannot forge a line of output.  Bytes >= 0x80
/// are kept so UTF-8 names stay readable.
inline std::string escape(std::string_view name) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(name.size());
  for (char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_CORE_HPP
