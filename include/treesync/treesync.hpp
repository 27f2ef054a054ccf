// treesync.hpp - header-only incremental directory-tree mirror (C++17)
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A missing destination is populated in one streaming pass; an existing one is
// brought up to date by comparing size and mtime, rewriting only what changed and
// deleting what the source no longer has.  A second run on an unchanged tree
// performs no writes at all.
//
// Reading order of this file:
//   [treesync.config]     version, language guard
//   [treesync.vocabulary] file_type, stat_info, action, report, error codes
//   [treesync.policy.*]   the policy categories and their built-ins
//   [treesync.traits]     how a policy is recognised; the filesystem requirements
//   [treesync.api]        sync(...) declarations
//   [treesync.detail.*]   glob matcher, policy pack, the engine
//   [treesync.posix]      the POSIX backend (handle based, *at() calls)
//   [treesync.std_fs]     the portable backend (std::filesystem only)
//   [treesync.api.impl]   sync(...) definitions
#ifndef TREESYNC_TREESYNC_HPP
#define TREESYNC_TREESYNC_HPP

// [treesync.config] -----------------------------------------------------------------------------

#if !((defined(_MSVC_LANG) && _MSVC_LANG >= 201703L) || __cplusplus >= 201703L)
#error "treesync requires C++17 or later (e.g. -std=c++17 or cpp_std=c++17)"
#endif

#define TREESYNC_VERSION_MAJOR 0
#define TREESYNC_VERSION_MINOR 1
#define TREESYNC_VERSION_PATCH 0
#define TREESYNC_VERSION (TREESYNC_VERSION_MAJOR * 10000 + TREESYNC_VERSION_MINOR * 100 + TREESYNC_VERSION_PATCH)
#define TREESYNC_VERSION_STRING "0.1.0"

#if defined(__unix__) || defined(__APPLE__)
#define TREESYNC_HAS_POSIX 1
#else
#define TREESYNC_HAS_POSIX 0
#endif

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if TREESYNC_HAS_POSIX
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#endif
#endif

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

// [treesync.policy.compare] ---------------------------------------------------------------------
//
// A comparison policy answers one question: is the destination file's DATA up to date?
// Requirement: `bool up_to_date(const treesync::file_pair&) const`.
// Permission bits are handled by the engine whatever the comparison says.  A policy that finds
// data current whatever the mtimes (checksum, size_only) declares `static constexpr bool restamp
// = true`, or, when that depends on how it was configured at run time, `bool restamp() const`: a
// current file whose mtime differs then gets the source's mtime (rsync -c -t).  Without it the
// destination's mtime is left alone (newer keeps a newer destination; a size_mtime window
// tolerates coarse timestamps, and re-stamping would write on every run).

/// The two files being compared.
///
/// `racy` is set by the engine when the destination copy may have been taken while the source
/// could still change without its size or mtime showing it ("racily clean", as git calls it): a
/// source rewritten within its timestamp granularity after the copy keeps its size and mtime, so
/// equal size+mtime proves nothing.  Where the destination keeps a ctime, a copy whose ctime is
/// within the racy window of the source's mtime is racy.  Where it does not (sshfs: ctime ==
/// mtime), the engine marks a racy copy when it makes it, the way git smudges racy index
/// entries: the copy gets `smudged_mtime(source mtime)`, a whole second or two early, so the next
/// run sees it differ (or, under a compare window, sees it racy) and settles it by content or a
/// fresh copy, then stamps the exact mtime.  Policies that trust mtimes must settle a racy pair by
/// content.
///
/// `resolution_ns` is the destination's timestamp unit (time_model): mtimes closer than one unit
/// are equal, because the destination could not have stored the difference.
class file_pair {
 public:
  using content_fn = bool (*)(void*);
  file_pair(const stat_info& s, const stat_info& d, bool is_racy, content_fn fn, void* ctx,
            std::int64_t resolution = 1) noexcept
      : src(s), dst(d), racy(is_racy), resolution_ns(resolution < 1 ? 1 : resolution), fn_(fn), ctx_(ctx) {}

  const stat_info& src;
  const stat_info& dst;
  bool racy;
  std::int64_t resolution_ns;

  /// The mtimes are equal within `window` or within the destination's timestamp resolution.
  bool same_mtime(std::chrono::nanoseconds window = std::chrono::nanoseconds(0)) const noexcept {
    const std::int64_t d = src.mtime_ns - dst.mtime_ns;
    const std::int64_t a = d < 0 ? -d : d;
    return a <= window.count() || a < resolution_ns;
  }

  /// Reads both files and compares their bytes (expensive; call only when needed).
  bool same_content() const { return fn_(ctx_); }

 private:
  content_fn fn_;
  void* ctx_;
};

/// The mtime a racy copy is given on a destination without a ctime of its own: the source's
/// mtime floored to the second, minus one second.  Whole seconds survive every timestamp
/// resolution, and an earlier time never makes a consumer (make, or compare::newer) take the copy
/// for newer than its source.
inline constexpr std::int64_t smudged_mtime(std::int64_t mtime_ns) noexcept {
  constexpr std::int64_t second = 1000000000;
  return mtime_ns - ((mtime_ns % second) + second) % second - second;
}

namespace compare {

/// Equal size and mtime within `window` (default: exact to the nanosecond).  A racy pair is
/// verified by content.  The window is for filesystems with coarse timestamps (FAT: 2 s).
struct size_mtime {
  std::chrono::nanoseconds window{0};
  bool up_to_date(const file_pair& f) const {
    if (f.src.size != f.dst.size) return false;
    if (!f.same_mtime(window)) return false;
    return !f.racy || f.same_content();
  }
};

/// Equal size is enough (rsync --size-only).
struct size_only_t {
  static constexpr bool restamp = true;
  bool up_to_date(const file_pair& f) const { return f.src.size == f.dst.size; }
};
inline constexpr size_only_t size_only{};

/// A destination newer than the source is kept (rsync -u); otherwise like size_mtime.
struct newer_t {
  bool up_to_date(const file_pair& f) const {
    if (f.dst.mtime_ns > f.src.mtime_ns && !f.same_mtime()) return true;
    return size_mtime{}.up_to_date(f);
  }
};
inline constexpr newer_t newer{};

/// Equal size and equal bytes (rsync -c); reads every file whose size matches.
struct checksum_t {
  static constexpr bool restamp = true;
  bool up_to_date(const file_pair& f) const { return f.src.size == f.dst.size && f.same_content(); }
};
inline constexpr checksum_t checksum{};

/// Never up to date: every file is rewritten.
struct always_t {
  bool up_to_date(const file_pair&) const { return false; }
};
inline constexpr always_t always{};

}  // namespace compare

// [treesync.policy.deletion] --------------------------------------------------------------------
//
// What happens to destination entries the source lacks ("extraneous" entries).
// Requirement: `bool removes(std::string_view rel, file_type type, bool excluded) const` and
// `std::size_t limit() const` (the most entries a run may delete; npos = unlimited; a run whose
// plan exceeds it is refused before its first deletion).

inline constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();

namespace deletion {

/// Delete what the source lacks, except excluded entries (rsync --delete).
struct extraneous_t {
  bool removes(std::string_view, file_type, bool excluded) const { return !excluded; }
  std::size_t limit() const { return unlimited; }
};
inline constexpr extraneous_t extraneous{};

/// Never delete (rsync without --delete).
struct keep_t {
  bool removes(std::string_view, file_type, bool) const { return false; }
  std::size_t limit() const { return unlimited; }
};
inline constexpr keep_t keep{};

/// Delete excluded destination entries too (rsync --delete-excluded).
struct delete_excluded_t {
  bool removes(std::string_view, file_type, bool) const { return true; }
  std::size_t limit() const { return unlimited; }
};
inline constexpr delete_excluded_t delete_excluded{};

/// Another deletion policy, with a cap: `max_delete{100}` or `max_delete{100, delete_excluded}`.
template <class Base = extraneous_t>
struct max_delete {
  explicit max_delete(std::size_t n, Base b = Base{}) : max(n), base(std::move(b)) {}
  std::size_t max;
  Base base;
  bool removes(std::string_view rel, file_type t, bool excluded) const { return base.removes(rel, t, excluded); }
  std::size_t limit() const { return max; }
};
max_delete(std::size_t)->max_delete<extraneous_t>;
template <class B>
max_delete(std::size_t, B) -> max_delete<B>;

}  // namespace deletion

using deletion::max_delete;

// [treesync.policy.links] -----------------------------------------------------------------------
//
// What to do with a source symlink.
// Requirement: `link_action on_symlink(std::string_view rel, std::string_view target, bool inside) const`
// where `inside` says the target, resolved lexically from the link's directory, stays inside the
// source tree.  A policy may declare `static constexpr bool needs_target = false;` to spare the
// engine a readlink per link.

enum class link_action { follow, preserve, skip };

namespace links {

/// Copy what the link points to (the default; `cp -L`, `rsync -L`).
struct dereference_t {
  static constexpr bool needs_target = false;
  link_action on_symlink(std::string_view, std::string_view, bool) const { return link_action::follow; }
};
inline constexpr dereference_t dereference{};

/// Recreate the link itself, target unchanged (`rsync -l`).
struct preserve_t {
  static constexpr bool needs_target = false;
  link_action on_symlink(std::string_view, std::string_view, bool) const { return link_action::preserve; }
};
inline constexpr preserve_t preserve{};

/// Neither follow nor copy links (`rsync --no-links`); they are counted as skipped.
struct skip_t {
  static constexpr bool needs_target = false;
  link_action on_symlink(std::string_view, std::string_view, bool) const { return link_action::skip; }
};
inline constexpr skip_t skip{};

/// Keep links that stay inside the source as links; follow the others (`rsync --copy-unsafe-links`).
struct dereference_unsafe_t {
  link_action on_symlink(std::string_view, std::string_view, bool inside) const {
    return inside ? link_action::preserve : link_action::follow;
  }
};
inline constexpr dereference_unsafe_t dereference_unsafe{};

}  // namespace links

// [treesync.policy.exclude] ---------------------------------------------------------------------
//
// An excluded entry is neither copied nor deleted (unless the deletion policy deletes excluded
// entries); an excluded directory is not entered.
// Requirement: `bool excluded(std::string_view rel, file_type type) const`, or any callable
// `bool(std::string_view rel, file_type type)`.

namespace detail {
bool glob_match(std::string_view pattern, std::string_view text);
}

/// One rsync/gitignore-style pattern: without '/' it matches a name at any depth; with '/' it is
/// anchored at the root (a leading '/' is optional); `*` and `?` stop at '/', `**` spans
/// directories (`**/` also matches zero directories); `[a-z]`, `[!x]`, `[^x]`, `\` escapes; a
/// trailing '/' matches directories only.
class glob {
 public:
  explicit glob(std::string_view pattern) {
    if (!pattern.empty() && pattern.back() == '/') {
      dirs_only_ = true;
      pattern.remove_suffix(1);
    }
    if (!pattern.empty() && pattern.front() == '/') {
      anchored_ = true;
      pattern.remove_prefix(1);
    }
    if (pattern.find('/') != std::string_view::npos) anchored_ = true;
    pattern_ = std::string(pattern);
  }
  bool matches(std::string_view rel, file_type type) const {
    if (dirs_only_ && type != file_type::directory) return false;
    if (anchored_) return detail::glob_match(pattern_, rel);
    const auto slash = rel.rfind('/');
    return detail::glob_match(pattern_, slash == std::string_view::npos ? rel : rel.substr(slash + 1));
  }
  const std::string& pattern() const noexcept { return pattern_; }

 private:
  std::string pattern_;
  bool anchored_ = false;
  bool dirs_only_ = false;
};

/// Excludes what matches any of its patterns: `treesync::exclude{"*.pyc", "__pycache__/"}`.
class exclude {
 public:
  exclude(std::initializer_list<std::string_view> patterns) {
    for (auto p : patterns) add(p);
  }
  template <class Range, class = decltype(std::begin(std::declval<const Range&>()))>
  explicit exclude(const Range& patterns) {
    for (const auto& p : patterns) add(p);
  }
  exclude& add(std::string_view pattern) {
    if (!pattern.empty()) globs_.emplace_back(pattern);
    return *this;
  }
  /// Patterns from the text of an exclude file (rsync --exclude-from): one per line; blank lines
  /// and lines starting with '#' or ';' are ignored; a trailing '\r' is dropped (CRLF files).
  /// Leading and other trailing spaces are part of the pattern, as in rsync.
  static exclude from_lines(std::string_view text) {
    exclude out{};
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!line.empty() && line.front() != '#' && line.front() != ';') out.add(line);
      pos = end + 1;
    }
    return out;
  }
  bool excluded(std::string_view rel, file_type type) const {
    for (const auto& g : globs_)
      if (g.matches(rel, type)) return true;
    return false;
  }
  std::size_t size() const noexcept { return globs_.size(); }

 private:
  std::vector<glob> globs_;
};

namespace detail {

// rsync's wildmatch, over one string: `*` and `?` never match '/', a run of two or more stars
// matches anything ('/' included; unlike glob_match, `**/` does not also match zero directories),
// `[...]` with `!`/`^`, ranges, `\` escapes and the POSIX classes `[:alpha:]` etc.; `\` escapes.
inline bool wild_class(std::string_view p, std::size_t& i, unsigned char c, bool& valid) {
  std::size_t j = i + 1;
  bool negate = false;
  if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
    negate = true;
    ++j;
  }
  bool matched = false;
  bool first = true;
  while (j < p.size() && (first || p[j] != ']')) {
    first = false;
    if (p[j] == '[' && j + 1 < p.size() && p[j + 1] == ':') {
      const std::size_t end = p.find(":]", j + 2);
      if (end != std::string_view::npos) {
        const std::string_view name = p.substr(j + 2, end - j - 2);
        const int ci = static_cast<int>(c);
        bool in = false;
        if (name == "alnum") in = std::isalnum(ci) != 0;
        else if (name == "alpha") in = std::isalpha(ci) != 0;
        else if (name == "blank") in = c == ' ' || c == '\t';
        else if (name == "cntrl") in = std::iscntrl(ci) != 0;
        else if (name == "digit") in = c >= '0' && c <= '9';
        else if (name == "graph") in = std::isgraph(ci) != 0;
        else if (name == "lower") in = std::islower(ci) != 0;
        else if (name == "print") in = std::isprint(ci) != 0;
        else if (name == "punct") in = std::ispunct(ci) != 0;
        else if (name == "space") in = std::isspace(ci) != 0;
        else if (name == "upper") in = std::isupper(ci) != 0;
        else if (name == "xdigit") in = std::isxdigit(ci) != 0;
        else {  // an unknown class matches nothing and makes the whole pattern fail, as in rsync
          valid = true;
          i = p.size();
          return false;
        }
        if (in) matched = true;
        j = end + 2;
        continue;
      }
    }
    unsigned char lo = static_cast<unsigned char>(p[j]);
    if (lo == '\\' && j + 1 < p.size()) lo = static_cast<unsigned char>(p[++j]);
    ++j;
    unsigned char hi = lo;
    if (j + 1 < p.size() && p[j] == '-' && p[j + 1] != ']') {
      hi = static_cast<unsigned char>(p[j + 1]);
      if (hi == '\\' && j + 2 < p.size()) {
        hi = static_cast<unsigned char>(p[j + 2]);
        ++j;
      }
      j += 2;
    }
    if (lo <= c && c <= hi) matched = true;
  }
  if (j >= p.size()) {
    valid = false;
    return false;
  }
  valid = true;
  i = j + 1;
  return matched != negate;
}

inline bool wild_step(std::string_view p, std::size_t pi, std::string_view s, std::size_t si,
                      std::vector<bool>& failed) {
  const std::size_t key = pi * (s.size() + 1) + si;
  if (failed[key]) return false;
  while (pi < p.size()) {
    const char c = p[pi];
    if (c == '*') {
      std::size_t k = pi;
      while (k < p.size() && p[k] == '*') ++k;
      const bool any = k - pi >= 2;
      for (std::size_t j = si;; ++j) {
        if (wild_step(p, k, s, j, failed)) return true;
        if (j == s.size() || (!any && s[j] == '/')) break;
      }
      failed[key] = true;
      return false;
    }
    if (si == s.size()) break;
    const auto sc = static_cast<unsigned char>(s[si]);
    if (c == '?') {
      if (sc == '/') break;
      ++pi;
      ++si;
      continue;
    }
    if (c == '[') {
      bool valid = false;
      std::size_t next = pi;
      const bool m = wild_class(p, next, sc, valid);
      if (valid) {
        if (!m || sc == '/') break;
        pi = next;
        ++si;
        continue;
      }
    }
    char lit = c;
    if (c == '\\' && pi + 1 < p.size()) lit = p[++pi];
    if (lit != s[si]) break;
    ++pi;
    ++si;
  }
  if (pi == p.size() && si == s.size()) return true;
  failed[key] = true;
  return false;
}

inline bool wild_match(std::string_view pattern, std::string_view text) {
  std::vector<bool> failed((pattern.size() + 1) * (text.size() + 1), false);
  return wild_step(pattern, 0, text, 0, failed);
}

}  // namespace detail

/// Ordered include/exclude rules with rsync's filter semantics (`rsync --filter`, `--include`,
/// `--exclude`, `-F`): the first rule that matches an entry decides; an entry no rule matches is
/// included.  The engine asks as the walk reaches each entry, so an excluded directory is never
/// entered (its contents are not even looked at) and a directory no rule excludes is entered:
/// select only headers with `filter{}.include("*/").include("*.h").exclude("*")`.
///
/// Patterns, as rsync's (`INCLUDE/EXCLUDE PATTERN RULES`):
///  - a leading '/' anchors the pattern at the root of the transfer (for a rule read from a
///    per-directory file: at the directory holding the file);
///  - a trailing '/' matches directories only;
///  - `*` and `?` do not match '/', `**` matches anything including '/', `[...]` is a class
///    (`!`/`^` negation, ranges, `[:digit:]`...), `\` escapes a wildcard;
///  - a pattern with no '/' (a trailing one aside) and no `**` is matched against the last
///    component; an unanchored pattern with a '/' against the last components of the path (as
///    many as it has), or, when it holds `**`, against the path from any component on;
///  - `dir/***` matches `dir` itself and everything below it.
///
/// Per-directory rule files (`dir_merge(".rsync-filter")`, rsync's `dir-merge` and `-F`): for an
/// entry, the files named so in the directories above it are consulted at the place of the
/// dir_merge rule, the deepest first, each holding rules in the syntax of add_rules() (a `!` in
/// one drops the rules inherited from above).  The files are read through the `loader` given at
/// construction: `filter::reading(root)` reads `root/DIR/NAME` with open(O_NOFOLLOW), regular
/// files only, at most 1 MiB (a missing, unreadable, oversized or non-regular file holds no
/// rules), each directory once per filter (a cache shared by copies, guarded by a mutex:
/// excluded() may be called from several worker threads at once).  Pass the run's source
/// directory as root; destination-only directories have no rule files.  Nested merge rules inside
/// a per-directory file are ignored.
class filter {
 public:
  /// Reads the per-directory file `name` of the directory `dir` (relative to the source, "" for
  /// the root); an empty result holds no rules.
  using loader = std::function<std::string(std::string_view dir, std::string_view name)>;

  filter() : shared_(std::make_shared<shared_state>()) {}
  explicit filter(loader load) : filter() { shared_->load = std::move(load); }

  /// A filter whose per-directory rule files are read from the directory `root`.
  static filter reading(std::filesystem::path root) {
    return filter([root = std::move(root)](std::string_view dir, std::string_view name) {
      std::filesystem::path p = root;
      if (!dir.empty()) p /= std::string(dir);
      p /= std::string(name);
      return read_rule_file(p.c_str());
    });
  }

  filter& include(std::string_view pattern) { return add(true, pattern); }
  filter& exclude(std::string_view pattern) { return add(false, pattern); }
  /// Per-directory rule files called `name` (rsync `dir-merge NAME`; `-F` is ".rsync-filter").
  filter& dir_merge(std::string_view name) {
    rule r;
    r.merge = true;
    r.pattern = std::string(name);
    rules_.push_back(std::move(r));
    return *this;
  }
  /// Drops every rule added so far (rsync's `!`).
  filter& clear() {
    rules_.clear();
    return *this;
  }

  /// One rule in rsync's --filter syntax: `+ PAT`, `- PAT`, `include PAT`, `exclude PAT`,
  /// `dir-merge NAME`, `: NAME`, `!` (clear).  Returns false (and adds nothing) on anything else,
  /// rule modifiers included.
  bool add_rule(std::string_view line) {
    std::string_view word = line, rest;
    const auto sp = line.find_first_of(" _");
    if (sp != std::string_view::npos) {
      word = line.substr(0, sp);
      rest = line.substr(sp + 1);
    }
    if (word == "!" || word == "clear") {
      if (!rest.empty()) return false;
      clear();
      return true;
    }
    if (sp == std::string_view::npos || rest.empty()) return false;
    if (word == "+" || word == "include") return include(rest), true;
    if (word == "-" || word == "exclude") return exclude(rest), true;
    if (word == ":" || word == "dir-merge") return dir_merge(rest), true;
    return false;
  }

  /// The lines of a rule file (a per-directory file, `--filter` merge text): one rule per line as
  /// add_rule() reads them; blank lines and lines starting with '#' or ';' are ignored, a trailing
  /// '\r' dropped.  With `plain` set (rsync --exclude-from / --include-from), a line that is not
  /// `+ PAT`, `- PAT` or `!` is a pattern with that action.  Returns the number of lines that were
  /// not understood (they add nothing).
  std::size_t add_rules(std::string_view text, std::optional<bool> plain_include = std::nullopt) {
    std::size_t bad = 0;
    for_each_line(text, [&](std::string_view line) {
      if (plain_include) {
        add_plain(line, *plain_include);
      } else if (!add_rule(line)) {
        ++bad;
      }
    });
    return bad;
  }

  /// A pattern as rsync's --include / --exclude take it: `+ PAT` and `- PAT` override the action,
  /// a lone `!` clears the rules.
  filter& add_plain(std::string_view pattern, bool include_it) {
    if (pattern == "!") return clear();
    if (pattern.size() > 2 && (pattern[0] == '+' || pattern[0] == '-') && pattern[1] == ' ')
      return add(pattern[0] == '+', pattern.substr(2));
    return add(include_it, pattern);
  }

  bool excluded(std::string_view rel, file_type type) const {
    const int v = decide(rules_, rel, type, true);
    return v == 0;
  }

  std::size_t size() const noexcept { return rules_.size(); }
  bool empty() const noexcept { return rules_.empty(); }

