// treesync/policies.hpp - the policy categories and their built-ins (compare, deletion, links, write, errors, flags) and the run-time options
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_POLICIES_HPP
#define TREESYNC_POLICIES_HPP

#include "core.hpp"

namespace treesync {
inline namespace v0 {

namespace detail {
/// Whether a policy says what it is as data (`state_key()`): see [treesync.policy.state_key].
template <class P, class = void>
struct has_state_key : std::false_type {};
template <class P>
struct has_state_key<P, std::void_t<decltype(std::string(std::declval<const P&>().state_key()))>> : std::true_type {};
}  // namespace detail

/// The identity of a destination directory as the run holds it open (its device and inode, from
/// the open directory itself, not from a name looked up again): what a deletion policy's optional
/// four-argument removes() is given ([treesync.policy.deletion]).  `known` is false where the
/// filesystem could not say.
struct dir_identity {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  bool known = false;
  friend bool operator==(const dir_identity& a, const dir_identity& b) {
    return a.known == b.known && a.dev == b.dev && a.ino == b.ino;
  }
  friend bool operator!=(const dir_identity& a, const dir_identity& b) { return !(a == b); }
};

namespace detail {
/// Whether a deletion policy takes the identity of the directory it is asked about (the optional
/// `removes(rel, type, excluded, const dir_identity&)`).
template <class P, class = void>
struct has_removes_in : std::false_type {};
template <class P>
struct has_removes_in<P, std::void_t<decltype(bool(std::declval<const P&>().removes(
                             std::declval<std::string_view>(), std::declval<file_type>(), true,
                             std::declval<const dir_identity&>())))>> : std::true_type {};
}  // namespace detail

// [treesync.policy.state_key] -------------------------------------------------------------------
//
// A state file (state_file) vouches for a destination as the run that wrote it left it, under
// its compare, deletion, links and exclude policies.  Each of these policies says what it is with
// `state_key() const` (anything convertible to std::string: a name, plus any setting made at run
// time that changes what a run leaves, e.g. a comparison window); a later run trusts the file
// only when every key is the same.  All built-in policies have one.  A policy of your own without
// it is still run, but no state file is read or written for that run (a notice says which
// category lacks one): nothing else can tell two of your policies apart safely.

// [treesync.policy.compare] ---------------------------------------------------------------------
//
// A comparison policy answers one question: is the destination file's DATA up to date?
// Requirement: `bool up_to_date(const treesync::file_pair&) const`.
// Permission bits are handled by the engine whatever the comparison says.  A policy that finds
// data current whatever the mtimes (checksum, size_only) declares `static constexpr bool restamp
// = true`, or, when that depends on how it was configured at run time, `bool restamp() const`: a
// current file whose mtime differs then gets the source's mtime (rsync -c -t).  Without it the
// destination's mtime is left alone (newer keeps a newer destination; a size_mtime window
// tolerates coarse timestamps, and re-stamping would write on every run).  A policy that keeps a
// destination file newer than its source (rsync -u) declares `static constexpr bool keep_newer =
// true` (or `bool keep_newer() const`): such a file, found current, is then left entirely alone
// (no chmod, chown or re-stamp either).

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
  std::string state_key() const { return "size_mtime " + std::to_string(window.count()); }
  bool up_to_date(const file_pair& f) const {
    if (f.src.size != f.dst.size) return false;
    if (!f.same_mtime(window)) return false;
    return !f.racy || f.same_content();
  }
};

/// Equal size is enough (rsync --size-only).
struct size_only_t {
  static constexpr bool restamp = true;
  const char* state_key() const { return "size_only"; }
  bool up_to_date(const file_pair& f) const { return f.src.size == f.dst.size; }
};
inline constexpr size_only_t size_only{};

/// A destination newer than the source is kept (rsync -u): left entirely alone, data, mode, owner
/// and times (`keep_newer`); otherwise like size_mtime.
struct newer_t {
  static constexpr bool keep_newer = true;
  const char* state_key() const { return "newer"; }
  bool up_to_date(const file_pair& f) const {
    if (f.dst.mtime_ns > f.src.mtime_ns && !f.same_mtime()) return true;
    return size_mtime{}.up_to_date(f);
  }
};
inline constexpr newer_t newer{};

/// Equal size and equal bytes (rsync -c); reads every file whose size matches.
struct checksum_t {
  static constexpr bool restamp = true;
  const char* state_key() const { return "checksum"; }
  bool up_to_date(const file_pair& f) const { return f.src.size == f.dst.size && f.same_content(); }
};
inline constexpr checksum_t checksum{};

/// Never up to date: every file is rewritten.
struct always_t {
  const char* state_key() const { return "always"; }
  bool up_to_date(const file_pair&) const { return false; }
};
inline constexpr always_t always{};

/// The built-in comparisons by name.
enum class kind : unsigned char { size_mtime, size_only, newer, checksum, always };

/// A built-in comparison chosen at run time (a command line's, a binding's): `window` widens
/// size_mtime's equal mtimes; under newer, a destination more than `window` newer than its
/// source is kept (rsync -u --modify-window).
struct chosen {
  kind k = kind::size_mtime;
  std::chrono::nanoseconds window{0};
  bool restamp() const { return k == kind::checksum || k == kind::size_only; }
  bool keep_newer() const { return k == kind::newer; }
  std::string state_key() const {
    static const char* const names[] = {"size_mtime", "size_only", "newer", "checksum", "always"};
    std::string key = names[static_cast<int>(k)];
    if (k == kind::size_mtime || k == kind::newer) key += ' ' + std::to_string(window.count());
    return key;
  }
  bool up_to_date(const file_pair& f) const {
    switch (k) {
      case kind::size_only: return size_only.up_to_date(f);
      case kind::checksum: return checksum.up_to_date(f);
      case kind::always: return false;
      case kind::newer:
        if (f.dst.mtime_ns > f.src.mtime_ns + window.count()) return true;  // rsync -u's rule
        break;
      case kind::size_mtime: break;
    }
    return size_mtime{window}.up_to_date(f);
  }
};

}  // namespace compare

