// treesync/detail/engine.hpp - the engine: the worker, the scheduler and one run
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_DETAIL_ENGINE_HPP
#define TREESYNC_DETAIL_ENGINE_HPP

#include "apply.hpp"
#include "walk.hpp"

// [treesync.detail.engine] ----------------------------------------------------------------------
//
// The diff is a merge: list a source directory and its destination directory, sort both by name,
// walk them side by side (source only -> create, destination only -> delete, both -> compare).
// Each directory pair is independent.  "cold" marks a destination directory known to be empty
// (just created, or missing under dry_run): it is never listed or stat'ed.

namespace treesync {
inline namespace v0 {

namespace detail {

// ---- the worker --------------------------------------------------------------------------------

/// One thread's share of the run: it walks the directory pairs the scheduler hands it, and hands
/// each decision to its applier (in a dry run the recording one: see applier, make_applier); it
/// never asks which one it has.
template <class S>
class worker {
 public:
  using handle = typename S::handle;
  using node = typename S::node;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  explicit worker(S& s)
      : s_(s), journal_(s), applier_(make_applier(s, journal_, pruner_)), pruner_(s, journal_, *applier_, walker_),
        walker_(s, journal_) {}
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  journal<S>& record() { return journal_; }
  walker<S>& walk() { return walker_; }
  pruner<S>& prune() { return pruner_; }

  /// Opens (and, when needed, makes) the directory of a node its parent listed; then lists and merges.
  bool start_dir(node& n);

  /// The root's setgid_first (the root is not started by start_dir).
  void setgid_first(node& n) { applier_->setgid_first(n); }

  /// A missing destination root, made (applier::make_root): whether it exists now.
  bool make_root(const std::filesystem::path& dst, std::error_code& ec) { return applier_->make_root(dst, ec); }

  /// Entries [begin, end) of a node's merged listing; directories found become `children`.
  void run_batch(node& n, std::size_t begin, std::size_t end, std::vector<node*>& children);

  /// The deletions of a directory whose batches are all done, deferred to the end of the run.
  void run_removals(node& n);

  /// The deletions run_removals deferred, carried out once every worker is done, when they may be.
  void deferred_pass();

  /// Directory metadata, after the content is complete; then, with a state file, the directory's record.
  void finish_dir(node& n);

  /// A staged directory whose run stopped before it was complete never reaches its final name:
  /// it goes rather than stay behind as a temporary.
  void drop_staged(node& n) {
    n.dst = handle{};
    pruner_.remove_entry(n.parent->dst, n.staged, file_type::directory, false, true);
  }

  /// hard_links: each further name of a multiply-linked source file becomes a link to the first name's copy.
  void link_pass();

 private:
  // state_file: what the run leaves at one name of a directory (its record, into `out`).
  void record_entry(node& n, const std::string& name, const dir_entry* de, verdict v, const plan& p, file_type t,
                    bool removed, bool child, std::vector<entry_record>& out);

  // state_file: a completed directory's record.
  void record_dir(node& n, bool changed);

  // state_file: the record of a directory whose deletions waited, with the entries that stay.
  void put_deferred_record(typename S::deferred_dir& d, const std::vector<bool>& removed, const stat_info* now);

  bool holds_state_file(const std::string& rel) const;

  bool carry_out(node& n, const std::string& name, const plan& p) { return applier_->apply(n, name, p); }

  // A chunk of a directory's records, kept as text; under n.mu.
  static void put_made(node& n, std::size_t key, std::vector<entry_record>& made);

  // A deferred directory, entered from the root's handle: false unless it is the one the walk saw.
  bool enter_deferred(const typename S::deferred_dir& d, handle& h, stat_info& before, std::error_code& ec);

  // Under a cap on deletions: what the deferred deletions would delete, before the first of them.
  std::size_t count_deferred();

  // Makes a directory's deletions wait for the end of the run; false when its identity cannot be taken.
  bool defer(node& n, const std::vector<std::pair<std::size_t, file_type>>& removals, std::error_code& ec);

  // keep_on_source_error: the deletions a source failure stopped, reported once for the run.
  void note_deletions_skipped();

  bool remove(node& n, const std::string& name, file_type t) {
    applier_->prepare_write(n);
    return pruner_.remove_entry(n.dst, name, t, true) == removal::done;
  }

  bool clean(node& n, const std::string& name, file_type t);

  // A directory the destination lacks, made by the applier and reported; then known empty.
  bool create_dir(node& n, const plan& p);

  // One link request: `rel` becomes a hard link to `first`, where the walker says it needs one.
  void link_one(const std::string& rel, const std::string& first, const stat_info& src);

  S& s_;
  journal<S> journal_;
  std::unique_ptr<applier<S>> applier_;  // the writing one, or in a dry run the recording one
  pruner<S> pruner_;
  walker<S> walker_;
};

/// Opens (and, when missing or of another type in the destination, makes) the directory of a
/// node its parent saw in its listing; then lists and merges.
template <class S>
inline bool worker<S>::start_dir(node& n) {
  journal_.set_rel_of(n);
  if (!walker_.open(n)) return false;
  if (n.scan) return n.cold = true, walker_.list_and_merge(n, false);  // existing: nothing made, nothing handed out
  plan made;  // the walker's verdict on the directory itself; the applier carries it out
  if (walker_.new_dir(n, made) == verdict::apply && !create_dir(n, made)) return false;
  if (s_.opt.frontier_depth != 0 && n.depth > s_.opt.frontier_depth) {
    n.created = false;
    s_.hand_out(std::string_view(journal_.rel));
    return false;  // not entered, not finished: the subtree's own sync does both
  }
  if (!walker_.list_and_merge(n, false)) return false;
  applier_->setgid_first(n);  // before any entry is made in it
  return true;
}

/// Entries [begin, end) of a node's merged listing; directories found become `children`.
template <class S>
inline void worker<S>::run_batch(node& n, std::size_t begin, std::size_t end, std::vector<node*>& children) {
  journal_.set_rel_of(n);
  bool modified = false;
  std::vector<entry_record> made;  // state_file: what this batch leaves in the directory
  std::size_t key = 2 * begin;  // of the chunk of records in `made` (see dir_node::made)
  for (std::size_t k = begin; k < end && !s_.stop.halted(); ++k) {
    const auto [i, j] = n.merged[k];
    const dir_entry& e = i == npos ? n.dl[j] : n.sl[i];
    const dir_entry* de = j == npos ? nullptr : &n.dl[j];
    rel_scope scope(journal_.rel, e.name);
    plan p;
    file_type t = file_type::none;
    const std::size_t before = children.size();
    verdict v = i == npos ? walker_.extraneous(n, e, t) : walker_.source_entry(n, e, de, children, p);
    if (v == verdict::remove && i != npos) v = walker_.consider_removal(n, n.dl[j], t);
    if (v != verdict::none && n.dst_deferred && !walker_.need_dst(n)) continue;
    bool done = false;
    if (v == verdict::remove && s_.deletions.deferred()) {
      // after the directory's other entries (a source failure among them stops it), and at the
      // end of the run (deferred_pass): the directory's last batch hands it on (run_removals)
      std::lock_guard<std::mutex> lock(n.mu);
      n.removals.emplace_back(k, t);
      if (!made.empty()) put_made(n, key, made);
      key = 2 * (k + 1);
      continue;
    }
    if (v == verdict::apply) {
      modified |= carry_out(n, e.name, p);
      walker_.check_first_copy(n, e.name, p);  // hard_links: a first name not made gives way
    }
    if (v == verdict::remove) modified |= done = remove(n, n.dl[j].name, t);
    if (v == verdict::clean) modified |= done = clean(n, e.name, t);
    // a directory --existing walks only for its source errors (scan) is not made: no record of it
    if (s_.recording)
      record_entry(n, e.name, de, v, p, t, done, children.size() > before && !children.back()->scan, made);
  }
  if (modified) n.modified.store(true);
  if (!made.empty()) {
    std::lock_guard<std::mutex> lock(n.mu);
    put_made(n, key, made);
  }
}

/// keep_on_source_error or a cap on deletions (defer_deletions): the deletions of a directory
/// whose batches are all done, deferred to the end of the run.  When its identity cannot be
/// taken: carried out now unless a source failure happened in the run (then none, and the skip
/// is reported once); under a cap, never (they could not be counted first): reported.
template <class S>
inline void worker<S>::run_removals(node& n) {
  std::vector<std::pair<std::size_t, file_type>> removals;
  {
    std::lock_guard<std::mutex> lock(n.mu);
    removals.swap(n.removals);
  }
  if (removals.empty()) return;
  std::sort(removals.begin(), removals.end());
  journal_.set_rel_of(n);
  std::error_code ec;
  if (!s_.stop.halted() && s_.deletions.allowed() && defer(n, removals, ec)) return;
  if (ec && s_.deletions.capped()) journal_.fail(side::destination, operation::stat, ec);
  bool modified = false;
  for (const auto& [k, t] : removals) {
    const std::string& name = n.dl[n.merged[k].second].name;
    rel_scope scope(journal_.rel, name);
    bool done = false;
    if (!s_.stop.halted()) {
      if (!s_.deletions.allowed()) note_deletions_skipped();
      else if (!s_.deletions.capped()) modified |= done = remove(n, name, t);
    }
    if (s_.recording && !done) {  // the entry stays: its record, in its place
      std::vector<entry_record> made;
      record_entry(n, name, nullptr, verdict::remove, plan{}, t, false, false, made);
      std::lock_guard<std::mutex> lock(n.mu);
      if (!made.empty()) put_made(n, 2 * k + 1, made);
    }
  }
  if (modified) n.modified.store(true);
}

/// The deletions run_removals deferred (run_state::deferred), once every worker is done:
/// none if a source failure happened anywhere in the run (keep_on_source_error; reported once),
/// nor if, under a cap on deletions, they are more than the cap leaves (count_deferred: then the
/// run ends with max_delete_exceeded); else all of them, directory by directory in name order.
/// Each directory is entered from the destination root's handle one component at a time, never
/// following a link, and must still be the one the walk saw (device and inode); it was
/// finished before (mode, mtime): a read-only one is opened up for the deletions and both are
/// put back after.  Its record in the state file is put with the entries that stayed.
template <class S>
inline void worker<S>::deferred_pass() {
  auto& dirs = s_.deletions.dirs();
  if (dirs.empty()) return;
  bool allowed = s_.deletions.allowed();
  if (!allowed) {
    journal_.rel.clear();
    note_deletions_skipped();
  }
  std::sort(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) { return a.rel < b.rel; });
  if (allowed && s_.deletions.capped()) allowed = s_.deletions.reserve(count_deferred());
  for (auto& d : dirs) {
    if (s_.stop.halted()) break;
    journal_.rel = d.rel;
    std::vector<bool> removed(d.entries.size(), false);
    stat_info after;  // the directory once its deletions are done (for its record), when changed
    bool changed = false;
    if (allowed && s_.root && s_.root->have_dst) {
      std::error_code ec;
      handle h;
      stat_info before;
      if (!enter_deferred(d, h, before, ec)) {
        journal_.fail(side::destination, operation::opendir, ec);
        continue;  // no record: the next run reads the directory again
      }
      const bool opened = (before.mode & 0200) == 0 && applier_->open_up(h) != static_cast<std::uint32_t>(-1);
      for (std::size_t i = 0; i < d.entries.size() && !s_.stop.halted(); ++i) {
        rel_scope scope(journal_.rel, d.entries[i].first);
        removed[i] = pruner_.remove_entry(h, d.entries[i].first, d.entries[i].second, true) == removal::done;
        changed |= removed[i];
      }
      if (changed || opened) applier_->restore_dir(h, before, changed, opened);
      if (s_.recording && d.stashed && (changed || opened)) {
        ec.clear();
        after = s_.fs.stat(h, ".", false, ec);
        if (ec) continue;
        changed = true;
      }
    }
    if (s_.recording && d.stashed) put_deferred_record(d, removed, changed ? &after : nullptr);
    std::vector<std::pair<std::string, file_type>>().swap(d.entries);
  }
  pruner_.forget_listings();
}

/// Directory metadata, after the content is complete; then, with a state file, the directory's
/// record.  In a run stopped before the directory was done, all but its mtime (walker::finish).
template <class S>
inline void worker<S>::finish_dir(node& n) {
  if (n.scan) return;  // not in the destination
  const dir_plan p = walker_.finish(n, s_.stop.halted());
  const bool writes = p.owner || p.group || p.mode || p.mtime || p.fsync || !n.staged.empty();
  if (writes && n.dst_exists() && !applier_->finish_dir(n, p)) return;
  if (s_.recording) record_dir(n, writes || n.modified.load() || n.made_writable);
  if (p.meta) {
    stat_info was = n.dst_st;  // a read-only directory opened up for a write: its mode before
    if (n.made_writable) was.mode = n.mode_before_writable;
    journal_.dir_meta(n.src_st, was, (p.owner ? changed::owner : changed::none) | (p.group ? changed::group : changed::none));
  }
}

/// hard_links: each further name of a multiply-linked source file becomes a hard link to the
/// first name's copy (unless it already is one), and its directory gets its mtime back.
template <class S>
inline void worker<S>::link_pass() {
  const auto& requests = s_.links.requests();  // a first name given up (walker::check_first_copy): its successor
  if (!s_.root->have_dst) return journal_.fail(side::destination, operation::open, std::make_error_code(std::errc::no_such_file_or_directory));
  for (const auto& r : requests) {
    if (s_.stop.halted()) return;
    journal_.rel = r.rel;
    link_one(r.rel, r.first, r.src);
  }
}

// state_file: what the run leaves at one name of a directory.  An entry written is stat'ed
// afresh; one left alone keeps what was read of it (or what the state file said of it, when
// the listing came from there); one removed has no record.
template <class S>
inline void worker<S>::record_entry(node& n, const std::string& name, const dir_entry* de, verdict v,
                                    const plan& p, file_type t, bool removed, bool child,
                                    std::vector<entry_record>& out) {
  if (s_.is_state_file(journal_.rel)) return;  // it changes with every save: never recorded
  entry_record r;
  r.name = name;
  if (child) {  // a directory entered: its own record has its stat
    r.type = file_type::directory;
  } else if (v == verdict::apply) {
    std::error_code ec;
    r.st = s_.fs.stat(n.dst, name, false, ec);
    if (is_enoent(ec)) return;
    if (ec) return n.record_failed.store(true);
    r.type = r.st.type;
    r.has_stat = true;
    r.has_target = r.type == file_type::symlink && p.type == file_type::symlink;
    if (r.has_target) r.target = p.target;
  } else if (v == verdict::remove || v == verdict::clean) {
    if (removed) return;
    r.type = t;
  } else if (!de) {
    return;  // nothing at that name
  } else if (const entry_record* old = n.vouched ? &n.vouched->entries[static_cast<std::size_t>(de - n.dl.data())] : nullptr) {
    r = *old;  // left alone: what the state file said is still true
    r.sub = no_record;
  } else {
    r.type = p.old != file_type::none ? p.old : t != file_type::none ? t : de->type;
    r.has_stat = p.dst.type != file_type::none && p.dst.type == r.type;
    if (r.has_stat) r.st = p.dst;
    r.has_target = r.type == file_type::symlink && p.type == file_type::symlink && v == verdict::none &&
                   p.old == file_type::symlink;
    if (r.has_target) r.target = p.target;
  }
  out.push_back(std::move(r));
}

// state_file: a completed directory's record.  Its own stat is taken afresh when the run
// changed it (or anything in it), else it is what was read (or recorded) before.
template <class S>
inline void worker<S>::record_dir(node& n, bool changed) {
  dir_record d;
  if (changed || n.cold) {
    std::error_code ec;
    d.self = s_.fs.stat(n.dst, ".", false, ec);
    if (ec) return;
  } else {
    d.self = n.dst_st;
  }
  if (n.record_failed.load()) return;
  d.settled = s_.time.settled(std::max(d.self.mtime_ns, d.self.ctime_ns));
  if (holds_state_file(journal_.rel)) {  // every save changes its ctime: not recorded, never vouched by stamps
    d.self.ctime_ns = 0;
    d.settled = false;
  }
  std::vector<std::pair<std::size_t, std::string>> made;
  std::size_t count = 0;
  {
    std::lock_guard<std::mutex> lock(n.mu);
    made = std::move(n.made);
    count = n.made_count;
  }
  if (n.deferred != static_cast<std::size_t>(-1)) {  // its deletions wait: put with their outcome (deferred_pass)
    const std::size_t slot = s_.state.slot(n);
    const bool holds = holds_state_file(journal_.rel);
    s_.deletions.update(n.deferred, [&](typename S::deferred_dir& dd) {
      dd.stashed = true;
      dd.holds_state_file = holds;
      dd.slot = slot;
      dd.record = d;
      dd.count = count;
      dd.made = std::move(made);
    });
    return;
  }
  std::sort(made.begin(), made.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string lines;
  for (const auto& m : made) lines += m.second;
  s_.state.put(s_.state.slot(n), d, count, lines);
}

// state_file: the record of a directory whose deletions waited (stashed by record_dir), with the
// entries that stay, and its own stat taken again when the deletions changed it.
template <class S>
inline void worker<S>::put_deferred_record(typename S::deferred_dir& d, const std::vector<bool>& removed,
                                           const stat_info* now) {
  if (now) {
    d.record.self = *now;
    d.record.settled = s_.time.settled(std::max(now->mtime_ns, now->ctime_ns));
    if (d.holds_state_file) {
      d.record.self.ctime_ns = 0;
      d.record.settled = false;
    }
  }
  std::size_t count = d.count;
  for (std::size_t i = 0; i < d.staying.size() && i < removed.size(); ++i) {
    if (removed[i] || d.staying[i].second.empty()) continue;
    d.made.push_back(std::move(d.staying[i]));
    ++count;
  }
  std::sort(d.made.begin(), d.made.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string lines;
  for (const auto& m : d.made) lines += m.second;
  s_.state.put(d.slot, d.record, count, lines);
  std::vector<std::pair<std::size_t, std::string>>().swap(d.made);
  std::vector<std::pair<std::size_t, std::string>>().swap(d.staying);
}

template <class S>
inline bool worker<S>::holds_state_file(const std::string& rel) const {
  if (s_.state_rel.empty()) return false;
  const auto slash = s_.state_rel.rfind('/');
  return slash == std::string::npos ? rel == s_.opt.subtree : rel == s_.state_rel.substr(0, slash);
}

// A chunk of a directory's records, kept as text (a waiting directory holds no records: deep
// chains); under n.mu.
template <class S>
inline void worker<S>::put_made(node& n, std::size_t key, std::vector<entry_record>& made) {
  std::string lines;
  for (const entry_record& r : made) manifest::put_entry(r, lines);
  n.made.emplace_back(key, std::move(lines));
  n.made_count += made.size();
  made.clear();
}

// A deferred directory, entered from the destination root's handle one component at a time
// (never following a link): false (ec says why) unless it is still the one the walk saw.
template <class S>
inline bool worker<S>::enter_deferred(const typename S::deferred_dir& d, handle& h, stat_info& before,
                                      std::error_code& ec) {
  const std::string& sub = s_.opt.subtree;
  std::string below = d.rel.substr(std::min(d.rel.size(), sub.size()));  // below the root node
  if (!below.empty() && below[0] == '/') below.erase(0, 1);
  h = s_.fs.open_dir(s_.root->dst, ".", false, ec);
  if (!ec && descend(s_.fs, h, below, false, ec)) before = s_.fs.stat(h, ".", false, ec);
  if (!ec && (before.dev != d.dev || before.ino != d.ino)) ec = std::make_error_code(std::errc::no_such_file_or_directory);
  return !ec;
}

// Under a cap on deletions: what the deferred deletions would delete, before the first of them.
// An entry that is not a directory is one; a directory is walked as its removal would walk it
// (pruner::count_entry, which keeps the listings for the removal).  A directory that cannot be
// entered counts for nothing here: its deletions then fail, reported, in the pass itself.
template <class S>
inline std::size_t worker<S>::count_deferred() {
  std::size_t total = 0;
  for (auto& d : s_.deletions.dirs()) {
    bool trees = false;
    for (const auto& e : d.entries) {
      if (e.second == file_type::directory) trees = true;
      else ++total;
    }
    if (!trees || s_.stop.halted() || !s_.root || !s_.root->have_dst) continue;
    journal_.rel = d.rel;
    handle h;
    stat_info before;
    std::error_code ec;
    if (!enter_deferred(d, h, before, ec)) continue;
    for (const auto& e : d.entries) {
      if (e.second != file_type::directory) continue;
      rel_scope scope(journal_.rel, e.first);
      total += pruner_.count_entry(h, e.first, e.second, true);
    }
  }
  return total;
}

// A directory's deletions wait for the end of the run (deferred_pass: keep_on_source_error, a
// cap on deletions); until then its entries stay, and are recorded as they are.  False (ec says
// why) when the directory's identity cannot be taken.
template <class S>
inline bool worker<S>::defer(node& n, const std::vector<std::pair<std::size_t, file_type>>& removals,
                             std::error_code& ec) {
  const stat_info id = s_.fs.stat(n.dst, ".", false, ec);
  if (ec) return false;
  typename S::deferred_dir d;
  d.rel = journal_.rel;
  d.dev = id.dev;
  d.ino = id.ino;
  d.entries.reserve(removals.size());
  for (const auto& [k, t] : removals) {
    const std::string& name = n.dl[n.merged[k].second].name;
    d.entries.emplace_back(name, t);
    if (s_.recording) {  // its record as it stands, in its place: put if it stays (deferred_pass)
      rel_scope scope(journal_.rel, name);
      std::vector<entry_record> made;
      record_entry(n, name, nullptr, verdict::remove, plan{}, t, false, false, made);
      std::string line;
      for (const entry_record& r : made) manifest::put_entry(r, line);
      d.staying.emplace_back(2 * k + 1, std::move(line));
    }
  }
  n.deferred = s_.deletions.defer(std::move(d));
  return true;
}

// keep_on_source_error: the deletions a source failure stopped, reported once for the run.
template <class S>
inline void worker<S>::note_deletions_skipped() {
  if (!s_.deletions.first_skip_notice()) return;
  const std::string at = std::move(journal_.rel);
  journal_.rel.clear();
  journal_.notice(side::destination, operation::unlink, errc::deletions_skipped);
  journal_.rel = at;
}

template <class S>
inline bool worker<S>::clean(node& n, const std::string& name, file_type t) {
  const removal r = applier_->clean(n, name, t);
  if (r == removal::done) journal_.cleaned(t);
  return r != removal::failed;
}

// A directory the walker found the destination lacks (walker::new_dir), made by the applier
// (what was at its name goes first) and reported; then known empty: never listed.
template <class S>
inline bool worker<S>::create_dir(node& n, const plan& p) {
  if (!applier_->make_dir(n, p)) return false;
  n.cold = n.created = true;
  journal_.made_dir(p);
  return true;
}

// One link request: `rel` becomes a hard link to `first`, both reached from the destination
// root's handle (never its path).  `src` is the source file of both names.  A first name the run
// left other than the source (-u kept a newer one, --ignore-existing an existing one, its copy
// failed) is linked to only where `rel` does not exist: an existing `rel` is then left alone, as
// rsync does (it syncs such a name on its own; treesync never overwrites it with another copy).
template <class S>
inline void worker<S>::link_one(const std::string& rel, const std::string& first, const stat_info& src) {
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
    return journal_.fail(side::destination, operation::link, ec);
  plan p;  // the walker's verdict; the applier carries it out
  if (walker_.link_request(parent, name, fparent, fname, src, p) != verdict::apply) return;
  if (!applier_->link_into(fparent, fname, parent, name, p.old)) return;
  journal_.count(p.kind());
  journal_.note(p.kind(), file_type::regular, p.src.size, p.old == file_type::regular ? p.dst.size : 0, {},
                p.changes | changed::linked, copy_method::none, false, first);
}

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
    // Below the descriptor window a directory is one batch: its handles close as soon as its
    // entries are done, never held open by a batch still waiting in the work list (a deep chain's
    // waiting batches would otherwise hold a pair of descriptors per level: EMFILE at 15,000
    // levels under -F, whose rule-file reads slowed one worker down).
    if (s_.jobs > 1 && n.depth <= open_levels)
      size = std::min<std::size_t>(64, std::max<std::size_t>(1, total / (2 * s_.jobs)));
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
    if (s_.deletions.any() && !s_.stop.halted() && !s_.stop.exception()) first.deferred_pass();  // a halted run saves no state
    if (s_.links.pending() && !s_.stop.halted() && !s_.stop.exception()) first.link_pass();
    first.record().merge_into(s_.out);
    for (auto& h : helpers) h->record().merge_into(s_.out);
    if (const std::exception_ptr e = s_.stop.exception()) std::rethrow_exception(e);
    const auto by_path = [](const entry_error& a, const entry_error& b) {
      if (a.path != b.path) return a.path < b.path;
      return std::string_view(to_string(a.operation)) < std::string_view(to_string(b.operation));  // by word, as before
    };
    for (auto* list : {&s_.out.errors, &s_.out.vanished, &s_.out.skipped_entries, &s_.out.notices})
      std::stable_sort(list->begin(), list->end(), by_path);
  }

  /// Drops one pending unit of a node; the last one finishes the directory and moves up.
  void release(worker_type& w, node* n) {
    node* done = nullptr;  // the child finished just before: its handle leads back up
    while (n && n->pending.fetch_sub(1) == 1) {
      node* parent = n->parent;
      if (n->finish || (n->created && n->have_dst)) {
        // Through the directory's own handle: no name lookup, nothing to race with.  A stopped
        // run (cancel_on, errors::stop, an exception) finishes its directories too: what it made
        // is kept (a staged directory takes its name with what it holds, see dir_node::staged)
        // and gets its owner, group and mode (not its mtime: see walker::finish), and a read-only
        // one it opened up gets its mode back.  A directory this run made whose source could not
        // be listed is kept too, empty, with its metadata (as rsync makes it), so the report's
        // "created" is true.
        w.record().set_rel_of(*n);
        if (n->made_writable) n->dst_st.mode |= 0700;  // what it is now: finish_dir restores the source's
        guarded([&] {
          if (!n->closed || !n->have_dst || reopen(w, *n, done)) w.finish_dir(*n);
        });
      } else if (!n->staged.empty()) {  // made, but it could not be entered: never made visible
        w.record().set_rel_of(*n);
        guarded([&] { w.drop_staged(*n); });
      }
      retire(done);
      done = n;
      n = parent;
    }
    if (done && done->parent) retire(done);  // the root is the engine's, until the end of the run
  }

 private:
  // release runs from a batch's destructor (and finishes directories after an exception stopped
  // the run): an exception there (an observer's, bad_alloc) stops the run, never escapes.
  template <class F>
  void guarded(F&& f) {
    try {
      f();
    } catch (...) {
      s_.stop.on(std::current_exception());
    }
  }

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
        s_.stop.on(std::current_exception());
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
      const bool ok = !s_.stop.halted() && w.start_dir(*n);
      n->parent->unstarted.fetch_sub(1);  // done with the parent's handles
      maybe_close(*n->parent, 0);
      if (ok) schedule_batches(*n);
      return;
    }
    std::vector<node*> children;
    w.run_batch(*n, t.begin, t.end, children);
    n->unstarted.fetch_add(children.size());
    if (s_.opt.keep_on_source_error) {  // entered after the directory's last batch
      std::lock_guard<std::mutex> lock(n->mu);
      if (!children.empty()) n->held.emplace_back(t.begin, std::move(children));
      children.clear();
    }
    // in reverse, so the LIFO work list enters them in name order
    for (auto it = children.rbegin(); it != children.rend(); ++it) push({*it, npos, npos});
    if (n->batches.fetch_sub(1) == 1) {  // the last batch: the listings are no longer needed
      if (s_.deletions.deferred()) w.run_removals(*n);  // after the directory's other entries
      if (s_.opt.keep_on_source_error) {
        std::vector<std::pair<std::size_t, std::vector<node*>>> held;
        {
          std::lock_guard<std::mutex> lock(n->mu);
          held.swap(n->held);
        }
        std::sort(held.begin(), held.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
        for (auto& [begin, kids] : held)
          for (auto it = kids.rbegin(); it != kids.rend(); ++it) push({*it, npos, npos});
      }
      std::vector<dir_entry>().swap(n->sl);
      std::vector<dir_entry>().swap(n->dl);
      std::vector<std::pair<std::size_t, std::size_t>>().swap(n->merged);
      s_.state.release(n->rec);  // and neither is its record's listing (its children hold their own)
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
    if (ec) return w.record().fail(side::destination, operation::opendir, ec), false;
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
    s_.cycles.remove(n->src_st);
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
template <class FS>
class engine {
 public:
  using state = run_state<FS>;
  using handle = typename FS::dir_handle;
  using node = dir_node<handle>;

  engine(FS& fs, const policy_view& pol, const run_options& opt, report& rep) : s_(fs, pol, opt, rep) {}

  /// Runs the whole sync.  Returns a refusal (nothing touched), the first error under
  /// errors::stop, or an empty code.
  std::error_code run(const std::filesystem::path& src_in, const std::filesystem::path& dst_in) {
    const std::filesystem::path src = strip_trailing_separators(src_in);
    const std::filesystem::path dst = strip_trailing_separators(dst_in);
    stat_info ss, ds;
    bool dst_exists = false;
    s_.locate_backups(dst);
    if (auto e = preflight(src, dst, ss, ds, dst_exists)) return e;
    s_.roots.src_dev = ss.dev;
    worker<state> first(s_);
    first.record().rel = s_.opt.subtree;
    if (auto e = load_state(first, dst_exists, false)) return e;
    if (auto e = open_roots(src, dst, ss, ds, dst_exists, first)) return e;
    if (auto e = load_state(first, dst_exists, true)) return e;
    check_state(src, dst, first);
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
      return s_.refusal ? s_.refusal : s_.stop.error();
    }
    first.setgid_first(*r);
    sched.schedule_batches(*r);
    sched.release(first, r);
    sched.run(first);
    if (s_.state_error) s_.out.errors.push_back({s_.opt.state.string(), operation::state, s_.state_error, side::destination});
    s_.state.note_gone(s_.out);  // recorded entries the destination no longer had: one notice
    if (!s_.stop.halted()) save_state();
    if (s_.deletions.over_limit()) s_.out.would_delete = s_.deletions.counted();
    if (const std::error_code e = s_.stop.error()) return e;
    if (s_.opt.cancel && s_.opt.cancel->load()) {
      s_.out.cancelled = true;
      return std::make_error_code(std::errc::operation_canceled);
    }
    if (s_.deletions.over_limit()) return errc::max_delete_exceeded;
    return {};
  }

 private:
  // The state file is read before anything is written, and what cannot be a state file refuses
  // the run then: anything but a regular file (or nothing) at its name, a directory that does not
  // exist.  Outside the destination, its directory is opened as named, before the roots (making a
  // missing destination root is a write, and the file goes before the first write).  Inside, once
  // the roots are open (the destination root, if it exists, is not written by opening it): its
  // directory is entered from the root's handle one component at a time without following a link,
  // so whoever can write the destination cannot send the state file's read, removal or
  // replacement elsewhere.  Whose the file is, is checked once the roots are open.
  std::error_code load_state(worker<state>& first, bool dst_exists, bool after_roots) {
    if (s_.opt.state.empty()) return {};
    const bool inside = !s_.state_rel.empty();
    if (inside != after_roots) return {};
    if constexpr (!has_state_ops<FS>::value) {  // a filesystem without the optional state operations
      first.record().state_notice(s_.opt.state.string(), errc::state_not_kept, "the filesystem has no state operations");
      return {};
    } else {
      const std::filesystem::path p = strip_trailing_separators(s_.opt.state);
      std::error_code ec;
      handle dir;
      std::string name;
      if (!inside) {
        if (!p.has_filename() || p.filename() == "." || p.filename() == "..") return errc::state_not_regular;
        name = p.filename().string();
        dir = s_.fs.open_root(p.has_parent_path() ? p.parent_path() : std::filesystem::path("."), ec);
        if (is_enoent(ec) || ec == std::errc::not_a_directory) return errc::state_dir_missing;
        if (ec) return ec;
        return s_.state.load(std::move(dir), name);
      }
      const auto slash = s_.state_rel.rfind('/');
      name = slash == std::string::npos ? s_.state_rel : s_.state_rel.substr(slash + 1);
      if (!s_.root->have_dst) return {};  // a dry run into a missing destination: nothing to read or keep
      dir = s_.fs.open_dir(s_.root->dst, ".", false, ec);
      if (!ec && slash != std::string::npos) descend(s_.fs, dir, s_.state_rel.substr(0, slash), false, ec);
      if (is_enoent(ec) || ec == std::errc::not_a_directory || ec == std::errc::too_many_symbolic_link_levels)
        return errc::state_dir_missing;
      if (ec) return ec;
      if (!dst_exists) return s_.state.attach(std::move(dir), name), std::error_code{};  // made by this run: empty
      return s_.state.load(std::move(dir), name);
    }
  }

  void check_state(const std::filesystem::path& src, const std::filesystem::path& dst, worker<state>& first) {
    if (!s_.state.enabled()) return;
    if (!s_.pol.state_keys_known) {  // nothing tells this run's policies from another's: none is trusted or kept
      s_.state.distrust();
      s_.state.disable();  // one that exists still goes before the first write
      first.record().state_notice(s_.opt.state.string(), errc::state_not_kept, "the " + s_.pol.unkeyed + " policy has no state_key()");
      return;
    }
    std::error_code ec;
    const std::filesystem::path csrc = s_.fs.canonical(src, ec);
    const std::filesystem::path cdst = ec ? std::filesystem::path() : s_.fs.canonical(dst, ec);
    identity_ = state_identity(TREESYNC_STATE_VERSION, ec ? src : csrc, ec ? dst : cdst, s_.pol.state_keys, s_.opt, s_.time);
    std::string why;
    std::error_code e = s_.state.check(identity_, why);
    // a destination root made anew since (removed and made again, another filesystem mounted
    // there): nothing the records say of it holds; nor when the root's own record was dropped
    // (something failed there), since then nothing vouches for the root's identity
    const dir_record* root = s_.state.root();
    if (!e && root && s_.root && !s_.root->cold && (!root->listed || !same_identity(root->self, s_.root->dst_st))) {
      s_.state.distrust();
      e = errc::state_ignored;
      why = root->listed ? "the destination root is not the directory recorded" : "its record of the destination root was dropped";
    }
    if (s_.root) s_.root->rec = s_.state.root();
    if (e) first.record().state_notice(s_.opt.state.string(), e, why);
    s_.recording = !s_.opt.dry_run && s_.state.keeps();
  }

  // After a run that was not stopped: directories where something failed in the destination lose
  // their record, and so do the directories above them (a failure there may mean the destination
  // is not what a trusted record said: the next run reads them again; a source failure leaves
  // the destination entry as it was, and as recorded); then the state file is written, unless it
  // would say the same again.  Inside the destination, its directory gets its mtime back.
  void save_state() {
    if (!s_.recording) return;
    for (const entry_error& e : s_.out.errors)
      if (e.side != side::source) s_.state.forget(e.path);
    // inside the destination, its directory gets its mtime back
    stat_info before;
    std::error_code ec;
    const bool inside = !s_.state_rel.empty() && s_.state.attached();
    if (inside) before = s_.fs.stat(s_.state.dir(), ".", false, ec);
    bool written = false;
    if (const std::error_code e = s_.state.save(identity_, written))
      return s_.out.errors.push_back({s_.opt.state.string(), operation::state, e, side::destination, {}});
    if (inside && written && !ec) s_.fs.set_mtime(s_.state.dir(), ".", before.mtime_ns, ec);
  }

  // What refuses the run before anything is touched: options that exclude each other, a source
  // that is not a directory, a destination of another type, the same or nested directories, an
  // unsafe backup directory.
  std::error_code preflight(const std::filesystem::path& src, const std::filesystem::path& dst, stat_info& ss,
                            stat_info& ds, bool& dst_exists) {
    // What the filesystem declares it cannot do is refused before anything is read or written,
    // never half done entry by entry (nor, for durable and xattrs, silently skipped).
    constexpr filesystem_capabilities can = filesystem_capabilities_v<FS>;
    const options& o = s_.opt;
    if (const option_rule* r = refused_combination(o)) return r->code;
    if (((o.owner || o.group) && !can.owners) || (o.specials && !can.specials) ||
        (o.hard_links && !can.hard_links) || (o.xattrs && !can.xattrs) || (o.durable && !can.durable))
      return errc::unsupported;
    std::error_code ec;
    ss = s_.fs.stat_path(src, true, ec);
    if (is_enoent(ec)) return errc::source_missing;
    if (ec) return ec;
    if (ss.type != file_type::directory) return std::make_error_code(std::errc::not_a_directory);
    ds = s_.fs.stat_path(dst, true, ec);
    dst_exists = !ec;
    if (ec && !is_enoent(ec)) return ec;
    if (!dst_exists) {  // missing, or a link to nothing (which make_root would meet as "File exists")
      const stat_info own = s_.fs.stat_path(dst, false, ec);
      if (!ec && own.type == file_type::symlink) return errc::destination_dangling_symlink;
      ec.clear();
    }
    if (dst_exists && ds.type != file_type::directory) return std::make_error_code(std::errc::not_a_directory);
    if (dst_exists && same_identity(ss, ds)) return errc::same_directory;
    // a state file inside a destination this run makes can only be in its root
    if (!dst_exists && !s_.opt.state.empty() && s_.state_rel.find('/') != std::string::npos) return errc::state_dir_missing;
    if (auto e = check_nesting(s_.fs, src, ss, dst, dst_exists ? &ds : nullptr))  // resolves DST's parent
      return !dst_exists && is_enoent(e) ? make_error_code(errc::destination_parent_missing) : e;
    if (s_.backups.enabled() && !s_.backups.relative()) {
      if (auto e = s_.backups.check(nullptr)) return e;
    }
    if (s_.temps.enabled() && !s_.temps.relative()) {
      if (auto e = s_.temps.check(nullptr, &s_.temp_root)) return e;
      s_.have_temp_root = true;
    }
    // a relative temp_dir is inside the destination: one this run makes holds none yet
    if (s_.temps.enabled() && s_.temps.relative() && !dst_exists) return errc::temp_dir_missing;
    return {};
  }

  // Opens the source root, and the destination root (made first when missing, by the applier:
  // the recording one makes nothing); asks once what the destination keeps of timestamps.
  std::error_code open_roots(const std::filesystem::path& src, const std::filesystem::path& dst, const stat_info& ss,
                             const stat_info& ds, bool dst_exists, worker<state>& first) {
    std::error_code ec;
    auto root = std::make_unique<node>();
    root->name = s_.opt.subtree;
    root->src_st = ss;
    root->dst_st = ds;
    if (!s_.opt.chmod.empty()) root->src_st.mode = s_.opt.chmod.apply(ss.mode, true, s_.opt.umask);
    if (!s_.opt.perms) root->src_st.mode = dst_exists ? ds.mode : (root->src_st.mode & 0777u & ~s_.opt.umask);
    root->dst_type = dst_exists ? file_type::directory : file_type::none;
    s_.cycles.add(ss);
    root->src = s_.fs.open_root(src, ec);
    if (ec) return ec;
    // made by the applier (in a dry run the recording one: then not, and nothing is read there)
    const bool reached = dst_exists || first.make_root(dst, ec);
    if (ec) return ec;
    if (reached) {
      root->dst = s_.fs.open_root(dst, ec);
      if (ec) return ec;
      root->have_dst = true;
      const stat_info id = dst_exists ? ds : s_.fs.stat(root->dst, ".", false, ec);
      if (ec) return ec;
      s_.roots.dst_known = true;
      s_.roots.dst_dev = id.dev;
      s_.roots.dst_ino = id.ino;
      if (dst_exists && s_.backups.enabled() && s_.backups.relative()) {
        if (auto e = s_.backups.check(&root->dst)) return e;
      }
      if (s_.temps.enabled() && s_.temps.relative()) {
        if (auto e = s_.temps.check(&root->dst, &s_.temp_root)) return e;
        s_.have_temp_root = true;
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
  std::string identity_;  // the state file's (state_identity)
};

}  // namespace detail

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_ENGINE_HPP