  /// The regular file at `path` (no symlink followed at its last component), at most 1 MiB;
  /// empty when it is missing, not a regular file, unreadable or larger.
  static std::string read_rule_file(const char* path) {
    std::string out;
    const int fd = ::open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return out;
    struct stat st;
    constexpr off_t cap = off_t{1} << 20;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= cap) {
      char buf[8192];
      for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          if (n < 0) out.clear();
          break;
        }
        out.append(buf, static_cast<std::size_t>(n));
        if (out.size() > static_cast<std::size_t>(cap)) {
          out.clear();
          break;
        }
      }
    }
    ::close(fd);
    return out;
  }

 private:
  struct rule {
    std::string pattern;  // without the leading '/' of an anchored pattern and the trailing '/'
    std::string base;     // a per-directory file's directory + '/', for anchored patterns
    bool include = false;
    bool merge = false;
    bool anchored = false;
    bool dirs_only = false;
    bool wild = false;    // holds '*', '?' or '['
    bool wild2 = false;   // holds "**"
    bool wild2_prefix = false;
    bool wild3_suffix = false;
    std::size_t slashes = 0;  // '/' in the pattern, the leading one counted, the trailing one not
  };
  struct dir_rules {
    std::vector<rule> rules;
    bool cleared = false;  // held a '!': the rules of the directories above do not apply
  };
  struct shared_state {
    loader load;
    std::mutex mu;
    std::map<std::string, std::shared_ptr<const dir_rules>, std::less<>> cache;
  };

  template <class F>
  static void for_each_line(std::string_view text, F&& f) {
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!line.empty() && line.front() != '#' && line.front() != ';') f(line);
      pos = end + 1;
    }
  }

  static rule make_rule(bool include_it, std::string_view pat) {
    rule r;
    r.include = include_it;
    if (pat.size() > 1 && pat.back() == '/') {
      r.dirs_only = true;
      pat.remove_suffix(1);
    }
    for (char c : pat)
      if (c == '/') ++r.slashes;
    if (!pat.empty() && pat.front() == '/') {
      r.anchored = true;
      pat.remove_prefix(1);
    }
    r.wild = pat.find_first_of("*?[") != std::string_view::npos;
    if (r.wild) {
      const auto two = pat.find("**");
      r.wild2 = two != std::string_view::npos;
      r.wild2_prefix = two == 0 && !r.anchored;
      r.wild3_suffix = pat.size() >= 3 && pat.substr(pat.size() - 3) == "***";
    }
    r.pattern = std::string(pat);
    return r;
  }

  filter& add(bool include_it, std::string_view pat) {
    if (!pat.empty()) rules_.push_back(make_rule(include_it, pat));
    return *this;
  }

  // rsync's rule_matches(), for a path relative to the transfer root.
  static bool matches(const rule& r, std::string_view rel, file_type type) {
    const bool is_dir = type == file_type::directory;
    if (r.dirs_only && !is_dir) return false;
    if (rel.empty()) return false;
    if (r.anchored && !r.base.empty()) {  // anchored at a per-directory file's directory
      if (rel.size() <= r.base.size() || rel.compare(0, r.base.size(), r.base) != 0) return false;
      rel.remove_prefix(r.base.size());
    }
    std::string_view name = rel;
    if (r.slashes == 0 && !r.wild2) {
      const auto slash = name.rfind('/');
      if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
    }
    std::string text;
    if (r.wild2_prefix) text += '/';
    text += name;
    if (is_dir && r.wild3_suffix) text += '/';
    const auto whole = [&](std::string_view t) {
      return r.wild ? detail::wild_match(r.pattern, t) : t == r.pattern;
    };
    if (!r.anchored && r.slashes > 0 && !r.wild2) {  // the last slashes+1 components
      std::size_t need = r.slashes;
      std::size_t start = text.size();
      while (start > 0) {
        if (text[start - 1] == '/') {
          if (need == 0) break;
          --need;
        }
        --start;
      }
      if (need > 0) return false;
      return whole(std::string_view(text).substr(start));
    }
    if (!r.anchored && r.wild2 && !r.wild2_prefix) {  // from the start or after any '/'
      const std::string_view t = text;
      if (whole(t)) return true;
      for (std::size_t i = 0; i < t.size(); ++i)
        if (t[i] == '/' && whole(t.substr(i + 1))) return true;
      return false;
    }
    return whole(text);
  }

  // 1 included, 0 excluded, -1 no rule matched.
  int decide(const std::vector<rule>& rules, std::string_view rel, file_type type, bool outer) const {
    for (const rule& r : rules) {
      if (r.merge) {
        if (!outer) continue;
        std::string_view dir = rel;
        for (;;) {
          const auto slash = dir.rfind('/');
          dir = slash == std::string_view::npos ? std::string_view() : dir.substr(0, slash);
          const auto d = per_dir(dir, r.pattern);
          if (d) {
            const int v = decide(d->rules, rel, type, false);
            if (v >= 0) return v;
            if (d->cleared) break;
          }
          if (dir.empty()) break;
        }
        continue;
      }
      if (matches(r, rel, type)) return r.include ? 1 : 0;
    }
    return -1;
  }

  std::shared_ptr<const dir_rules> per_dir(std::string_view dir, const std::string& name) const {
    if (!shared_->load) return nullptr;
    std::string key(dir);
    key += '\0';
    key += name;
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      const auto it = shared_->cache.find(key);
      if (it != shared_->cache.end()) return it->second;
    }
    const std::string text = shared_->load(dir, name);  // outside the lock: workers read in parallel
    std::shared_ptr<dir_rules> d;
    if (!text.empty()) {
      filter f;
      for_each_line(text, [&](std::string_view line) {
        if (line == "!" || line == "clear") {
          f.rules_.clear();
          if (!d) d = std::make_shared<dir_rules>();
          d->cleared = true;
        } else {
          f.add_rule(line);
        }
      });
      if (!d) d = std::make_shared<dir_rules>();
      d->rules = std::move(f.rules_);
      for (rule& r : d->rules)
        if (r.anchored && !dir.empty()) r.base = std::string(dir) + '/';
    }
    std::lock_guard<std::mutex> lock(shared_->mu);
    return shared_->cache.emplace(std::move(key), std::move(d)).first->second;
  }

  std::vector<rule> rules_;
  std::shared_ptr<shared_state> shared_;
};

/// Excludes nothing (the default).
struct exclude_nothing_t {
  bool excluded(std::string_view, file_type) const { return false; }
};
inline constexpr exclude_nothing_t exclude_nothing{};

namespace detail {
template <class P, class = void>
struct has_excluded_member : std::false_type {};
template <class P>
struct has_excluded_member<P, std::void_t<decltype(bool(std::declval<const P&>().excluded(
                                  std::declval<std::string_view>(), std::declval<file_type>())))>>
    : std::true_type {};
template <class P, class = void>
struct is_exclude_callable : std::false_type {};
template <class P>
struct is_exclude_callable<P, std::void_t<decltype(bool(std::declval<const P&>()(
                                  std::declval<std::string_view>(), std::declval<file_type>())))>>
    : std::true_type {};

template <class P>
bool call_excluded(const P& p, std::string_view rel, file_type t) {
  if constexpr (has_excluded_member<P>::value)
    return p.excluded(rel, t);
  else
    return p(rel, t);
}

template <bool Any, class... Ps>
struct predicate_combination {
  std::tuple<Ps...> preds;
  bool excluded(std::string_view rel, file_type t) const {
    return std::apply(
        [&](const auto&... p) {
          if constexpr (Any)
            return (false || ... || call_excluded(p, rel, t));
          else
            return (true && ... && call_excluded(p, rel, t));
        },
        preds);
  }
};

template <class P>
struct negated_predicate {
  P pred;
  bool excluded(std::string_view rel, file_type t) const { return !call_excluded(pred, rel, t); }
};
}  // namespace detail

/// Excluded when any of the predicates excludes it.
template <class... Ps>
detail::predicate_combination<true, std::decay_t<Ps>...> any_of(Ps&&... ps) {
  return {std::tuple<std::decay_t<Ps>...>(std::forward<Ps>(ps)...)};
}
/// Excluded when all of the predicates exclude it.
template <class... Ps>
detail::predicate_combination<false, std::decay_t<Ps>...> all_of(Ps&&... ps) {
  return {std::tuple<std::decay_t<Ps>...>(std::forward<Ps>(ps)...)};
}
/// Excluded when the predicate does not exclude it ("only *.h": `not_(exclude{"*.h"})` - but
/// mind that directories must then be let through too).
template <class P>
detail::negated_predicate<std::decay_t<P>> not_(P&& p) {
  return {std::forward<P>(p)};
}

// [treesync.policy.write] -----------------------------------------------------------------------
// Requirement: `static constexpr bool atomic`.

namespace write {
/// Write under a temporary name in the same directory, rename into place (the default): no
/// reader and no crash ever sees a partial file at the final name.
struct atomic_t {
  static constexpr bool atomic = true;
};
inline constexpr atomic_t atomic{};
/// Overwrite the existing file (rsync --inplace): keeps its inode and hard links, uses no extra
/// space, but a crash leaves a partial file (with a wrong mtime, so the next run redoes it).
struct in_place_t {
  static constexpr bool atomic = false;
};
inline constexpr in_place_t in_place{};
}  // namespace write

// [treesync.policy.errors] ----------------------------------------------------------------------
// Requirement: `static constexpr bool stop_on_error`.

namespace errors {
/// Record per-entry failures in the report and keep going (the default).
struct collect_t {
  static constexpr bool stop_on_error = false;
};
inline constexpr collect_t collect{};
/// Stop at the first per-entry failure; the run then fails like a refusal.
struct stop_t {
  static constexpr bool stop_on_error = true;
};
inline constexpr stop_t stop{};
}  // namespace errors

// [treesync.policy.flags] -----------------------------------------------------------------------

/// Report what would be done; write nothing.
struct dry_run_t {};
inline constexpr dry_run_t dry_run{};

/// Allow an empty source to empty a non-empty destination (refused by default: an unmounted
/// source must not wipe the mirror).
struct allow_empty_source_t {};
inline constexpr allow_empty_source_t allow_empty_source{};

/// fsync each file before its rename and each changed directory after its last change (rsync
/// --fsync): a power cut loses no completed file.  Off by default: it costs a flush per file.
struct durable_t {};
inline constexpr durable_t durable{};

/// Do not enter source directories on another filesystem than the source root (rsync -x); they
/// are reported in report::skipped_entries and their destination counterparts are left alone.
struct one_file_system_t {};
inline constexpr one_file_system_t one_file_system{};

/// Recreate FIFOs and sockets, and device nodes when privileged (rsync --specials --devices),
/// instead of skipping them.  They are still never opened.
struct specials_t {};
inline constexpr specials_t specials{};

/// Give destination entries the source's owner (rsync -o; needs CAP_CHOWN, i.e. root).
struct preserve_owner_t {};
inline constexpr preserve_owner_t preserve_owner{};

/// Give destination entries the source's group (rsync -g; any group the caller belongs to).
struct preserve_group_t {};
inline constexpr preserve_group_t preserve_group{};

/// Source files that are hard links of one another are hard links of one another in the
/// destination too (rsync -H).  The links are made once the copies exist, at the end of the run.
struct hard_links_t {};
inline constexpr hard_links_t hard_links{};

/// Copy extended attributes of files and directories when their data or the directory is
/// written (rsync -X).  An attribute-only change of a file that is otherwise current is not seen.
struct xattrs_t {};
inline constexpr xattrs_t xattrs{};

/// Report, in report::notices, source names of one directory that differ only in (ASCII) case
/// and would overwrite each other on a case-insensitive destination (macOS, Windows shares).
struct detect_case_collisions_t {};
inline constexpr detect_case_collisions_t detect_case_collisions{};

/// The seam for external schedulers (MPI ranks, a build system's task pool): directories `depth`
/// levels below the roots are created or replaced as usual but not entered; `on_subtree` receives
/// each one's relative path instead, to be synced later, anywhere, by
/// `sync(src / rel, dst / rel, subtree{rel}, ...same policies..., allow_empty_source)`.  Their
/// mode and mtime are left to that sync.  Called from the workers: make it thread-safe under jobs.
struct frontier {
  std::size_t depth = 1;
  std::function<void(std::string_view rel)> on_subtree;
};

/// Declares that this run syncs the subtree at relative path `rel` of a larger mirror: exclude and
/// deletion policies, the observer and the report then see full relative paths ("rel/name"), so
/// anchored patterns mean the same in every piece.
struct subtree {
  std::string rel;
};

/// Move every destination file the run replaces or deletes into `path` (relative paths are taken
/// from the destination root) at its relative path, instead of losing it (rsync --backup-dir).
/// The backup directory must be on the destination's filesystem; inside the destination, it is
/// never deleted as extraneous.
struct backup_dir {
  std::filesystem::path path;
};

/// Executor: how many workers run the sync.  `jobs{1}` (the default) runs it on the calling thread;
/// `jobs{n}` spreads directory pairs and the entries of each directory over n threads (large files
/// are not split) with the same outcome as the serial run; `jobs{0}` uses one per hardware thread.
/// The filesystem object must then be safe to call from several threads (posix_fs and mock_fs are).
struct jobs {
  unsigned n = 1;
  unsigned count() const noexcept {
    if (n != 0) return n;
    const unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : hw;
  }
};

/// Cancellation: once `flag` becomes true (set it from a signal handler or another thread) the run
/// schedules no more work; entries in flight complete, nothing partial is left at a final name, and
/// the run ends with `std::errc::operation_canceled` (report::cancelled is set).
struct cancel_on {
  explicit cancel_on(const std::atomic<bool>& f) noexcept : flag(&f) {}
  const std::atomic<bool>* flag;
};

/// Observer: any callable `void(const treesync::action&)`.  The default observes nothing.
struct no_observer_t {
  void operator()(const action&) const noexcept {}
};

// [treesync.options] ----------------------------------------------------------------------------
//
// Everything that is a switch or a value, chosen at run time.  Compile-time policies remain only
// where they generate code per call (compare, deletion, links, exclude, observer, the filesystem);
// the flag tags above (dry_run, durable, write::in_place, errors::stop, jobs{n}, ...) are the same
// switches spelled as arguments, and fold into one `options` before the run.  So a caller that
// chooses at run time (a CLI) instantiates sync() once:
//
//   treesync::options o;
//   o.dry_run = args.dry_run;
//   o.write = args.inplace ? treesync::write_mode::in_place : treesync::write_mode::atomic;
//   o.jobs = args.jobs;
//   auto r = treesync::sync(src, dst, o, treesync::exclude{"*.o"});
//
// Given together, an `options` and tags combine: a flag tag turns its switch on, a write or
// errors policy sets the mode, jobs / cancel_on / backup_dir / subtree / frontier set their value.

/// How a changed file reaches its final name (see write::atomic and write::in_place).
enum class write_mode : unsigned char { atomic, in_place };
/// What a per-entry failure does to the run (see errors::collect and errors::stop).
enum class error_mode : unsigned char { collect, stop };

struct options {
  bool dry_run = false;             ///< dry_run: report, write nothing
  bool allow_empty_source = false;  ///< allow_empty_source
  bool durable = false;             ///< durable: fsync files and changed directories
  bool one_file_system = false;     ///< one_file_system: do not cross mount points in the source
  bool specials = false;            ///< specials: recreate FIFOs, sockets, devices
  bool owner = false;               ///< preserve_owner
  bool group = false;               ///< preserve_group
  bool hard_links = false;          ///< hard_links
  bool xattrs = false;              ///< xattrs
  bool case_collisions = false;     ///< detect_case_collisions
  write_mode write = write_mode::atomic;
  error_mode errors = error_mode::collect;
  unsigned jobs = 1;                           ///< workers; 0: one per hardware thread (see `jobs`)
  const std::atomic<bool>* cancel = nullptr;   ///< see cancel_on; null: never cancelled
  std::filesystem::path backup_dir;            ///< see backup_dir; empty: no backups
  std::string subtree;                         ///< see subtree; empty: the whole mirror
  std::size_t frontier_depth = 0;              ///< see frontier; 0: no frontier
  std::function<void(std::string_view rel)> on_subtree;  ///< see frontier
};

// [treesync.traits] -----------------------------------------------------------------------------
//
// Policies are recognised by what they can do, not by a base class.  Each category has a trait
// (`is_compare_policy_v<P>`) and, under C++20, a concept of the same meaning (`compare_policy<P>`).

namespace detail {
template <class P, class = void>
struct compare_like : std::false_type {};
template <class P>
struct compare_like<P, std::void_t<decltype(bool(std::declval<const P&>().up_to_date(std::declval<const file_pair&>())))>>
    : std::true_type {};

template <class P, class = void>
struct deletion_like : std::false_type {};
template <class P>
struct deletion_like<P, std::void_t<decltype(bool(std::declval<const P&>().removes(std::declval<std::string_view>(),
                                                                                  std::declval<file_type>(), true))),
                                    decltype(std::size_t(std::declval<const P&>().limit()))>> : std::true_type {};

template <class P, class = void>
struct links_like : std::false_type {};
template <class P>
struct links_like<P, std::enable_if_t<std::is_same_v<decltype(std::declval<const P&>().on_symlink(
                                                         std::declval<std::string_view>(),
                                                         std::declval<std::string_view>(), true)),
                                                     link_action>>> : std::true_type {};

template <class P, class = void>
struct write_like : std::false_type {};
template <class P>
struct write_like<P, std::void_t<decltype(bool(P::atomic))>> : std::true_type {};

template <class P, class = void>
struct errors_like : std::false_type {};
template <class P>
struct errors_like<P, std::void_t<decltype(bool(P::stop_on_error))>> : std::true_type {};

template <class P, class = void>
struct observer_like : std::false_type {};
template <class P>
struct observer_like<P, std::void_t<decltype(std::declval<P&>()(std::declval<const action&>()))>> : std::true_type {};

template <class P, class = void>
struct compare_restamps : std::false_type {};
template <class P>
struct compare_restamps<P, std::void_t<decltype(P::restamp)>> : std::bool_constant<P::restamp> {};
template <class P, class = void>
struct has_restamp_fn : std::false_type {};
template <class P>
struct has_restamp_fn<P, std::void_t<decltype(bool(std::declval<const P&>().restamp()))>> : std::true_type {};
/// Whether a compare policy re-stamps the mtime of a file it finds current (see the requirement).
template <class P>
bool restamps(const P& p) {
  if constexpr (has_restamp_fn<P>::value)
    return p.restamp();
  else
    return compare_restamps<P>::value;
}

template <class P, class = void>
struct links_needs_target : std::true_type {};
template <class P>
struct links_needs_target<P, std::void_t<decltype(P::needs_target)>> : std::bool_constant<P::needs_target> {};
}  // namespace detail

template <class P>
inline constexpr bool is_compare_policy_v = detail::compare_like<std::decay_t<P>>::value;
template <class P>
inline constexpr bool is_deletion_policy_v = detail::deletion_like<std::decay_t<P>>::value;
template <class P>
inline constexpr bool is_links_policy_v = detail::links_like<std::decay_t<P>>::value;
template <class P>
inline constexpr bool is_exclude_policy_v =
    detail::has_excluded_member<std::decay_t<P>>::value || detail::is_exclude_callable<std::decay_t<P>>::value;
template <class P>
inline constexpr bool is_write_policy_v = detail::write_like<std::decay_t<P>>::value;
template <class P>
inline constexpr bool is_errors_policy_v = detail::errors_like<std::decay_t<P>>::value;
template <class P>
inline constexpr bool is_observer_policy_v =
    detail::observer_like<std::decay_t<P>>::value && !is_exclude_policy_v<P>;
template <class P>
inline constexpr bool is_dry_run_policy_v = std::is_same_v<std::decay_t<P>, dry_run_t>;
template <class P>
inline constexpr bool is_allow_empty_source_policy_v = std::is_same_v<std::decay_t<P>, allow_empty_source_t>;
template <class P>
inline constexpr bool is_jobs_policy_v = std::is_same_v<std::decay_t<P>, jobs>;
template <class P>
inline constexpr bool is_cancel_policy_v = std::is_same_v<std::decay_t<P>, cancel_on>;
template <class P>
inline constexpr bool is_options_v = std::is_same_v<std::decay_t<P>, options>;
/// The flags: each is a category of its own.
template <class P>
inline constexpr bool is_flag_policy_v =
    std::is_same_v<std::decay_t<P>, durable_t> || std::is_same_v<std::decay_t<P>, one_file_system_t> ||
    std::is_same_v<std::decay_t<P>, specials_t> || std::is_same_v<std::decay_t<P>, preserve_owner_t> ||
    std::is_same_v<std::decay_t<P>, preserve_group_t> || std::is_same_v<std::decay_t<P>, hard_links_t> ||
    std::is_same_v<std::decay_t<P>, xattrs_t> || std::is_same_v<std::decay_t<P>, detect_case_collisions_t> ||
    std::is_same_v<std::decay_t<P>, backup_dir> || std::is_same_v<std::decay_t<P>, frontier> ||
    std::is_same_v<std::decay_t<P>, subtree>;

/// How many categories P belongs to: a policy must belong to exactly one.
template <class P>
inline constexpr int policy_category_count_v =
    int(is_compare_policy_v<P>) + int(is_deletion_policy_v<P>) + int(is_links_policy_v<P>) +
    int(is_exclude_policy_v<P>) + int(is_write_policy_v<P>) + int(is_errors_policy_v<P>) +
    int(is_observer_policy_v<P>) + int(is_dry_run_policy_v<P>) + int(is_allow_empty_source_policy_v<P>) +
    int(is_jobs_policy_v<P>) + int(is_cancel_policy_v<P>) + int(is_flag_policy_v<P>) + int(is_options_v<P>);

template <class P>
inline constexpr bool is_policy_v = policy_category_count_v<P> == 1;

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
template <class P>
concept compare_policy = is_compare_policy_v<P>;
template <class P>
concept deletion_policy = is_deletion_policy_v<P>;
template <class P>
concept links_policy = is_links_policy_v<P>;
template <class P>
concept exclude_policy = is_exclude_policy_v<P>;
template <class P>
concept write_policy = is_write_policy_v<P>;
template <class P>
concept errors_policy = is_errors_policy_v<P>;
template <class P>
concept observer_policy = is_observer_policy_v<P>;
template <class P>
concept policy = is_policy_v<P>;
#endif

/// The filesystem requirements.  Every operation reports failure through its last
/// `std::error_code&` argument; names are single path components; `"."` names the handle itself.
///
///   using dir_handle = ...;                                           // movable
///   stat_info  stat_path(const path&, bool follow, error_code&);      // for the guards
///   path       canonical(const path&, error_code&);
///   dir_handle open_root(const path&, error_code&);
///   void       make_root(const path&, std::uint32_t mode, error_code&);
///   std::vector<dir_entry> list(dir_handle&, error_code&);
///   stat_info  stat(dir_handle&, const std::string& name, bool follow, error_code&);
///   dir_handle open_dir(dir_handle&, const std::string& name, bool follow, error_code&);
///   copy_result copy_file(dir_handle& src, const std::string& name, dir_handle& dst,
///                         const std::string& dst_name, const stat_info& expected,
///                         const copy_options&, error_code&);
///        // copies data into dst_name (created exclusively, or truncated when `replace`);
///        // if the source's size and mtime after the copy still equal `expected`'s, applies
///        // expected.mode and expected.mtime_ns to the new file, else fails with
///        // errc::changed_during_copy and leaves the new file's mtime alone.
///   bool       same_content(dir_handle&, const std::string&, bool follow,
///                           dir_handle&, const std::string&, error_code&);
///   void set_mode(dir_handle&, const std::string&, std::uint32_t, error_code&);
///   void set_mtime(dir_handle&, const std::string&, std::int64_t ns, error_code&);   // no follow
///   void rename(dir_handle&, const std::string& from, const std::string& to, error_code&);
///   void remove(dir_handle&, const std::string&, error_code&);       // a non-directory
///   void remove_dir(dir_handle&, const std::string&, error_code&);   // an empty directory
///   void make_dir(dir_handle&, const std::string&, std::uint32_t mode, error_code&);
///   void make_symlink(dir_handle&, const std::string& name, const std::string& target, error_code&);
///   std::string read_link(dir_handle&, const std::string&, error_code&);
///   std::int64_t now();              // the clock the filesystem stamps ctimes with (ns)
///   std::int64_t racy_window();      // timestamp granularity + clock slack (ns)
///   // and, for the policies that use them:
///   void set_owner(dir_handle&, const std::string&, std::int64_t uid, std::int64_t gid, error_code&);  // -1: keep
///   void make_special(dir_handle&, const std::string&, const stat_info&, error_code&);  // FIFO, socket, device
///   void link(dir_handle& target_dir, const std::string& target, dir_handle&, const std::string&, error_code&);
///   void move(dir_handle& from, const std::string&, dir_handle& to, const std::string&, error_code&);
///   void copy_xattrs(dir_handle& src, dir_handle& dst, error_code&);
///   void sync_dir(dir_handle&, error_code&);
/// Each missing or mistyped operation is named by its own static_assert when sync() is called.
/// Optional:
///   time_model timestamps(dir_handle&, error_code&);  // what the filesystem under a directory
///                                                      // keeps; absent: ns mtimes and a ctime
namespace detail {
template <class FS, class = void>
struct has_timestamps : std::false_type {};
template <class FS>
struct has_timestamps<FS, std::void_t<decltype(std::declval<FS&>().timestamps(
                              std::declval<typename FS::dir_handle&>(), std::declval<std::error_code&>()))>>
    : std::true_type {};

template <class FS, class = void>
struct filesystem_like : std::false_type {};
template <class FS>
struct filesystem_like<
    FS, std::void_t<typename FS::dir_handle,
                    decltype(std::declval<FS&>().list(std::declval<typename FS::dir_handle&>(),
                                                      std::declval<std::error_code&>())),
                    decltype(std::declval<FS&>().stat(std::declval<typename FS::dir_handle&>(),
                                                      std::declval<const std::string&>(), true,
                                                      std::declval<std::error_code&>())),
                    decltype(std::declval<FS&>().open_root(std::declval<const std::filesystem::path&>(),
                                                           std::declval<std::error_code&>())),
                    decltype(std::declval<FS&>().racy_window())>> : std::true_type {};
}  // namespace detail

template <class FS>
inline constexpr bool is_filesystem_v = detail::filesystem_like<std::decay_t<FS>>::value;

