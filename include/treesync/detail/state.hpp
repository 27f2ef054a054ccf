// treesync/detail/state.hpp - what a run shares (run_state), a directory pair in flight (dir_node), a plan, the journal
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_DETAIL_STATE_HPP
#define TREESYNC_DETAIL_STATE_HPP

#include "manifest.hpp"
#include "policy_view.hpp"

namespace treesync {
inline namespace v0 {

namespace detail {

inline constexpr std::string_view temp_prefix = ".treesync-tmp-";

/// A name this tool makes for a temporary: the prefix, then `<pid>-<run>-<n>` (temp_name; earlier
/// versions: `<pid>-<n>`) or `state-<pid>` (the state file's); nothing else with the prefix is
/// taken for a leftover (issue 23: a renamed `.treesync-tmp-x` is an ordinary entry).
inline bool is_temp_name(std::string_view name) noexcept {
  if (name.size() <= temp_prefix.size() || name.substr(0, temp_prefix.size()) != temp_prefix) return false;
  std::string_view rest = name.substr(temp_prefix.size());
  if (rest.substr(0, 6) == "state-") rest.remove_prefix(6);
  const bool state = rest.size() != name.size() - temp_prefix.size();
  int groups = 0;
  for (;;) {
    std::size_t digits = 0;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    if (digits == 0 || digits > 20) return false;
    ++groups;
    rest.remove_prefix(digits);
    if (rest.empty()) break;
    if (rest[0] != '-') return false;
    rest.remove_prefix(1);
  }
  return state ? groups == 1 : groups == 2 || groups == 3;
}

inline bool is_enoent(const std::error_code& ec) noexcept { return ec == std::errc::no_such_file_or_directory; }

inline bool same_identity(const stat_info& a, const stat_info& b) noexcept { return a.dev == b.dev && a.ino == b.ino; }

inline std::filesystem::path strip_trailing_separators(std::filesystem::path p) {
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return std::filesystem::path(s);
}

/// How many runs this process has started (temporary names differ from run to run).
inline unsigned long run_serial() noexcept {
  static std::atomic<unsigned long> runs{0};
  return ++runs;
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
  std::atomic<bool> have_dst{false};  // `dst` is open
  dir_identity dst_self;  // `dst`'s own identity, under `mu`: taken when a deletion policy asks for it (walker::dst_identity)
  // verify::none: the destination directory exists but is opened only when something in it is
  // written or must be read (open_dst); the state file stands in for its listing and stats.
  bool dst_deferred = false;
  bool cold = false;             // the destination directory is known to be empty: never read it
  // existing (rsync --existing): a source directory the destination lacks, not made, walked only
  // for its source errors (rsync's sender lists it: an error there stops the deletions)
  bool scan = false;
  const dir_record* rec = nullptr;      // the state file's record of this directory (a trusted file's)
  const dir_record* vouched = nullptr;  // the state file's record, taken for its listing
  std::size_t slot = no_record;         // its place in the state file written at the end (state_keeper::slot)
  // What the run leaves in it (state_file), under `mu`: each batch's entry lines (E, as the state
  // file has them: a batch is a range of the sorted listing) by the batch's first index.
  // The key is twice the index in `merged` of the chunk's first entry (2k + 1: the record of a
  // deletion keep_on_source_error held back, at k, when the entry stayed).
  std::vector<std::pair<std::size_t, std::string>> made;
  std::size_t made_count = 0;
  // keep_on_source_error, under `mu`: the deletions of the directory (index in `merged`, type),
  // carried out by its last batch, after every other entry of the directory
  std::vector<std::pair<std::size_t, file_type>> removals;
  // keep_on_source_error, under `mu`: the subdirectories found, by batch, entered once every entry
  // of this directory is done (rsync knows a directory's source errors before it goes deeper)
  std::vector<std::pair<std::size_t, std::vector<dir_node*>>> held;
  // keep_on_source_error: its place in run_state::deferred, when its deletions wait for the end
  // of the run (its record in the state file is put then); under run_state::deferred_mu
  std::size_t deferred = static_cast<std::size_t>(-1);
  std::atomic<bool> record_failed{false};  // an entry written could not be stat'ed: no record
  bool dst_exists() const noexcept { return have_dst || dst_deferred; }
  // A directory this run creates is populated under a temporary name (`staged`, in the parent)
  // and renamed into place once complete: nothing below it is visible at its final path until
  // then, so its files are written straight to their final names (no temporary, no rename each).
  // A run that stops (cancel_on, errors::stop, an exception) publishes it all the same, with what
  // it holds (and its mode, but not the source's mtime): every file in it is complete (a copy cut short is removed), so the next run finds
  // them at their names and copies only the rest, and the report, which listed them as made, says
  // what exists.  (Kept under its temporary name instead, it would be a leftover the next run
  // removes, so an interrupted cold run would start again from nothing.)
  std::string staged;
  bool unseen = false;  // this directory, or one above it, is staged
  // The walker's verdict for a directory the destination lacks: made staged (under a temporary
  // name, while the parent keeps its handle to the end for the rename and no other run finishes
  // the subtree) or at its final name (inside a staged directory, below the descriptor window,
  // under frontier).  applier::make_dir carries it out.
  bool stage = false;
  bool finish = false;           // set once the listing succeeded: the directory's metadata is due
  bool created = false;          // made by this run (not the root): finished by it whatever happens below it
  std::vector<dir_entry> sl, dl;  // sorted listings
  std::vector<std::pair<std::size_t, std::size_t>> merged;  // indices into sl / dl, npos when absent
  std::atomic<std::size_t> pending{1};
  std::atomic<bool> modified{false};  // entries of the destination directory were added/removed/renamed
  std::mutex mu;                      // made_writable, closed, made, opening a deferred dst
  bool made_writable = false;         // a read-only destination directory was opened up for a change
  std::uint32_t mode_before_writable = 0;  // its mode before that (what a report compares with SRC's)
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

// The engine's parts, each with one job:
//   run_state  what a run's workers share: filesystem, policies, options, time model, the stop flag;
//   journal    one worker's record of the run: counts, errors, notices, the observer's actions;
//   walker     lists and merges each directory pair and decides what every entry needs (a `plan`);
//              it reads, never writes, and never asks whether this is a dry run;
//   applier    carries a plan out; every new entry reaches its final name through one `install`;
//   pruner     empties and removes directory trees (deciding as it walks; the writes are the
//              applier's);
//   scheduler  the work list, the lifetime of each directory pair and the open-descriptor window.
// A `worker` (one per thread) puts a journal, a walker, an applier and a pruner together; in a dry
// run the applier is the recording one (recording_applier: the same operations, none writing),
// chosen once per run (make_applier).

/// What the walker decided for one entry; the worker hands it to the applier (which, in a dry run,
/// records it as if carried out).
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
  bool current = false;              ///< write: the data was current, written afresh for metadata (owner, set-ID, links)
  operation op = operation::utime;   ///< meta: the operation named if it fails
  changed changes = changed::none;   ///< meta: what differs
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

// The next component of the relative path `rel` from `pos`, which moves past it; empty and "."
// components are skipped.  False at the end.
inline bool next_component(const std::string& rel, std::size_t& pos, std::string& comp) {
  while (pos <= rel.size()) {
    std::size_t end = rel.find('/', pos);
    if (end == std::string::npos) end = rel.size();
    comp = rel.substr(pos, end - pos);
    pos = end + 1;
    if (!comp.empty() && comp != ".") return true;
  }
  return false;
}

// Descends `cur` along a relative path, never following links, making missing directories when
// `create`; false when a step fails.
template <class FS>
bool descend(FS& fs, typename FS::dir_handle& cur, const std::string& rel, bool create, std::error_code& ec) {
  std::size_t pos = 0;
  for (std::string comp; next_component(rel, pos, comp);) {
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

/// Opens a node's destination directory if it was deferred (verify::none), and the deferred ones
/// above it first.  False when it is not open (`ec` says why, if an open failed).
template <class FS, class Node>
bool open_dst(FS& fs, Node& n, std::error_code& ec) {
  if (!n.dst_deferred) return n.have_dst;
  std::lock_guard<std::mutex> lock(n.mu);  // lock order: a node before its parent, never the reverse
  if (n.have_dst) return true;
  if (!n.parent || !open_dst(fs, *n.parent, ec)) return false;
  n.dst = fs.open_dir(n.parent->dst, n.name, false, ec);
  if (ec) return false;
  n.have_dst = true;
  return true;
}

// ---- the backup directory ----------------------------------------------------------------------

/// The directory replaced and deleted entries are moved to (backup_dir), or the one temporaries
/// are made in (temp_dir, `must_exist`): entered one component at a time without following a
/// link, from the destination root's handle (a relative path) or "/".
template <class FS>
class backup_tree {
 public:
  using handle = typename FS::dir_handle;

  backup_tree(FS& fs, const std::filesystem::path& dir, errc unsafe = errc::unsafe_backup_dir, bool must_exist = false)
      : fs_(fs), dir_(dir), unsafe_(unsafe), must_exist_(must_exist) {}

  bool enabled() const { return !dir_.empty(); }
  bool relative() const { return dir_.is_relative(); }

  /// Refuses the run, before anything is written, when a component of the path that exists is a
  /// symlink or not a directory (errc::unsafe_backup_dir, or the code given).  Missing ones are
  /// made at the first backup (never following a link either); with `must_exist` (temp_dir) a
  /// missing one refuses the run (errc::temp_dir_missing).  `out`, when given, gets the directory.
  std::error_code check(handle* dst_root, handle* out = nullptr) {
    std::error_code ec;
    handle cur;
    if (!start(dst_root, cur, ec)) return ec;
    const std::string rel = path();
    std::size_t pos = 0;
    for (std::string comp; next_component(rel, pos, comp);) {
      handle next = fs_.open_dir(cur, comp, false, ec);
      if (is_enoent(ec)) return must_exist_ ? make_error_code(errc::temp_dir_missing) : std::error_code{};
      if (ec == std::errc::too_many_symbolic_link_levels || ec == std::errc::not_a_directory)
        return make_error_code(unsafe_);
      if (ec) return ec;
      cur = std::move(next);
    }
    if (out) *out = std::move(cur);
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
  errc unsafe_;
  bool must_exist_;
  std::mutex mu_;
  handle root_;
  bool open_ = false;
};

// ---- who the run acts as (a service of the run) ------------------------------------------------

/// The identity a run acts as: root, or a user other than root with the user's groups, and what
/// that allows under the run's options.  True root where the filesystem does not tell the user
/// (user_id), as on a filesystem without other users.  As a user other than root (rsync's meaning
/// of -o, -g, -D run unprivileged): preserve_owner is off (no owner is changed, nor reported as
/// changing), preserve_group gives an entry the source's group only where it is one of the
/// user's groups (group_kept), and devices are skipped as without specials (FIFOs and sockets
/// are made).
/// Its users: run_state (the options as the user: as_user), the walker (the owner and group a
/// plan gives an entry, whether a special is made, whether a read-only directory is opened up),
/// the applier (the group of new entries, set-group-ID modes) and metadata_changes (state.hpp).
template <class FS>
class run_identity {
 public:
  run_identity(FS& f, const run_options& o)
      : privileged(acts_as_root(f)), fs_(f), group_(o.group), specials_(o.specials) {
    if constexpr (has_op<op_user_groups, FS>::value) {
      if (!privileged && group_) {
        for (const std::int64_t g : f.user_groups()) groups_.push_back(g);
        std::sort(groups_.begin(), groups_.end());
        groups_known_ = true;
      }
    }
  }

  const bool privileged;

  /// The options `o` as this identity runs them: preserve_owner off unless privileged.
  run_options as_user(run_options o) const {
    if (!privileged) o.owner = false;
    return o;
  }
  /// preserve_group for an entry whose source group is `gid`: the run gives it that group
  /// (and compares and reports it) only where the user may: as root, or one of the user's groups.
  bool group_kept(std::uint32_t gid) const {
    return group_ && (!groups_known_ || std::binary_search(groups_.begin(), groups_.end(), std::int64_t(gid)));
  }
  /// preserve_group, with every group settable (as root): what the run makes never needs the
  /// group a set-group-ID directory gives it.
  bool sets_every_group() const { return group_ && privileged; }
  /// The group the run's new entries get outside a set-group-ID directory: the first of the
  /// filesystem's user_groups() (the effective group); -1 where it does not say.  Asked once, at
  /// the first set-group-ID file (a run without one makes no system call for it).
  std::int64_t own_group() const {
    if constexpr (has_op<op_user_groups, FS>::value) {
      std::call_once(own_group_once_, [this] {
        const std::vector<std::int64_t> g = fs_.user_groups();
        if (!g.empty()) own_group_ = g.front();
      });
      return own_group_;
    } else {
      return -1;
    }
  }
  /// Whether an entry of type `t` can be made by this run under preserve_specials: a device
  /// node only as root (rsync, as a user, skips it: "skipping non-regular file").
  bool makes_special(file_type t) const {
    return specials_ && (privileged || (t != file_type::block && t != file_type::character));
  }

 private:
  static bool acts_as_root(const FS& f) {
    if constexpr (has_op<op_user_id, FS>::value) return f.user_id() == 0;
    (void)f;
    return true;
  }

  FS& fs_;
  const bool group_;     // preserve_group
  const bool specials_;  // preserve_specials
  std::vector<std::int64_t> groups_;  // !privileged: the user's groups (user_groups), sorted
  bool groups_known_ = false;
  mutable std::once_flag own_group_once_;
  mutable std::int64_t own_group_ = -1;
};

// ---- the time model (a service of the run) -----------------------------------------------------

/// The destination's time model (time_model: its timestamps' resolution, whether it keeps a
/// ctime, whether a link's own time can be set), asked once at the start of the run (the engine
/// assigns it), and the racy window of the filesystem: when a copy may predate a change its
/// source's size and mtime do not show.  Its users: the engine (it reads the model, the state
/// file's identity names it, a directory's record is settled or not), the walker (equal mtimes, racily clean copies, link metadata), the
/// applier (smudged copies, link metadata) and the journal (a settled copy re-stamped).
template <class FS>
class time_rules : public time_model {
 public:
  explicit time_rules(FS& f) : racy_window(f.racy_window()), fs_(f) {}
  time_rules& operator=(const time_model& m) {
    time_model::operator=(m);
    return *this;
  }

  const std::int64_t racy_window;

  /// Equal mtimes at the destination's timestamp resolution.
  bool same_mtime(const stat_info& a, const stat_info& b) const noexcept {
    const std::int64_t d = a.mtime_ns - b.mtime_ns;
    return (d < 0 ? -d : d) < resolution_ns;
  }
  /// The destination copy `d` of source file `s` may predate a change the source's size and mtime
  /// do not show (file_pair::racy).  With a ctime: it was written within the racy window of the
  /// source's mtime.  Without one: it carries the smudge mark its writer gave it.  A file whose
  /// ctime differs from its mtime has a ctime of its own, whatever the filesystem was taken for.
  bool racily_clean(const stat_info& s, const stat_info& d) const noexcept {
    if (ctime || d.ctime_ns != d.mtime_ns) return d.ctime_ns <= s.mtime_ns + racy_window;
    const std::int64_t m = smudged_mtime(s.mtime_ns) - d.mtime_ns;
    return (m < 0 ? -m : m) < resolution_ns;
  }
  /// A copy made now of a source last modified at `mtime_ns` is racy: the source may still change
  /// within its timestamp tick.  On a destination without ctime it must be smudged.
  bool smudge_copy(std::int64_t mtime_ns) const { return !ctime && fs_.now() <= mtime_ns + racy_window; }
  /// The racy window of a source mtime has passed.
  bool settled(std::int64_t mtime_ns) const { return fs_.now() > mtime_ns + racy_window; }

 private:
  FS& fs_;
};

// ---- the stop token (a service of the run) -----------------------------------------------------

/// How a run stops before its end: at its first error under errors::stop, at an exception
/// (rethrown by sync() when the workers are done), at the caller's cancel flag, or when the state
/// file cannot be removed before a write (halt).  The first error is the run's.  Thread-safe.
/// Its users: the worker and the scheduler (they stop taking work, record an exception), the
/// walker and the applier (a cancelled copy is no failure of its own), the journal (an error under
/// errors::stop), run_state::before_write, and the engine (the run's outcome).
class run_stop {
 public:
  run_stop(bool on_error, const std::atomic<bool>* cancel) : on_error_(on_error), cancel_(cancel) {}

  /// Stopped by errors::stop, an exception, or the cancel flag.
  bool halted() const noexcept {
    return stopped_.load(std::memory_order_relaxed) || (cancel_ && cancel_->load(std::memory_order_relaxed));
  }
  /// An error: under errors::stop the run stops, and the first is the run's.
  void on(std::error_code ec) {
    if (!on_error_) return;
    halt(ec);
  }
  /// An exception: the run stops, and the first is rethrown at its end.
  void on(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!exception_) exception_ = e;
    stopped_.store(true);
  }
  /// The run stops with `ec` as its error (unless it has one already), whatever errors says.
  void halt(std::error_code ec) {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_.store(true);
    if (!error_) error_ = ec;
  }
  std::error_code error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  std::exception_ptr exception() const {
    std::lock_guard<std::mutex> lock(mu_);
    return exception_;
  }

 private:
  const bool on_error_;                 // errors::stop
  const std::atomic<bool>* cancel_;     // the caller's cancel flag, or null
  mutable std::mutex mu_;               // error_, exception_
  std::atomic<bool> stopped_{false};
  std::error_code error_;
  std::exception_ptr exception_;
};

// ---- the hard-link registry (a service of the run) ---------------------------------------------

/// hard_links: the first name seen of each multiply-linked source inode, and each further name,
/// to be made a hard link to the first name's copy at the end of the run (the link pass).
/// Thread-safe while the walk runs; requests() is for the link pass, after it.  Its users: the
/// source reader (first_name, first_failed) and the worker (the link pass).
class link_registry {
 public:
  struct request {
    std::string rel, first;  // relative paths: the further name, the first name
    stat_info src;           // the source file (the group's size and mtime)
    bool operator<(const request& o) const { return std::tie(rel, first) < std::tie(o.rel, o.first); }
  };

  /// True for the first name `rel` of the multiply-linked source file `st`; a later name is
  /// queued for the link pass.  A first name given up (first_failed) is taken by the next.
  bool first_name(const stat_info& st, const std::string& rel) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto seen = first_.emplace(std::make_pair(st.dev, st.ino), rel);
    if (!seen.second && seen.first->second.empty()) {
      seen.first->second = rel;
      return true;
    }
    if (!seen.second) requests_.push_back({rel, seen.first->second, st});
    return seen.second;
  }
  /// The first name `rel` of `st` has no copy in the destination: given up.
  void first_failed(const stat_info& st, const std::string& rel) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = first_.find(std::make_pair(st.dev, st.ino));
    if (it != first_.end() && it->second == rel) it->second.clear();
  }
  /// Whether some name waits for the link pass.
  bool pending() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !requests_.empty();
  }
  /// For the link pass (the walk is over): each further name with the first name of its group
  /// now (a first name given up: its successor), in name order.
  const std::vector<request>& requests() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& r : requests_) {
      const auto it = first_.find(std::make_pair(r.src.dev, r.src.ino));
      if (it != first_.end() && !it->second.empty() && it->second != r.first) r.first = it->second;
    }
    std::sort(requests_.begin(), requests_.end());
    return requests_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::string> first_;
  std::vector<request> requests_;
};

// ---- the deletion ledger (a service of the run) ------------------------------------------------

/// What a run may delete, and when.  keep_on_source_error (rsync: "IO error encountered --
/// skipping file deletion"): the first source-side failure of the run (a vanished entry is none)
/// stops every deletion from then on, reported once.  A source failure in a directory another
/// worker still walks may come after a deletion elsewhere, where one worker (name order, depth
/// first) would have seen it first; and rsync -H (no incremental walk) deletes nothing after an
/// error anywhere.  So under keep_on_source_error, and under a cap (max_delete, any limit(): they
/// are counted first, and over the cap none is made), every deletion of an entry the source lacks
/// waits for the end of the run (worker::deferred_pass), kept per directory (its path, identity,
/// and the names to delete: memory bounded by what is deleted).  Thread-safe while the walk runs;
/// dirs() is for the deferred pass, after it.  Its users: the journal (a source failure), the
/// worker (deferring, the deferred pass, the notice), the pruner (a directory replaced counted
/// against the cap) and the engine (the run's outcome over the cap).
class deletion_ledger {
 public:
  struct deferred_dir {
    std::string rel;  // as journal::rel has it (with the roots' own relative path, subtree)
    std::uint64_t dev = 0, ino = 0;
    std::vector<std::pair<std::string, file_type>> entries;
    // state_file: each entry's record as it stands ((key, E line), see dir_node::made), and the
    // directory's own record, stashed by record_dir and put once the deletions are done
    std::vector<std::pair<std::size_t, std::string>> staying;
    bool stashed = false, holds_state_file = false;
    std::size_t slot = 0, count = 0;
    dir_record record;
    std::vector<std::pair<std::size_t, std::string>> made;
  };

  deletion_ledger(bool keep_on_source_error, std::size_t limit) : keep_(keep_on_source_error), limit_(limit) {}

  /// A source-side failure (keep_on_source_error: no deletion from now on).
  void source_failed() noexcept { source_failed_.store(true, std::memory_order_release); }
  /// keep_on_source_error: a deletion may go ahead (no source failure so far, or the option off).
  bool allowed() const noexcept { return !keep_ || !source_failed_.load(std::memory_order_acquire); }
  /// True the first time only: the skipped deletions are reported once.
  bool first_skip_notice() noexcept { return !noted_.exchange(true); }
  /// The deletion policy caps the run's deletions (max_delete, or any limit()).
  bool capped() const noexcept { return limit_ != unlimited; }
  /// Deletions of entries the source lacks wait for the end of the run (see above).
  bool deferred() const noexcept { return keep_ || capped(); }
  /// Under a cap: `n` more deletions are counted against it.  False (and over_limit) when the
  /// count so far then exceeds it: those deletions are not made, nor any after them.
  bool reserve(std::size_t n) noexcept {
    if (!capped()) return true;
    const std::size_t before = counted_.fetch_add(n);
    if (!over_limit_.load() && before + n <= limit_) return true;
    over_limit_.store(true);
    return false;
  }
  /// More deletions were found than the cap allows: the run ends with max_delete_exceeded.
  bool over_limit() const noexcept { return over_limit_.load(); }
  /// Every deletion the run found (a directory replaced by an entry of another type: the entries
  /// in it, counted when it comes; the deletions of entries the source lacks: at the end).
  std::size_t counted() const noexcept { return counted_.load(); }

  /// A directory's deletions, kept for the deferred pass; returns its index.
  std::size_t defer(deferred_dir d) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back(std::move(d));
    return dirs_.size() - 1;
  }
  /// `f(deferred_dir&)` on the directory at `index`, under the ledger's lock.
  template <class F>
  void update(std::size_t index, F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    f(dirs_[index]);
  }
  bool any() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !dirs_.empty();
  }
  /// The deferred directories, for the deferred pass (the walk is over).
  std::vector<deferred_dir>& dirs() noexcept { return dirs_; }