// [treesync.policy.deletion] --------------------------------------------------------------------
//
// What happens to destination entries the source lacks ("extraneous" entries).
// Requirement: `bool removes(std::string_view rel, file_type type, bool excluded) const` and
// `std::size_t limit() const` (the most entries a run may delete; npos = unlimited).
// Optional: `bool removes(std::string_view rel, file_type type, bool excluded, const dir_identity& in)
// const`: when the policy has it, the engine calls it instead, with `in` the identity of the
// destination directory holding `rel` as the run holds it open (taken once per directory, from
// the open directory: so a policy that decided from what it read of that directory before the
// run, e.g. the rule files there, can tell the directory now at that name from the one it read,
// if it was exchanged meanwhile, and keep what is in it).  A policy with the three-argument form
// only is called as before, at no extra cost.  Under a
// limit the deletions of entries the source lacks wait for the end of the walk and are counted
// first: when they (with the entries of directories replaced by another type, counted as they
// come) exceed it, none of them is made and the run ends with errc::max_delete_exceeded; the
// copies and updates it made stay.  rsync --max-delete=N deletes the first N; treesync deletes
// none (a cap is a guard against a wrong source: half of a wrong deletion is no better).

inline constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();

namespace deletion {

/// Delete what the source lacks, except excluded entries (rsync --delete).
struct extraneous_t {
  const char* state_key() const { return "extraneous"; }
  bool removes(std::string_view, file_type, bool excluded) const { return !excluded; }
  std::size_t limit() const { return unlimited; }
};
inline constexpr extraneous_t extraneous{};

/// Never delete (rsync without --delete).
struct keep_t {
  const char* state_key() const { return "keep"; }
  bool removes(std::string_view, file_type, bool) const { return false; }
  std::size_t limit() const { return unlimited; }
};
inline constexpr keep_t keep{};

/// Delete excluded destination entries too (rsync --delete-excluded).
struct delete_excluded_t {
  const char* state_key() const { return "delete_excluded"; }
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
  /// The base's four-argument form, when it has one.
  template <class B = Base, std::enable_if_t<detail::has_removes_in<B>::value, int> = 0>
  bool removes(std::string_view rel, file_type t, bool excluded, const dir_identity& in) const {
    return base.removes(rel, t, excluded, in);
  }
  std::size_t limit() const { return max; }
  /// The base's (the cap is not part of what a state file vouches for); none when the base has none.
  template <class B = Base, std::enable_if_t<detail::has_state_key<B>::value, int> = 0>
  std::string state_key() const {
    return std::string(base.state_key());
  }
};
max_delete(std::size_t)->max_delete<extraneous_t>;
template <class B>
max_delete(std::size_t, B) -> max_delete<B>;

/// The built-in deletion policies by name.
enum class kind : unsigned char { extraneous, keep, excluded };

/// A built-in deletion policy chosen at run time, with a cap (`unlimited`: none).
struct chosen {
  kind k = kind::extraneous;
  std::size_t max = unlimited;
  const char* state_key() const {
    return k == kind::keep ? "keep" : k == kind::excluded ? "delete_excluded" : "extraneous";
  }
  bool removes(std::string_view, file_type, bool excluded) const {
    return k == kind::excluded || (k == kind::extraneous && !excluded);
  }
  std::size_t limit() const { return max; }
};

}  // namespace deletion