namespace detail {
// One detector per operation the engine calls, so that a filesystem of one's own that lacks one,
// or declares it with other parameters, is told which (check_filesystem, from sync()).
template <class T>
T& lv();  // an lvalue of T, in unevaluated operands only
template <class FS>
using handle_of = typename FS::dir_handle;
template <template <class> class Op, class FS, class = void>
struct has_op : std::false_type {};
template <template <class> class Op, class FS>
struct has_op<Op, FS, std::void_t<Op<FS>>> : std::true_type {};
template <class FS>
using op_stat_path =
    decltype(lv<FS>().stat_path(lv<const std::filesystem::path>(), true, lv<std::error_code>()));
template <class FS>
using op_canonical = decltype(lv<FS>().canonical(lv<const std::filesystem::path>(), lv<std::error_code>()));
template <class FS>
using op_make_root =
    decltype(lv<FS>().make_root(lv<const std::filesystem::path>(), 0u, lv<std::error_code>()));
template <class FS>
using op_open_dir =
    decltype(lv<FS>().open_dir(lv<handle_of<FS>>(), lv<const std::string>(), true, lv<std::error_code>()));
template <class FS>
using op_copy_file = decltype(lv<FS>().copy_file(
    lv<handle_of<FS>>(), lv<const std::string>(), lv<handle_of<FS>>(), lv<const std::string>(),
    lv<const stat_info>(), lv<const copy_options>(), lv<std::error_code>()));
template <class FS>
using op_same_content = decltype(bool(lv<FS>().same_content(lv<handle_of<FS>>(), lv<const std::string>(),
                                                            true, lv<handle_of<FS>>(),
                                                            lv<const std::string>(), lv<std::error_code>())));
template <class FS>
using op_set_mode = decltype(lv<FS>().set_mode(lv<handle_of<FS>>(), lv<const std::string>(), std::uint32_t(0),
                                               lv<std::error_code>()));
template <class FS>
using op_set_mtime = decltype(lv<FS>().set_mtime(lv<handle_of<FS>>(), lv<const std::string>(),
                                                 std::int64_t(0), lv<std::error_code>()));
template <class FS>
using op_rename = decltype(lv<FS>().rename(lv<handle_of<FS>>(), lv<const std::string>(),
                                           lv<const std::string>(), lv<std::error_code>()));
template <class FS>
using op_remove =
    decltype(lv<FS>().remove(lv<handle_of<FS>>(), lv<const std::string>(), lv<std::error_code>()));
template <class FS>
using op_remove_dir =
    decltype(lv<FS>().remove_dir(lv<handle_of<FS>>(), lv<const std::string>(), lv<std::error_code>()));
template <class FS>
using op_make_dir = decltype(lv<FS>().make_dir(lv<handle_of<FS>>(), lv<const std::string>(), std::uint32_t(0),
                                               lv<std::error_code>()));
template <class FS>
using op_make_symlink = decltype(lv<FS>().make_symlink(lv<handle_of<FS>>(), lv<const std::string>(),
                                                       lv<const std::string>(), lv<std::error_code>()));
template <class FS>
using op_read_link = decltype(std::string(
    lv<FS>().read_link(lv<handle_of<FS>>(), lv<const std::string>(), lv<std::error_code>())));
template <class FS>
using op_now = decltype(std::int64_t(lv<FS>().now()));
template <class FS>
using op_set_owner = decltype(lv<FS>().set_owner(lv<handle_of<FS>>(), lv<const std::string>(),
                                                 std::int64_t(0), std::int64_t(0), lv<std::error_code>()));
template <class FS>
using op_make_special = decltype(lv<FS>().make_special(lv<handle_of<FS>>(), lv<const std::string>(),
                                                       lv<const stat_info>(), lv<std::error_code>()));
template <class FS>
using op_link = decltype(lv<FS>().link(lv<handle_of<FS>>(), lv<const std::string>(), lv<handle_of<FS>>(),
                                       lv<const std::string>(), lv<std::error_code>()));
template <class FS>
using op_move = decltype(lv<FS>().move(lv<handle_of<FS>>(), lv<const std::string>(), lv<handle_of<FS>>(),
                                       lv<const std::string>(), lv<std::error_code>()));
template <class FS>
using op_copy_xattrs =
    decltype(lv<FS>().copy_xattrs(lv<handle_of<FS>>(), lv<handle_of<FS>>(), lv<std::error_code>()));
template <class FS>
using op_sync_dir = decltype(lv<FS>().sync_dir(lv<handle_of<FS>>(), lv<std::error_code>()));

template <class FS>
constexpr bool check_filesystem() {
  static_assert(has_op<op_stat_path, FS>::value,
                "treesync: the filesystem lacks stat_info stat_path(const path&, bool follow, error_code&)");
  static_assert(has_op<op_canonical, FS>::value,
                "treesync: the filesystem lacks path canonical(const path&, error_code&)");
  static_assert(has_op<op_make_root, FS>::value,
                "treesync: the filesystem lacks void make_root(const path&, uint32_t mode, error_code&)");
  static_assert(has_op<op_open_dir, FS>::value,
                "treesync: the filesystem lacks dir_handle open_dir(dir_handle&, const string&, bool follow, "
                "error_code&)");
  static_assert(has_op<op_copy_file, FS>::value,
                "treesync: the filesystem lacks copy_result copy_file(dir_handle&, const string&, "
                "dir_handle&, const string&, const stat_info&, const copy_options&, error_code&)");
  static_assert(has_op<op_same_content, FS>::value,
                "treesync: the filesystem lacks bool same_content(dir_handle&, const string&, bool follow, "
                "dir_handle&, const string&, error_code&)");
  static_assert(
      has_op<op_set_mode, FS>::value,
      "treesync: the filesystem lacks void set_mode(dir_handle&, const string&, uint32_t, error_code&)");
  static_assert(
      has_op<op_set_mtime, FS>::value,
      "treesync: the filesystem lacks void set_mtime(dir_handle&, const string&, int64_t ns, error_code&)");
  static_assert(has_op<op_rename, FS>::value,
                "treesync: the filesystem lacks void rename(dir_handle&, const string& from, const string& "
                "to, error_code&)");
  static_assert(has_op<op_remove, FS>::value,
                "treesync: the filesystem lacks void remove(dir_handle&, const string&, error_code&)");
  static_assert(has_op<op_remove_dir, FS>::value,
                "treesync: the filesystem lacks void remove_dir(dir_handle&, const string&, error_code&)");
  static_assert(
      has_op<op_make_dir, FS>::value,
      "treesync: the filesystem lacks void make_dir(dir_handle&, const string&, uint32_t mode, error_code&)");
  static_assert(has_op<op_make_symlink, FS>::value,
                "treesync: the filesystem lacks void make_symlink(dir_handle&, const string& name, const "
                "string& target, error_code&)");
  static_assert(has_op<op_read_link, FS>::value,
                "treesync: the filesystem lacks string read_link(dir_handle&, const string&, error_code&)");
  static_assert(has_op<op_now, FS>::value, "treesync: the filesystem lacks int64_t now()");
  static_assert(has_op<op_set_owner, FS>::value,
                "treesync: the filesystem lacks void set_owner(dir_handle&, const string&, int64_t uid, "
                "int64_t gid, error_code&)");
  static_assert(has_op<op_make_special, FS>::value,
                "treesync: the filesystem lacks void make_special(dir_handle&, const string&, const "
                "stat_info&, error_code&)");
  static_assert(has_op<op_link, FS>::value,
                "treesync: the filesystem lacks void link(dir_handle& target_dir, const string& target, "
                "dir_handle&, const string&, error_code&)");
  static_assert(has_op<op_move, FS>::value,
                "treesync: the filesystem lacks void move(dir_handle& from, const string&, dir_handle& to, "
                "const string&, error_code&)");
  static_assert(
      has_op<op_copy_xattrs, FS>::value,
      "treesync: the filesystem lacks void copy_xattrs(dir_handle& src, dir_handle& dst, error_code&)");
  static_assert(has_op<op_sync_dir, FS>::value,
                "treesync: the filesystem lacks void sync_dir(dir_handle&, error_code&)");
  return true;
}
}  // namespace detail

// [treesync.api] --------------------------------------------------------------------------------
//
//   report sync(src, dst, policies...);                 // posix_fs; throws filesystem_error
//   report sync(src, dst, policies..., error_code& ec);  // never throws filesystem_error
//   report sync(fs, src, dst, policies... [, ec]);       // any filesystem (mock_fs, posix_fs, ...)
//
// Throws (or sets ec) only when the run is refused before touching anything (source missing or
// not a directory, same or nested directories, empty source, max_delete exceeded, destination
// root cannot be created) or stopped by errors::stop.  Per-entry failures are in report::errors.

// [treesync.detail.glob] ------------------------------------------------------------------------

namespace detail {

// Matches a bracket expression starting at p[i] == '['.  Returns false through `valid` when the
// bracket is not closed (the '[' is then a literal).
inline bool match_bracket(std::string_view p, std::size_t& i, unsigned char c, bool& valid) {
  std::size_t j = i + 1;
  bool negate = false;
  if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
    negate = true;
    ++j;
  }
  bool matched = false;
  bool first = true;
  while (j < p.size() && (first || p[j] != ']')) {
    first = false;
    unsigned char lo = static_cast<unsigned char>(p[j]);
    if (lo == '\\' && j + 1 < p.size()) lo = static_cast<unsigned char>(p[++j]);
    ++j;
    unsigned char hi = lo;
    if (j + 1 < p.size() && p[j] == '-' && p[j + 1] != ']') {
      hi = static_cast<unsigned char>(p[j + 1]);
      if (hi == '\\' && j + 2 < p.size()) {
        hi = static_cast<unsigned char>(p[j + 2]);
        ++j;
      }
      j += 2;
    }
    if (lo <= c && c <= hi) matched = true;
  }
  if (j >= p.size()) {
    valid = false;
    return false;
  }
  valid = true;
  i = j + 1;  // past ']'
  return matched != negate;
}

inline bool glob_step(std::string_view p, std::size_t pi, std::string_view s, std::size_t si, int depth,
                      std::vector<bool>& failed);

// `failed` remembers the (pattern, text) positions already known not to match, so a pattern with
// many stars costs O(pattern x text x text) instead of exponential backtracking; `depth` bounds
// the recursion (one level per star group) for absurd patterns.
inline bool glob_match_at(std::string_view p, std::size_t pi, std::string_view s, std::size_t si, int depth,
                          std::vector<bool>& failed) {
  const std::size_t key = pi * (s.size() + 1) + si;
  if (failed[key]) return false;
  if (depth > 512) return false;
  const bool matched = glob_step(p, pi, s, si, depth, failed);
  if (!matched) failed[key] = true;
  return matched;
}

inline bool glob_step(std::string_view p, std::size_t pi, std::string_view s, std::size_t si, int depth,
                      std::vector<bool>& failed) {
  while (pi < p.size()) {
    const char c = p[pi];
    if (c == '*') {
      std::size_t k = pi;
      while (k < p.size() && p[k] == '*') ++k;
      if (k - pi >= 2) {  // "**": any sequence, '/' included
        const bool starts_component = pi == 0 || p[pi - 1] == '/';
        if (starts_component && k < p.size() && p[k] == '/') {
          // "**/": zero or more whole directories
          if (glob_match_at(p, k + 1, s, si, depth + 1, failed)) return true;
          for (std::size_t j = si; j < s.size(); ++j)
            if (s[j] == '/' && glob_match_at(p, k + 1, s, j + 1, depth + 1, failed)) return true;
          return false;
        }
        for (std::size_t j = si; j <= s.size(); ++j)
          if (glob_match_at(p, k, s, j, depth + 1, failed)) return true;
        return false;
      }
      // "*": any sequence within one component
      if (k == p.size()) return s.find('/', si) == std::string_view::npos;
      for (std::size_t j = si;; ++j) {
        if (glob_match_at(p, k, s, j, depth + 1, failed)) return true;
        if (j == s.size() || s[j] == '/') return false;
      }
    }
    if (si == s.size()) return false;
    const auto sc = static_cast<unsigned char>(s[si]);
    if (c == '?') {
      if (sc == '/') return false;
      ++pi;
      ++si;
      continue;
    }
    if (c == '[') {
      bool valid = false;
      std::size_t next = pi;
      const bool m = sc != '/' && match_bracket(p, next, sc, valid);
      if (valid) {
        if (!m) return false;
        pi = next;
        ++si;
        continue;
      }
      // unterminated '[': a literal
    }
    char lit = c;
    if (c == '\\' && pi + 1 < p.size()) lit = p[++pi];
    if (lit != s[si]) return false;
    ++pi;
    ++si;
  }
  return si == s.size();
}

inline bool glob_match(std::string_view pattern, std::string_view text) {
  std::vector<bool> failed((pattern.size() + 1) * (text.size() + 1), false);
  return glob_match_at(pattern, 0, text, 0, 0, failed);
}

/// Does a relative link target, resolved from the link's directory, stay inside the tree?
inline bool link_stays_inside(std::string_view rel_link, std::string_view target) {
  if (target.empty() || target.front() == '/') return false;
  // depth of the link's directory below the root
  std::size_t depth = 0;
  for (char ch : rel_link)
    if (ch == '/') ++depth;
  std::size_t pos = 0;
  while (pos <= target.size()) {
    std::size_t end = target.find('/', pos);
    if (end == std::string_view::npos) end = target.size();
    const std::string_view comp = target.substr(pos, end - pos);
    if (comp == "..") {
      if (depth == 0) return false;
      --depth;
    } else if (!comp.empty() && comp != ".") {
      ++depth;
    }
    pos = end + 1;
  }
  return true;
}

// [treesync.detail.pack] ------------------------------------------------------------------------

template <template <class> class Is, class Default>
Default& pick(Default& d) {
  return d;
}
template <template <class> class Is, class Default, class P, class... Rest>
decltype(auto) pick(Default& d, P& p, Rest&... rest) {
  if constexpr (Is<std::decay_t<P>>::value)
    return (p);
  else
    return pick<Is>(d, rest...);
}

template <template <class> class Is, class... Ps>
inline constexpr int count_in_pack = (0 + ... + int(Is<std::decay_t<Ps>>::value));

template <class P>
struct is_compare : std::bool_constant<is_compare_policy_v<P>> {};
template <class P>
struct is_deletion : std::bool_constant<is_deletion_policy_v<P>> {};
template <class P>
struct is_links : std::bool_constant<is_links_policy_v<P>> {};
template <class P>
struct is_exclude : std::bool_constant<is_exclude_policy_v<P>> {};
template <class P>
struct is_write : std::bool_constant<is_write_policy_v<P>> {};
template <class P>
struct is_errors : std::bool_constant<is_errors_policy_v<P>> {};
template <class P>
struct is_observer : std::bool_constant<is_observer_policy_v<P>> {};
template <class P>
struct is_dry_run : std::bool_constant<is_dry_run_policy_v<P>> {};
template <class P>
struct is_allow_empty : std::bool_constant<is_allow_empty_source_policy_v<P>> {};
template <class P>
struct is_jobs : std::bool_constant<is_jobs_policy_v<P>> {};
template <class P>
struct is_cancel : std::bool_constant<is_cancel_policy_v<P>> {};
template <class P>
struct is_options : std::bool_constant<is_options_v<P>> {};
template <class F>
struct is_exactly {
  template <class P>
  struct test : std::is_same<std::decay_t<P>, F> {};
};
template <class F, class... Ps>
inline constexpr bool has_flag = count_in_pack<is_exactly<F>::template test, Ps...> > 0;

// Near misses: a type that names a category's member (or has a call operator) without meeting its
// requirement gets a hint naming the category and the expected signature.
template <class P, class = void>
struct names_up_to_date : std::false_type {};
template <class P>
struct names_up_to_date<P, std::void_t<decltype(&P::up_to_date)>> : std::true_type {};
template <class P, class = void>
struct names_removes : std::false_type {};
template <class P>
struct names_removes<P, std::void_t<decltype(&P::removes)>> : std::true_type {};
template <class P, class = void>
struct names_on_symlink : std::false_type {};
template <class P>
struct names_on_symlink<P, std::void_t<decltype(&P::on_symlink)>> : std::true_type {};
template <class P, class = void>
struct names_excluded : std::false_type {};
template <class P>
struct names_excluded<P, std::void_t<decltype(&P::excluded)>> : std::true_type {};
template <class P, class = void>
struct names_call : std::false_type {};
template <class P>
struct names_call<P, std::void_t<decltype(&P::operator())>> : std::true_type {};

template <class P>
constexpr bool check_one_policy() {
  constexpr bool none = policy_category_count_v<P> == 0;
  static_assert(!(none && names_up_to_date<P>::value),
                "treesync::sync: this looks like a compare policy, but its up_to_date is not "
                "`bool up_to_date(const treesync::file_pair&) const` (is it const? does it take the pair "
                "by const reference?)");
  static_assert(!(none && names_removes<P>::value),
                "treesync::sync: this looks like a deletion policy, but it lacks `bool removes(std::string_view "
                "rel, treesync::file_type, bool excluded) const` or `std::size_t limit() const`");
  static_assert(!(none && names_on_symlink<P>::value),
                "treesync::sync: this looks like a links policy, but its on_symlink is not "
                "`treesync::link_action on_symlink(std::string_view rel, std::string_view target, bool inside) "
                "const`");
  static_assert(!(none && names_excluded<P>::value),
                "treesync::sync: this looks like an exclude policy, but its excluded is not "
                "`bool excluded(std::string_view rel, treesync::file_type) const`");
  static_assert(!(none && names_call<P>::value),
                "treesync::sync: this callable is neither an observer, callable as `void(const treesync::action&)`, "
                "nor an exclude predicate, callable as `bool(std::string_view rel, treesync::file_type)`");
  static_assert(policy_category_count_v<P> != 0,
                "treesync::sync: an argument is not a treesync policy (no category's requirements are met: "
                "compare, deletion, links, exclude, write, errors, observer, jobs, cancel_on, options, or a flag such as "
                "dry_run)");
  static_assert(policy_category_count_v<P> <= 1,
                "treesync::sync: an argument meets the requirements of more than one policy category; "
                "make it satisfy exactly one");
  return true;
}

template <class... Ps>
constexpr bool check_policies() {
  static_assert(count_in_pack<is_compare, Ps...> <= 1, "treesync::sync: more than one compare policy given");
  static_assert(count_in_pack<is_deletion, Ps...> <= 1, "treesync::sync: more than one deletion policy given");
  static_assert(count_in_pack<is_links, Ps...> <= 1, "treesync::sync: more than one links policy given");
  static_assert(count_in_pack<is_exclude, Ps...> <= 1,
                "treesync::sync: more than one exclude policy given (combine them with any_of / all_of)");
  static_assert(count_in_pack<is_write, Ps...> <= 1, "treesync::sync: more than one write policy given");
  static_assert(count_in_pack<is_errors, Ps...> <= 1, "treesync::sync: more than one errors policy given");
  static_assert(count_in_pack<is_observer, Ps...> <= 1, "treesync::sync: more than one observer given");
  static_assert(count_in_pack<is_dry_run, Ps...> <= 1, "treesync::sync: more than one dry_run given");
  static_assert(count_in_pack<is_allow_empty, Ps...> <= 1, "treesync::sync: more than one allow_empty_source given");
  static_assert(count_in_pack<is_jobs, Ps...> <= 1, "treesync::sync: more than one jobs (executor) policy given");
  static_assert(count_in_pack<is_cancel, Ps...> <= 1, "treesync::sync: more than one cancel_on given");
  static_assert(count_in_pack<is_options, Ps...> <= 1, "treesync::sync: more than one treesync::options given");
  static_assert(count_in_pack<is_exactly<durable_t>::template test, Ps...> <= 1, "treesync::sync: durable given twice");
  static_assert(count_in_pack<is_exactly<one_file_system_t>::template test, Ps...> <= 1,
                "treesync::sync: one_file_system given twice");
  static_assert(count_in_pack<is_exactly<specials_t>::template test, Ps...> <= 1, "treesync::sync: specials given twice");
  static_assert(count_in_pack<is_exactly<preserve_owner_t>::template test, Ps...> <= 1,
                "treesync::sync: preserve_owner given twice");
  static_assert(count_in_pack<is_exactly<preserve_group_t>::template test, Ps...> <= 1,
                "treesync::sync: preserve_group given twice");
  static_assert(count_in_pack<is_exactly<hard_links_t>::template test, Ps...> <= 1,
                "treesync::sync: hard_links given twice");
  static_assert(count_in_pack<is_exactly<xattrs_t>::template test, Ps...> <= 1, "treesync::sync: xattrs given twice");
  static_assert(count_in_pack<is_exactly<detect_case_collisions_t>::template test, Ps...> <= 1,
                "treesync::sync: detect_case_collisions given twice");
  static_assert(count_in_pack<is_exactly<backup_dir>::template test, Ps...> <= 1,
                "treesync::sync: more than one backup_dir given");
  static_assert(count_in_pack<is_exactly<frontier>::template test, Ps...> <= 1,
                "treesync::sync: more than one frontier given");
  static_assert(count_in_pack<is_exactly<subtree>::template test, Ps...> <= 1,
                "treesync::sync: more than one subtree given");
  return (true && ... && check_one_policy<std::decay_t<Ps>>());
}

}  // namespace detail

// [treesync.detail.engine] ----------------------------------------------------------------------
//
// The diff is a merge: list a source directory and its destination directory, sort both by name,
// walk them side by side (source only -> create, destination only -> delete, both -> compare).
// Each directory pair is independent.  "cold" marks a destination directory known to be empty
// (just created, or missing under dry_run): it is never listed or stat'ed.

namespace detail {

inline constexpr std::string_view temp_prefix = ".treesync-tmp-";

inline bool is_temp_name(std::string_view name) noexcept {
  return name.size() > temp_prefix.size() && name.substr(0, temp_prefix.size()) == temp_prefix;
}

inline bool is_enoent(const std::error_code& ec) noexcept { return ec == std::errc::no_such_file_or_directory; }

inline bool same_identity(const stat_info& a, const stat_info& b) noexcept { return a.dev == b.dev && a.ino == b.ino; }

inline std::filesystem::path strip_trailing_separators(std::filesystem::path p) {
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return std::filesystem::path(s);
}

inline unsigned long process_token() noexcept {
#if TREESYNC_HAS_POSIX
  return static_cast<unsigned long>(::getpid());
#else
  return 0;
#endif
}

/// The run-time switches of a run, gathered from the policy pack.
using run_options = options;  // the engine runs on the folded options

/// One directory pair in flight.  It owns its two handles while any of its entries or
/// subdirectories is still being processed; `pending` counts those (plus the node's own start),
/// and the worker that brings it to zero finishes the directory (its mode and mtime: post-order,
/// without a global barrier) and releases the parent.
//
// Memory is linear in depth (issue 12): a node keeps its own name and a pointer to its parent,
// which lives until its last child is done; nothing of its ancestors is copied into it.  Its
// relative path is assembled when needed from the names up the parent chain, with a shortcut:
// every `anchor_levels` levels a node (an anchor) also keeps the names from the anchor above it
// down to itself, so the walk up visits fewer than anchor_levels nodes and then one anchor per
// anchor_levels levels.
template <class Handle>
struct dir_node {
  dir_node* parent = nullptr;
  std::string name;  // name in the parent; for the root, the roots' relative path in a larger
                     // mirror (subtree), usually ""
  std::size_t depth = 1;  // the root is 1
  const dir_node* anchor = nullptr;  // the nearest anchor above (the root is one)
  std::string segment;               // an anchor's path below its own anchor ("" for others)
  stat_info src_st;  // the source directory (followed when reached through a link)
  stat_info dst_st;  // the destination entry of the same name as the parent saw it (when a directory)
  file_type dst_type = file_type::none;
  bool follow = false;  // reached through a source symlink
  Handle src;
  Handle dst;
  bool have_dst = false;
  bool cold = false;             // the destination directory is known to be empty: never read it
  // A directory this run creates is populated under a temporary name (`staged`, in the parent)
  // and renamed into place once complete: nothing below it is visible at its final path until
  // then, so its files are written straight to their final names (no temporary, no rename each).
  std::string staged;
  bool unseen = false;  // this directory, or one above it, is staged
  bool finish = false;           // set once the listing succeeded: the directory's metadata is due
  std::vector<dir_entry> sl, dl;  // sorted listings
  std::vector<std::pair<std::size_t, std::size_t>> merged;  // indices into sl / dl, npos when absent
  std::atomic<std::size_t> pending{1};
  std::atomic<bool> modified{false};  // entries of the destination directory were added/removed/renamed
  std::mutex mu;                      // made_writable, closed
  bool made_writable = false;         // a read-only destination directory was opened up for a change
  // Deep trees: a node below the fd window closes its handles once its own entries are done and
  // its subdirectories have started, and reopens its destination (checked by dev+ino) to finish.
  std::atomic<std::size_t> batches{0};    // batches of entries not yet processed
  std::atomic<std::size_t> unstarted{0};  // subdirectories not yet past their use of our handles
  bool closed = false;
  std::uint64_t dst_dev = 0, dst_ino = 0;
};

/// Directory levels that keep their handles open; deeper ones close them while they wait for
/// their subdirectories, so a 10,000-level chain needs a bounded number of descriptors.
inline constexpr std::size_t open_levels = 128;

/// Every how many levels a directory node keeps a segment of its path (see dir_node).
inline constexpr std::size_t anchor_levels = 64;

/// Levels of a directory tree being deleted that keep their handles open; deeper ones close theirs
/// while a subdirectory is emptied and reopen it (checked by device+inode) to go on.
inline constexpr std::size_t delete_open_levels = 64;

// The engine has five parts, each with one job:
//   run_state  what a run's workers share: filesystem, policies, options, time model, the stop flag;
//   journal    one worker's record of the run: counts, errors, notices, the observer's actions;
//   walker     lists and merges each directory pair and decides what every entry needs (a `plan`);
//              it reads, never writes, and never asks whether this is a dry run;
//   applier    carries a plan out; every new entry reaches its final name through one `install`;
//   scheduler  the work list, the lifetime of each directory pair and the open-descriptor window.
// A `worker` (one per thread) puts a journal, a walker, an applier and a pruner (which empties
// and removes directory trees) together; a dry run is a worker whose applier is never called.

/// What the walker decided for one entry; the worker hands it to the applier (unless this is a
/// dry run) and then to the journal.
struct plan {
  enum class step : std::uint8_t {
    none,   ///< nothing to do
    write,  ///< a new file, link or node at the name (a file possibly in place)
    meta,   ///< mode and/or mtime set by name; the entry itself stays
  };
  step what = step::none;
  file_type type = file_type::none;  ///< the source entry's type (after following a link)
  file_type old = file_type::none;   ///< what the destination holds at that name
  bool follow = false;               ///< the source entry is reached through a symlink
  bool temp = false;                 ///< write: under a temporary name, then renamed
  bool in_place = false;             ///< write: into the existing file
  bool unseen = false;               ///< write: a new name inside a staged directory (final at once)
  bool set_mtime = false;            ///< meta
  bool set_mode = false;             ///< meta
  bool settle = false;               ///< meta: re-stamps an mtime that may already match
  const char* op = "utime";          ///< meta: the operation named if it fails
  unsigned changes = 0;              ///< meta: what differs (a mask of `changed` bits)
  stat_info src;
  stat_info dst;  ///< the destination entry, when it was stat'ed
  std::string target;  ///< a symlink's