 private:
  const bool keep_;           // keep_on_source_error
  const std::size_t limit_;   // the deletion policy's cap (unlimited: none)
  std::atomic<bool> source_failed_{false};
  std::atomic<bool> noted_{false};
  std::atomic<std::size_t> counted_{0};
  std::atomic<bool> over_limit_{false};
  mutable std::mutex mu_;  // dirs_
  std::vector<deferred_dir> dirs_;
};

// ---- the roots' identity (a service of the run) ------------------------------------------------

/// What the run knows of its roots: the source root's filesystem (one_file_system compares each
/// directory's with it) and the destination root's device and inode, once it exists (a source
/// directory that is the destination itself is not entered).  Set by the engine when it opens
/// the roots, before any worker starts; read by the walker.
struct root_identity {
  std::uint64_t src_dev = 0;
  bool dst_known = false;
  std::uint64_t dst_dev = 0, dst_ino = 0;

  /// The directory `st` is the destination root.
  bool is_dst(const stat_info& st) const noexcept { return dst_known && st.dev == dst_dev && st.ino == dst_ino; }
};

// ---- the cycle set and the temporary names (services of the run) -------------------------------

/// The source directories of the nodes alive, a multiset by device and inode: every ancestor of
/// a node is alive, so a directory that is not live cannot close a cycle (a followed symlink
/// that leads back up).  Thread-safe.  Its users: the worker (a node's directory is added when
/// the node is made, removed when it is done) and the walker (a directory to enter that is live
/// closes a cycle: skipped, errc::symlink_cycle; otherwise added).
class cycle_set {
 public:
  bool live(const stat_info& st) {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.count({st.dev, st.ino}) != 0;
  }
  void add(const stat_info& st) {
    std::lock_guard<std::mutex> lock(mu_);
    ++live_[{st.dev, st.ino}];
  }
  void remove(const stat_info& st) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = live_.find({st.dev, st.ino});
    if (it != live_.end() && --it->second == 0) live_.erase(it);
  }

 private:
  std::mutex mu_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::size_t> live_;
};

