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
/// asks once per run for the destination (see `timestamps` in [treesync.filesystem]) and compares
/// mtimes at `resolution_ns`; where `ctime` is false it cannot tell from the destination when a
/// copy was made, so it marks racy copies itself (see file_pair).
struct time_model {
  std::int64_t resolution_ns = 1;  ///< mtimes are stored to this unit (1 ns ... 1 s)
  bool ctime = true;               ///< the ctime changes by itself when the file is written or stamped
  /// A symlink's own mtime and owner can be set.  Not on FUSE and network filesystems (sshfs: a
  /// SETSTAT of a link follows it), nor on local ones not known to posix_fs: there links keep
  /// the time and owner they are made with, and their mtimes are not compared.
  bool link_meta = true;
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
  /// give the copy the source's owner (preserve_owner): as root only; run as another user (the
  /// filesystem's user_id() is not 0) it is ignored, silently, as rsync -o is
  bool owner = false;
  /// give the copy the source's group (preserve_group); run as a user other than root, only
  /// where the group is one of the user's (user_groups()): the others are left the group the
  /// user's new entries get, silently (no error, no change reported), as rsync -g does
  bool group = false;
  bool xattrs = false;   ///< copy extended attributes (xattrs)
  /// The run's cancel flag (cancel_on), checked between chunks of the data: a set flag ends the
  /// copy with std::errc::operation_canceled.  Null: never cancelled.
  const std::atomic<bool>* cancel = nullptr;
};

/// What a filesystem's copy_file did.
struct copy_result {
  std::uint64_t bytes = 0;
  copy_method method = copy_method::none;
  bool sparse = false;  ///< holes were kept as holes
  /// On failure: the error came from the destination (creating, writing or setting the metadata
  /// of the copy), not from reading the source.
  bool destination_failed = false;
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
  max_delete_exceeded,    ///< the run would delete more entries than max_delete allows: it deleted none of them
  symlink_cycle,          ///< following a link would revisit a directory on the current path
  dangling_symlink,       ///< a link to follow points at nothing
  special_file,           ///< FIFO, socket or device: never opened, skipped
  vanished,               ///< the source entry disappeared during the run
  changed_during_copy,    ///< the source file changed while it was copied; not installed
  other_filesystem,       ///< a directory on another filesystem, not entered (one_file_system)
  case_collision,         ///< two names that differ only in case (detect_case_collisions)
  unsafe_backup_dir,      ///< the backup directory's path goes through a symlink or a non-directory
  source_missing,         ///< the source root does not exist (compares equal to std::errc::no_such_file_or_directory)
  destination_parent_missing,  ///< the destination and its parent are missing: not made (no mkdir -p); also == ENOENT
  destination_dangling_symlink,  ///< the destination root is a symlink to nothing: neither followed nor replaced
  state_ignored,          ///< the state file belongs to another mirror, version or policy set, or is damaged: not used
  state_not_kept,         ///< no state file is read or kept for this run (entry_error::detail says why)
  state_not_regular,      ///< the state file's name holds a link, directory, device, FIFO or socket: the run is refused
  state_dir_missing,      ///< the state file's directory does not exist (or, inside the destination, is not a plain directory)
  skipped_symlink,        ///< a symlink the links policy skips (links::skip, rsync --no-links)
  deletions_skipped,      ///< keep_on_source_error: a source failure stopped the run's deletions (a notice)
  unsupported,            ///< the run asks for what the filesystem declares it cannot do (filesystem_capabilities): refused
  state_entries_gone,     ///< entries the state file recorded were not in the destination when the run deleted them (a notice; detail: how many)
  /// a destination directory is not the one a deletion policy read before the run (exchanged
  /// meanwhile: dir_identity): nothing was deleted in it (reported by a tool, e.g. the CLI)
  directory_changed,
  // Options that exclude each other, or one without the option it needs: refused before anything
  // is touched, each code one row of option_rules (below), whose words are its message.
  inplace_with_backup,    ///< write_mode::in_place with a backup directory
  state_with_hard_links,  ///< a state file with hard_links
  state_with_backup_dir,  ///< a state file with a backup directory
  verify_without_state,   ///< verify other than full without a state file
  unsafe_temp_dir,        ///< the temp directory's path goes through a symlink or a non-directory
  temp_dir_missing,       ///< the temp directory does not exist (it is never made)
};