  action_kind kind() const noexcept { return old == file_type::none ? action_kind::create : action_kind::update; }
};

/// The metadata a directory gets once its content is complete.
struct dir_plan {
  bool owner = false, group = false, mode = false, mtime = false, fsync = false;
  bool meta = false;  ///< an existing directory's metadata changes: reported as update_meta
};

// Keeps a relative path equal to that of the entry being processed.
class rel_scope {
 public:
  rel_scope(std::string& rel, const std::string& name) : rel_(rel), saved_(rel.size()) {
    if (!rel_.empty()) rel_ += '/';
    rel_ += name;
  }
  ~rel_scope() { rel_.resize(saved_); }
  rel_scope(const rel_scope&) = delete;
  rel_scope& operator=(const rel_scope&) = delete;

 private:
  std::string& rel_;
  std::size_t saved_;
};

// Descends `cur` along a relative path, never following links, making missing directories when
// `create`; false when a step fails.
template <class FS>
bool descend(FS& fs, typename FS::dir_handle& cur, const std::string& rel, bool create, std::error_code& ec) {
  std::size_t pos = 0;
  while (pos <= rel.size()) {
    std::size_t end = rel.find('/', pos);
    if (end == std::string::npos) end = rel.size();
    const std::string comp = rel.substr(pos, end - pos);
    pos = end + 1;
    if (comp.empty() || comp == ".") continue;
    auto next = fs.open_dir(cur, comp, false, ec);
    if (create && is_enoent(ec)) {
      fs.make_dir(cur, comp, 0700, ec);
      if (ec && ec != std::errc::file_exists) return false;
      next = fs.open_dir(cur, comp, false, ec);
    }
    if (ec) return false;
    cur = std::move(next);
  }
  return true;
}

// ---- the backup directory ----------------------------------------------------------------------

/// The directory replaced and deleted entries are moved to (backup_dir): entered one component at
/// a time without following a link, from the destination root's handle (a relative path) or "/".
template <class FS>
class backup_tree {
 public:
  using handle = typename FS::dir_handle;

  backup_tree(FS& fs, const std::filesystem::path& dir) : fs_(fs), dir_(dir) {}

  bool enabled() const { return !dir_.empty(); }
  bool relative() const { return dir_.is_relative(); }

  /// Refuses the run, before anything is written, when a component of the path that exists is a
  /// symlink or not a directory (errc::unsafe_backup_dir).  Missing ones are made at the first
  /// backup (never following a link either).
  std::error_code check(handle* dst_root) {
    std::error_code ec;
    handle cur;
    if (!start(dst_root, cur, ec)) return ec;
    const std::string rel = path();
    std::size_t pos = 0;
    while (pos <= rel.size()) {
      std::size_t end = rel.find('/', pos);
      if (end == std::string::npos) end = rel.size();
      const std::string comp = rel.substr(pos, end - pos);
      pos = end + 1;
      if (comp.empty() || comp == ".") continue;
      handle next = fs_.open_dir(cur, comp, false, ec);
      if (is_enoent(ec)) return {};
      if (ec == std::errc::too_many_symbolic_link_levels || ec == std::errc::not_a_directory)
        return errc::unsafe_backup_dir;
      if (ec) return ec;
      cur = std::move(next);
    }
    return {};
  }

  /// Opens (creating what is missing) the directory of the backup tree that mirrors the parent
  /// of `rel`.
  bool parent_of(handle* dst_root, const std::string& rel, handle& out, std::error_code& ec) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_) {
      handle cur;
      if (!start(dst_root, cur, ec) || !descend(fs_, cur, path(), true, ec)) {
        if (ec == std::errc::too_many_symbolic_link_levels || ec == std::errc::not_a_directory)
          ec = errc::unsafe_backup_dir;
        return false;
      }
      root_ = std::move(cur);
      open_ = true;
    }
    const auto slash = rel.rfind('/');
    std::error_code probe;
    out = fs_.open_dir(root_, ".", false, probe);
    if (probe) return ec = probe, false;
    if (slash == std::string::npos) return true;
    return descend(fs_, out, rel.substr(0, slash), true, ec);
  }

 private:
  bool start(handle* dst_root, handle& cur, std::error_code& ec) {
    if (dir_.is_relative()) {
      if (!dst_root) return ec = std::make_error_code(std::errc::no_such_file_or_directory), false;
      cur = fs_.open_dir(*dst_root, ".", false, ec);
    } else {
      cur = fs_.open_root(dir_.root_path(), ec);
    }
    return !ec;
  }
  std::string path() const { return dir_.relative_path().lexically_normal().generic_string(); }

  FS& fs_;
  std::filesystem::path dir_;
  std::mutex mu_;
  handle root_;
  bool open_ = false;
};

// ---- the shared state of a run -----------------------------------------------------------------

template <class FS, class Cmp, class Del, class Lnk, class Exc, class Obs>
struct run_state {
  using fs_type = FS;
  using links_type = Lnk;
  using handle = typename FS::dir_handle;
  using node = dir_node<handle>;

  run_state(FS& f, const Cmp& c, const Del& d, const Lnk& l, const Exc& x, Obs& o, const run_options& op, report& r)
      : fs(f), cmp(c), del(d), lnk(l), exc(x), obs(o), opt(op), jobs(op.jobs == 0 ? 1 : op.jobs), out(r),
        racy_window(f.racy_window()), backups(f, op.backup_dir) {}

  FS& fs;
  const Cmp& cmp;
  const Del& del;
  const Lnk& lnk;
  const Exc& exc;
  Obs& obs;
  const run_options opt;
  const unsigned jobs;
  report& out;
  const std::int64_t racy_window;
  time_model time;  // the destination's, asked once at the start of the run
  std::uint64_t root_dev = 0;
  bool dst_known = false;  // the destination root's identity, once it exists
  std::uint64_t dst_dev = 0, dst_ino = 0;
  std::unique_ptr<node> root;  // the root directory pair, whose handles stay open for the whole run
  backup_tree<FS> backups;
  std::string backup_rel;  // the backup directory's path inside the destination, if it is inside

  std::mutex links_mu;  // hard_links: the first name seen of each multiply-linked source inode
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::string> first_name;
  std::vector<std::pair<std::string, std::string>> link_requests;  // (relative path, first's)

  std::mutex mu;  // stop_error, exception
  std::atomic<bool> stopped{false};
  std::error_code stop_error;
  std::error_code refusal;
  std::exception_ptr exception;

  /// Equal mtimes at the destination's timestamp resolution.
  bool same_mtime(const stat_info& a, const stat_info& b) const noexcept {
    const std::int64_t d = a.mtime_ns - b.mtime_ns;
    return (d < 0 ? -d : d) < time.resolution_ns;
  }
  /// The destination copy `d` of source file `s` may predate a change the source's size and mtime
  /// do not show (file_pair::racy).  With a ctime: it was written within the racy window of the
  /// source's mtime.  Without one: it carries the smudge mark its writer gave it.  A file whose
  /// ctime differs from its mtime has a ctime of its own, whatever the filesystem was taken for.
  bool racily_clean(const stat_info& s, const stat_info& d) const noexcept {
    if (time.ctime || d.ctime_ns != d.mtime_ns) return d.ctime_ns <= s.mtime_ns + racy_window;
    const std::int64_t m = smudged_mtime(s.mtime_ns) - d.mtime_ns;
    return (m < 0 ? -m : m) < time.resolution_ns;
  }
  /// A copy made now of a source last modified at `mtime_ns` is racy: the source may still change
  /// within its timestamp tick.  On a destination without ctime it must be smudged.
  bool smudge_copy(std::int64_t mtime_ns) const { return !time.ctime && fs.now() <= mtime_ns + racy_window; }
  /// The racy window of a source mtime has passed.
  bool settled(std::int64_t mtime_ns) const { return fs.now() > mtime_ns + racy_window; }

  /// The source directories of the nodes alive (a multiset by dev+ino): every ancestor of a node
  /// is alive, so a directory that is not live cannot close a cycle.
  bool live(const stat_info& st) {
    std::lock_guard<std::mutex> lock(live_mu_);
    return live_.count({st.dev, st.ino}) != 0;
  }
  void live_add(const stat_info& st) {
    std::lock_guard<std::mutex> lock(live_mu_);
    ++live_[{st.dev, st.ino}];
  }
  void live_remove(const stat_info& st) {
    std::lock_guard<std::mutex> lock(live_mu_);
    const auto it = live_.find({st.dev, st.ino});
    if (it != live_.end() && --it->second == 0) live_.erase(it);
  }

  /// Stopped by errors::stop, an exception, or the cancel flag.
  bool halted() const noexcept {
    return stopped.load(std::memory_order_relaxed) || (opt.cancel && opt.cancel->load(std::memory_order_relaxed));
  }
  void stop_on(std::error_code ec) {
    if (opt.errors != error_mode::stop) return;
    std::lock_guard<std::mutex> lock(mu);
    stopped.store(true);
    if (!stop_error) stop_error = ec;
  }
  void stop_on(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu);
    if (!exception) exception = e;
    stopped.store(true);
  }

  void observe(const action& a) {
    std::lock_guard<std::mutex> lock(observer_mu_);
    obs(a);
  }
  void hand_out(std::string_view rel) {  // frontier: a subtree left to its own sync
    std::lock_guard<std::mutex> lock(observer_mu_);
    if (opt.on_subtree) opt.on_subtree(rel);
  }

  std::string temp_name() { return temp_stem_ + std::to_string(++temp_counter_); }

  /// The backup directory's path inside the destination ("" when it is outside or unset).
  void locate_backups(const std::filesystem::path& dst) {
    if (opt.backup_dir.empty()) return;
    const std::filesystem::path b = opt.backup_dir.lexically_normal();
    if (b.is_relative()) {
      backup_rel = strip_trailing_separators(b).generic_string();
    } else {
      const std::filesystem::path rel = b.lexically_relative(dst.lexically_normal());
      if (!rel.empty() && *rel.begin() != "..") backup_rel = strip_trailing_separators(rel).generic_string();
    }
    if (backup_rel == ".") backup_rel.clear();
  }

 private:
  std::mutex observer_mu_;  // observers need not be thread-safe
  std::mutex live_mu_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::size_t> live_;
  std::atomic<std::uint64_t> temp_counter_{0};
  const std::string temp_stem_ = std::string(temp_prefix) + std::to_string(process_token()) + "-";  // once a run
};

// ---- the journal -------------------------------------------------------------------------------

/// One worker's record of the run: its counts and lists (merged into the run's report at the end)
/// and the actions it shows the observer.  `rel` is the relative path of the entry at hand.
template <class S>
class journal {
 public:
  using handle = typename S::handle;
  using node = typename S::node;

  explicit journal(S& s) : s_(s) {}

  report rep;
  std::string rel;

  void note(action_kind kind, file_type type, std::uint64_t src_size = 0, std::uint64_t dst_size = 0,
            std::error_code code = {}, unsigned changes = 0, copy_method method = copy_method::none,
            bool sparse = false) {
    s_.observe(action{kind, type, std::string_view(rel), src_size, dst_size, code, changes, method, sparse});
  }
  void fail(const char* op, std::error_code ec) {
    rep.errors.push_back({rel, op, ec});
    note(action_kind::error, file_type::none, 0, 0, ec);
    s_.stop_on(ec);
  }
  void vanish(const char* op, std::error_code ec) {
    rep.vanished.push_back({rel, op, ec});
    note(action_kind::vanished, file_type::none, 0, 0, ec);
  }
  /// A failed source operation: vanished when the entry is gone, a failure otherwise.
  void source_failure(handle& s, const std::string& name, const char* op, std::error_code ec) {
    if (is_enoent(ec)) {
      std::error_code probe;
      s_.fs.stat(s, name, false, probe);
      if (is_enoent(probe)) return vanish(op, errc::vanished);
    }
    fail(op, ec);
  }
  void skip(file_type t, const char* op, std::error_code why) {
    ++rep.skipped;
    rep.skipped_entries.push_back({rel, op, why});
    note(action_kind::skip, t, 0, 0, why);
  }
  void notice(const char* op, std::error_code ec) { rep.notices.push_back({rel, op, ec}); }
  void count(action_kind k) { k == action_kind::create ? ++rep.created : ++rep.updated; }
  void removed(file_type t) {
    ++rep.deleted;
    note(action_kind::remove, t);
  }
  void cleaned(file_type t) {
    ++rep.cleaned;
    note(action_kind::remove, t);
  }

  /// A written entry (created or replaced).
  void wrote(const plan& p, const copy_result& r) {
    const action_kind kind = p.kind();
    count(kind);
    if (p.type == file_type::regular) {
      rep.bytes_copied += r.bytes;
      note(kind, p.type, p.src.size, p.dst.size, {},
           differences(p.src, p.old == file_type::regular ? &p.dst : nullptr), r.method, r.sparse);
    } else if (p.type == file_type::symlink) {
      note(kind, p.type, p.src.size, 0, {}, kind == action_kind::create ? changed::all : changed::size);
    } else {
      note(kind, p.type, 0, 0, {}, changed::all);
    }
  }
  /// Metadata set by name.  A settled mtime that already matched is no change: counted apart.
  void touched(const plan& p) {
    if (p.settle && s_.same_mtime(p.dst, p.src)) {
      ++rep.settled;
      return;
    }
    ++rep.meta_updated;
    const bool file = p.type == file_type::regular;
    note(action_kind::update_meta, p.type, file ? p.src.size : 0, file ? p.dst.size : 0, {}, p.changes);
  }

  /// rel = a node's relative path, assembled from the names up its parent chain (see dir_node).
  void set_rel_of(const node& n) {
    std::vector<const std::string*>& parts = parts_;  // from the bottom up
    parts.clear();
    const node* a = &n;
    for (; a->parent && a->segment.empty(); a = a->parent) parts.push_back(&a->name);
    for (; a->parent; a = a->anchor) parts.push_back(&a->segment);
    std::size_t len = a->name.size();
    for (const std::string* p : parts) len += p->size() + 1;
    rel.clear();
    rel.reserve(len);
    rel = a->name;  // the root: the roots' own relative path (subtree), usually empty
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      if (!rel.empty()) rel += '/';
      rel += **it;
    }
  }

  /// Adds this worker's record to the run's report and starts afresh.
  void merge_into(report& out) {
    out.scanned += rep.scanned;
    out.created += rep.created;
    out.updated += rep.updated;
    out.meta_updated += rep.meta_updated;
    out.deleted += rep.deleted;
    out.excluded += rep.excluded;
    out.skipped += rep.skipped;
    out.cleaned += rep.cleaned;
    out.settled += rep.settled;
    out.bytes_copied += rep.bytes_copied;
    const auto append = [](std::vector<entry_error>& to, std::vector<entry_error>& from) {
      to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
    };
    append(out.errors, rep.errors);
    append(out.vanished, rep.vanished);
    append(out.skipped_entries, rep.skipped_entries);
    append(out.notices, rep.notices);
    rep = report{};
  }

 private:
  S& s_;
  std::vector<const std::string*> parts_;  // set_rel_of's scratch
};

// ---- the pruner: removing entries and whole trees ------------------------------------------------

enum class removal { done, kept, failed };

template <class S>
class applier;

/// Removes destination entries; a directory is emptied first, through handles opened without
/// following links, so a symlink inside it is removed, never walked through.  Entries inside it
/// that the deletion policy protects (excluded ones, under deletion::extraneous) are kept, and
/// then so is the directory.  It decides as it walks; the writes are the applier's, and a dry run
/// (no applier) walks, decides and records the same way without them.
template <class S>
class pruner {
 public:
  using handle = typename S::handle;

  pruner(S& s, journal<S>& j, applier<S>* a) : s_(s), fs_(s.fs), j_(j), ap_(a) {}

  /// Removes an entry.  `count_top`: the entry itself is reported as deleted.  `leftover`: a
  /// staged directory an interrupted run left: everything in it goes, whatever the deletion
  /// policy (none of it ever was at a final path).
  removal remove_entry(handle& d, const std::string& name, file_type t, bool count_top, bool leftover = false) {
    if (t == file_type::unknown) {
      std::error_code ec;
      const stat_info st = fs_.stat(d, name, false, ec);
      if (ec) return is_enoent(ec) ? removal::done : (j_.fail("stat", ec), removal::failed);
      t = st.type;
    }
    if (t == file_type::directory) return remove_tree(d, name, count_top, leftover);
    if (ap_ && !ap_->remove_file(d, name, !leftover)) return removal::failed;
    if (count_top) j_.removed(t);
    return removal::done;
  }

  /// Clears the way for an entry of another type: false (reported) when that is not possible.
  bool replace_dir(handle& d, const std::string& name) {
    const removal r = remove_entry(d, name, file_type::directory, false);
    if (r == removal::kept) j_.fail("rmdir", std::make_error_code(std::errc::directory_not_empty));
    return r == removal::done;
  }

  /// A destination entry inside the backup directory's own path: never deleted.
  bool is_backup_dir() const { return !s_.backup_rel.empty() && j_.rel == s_.backup_rel; }

 private:
  // One directory of a tree being deleted.
  struct level {
    handle h;
    bool open = true;
    bool known = false;  // dev, ino taken (before the handle was first closed)
    std::uint64_t dev = 0, ino = 0;
    std::string name;  // in the level above (for the first level: in the caller's directory)
    std::vector<dir_entry> children;
    std::size_t next = 0;
    bool ok = true;
    bool kept = false;
    std::size_t rel_size = 0;  // rel's length without this level's name
  };
  enum class entered { pushed, gone, swapped, failed };

  static void fold(level& l, removal r) {
    if (r == removal::failed) l.ok = false;
    if (r == removal::kept) l.kept = true;
  }

  // Opens and lists the directory `name` of `parent` as a new level.
  entered enter_level(handle& parent, const std::string& name, std::vector<level>& levels) {
    std::error_code ec;
    level l;
    l.h = fs_.open_dir(parent, name, false, ec);
    // swapped for a link or a file since it was listed: removed as such, never walked
    if (ec == std::errc::too_many_symbolic_link_levels || ec == std::errc::not_a_directory) return entered::swapped;
    if (ec) {
      if (is_enoent(ec)) return entered::gone;
      j_.fail("opendir", ec);
      return entered::failed;
    }
    l.children = fs_.list(l.h, ec);
    if (ec) {
      j_.fail("list", ec);
      return entered::failed;
    }
    if (ap_ && !l.children.empty()) ap_->open_up(l.h);
    l.name = name;
    levels.push_back(std::move(l));
    return entered::pushed;
  }

  // Closes a level's handle while a level below it is emptied (past delete_open_levels).
  void close_level(level& l) {
    if (!l.known) {
      std::error_code ec;
      const stat_info id = fs_.stat(l.h, ".", false, ec);
      if (ec) return;  // stays open
      l.dev = id.dev;
      l.ino = id.ino;
      l.known = true;
    }
    l.h = handle{};
    l.open = false;
  }

  // Reopens the closed level above `below` (just emptied, still open): through its "..", else
  // down from the deepest level still open (or the caller's directory), by name; every
  // directory checked by dev+ino.
  bool reopen_level(std::vector<level>& levels, handle& top, level& below) {
    level& up = levels.back();
    std::error_code ec;
    handle h = fs_.open_dir(below.h, "..", false, ec);
    if (!ec) {
      const stat_info id = fs_.stat(h, ".", false, ec);
      if (!ec && (id.dev != up.dev || id.ino != up.ino)) ec = std::make_error_code(std::errc::no_such_file_or_directory);
    }
    if (ec) {
      std::size_t i = levels.size() - 1;
      while (i > 0 && !levels[i - 1].open) --i;
      ec.clear();
      h = fs_.open_dir(i > 0 ? levels[i - 1].h : top, ".", false, ec);
      for (; !ec && i < levels.size(); ++i) {
        handle next = fs_.open_dir(h, levels[i].name, false, ec);
        if (ec) break;
        const stat_info id = fs_.stat(next, ".", false, ec);
        if (!ec && (id.dev != levels[i].dev || id.ino != levels[i].ino))
          ec = std::make_error_code(std::errc::no_such_file_or_directory);
        h = std::move(next);
      }
    }
    if (ec) return j_.fail("opendir", ec), false;
    up.h = std::move(h);
    up.open = true;
    return true;
  }

  // The next child of the deepest level: removed, kept, or (a directory) pushed as a new level.
  // False when the removal must stop (halted).
  bool step_into(std::vector<level>& levels, bool leftover) {
    level& l = levels.back();
    const dir_entry c = l.children[l.next++];
    std::string& rel = j_.rel;
    const std::size_t saved = rel.size();
    if (!rel.empty()) rel += '/';
    rel += c.name;
    file_type ct = c.type;
    if (ct == file_type::unknown) {
      std::error_code ec;
      const stat_info cs = fs_.stat(l.h, c.name, false, ec);
      if (ec) {
        if (!is_enoent(ec)) l.ok = (j_.fail("stat", ec), false);
        return rel.resize(saved), true;
      }
      ct = cs.type;
    }
    if (!leftover && (is_backup_dir() || (!is_temp_name(c.name) && !removes(ct)))) {
      l.kept = true;
      return rel.resize(saved), true;
    }
    removal r = removal::done;
    if (ct == file_type::directory) {
      const entered en = enter_level(l.h, c.name, levels);  // may move the levels: `l` is stale
      if (en == entered::pushed) {
        levels.back().rel_size = saved;
        if (levels.size() > delete_open_levels + 1) close_level(levels[levels.size() - 2]);
        return true;
      }
      if (en == entered::failed) r = removal::failed;
      if (en == entered::swapped) r = remove_entry(levels.back().h, c.name, file_type::symlink, !leftover, leftover);
    } else {
      r = remove_entry(l.h, c.name, ct, !leftover, leftover);
    }
    fold(levels.back(), r);
    rel.resize(saved);
    return leftover || !s_.halted();
  }

  // Whether the deletion policy removes the entry at rel inside a directory being deleted.
  bool removes(file_type t) {
    const bool ex = call_excluded(s_.exc, std::string_view(j_.rel), t);
    if (s_.del.removes(std::string_view(j_.rel), t, ex)) return true;
    if (ex) ++j_.rep.excluded;
    return false;
  }

  // The deepest level is empty (or keeps something): removes it and folds the outcome into the
  // level above.  Returns the outcome when it was the top level.
  std::optional<removal> step_out(std::vector<level>& levels, handle& top, bool count_top, bool leftover) {
    level done = std::move(levels.back());
    levels.pop_back();
    if (!levels.empty() && !levels.back().open && !reopen_level(levels, top, done)) return removal::failed;
    removal r = !done.ok ? removal::failed : done.kept ? removal::kept : removal::done;
    if (r == removal::done) {
      done.h = handle{};
      if (ap_ && !ap_->remove_dir(levels.empty() ? top : levels.back().h, done.name)) {
        r = removal::failed;
      } else if (!leftover && (!levels.empty() || count_top)) {
        j_.removed(file_type::directory);
      }
    }
    j_.rel.resize(done.rel_size);
    if (levels.empty()) return r;
    fold(levels.back(), r);
    if (!leftover && s_.halted()) return removal::failed;
    return std::nullopt;
  }

  // A directory and everything in it, without recursion: a stack of levels, of which only the
  // first delete_open_levels and the one being emptied hold a descriptor.
  removal remove_tree(handle& top, const std::string& top_name, bool count_top, bool leftover) {
    std::vector<level> levels;
    const std::size_t base = j_.rel.size();  // rel names the directory already
    switch (enter_level(top, top_name, levels)) {
      case entered::swapped: return remove_entry(top, top_name, file_type::symlink, count_top, leftover);
      case entered::gone: return removal::done;
      case entered::failed: return removal::failed;
      case entered::pushed: break;
    }
    levels.back().rel_size = base;
    for (;;) {
      if (levels.back().next < levels.back().children.size()) {
        if (!step_into(levels, leftover)) return j_.rel.resize(base), removal::failed;
        continue;
      }
      if (const auto r = step_out(levels, top, count_top, leftover)) return j_.rel.resize(base), *r;
    }
  }

  S& s_;
  typename S::fs_type& fs_;
  journal<S>& j_;
  applier<S>* ap_;  // null in a dry run
};

// ---- the applier -------------------------------------------------------------------------------

/// Carries plans out: every write of the run is made here.  A new entry is made under a temporary
/// name (or, inside a directory still staged, at its final name) and `install` puts it in place.
template <class S>
class applier {
 public:
  using handle = typename S::handle;
  using node = typename S::node;

  applier(S& s, journal<S>& j, pruner<S>& p) : s_(s), fs_(s.fs), j_(j), pruner_(p) {}