/// The names of a run's temporaries: temp_prefix, then `<pid>-<run>-<n>` (is_temp_name), unique
/// to the run: the process, and which of its runs.  A run stopped midway can leave a staged
/// directory behind; a later run in the same process must never make a temporary of that name
/// before it removes the leftover (jobs{n}: another worker may get there first).  Thread-safe.
/// Its user: the applier (each temporary it makes: a file's, a link's, a directory staged).
class temp_names {
 public:
  std::string next() { return stem_ + std::to_string(++counter_); }

 private:
  std::atomic<std::uint64_t> counter_{0};
  const std::string stem_ =
      std::string(temp_prefix) + std::to_string(process_token()) + "-" + std::to_string(run_serial()) + "-";
};

// ---- the shared state of a run -----------------------------------------------------------------

template <class FS>
struct run_state {
  using fs_type = FS;
  using handle = typename FS::dir_handle;
  using node = dir_node<handle>;

  run_state(FS& f, const policy_view& p, const run_options& op, report& r)
      : fs(f), pol(p), who(f, op), opt(who.as_user(op)), jobs(op.jobs == 0 ? 1 : op.jobs), out(r),
        time(f), backups(f, op.backup_dir),
        temps(f, op.temp_dir, errc::unsafe_temp_dir, true), state(f, op.state, op.verify, op.subtree, op.state_memory),
        stop(op.errors == error_mode::stop, op.cancel), deletions(op.keep_on_source_error, p.limit) {}