// [treesync.refusals] ---------------------------------------------------------------------------
//
// Options that exclude each other, or one that needs another: one row each.  sync() refuses a run
// that breaks a row with the row's code before anything is touched (refused_combination(),
// policies.hpp); the CLI, the MPI tool and the Python package refuse the same combinations from
// this table, in its words, each naming the options its own way (the CLI's --backup-dir, Python's
// backup_dir).  An option's key is its member of treesync::options, also Python's keyword
// ("inplace" stands for write == write_mode::in_place); a key is "set" when it differs from its
// default.  Adding a refusal is one row here and its code above.

/// One refusal: `first` and `second` both set (or, when `needs`, `first` set without `second`).
struct option_rule {
  errc code;
  const char* first;
  const char* second;
  bool needs;       ///< true: `first` needs `second`; false: the two exclude each other
  const char* why;  ///< the reason, in words that hold for every front end
};

inline constexpr option_rule option_rules[] = {
    {errc::inplace_with_backup, "inplace", "backup_dir", false, "a backup needs the old file kept whole"},
    {errc::state_with_hard_links, "state", "hard_links", false, "hard links change entries a state file cannot vouch for"},
    {errc::state_with_backup_dir, "state", "backup_dir", false, "backups change entries a state file cannot vouch for"},
    {errc::verify_without_state, "verify", "state", true, "dirs and none trust the state file"},
};