  /// Carries out an entry's plan in its directory `n`.  Returns whether the directory's entries
  /// changed (its mtime is then restored when it is finished).
  bool apply(node& n, const std::string& name, const plan& p) {
    if (p.what == plan::step::meta) return touch(n.dst, name, p), false;
    prepare_write(n);
    switch (p.type) {
      case file_type::regular: return write_file(n, name, p);
      case file_type::symlink: return write_link(n.dst, name, p);
      default: return write_special(n.dst, name, p);
    }
  }

  /// Puts the entry made as `made` in `d` at `name`.  What the destination held there (`old`)
  /// goes first: a directory with its content, anything else into the backup directory when
  /// there is one.  Then `made` is renamed over the name, unless it was made there.  On failure
  /// the made entry is discarded, the failure reported, and false returned.
  bool install(handle& d, const std::string& made, const std::string& name, file_type old) {
    if (old == file_type::directory ? !pruner_.replace_dir(d, name) : old != file_type::none && !backup(d, name)) {
      discard(d, made);
      return false;
    }
    if (made == name) return true;
    std::error_code ec;
    fs_.rename(d, made, name, ec);
    if (ec) {
      discard(d, made);
      j_.fail("rename", ec);
      return false;
    }
    return true;
  }

  /// Makes a directory the source has and the destination lacks: under a temporary name when the
  /// parent keeps its handle to the end (the rename needs it) and no other run finishes the
  /// subtree (frontier); inside a staged directory the name is final already.
  bool make_dir(node& n) {
    node& p = *n.parent;
    std::error_code ec;
    const bool stage =
        !p.unseen && n.dst_type == file_type::none && s_.opt.frontier_depth == 0 && p.depth <= open_levels;
    const std::string made = stage ? s_.temp_name() : n.name;
    fs_.make_dir(p.dst, made, 0700, ec);  // final mode once the content is in (a 0555 source dir)
    if (ec) return j_.fail("mkdir", ec), false;
    p.modified.store(true);
    if (stage) n.staged = made;
    n.unseen = stage || p.unseen;
    n.dst = fs_.open_dir(p.dst, made, false, ec);
    if (ec) return j_.fail("opendir", ec), false;
    n.have_dst = true;
    if (s_.opt.xattrs) {
      fs_.copy_xattrs(n.src, n.dst, ec);
      if (ec) j_.fail("xattr", ec);
    }
    return true;
  }

  /// A directory's metadata, once its content is complete; a staged one then takes its name.
  bool finish_dir(node& n, const dir_plan& p) {
    const stat_info& st = n.src_st;
    handle& d = n.dst;
    std::error_code ec;
    if (p.owner || p.group) {  // before the chmod, which a chown may undo
      fs_.set_owner(d, ".", p.owner ? std::int64_t(st.uid) : -1, p.group ? std::int64_t(st.gid) : -1, ec);
      if (ec) return j_.fail("chown", ec), false;
    }
    if (p.mode) fs_.set_mode(d, ".", st.mode, ec);
    if (ec) return j_.fail("chmod", ec), false;
    if (p.mtime) fs_.set_mtime(d, ".", st.mtime_ns, ec);
    if (ec) return j_.fail("utime", ec), false;
    if (p.fsync) fs_.sync_dir(d, ec);
    if (ec) return j_.fail("fsync", ec), false;
    if (!n.staged.empty()) {  // complete: into place (the parent's handle is open: see make_dir)
      fs_.rename(n.parent->dst, n.staged, n.name, ec);
      if (ec) return j_.fail("rename", ec), false;  // left under its temporary name: the next run removes it
      n.staged.clear();
    }
    return true;
  }

  /// Another name for a file already in the destination (hard_links), installed at `name` in `d`.
  bool link(handle& fdir, const std::string& fname, handle& d, const std::string& name, file_type old) {
    std::error_code ec;
    const std::string made = s_.temp_name();
    fs_.link(fdir, fname, d, made, ec);
    if (ec) return j_.fail("link", ec), false;
    return install(d, made, name, old);
  }

  /// Removes a non-directory; `keep_copy`: moved to the backup directory instead, when there is one.
  bool remove_file(handle& d, const std::string& name, bool keep_copy) {
    if (keep_copy && s_.opt.backup_dir.empty() == false && !is_temp_name(name)) return backup(d, name);
    std::error_code ec;
    fs_.remove(d, name, ec);
    if (ec && !is_enoent(ec)) return j_.fail("unlink", ec), false;
    return true;
  }
  bool remove_dir(handle& parent, const std::string& name) {
    std::error_code ec;
    fs_.remove_dir(parent, name, ec);
    if (ec && !is_enoent(ec)) return j_.fail("rmdir", ec), false;
    return true;
  }
  /// A directory about to be emptied is made writable first.
  void open_up(handle& d) {
    std::error_code ec;
    const stat_info self = fs_.stat(d, ".", false, ec);
    if (!ec && (self.mode & 0200) == 0) fs_.set_mode(d, ".", self.mode | 0700, ec);
  }

  /// A destination directory without write permission is made writable before its first change;
  /// finish_dir restores the source's mode.
  void prepare_write(node& n) {
    if (n.cold || !n.have_dst || (n.dst_st.mode & 0200) != 0) return;
    std::lock_guard<std::mutex> lock(n.mu);
    if (n.made_writable) return;
    std::error_code ec;
    fs_.set_mode(n.dst, ".", n.dst_st.mode | 0700, ec);
    n.made_writable = !ec;
  }

  void discard(handle& d, const std::string& name) {
    std::error_code ignored;
    fs_.remove(d, name, ignored);
  }

 private:
  // Moves the destination entry at rel (about to be replaced or deleted) into the backup
  // directory.  True when there is no backup directory or the move worked.
  bool backup(handle& d, const std::string& name) {
    if (s_.opt.backup_dir.empty()) return true;
    std::error_code ec;
    handle parent;
    if (s_.backups.parent_of(s_.root && s_.root->have_dst ? &s_.root->dst : nullptr, j_.rel, parent, ec))
      fs_.move(d, name, parent, name, ec);
    if (ec) return j_.fail("backup", ec), false;
    return true;
  }

  void touch(handle& d, const std::string& name, const plan& p) {
    std::error_code ec;
    if (p.set_mtime) fs_.set_mtime(d, name, p.src.mtime_ns, ec);
    if (!ec && p.set_mode) fs_.set_mode(d, name, p.src.mode, ec);  // the file's own: the directory is not written
    if (ec) return j_.fail(p.op, ec);
    j_.touched(p);
  }

  // A partial or unfinished new file never reaches a final path: made under a temporary name
  // (or a new name in a staged directory) it is discarded.  Returns whether `d` changed.
  bool write_file(node& n, const std::string& name, const plan& p) {
    handle& d = n.dst;
    const std::string made = p.temp ? s_.temp_name() : name;
    const bool discardable = p.temp || p.unseen;
    copy_options opts;
    opts.follow = p.follow;
    opts.replace = p.in_place;
    opts.sync = s_.opt.durable;
    opts.owner = s_.opt.owner;
    opts.group = s_.opt.group;
    opts.xattrs = s_.opt.xattrs;
    std::error_code ec;
    const copy_result copied = fs_.copy_file(n.src, name, d, made, p.src, opts, ec);
    if (ec) {
      if (discardable) discard(d, made);
      ec == errc::changed_during_copy ? j_.vanish("copy", ec) : j_.source_failure(n.src, name, "copy", ec);
      return !discardable;
    }
    if (s_.smudge_copy(p.src.mtime_ns)) {  // no ctime will tell the next run this copy was racy
      fs_.set_mtime(d, made, smudged_mtime(p.src.mtime_ns), ec);
      if (ec) {
        if (discardable) discard(d, made);
        j_.fail("utime", ec);
        return !discardable;
      }
    }
    if (!install(d, made, name, p.in_place ? file_type::none : p.old)) return true;
    j_.wrote(p, copied);
    return !p.in_place;
  }

  bool write_link(handle& d, const std::string& name, const plan& p) {
    const std::string made = p.unseen ? name : s_.temp_name();
    std::error_code ec;
    fs_.make_symlink(d, made, p.target, ec);
    if (ec) return j_.fail("symlink", ec), false;
    if (!install(d, made, name, p.old)) return true;
    j_.wrote(p, {});
    return true;
  }

  // A FIFO, socket or device node, made (never opened) with its owner, mode and mtime.
  bool write_special(handle& d, const std::string& name, const plan& p) {
    const stat_info& st = p.src;
    const std::string made = s_.temp_name();
    std::error_code ec;
    fs_.make_special(d, made, st, ec);
    if (ec) return j_.fail("mknod", ec), false;
    if (s_.opt.owner || s_.opt.group)
      fs_.set_owner(d, made, s_.opt.owner ? std::int64_t(st.uid) : -1, s_.opt.group ? std::int64_t(st.gid) : -1, ec);
    if (!ec) fs_.set_mode(d, made, st.mode, ec);
    if (!ec) fs_.set_mtime(d, made, st.mtime_ns, ec);
    if (ec) {
      discard(d, made);
      return j_.fail("mknod", ec), true;
    }
    if (!install(d, made, name, p.old)) return true;
    j_.wrote(p, {});
    return true;
  }

  S& s_;
  typename S::fs_type& fs_;
  journal<S>& j_;
  pruner<S>& pruner_;
};

// ---- the walker --------------------------------------------------------------------------------

/// What the walker found an entry needs, besides a plan: nothing, the plan carried out, or the
/// destination entry of that name removed (`remove`: by the deletion policy; `clean`: a
/// temporary an interrupted run left).
enum class verdict { none, apply, remove, clean };

/// Lists and merges each directory pair and decides what each entry needs.  Reads only.
template <class S>
class walker {
 public:
  using handle = typename S::handle;
  using node = typename S::node;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  walker(S& s, journal<S>& j) : s_(s), fs_(s.fs), j_(j) {}

  /// Opens a node's source directory, and its destination directory when there is one.
  bool open(node& n) {
    node& p = *n.parent;
    std::error_code ec;
    n.src = fs_.open_dir(p.src, n.name, n.follow, ec);
    if (ec) return j_.source_failure(p.src, n.name, "opendir", ec), false;
    if (n.dst_type != file_type::directory) return true;
    n.dst = fs_.open_dir(p.dst, n.name, false, ec);
    if (ec) return j_.fail("opendir", ec), false;
    n.have_dst = true;
    return true;
  }

  /// Lists both sides of a node, sorts, merges.  False when the pair cannot be processed (for the
  /// root, also when the empty-source guard refuses the run).
  bool list_and_merge(node& n, bool root) {
    std::error_code ec;
    n.sl = fs_.list(n.src, ec);
    if (ec) return j_.fail("list", ec), false;  // and delete nothing below: unreadable is not empty
    if (!n.cold && n.have_dst) {
      n.dl = fs_.list(n.dst, ec);
      if (ec) return j_.fail("list", ec), false;
    }
    const auto by_name = [](const dir_entry& a, const dir_entry& b) { return a.name < b.name; };
    std::sort(n.sl.begin(), n.sl.end(), by_name);
    std::sort(n.dl.begin(), n.dl.end(), by_name);
    if (s_.opt.case_collisions) report_case_collisions(n);
    if (root && !s_.opt.allow_empty_source && n.sl.empty() &&
        std::any_of(n.dl.begin(), n.dl.end(), [](const dir_entry& d) { return !is_temp_name(d.name); })) {
      s_.refusal = errc::empty_source;
      return false;
    }
    n.merged.reserve(std::max(n.sl.size(), n.dl.size()));
    std::size_t i = 0, j = 0;
    while (i < n.sl.size() || j < n.dl.size()) {
      if (j == n.dl.size() || (i < n.sl.size() && n.sl[i].name < n.dl[j].name))
        n.merged.push_back({i++, npos});
      else if (i == n.sl.size() || n.dl[j].name < n.sl[i].name)
        n.merged.push_back({npos, j++});
      else
        n.merged.push_back({i++, j++});
    }
    n.finish = true;
    return true;
  }

  /// A source entry, with its destination counterpart if the listing had one.  A directory
  /// becomes a child node; a file, link or special file may get a plan.
  verdict source_entry(node& n, const dir_entry& e, const dir_entry* de, std::vector<node*>& children, plan& p) {
    ++j_.rep.scanned;
    p.type = e.type;
    if (!resolve(n.src, e, p) || p.type == file_type::none) return verdict::none;  // none: a skipped link
    if (excluded(p.type)) {
      ++j_.rep.excluded;
      return de && n.have_dst ? verdict::remove : verdict::none;
    }
    if (s_.opt.hard_links && p.type == file_type::regular && p.src.nlink > 1 && !first_name(p.src))
      return verdict::none;  // another name of a file already being synced: linked at the end
    switch (p.type) {
      case file_type::regular: return decide_file(n, e.name, de, p);
      case file_type::directory: return enter_dir(n, e.name, de, p, children), verdict::none;
      case file_type::symlink: return decide_link(n, e.name, de, p);
      default:
        // special files are never opened: opening a FIFO blocks, a device may have side effects
        if (s_.opt.specials) return decide_special(n, e.name, de, p);
        j_.skip(p.type, "open", errc::special_file);
        return verdict::none;
    }
  }

  /// A destination entry the source lacks: a temporary an interrupted run left is always
  /// removed; anything else as the deletion policy says.
  verdict extraneous(node& n, const dir_entry& de, file_type& t) {
    t = de.type;
    if (is_temp_name(de.name)) return verdict::clean;
    return consider_removal(n, de, t);
  }

  /// A destination entry with no source counterpart to sync (the source lacks it, or excludes
  /// its own entry of that name): its type, and whether the deletion policy removes it.
  verdict consider_removal(node& n, const dir_entry& de, file_type& t) {
    t = de.type;
    if (s_.backup_rel == j_.rel && !s_.backup_rel.empty()) return verdict::none;
    if (t == file_type::unknown) {
      std::error_code ec;
      const stat_info st = fs_.stat(n.dst, de.name, false, ec);
      if (ec) return is_enoent(ec) ? verdict::none : (j_.fail("stat", ec), verdict::none);
      t = st.type;
    }
    const bool ex = excluded(t);
    if (s_.del.removes(std::string_view(j_.rel), t, ex)) return verdict::remove;
    if (ex) ++j_.rep.excluded;
    return verdict::none;
  }

  /// The metadata a finished directory needs.  An existing one whose metadata changes is an
  /// update_meta; one this run made gets all of it.
  dir_plan finish(const node& n) const {
    const stat_info& st = n.src_st;
    const stat_info* old = n.cold ? nullptr : &n.dst_st;
    dir_plan p;
    p.owner = s_.opt.owner && (!old || old->uid != st.uid);
    p.group = s_.opt.group && (!old || old->gid != st.gid);
    p.mode = !old || old->mode != st.mode || p.owner || p.group;
    const bool content_changed = n.modified.load();
    p.mtime = !old || content_changed || !s_.same_mtime(*old, st);
    p.fsync = s_.opt.durable && (!old || content_changed);
    p.meta = old && (old->mode != st.mode || !s_.same_mtime(*old, st) || p.owner || p.group);
    return p;
  }

 private:
  bool excluded(file_type t) const { return call_excluded(s_.exc, std::string_view(j_.rel), t); }

  // hard_links: true for the first name of a multiply-linked source file; a later name is queued
  // for the link pass.
  bool first_name(const stat_info& st) {
    std::lock_guard<std::mutex> lock(s_.links_mu);
    const auto seen = s_.first_name.emplace(std::make_pair(st.dev, st.ino), j_.rel);
    if (!seen.second) s_.link_requests.emplace_back(j_.rel, seen.first->second);
    return seen.second;
  }

  // One stat per entry: d_type decides whether it is taken with or without following.  Fills
  // p.src and p.type (none: a link to skip) and, for a kept link, p.target.  False when reported.
  bool resolve(handle& s, const dir_entry& e, plan& p) {
    std::error_code ec;
    if (p.type != file_type::symlink) {
      p.src = fs_.stat(s, e.name, false, ec);
      if (ec) return j_.source_failure(s, e.name, "stat", ec), false;
      if (p.type != file_type::unknown && p.src.type == file_type::symlink)  // replaced since the listing
        return j_.vanish("stat", errc::vanished), false;
      p.type = p.src.type;
      if (p.type != file_type::symlink) return true;
    }
    if constexpr (links_needs_target<typename S::links_type>::value) {
      if (!read_target(s, e.name, p)) return false;
    }
    switch (s_.lnk.on_symlink(j_.rel, p.target, link_stays_inside(j_.rel, p.target))) {
      case link_action::skip: return skip_link(p), true;
      case link_action::preserve:
        if (!links_needs_target<typename S::links_type>::value && !read_target(s, e.name, p)) return false;
        p.src.type = file_type::symlink;
        p.src.size = p.target.size();
        return true;
      default: return follow_link(s, e.name, p);
    }
  }

  bool read_target(handle& s, const std::string& name, plan& p) {
    std::error_code ec;
    p.target = fs_.read_link(s, name, ec);
    if (ec) return j_.source_failure(s, name, "readlink", ec), false;
    return true;
  }

  // A link the links policy skips: an excluded one is the exclusion's (p.type stays symlink),
  // others are reported skipped (p.type none).
  void skip_link(plan& p) {
    if (excluded(file_type::symlink)) return;
    p.type = file_type::none;
    ++j_.rep.skipped;
    j_.note(action_kind::skip, file_type::symlink);
  }

  bool follow_link(handle& s, const std::string& name, plan& p) {
    std::error_code ec;
    const stat_info ft = fs_.stat(s, name, true, ec);
    if (!ec) {
      p.src = ft;
      p.type = ft.type;
      p.follow = true;
      return true;
    }
    if (excluded(file_type::symlink)) return true;  // excluded: its failure is nobody's business (rsync)
    if (!is_enoent(ec)) return j_.fail("stat", ec), false;
    std::error_code probe;
    fs_.stat(s, name, false, probe);
    if (is_enoent(probe)) return j_.vanish("stat", errc::vanished), false;
    return j_.fail("stat", errc::dangling_symlink), false;
  }

  // Type and (when the type alone does not settle it) stat of a destination entry; false when
  // the stat failed (reported).
  bool probe_dst(node& n, const std::string& name, const dir_entry* de, plan& p) {
    p.old = file_type::none;
    if (!de) return true;
    p.old = de->type;
    if (p.old != file_type::unknown && p.old != p.type) return true;  // d_type tells a type swap
    std::error_code ec;
    p.dst = fs_.stat(n.dst, name, false, ec);
    if (ec) {
      p.old = file_type::none;
      return is_enoent(ec) ? true : (j_.fail("stat", ec), false);
    }
    p.old = p.dst.type;
    return true;
  }

  // Whether owner or group of the destination file `d` must change to match the source's `s`.
  bool owner_changes(const stat_info& s, const stat_info& d) const {
    return (s_.opt.owner && d.uid != s.uid) || (s_.opt.group && d.gid != s.gid);
  }

  // A destination regular file whose data is current needs a fresh inode (a copy under a
  // temporary name, renamed over it) rather than a metadata change by name when that change
  // would otherwise act on an inode treesync did not just write (issue 12):
  //  - its owner or group must change: never chown data treesync did not write (an attacker's
  //    file with the quick-check size and mtime would become root's);
  //  - a set-user/group-ID bit must be added: never to data treesync did not write;
  //  - any metadata must change and the file has other links: the other name may be a hard
  //    link planted from outside the destination, whose inode a chmod or utime would change.
  bool fresh_inode_needed(const stat_info& s, const stat_info& d, bool settle) const {
    if (owner_changes(s, d)) return true;
    const bool mode = d.mode != s.mode;
    if (mode && (s.mode & ~d.mode & 06000) != 0) return true;
    const bool restamp = restamps(s_.cmp) && !s_.same_mtime(d, s);
    return d.nlink > 1 && (mode || restamp || (settle && s_.settled(s.mtime_ns)));
  }

  struct content_ctx {
    walker* self;
    handle* s;
    handle* d;
    const std::string* name;
    bool follow;
    bool checked;
    std::error_code ec;
  };
  static bool content_thunk(void* p) {
    auto& c = *static_cast<content_ctx*>(p);
    c.checked = true;
    std::error_code ec;
    const bool same = c.self->fs_.same_content(*c.s, *c.name, c.follow, *c.d, *c.name, ec);
    if (ec) c.ec = ec;
    return same || ec;  // undecidable: the engine reports the error and leaves the file alone
  }

  verdict decide_file(node& n, const std::string& name, const dir_entry* de, plan& p) {
    if (!probe_dst(n, name, de, p)) return verdict::none;
    if (p.old == file_type::regular) {
      const bool racy = s_.racily_clean(p.src, p.dst);
      content_ctx ctx{this, &n.src, &n.dst, &name, p.follow, false, {}};
      const file_pair pair(p.src, p.dst, racy, &content_thunk, &ctx, s_.time.resolution_ns);
      const bool current = s_.cmp.up_to_date(pair);
      if (ctx.ec) return j_.fail("compare", ctx.ec), verdict::none;
      // The data is current; what is left is metadata, changed by name only where that cannot
      // reach an inode treesync has no business changing (see fresh_inode_needed): otherwise the
      // file is written afresh, and the new inode gets owner, group and mode.
      if (current && !fresh_inode_needed(p.src, p.dst, ctx.checked && racy))
        return decide_meta(p, ctx.checked && racy);
    }
    // In place only into an inode that is this name's alone, whose owner and group stay, and
    // that gets no set-ID bit: anything else is written afresh (temporary name + rename).
    p.what = plan::step::write;
    p.in_place = s_.opt.write == write_mode::in_place && p.old == file_type::regular && s_.opt.backup_dir.empty() &&
                 p.dst.nlink <= 1 && !owner_changes(p.src, p.dst) && (p.src.mode & 06000) == 0;
    p.unseen = n.unseen && p.old == file_type::none;  // a new name in a staged directory
    p.temp = !p.in_place && !p.unseen && (s_.opt.write == write_mode::atomic || p.old != file_type::none);
    return verdict::apply;
  }

  // A current file's metadata: its mtime restamped (a compare that restamps), its mode, or, once
  // a racily clean copy verified by content is past the window, its mtime set again so the
  // ctime leaves the window and later runs trust it.
  verdict decide_meta(plan& p, bool verified_racy) {
    p.what = plan::step::meta;
    if (restamps(s_.cmp) && !s_.same_mtime(p.dst, p.src)) {
      p.set_mtime = true;
      p.set_mode = p.dst.mode != p.src.mode;
      p.changes = differences(p.src, &p.dst) & ~changed::size;
    } else if (p.dst.mode != p.src.mode) {
      p.set_mode = true;
      p.op = "chmod";
      p.changes = changed::mode;
    } else if (verified_racy && s_.settled(p.src.mtime_ns)) {
      p.set_mtime = p.settle = true;
      p.changes = changed::mtime;
    } else {
      return verdict::none;
    }
    return verdict::apply;
  }

  verdict decide_link(node& n, const std::string& name, const dir_entry* de, plan& p) {
    std::error_code ec;
    p.old = de ? de->type : file_type::none;
    if (p.old == file_type::unknown) {
      const stat_info ds = fs_.stat(n.dst, name, false, ec);
      if (ec && !is_enoent(ec)) return j_.fail("stat", ec), verdict::none;
      p.old = ec ? file_type::none : ds.type;
      ec.clear();
    }
    if (p.old == file_type::symlink) {
      const std::string current = fs_.read_link(n.dst, name, ec);
      if (!ec && current == p.target) return verdict::none;
      if (ec && !is_enoent(ec)) return j_.fail("readlink", ec), verdict::none;
    }
    p.what = plan::step::write;
    p.unseen = n.unseen && p.old == file_type::none;
    return verdict::apply;
  }

  // The same kind of node needs its metadata only, unless it has other links (a hard link planted
  // from outside would have its mode changed): then it is made afresh like a node of another kind.
  verdict decide_special(node& n, const std::string& name, const dir_entry* de, plan& p) {
    if (!probe_dst(n, name, de, p)) return verdict::none;
    if (p.old == p.type && p.dst.rdev == p.src.rdev && p.dst.nlink <= 1) {
      if (p.dst.mode == p.src.mode && s_.same_mtime(p.dst, p.src)) return verdict::none;
      p.what = plan::step::meta;
      p.set_mode = p.set_mtime = true;
      p.op = "chmod";
      p.changes = differences(p.src, &p.dst) & ~changed::size;
      return verdict::apply;
    }
    p.what = plan::step::write;
    return verdict::apply;
  }