using deletion::max_delete;

// [treesync.policy.links] -----------------------------------------------------------------------
//
// What to do with a source symlink.
// Requirement: `link_action on_symlink(std::string_view rel, std::string_view target, bool inside) const`
// where `inside` says the target, resolved lexically from the link's directory, stays inside the
// source tree, by rsync 3.5's rule for --safe-links and --copy-unsafe-links: an absolute or empty
// target is outside, and so is one with a `..` after any other component (`a/../x`: `a` may itself
// be a link, to `..`) or ending in `/..` (`../..`).  A policy may declare `static constexpr bool needs_target = false;` to spare the
// engine a readlink per link.

enum class link_action { follow, preserve, skip };

namespace links {

/// Copy what the link points to (the default; `cp -L`, `rsync -L`).
struct dereference_t {
  const char* state_key() const { return "dereference"; }
  static constexpr bool needs_target = false;
  link_action on_symlink(std::string_view, std::string_view, bool) const { return link_action::follow; }
};
inline constexpr dereference_t dereference{};

/// Recreate the link itself, target unchanged (`rsync -l`).
struct preserve_t {
  const char* state_key() const { return "preserve"; }
  static constexpr bool needs_target = false;
  link_action on_symlink(std::string_view, std::string_view, bool) const { return link_action::preserve; }
};
inline constexpr preserve_t preserve{};

/// Neither follow nor copy links (`rsync --no-links`); they are counted as skipped.
struct skip_t {
  const char* state_key() const { return "skip"; }
  static constexpr bool needs_target = false;
  link_action on_symlink(std::string_view, std::string_view, bool) const { return link_action::skip; }
};
inline constexpr skip_t skip{};

/// Keep links that stay inside the source as links; follow the others (`rsync --copy-unsafe-links`).
struct dereference_unsafe_t {
  const char* state_key() const { return "dereference_unsafe"; }
  link_action on_symlink(std::string_view, std::string_view, bool inside) const {
    return inside ? link_action::preserve : link_action::follow;
  }
};
inline constexpr dereference_unsafe_t dereference_unsafe{};

/// Keep links that stay inside the source as links; skip the others, each counted as skipped as
/// links::skip reports it (`rsync -l --safe-links`).  A skipped link's destination counterpart is
/// left as it is, also under a deletion policy (rsync keeps it too).
struct preserve_safe_t {
  const char* state_key() const { return "preserve_safe"; }
  link_action on_symlink(std::string_view, std::string_view, bool inside) const {
    return inside ? link_action::preserve : link_action::skip;
  }
};
inline constexpr preserve_safe_t preserve_safe{};

/// The built-in link policies by name.
enum class kind : unsigned char { dereference, preserve, dereference_unsafe, skip, preserve_safe };

/// A built-in link policy chosen at run time.
struct chosen {
  kind k = kind::dereference;
  const char* state_key() const {
    static const char* const names[] = {"dereference", "preserve", "dereference_unsafe", "skip", "preserve_safe"};
    return names[static_cast<int>(k)];
  }
  link_action on_symlink(std::string_view, std::string_view, bool inside) const {
    switch (k) {
      case kind::preserve: return link_action::preserve;
      case kind::dereference_unsafe: return inside ? link_action::preserve : link_action::follow;
      case kind::skip: return link_action::skip;
      case kind::preserve_safe: return inside ? link_action::preserve : link_action::skip;
      case kind::dereference: break;
    }
    return link_action::follow;
  }
};

}  // namespace links

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