  FS& fs;
  const policy_view pol;  // compare, deletion, links, exclude, observer
  const run_identity<FS> who;  // root or a user, and the user's groups
  const run_options opt;       // as the caller gave them, preserve_owner off unless who.privileged

  const unsigned jobs;
  report& out;
  time_rules<FS> time;  // the destination's time model (asked once at the start) and the racy window
  root_identity roots;  // the source root's filesystem, the destination root's identity
  std::unique_ptr<node> root;  // the root directory pair, whose handles stay open for the whole run
  backup_tree<FS> backups;
  std::string backup_rel;  // the backup directory's path inside the destination, if it is inside
  backup_tree<FS> temps;   // temp_dir: checked and opened once, before the first write
  handle temp_root;        // temp_dir's directory, once opened (have_temp_root)
  bool have_temp_root = false;
  std::string temp_rel;    // temp_dir's path inside the destination, if it is inside
  state_keeper<FS> state;
  bool recording = false;  // a state file is written at the end: completed directories are recorded
  std::string state_rel;   // the state file's path inside the destination, if it is inside
  std::error_code state_error;  // the state file could not be removed before the first write

  /// Before every write of the run: the state file is removed first.  False when it cannot be
  /// (the run then stops: writing would leave a state file that claims more than is true).
  bool before_write() {
    std::error_code ec;
    if (state.before_write(ec)) return true;
    std::lock_guard<std::mutex> lock(mu);
    if (!state_error) state_error = ec ? ec : std::make_error_code(std::errc::io_error);
    stop.halt(state_error);
    return false;
  }
  /// A destination entry that is the state file itself (inside the destination): never touched.
  bool is_state_file(const std::string& rel) const { return !state_rel.empty() && rel == state_rel; }