  // A source directory: becomes a node of its own, entered by whichever worker takes it.
  void enter_dir(node& n, const std::string& name, const dir_entry* de, plan& p, std::vector<node*>& children) {
    const stat_info& st = p.src;
    if (s_.dst_known && st.dev == s_.dst_dev && st.ino == s_.dst_ino) {
      // a followed link into a directory that holds the destination: entering it would copy the
      // destination into itself, level after level
      return j_.fail("opendir", errc::nested_directory);
    }
    if (s_.opt.one_file_system && st.dev != s_.root_dev) return j_.skip(file_type::directory, "opendir", errc::other_filesystem);
    // A cycle: the directory is one of the source directories from here up to the root.  Those
    // are all live nodes, so only a directory that is live somewhere needs the walk up.
    if (s_.live(st)) {
      for (const node* a = &n; a; a = a->parent)
        if (same_identity(a->src_st, st)) return j_.fail("opendir", errc::symlink_cycle);
    }
    if (!probe_dst(n, name, de, p)) return;
    auto child = std::make_unique<node>();
    child->dst_type = p.old;
    child->dst_st = p.dst;
    child->parent = &n;
    child->name = name;
    child->src_st = st;
    child->follow = p.follow;
    child->depth = n.depth + 1;
    s_.live_add(st);
    child->anchor = n.segment.empty() && n.parent ? n.anchor : &n;
    if (child->depth % anchor_levels == 0) set_segment(*child);
    n.pending.fetch_add(1);
    children.push_back(child.release());
  }

  // An anchor keeps the names from the anchor above it down to itself.
  static void set_segment(node& c) {
    std::size_t len = c.name.size();
    for (const node* a = c.parent; a != c.anchor; a = a->parent) len += a->name.size() + 1;
    c.segment.resize(len);
    std::size_t end = len - c.name.size();
    c.segment.replace(end, c.name.size(), c.name);
    for (const node* a = c.parent; a != c.anchor; a = a->parent) {
      c.segment[--end] = '/';
      end -= a->name.size();
      c.segment.replace(end, a->name.size(), a->name);
    }
  }

  void report_case_collisions(const node& n) {
    std::vector<std::pair<std::string, const std::string*>> folded;
    folded.reserve(n.sl.size());
    for (const auto& e : n.sl) {
      std::string f = e.name;
      for (char& c : f)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      folded.emplace_back(std::move(f), &e.name);
    }
    std::sort(folded.begin(), folded.end());
    for (std::size_t i = 0; i < folded.size(); ++i) {
      const bool prev = i > 0 && folded[i - 1].first == folded[i].first;
      const bool next = i + 1 < folded.size() && folded[i + 1].first == folded[i].first;
      if (!prev && !next) continue;
      rel_scope scope(j_.rel, *folded[i].second);
      j_.notice("list", errc::case_collision);
    }
  }

  S& s_;
  typename S::fs_type& fs_;
  journal<S>& j_;
};

// ---- the worker --------------------------------------------------------------------------------

/// One thread's share of the run: it walks the directory pairs the scheduler hands it, and hands
/// each decision to its applier, which a dry run does not have.
template <class S>
class worker {
 public:
  using handle = typename S::handle;
  using node = typename S::node;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  explicit worker(S& s)
      : s_(s), journal_(s), applier_(s, journal_, pruner_), pruner_(s, journal_, s.opt.dry_run ? nullptr : &applier_),
        walker_(s, journal_), apply_(s.opt.dry_run ? nullptr : &applier_) {}
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  journal<S>& record() { return journal_; }
  walker<S>& walk() { return walker_; }
  pruner<S>& prune() { return pruner_; }

  /// Opens (and, when missing or of another type in the destination, makes) the directory of a
  /// node its parent saw in its listing; then lists and merges.
  bool start_dir(node& n) {
    journal_.set_rel_of(n);
    if (!walker_.open(n)) return false;
    if (n.dst_type != file_type::directory && !create_dir(n)) return false;
    if (s_.opt.frontier_depth != 0 && n.depth > s_.opt.frontier_depth) {
      s_.hand_out(std::string_view(journal_.rel));
      return false;  // not entered, not finished: the subtree's own sync does both
    }
    return walker_.list_and_merge(n, false);
  }

  /// Entries [begin, end) of a node's merged listing; directories found become `children`.
  void run_batch(node& n, std::size_t begin, std::size_t end, std::vector<node*>& children) {
    journal_.set_rel_of(n);
    bool modified = false;
    for (std::size_t k = begin; k < end && !s_.halted(); ++k) {
      const auto [i, j] = n.merged[k];
      const dir_entry& e = i == npos ? n.dl[j] : n.sl[i];
      rel_scope scope(journal_.rel, e.name);
      plan p;
      file_type t = file_type::none;
      verdict v = i == npos ? walker_.extraneous(n, e, t)
                            : walker_.source_entry(n, e, j == npos ? nullptr : &n.dl[j], children, p);
      if (v == verdict::remove && i != npos) v = walker_.consider_removal(n, n.dl[j], t);
      if (v == verdict::apply) modified |= carry_out(n, e.name, p);
      if (v == verdict::remove) modified |= remove(n, n.dl[j].name, t);
      if (v == verdict::clean) modified |= clean(n, e.name, t);
    }
    if (modified) n.modified.store(true);
  }

  /// Directory metadata, after the content is complete.
  void finish_dir(node& n) {
    const dir_plan p = walker_.finish(n);
    if (apply_ && n.have_dst && !apply_->finish_dir(n, p)) return;
    if (p.meta) {
      ++journal_.rep.meta_updated;
      journal_.note(action_kind::update_meta, file_type::directory, 0, 0, {},
                    differences(n.src_st, &n.dst_st) & ~changed::size);
    }
  }

  /// A staged directory whose run stopped before it was complete never reaches its final name:
  /// it goes rather than stay behind as a temporary.
  void drop_staged(node& n) {
    n.dst = handle{};
    pruner_.remove_entry(n.parent->dst, n.staged, file_type::directory, false, true);
  }

  /// hard_links: each further name of a multiply-linked source file becomes a hard link to the
  /// first name's copy (unless it already is one), and its directory gets its mtime back.
  void link_pass() {
    auto& requests = s_.link_requests;
    std::sort(requests.begin(), requests.end());
    if (!s_.root->have_dst) return journal_.fail("open", std::make_error_code(std::errc::no_such_file_or_directory));
    for (const auto& [rel, first] : requests) {
      if (s_.halted()) return;
      journal_.rel = rel;
      link_one(rel, first);
    }
  }

 private:
  // The one place a dry run differs: there the plan is recorded as if carried out.
  bool carry_out(node& n, const std::string& name, const plan& p) {
    if (apply_) return apply_->apply(n, name, p);
    if (p.what == plan::step::meta) return journal_.touched(p), false;
    if (p.old == file_type::directory && !pruner_.replace_dir(n.dst, name)) return false;
    copy_result as_if;
    as_if.bytes = p.type == file_type::regular ? p.src.size : 0;
    journal_.wrote(p, as_if);
    return true;
  }

  bool remove(node& n, const std::string& name, file_type t) {
    if (apply_) apply_->prepare_write(n);
    return pruner_.remove_entry(n.dst, name, t, true) == removal::done;
  }

  bool clean(node& n, const std::string& name, file_type t) {
    if (apply_) apply_->prepare_write(n);
    if (t == file_type::directory || t == file_type::unknown) {  // a staged directory
      if (apply_) {
        const removal r = pruner_.remove_entry(n.dst, name, t, false, true);
        if (r != removal::done) return r != removal::failed;
        t = file_type::directory;
      }
    } else if (apply_ && !apply_->remove_file(n.dst, name, false)) {
      return false;
    }
    journal_.cleaned(t);
    return true;
  }

  bool create_dir(node& n) {
    node& p = *n.parent;
    if (apply_) apply_->prepare_write(p);
    if (n.dst_type != file_type::none) {
      if (pruner_.remove_entry(p.dst, n.name, n.dst_type, false) != removal::done) return false;
      p.modified.store(true);
    }
    if (apply_ && !apply_->make_dir(n)) return false;
    n.cold = true;
    const action_kind kind = n.dst_type == file_type::none ? action_kind::create : action_kind::update;
    journal_.count(kind);
    journal_.note(kind, file_type::directory, 0, 0, {}, changed::all);
    return true;
  }

  // One link request: `rel` becomes a hard link to `first`, both reached from the destination
  // root's handle (never its path).
  void link_one(const std::string& rel, const std::string& first) {
    const auto split = [](const std::string& r) {
      const auto slash = r.rfind('/');
      return slash == std::string::npos ? std::make_pair(std::string(), r)
                                        : std::make_pair(r.substr(0, slash), r.substr(slash + 1));
    };
    const auto [dir, name] = split(rel);
    const auto [fdir, fname] = split(first);
    std::error_code ec;
    handle parent = s_.fs.open_dir(s_.root->dst, ".", false, ec);
    handle fparent = s_.fs.open_dir(s_.root->dst, ".", false, ec);
    if (ec || !descend(s_.fs, parent, dir, false, ec) || !descend(s_.fs, fparent, fdir, false, ec))
      return journal_.fail("link", ec);
    const stat_info target = s_.fs.stat(fparent, fname, false, ec);
    if (ec || target.type != file_type::regular)
      return journal_.fail("link", ec ? ec : std::make_error_code(std::errc::no_such_file_or_directory));
    const stat_info current = s_.fs.stat(parent, name, false, ec);
    const file_type dt = ec ? file_type::none : current.type;
    if (dt == file_type::regular && same_identity(current, target)) return;
    if (apply_) {
      if (!apply_->link(fparent, fname, parent, name, dt)) return;
      restore_dir_mtime(parent, dir);
    }
    const action_kind kind = dt == file_type::none ? action_kind::create : action_kind::update;
    journal_.count(kind);
    journal_.note(kind, file_type::regular, target.size, dt == file_type::regular ? current.size : 0, {}, changed::all);
  }

  // The link changed the directory: it gets back the source directory's mtime.
  void restore_dir_mtime(handle& parent, const std::string& dir) {
    std::error_code ec;
    handle sdir = s_.fs.open_dir(s_.root->src, ".", false, ec);
    if (!ec && descend(s_.fs, sdir, dir, false, ec)) {
      const stat_info sst = s_.fs.stat(sdir, ".", false, ec);
      if (!ec) s_.fs.set_mtime(parent, ".", sst.mtime_ns, ec);
    }
    if (ec) journal_.fail("utime", ec);
  }

  S& s_;
  journal<S> journal_;
  applier<S> applier_;
  pruner<S> pruner_;
  walker<S> walker_;
  applier<S>* apply_;  // null in a dry run
};

// ---- the scheduler -----------------------------------------------------------------------------

/// The work list (a LIFO stack of tasks, so the walk goes depth first and open directories stay
/// few), the threads, and the lifetime of each directory pair: a node lives while `pending`
/// counts work for it; the worker that brings it to zero finishes the directory (post-order,
/// without a global barrier) and releases the parent.  Below open_levels a node waiting only for
/// its subdirectories closes its handles, and reopens its destination (checked by dev+ino) to
/// finish: a 10,000-level chain needs a bounded number of descriptors.
template <class S>
class scheduler {
 public:
  using handle = typename S::handle;
  using node = typename S::node;
  using worker_type = worker<S>;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  explicit scheduler(S& s) : s_(s), fs_(s.fs) {}

  /// Splits a node's merged listing into batches: one per directory when serial; when parallel,
  /// small enough that the entries of one directory spread over the workers.
  void schedule_batches(node& n) {
    const std::size_t total = n.merged.size();
    if (total == 0) return;
    std::size_t size = total;
    if (s_.jobs > 1) size = std::min<std::size_t>(64, std::max<std::size_t>(1, total / (2 * s_.jobs)));
    const std::size_t count = (total + size - 1) / size;
    n.pending.fetch_add(count);
    n.batches.fetch_add(count);
    for (std::size_t k = count; k-- > 0;) push({&n, k * size, std::min(total, (k + 1) * size)});
  }

  /// Runs the work list to its end on `first` and jobs - 1 more workers; then the link pass, and
  /// every worker's journal into the run's report.
  void run(worker_type& first) {
    std::vector<std::unique_ptr<worker_type>> helpers;
    std::vector<std::thread> threads;
    for (unsigned i = 1; i < s_.jobs; ++i) {
      helpers.push_back(std::make_unique<worker_type>(s_));
      threads.emplace_back([this, w = helpers.back().get()] { work(*w); });
    }
    work(first);
    for (auto& th : threads) th.join();
    if (!s_.link_requests.empty() && !s_.halted() && !s_.exception) first.link_pass();
    first.record().merge_into(s_.out);
    for (auto& h : helpers) h->record().merge_into(s_.out);
    if (s_.exception) std::rethrow_exception(s_.exception);
    const auto by_path = [](const entry_error& a, const entry_error& b) {
      return std::tie(a.path, a.operation) < std::tie(b.path, b.operation);
    };
    for (auto* list : {&s_.out.errors, &s_.out.vanished, &s_.out.skipped_entries, &s_.out.notices})
      std::stable_sort(list->begin(), list->end(), by_path);
  }

  /// Drops one pending unit of a node; the last one finishes the directory and moves up.
  void release(worker_type& w, node* n) {
    node* done = nullptr;  // the child finished just before: its handle leads back up
    while (n && n->pending.fetch_sub(1) == 1) {
      node* parent = n->parent;
      if (n->finish && !s_.halted()) {
        // through the directory's own handle: no name lookup, nothing to race with
        w.record().set_rel_of(*n);
        if (n->made_writable) n->dst_st.mode |= 0700;  // what it is now: finish_dir restores the source's
        if (!n->closed || !n->have_dst || reopen(w, *n, done)) w.finish_dir(*n);
      } else if (!n->staged.empty()) {
        w.record().set_rel_of(*n);
        w.drop_staged(*n);
      }
      retire(done);
      done = n;
      n = parent;
    }
    if (done && done->parent) retire(done);  // the root is the engine's, until the end of the run
  }

 private:
  struct task {
    node* n;
    std::size_t begin;  // a start task when begin == npos
    std::size_t end;
  };

  void push(const task& t) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(t);
    }
    cv_.notify_one();
  }

  bool pop(task& t) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty() || active_ == 0; });
    if (queue_.empty()) return false;
    t = queue_.back();
    queue_.pop_back();
    ++active_;
    return true;
  }

  void done_one() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--active_ == 0 && queue_.empty()) cv_.notify_all();
  }

  void work(worker_type& w) {
    task t{};
    while (pop(t)) {
      try {
        execute(w, t);
      } catch (...) {
        s_.stop_on(std::current_exception());
      }
      done_one();
    }
  }

  void execute(worker_type& w, const task& t) {
    node* n = t.n;
    struct releaser {
      scheduler& sch;
      worker_type& w;
      node* n;
      ~releaser() { sch.release(w, n); }
    } guard{*this, w, n};
    if (t.begin == npos) {
      const bool ok = !s_.halted() && w.start_dir(*n);
      n->parent->unstarted.fetch_sub(1);  // done with the parent's handles
      maybe_close(*n->parent, 0);
      if (ok) schedule_batches(*n);
      return;
    }
    std::vector<node*> children;
    w.run_batch(*n, t.begin, t.end, children);
    n->unstarted.fetch_add(children.size());
    // in reverse, so the LIFO work list enters them in name order
    for (auto it = children.rbegin(); it != children.rend(); ++it) push({*it, npos, npos});
    if (n->batches.fetch_sub(1) == 1) {  // the last batch: the listings are no longer needed
      std::vector<dir_entry>().swap(n->sl);
      std::vector<dir_entry>().swap(n->dl);
      std::vector<std::pair<std::size_t, std::size_t>>().swap(n->merged);
    }
    maybe_close(*n, 1);  // this batch's own pending unit is still counted
  }

  // Deep trees: closes a node's handles while it only waits for its subdirectories.
  void maybe_close(node& n, std::size_t own_units) {
    if (n.depth <= open_levels || n.batches.load() != 0 || n.unstarted.load() != 0 ||
        n.pending.load() <= own_units)  // no subdirectory in flight: it finishes next anyway
      return;
    std::lock_guard<std::mutex> lock(n.mu);
    if (n.closed || n.batches.load() != 0 || n.unstarted.load() != 0) return;
    if (n.have_dst) {
      std::error_code ec;
      const stat_info id = fs_.stat(n.dst, ".", false, ec);
      if (ec) return;
      n.dst_dev = id.dev;
      n.dst_ino = id.ino;
      n.dst = handle{};
    }
    n.src = handle{};
    n.closed = true;
  }

  // Reopens a closed node's destination directory: through ".." from the child that just
  // finished, or else down from the nearest ancestor whose handle is open, by the names of the
  // nodes between; either way every directory is checked by dev+ino.  Never from the root's path.
  bool reopen(worker_type& w, node& n, node* child) {
    std::error_code ec = std::make_error_code(std::errc::bad_file_descriptor);
    handle h;
    if (child && child->have_dst && !child->closed) h = fs_.open_dir(child->dst, "..", false, ec);
    if (!ec) {
      const stat_info id = fs_.stat(h, ".", false, ec);
      if (!ec && (id.dev != n.dst_dev || id.ino != n.dst_ino)) ec = std::make_error_code(std::errc::no_such_file_or_directory);
    }
    if (ec) h = reopen_from_ancestor(n, ec);
    if (ec) return w.record().fail("opendir", ec), false;
    n.dst = std::move(h);
    n.closed = false;
    return true;
  }

  handle reopen_from_ancestor(node& n, std::error_code& ec) {
    const auto gone = [&ec] { return ec = std::make_error_code(std::errc::no_such_file_or_directory), handle{}; };
    std::vector<node*> chain;  // n and its closed ancestors, from the bottom up
    handle h;
    for (node* a = &n;; a = a->parent) {
      if (!a) return gone();
      if (a != &n) {
        std::lock_guard<std::mutex> lock(a->mu);  // maybe_close may be closing it
        if (!a->closed) {
          if (!a->have_dst) return gone();
          h = fs_.open_dir(a->dst, ".", false, ec);
          if (ec) return handle{};
          break;
        }
      }
      chain.push_back(a);
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      // a directory this run is still populating is on disk under its temporary name
      handle next = fs_.open_dir(h, (*it)->staged.empty() ? (*it)->name : (*it)->staged, false, ec);
      if (ec) return handle{};
      const stat_info id = fs_.stat(next, ".", false, ec);
      if (ec) return handle{};
      if (id.dev != (*it)->dst_dev || id.ino != (*it)->dst_ino) return gone();
      h = std::move(next);
    }
    return h;
  }

  void retire(node* n) {
    if (!n) return;
    s_.live_remove(n->src_st);
    delete n;
  }

  S& s_;
  typename S::fs_type& fs_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<task> queue_;
  std::size_t active_ = 0;
};

// ---- the engine --------------------------------------------------------------------------------

// nested_directory when `p` or one of its ancestors is `id`; fails closed: an ancestor that
// cannot be stat'ed refuses the run with that error rather than passing as "not nested".
template <class FS>
std::error_code ancestor_matches(FS& fs, std::filesystem::path p, const stat_info& id) {
  for (;;) {
    std::error_code ec;
    const stat_info st = fs.stat_path(p, true, ec);
    if (ec) return ec;
    if (same_identity(st, id)) return errc::nested_directory;
    if (!p.has_relative_path()) return {};
    p = p.parent_path();
  }
}

// Is the destination (or, when it does not exist yet, the directory it will be created in) the
// source or inside it, or the source inside the destination?  The canonical paths' ancestors are
// compared by device+inode, so symlinks and bind mounts cannot hide the relation.
template <class FS>
std::error_code check_nesting(FS& fs, const std::filesystem::path& src, const stat_info& ss,
                              const std::filesystem::path& dst, const stat_info* ds) {
  std::error_code ec;
  std::filesystem::path probe;
  if (ds) {
    probe = fs.canonical(dst, ec);
  } else {
    std::filesystem::path parent = dst.parent_path();
    if (parent.empty()) parent = ".";
    probe = fs.canonical(parent, ec);
  }
  if (ec) return ec;
  if (auto e = ancestor_matches(fs, probe, ss)) return e;
  if (!ds) return {};
  const std::filesystem::path csrc = fs.canonical(src, ec);
  if (ec) return ec;
  return ancestor_matches(fs, csrc, *ds);
}

/// One run: the checks that may refuse it before anything is touched, the two roots, then the
/// scheduler over the tree.
template <class FS, class Cmp, class Del, class Lnk, class Exc, class Obs>
class engine {
 public:
  using state = run_state<FS, Cmp, Del, Lnk, Exc, Obs>;
  using handle = typename FS::dir_handle;
  using node = dir_node<handle>;

  engine(FS& fs, const Cmp& cmp, const Del& del, const Lnk& lnk, const Exc& exc, Obs& obs, const run_options& opt,
         report& rep)
      : s_(fs, cmp, del, lnk, exc, obs, opt, rep) {}

  /// Runs the whole sync.  Returns a refusal (nothing touched), the first error under
  /// errors::stop, or an empty code.
  std::error_code run(const std::filesystem::path& src_in, const std::filesystem::path& dst_in) {
    const std::filesystem::path src = strip_trailing_separators(src_in);
    const std::filesystem::path dst = strip_trailing_separators(dst_in);
    stat_info ss, ds;
    bool dst_exists = false;
    if (auto e = preflight(src, dst, ss, ds, dst_exists)) return e;
    s_.root_dev = ss.dev;
    s_.locate_backups(dst);
    worker<state> first(s_);
    first.record().rel = s_.opt.subtree;
    if (auto e = open_roots(src, dst, ss, ds, dst_exists, first)) return e;
    // The root's listings are taken, and the empty-source guard decided, before any work starts.
    // The root node, and with it the two root handles, lives until the end of the run: whatever
    // comes after the start (hard links, backups, reopening deep directories) goes through them,
    // never through the roots' paths again (issue 12: the destination's parent may be writable by
    // someone who renames the destination away and leaves a symlink in its place).
    node* r = s_.root.get();
    scheduler<state> sched(s_);
    if (!first.walk().list_and_merge(*r, true)) {
      sched.release(first, r);
      first.record().merge_into(s_.out);
      return s_.refusal ? s_.refusal : s_.stop_error;
    }
    sched.schedule_batches(*r);
    sched.release(first, r);
    sched.run(first);
    if (s_.stop_error) return s_.stop_error;
    if (s_.opt.cancel && s_.opt.cancel->load()) {
      s_.out.cancelled = true;
      return std::make_error_code(std::errc::operation_canceled);
    }
    return {};
  }

 private:
  // What refuses the run before anything is touched: a source that is not a directory, a
  // destination of another type, the same or nested directories, an unsafe backup directory.
  std::error_code preflight(const std::filesystem::path& src, const std::filesystem::path& dst, stat_info& ss,
                            stat_info& ds, bool& dst_exists) {
    std::error_code ec;
    ss = s_.fs.stat_path(src, true, ec);
    if (ec) return ec;
    if (ss.type != file_type::directory) return std::make_error_code(std::errc::not_a_directory);
    ds = s_.fs.stat_path(dst, true, ec);
    dst_exists = !ec;
    if (ec && !is_enoent(ec)) return ec;
    if (dst_exists && ds.type != file_type::directory) return std::make_error_code(std::errc::not_a_directory);
    if (dst_exists && same_identity(ss, ds)) return errc::same_directory;
    if (auto e = check_nesting(s_.fs, src, ss, dst, dst_exists ? &ds : nullptr)) return e;
    if (s_.backups.enabled() && !s_.backups.relative()) return s_.backups.check(nullptr);
    return {};
  }

  // Opens the source root, and the destination root (made first when missing, unless this is a
  // dry run); asks once what the destination keeps of timestamps.
  std::error_code open_roots(const std::filesystem::path& src, const std::filesystem::path& dst, const stat_info& ss,
                             const stat_info& ds, bool dst_exists, worker<state>& first) {
    std::error_code ec;
    auto root = std::make_unique<node>();
    root->name = s_.opt.subtree;
    root->src_st = ss;
    root->dst_st = ds;
    root->dst_type = dst_exists ? file_type::directory : file_type::none;
    s_.live_add(ss);
    root->src = s_.fs.open_root(src, ec);
    if (ec) return ec;
    if (dst_exists || !s_.opt.dry_run) {
      if (!dst_exists) s_.fs.make_root(dst, 0700, ec);
      if (!ec) root->dst = s_.fs.open_root(dst, ec);
      if (ec) return ec;
      root->have_dst = true;
      const stat_info id = dst_exists ? ds : s_.fs.stat(root->dst, ".", false, ec);
      if (ec) return ec;
      s_.dst_known = true;
      s_.dst_dev = id.dev;
      s_.dst_ino = id.ino;
      if (dst_exists && s_.backups.enabled() && s_.backups.relative()) {
        if (auto e = s_.backups.check(&root->dst)) return e;
      }
      read_time_model(root->dst);
    }
    if (!dst_exists) {
      root->cold = true;
      first.record().count(action_kind::create);
      first.record().note(action_kind::create, file_type::directory, 0, 0, {}, changed::all);
    }
    s_.root = std::move(root);
    return {};
  }

  void read_time_model(handle& dst_root) {
    if constexpr (has_timestamps<FS>::value) {
      std::error_code ec;
      const time_model m = s_.fs.timestamps(dst_root, ec);
      if (!ec) s_.time = m;
    }
    if (s_.time.resolution_ns < 1) s_.time.resolution_ns = 1;
  }

  state s_;
};

}  // namespace detail

// [treesync.posix] ------------------------------------------------------------------------------
//
// Every operation below the roots is relative to a directory handle (the *at() family) and never
// follows a link the engine did not ask to follow, so nothing is resolved through a symlink that
// appeared in the destination, and paths longer than PATH_MAX work.