// [treesync.policy.verify] ----------------------------------------------------------------------
// How far a run trusts the state file (state_file) about the destination.  The source is always
// walked and stat'ed; the state file only ever stands in for destination reads.

/// The trust levels, as a run-time value (options::verify).
enum class verify_level : unsigned char { full, dirs, none };

namespace verify {
/// Read the whole destination (the default): the state file is written, never trusted.
struct full_t {
  static constexpr verify_level level = verify_level::full;
};
inline constexpr full_t full{};
/// Stat each destination directory; where its mtime and ctime (and identity) are those the state
/// file recorded, take its entries from the state file instead of listing and stat'ing them.
/// Blind spot: a change to an existing entry that leaves its directory alone (a file's content
/// edited in place, a chmod or touch of a file) is not seen.
struct dirs_t {
  static constexpr verify_level level = verify_level::dirs;
};
inline constexpr dirs_t dirs{};
/// Read nothing of the destination the state file vouches for: plan from the source walk and the
/// state file, touch the destination only to apply changes.  Blind spot: nothing done to the
/// destination behind treesync's back is seen (a file deleted, added or edited there) until a
/// run with verify::dirs or verify::full.
struct none_t {
  static constexpr verify_level level = verify_level::none;
};
inline constexpr none_t none{};
}  // namespace verify

/// The most memory the records of a state file may take by default (state_file::max_memory):
/// 256 MiB, about 1.3 million entries with their stats.
inline constexpr std::uint64_t default_state_memory = std::uint64_t(256) << 20;

/// Keep a state file at `path`: what the run left in the destination (per entry: type, size,
/// mtime, mode, owner, link target and the destination's own identity and ctime; per directory
/// its own stamps).  It is written atomically at the end of a run and removed before the run's
/// first write, so a run killed midway leaves none behind; one from another source, destination,
/// treesync version or policy set is ignored (a notice says so).  Inside the destination it is
/// never deleted and never mirrored.  Trusted as the verify level says (default verify::full:
/// written, not trusted).  The records read from it are held in memory, at most `max_memory`
/// bytes of them (about 200 bytes an entry): a file that needs more is ignored (a notice,
/// errc::state_ignored, "too large") and the run reads the destination in full.
struct state_file {
  std::filesystem::path path;
  std::uint64_t max_memory = default_state_memory;
};