  link_registry links;  // hard_links: the first name of each multiply-linked inode, the names to link

  std::mutex mu;  // state_error
  run_stop stop;  // errors::stop, an exception, the cancel flag
  std::error_code refusal;  // the walker's verdict on the root (empty_source): the run is refused
  deletion_ledger deletions;  // keep_on_source_error and the cap: what may be deleted, and when
  using deferred_dir = deletion_ledger::deferred_dir;

  cycle_set cycles;  // the source directories of the nodes alive


  void observe(const action& a) {
    if (!pol.observed()) return;
    std::lock_guard<std::mutex> lock(observer_mu_);
    pol.observe(a);
  }
  void hand_out(std::string_view rel) {  // frontier: a subtree left to its own sync
    std::lock_guard<std::mutex> lock(observer_mu_);
    if (opt.on_subtree) opt.on_subtree(rel);
  }

  temp_names temp_namer;  // the names of the run's temporaries

  /// The backup directory's and the state file's paths inside the destination ("" when outside
  /// or unset).
  void locate_backups(const std::filesystem::path& dst) {
    backup_rel = inside(opt.backup_dir, dst, true);
    temp_rel = inside(opt.temp_dir, dst, true);
    state_rel = inside(opt.state, dst, false);
  }

 private:
  static std::string inside(const std::filesystem::path& p, const std::filesystem::path& dst, bool relative_is_inside) {
    if (p.empty()) return {};
    const std::filesystem::path b = p.lexically_normal();
    std::string rel;
    if (b.is_relative() && relative_is_inside) {
      rel = strip_trailing_separators(b).generic_string();
    } else {
      const std::filesystem::path base = b.is_relative() ? std::filesystem::current_path() / b : b;
      const std::filesystem::path r = base.lexically_normal().lexically_relative(
          dst.is_relative() ? (std::filesystem::current_path() / dst).lexically_normal() : dst.lexically_normal());
      if (!r.empty() && *r.begin() != "..") rel = strip_trailing_separators(r).generic_string();
    }
    return rel == "." ? std::string() : rel;
  }