#if TREESYNC_HAS_POSIX
class posix_fs {
 public:
  /// An open directory (O_DIRECTORY | O_CLOEXEC), closed on destruction.
  class dir_handle {
   public:
    dir_handle() noexcept = default;
    explicit dir_handle(int fd) noexcept : fd_(fd) {}
    dir_handle(dir_handle&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    dir_handle& operator=(dir_handle&& o) noexcept {
      if (this != &o) {
        reset();
        fd_ = std::exchange(o.fd_, -1);
      }
      return *this;
    }
    dir_handle(const dir_handle&) = delete;
    dir_handle& operator=(const dir_handle&) = delete;
    ~dir_handle() { reset(); }
    int fd() const noexcept { return fd_; }

   private:
    void reset() noexcept {
      if (fd_ >= 0) ::close(fd_);
      fd_ = -1;
    }
    int fd_ = -1;
  };

  /// `racy_window`: how close to a source file's mtime a copy must be to be verified by content on
  /// the next run (timestamp granularity plus clock slack; 1 s covers NFS servers with 1 s stamps).
  explicit posix_fs(std::chrono::nanoseconds racy_window = std::chrono::seconds(1)) noexcept
      : racy_(racy_window.count()) {}

  stat_info stat_path(const std::filesystem::path& p, bool follow, std::error_code& ec) const {
    struct ::stat st;
    const int rc = follow ? ::stat(p.c_str(), &st) : ::lstat(p.c_str(), &st);
    if (rc != 0) return set_errno(ec), stat_info{};
    ec.clear();
    return convert(st);
  }

  std::filesystem::path canonical(const std::filesystem::path& p, std::error_code& ec) const {
    return std::filesystem::canonical(p, ec);
  }

  dir_handle open_root(const std::filesystem::path& p, std::error_code& ec) const {
    const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return set_errno(ec), dir_handle{};
    ec.clear();
    return dir_handle(fd);
  }

  void make_root(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec) const {
    check(::mkdir(p.c_str(), static_cast<mode_t>(mode)), ec);
  }

  std::vector<dir_entry> list(dir_handle& d, std::error_code& ec) const {
    std::vector<dir_entry> out;
    ec.clear();
#if defined(__linux__)
    // getdents64 straight on the handle: no fdopendir (which costs an fstat and an fcntl).
    alignas(8) static thread_local char buf[64 * 1024];
    for (;;) {
      const long n = ::syscall(SYS_getdents64, d.fd(), buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        set_errno(ec);
        return {};
      }
      if (n == 0) break;
      for (long off = 0; off < n;) {
        // struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        std::uint16_t reclen;
        std::memcpy(&reclen, buf + off + 16, sizeof reclen);
        const auto dtype = static_cast<unsigned char>(buf[off + 18]);
        const char* name = buf + off + 19;
        if (!(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))))
          out.push_back({std::string(name), from_dtype(dtype)});
        off += reclen;
      }
    }
#else
    const int fd = ::openat(d.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return set_errno(ec), out;
    DIR* dir = ::fdopendir(fd);
    if (!dir) {
      set_errno(ec);
      ::close(fd);
      return out;
    }
    errno = 0;
    while (const struct dirent* e = ::readdir(dir)) {
      const char* name = e->d_name;
      if (!(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))))
        out.push_back({std::string(name), from_dtype(e->d_type)});
    }
    if (errno) set_errno(ec);
    ::closedir(dir);
#endif
    return out;
  }

  stat_info stat(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const {
    struct ::stat st;
    if (::fstatat(d.fd(), name.c_str(), &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) != 0) return set_errno(ec), stat_info{};
    ec.clear();
    return convert(st);
  }

  dir_handle open_dir(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const {
    const int fd = ::openat(d.fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    if (fd < 0) return set_errno(ec), dir_handle{};
    ec.clear();
    return dir_handle(fd);
  }

  copy_result copy_file(dir_handle& sd, const std::string& name, dir_handle& dd, const std::string& dst_name,
                        const stat_info& expected, const copy_options& opt, std::error_code& ec) const {
    ec.clear();
    copy_result res;
    // O_NONBLOCK: should a FIFO have been swapped in since the stat, opening it must not hang.
    const fd_guard in(::openat(sd.fd(), name.c_str(),
                               O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (opt.follow ? 0 : O_NOFOLLOW)));
    if (in.fd < 0) return set_errno(ec), res;
    // No fstat before the copy: `expected` is the stat the engine just took, and no byte is read
    // before the descriptor is known to be a regular file (copy_data: the in-kernel calls refuse
    // anything else; a user-space fallback checks first).  The one fstat after the copy proves
    // it was the same file all along (device, inode, size, mtime).
    // A new file is created with its final permission bits where the umask keeps them, so that
    // no fchmod is needed; never with set-ID or sticky bits, nor when its owner is still to change.
    const std::uint32_t want = expected.mode & 07777;
    const bool direct_mode = !opt.replace && !opt.owner && !opt.group && (want & ~0777u) == 0 &&
                             (want & ~process_umask()) == want;
    // In place (replace): the existing file is opened without truncating, never blocking (a FIFO
    // swapped in), and written only once fstat shows a regular file with no other link (a hard
    // link planted from outside the destination is never written through).
    const int flags =
        O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | (opt.replace ? O_NONBLOCK : (O_CREAT | O_EXCL));
    const fd_guard out(::openat(dd.fd(), dst_name.c_str(), flags, direct_mode ? static_cast<mode_t>(want) : 0600));
    if (out.fd < 0) return set_errno(ec), res;
    if (opt.replace) {
      struct ::stat cur;
      if (::fstat(out.fd, &cur) != 0) return set_errno(ec), res;
      if (!S_ISREG(cur.st_mode)) return ec = errc::special_file, res;
      if (cur.st_nlink != 1) return ec = std::make_error_code(std::errc::too_many_links), res;
      if (::ftruncate(out.fd, 0) != 0) return set_errno(ec), res;
    }
    copy_data(in.fd, out.fd, expected, res, ec);
    if (ec) return res;
    struct ::stat after;
    if (::fstat(in.fd, &after) != 0) return set_errno(ec), res;
    if (!S_ISREG(after.st_mode)) return ec = errc::special_file, res;
    const stat_info a = convert(after);
    if (a.size != expected.size || a.mtime_ns != expected.mtime_ns || res.bytes != expected.size ||
        (expected.ino != 0 && (a.ino != expected.ino || a.dev != expected.dev))) {
      ec = errc::changed_during_copy;
      return res;
    }
    if (expected.size == 0) {
      // Nothing was copied, so nothing showed the end: a regular file that says 0 bytes may still
      // have content (/proc): one byte read past the end tells, and means "changed".
      char probe;
      ::ssize_t n;
      do n = ::read(in.fd, &probe, 1);
      while (n < 0 && errno == EINTR);
      if (n != 0) return n < 0 ? set_errno(ec) : void(ec = errc::changed_during_copy), res;
    }
    if (opt.owner || opt.group) {  // before the chmod: a chown clears set-user/group-ID bits
      const uid_t u = opt.owner ? static_cast<uid_t>(expected.uid) : static_cast<uid_t>(-1);
      const gid_t g = opt.group ? static_cast<gid_t>(expected.gid) : static_cast<gid_t>(-1);
      if (::fchown(out.fd, u, g) != 0) return set_errno(ec), res;
    }
    if (opt.xattrs) {
      copy_fd_xattrs(in.fd, out.fd, ec);
      if (ec) return res;
    }
    if (!direct_mode && ::fchmod(out.fd, static_cast<mode_t>(expected.mode)) != 0) return set_errno(ec), res;
    const struct timespec ts[2] = {{0, UTIME_OMIT}, to_timespec(expected.mtime_ns)};
    if (::futimens(out.fd, ts) != 0) return set_errno(ec), res;
    if (opt.sync && ::fsync(out.fd) != 0) return set_errno(ec), res;
    return res;
  }

  bool same_content(dir_handle& a, const std::string& an, bool follow, dir_handle& b, const std::string& bn,
                    std::error_code& ec) const {
    ec.clear();
    struct ::stat sa, sb;
    const fd_guard fa(open_data(a.fd(), an, follow, sa, ec));
    if (fa.fd < 0) return false;
    const fd_guard fb(open_data(b.fd(), bn, false, sb, ec));
    if (fb.fd < 0) return false;
    if (sa.st_size != sb.st_size) return false;
    // No more than the size stat gave is read (a /proc file says 0 and may never end); a byte past
    // it on either side, or a short read, means the file changed: not the same.
    std::vector<char> ba(1 << 16), bb(1 << 16);
    for (auto left = static_cast<std::uint64_t>(sa.st_size); left > 0;) {
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, ba.size()));
      const ::ssize_t na = read_full(fa.fd, ba.data(), want, ec);
      if (ec) return false;
      const ::ssize_t nb = read_full(fb.fd, bb.data(), want, ec);
      if (ec) return false;
      if (na != nb || static_cast<std::size_t>(na) != want || std::memcmp(ba.data(), bb.data(), want) != 0) return false;
      left -= want;
    }
    char probe;
    if (read_full(fa.fd, &probe, 1, ec) != 0 || ec) return false;
    return read_full(fb.fd, &probe, 1, ec) == 0 && !ec;
  }

  // chmod never follows a link.  fchmodat(AT_SYMLINK_NOFOLLOW) refuses links without opening the
  // entry (glibc >= 2.32 emulates it with O_PATH, so a device node is not opened either); where it
  // is not available at all, the entry is opened without following and changed through its fd.
  //
  // Metadata changes by name (mode, mtime, owner) act on one inode the engine may change: on Linux
  // the entry is opened with O_PATH | O_NOFOLLOW (nothing is opened for I/O, a device or FIFO
  // neither), refused with EMLINK when it is not a directory and has other links (one of them
  // could be a hard link planted from outside the destination), and changed through that
  // descriptor (/proc/self/fd), so a name swapped in between the check and the change cannot
  // redirect it.  Without /proc, the change is made by name, never following a link.
  void set_mode(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) const {
    if (name == ".") return check(::fchmod(d.fd(), static_cast<mode_t>(mode)), ec);
#if defined(__linux__) && defined(O_PATH)
    {
      const path_fd p(d.fd(), name, ec);
      if (ec) return;
      if (S_ISLNK(p.st.st_mode)) return ec = std::make_error_code(std::errc::operation_not_supported), void();
      if (::chmod(proc_fd_path(p.fd).c_str(), static_cast<mode_t>(mode)) == 0) return ec.clear();
      if (errno != ENOENT) return set_errno(ec);
    }
#endif
    if (::fchmodat(d.fd(), name.c_str(), static_cast<mode_t>(mode), AT_SYMLINK_NOFOLLOW) == 0) return ec.clear();
    if (errno != ENOTSUP && errno != EOPNOTSUPP && errno != ENOSYS) return set_errno(ec);
    const fd_guard f(::openat(d.fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (f.fd < 0) return set_errno(ec);
    check(::fchmod(f.fd, static_cast<mode_t>(mode)), ec);
  }
  void set_mtime(dir_handle& d, const std::string& name, std::int64_t ns, std::error_code& ec) const {
    const struct timespec ts[2] = {{0, UTIME_OMIT}, to_timespec(ns)};
    if (name == ".") return check(::futimens(d.fd(), ts), ec);
#if defined(__linux__) && defined(O_PATH)
    {
      const path_fd p(d.fd(), name, ec);
      if (ec) return;
      if (!S_ISLNK(p.st.st_mode)) {  // a link's own times: by name, below
        if (::utimensat(AT_FDCWD, proc_fd_path(p.fd).c_str(), ts, 0) == 0) return ec.clear();
        if (errno != ENOENT) return set_errno(ec);
      }
    }
#endif
    check(::utimensat(d.fd(), name.c_str(), ts, AT_SYMLINK_NOFOLLOW), ec);
  }
  void rename(dir_handle& d, const std::string& from, const std::string& to, std::error_code& ec) const {
    check(::renameat(d.fd(), from.c_str(), d.fd(), to.c_str()), ec);
  }
  void remove(dir_handle& d, const std::string& name, std::error_code& ec) const {
    check(::unlinkat(d.fd(), name.c_str(), 0), ec);
  }
  void remove_dir(dir_handle& d, const std::string& name, std::error_code& ec) const {
    check(::unlinkat(d.fd(), name.c_str(), AT_REMOVEDIR), ec);
  }
  void make_dir(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) const {
    check(::mkdirat(d.fd(), name.c_str(), static_cast<mode_t>(mode)), ec);
  }
  void make_symlink(dir_handle& d, const std::string& name, const std::string& target, std::error_code& ec) const {
    check(::symlinkat(target.c_str(), d.fd(), name.c_str()), ec);
  }
  std::string read_link(dir_handle& d, const std::string& name, std::error_code& ec) const {
    std::string buf(256, '\0');
    for (;;) {
      const ::ssize_t n = ::readlinkat(d.fd(), name.c_str(), buf.data(), buf.size());
      if (n < 0) return set_errno(ec), std::string{};
      if (static_cast<std::size_t>(n) < buf.size()) {
        buf.resize(static_cast<std::size_t>(n));
        ec.clear();
        return buf;
      }
      buf.resize(buf.size() * 2);
    }
  }

  /// Owner and group (-1: unchanged), never following a link.
  void set_owner(dir_handle& d, const std::string& name, std::int64_t uid, std::int64_t gid,
                 std::error_code& ec) const {
    const auto u = static_cast<uid_t>(uid < 0 ? static_cast<uid_t>(-1) : static_cast<uid_t>(uid));
    const auto g = static_cast<gid_t>(gid < 0 ? static_cast<gid_t>(-1) : static_cast<gid_t>(gid));
    if (name == ".") return check(::fchown(d.fd(), u, g), ec);
#if defined(__linux__) && defined(O_PATH) && defined(AT_EMPTY_PATH)
    {
      const path_fd p(d.fd(), name, ec);
      if (ec) return;
      return check(::fchownat(p.fd, "", u, g, AT_EMPTY_PATH), ec);  // the link itself, for a link
    }
#endif
    check(::fchownat(d.fd(), name.c_str(), u, g, AT_SYMLINK_NOFOLLOW), ec);
  }
  /// A FIFO, socket or device node like `st` (mode bits set separately).
  void make_special(dir_handle& d, const std::string& name, const stat_info& st, std::error_code& ec) const {
    mode_t type = 0;
    switch (st.type) {
      case file_type::fifo: type = S_IFIFO; break;
      case file_type::socket: type = S_IFSOCK; break;
      case file_type::block: type = S_IFBLK; break;
      case file_type::character: type = S_IFCHR; break;
      default: ec = std::make_error_code(std::errc::invalid_argument); return;
    }
    check(::mknodat(d.fd(), name.c_str(), type | 0600, static_cast<dev_t>(st.rdev)), ec);
  }
  /// Flushes a directory (its entries) to stable storage.
  void sync_dir(dir_handle& d, std::error_code& ec) const { check(::fsync(d.fd()), ec); }
  /// A hard link `name` in `d` to `target` in `td`.
  void link(dir_handle& td, const std::string& target, dir_handle& d, const std::string& name,
            std::error_code& ec) const {
    check(::linkat(td.fd(), target.c_str(), d.fd(), name.c_str(), 0), ec);
  }
  /// Moves an entry to another directory of the same filesystem, replacing what is there.
  void move(dir_handle& from, const std::string& name, dir_handle& to, const std::string& to_name,
            std::error_code& ec) const {
    check(::renameat(from.fd(), name.c_str(), to.fd(), to_name.c_str()), ec);
  }
  /// Copies the extended attributes of one directory to another.
  void copy_xattrs(dir_handle& src, dir_handle& dst, std::error_code& ec) const { copy_fd_xattrs(src.fd(), dst.fd(), ec); }

  std::int64_t now() const noexcept {
    struct timespec ts;
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }
  std::int64_t racy_window() const noexcept { return racy_; }

  /// What the filesystem under `d` keeps of timestamps, judged from the directory's own stat.  The
  /// resolution is the coarsest decimal unit, up to 1 s, that both its mtime and its ctime are
  /// whole multiples of: the ctime comes from the filesystem's clock, so on a fine-grained
  /// filesystem its digits are not round (a false "1 s" has odds of 1 in 10^18).  A ctime equal
  /// to the mtime at whole seconds is no ctime at all (SFTPv3, as sshfs shows it), unless the
  /// filesystem is a local one known to keep a ctime (ext2/3/4, XFS, btrfs, tmpfs, F2FS, ZFS,
  /// bcachefs; recognized by its magic number).  A filesystem of whole seconds that does keep a
  /// ctime may be taken for one without: the engine then marks racy copies itself, which is
  /// correct on any filesystem, only less quiet.
  time_model timestamps(dir_handle& d, std::error_code& ec) const {
    struct ::stat st;
    if (::fstat(d.fd(), &st) != 0) return set_errno(ec), time_model{};
    ec.clear();
    return judge_timestamps(convert(st), local_with_ctime(d.fd()));
  }

  /// The judgement of timestamps() from a directory's stat (`known_ctime`: a local filesystem
  /// known to keep a ctime).
  static time_model judge_timestamps(const stat_info& dir, bool known_ctime) noexcept {
    time_model m;
    std::int64_t unit = 1;
    while (unit < 1000000000 && dir.mtime_ns % (unit * 10) == 0 && dir.ctime_ns % (unit * 10) == 0) unit *= 10;
    m.resolution_ns = unit;
    m.ctime = known_ctime || !(unit == 1000000000 && dir.ctime_ns == dir.mtime_ns);
    return m;
  }

 private:
  struct fd_guard {
    explicit fd_guard(int f) noexcept : fd(f) {}
    fd_guard(const fd_guard&) = delete;
    fd_guard& operator=(const fd_guard&) = delete;
    ~fd_guard() {
      if (fd >= 0) ::close(fd);
    }
    int fd;
  };

#if defined(__linux__) && defined(O_PATH)
  // An entry opened for a metadata change (see set_mode): O_PATH, never following a link, with its
  // fstat; ec is set (EMLINK) when it is not a directory and has other links.
  struct path_fd {
    path_fd(int dir, const std::string& name, std::error_code& ec) noexcept
        : fd(::openat(dir, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC)) {
      if (fd < 0)
        set_errno(ec);
      else if (::fstat(fd, &st) != 0)
        set_errno(ec);
      else if (!S_ISDIR(st.st_mode) && st.st_nlink > 1)
        ec = std::make_error_code(std::errc::too_many_links);
      else
        ec.clear();
    }
    path_fd(const path_fd&) = delete;
    path_fd& operator=(const path_fd&) = delete;
    ~path_fd() {
      if (fd >= 0) ::close(fd);
    }
    int fd;
    struct ::stat st {};
  };
  static std::string proc_fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }
#endif

  static void set_errno(std::error_code& ec) noexcept { ec.assign(errno, std::system_category()); }

  // Opens an entry to read its data: never blocking (a FIFO swapped in), never as a controlling
  // terminal, following a link only when asked, and checked by fstat to be a regular file before
  // anything is read; -1 with ec set otherwise (errc::special_file for a FIFO, socket or device).
  static int open_data(int dir, const std::string& name, bool follow, struct ::stat& st, std::error_code& ec) noexcept {
    const int fd = ::openat(dir, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW));
    if (fd < 0) return set_errno(ec), -1;
    if (::fstat(fd, &st) != 0) {
      set_errno(ec);
    } else if (S_ISREG(st.st_mode)) {
      ec.clear();
      return fd;
    } else {
      ec = S_ISDIR(st.st_mode) ? std::make_error_code(std::errc::is_a_directory) : make_error_code(errc::special_file);
    }
    ::close(fd);
    return -1;
  }
  static void check(int rc, std::error_code& ec) noexcept {
    if (rc != 0)
      set_errno(ec);
    else
      ec.clear();
  }

  static struct timespec to_timespec(std::int64_t ns) noexcept {
    struct timespec ts;
    std::int64_t sec = ns / 1000000000;
    std::int64_t rem = ns % 1000000000;
    if (rem < 0) {
      rem += 1000000000;
      --sec;
    }
    ts.tv_sec = static_cast<time_t>(sec);
    ts.tv_nsec = static_cast<long>(rem);
    return ts;
  }

  static file_type from_mode(mode_t m) noexcept {
    switch (m & S_IFMT) {
      case S_IFREG: return file_type::regular;
      case S_IFDIR: return file_type::directory;
      case S_IFLNK: return file_type::symlink;
      case S_IFIFO: return file_type::fifo;
      case S_IFSOCK: return file_type::socket;
      case S_IFBLK: return file_type::block;
      case S_IFCHR: return file_type::character;
      default: return file_type::unknown;
    }
  }

  static file_type from_dtype(unsigned char t) noexcept {
    switch (t) {
      case DT_REG: return file_type::regular;
      case DT_DIR: return file_type::directory;
      case DT_LNK: return file_type::symlink;
      case DT_FIFO: return file_type::fifo;
      case DT_SOCK: return file_type::socket;
      case DT_BLK: return file_type::block;
      case DT_CHR: return file_type::character;
      default: return file_type::unknown;
    }
  }

  static stat_info convert(const struct ::stat& st) noexcept {
    stat_info i;
    i.type = from_mode(st.st_mode);
    i.size = static_cast<std::uint64_t>(st.st_size);
#if defined(__APPLE__)
    i.mtime_ns = std::int64_t(st.st_mtimespec.tv_sec) * 1000000000 + st.st_mtimespec.tv_nsec;
    i.ctime_ns = std::int64_t(st.st_ctimespec.tv_sec) * 1000000000 + st.st_ctimespec.tv_nsec;
#else
    i.mtime_ns = std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    i.ctime_ns = std::int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
#endif
    i.mode = static_cast<std::uint32_t>(st.st_mode & 07777);
    i.dev = static_cast<std::uint64_t>(st.st_dev);
    i.ino = static_cast<std::uint64_t>(st.st_ino);
    i.nlink = static_cast<std::uint64_t>(st.st_nlink);
    i.uid = static_cast<std::uint32_t>(st.st_uid);
    i.gid = static_cast<std::uint32_t>(st.st_gid);
    i.rdev = static_cast<std::uint64_t>(st.st_rdev);
    i.blocks = static_cast<std::uint64_t>(st.st_blocks);
    return i;
  }

  static ::ssize_t read_full(int fd, char* buf, std::size_t len, std::error_code& ec) noexcept {
    std::size_t got = 0;
    while (got < len) {
      const ::ssize_t n = ::read(fd, buf + got, len - got);
      if (n < 0) {
        if (errno == EINTR) continue;
        set_errno(ec);
        return -1;
      }
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    return static_cast<::ssize_t>(got);
  }

  static bool write_all(int fd, const char* buf, std::size_t len, std::error_code& ec) noexcept {
    while (len > 0) {
      const ::ssize_t n = ::write(fd, buf, len);
      if (n < 0) {
        if (errno == EINTR) continue;
        set_errno(ec);
        return false;
      }
      buf += n;
      len -= static_cast<std::size_t>(n);
    }
    return true;
  }

  static void copy_fd_xattrs(int in, int out, std::error_code& ec) {
#if defined(__linux__)
    ec.clear();
    ::ssize_t len = ::flistxattr(in, nullptr, 0);
    if (len < 0) return (errno == ENOTSUP || errno == EOPNOTSUPP) ? void() : set_errno(ec);
    if (len == 0) return;
    std::vector<char> names(static_cast<std::size_t>(len));
    len = ::flistxattr(in, names.data(), names.size());
    if (len < 0) return set_errno(ec);
    std::vector<char> value;
    for (std::size_t pos = 0; pos < static_cast<std::size_t>(len);) {
      const char* name = names.data() + pos;
      pos += std::strlen(name) + 1;
      ::ssize_t vlen = ::fgetxattr(in, name, nullptr, 0);
      if (vlen < 0) continue;  // vanished in between
      value.resize(static_cast<std::size_t>(vlen));
      vlen = ::fgetxattr(in, name, value.data(), value.size());
      if (vlen < 0) continue;
      if (::fsetxattr(out, name, value.data(), static_cast<std::size_t>(vlen), 0) != 0) {
        if (errno == ENOTSUP || errno == EOPNOTSUPP || (errno == EPERM && std::strncmp(name, "trusted.", 8) == 0))
          continue;  // the destination cannot hold it (or only root may write trusted.*)
        return set_errno(ec);
      }
    }
#else
    (void)in;
    (void)out;
    ec.clear();
#endif
  }

  // "This way of copying is not available here" (as opposed to a real I/O error, which is
  // reported and never retried another way).
  static bool unsupported(int e) noexcept {
    return e == EXDEV || e == EINVAL || e == ENOSYS || e == EOPNOTSUPP || e == ENOTTY || e == EBADF ||
           e == ETXTBSY || e == EPERM
#if defined(ENOTSUP) && ENOTSUP != EOPNOTSUPP
           || e == ENOTSUP
#endif
        ;
  }

  // The copy ladder: reflink (shared extents), then a sparse-aware copy for files with holes,
  // then copy_file_range (in kernel), then sendfile, then read/write with one buffer.  Each rung
  // is left only on "not supported here"; a real I/O error ends the copy.
  // Copies at most `st.size` bytes (what the stat said: a file that grows, or a /proc file whose
  // stat says 0, is not read on and on; the size check after the copy reports the change).
  void copy_data(int in, int out, const stat_info& st, copy_result& res, std::error_code& ec) const {
    const std::uint64_t size = st.size;
    if (size == 0) return;
#if defined(__linux__) && defined(FICLONE)
    if (reflink_.load(std::memory_order_relaxed)) {
      if (::ioctl(out, FICLONE, in) == 0) {
        res.bytes = size;
        res.method = copy_method::reflink;
        return;
      }
      if (!unsupported(errno)) return set_errno(ec);
      if (errno == EOPNOTSUPP || errno == ENOTTY || errno == EINVAL) reflink_.store(false);  // this filesystem: never
    }
#endif
#if defined(SEEK_DATA) && defined(SEEK_HOLE)
    // fewer 512-byte blocks than the size needs: the file has holes worth keeping
    if (st.blocks < (size + 511) / 512) {
      if (!regular(in, ec)) return;
      if (copy_sparse(in, out, size, res, ec)) return;
      if (ec) return;
    }
#endif
    // dense: no more than the size the stat gave, and a byte past it is a change (see copy_stream)
    copy_stream(in, out, size, res, ec);
  }

  // The user-space paths read before the kernel could refuse a device or a FIFO: check first.
  static bool regular(int fd, std::error_code& ec) {
    struct ::stat st;
    if (::fstat(fd, &st) != 0) return set_errno(ec), false;
    if (!S_ISREG(st.st_mode)) return ec = errc::special_file, false;
    return true;
  }

  // The process's umask, read once without changing it (/proc/self/status, Linux >= 4.7); where
  // it cannot be read, 0777: every new file then gets an explicit fchmod.
  static std::uint32_t process_umask() {
    static const std::uint32_t mask = [] {
      std::uint32_t m = 0777;
#if defined(__linux__)
      const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        char buf[4096];
        const ::ssize_t n = ::read(fd, buf, sizeof buf - 1);
        ::close(fd);
        if (n > 0) {
          buf[n] = '\0';
          if (const char* p = std::strstr(buf, "\nUmask:")) m = static_cast<std::uint32_t>(std::strtoul(p + 7, nullptr, 8)) & 0777;
        }
      }
#endif
      return m;
    }();
    return mask;
  }

  // Copies only the data extents (SEEK_DATA / SEEK_HOLE) and sizes the file, so holes stay holes.
  // False, with ec clear, when the filesystem cannot tell extents: the caller copies densely.
  bool copy_sparse(int in, int out, std::uint64_t size, copy_result& res, std::error_code& ec) const {
    off_t pos = 0;
    const auto end = static_cast<off_t>(size);
    std::vector<char> buf;
    while (pos < end) {
      const off_t data = ::lseek(in, pos, SEEK_DATA);
      if (data < 0) {
        if (errno == ENXIO) break;  // only a hole remains
        if (pos == 0 && unsupported(errno)) return false;
        return set_errno(ec), true;
      }
      off_t hole = ::lseek(in, data, SEEK_HOLE);
      if (hole < 0) return set_errno(ec), true;
      if (hole > end) hole = end;
      for (off_t at = data; at < hole;) {
        const std::size_t want = static_cast<std::size_t>(std::min<off_t>(hole - at, off_t(1) << 20));
        if (buf.size() < want) buf.resize(want);
        const ::ssize_t n = ::pread(in, buf.data(), want, at);
        if (n < 0) {
          if (errno == EINTR) continue;
          return set_errno(ec), true;
        }
        if (n == 0) break;  // shrank under us: the size check after the copy reports it
        for (::ssize_t done = 0; done < n;) {
          const ::ssize_t w = ::pwrite(out, buf.data() + done, static_cast<std::size_t>(n - done), at + done);
          if (w < 0) {
            if (errno == EINTR) continue;
            return set_errno(ec), true;
          }
          done += w;
        }
        at += n;
        res.bytes += static_cast<std::uint64_t>(n);
      }
      pos = hole;
    }
    if (::ftruncate(out, end) != 0) return set_errno(ec), true;
    // the holes count as copied bytes: the destination has the source's size
    res.bytes = size;
    res.method = copy_method::read_write;
    res.sparse = true;
    return true;
  }

  // Copies the data with the first call that works here, at most `size` bytes (what the stat
  // said: a /proc file says 0 and may never end).  Every call asks for one byte more than is still
  // due, so the call that reaches the end also shows there is nothing past it, at no extra system
  // call; a byte past `size` means the file grew, or never had the size it claimed:
  // errc::changed_during_copy, and the copy is not installed.
  void copy_stream(int in, int out, std::uint64_t size, copy_result& res, std::error_code& ec) const {
    const auto want = [&] {
      return static_cast<std::size_t>(std::min<std::uint64_t>(size - res.bytes + 1, std::uint64_t(1) << 30));
    };
    // One step: n bytes (or n <= 0) from a call that asked for `len`.  True when the copy is over.
    const auto step = [&](long long n, std::size_t len) {
      res.bytes += static_cast<std::uint64_t>(n);
      if (res.bytes > size) return ec = errc::changed_during_copy, true;
      return res.bytes == size && static_cast<std::size_t>(n) < len;  // a short call at the end: EOF
    };
    // Repeats one in-kernel copy call to the end.  True when done (or failed for real, ec set);
    // false when this call is not supported here and nothing was copied yet.
    const auto pump = [&](copy_method method, auto&& call) {
      res.method = method;
      for (;;) {
        const std::size_t len = want();
        const long long n = call(len);
        if (n > 0) {
          if (step(n, len)) return true;
          continue;
        }
        if (n == 0) return true;  // the end; shorter than the stat said: the check after the copy reports it
        if (errno == EINTR) continue;
        if (res.bytes != 0 || !unsupported(errno)) return set_errno(ec), true;
        return false;
      }
    };
#if defined(__linux__) && defined(SYS_copy_file_range)
    // refuses (EINVAL) anything but regular files before reading a byte
    if (pump(copy_method::copy_file_range, [&](std::size_t len) {
          return static_cast<long long>(::syscall(SYS_copy_file_range, in, nullptr, out, nullptr, len, 0u));
        }))
      return;
#endif
    if (!regular(in, ec)) return;
#if defined(__linux__)
    if (pump(copy_method::sendfile,
             [&](std::size_t len) { return static_cast<long long>(::sendfile(out, in, nullptr, len)); }))
      return;
#endif
    res.method = copy_method::read_write;
    std::vector<char> buf(1 << 17);
    for (;;) {
      const std::size_t len = std::min(buf.size(), want());
      const ::ssize_t n = ::read(in, buf.data(), len);
      if (n < 0) {
        if (errno == EINTR) continue;
        return set_errno(ec);
      }
      if (n == 0) return;
      if (res.bytes + static_cast<std::uint64_t>(n) > size) return void(ec = errc::changed_during_copy);
      if (!write_all(out, buf.data(), static_cast<std::size_t>(n), ec)) return;
      if (step(n, len)) return;
    }
  }

  mutable std::atomic<bool> reflink_{true};  // cleared once a filesystem says it cannot clone
  std::int64_t racy_;

  static bool local_with_ctime(int fd) noexcept {
#if defined(__linux__)
    struct ::statfs sf;
    if (::fstatfs(fd, &sf) != 0) return false;
    switch (static_cast<unsigned long>(sf.f_type) & 0xFFFFFFFFUL) {
      case 0xEF53UL:      // ext2/3/4
      case 0x58465342UL:  // XFS
      case 0x9123683EUL:  // btrfs
      case 0x01021994UL:  // tmpfs
      case 0xF2F52010UL:  // F2FS
      case 0x2FC12FC1UL:  // ZFS
      case 0xCA451A4EUL:  // bcachefs
        return true;
      default: return false;
    }
#else
    (void)fd;
    return false;
#endif
  }
};
#endif  // TREESYNC_HAS_POSIX

