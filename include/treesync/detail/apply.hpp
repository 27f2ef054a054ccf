// treesync/detail/apply.hpp - the applier (every write of a run, one install path) and the pruner (tree removal)
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_DETAIL_APPLY_HPP
#define TREESYNC_DETAIL_APPLY_HPP

#include "state.hpp"

namespace treesync {
inline namespace v0 {

namespace detail {

// settle_special, check_made_dir, user_id: the optional operations of detail/detect.hpp.

// ---- the pruner: removing entries and whole trees ------------------------------------------------

enum class removal { done, kept, failed };

template <class S>
class applier;
template <class S>
class walker;

/// Removes destination entries; a directory is emptied first, through handles opened without
/// following links, so a symlink inside it is removed, never walked through.  Entries inside it
/// that the deletion policy protects (excluded ones, under deletion::extraneous) are kept, and
/// then so is the directory: the walker's verdict (walker::removes_within), asked for each entry
/// as the pruner reaches it.  The writes are the applier's (in a dry run the recording
/// applier's, which writes nothing: the pruner walks, decides and records the same, without
/// knowing which applier it has).  Under a cap on deletions (max_delete) it first counts what a removal would delete
/// (count_entry: a walk that writes and reports nothing) and keeps the listings it took, so the
/// removal itself lists nothing again.
template <class S>
class pruner {
 public:
  using handle = typename S::handle;

  pruner(S& s, journal<S>& j, applier<S>& a, walker<S>& w) : s_(s), fs_(s.fs), j_(j), ap_(a), walker_(w) {}

  /// Removes an entry.  `count_top`: the entry itself is reported as deleted.  `leftover`: a
  /// staged directory an interrupted run left: everything in it goes, whatever the deletion
  /// policy (none of it ever was at a final path).
  removal remove_entry(handle& d, const std::string& name, file_type t, bool count_top, bool leftover = false) {
    if (t == file_type::unknown) {
      std::error_code ec;
      const stat_info st = fs_.stat(d, name, false, ec);
      if (ec) return is_enoent(ec) ? (gone(count_top, leftover), removal::done) : (fail(operation::stat, ec), removal::failed);
      t = st.type;
    }
    if (t == file_type::directory) return remove_tree(d, name, count_top, leftover);
    if (!counting_ && !ap_.remove_file(d, name, !leftover)) return removal::failed;
    if (!counting_ && ap_.gone) gone(count_top, leftover);
    else if (count_top) removed(t);
    return removal::done;
  }

  /// How many entries remove_entry(d, name, t, count_top) would delete (a directory's content as
  /// the deletion policy has it): the same walk, without a write, an action or a report.  The
  /// listings it takes are kept for the removal that follows (forget_listings drops them).
  std::size_t count_entry(handle& d, const std::string& name, file_type t, bool count_top) {
    counting_ = true;
    tally_ = 0;
    remove_entry(d, name, t, count_top);
    counting_ = false;
    return tally_;
  }
  void forget_listings() { listed_.clear(); }

  /// Whether the leftover `name` (a temporary name of an earlier run) may be removed: where the
  /// filesystem knows users (user_id), only when it belongs to the user this run acts as: an
  /// entry someone else owns was not made by this tool under this user.  `t` becomes its type.
  bool leftover_ours(handle& d, const std::string& name, file_type& t) {
    if constexpr (has_op<op_user_id, typename S::fs_type>::value) {
      std::error_code ec;
      const stat_info st = fs_.stat(d, name, false, ec);
      if (ec && !is_enoent(ec)) j_.fail(side::destination, operation::stat, ec);  // gone: nothing to clean
      if (ec) return false;
      t = st.type;
      return std::int64_t(st.uid) == fs_.user_id();
    } else {
      (void)d, (void)name, (void)t;
      return true;
    }
  }

  /// Clears the way for an entry of another type: false (reported) when that is not possible.
  /// Under a cap on deletions the entries in it are counted against it first: past the cap it
  /// stays (reported: errc::max_delete_exceeded).
  bool replace_dir(handle& d, const std::string& name) {
    if (s_.deletions.capped() && !s_.deletions.reserve(count_entry(d, name, file_type::directory, false))) {
      forget_listings();
      j_.fail(side::destination, operation::rmdir, errc::max_delete_exceeded);
      return false;
    }
    const removal r = remove_entry(d, name, file_type::directory, false);
    forget_listings();
    if (r == removal::kept) j_.fail(side::destination, operation::rmdir, std::make_error_code(std::errc::directory_not_empty));
    return r == removal::done;
  }

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
    bool opened = false;  // made writable for a removal in it (open_up): `was` is its mode before
    std::uint32_t was = 0;
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
      fail(operation::opendir, ec);
      return entered::failed;
    }
    const auto kept = counting_ ? listed_.end() : listed_.find(j_.rel);
    if (kept != listed_.end()) {  // counted before (count_entry): listed then
      l.children = std::move(kept->second);
      listed_.erase(kept);
    } else {
      l.children = fs_.list(l.h, ec);
    }
    if (ec) {
      fail(operation::list, ec);
      return entered::failed;
    }
    l.name = name;
    levels.push_back(std::move(l));
    return entered::pushed;
  }

  // The identity of a level's directory (open), taken once: what a deletion policy that takes it
  // is given for the entries in it (walker::removes_within), and what a reopen is checked by.
  dir_identity identity(level& l) {
    if (!l.known) {
      std::error_code ec;
      const stat_info id = fs_.stat(l.h, ".", false, ec);
      if (ec) return dir_identity{};
      l.dev = id.dev;
      l.ino = id.ino;
      l.known = true;
    }
    return dir_identity{l.dev, l.ino, true};
  }

  // Closes a level's handle while a level below it is emptied (past delete_open_levels).
  void close_level(level& l) {
    if (!identity(l).known) return;  // stays open
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
    if (ec) return fail(operation::opendir, ec), false;
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
        if (!is_enoent(ec)) l.ok = (fail(operation::stat, ec), false);
        return rel.resize(saved), true;
      }
      ct = cs.type;
      if (counting_) l.children[l.next - 1].type = ct;  // kept with the listing
    }
    if (!leftover && !walker_.removes_within(c.name, ct, counting_, [&] { return identity(levels.back()); })) {
      l.kept = true;
      return rel.resize(saved), true;
    }
    removal r = removal::done;
    if (ct != file_type::directory) writable(l);
    if (ct == file_type::directory) {
      const entered en = enter_level(l.h, c.name, levels);  // may move the levels: `l` is stale
      if (en == entered::pushed) {
        levels.back().rel_size = saved;
        if (levels.size() > delete_open_levels + 1) close_level(levels[levels.size() - 2]);
        return true;
      }
      if (en == entered::failed) r = removal::failed;
      if (en == entered::swapped) {
        writable(levels.back());
        r = remove_entry(levels.back().h, c.name, file_type::symlink, !leftover, leftover);
      }
    } else {
      r = remove_entry(l.h, c.name, ct, !leftover, leftover);
    }
    fold(levels.back(), r);
    rel.resize(saved);
    return leftover || !s_.stop.halted();
  }

  // A directory of the tree is made writable before the first removal in it (never when nothing
  // in it is removed: a directory that stays keeps its mode, as in rsync).
  void writable(level& l) {
    if (l.opened || counting_ || !l.open) return;
    l.opened = true;
    l.was = ap_.open_up(l.h);  // no_mode when unchanged (the recording applier: always)
  }
  // A directory opened up that stays (it keeps an entry, or a removal in it failed) gets its mode
  // back.
  void restore(level& l) {
    if (counting_ || !l.open || l.was == no_mode) return;
    std::error_code ec;
    fs_.set_mode(l.h, ".", l.was, ec);
    if (ec) fail(operation::chmod, ec);
  }
  static constexpr std::uint32_t no_mode = static_cast<std::uint32_t>(-1);

  // An entry to delete that was not there (a record under verify::none may list names the
  // destination no longer has): not a deletion, counted for one notice (state_keeper::gone).
  void gone(bool count_top, bool leftover) {
    if (count_top && !leftover && !counting_) s_.state.gone();
  }
  // A removal, reported (or, counting, counted).
  void removed(file_type t) {
    if (counting_) ++tally_;
    else j_.removed(t);
  }
  // A failure in the destination, reported (counting: not; the removal that follows meets it).
  void fail(operation op, std::error_code ec) {
    if (!counting_) j_.fail(side::destination, op, ec);
  }

  // The deepest level is empty (or keeps something): removes it and folds the outcome into the
  // level above.  Returns the outcome when it was the top level.
  std::optional<removal> step_out(std::vector<level>& levels, handle& top, bool count_top, bool leftover) {
    level done = std::move(levels.back());
    levels.pop_back();
    if (!levels.empty() && !levels.back().open && !reopen_level(levels, top, done)) return removal::failed;
    removal r = !done.ok ? removal::failed : done.kept ? removal::kept : removal::done;
    if (r != removal::done && done.opened) restore(done);  // it stays: with the mode it had
    if (counting_) listed_[j_.rel] = std::move(done.children);  // for the removal that follows
    if (r == removal::done) {
      if (!levels.empty()) writable(levels.back());
      done.h = handle{};
      if (!counting_ && !ap_.remove_dir(levels.empty() ? top : levels.back().h, done.name)) {
        r = removal::failed;
      } else if (!leftover && (!levels.empty() || count_top)) {
        removed(file_type::directory);
      }
    }
    j_.rel.resize(done.rel_size);
    if (levels.empty()) return r;
    fold(levels.back(), r);
    if (!leftover && s_.stop.halted()) return removal::failed;
    return std::nullopt;
  }

  // A directory and everything in it, without recursion: a stack of levels, of which only the
  // first delete_open_levels and the one being emptied hold a descriptor.
  removal remove_tree(handle& top, const std::string& top_name, bool count_top, bool leftover) {
    std::vector<level> levels;
    const std::size_t base = j_.rel.size();  // rel names the directory already
    switch (enter_level(top, top_name, levels)) {
      case entered::swapped: return remove_entry(top, top_name, file_type::symlink, count_top, leftover);
      case entered::gone: return gone(count_top, leftover), removal::done;
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
  applier<S>& ap_;
  walker<S>& walker_;
  bool counting_ = false;  // count_entry: removals counted in tally_, nothing written or reported
  std::size_t tally_ = 0;
  std::map<std::string, std::vector<dir_entry>> listed_;  // count_entry's listings, by relative path
};

// ---- the appliers ------------------------------------------------------------------------------

/// Carries plans out.  There are two: the writing applier (every write of a run is made there)
/// and, for a dry run, the recording applier (the same operations, none writing: each records
/// what it would do, so the report and the observer's actions come from it as from the writing
/// one).  make_applier chooses once per run; the worker, the pruner and the engine hold this
/// interface and never ask which one they have.  Both are compiled once per filesystem type, as
/// the rest of the engine is: a virtual call per operation, where each write is a system call.
template <class S>
class applier {
 public:
  using handle = typename S::handle;
  using node = typename S::node;

  virtual ~applier() = default;

  /// Carries out an entry's plan in its directory `n`.  Returns whether the directory's entries
  /// changed (its mtime is then restored when it is finished).
  virtual bool apply(node& n, const std::string& name, const plan& p) = 0;
  /// A missing destination root, made: whether it now exists (false with `ec` when making it
  /// failed; false without, recording: a dry run into a missing destination reads nothing there).
  virtual bool make_root(const std::filesystem::path& dst, std::error_code& ec) = 0;
  /// A directory the source has and the destination lacks, as the walker planned it
  /// (walker::new_dir): what the destination has at its name instead (p.old) goes first, with its
  /// content; node::stage: made under a temporary name.
  virtual bool make_dir(node& n, const plan& p) = 0;
  /// A directory's metadata, once its content is complete; a staged one then takes its name.
  virtual bool finish_dir(node& n, const dir_plan& p) = 0;
  /// hard_links: `name` in `d` (what is there, `old`, replaced) becomes another name of `fname` in `fdir`.
  virtual bool link_into(handle& fdir, const std::string& fname, handle& d, const std::string& name, file_type old) = 0;
  /// A leftover of an interrupted run (a temporary name) in `n`, removed; `t` becomes its type.
  virtual removal clean(node& n, const std::string& name, file_type& t) = 0;
  /// The destination directory of `n` opened (if deferred) and made writable for a change in it.
  virtual bool open_for_write(node& n) = 0;
  /// A directory whose deferred deletions are done (`changed`) or that was opened up for them
  /// (`opened`) gets back the mtime and mode it had (`before`).
  virtual void restore_dir(handle& h, const stat_info& before, bool changed, bool opened) = 0;
  /// Removes a non-directory; `keep_copy`: moved to the backup directory instead, when there is one.
  /// `gone` says whether there was nothing to remove (ENOENT).
  virtual bool remove_file(handle& d, const std::string& name, bool keep_copy) = 0;
  bool gone = false;  ///< the last remove_file found nothing at the name: nothing was deleted
  /// Removes an empty directory.
  virtual bool remove_dir(handle& parent, const std::string& name) = 0;
  /// A directory about to be emptied, made writable first.  Returns its mode before, or -1 when
  /// it was not changed.
  virtual std::uint32_t open_up(handle& d) = 0;
  /// A destination directory without write permission, made writable before its first change.
  virtual void prepare_write(node& n) = 0;
  /// The set-group-ID bit of a directory, set (or cleared) before its entries are made.
  virtual void setgid_first(node& n) = 0;

 protected:
  explicit applier(pruner<S>& p) : pruner_(p) {}
  applier(const applier&) = delete;
  applier& operator=(const applier&) = delete;

  // A new directory's name cleared of what the destination has there (p.old, of another type):
  // removed with its content by the pruner, which walks and records it the same for both appliers.
  bool clear_for_dir(node& n, const plan& p) {
    if (p.old == file_type::none) return true;
    if (pruner_.remove_entry(n.parent->dst, n.name, p.old, false) != removal::done) return false;
    n.parent->modified.store(true);
    return true;
  }

  pruner<S>& pruner_;
};

/// A dry run's applier: every operation of the writing one, none of them writing.  A plan is
/// recorded as if carried out (journal::wrote with the bytes a copy would write, journal::touched);
/// a directory a plan replaces is walked by the pruner as in a real run, which records its
/// entries and reaches remove_file and remove_dir here.  Everything else succeeds as it would,
/// without a system call: a directory made is `cold` (never listed), a leftover is cleaned, a
/// link is made, a directory finished.
template <class S>
class recording_applier final : public applier<S> {
 public:
  using handle = typename S::handle;
  using node = typename S::node;

  recording_applier(journal<S>& j, pruner<S>& p) : applier<S>(p), j_(j) {}

  bool apply(node& n, const std::string& name, const plan& p) override {
    if (p.what == plan::step::meta) return j_.touched(p), false;
    if (p.old == file_type::directory && !pruner_.replace_dir(n.dst, name)) return false;
    copy_result as_if;
    as_if.bytes = p.type == file_type::regular ? p.src.size : 0;
    j_.wrote(p, as_if);
    return true;
  }
  bool make_root(const std::filesystem::path&, std::error_code&) override { return false; }
  bool make_dir(node& n, const plan& p) override { return this->clear_for_dir(n, p); }
  bool finish_dir(node&, const dir_plan&) override { return true; }
  bool link_into(handle&, const std::string&, handle&, const std::string&, file_type) override { return true; }
  removal clean(node&, const std::string&, file_type&) override { return removal::done; }
  bool open_for_write(node&) override { return true; }
  void restore_dir(handle&, const stat_info&, bool, bool) override {}
  bool remove_file(handle&, const std::string&, bool) override { return true; }
  bool remove_dir(handle&, const std::string&) override { return true; }
  std::uint32_t open_up(handle&) override { return static_cast<std::uint32_t>(-1); }
  void prepare_write(node&) override {}
  void setgid_first(node&) override {}

 private:
  using applier<S>::pruner_;
  journal<S>& j_;
};

/// The writing applier: every write of the run is made here.  A new entry is made under a
/// temporary name (or, inside a directory still staged, at its final name) and `install` puts it
/// in place.
template <class S>
class writing_applier final : public applier<S> {
 public:
  using handle = typename S::handle;
  using node = typename S::node;

  writing_applier(S& s, journal<S>& j, pruner<S>& p) : applier<S>(p), s_(s), fs_(s.fs), j_(j) {}

  bool apply(node& n, const std::string& name, const plan& p) override;

  // Makes the missing destination root: mode 0700 until it is finished, as any directory the run makes.
  bool make_root(const std::filesystem::path& dst, std::error_code& ec) override;

  /// Makes a directory the destination lacks, under a temporary name when the walker staged it.
  bool make_dir(node& n, const plan& made_as) override;

  /// A directory's metadata, once its content is complete; a staged one then takes its name.
  bool finish_dir(node& n, const dir_plan& p) override;

  /// hard_links: another name for a file already in the destination, installed at `name` in `d`.
  bool link_into(handle& fdir, const std::string& fname, handle& d, const std::string& name, file_type old) override;

  /// Removes a leftover of an interrupted run (a temporary name) in `n`, unless someone else owns it.
  removal clean(node& n, const std::string& name, file_type& t) override;

  /// The destination directory of `n` opened (if deferred) and made writable for a change in it.
  bool open_for_write(node& n) override;

  /// Gives a directory back the mtime and mode it had (`before`) once its deferred deletions are done.
  void restore_dir(handle& h, const stat_info& before, bool changed, bool opened) override;

  /// Removes a non-directory; `keep_copy`: moved to the backup directory instead, when there is one.
  bool remove_file(handle& d, const std::string& name, bool keep_copy) override;
  bool remove_dir(handle& parent, const std::string& name) override;
  /// Makes a directory about to be emptied writable; returns its mode before, or -1 when not changed.
  std::uint32_t open_up(handle& d) override;

  /// Makes a destination directory without write permission writable before its first change.
  void prepare_write(node& n) override;

  /// Sets (or clears) a directory's set-group-ID bit before its entries are made, as rsync does.
  void setgid_first(node& n) override;
 private:
  // finish_dir's metadata, up to the first failure (reported).
  bool set_dir_meta(node& n, const dir_plan& p);

  // The directory a file was made in when not its own (temp_dir), and whether its copy set the
  // owner and group (copied again with them when that directory is on another filesystem).
  struct made_in {
    handle* dir;
    bool owner, group;
  };

  // Puts the entry made as `made` in `d` at `name`, what was there going first; false on failure.
  bool install(handle& d, const std::string& made, const std::string& name, file_type old, const made_in* in = nullptr);

  // temp_dir on another filesystem than `d`: copied beside `name`, then renamed over it.
  bool install_across(const made_in& in, const std::string& made, handle& d, const std::string& name);

  // `mode` with the set-group-ID bit the directory `n` has while its entries are made
  // (setgid_first): the source's, unless the run sets the group of everything it makes (group).
  std::uint32_t setgid_now(const node& n, std::uint32_t mode) const {
    return s_.who.sets_every_group() ? mode : (mode & ~02000u) | (n.src_st.mode & 02000u);
  }

  void discard(handle& d, const std::string& name) {
    std::error_code ignored;
    fs_.remove(d, name, ignored);
  }

  // The destination directory of `n`, opened if it was deferred; false (reported) when it cannot be.
  bool reach(node& n);

  // Moves the destination entry at rel into the backup directory; true when there is none or it moved.
  bool backup(handle& d, const std::string& name);

  void touch(handle& d, const std::string& name, const plan& p);

  // The owner and group a new node gets: which ones are set (`owner`, `group`) and to what (`st`).
  void ids(const plan& p, stat_info& st, bool& owner, bool& group) const;

  // Writes a file (a partial one never reaches a final path); returns whether `d` changed.
  bool write_file(node& n, const std::string& name, const plan& p);

  bool write_link(handle& d, const std::string& name, const plan& p);

  bool install_link(handle& d, const std::string& made, const std::string& name, const plan& p);

  // A FIFO, socket or device node, made (never opened) with its owner, mode and mtime.
  bool write_special(handle& d, const std::string& name, const plan& p);

  using applier<S>::pruner_;
  S& s_;
  typename S::fs_type& fs_;
  journal<S>& j_;
};

template <class S>
inline bool writing_applier<S>::apply(node& n, const std::string& name, const plan& p) {
  if (!s_.before_write()) return false;
  if (p.what == plan::step::meta) return touch(n.dst, name, p), false;
  prepare_write(n);
  switch (p.type) {
    case file_type::regular: return write_file(n, name, p);
    case file_type::symlink: return write_link(n.dst, name, p);
    default: return write_special(n.dst, name, p);
  }
}

// Mode 0700 until it is finished, as any directory the run makes.
template <class S>
inline bool writing_applier<S>::make_root(const std::filesystem::path& dst, std::error_code& ec) {
  if (!s_.before_write()) return ec = s_.state_error, false;
  fs_.make_root(dst, 0700, ec);
  if (is_enoent(ec)) ec = errc::destination_parent_missing;
  return !ec;
}

/// Makes a directory the source has and the destination lacks, in its parent opened for the
/// write, once what was at its name is gone: under a temporary name when the walker staged it
/// (node::stage), else at its final name.
template <class S>
inline bool writing_applier<S>::make_dir(node& n, const plan& made_as) {
  node& p = *n.parent;
  if (!open_for_write(p) || !this->clear_for_dir(n, made_as)) return false;
  if (!s_.before_write()) return false;
  std::error_code ec;
  const bool stage = n.stage;
  const std::string made = stage ? s_.temp_namer.next() : n.name;
  fs_.make_dir(p.dst, made, 0700, ec);  // final mode once the content is in (a 0555 source dir)
  if (ec) return j_.fail(side::destination, operation::mkdir, ec), false;
  p.modified.store(true);
  if (stage) n.staged = made;
  n.unseen = stage || p.unseen;
  n.dst = fs_.open_dir(p.dst, made, false, ec);
  if (ec) return j_.fail(side::destination, operation::opendir, ec), false;
  if constexpr (has_op<op_check_made_dir, typename S::fs_type>::value) {
    // swapped between the mkdir and the open: never filled, chowned or chmodded (nor, staged,
    // removed as a leftover of this run).  Not inside a directory this run made and has not
    // finished (p.unseen): that one is ours and 0700 until its content, this one included, is
    // complete, so nobody else can swap anything in it (a cold run checks its top level only).
    if (!p.unseen) fs_.check_made_dir(n.dst, ec);
    if (ec) {
      n.dst = handle{};
      n.staged.clear();
      return j_.fail(side::destination, operation::mkdir, ec), false;
    }
  }
  n.have_dst = true;
  if (s_.opt.xattrs) {
    fs_.copy_xattrs(n.src, n.dst, ec);
    if (ec) j_.fail(side::destination, operation::xattr, ec);
  }
  return true;
}

/// A directory's metadata, once its content is complete; a staged one then takes its name,
/// even when its metadata failed (reported): what it holds is complete, and kept.
template <class S>
inline bool writing_applier<S>::finish_dir(node& n, const dir_plan& p) {
  if (!reach(n) || !s_.before_write()) return false;
  const bool meta = set_dir_meta(n, p);
  if (!n.staged.empty()) {  // into place (the parent's handle is open: see make_dir)
    std::error_code ec;
    fs_.rename(n.parent->dst, n.staged, n.name, ec);
    if (ec) return j_.fail(side::destination, operation::rename, ec), false;  // left under its temporary name: the next run removes it
    n.staged.clear();
  }
  return meta;
}

/// Another name for a file already in the destination (hard_links), installed at `name` in `d`
/// (what is there, `old`, replaced).  The directory gets back the mtime it had, the one it was
/// finished with (the source directory's is not read again: under links::dereference the
/// source path may go through symlinks, which the walk followed and a descent from the root
/// would not).
template <class S>
inline bool writing_applier<S>::link_into(handle& fdir, const std::string& fname, handle& d,
                                          const std::string& name, file_type old) {
  std::error_code ec;
  const stat_info before = fs_.stat(d, ".", false, ec);
  if (ec) return j_.fail(side::destination, operation::stat, ec), false;
  if (!s_.before_write()) return false;
  // a directory finished without write permission (a read-only source directory): as a user
  // other than root it is opened up for the link and gets its mode back after (root writes
  // there anyway); rsync links into it too
  const bool opened = !s_.who.privileged && (before.mode & 0200) == 0;
  if (opened) {
    fs_.set_mode(d, ".", (before.mode & 07777) | 0700, ec);
    if (ec) return j_.fail(side::destination, operation::chmod, ec), false;
  }
  const std::string made = s_.temp_namer.next();
  fs_.link(fdir, fname, d, made, ec);
  const bool made_link = !ec;
  if (ec) j_.fail(side::destination, operation::link, ec);
  // installed, or discarded when what is at the name cannot go (a non-empty directory): either
  // way the directory changed, and gets its mtime back (rsync's too)
  const bool linked = made_link && install(d, made, name, old);
  if (!s_.before_write()) return linked;
  std::error_code ec2;
  if (opened) fs_.set_mode(d, ".", before.mode & 07777, ec2);
  if (ec2) j_.fail(side::destination, operation::chmod, ec2);
  if (!made_link) return false;
  fs_.set_mtime(d, ".", before.mtime_ns, ec);
  if (ec) j_.fail(side::destination, operation::utime, ec);
  return linked;
}

/// A leftover of an interrupted run (a temporary name) in `n`, removed whatever the deletion
/// policy says (a staged directory with everything in it), unless someone else owns it
/// (leftover_ours: not ours to purge; then `failed`).  `t` becomes its type.
template <class S>
inline removal writing_applier<S>::clean(node& n, const std::string& name, file_type& t) {
  if (!pruner_.leftover_ours(n.dst, name, t)) return removal::failed;
  prepare_write(n);
  if (t == file_type::directory || t == file_type::unknown) {  // a staged directory
    const removal r = pruner_.remove_entry(n.dst, name, t, false, true);
    if (r == removal::done) t = file_type::directory;
    return r;
  }
  return remove_file(n.dst, name, false) ? removal::done : removal::failed;
}

/// The destination directory of `n` opened (if deferred) and made writable for a change in it.
template <class S>
inline bool writing_applier<S>::open_for_write(node& n) {
  if (n.dst_deferred && !reach(n)) return false;
  prepare_write(n);
  return true;
}

/// A directory whose deferred deletions are done (`changed`) or that was opened up for them
/// (`opened`) gets back the mtime and mode it had (`before`).
template <class S>
inline void writing_applier<S>::restore_dir(handle& h, const stat_info& before, bool changed, bool opened) {
  if (!s_.before_write()) return;
  std::error_code ec;
  if (changed) fs_.set_mtime(h, ".", before.mtime_ns, ec);
  if (ec) j_.fail(side::destination, operation::utime, ec);
  ec.clear();
  if (opened) fs_.set_mode(h, ".", before.mode & 07777, ec);
  if (ec) j_.fail(side::destination, operation::chmod, ec);
}

/// Removes a non-directory; `keep_copy`: moved to the backup directory instead, when there is one.
template <class S>
inline bool writing_applier<S>::remove_file(handle& d, const std::string& name, bool keep_copy) {
  this->gone = false;
  if (!s_.before_write()) return false;
  if (keep_copy && s_.opt.backup_dir.empty() == false && !is_temp_name(name)) return backup(d, name);
  std::error_code ec;
  fs_.remove(d, name, ec);
  if (ec && !is_enoent(ec)) return j_.fail(side::destination, operation::unlink, ec), false;
  this->gone = is_enoent(ec);
  return true;
}

template <class S>
inline bool writing_applier<S>::remove_dir(handle& parent, const std::string& name) {
  if (!s_.before_write()) return false;
  std::error_code ec;
  fs_.remove_dir(parent, name, ec);
  if (ec && !is_enoent(ec)) return j_.fail(side::destination, operation::rmdir, ec), false;
  return true;
}

/// A directory about to be emptied is made writable first.  Returns its mode before, or -1
/// when it was not changed.
template <class S>
inline std::uint32_t writing_applier<S>::open_up(handle& d) {
  std::error_code ec;
  const stat_info self = fs_.stat(d, ".", false, ec);
  if (ec || (self.mode & 0200) != 0 || !s_.before_write()) return static_cast<std::uint32_t>(-1);
  fs_.set_mode(d, ".", self.mode | 0700, ec);
  return ec ? static_cast<std::uint32_t>(-1) : self.mode & 07777;
}

/// A destination directory without write permission is made writable before its first change;
/// finish_dir restores the source's mode.
template <class S>
inline void writing_applier<S>::prepare_write(node& n) {
  if (n.cold || !n.have_dst || (n.dst_st.mode & 0200) != 0 || !s_.before_write()) return;
  std::lock_guard<std::mutex> lock(n.mu);
  if (n.made_writable) return;
  std::error_code ec;
  n.mode_before_writable = n.dst_st.mode;
  fs_.set_mode(n.dst, ".", setgid_now(n, n.dst_st.mode | 0700), ec);
  n.made_writable = !ec;
}

/// rsync sets an existing directory's permissions before it fills it, so what it creates there
/// without -g gets the group the set-group-ID bit it then has gives; treesync sets them once
/// the content is complete (finish_dir).  The one bit that decides the group of what is made in
/// the directory, set-group-ID, is set (or cleared) first, before its entries are processed.
/// A directory this run made (0700) has the bit when its parent had it (the parent's own
/// setgid_first, or for the root, a stat).
template <class S>
inline void writing_applier<S>::setgid_first(node& n) {
  if (s_.who.sets_every_group() || !n.dst_exists()) return;
  std::error_code ec;
  std::uint32_t now = n.dst_st.mode & 07777;  // what the directory has
  if (n.cold && n.parent) {
    now = 0700 | (n.parent->src_st.mode & 02000);
  } else if (n.cold) {
    if (!n.have_dst) return;
    now = fs_.stat(n.dst, ".", false, ec).mode & 07777;
    if (ec) return j_.fail(side::destination, operation::stat, ec);
  }
  if (((now ^ n.src_st.mode) & 02000) == 0) return;
  if (!open_dst(fs_, n, ec)) return j_.fail(side::destination, operation::opendir, ec ? ec : std::make_error_code(std::errc::bad_file_descriptor));
  if (!s_.before_write()) return;
  fs_.set_mode(n.dst, ".", setgid_now(n, now), ec);
  if (ec) j_.fail(side::destination, operation::chmod, ec);
}

// finish_dir's metadata, up to the first failure (reported).
template <class S>
inline bool writing_applier<S>::set_dir_meta(node& n, const dir_plan& p) {
  const stat_info& st = n.src_st;
  handle& d = n.dst;
  std::error_code ec;
  if (!n.created && n.dst_type == file_type::directory && n.dst_st.ino != 0 && (p.owner || p.group || p.mode || p.mtime)) {
    // an existing directory, opened by name after the walk's stat: its metadata only on the
    // directory the walk saw (one exchanged for it in between is never chowned or chmodded)
    const stat_info now = fs_.stat(d, ".", false, ec);
    if (!ec && now.ino != n.dst_st.ino) ec = std::make_error_code(std::errc::file_exists);
    if (ec) return j_.fail(side::destination, operation::chown, ec), false;
  }
  if (p.owner || p.group) {  // before the chmod, which a chown may undo
    fs_.set_owner(d, ".", p.owner ? std::int64_t(st.uid) : -1, p.group ? std::int64_t(st.gid) : -1, ec);
    if (ec) return j_.fail(side::destination, operation::chown, ec), false;
  }
  if (p.mode) fs_.set_mode(d, ".", st.mode, ec);
  if (ec) return j_.fail(side::destination, operation::chmod, ec), false;
  if (p.mtime) fs_.set_mtime(d, ".", st.mtime_ns, ec);
  if (ec) return j_.fail(side::destination, operation::utime, ec), false;
  if (p.fsync) fs_.sync_dir(d, ec);
  if (ec) return j_.fail(side::destination, operation::fsync, ec), false;
  return true;
}

// Puts the entry made as `made` in `d` at `name`.  What the destination held there (`old`)
// goes first: a directory with its content, anything else into the backup directory when
// there is one.  Then `made` is renamed over the name, unless it was made there; made in
// another directory (`in`: temp_dir), it is moved from there.  On failure the made entry is
// discarded, the failure reported, and false returned.
template <class S>
inline bool writing_applier<S>::install(handle& d, const std::string& made, const std::string& name,
                                        file_type old, const made_in* in) {
  handle* const from = in ? in->dir : nullptr;
  handle& at = from ? *from : d;
  if (old == file_type::directory ? !pruner_.replace_dir(d, name) : old != file_type::none && !backup(d, name)) {
    discard(at, made);
    return false;
  }
  if (made == name && !from) return true;
  std::error_code ec;
  if (from) {
    fs_.move(*from, made, d, name, ec);
    if (ec == std::errc::cross_device_link) return install_across(*in, made, d, name);
  } else {
    fs_.rename(d, made, name, ec);
  }
  if (ec) {  // reported (errors::stop: stopped) first, then cleaned up: see journal::fail
    j_.fail(side::destination, operation::rename, ec);
    discard(at, made);
    return false;
  }
  return true;
}

// temp_dir on another filesystem than `d`: the finished temporary is copied (with the mode,
// owner, group, mtime and xattrs it was given) into a temporary beside `name`, which is then
// renamed over it, and the one in temp_dir removed.  The final name never holds a partial file.
template <class S>
inline bool writing_applier<S>::install_across(const made_in& in, const std::string& made, handle& d,
                                               const std::string& name) {
  handle& from = *in.dir;
  std::error_code ec;
  const stat_info st = fs_.stat(from, made, false, ec);
  const std::string beside = s_.temp_namer.next();
  if (!ec) {
    copy_options opts;
    opts.sync = s_.opt.durable;
    opts.xattrs = s_.opt.xattrs;
    opts.cancel = s_.opt.cancel;
    opts.owner = in.owner;
    opts.group = in.group;
    (void)fs_.copy_file(from, made, d, beside, st, opts, ec);
  }
  if (!ec) fs_.rename(d, beside, name, ec);
  if (ec) {
    if (!(ec == std::errc::operation_canceled && s_.stop.halted())) j_.fail(side::destination, operation::copy, ec);
    discard(d, beside);
    discard(from, made);
    return false;
  }
  discard(from, made);
  return true;
}

// The destination directory of `n`, opened if it was deferred; false (reported) when it cannot be.
template <class S>
inline bool writing_applier<S>::reach(node& n) {
  std::error_code ec;
  if (open_dst(fs_, n, ec)) return true;
  j_.fail(side::destination, operation::opendir, ec ? ec : std::make_error_code(std::errc::bad_file_descriptor));
  return false;
}

// Moves the destination entry at rel (about to be replaced or deleted) into the backup
// directory.  True when there is no backup directory or the move worked.
template <class S>
inline bool writing_applier<S>::backup(handle& d, const std::string& name) {
  if (s_.opt.backup_dir.empty()) return true;
  std::error_code ec;
  handle parent;
  if (s_.backups.parent_of(s_.root && s_.root->have_dst ? &s_.root->dst : nullptr, j_.rel, parent, ec))
    fs_.move(d, name, parent, name, ec);
  if (ec) return j_.fail(side::destination, operation::backup, ec), false;
  return true;
}

template <class S>
inline void writing_applier<S>::touch(handle& d, const std::string& name, const plan& p) {
  std::error_code ec;
  if constexpr (has_op<op_touch_seen, typename S::fs_type>::value) {
    // on the entry the walk stat'ed (p.dst: its type and inode), not on one exchanged for it
    fs_.touch_seen(d, name, p.dst, p.set_mtime, p.src.mtime_ns, p.set_mode, p.src.mode, ec);
  } else {
    if (p.set_mtime) fs_.set_mtime(d, name, p.src.mtime_ns, ec);
    if (!ec && p.set_mode) fs_.set_mode(d, name, p.src.mode, ec);  // the file's own: the directory is not written
  }
  if (ec) return j_.fail(side::destination, p.op, ec);
  j_.touched(p);
}

// The owner and group a new node gets: the source's where the run keeps them (owner, group).
// A node written afresh for its metadata only (plan::current), where rsync chowns or chmods the
// existing one in place, keeps the destination's for the ones the run does not set, where the
// run can give them (as root, or on a filesystem without users): a file that had other links,
// or whose group alone changes, is not handed to the user the run acts as.
template <class S>
inline void writing_applier<S>::ids(const plan& p, stat_info& st, bool& owner, bool& group) const {
  owner = s_.opt.owner;  // never as a user other than root (run_state::privileged)
  group = s_.who.group_kept(st.gid);  // as a user, only one of the user's groups
  if (!p.current || p.old != p.type || (owner && group)) return;
  if constexpr (has_op<op_user_id, typename S::fs_type>::value) {
    if (fs_.user_id() != 0) return;
  }
  if (!owner) st.uid = p.dst.uid;
  if (!group) st.gid = p.dst.gid;
  owner = group = true;
}

// A partial or unfinished new file never reaches a final path: made under a temporary name
// (or a new name in a staged directory) it is discarded.  Returns whether `d` changed.
template <class S>
inline bool writing_applier<S>::write_file(node& n, const std::string& name, const plan& p) {
  handle& dir = n.dst;
  handle* const from = p.temp && s_.have_temp_root ? &s_.temp_root : nullptr;  // temp_dir
  handle& d = from ? *from : dir;  // where the copy is made
  const std::string made = p.temp ? s_.temp_namer.next() : name;
  const bool discardable = p.temp || p.unseen;
  copy_options opts;
  opts.follow = p.follow;
  opts.replace = p.in_place;
  opts.sync = s_.opt.durable;
  opts.xattrs = s_.opt.xattrs;
  opts.cancel = s_.opt.cancel;
  stat_info want = p.src;  // with the destination's owner and group, for a copy made for its metadata
  ids(p, want, opts.owner, opts.group);
  std::error_code ec;
  const copy_result copied = fs_.copy_file(n.src, name, d, made, want, opts, ec);
  if (ec) {  // reported first, then cleaned up: see journal::fail
    if (ec == std::errc::operation_canceled && s_.stop.halted()) {
      // cancel_on: the run reports it; the partial copy goes
    } else if (ec == errc::changed_during_copy) {
      j_.vanish(operation::copy, ec);
    } else if (copied.destination_failed) {
      j_.fail(side::destination, operation::copy, ec);
    } else {
      j_.source_failure(n.src, name, operation::copy, ec);
    }
    if (discardable) discard(d, made);
    return !discardable;
  }
  if (s_.time.smudge_copy(p.src.mtime_ns)) {  // no ctime will tell the next run this copy was racy
    fs_.set_mtime(d, made, smudged_mtime(p.src.mtime_ns), ec);
    if (ec) {
      j_.fail(side::destination, operation::utime, ec);
      if (discardable) discard(d, made);
      return !discardable;
    }
  }
  const made_in in{from, opts.owner, opts.group};
  if (!install(dir, made, name, p.in_place ? file_type::none : p.old, from ? &in : nullptr)) return true;
  j_.wrote(p, copied);
  return !p.in_place;
}

template <class S>
inline bool writing_applier<S>::write_link(handle& d, const std::string& name, const plan& p) {
  const std::string made = p.unseen ? name : s_.temp_namer.next();
  std::error_code ec;
  fs_.make_symlink(d, made, p.target, ec);
  if (ec) return j_.fail(side::destination, operation::symlink, ec), false;
  // owner and group of the link itself (rsync -o/-g; set_owner never follows a link), then its
  // own mtime (rsync -t): never followed
  // (only where the filesystem sets a link's own metadata: time_model::link_meta)
  stat_info want = p.src;
  bool owner = false, group = false;
  ids(p, want, owner, group);
  if constexpr (has_op<op_settle_link, typename S::fs_type>::value) {
    // on the link just made, through a descriptor: a name exchanged for another file in
    // between is never chowned nor restamped (issue 33, 5), and left where it is
    if (s_.time.link_meta) {
      fs_.settle_link(d, made, p.target, want, owner, group, true, ec);
      if (ec) {
        j_.fail(side::destination, owner || group ? operation::chown : operation::utime, ec);
        if (ec != std::errc::file_exists) discard(d, made);  // not what was made: left alone
        return false;
      }
    }
    return install_link(d, made, name, p);
  }
  if ((owner || group) && s_.time.link_meta) {
    fs_.set_owner(d, made, owner ? std::int64_t(want.uid) : -1, group ? std::int64_t(want.gid) : -1, ec);
    if (ec) {
      j_.fail(side::destination, operation::chown, ec);
      discard(d, made);
      return false;
    }
  }
  if (s_.time.link_meta) fs_.set_mtime(d, made, p.src.mtime_ns, ec);
  if (ec) {
    j_.fail(side::destination, operation::utime, ec);
    discard(d, made);
    return false;
  }
  return install_link(d, made, name, p);
}

template <class S>
inline bool writing_applier<S>::install_link(handle& d, const std::string& made, const std::string& name,
                                             const plan& p) {
  if (!install(d, made, name, p.old)) return true;
  j_.wrote(p, {});
  return true;
}

// A FIFO, socket or device node, made (never opened) with its owner, mode and mtime.
template <class S>
inline bool writing_applier<S>::write_special(handle& d, const std::string& name, const plan& p) {
  stat_info st = p.src;
  bool owner = false, group = false;
  ids(p, st, owner, group);
  const std::string made = s_.temp_namer.next();
  std::error_code ec;
  fs_.make_special(d, made, st, ec);
  if (ec) return j_.fail(side::destination, operation::mknod, ec), false;
  if constexpr (has_op<op_settle_special, typename S::fs_type>::value) {
    // on the node just made, through a descriptor: a name swapped in is never chowned or
    // given set-ID bits (issue 23, B)
    fs_.settle_special(d, made, st, owner, group, ec);
  } else {
    if (owner || group) fs_.set_owner(d, made, owner ? std::int64_t(st.uid) : -1, group ? std::int64_t(st.gid) : -1, ec);
    if (!ec) fs_.set_mode(d, made, st.mode, ec);
    if (!ec) fs_.set_mtime(d, made, st.mtime_ns, ec);
  }
  if (ec) {
    j_.fail(side::destination, operation::mknod, ec);
    if (ec != std::errc::file_exists) discard(d, made);  // not what was made: left alone
    return true;
  }
  if (!install(d, made, name, p.old)) return true;
  j_.wrote(p, {});
  return true;
}

/// The run's applier, chosen once from its options: the recording one in a dry run.
template <class S>
std::unique_ptr<applier<S>> make_applier(S& s, journal<S>& j, pruner<S>& p) {
  if (s.opt.dry_run) return std::make_unique<recording_applier<S>>(j, p);
  return std::make_unique<writing_applier<S>>(s, j, p);
}

}  // namespace detail

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_APPLY_HPP