  std::mutex observer_mu_;  // observers need not be thread-safe
};

// ---- the journal -------------------------------------------------------------------------------

/// One worker's record of the run: its counts and lists (merged into the run's report at the end)
/// and the actions it shows the observer.  `rel` is the relative path of the entry at hand.  The
/// counts and lists are reached through its methods only.
template <class S>
class journal {
 public:
  using handle = typename S::handle;
  using node = typename S::node;

  explicit journal(S& s) : s_(s) {}

  std::string rel;

  void note(action_kind kind, file_type type, std::uint64_t src_size = 0, std::uint64_t dst_size = 0,
            std::error_code code = {}, changed changes = changed::none, copy_method method = copy_method::none,
            bool sparse = false, std::string_view link_to = {}) {
    s_.observe(action{kind, type, std::string_view(rel), src_size, dst_size, code, changes, method, sparse, link_to});
  }
  // Under errors::stop the stop is set first: before the observer is told (it may block) and
  // before the caller cleans up (a filesystem call, which may wait behind the other workers'
  // calls).  Until it is set the other workers go on taking entries.
  /// A failure of `op` on the entry at hand, in the tree `where`.
  void fail(side where, operation op, std::error_code ec) {
    if (where == side::source) s_.deletions.source_failed();
    s_.stop.on(ec);
    rep.errors.push_back({rel, op, ec, where});
    note(action_kind::error, file_type::none, 0, 0, ec);
  }
  /// A source entry that vanished or changed under us (always the source side).
  void vanish(operation op, std::error_code ec) {
    rep.vanished.push_back({rel, op, ec, side::source});
    note(action_kind::vanished, file_type::none, 0, 0, ec);
  }
  /// A failed source operation: vanished when the entry is gone, a source failure otherwise.
  void source_failure(handle& s, const std::string& name, operation op, std::error_code ec) {
    if (is_enoent(ec)) {
      std::error_code probe;
      s_.fs.stat(s, name, false, probe);
      if (is_enoent(probe)) return vanish(op, errc::vanished);
    }
    fail(side::source, op, ec);
  }
  /// A source entry not synced (special file, a link skipped, another filesystem).
  void skip(file_type t, operation op, std::error_code why) {
    ++rep.skipped;
    rep.skipped_entries.push_back({rel, op, why, side::source});
    note(action_kind::skip, t, 0, 0, why);
  }
  void notice(side where, operation op, std::error_code ec) { rep.notices.push_back({rel, op, ec, where}); }
  /// A notice about the run's state file (`path`: as the run was given it), with what more there is to say.
  void state_notice(std::string path, std::error_code ec, std::string detail) {
    rep.notices.push_back({std::move(path), operation::state, ec, side::destination, std::move(detail)});
  }
  void count(action_kind k) { k == action_kind::create ? ++rep.created : ++rep.updated; }
  /// A source entry looked at.
  void scanned() { ++rep.scanned; }
  /// An entry left alone by the exclude policy.
  void excluded() { ++rep.excluded; }
  /// An existing directory's metadata set (`was`: its stat before; `also`: owner, group).
  void dir_meta(const stat_info& src, const stat_info& was, changed also) {
    ++rep.meta_updated;
    note(action_kind::update_meta, file_type::directory, 0, 0, {}, (differences(src, &was) & ~changed::size) | also);
  }
  void removed(file_type t) {
    ++rep.deleted;
    note(action_kind::remove, t);
  }
  void cleaned(file_type t) {
    ++rep.cleaned;
    note(action_kind::remove, t);
  }