/// A row's words, "FIRST and SECOND exclude each other (WHY)" or "FIRST needs SECOND (WHY)", with
/// `name(key)` naming each option as the caller spells it.
template <class Name>
std::string option_rule_text(const option_rule& r, Name&& name) {
  return std::string(name(r.first)) + (r.needs ? " needs " : " and ") + std::string(name(r.second)) +
         (r.needs ? " (" : " exclude each other (") + r.why + ")";
}

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
      case errc::unsafe_temp_dir:
        return "temp directory: a component of its path is a symbolic link or not a directory (never followed)";
      case errc::temp_dir_missing: return "the temp directory does not exist";
      case errc::source_missing: return "source does not exist";
      case errc::destination_parent_missing: return "the destination's parent directory does not exist";
      case errc::destination_dangling_symlink: return "destination is a dangling symbolic link";
      case errc::state_ignored:
        return "state file ignored (entry_error::detail says why)";
      case errc::state_not_kept: return "no state file kept (entry_error::detail says why)";
      case errc::state_not_regular:
        return "state file: not a regular file (a link, directory, device, FIFO or socket is never read, replaced or removed)";
      case errc::skipped_symlink: return "symbolic link skipped";
      case errc::deletions_skipped: return "IO error encountered -- skipping file deletion";
      case errc::unsupported:
        return "the filesystem cannot do what the run asks (owners, specials, hard links, xattrs or durable: its capabilities())";
      case errc::state_dir_missing:
        return "state file: its directory does not exist (inside the destination: or is a symbolic link)";
      case errc::directory_changed:
        return "not the directory whose rule files were read before the run (changed during the run): nothing deleted in it";
      case errc::inplace_with_backup:
      case errc::state_with_hard_links:
      case errc::state_with_backup_dir:
      case errc::verify_without_state:
        for (const option_rule& r : option_rules)
          if (r.code == static_cast<errc>(c)) return option_rule_text(r, [](const char* key) { return key; });
        break;
      case errc::state_entries_gone:
        return "recorded entries gone (not counted as deleted; entry_error::detail says how many)";
    }
    return "unknown treesync error";
  }
  // A missing source or destination parent is still "no such file or directory" to a caller that
  // compares with std::errc::no_such_file_or_directory (as before these codes existed).
  std::error_condition default_error_condition(int c) const noexcept override {
    switch (static_cast<errc>(c)) {
      case errc::source_missing:
      case errc::destination_parent_missing: return std::errc::no_such_file_or_directory;
      default: return {c, *this};
    }
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

/// Which attributes of an entry differed (rsync's itemize letters s, t, p): a bitmask.  Combine
/// with `|`, `&`, `~`; test a bit with `any(mask & changed::size)` or `has(mask, changed::size)`.
enum class changed : unsigned char {
  none = 0,
  size = 1,
  mtime = 2,
  mode = 4,
  all = size | mtime | mode,
  // outside `all` (so `~` and `all` keep their meaning over size, mtime, mode):
  owner = 8,      ///< the owner changes (preserve_owner; rsync's 'o')
  group = 16,     ///< the group changes (preserve_group; rsync's 'g')
  replaced = 32,  ///< an entry of another type was replaced (rsync prints it as new: '+' in every column)
  linked = 64,    ///< a hard link to another name of the run (hard_links; action::link_to names it)
};

inline constexpr changed operator|(changed a, changed b) noexcept {
  return static_cast<changed>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
inline constexpr changed operator&(changed a, changed b) noexcept {
  return static_cast<changed>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}
inline constexpr changed operator^(changed a, changed b) noexcept {
  return static_cast<changed>(static_cast<unsigned>(a) ^ static_cast<unsigned>(b));
}
/// The complement within `changed::all` (no stray high bits).
inline constexpr changed operator~(changed a) noexcept {
  return static_cast<changed>(~static_cast<unsigned>(a) & static_cast<unsigned>(changed::all));
}
inline constexpr changed& operator|=(changed& a, changed b) noexcept { return a = a | b; }
inline constexpr changed& operator&=(changed& a, changed b) noexcept { return a = a & b; }
/// true when any bit of `m` is set
inline constexpr bool any(changed m) noexcept { return m != changed::none; }
/// true when every bit of `bits` is set in `m`
inline constexpr bool has(changed m, changed bits) noexcept { return (m & bits) == bits; }

/// What differs between a source entry and the destination's (`dst` null: absent, all of it).
inline changed differences(const stat_info& src, const stat_info* dst) noexcept {
  if (!dst) return changed::all;
  return (src.size != dst->size ? changed::size : changed::none) |
         (src.mtime_ns != dst->mtime_ns ? changed::mtime : changed::none) |
         (src.mode != dst->mode ? changed::mode : changed::none);
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
  changed changes = changed::none;  ///< which attributes differed (all of them on create)
  copy_method method = copy_method::none;  ///< for files whose data was copied
  bool sparse = false;                     ///< the copy kept the source's holes
  std::string_view link_to{};  ///< changed::linked: the name it was linked to (relative to the roots)
};

/// What a per-entry failure was doing (entry_error::operation); to_string gives the word the
/// CLI prints ("copy", "opendir", ...) and from_string reads it back.
enum class operation : unsigned char {
  list,
  stat,
  open,
  opendir,
  readlink,
  copy,
  compare,
  mkdir,
  symlink,
  mknod,
  link,
  rename,
  unlink,
  rmdir,
  chmod,
  chown,
  utime,
  fsync,
  xattr,
  backup,
  state,  ///< reading, invalidating or writing the state file (state_file)
  sync,  ///< a whole run of a subtree (treesync_mpi), refused or failed; keep it last (from_string)
};

inline constexpr const char* to_string(operation o) noexcept {
  switch (o) {
    case operation::list: return "list";
    case operation::stat: return "stat";
    case operation::open: return "open";
    case operation::opendir: return "opendir";
    case operation::readlink: return "readlink";
    case operation::copy: return "copy";
    case operation::compare: return "compare";
    case operation::mkdir: return "mkdir";
    case operation::symlink: return "symlink";
    case operation::mknod: return "mknod";
    case operation::link: return "link";
    case operation::rename: return "rename";
    case operation::unlink: return "unlink";
    case operation::rmdir: return "rmdir";
    case operation::chmod: return "chmod";
    case operation::chown: return "chown";
    case operation::utime: return "utime";
    case operation::fsync: return "fsync";
    case operation::xattr: return "xattr";
    case operation::backup: return "backup";
    case operation::state: return "state";
    case operation::sync: return "sync";
  }
  return "?";
}

/// The operation named `word` (as to_string spells it); false when there is none.
inline bool from_string(std::string_view word, operation& out) noexcept {
  for (unsigned i = 0; i <= static_cast<unsigned>(operation::sync); ++i) {
    const auto o = static_cast<operation>(i);
    if (word == to_string(o)) {
      out = o;
      return true;
    }
  }
  return false;
}

/// Which of the two trees a per-entry failure happened in.
enum class side : unsigned char {
  source,       ///< reading the source (listing, stat, readlink, reading a file's data)
  destination,  ///< reading or writing the destination (every write is here)
};

inline constexpr const char* to_string(side s) noexcept { return s == side::source ? "source" : "destination"; }

/// A per-entry outcome that is not a plain success.
struct entry_error {
  std::string path;                        ///< relative to the roots ("" is the root itself)
  treesync::operation operation{};         ///< what failed: copy, opendir, ...
  std::error_code code;
  treesync::side side = treesync::side::destination;  ///< the tree it failed in: join `path` to that root
  std::string detail{};  ///< more than the code says, when there is more (a state file ignored: which part, which line)
};

/// The numbers of a run (a report's counts), added up with `+=` (e.g. one worker's, or one
/// subtree's, into a whole run's).
struct counts {
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

  counts& operator+=(const counts& o) noexcept {
    scanned += o.scanned;
    created += o.created;
    updated += o.updated;
    meta_updated += o.meta_updated;
    deleted += o.deleted;
    excluded += o.excluded;
    skipped += o.skipped;
    cleaned += o.cleaned;
    settled += o.settled;
    bytes_copied += o.bytes_copied;
    return *this;
  }
  friend counts operator+(counts a, const counts& b) noexcept { return a += b; }
  friend bool operator==(const counts& a, const counts& b) noexcept {
    return a.scanned == b.scanned && a.created == b.created && a.updated == b.updated &&
           a.meta_updated == b.meta_updated && a.deleted == b.deleted && a.excluded == b.excluded &&
           a.skipped == b.skipped && a.cleaned == b.cleaned && a.settled == b.settled && a.bytes_copied == b.bytes_copied;
  }
  friend bool operator!=(const counts& a, const counts& b) noexcept { return !(a == b); }
};

/// The outcome of a run.  Under `errors::collect` a run that touched some entries but failed on
/// others returns normally: inspect `errors` (rsync's exit 23 in object form).  The counts are a
/// base (`rep.created` as before; `rep.totals()` or a `const counts&` for all of them at once).
struct [[nodiscard]] report : counts {
  std::vector<entry_error> errors;    ///< failures; every other entry was still synced
  std::vector<entry_error> vanished;  ///< source entries that vanished / changed during the run
  std::vector<entry_error> skipped_entries;
  std::vector<entry_error> notices;  ///< case collisions and other things worth knowing
  std::chrono::nanoseconds elapsed{0};

  bool cancelled = false;  ///< stopped early by cancel_on
  /// max_delete exceeded (errc::max_delete_exceeded): the deletions the run found, more than the
  /// cap allows; none of the deletions of entries the source lacks was made (see max_delete).
  std::size_t would_delete = 0;

  bool ok() const noexcept { return errors.empty(); }
  /// true when the destination was not modified at all
  bool unchanged() const noexcept { return created + updated + meta_updated + deleted + cleaned + settled == 0; }

  counts& totals() noexcept { return *this; }
  const counts& totals() const noexcept { return *this; }

  /// Adds `other`'s counts (and would_delete) to these and appends its lists (errors, vanished,
  /// skipped_entries, notices) after these; `elapsed` and `cancelled` are left alone (they belong to a whole run).
  report& merge(report&& other) {
    *this += other;
    would_delete += other.would_delete;
    append(errors, other.errors);
    append(vanished, other.vanished);
    append(skipped_entries, other.skipped_entries);
    append(notices, other.notices);
    return *this;
  }
  report& merge(const report& other) { return merge(report(other)); }

 private:
  static void append(std::vector<entry_error>& to, std::vector<entry_error>& from) {
    if (to.empty()) {
      to = std::move(from);
      return;
    }
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  }
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