// [treesync.std_fs] -----------------------------------------------------------------------------
//
// The portable backend, on std::filesystem alone (Windows, or anywhere posix_fs is not built).
// Differences from posix_fs, all consequences of what std::filesystem offers:
//  - handles are paths: nothing protects against a directory swapped for a symlink mid-run;
//  - identity (the same/nested guard, cycle detection) is the canonical path, not device+inode,
//    so a bind mount is not recognised;
//  - no ctime: racily clean files are not detected (size+mtime is trusted);
//  - mtimes have the resolution of file_time_type; no owners, device nodes, FIFOs or xattrs;
//  - data is copied by std::filesystem::copy_file.

class std_fs {
 public:
  struct dir_handle {
    std::filesystem::path path;
  };

  explicit std_fs(std::chrono::nanoseconds racy_window = std::chrono::seconds(1))
      : racy_(racy_window.count()),
        // file_time_type's epoch is the library's choice: one fixed offset to the Unix epoch,
        // taken once, keeps conversions exact both ways within a run
        offset_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::filesystem::file_time_type::clock::now().time_since_epoch()) -
                std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())) {}

  stat_info stat_path(const std::filesystem::path& p, bool follow, std::error_code& ec) const {
    return info(p, follow, ec);
  }
  std::filesystem::path canonical(const std::filesystem::path& p, std::error_code& ec) const {
    return std::filesystem::canonical(p, ec);
  }
  dir_handle open_root(const std::filesystem::path& p, std::error_code& ec) const {
    if (!std::filesystem::is_directory(std::filesystem::status(p, ec)) && !ec)
      ec = std::make_error_code(std::errc::not_a_directory);
    return {p};
  }
  void make_root(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec) const {
    make(p, mode, ec);
  }
  std::vector<dir_entry> list(dir_handle& d, std::error_code& ec) const {
    std::vector<dir_entry> out;
    for (std::filesystem::directory_iterator it(d.path, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code tec;
      const auto st = it->symlink_status(tec);
      out.push_back({it->path().filename().string(), tec ? file_type::unknown : kind(st.type())});
    }
    return out;
  }
  stat_info stat(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const {
    return info(at(d, name), follow, ec);
  }
  dir_handle open_dir(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const {
    const auto p = at(d, name);
    const auto st = follow ? std::filesystem::status(p, ec) : std::filesystem::symlink_status(p, ec);
    if (ec) return {};
    if (st.type() == std::filesystem::file_type::symlink)
      ec = std::make_error_code(std::errc::too_many_symbolic_link_levels);
    else if (st.type() != std::filesystem::file_type::directory)
      ec = std::make_error_code(std::errc::not_a_directory);
    return {name == ".." ? d.path.parent_path() : p};
  }
  copy_result copy_file(dir_handle& sd, const std::string& name, dir_handle& dd, const std::string& dst_name,
                        const stat_info& expected, const copy_options& opt, std::error_code& ec) const {
    copy_result res;
    res.method = copy_method::read_write;
    const auto from = at(sd, name), to = at(dd, dst_name);
    if (!opt.follow && std::filesystem::is_symlink(std::filesystem::symlink_status(from, ec)))
      return ec = std::make_error_code(std::errc::too_many_symbolic_link_levels), res;
    if (ec) return res;
    if (!std::filesystem::is_regular_file(std::filesystem::status(from, ec))) {
      if (!ec) ec = errc::special_file;
      return res;
    }
    if (!opt.replace && std::filesystem::exists(std::filesystem::symlink_status(to)))
      return ec = std::make_error_code(std::errc::file_exists), res;
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return res;
    res.bytes = std::filesystem::file_size(to, ec);
    if (ec) return res;
    const stat_info after = info(from, true, ec);
    if (ec) return res;
    if (after.size != expected.size || after.mtime_ns != expected.mtime_ns || res.bytes != expected.size)
      return ec = errc::changed_during_copy, res;
    set_mode_path(to, expected.mode, ec);
    if (!ec) set_mtime_path(to, expected.mtime_ns, ec);
    return res;
  }
  bool same_content(dir_handle& a, const std::string& an, bool follow, dir_handle& b, const std::string& bn,
                    std::error_code& ec) const {
    ec.clear();
    // only regular files are opened (by path: a swap after this check is not detected here)
    const auto ta = follow ? std::filesystem::status(at(a, an), ec) : std::filesystem::symlink_status(at(a, an), ec);
    if (ec) return false;
    const auto tb = std::filesystem::symlink_status(at(b, bn), ec);
    if (ec) return false;
    if (!std::filesystem::is_regular_file(ta) || !std::filesystem::is_regular_file(tb)) return ec = errc::special_file, false;
    std::FILE* fa = std::fopen(at(a, an).string().c_str(), "rb");
    std::FILE* fb = std::fopen(at(b, bn).string().c_str(), "rb");
    bool same = fa && fb;
    if (!same) ec = std::make_error_code(std::errc::permission_denied);
    std::vector<char> ba(1 << 16), bb(1 << 16);
    while (same) {
      const std::size_t na = std::fread(ba.data(), 1, ba.size(), fa);
      const std::size_t nb = std::fread(bb.data(), 1, bb.size(), fb);
      if (na != nb || std::memcmp(ba.data(), bb.data(), na) != 0) same = false;
      if (na == 0) break;
    }
    if (fa) std::fclose(fa);
    if (fb) std::fclose(fb);
    return same;
  }
  void set_mode(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) const {
    set_mode_path(at(d, name), mode, ec);
  }
  void set_mtime(dir_handle& d, const std::string& name, std::int64_t ns, std::error_code& ec) const {
    set_mtime_path(at(d, name), ns, ec);
  }
  void rename(dir_handle& d, const std::string& from, const std::string& to, std::error_code& ec) const {
    std::filesystem::rename(at(d, from), at(d, to), ec);
  }
  void remove(dir_handle& d, const std::string& name, std::error_code& ec) const {
    const auto p = at(d, name);
    if (std::filesystem::is_directory(std::filesystem::symlink_status(p)))
      return ec = std::make_error_code(std::errc::is_a_directory), void();
    if (!std::filesystem::remove(p, ec) && !ec) ec = std::make_error_code(std::errc::no_such_file_or_directory);
  }
  void remove_dir(dir_handle& d, const std::string& name, std::error_code& ec) const {
    if (!std::filesystem::remove(at(d, name), ec) && !ec) ec = std::make_error_code(std::errc::no_such_file_or_directory);
  }
  void make_dir(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) const {
    make(at(d, name), mode, ec);
  }
  void make_symlink(dir_handle& d, const std::string& name, const std::string& target, std::error_code& ec) const {
    std::filesystem::create_symlink(target, at(d, name), ec);
  }
  std::string read_link(dir_handle& d, const std::string& name, std::error_code& ec) const {
    return std::filesystem::read_symlink(at(d, name), ec).string();
  }
  void set_owner(dir_handle&, const std::string&, std::int64_t, std::int64_t, std::error_code& ec) const {
    ec = std::make_error_code(std::errc::operation_not_supported);
  }
  void make_special(dir_handle&, const std::string&, const stat_info&, std::error_code& ec) const {
    ec = std::make_error_code(std::errc::operation_not_supported);
  }
  void sync_dir(dir_handle&, std::error_code& ec) const { ec.clear(); }
  void link(dir_handle& td, const std::string& target, dir_handle& d, const std::string& name,
            std::error_code& ec) const {
    std::filesystem::create_hard_link(at(td, target), at(d, name), ec);
  }
  void move(dir_handle& from, const std::string& name, dir_handle& to, const std::string& to_name,
            std::error_code& ec) const {
    std::filesystem::rename(at(from, name), at(to, to_name), ec);
  }
  void copy_xattrs(dir_handle&, dir_handle&, std::error_code& ec) const { ec.clear(); }
  std::int64_t now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  std::int64_t racy_window() const noexcept { return racy_; }

 private:
  static std::filesystem::path at(const dir_handle& d, const std::string& name) {
    return name == "." ? d.path : d.path / name;
  }
  static file_type kind(std::filesystem::file_type t) noexcept {
    switch (t) {
      case std::filesystem::file_type::regular: return file_type::regular;
      case std::filesystem::file_type::directory: return file_type::directory;
      case std::filesystem::file_type::symlink: return file_type::symlink;
      case std::filesystem::file_type::fifo: return file_type::fifo;
      case std::filesystem::file_type::socket: return file_type::socket;
      case std::filesystem::file_type::block: return file_type::block;
      case std::filesystem::file_type::character: return file_type::character;
      case std::filesystem::file_type::not_found: return file_type::none;
      default: return file_type::unknown;
    }
  }
  stat_info info(const std::filesystem::path& p, bool follow, std::error_code& ec) const {
    stat_info i;
    const auto st = follow ? std::filesystem::status(p, ec) : std::filesystem::symlink_status(p, ec);
    if (ec) return i;
    if (st.type() == std::filesystem::file_type::not_found)
      return ec = std::make_error_code(std::errc::no_such_file_or_directory), i;
    i.type = kind(st.type());
    i.mode = static_cast<std::uint32_t>(st.permissions()) & 07777;
    std::error_code ignored;
    if (i.type == file_type::regular) i.size = std::filesystem::file_size(p, ignored);
    if (i.type == file_type::symlink) {
      i.size = std::filesystem::read_symlink(p, ignored).string().size();
    } else {
      const auto t = std::filesystem::last_write_time(p, ignored);
      i.mtime_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count() - offset_.count();
    }
    i.ctime_ns = std::numeric_limits<std::int64_t>::max();  // unknown: never "racily clean"
    // identity: the canonical path (dev 0), for the guards and cycle detection
    if (i.type == file_type::directory) {
      const auto c = std::filesystem::canonical(p, ignored);
      i.ino = std::hash<std::string>{}(c.string());
    }
    return i;
  }
  void set_mode_path(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec) const {
    std::filesystem::permissions(p, static_cast<std::filesystem::perms>(mode & 07777),
                                 std::filesystem::perm_options::replace, ec);
  }
  void set_mtime_path(const std::filesystem::path& p, std::int64_t ns, std::error_code& ec) const {
    const auto d = std::chrono::duration_cast<std::filesystem::file_time_type::duration>(
        std::chrono::nanoseconds(ns) + offset_);
    std::filesystem::last_write_time(p, std::filesystem::file_time_type(d), ec);
  }
  void make(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec) const {
    if (!std::filesystem::create_directory(p, ec) && !ec) ec = std::make_error_code(std::errc::file_exists);
    if (!ec) set_mode_path(p, mode, ec);
  }

  std::int64_t racy_;
  std::chrono::nanoseconds offset_;
};

// [treesync.api.impl] ---------------------------------------------------------------------------

namespace detail {

// The one place where the argument spellings of the switches become `options`.  Arguments of the
// code-generating categories (compare, deletion, links, exclude, observer) and the options
// themselves fold to nothing.
template <class P>
void fold_option(options& o, const P& p) {
  using T = std::decay_t<P>;
  if constexpr (is_write_policy_v<T>) {
    o.write = T::atomic ? write_mode::atomic : write_mode::in_place;
  } else if constexpr (is_errors_policy_v<T>) {
    o.errors = T::stop_on_error ? error_mode::stop : error_mode::collect;
  } else if constexpr (std::is_same_v<T, dry_run_t>) {
    o.dry_run = true;
  } else if constexpr (std::is_same_v<T, allow_empty_source_t>) {
    o.allow_empty_source = true;
  } else if constexpr (std::is_same_v<T, durable_t>) {
    o.durable = true;
  } else if constexpr (std::is_same_v<T, one_file_system_t>) {
    o.one_file_system = true;
  } else if constexpr (std::is_same_v<T, specials_t>) {
    o.specials = true;
  } else if constexpr (std::is_same_v<T, preserve_owner_t>) {
    o.owner = true;
  } else if constexpr (std::is_same_v<T, preserve_group_t>) {
    o.group = true;
  } else if constexpr (std::is_same_v<T, hard_links_t>) {
    o.hard_links = true;
  } else if constexpr (std::is_same_v<T, xattrs_t>) {
    o.xattrs = true;
  } else if constexpr (std::is_same_v<T, detect_case_collisions_t>) {
    o.case_collisions = true;
  } else if constexpr (std::is_same_v<T, jobs>) {
    o.jobs = p.n;
  } else if constexpr (std::is_same_v<T, cancel_on>) {
    o.cancel = p.flag;
  } else if constexpr (std::is_same_v<T, backup_dir>) {
    o.backup_dir = p.path;
  } else if constexpr (std::is_same_v<T, subtree>) {
    o.subtree = p.rel;
  } else if constexpr (std::is_same_v<T, frontier>) {
    o.frontier_depth = p.depth;
    if (p.on_subtree) o.on_subtree = [&p](std::string_view rel) { p.on_subtree(rel); };  // the caller's own object
  } else {
    (void)o;
    (void)p;
  }
}

template <class FS, class... Ps>
report run_sync(FS& fs, const std::filesystem::path& src, const std::filesystem::path& dst, std::error_code& ec,
                Ps&... ps) {
  static_assert(is_filesystem_v<FS>, "treesync::sync: the first argument does not meet the filesystem requirements");
  static_assert(check_filesystem<FS>(), "treesync::sync: the filesystem is incomplete (see the messages above)");
  static_assert(check_policies<Ps...>(), "treesync::sync: invalid policy set");
  ec.clear();
  compare::size_mtime default_compare{};
  deletion::extraneous_t default_deletion{};
  links::dereference_t default_links{};
  exclude_nothing_t default_exclude{};
  no_observer_t default_observer{};

  auto& cmp = pick<is_compare>(default_compare, ps...);
  auto& del = pick<is_deletion>(default_deletion, ps...);
  auto& lnk = pick<is_links>(default_links, ps...);
  auto& exc = pick<is_exclude>(default_exclude, ps...);
  auto& obs = pick<is_observer>(default_observer, ps...);
  const options default_options{};
  options opt = pick<is_options>(default_options, ps...);
  (fold_option(opt, ps), ...);
  opt.jobs = jobs{opt.jobs}.count();
  while (!opt.subtree.empty() && opt.subtree.back() == '/') opt.subtree.pop_back();
  using Cmp = std::remove_reference_t<decltype(cmp)>;
  using Del = std::remove_reference_t<decltype(del)>;
  using Lnk = std::remove_reference_t<decltype(lnk)>;
  using Exc = std::remove_reference_t<decltype(exc)>;
  using Obs = std::remove_reference_t<decltype(obs)>;

  const auto t0 = std::chrono::steady_clock::now();
  report rep;
  if (del.limit() != unlimited) {
    // max_delete refuses the run before its first deletion: plan it first (a dry run: reads only).
    report plan;
    no_observer_t quiet;
    run_options plan_opt = opt;
    plan_opt.dry_run = true;
    plan_opt.errors = error_mode::collect;
    plan_opt.on_subtree = nullptr;  // the plan stops at the frontier too, but hands nothing out
    engine<FS, Cmp, Del, Lnk, Exc, no_observer_t> planner(fs, cmp, del, lnk, exc, quiet, plan_opt, plan);
    ec = planner.run(src, dst);
    if (!ec && plan.deleted > del.limit()) ec = errc::max_delete_exceeded;
    if (ec) {
      rep.elapsed = std::chrono::steady_clock::now() - t0;
      return rep;
    }
  }
  engine<FS, Cmp, Del, Lnk, Exc, Obs> eng(fs, cmp, del, lnk, exc, obs, opt, rep);
  ec = eng.run(src, dst);
  rep.elapsed = std::chrono::steady_clock::now() - t0;
  return rep;
}

template <class... Args>
constexpr bool ends_with_error_code() {
  if constexpr (sizeof...(Args) == 0) {
    return false;
  } else {
    using last = std::tuple_element_t<sizeof...(Args) - 1, std::tuple<Args...>>;
    return std::is_same_v<last, std::error_code&>;
  }
}

template <class FS, class Tuple, std::size_t... I>
report run_with_error_code(FS& fs, const std::filesystem::path& src, const std::filesystem::path& dst, Tuple& args,
                           std::index_sequence<I...>) {
  std::error_code& ec = std::get<sizeof...(I)>(args);
  return run_sync(fs, src, dst, ec, std::get<I>(args)...);
}

}  // namespace detail

/// Mirrors `src` into `dst` over the filesystem `fs`, composed from `policies` (any order, at most
/// one per category).  With a trailing `std::error_code&` it reports refusals there instead of
/// throwing `std::filesystem::filesystem_error`.
template <class FS, class... Args, std::enable_if_t<is_filesystem_v<FS>, int> = 0>
report sync(FS& fs, const std::filesystem::path& src, const std::filesystem::path& dst, Args&&... args) {
  if constexpr (detail::ends_with_error_code<Args...>()) {
    auto refs = std::forward_as_tuple(args...);
    return detail::run_with_error_code(fs, src, dst, refs, std::make_index_sequence<sizeof...(Args) - 1>{});
  } else {
    std::error_code ec;
    report r = detail::run_sync(fs, src, dst, ec, args...);
    if (ec) {
      if (!r.errors.empty() && r.errors.back().code == ec) {
        const auto& e = r.errors.back();
        throw std::filesystem::filesystem_error("treesync::sync: " + e.operation, src / e.path, dst / e.path, ec);
      }
      throw std::filesystem::filesystem_error("treesync::sync: refused", src, dst, ec);
    }
    return r;
  }
}

#if TREESYNC_HAS_POSIX
/// Mirrors `src` into `dst` on the real filesystem (posix_fs).
template <class... Args>
report sync(const std::filesystem::path& src, const std::filesystem::path& dst, Args&&... args) {
  posix_fs fs;
  return sync(fs, src, dst, std::forward<Args>(args)...);
}
#endif

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_TREESYNC_HPP