// [treesync.switches] --------------------------------------------------------------------------
//
// The switches, one row each: everything else is derived from this table - the `options`
// member, the tag that turns it on in sync(...) (`treesync::durable`, `treesync::max_size{n}`),
// the check that a tag is given once, the tag's folding into `options`, the command line's
// spellings and --help line (examples/cli), and whether the switch is part of what a state file
// vouches for (its identity).  Adding a switch is one row here plus its behaviour.
//
// TREESYNC_FLAGS(X): X(member, tag, traits, cli, help)
//   a flag: `bool options::member = false`; the constant `tag` of type `tag_t` sets it.
// TREESYNC_VALUES(X): X(member, type, default, tag, traits, cli, help)
//   a value: `type options::member = default`; `tag{v}` sets it.
// traits: switch_identity, switch_whole_tree (below), or-ed, or 0.  cli: the command line's
// spellings, comma-separated (one letter: a short option; a value switch's spelling ends in
// =ARG), "" for none.
/// The traits column's bits.  switch_identity: a run with another setting may leave the
/// destination otherwise (a state file written under one is not trusted under another).
/// switch_whole_tree: what it does spans the whole tree (a hard link joins files anywhere in it;
/// -x compares each directory's filesystem with the root's), so a run of one subtree
/// (treesync::subtree) cannot honour it alone; a front end that shares a mirror out in subtrees
/// (treesync_mpi) refuses it.
inline constexpr unsigned switch_identity = 1;
inline constexpr unsigned switch_whole_tree = 2;

#define TREESYNC_FLAGS(X)                                                                                             \
  X(dry_run, dry_run, 0, "n,dry-run", "show what would be done (with -i or -v), change nothing")                                   \
  X(allow_empty_source, allow_empty_source, 0, "allow-empty-source",                                           \
    "let an empty SRC empty a non-empty DST (refused by default: an unmounted SRC must not wipe the mirror)")        \
  X(durable, durable, 0, "fsync",                                                                                \
    "fsync every written file and changed directory (survives a power cut)")                           \
  X(one_file_system, one_file_system, switch_identity | switch_whole_tree, "x,one-file-system",                                                     \
    "do not enter directories on another filesystem than SRC (reported)")                                            \
  X(specials, specials, switch_identity, "D,specials,devices",                                                                  \
    "recreate FIFOs, sockets and, as root, devices (else skipped, counted, and named on stderr: skipping non-regular file \"NAME\"; exit status 0)")                      \
  X(owner, preserve_owner, switch_identity, "o,owner", "give copies the source's owner (as root; ignored otherwise, as rsync)")       \
  X(group, preserve_group, switch_identity, "g,group", "give copies the source's group (not root: only the user's own groups, the others silently left)") \
  X(hard_links, hard_links, switch_whole_tree, "H,hard-links", "keep hard-linked files hard-linked (linked at the end of the run)")      \
  X(xattrs, xattrs, switch_identity, "X,xattrs", "copy extended attributes of what is written (an xattr-only change is not seen)")                   \
  X(case_collisions, detect_case_collisions, 0, "",                                                                \
    "report SRC names of one directory that differ only in case (they collide on a case-insensitive DST)")

#define TREESYNC_VALUES(X)                                                                                           \
  X(max_size, std::uint64_t, ::treesync::no_size_limit, max_size, switch_identity, "max-size=SIZE",                                         \
    "do not copy or update a file larger than SIZE bytes (K, M, G: powers of 1024); DST's is left alone")

/// max_size's default: no file is too large.
inline constexpr std::uint64_t no_size_limit = std::numeric_limits<std::uint64_t>::max();

// The tags.  A flag's tag is an empty type and a constant; a value's tag holds the value.
#define TREESYNC_FLAG_TAG(member, tag, state, cli, help) \
  struct tag##_t {};                                     \
  inline constexpr tag##_t tag{};
TREESYNC_FLAGS(TREESYNC_FLAG_TAG)
#undef TREESYNC_FLAG_TAG
#define TREESYNC_VALUE_TAG(member, type, def, tag, state, cli, help) \
  struct tag {                                                       \
    type value;                                                      \
  };
TREESYNC_VALUES(TREESYNC_VALUE_TAG)
#undef TREESYNC_VALUE_TAG