  /// A directory made (walker::new_dir): created, or (an entry of another type replaced) updated.
  void made_dir(const plan& p) {
    count(p.kind());
    note(p.kind(), file_type::directory, 0, 0, {}, p.changes);
  }

  /// A written entry (created or replaced).
  void wrote(const plan& p, const copy_result& r) {
    // data current, written afresh for its metadata only: reported (and counted) as update_meta
    const action_kind kind = p.current ? action_kind::update_meta : p.kind();
    if (p.current) ++rep.meta_updated;
    else count(kind);
    const bool same_type = p.old == p.type;
    // what differs: an entry of another type replaced counts as new (rsync: '+' in every column)
    changed what = p.old == file_type::none ? changed::all
                   : !same_type             ? changed::all | changed::replaced
                                            : differences(p.src, &p.dst);
    if (same_type && s_.opt.owner && p.src.uid != p.dst.uid) what |= changed::owner;
    if (same_type && s_.who.group_kept(p.src.gid) && p.src.gid != p.dst.gid) what |= changed::group;
    if (p.type == file_type::regular) {
      rep.bytes_copied += r.bytes;
      if (p.current) what &= ~changed::size | changed::owner | changed::group;
      note(kind, p.type, p.src.size, same_type ? p.dst.size : 0, {}, what, r.method, r.sparse);
    } else if (p.type == file_type::symlink) {
      // the same type: the target changed (size; not for a link made afresh for its owner or
      // group only), and the mtime, owner and group when they differ
      if (same_type)
        what = (p.current ? changed::none : changed::size) | (what & (changed::mtime | changed::owner | changed::group));
      note(kind, p.type, p.src.size, 0, {}, what);
    } else if (p.current) {  // a special file made afresh for its metadata: what differs
      note(kind, p.type, 0, 0, {}, what & (changed::mtime | changed::mode | changed::owner | changed::group));
    } else {
      note(kind, p.type, 0, 0, {}, changed::all | (what & changed::replaced));
    }
  }
  /// Metadata set by name.  A settled mtime that already matched is no change: counted apart.
  void touched(const plan& p) {
    if (p.settle && s_.time.same_mtime(p.dst, p.src)) {
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
    out.merge(std::move(rep));
    rep = report{};
  }

 private:
  S& s_;
  report rep;
  std::vector<const std::string*> parts_;  // set_rel_of's scratch
};

}  // namespace detail

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_STATE_HPP