/// One row of the table as data (a command line's parser and help, a binding's keywords).
struct switch_row {
  const char* member;  ///< the options member
  const char* cli;     ///< spellings, comma-separated; "" for none
  const char* help;
  bool value;       ///< a value switch (else a flag)
  bool state;       ///< part of a state file's identity (switch_identity)
  bool whole_tree;  ///< spans the whole tree (switch_whole_tree)
};
#define TREESYNC_FLAG_ROW(member, tag, traits, cli, help) \
  switch_row{#member, cli, help, false, ((traits) & switch_identity) != 0, ((traits) & switch_whole_tree) != 0},
#define TREESYNC_VALUE_ROW(member, type, def, tag, traits, cli, help) \
  switch_row{#member, cli, help, true, ((traits) & switch_identity) != 0, ((traits) & switch_whole_tree) != 0},
inline constexpr switch_row switch_table[] = {TREESYNC_FLAGS(TREESYNC_FLAG_ROW) TREESYNC_VALUES(TREESYNC_VALUE_ROW)};
#undef TREESYNC_FLAG_ROW
#undef TREESYNC_VALUE_ROW

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
/// never deleted as extraneous.  Not with write::in_place (a backup needs the old file kept whole):
/// the run is refused before anything is touched (errc::inplace_with_backup).
struct backup_dir {
  std::filesystem::path path;
};

/// Make every changed file's temporary in `path` (relative paths are taken from the destination
/// root), then move it into place (rsync --temp-dir).  The directory must exist (the run is
/// refused before anything is touched otherwise: errc::temp_dir_missing), and a symlink or
/// non-directory in its path is never followed (errc::unsafe_temp_dir).  On another filesystem
/// the file is copied from it into a temporary beside its final name, then renamed: a final name
/// never holds a partial file.  Inside the destination it is never deleted as extraneous.  With
/// write::in_place a file rewritten in place needs no temporary (rsync ignores it there too).
struct temp_dir {
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
/// schedules no more work; entries in flight complete (a file copy is cut short between chunks and
/// removed: nothing partial is left at a final name), and the run ends with
/// `std::errc::operation_canceled` (report::cancelled is set).  Everything it finished is kept: a
/// new directory takes its name with what it holds, directories get their owner, group and mode
/// (their mtime, once complete: the next run), and the report lists what exists; the next run copies only the rest.  errors::stop ends a run the same way.
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
// errors policy sets the mode, jobs / cancel_on / backup_dir / temp_dir / subtree / frontier set their value.

/// rsync's --chmod: comma-separated items, each applied in order to a source entry's permission
/// bits before anything is compared or written ("as though it were the permissions that the
/// sending side supplied").  An item is octal (`644`, `2775`), or `[ugoa]*` then one of `+ - =`
/// then either letters of `rwxXst` (`X`: x when a directory or when any x bit is set) or one class
/// to copy from (`g=u`, `o-g`); a leading `D` makes it apply to directories only, `F` to other
/// entries only (`Dg+s,ug+w,Fo-w,+X`).  Without u, g, o or a, the umask's bits are left alone, as
/// chmod(1) does.  Symlinks are never changed.
class chmod_rules {
 public:
  /// Adds the items of `spec` (another --chmod adds to the list); false, with `error` saying which
  /// item is bad, when one is (the list is then unchanged).
  bool parse(std::string_view spec, std::string* error = nullptr) {
    std::vector<item> add;
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = spec.find(',', start);
      const std::string_view text = spec.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      item it;
      if (!read_item(text, it)) {
        if (error) *error = "invalid --chmod item: '" + std::string(text) + "'";
        return false;
      }
      add.push_back(it);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    items_.insert(items_.end(), add.begin(), add.end());
    if (!text_.empty()) text_ += ',';
    text_ += spec;
    return true;
  }

  bool empty() const noexcept { return items_.empty(); }
  /// Every spec parsed, joined by ',' (part of a state file's identity).
  const std::string& text() const noexcept { return text_; }

  /// The permission bits (07777) `mode` becomes for an entry that is (`directory`) or is not a
  /// directory; `umask` is kept by items that name no class.
  std::uint32_t apply(std::uint32_t mode, bool directory, std::uint32_t umask) const noexcept {
    mode &= 07777;
    for (const item& it : items_) {
      if ((it.scope == 'D' && !directory) || (it.scope == 'F' && directory)) continue;
      if (it.octal) {
        mode = it.value;
        continue;
      }
      const std::uint32_t who = it.who != 0 ? it.who : 07777u;
      std::uint32_t bits = 0;
      if (it.from != 0) {  // a copy of one class's rwx into the classes named
        const unsigned shift = it.from == 'u' ? 6 : it.from == 'g' ? 3 : 0;
        const std::uint32_t rwx = (mode >> shift) & 7u;
        bits = (rwx << 6) | (rwx << 3) | rwx;
      } else {
        bits = it.value;
        if (it.big_x && (directory || (mode & 0111u) != 0)) bits |= 0111u;
      }
      std::uint32_t affected = bits & who;
      if (it.who == 0) affected &= ~(umask & 0777u);
      switch (it.op) {
        case '+': mode |= affected; break;
        case '-': mode &= ~affected; break;
        default: mode = (mode & ~(it.who != 0 ? who : (07777u & ~(umask & 0777u)))) | affected; break;
      }
    }
    return mode & 07777u;
  }

 private:
  struct item {
    char scope = 0;        // 0: every entry; 'D': directories; 'F': the others
    bool octal = false;    // value is the whole mode
    std::uint32_t value = 0;  // the bits of the letters rwxst, or the octal mode
    bool big_x = false;    // 'X'
    std::uint32_t who = 0;  // the bits of the classes named; 0: none named (the umask is kept)
    char op = '+';
    char from = 0;  // 'u', 'g' or 'o': the class copied
  };

  static bool read_item(std::string_view t, item& it) {
    if (!t.empty() && (t[0] == 'D' || t[0] == 'F')) {
      it.scope = t[0];
      t.remove_prefix(1);
    }
    if (t.empty()) return false;
    if (t[0] >= '0' && t[0] <= '7') {
      if (t.size() > 4) return false;
      for (char c : t) {
        if (c < '0' || c > '7') return false;
        it.value = it.value * 8 + static_cast<std::uint32_t>(c - '0');
      }
      it.octal = true;
      return true;
    }
    std::size_t k = 0;
    for (; k < t.size() && (t[k] == 'u' || t[k] == 'g' || t[k] == 'o' || t[k] == 'a'); ++k)
      it.who |= t[k] == 'u' ? 04700u : t[k] == 'g' ? 02070u : t[k] == 'o' ? 01007u : 07777u;
    if (k == t.size() || (t[k] != '+' && t[k] != '-' && t[k] != '=')) return false;
    it.op = t[k++];
    const std::string_view rest = t.substr(k);
    if (rest.size() == 1 && (rest[0] == 'u' || rest[0] == 'g' || rest[0] == 'o')) {
      it.from = rest[0];
      return true;
    }
    for (char c : rest) {
      switch (c) {
        case 'r': it.value |= 0444u; break;
        case 'w': it.value |= 0222u; break;
        case 'x': it.value |= 0111u; break;
        case 'X': it.big_x = true; break;
        case 's': it.value |= 06000u; break;
        case 't': it.value |= 01000u; break;
        default: return false;
      }
    }
    return true;
  }

  std::vector<item> items_;
  std::string text_;
};

/// How a changed file reaches its final name (see write::atomic and write::in_place).
enum class write_mode : unsigned char { atomic, in_place };
/// What a per-entry failure does to the run (see errors::collect and errors::stop).
enum class error_mode : unsigned char { collect, stop };

struct options {
#define TREESYNC_FLAG_MEMBER(member, tag, state, cli, help) bool member = false;  ///< help
  TREESYNC_FLAGS(TREESYNC_FLAG_MEMBER)
#undef TREESYNC_FLAG_MEMBER
#define TREESYNC_VALUE_MEMBER(member, type, def, tag, state, cli, help) type member = def;
  TREESYNC_VALUES(TREESYNC_VALUE_MEMBER)
#undef TREESYNC_VALUE_MEMBER
  write_mode write = write_mode::atomic;
  error_mode errors = error_mode::collect;
  unsigned jobs = 1;                           ///< workers; 0: one per hardware thread (see `jobs`)
  const std::atomic<bool>* cancel = nullptr;   ///< see cancel_on; null: never cancelled
  std::filesystem::path backup_dir;            ///< see backup_dir; empty: no backups
  std::filesystem::path temp_dir;              ///< see temp_dir; empty: each temporary beside its file
  std::string subtree;                         ///< see subtree; empty: the whole mirror
  std::size_t frontier_depth = 0;              ///< see frontier; 0: no frontier
  std::function<void(std::string_view rel)> on_subtree;  ///< see frontier
  std::filesystem::path state;                 ///< see state_file; empty: no state file
  std::uint64_t state_memory = default_state_memory;  ///< see state_file::max_memory
  verify_level verify = verify_level::full;    ///< see verify::full, verify::dirs, verify::none
  /// false: rsync --no-perms.  An existing entry of the source's type keeps its permission bits
  /// (also when its data is rewritten); a new one gets the source's bits masked with `umask` and
  /// no set-ID or sticky bit.
  bool perms = true;
  std::uint32_t umask = 022;  ///< see perms and chmod_rules; a CLI passes the process's
  chmod_rules chmod;          ///< rsync --chmod: the source's permission bits as the run sees them
  /// rsync --existing: no entry is created (a new directory is walked for its source errors
  /// only, as rsync's sender lists it; nothing in it is made)
  bool existing = false;
  bool ignore_existing = false;  ///< rsync --ignore-existing: no entry that exists is changed (directories are entered)
  /// rsync's rule for deletions after an I/O error (its --ignore-errors turns it off): when a
  /// source-side failure happens anywhere in the run (a vanished entry is none), nothing is
  /// deleted, and the skip is reported once as a notice (errc::deletions_skipped).  So that this
  /// holds whatever the workers' order (rsync itself, walking incrementally, may delete in a
  /// directory it finished before the error; with -H or --delete-after it deletes nothing), every
  /// deletion waits for the end of the run and is carried out only if no source failure
  /// happened: never more is deleted than rsync deletes.  The wait costs memory for the names
  /// to delete, and the space they hold is freed last.  Type replacements and leftover temporaries
  /// are not deletions.  False: deletions go on in each directory whatever failed (the library's
  /// default).
  bool keep_on_source_error = false;
};

/// Whether `o` sets the option `key` of an option_rules row (a switch of the table above by its
/// member's name, or one of the other keys the rows use) away from its default; nullopt for a key
/// it does not know (a test walks the rows with it).
inline std::optional<bool> option_set(const options& o, std::string_view key) {
#define TREESYNC_FLAG_SET(member, tag, state, cli, help) \
  if (key == #member) return o.member;
  TREESYNC_FLAGS(TREESYNC_FLAG_SET)
#undef TREESYNC_FLAG_SET
  if (key == "inplace") return o.write == write_mode::in_place;
  if (key == "backup_dir") return !o.backup_dir.empty();
  if (key == "temp_dir") return !o.temp_dir.empty();
  if (key == "state") return !o.state.empty();
  if (key == "verify") return o.verify != verify_level::full;
  return std::nullopt;
}

/// The first row of option_rules that `o` breaks (sync() refuses the run with its code), or null.
inline const option_rule* refused_combination(const options& o) {
  for (const option_rule& r : option_rules) {
    const bool first = option_set(o, r.first).value_or(false), second = option_set(o, r.second).value_or(false);
    if (first && (r.needs ? !second : second)) return &r;
  }
  return nullptr;
}

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_POLICIES_HPP
