// treesync/detail/walk.hpp - the walker: lists, merges and decides what each entry needs
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_DETAIL_WALK_HPP
#define TREESYNC_DETAIL_WALK_HPP

#include "state.hpp"

namespace treesync {
inline namespace v0 {

namespace detail {

// ---- the walker --------------------------------------------------------------------------------

/// What the walker found an entry needs, besides a plan: nothing, the plan carried out, or the
/// destination entry of that name removed (`remove`: by the deletion policy; `clean`: a
/// temporary an interrupted run left).
enum class verdict { none, apply, remove, clean };

/// The source side of one entry: its stat, taken with or without following as the links policy
/// says, its link target, and (hard_links) whether it is the first name of its inode.  Reads only.
template <class S>
class source_reader {
 public:
  using handle = typename S::handle;

  source_reader(S& s, journal<S>& j) : s_(s), fs_(s.fs), j_(j) {}

  /// hard_links: true for the first name of a multiply-linked source file; a later name is queued
  /// for the link pass.  A first name whose copy could not be made (first_failed) is given up: the
  /// next name the walk reaches takes its place (rsync makes the group's other names then).
  bool first_name(const stat_info& st) { return s_.links.first_name(st, j_.rel); }

  /// hard_links: the first name `rel` of the source file `st` has no copy in the destination (an
  /// entry of another type could not go, or the write failed): given up (see first_name).
  void first_failed(const stat_info& st, const std::string& rel) { s_.links.first_failed(st, rel); }

  /// One stat per entry: d_type decides whether it is taken with or without following.  Fills
  /// p.src and p.type (none: a link to skip) and, for a kept link, p.target.  False when reported.
  bool resolve(handle& s, const dir_entry& e, plan& p) {
    std::error_code ec;
    if (p.type != file_type::symlink) {
      p.src = fs_.stat(s, e.name, false, ec);
      if (ec) return j_.source_failure(s, e.name, operation::stat, ec), false;
      if (p.type != file_type::unknown && p.src.type == file_type::symlink)  // replaced since the listing
        return j_.vanish(operation::stat, errc::vanished), false;
      p.type = p.src.type;
      if (p.type != file_type::symlink) return true;
    }
    if (s_.pol.needs_target && !read_target(s, e.name, p)) return false;
    switch (s_.pol.on_symlink(j_.rel, p.target, link_stays_inside(j_.rel, p.target))) {
      case link_action::skip: return skip_link(p), true;
      case link_action::preserve:
        if (!s_.pol.needs_target && !read_target(s, e.name, p)) return false;
        if (p.src.type != file_type::symlink) {  // typed by the listing: the link's own stat, for its mtime
          ec.clear();
          p.src = fs_.stat(s, e.name, false, ec);
          if (ec) return j_.source_failure(s, e.name, operation::stat, ec), false;
          if (p.src.type != file_type::symlink) return j_.vanish(operation::stat, errc::vanished), false;
        }
        p.src.type = file_type::symlink;
        p.src.size = p.target.size();
        return true;
      default: return follow_link(s, e.name, p);
    }
  }

 private:
  bool excluded(file_type t) const { return s_.pol.excluded(std::string_view(j_.rel), t); }

  bool read_target(handle& s, const std::string& name, plan& p) {
    std::error_code ec;
    p.target = fs_.read_link(s, name, ec);
    if (ec) return j_.source_failure(s, name, operation::readlink, ec), false;
    return true;
  }

  // A link the links policy skips: an excluded one is the exclusion's (p.type stays symlink),
  // others are reported skipped (p.type none).
  void skip_link(plan& p) {
    if (excluded(file_type::symlink)) return;
    p.type = file_type::none;
    j_.skip(file_type::symlink, operation::readlink, errc::skipped_symlink);  // named, as rsync does
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
    // rsync asks the rules about an entry it cannot stat both as a file and as a directory: a
    // rule for a directory of that name excludes the link too (then what the destination has at
    // the name is dealt with as for any excluded entry)
    if (excluded(file_type::directory)) return p.type = file_type::directory, true;
    if (!is_enoent(ec)) return j_.fail(side::source, operation::stat, ec), false;
    std::error_code probe;
    fs_.stat(s, name, false, probe);
    if (is_enoent(probe)) return j_.vanish(operation::stat, errc::vanished), false;
    return j_.fail(side::source, operation::stat, errc::dangling_symlink), false;
  }

  S& s_;
  typename S::fs_type& fs_;
  journal<S>& j_;
};

/// Lists and merges each directory pair and decides what each entry needs.  Reads only.
template <class S>
class walker {
 public:
  using handle = typename S::handle;
  using node = typename S::node;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  walker(S& s, journal<S>& j) : s_(s), fs_(s.fs), j_(j), source_(s, j) {}

  /// Opens a node's source directory, and its destination directory when there is one.
  bool open(node& n);

  /// The destination directory of `n`, opened if it was deferred; false (reported) when it cannot be.
  bool need_dst(node& n);

  /// The state file's record of a node's destination directory, when the run may take its listing from it.
  const dir_record* vouched(const node& n) const;

  /// Lists both sides of a node, sorts, merges; false when the pair cannot be processed.
  bool list_and_merge(node& n, bool root);

  /// A source entry and its destination counterpart: a directory becomes a child, the rest may get a plan.
  verdict source_entry(node& n, const dir_entry& e, const dir_entry* de, std::vector<node*>& children, plan& p);

  /// A destination entry the source lacks: a leftover temporary goes, the rest as the deletion policy says.
  verdict extraneous(node& n, const dir_entry& de, file_type& t);

  /// A destination entry with no source counterpart to sync: its type, and whether it is removed.
  verdict consider_removal(node& n, const dir_entry& de, file_type& t);

  /// The deletion policy's verdict on the entry j_.rel (of type `t`, `ex` excluded) of the
  /// destination directory of `n`; a policy that takes it is given the directory's identity
  /// (dst_identity).
  bool removes(node& n, file_type t, bool ex) {
    if (!s_.pol.removes_wants_dir()) return s_.pol.removes(std::string_view(j_.rel), t, ex);
    return s_.pol.removes(std::string_view(j_.rel), t, ex, dst_identity(n));
  }

  /// The identity of the destination directory of `n` as the run holds it open (asked once).
  dir_identity dst_identity(node& n);

  /// Whether an entry inside a directory tree being deleted goes too.
  template <class Identity>
  bool removes_within(const std::string& name, file_type t, bool quiet, Identity&& in);

  /// hard_links: a first name whose copy is not in the destination gives way to the next name.
  void check_first_copy(node& n, const std::string& name, const plan& p);

  /// hard_links: what a further name of a multiply-linked source file needs: nothing, or a link.
  verdict link_request(handle& d, const std::string& name, handle& fd, const std::string& fname, const stat_info& source,
                       plan& p);

  /// A directory the source has, about to be entered: made when the destination has none at its name.
  verdict new_dir(const node& n, plan& p) const;

  /// The metadata a finished directory needs (`stopped`: all but its mtime).
  dir_plan finish(const node& n, bool stopped = false) const;

 private:
  bool excluded(file_type t) const { return s_.pol.excluded(std::string_view(j_.rel), t); }

  // Type and (when needed) stat of a destination entry; false when the stat failed (reported).
  bool probe_dst(node& n, const std::string& name, const dir_entry* de, plan& p);

  // The record of a listed entry, when the listing came from the state file.
  const entry_record* recorded(const node& n, const dir_entry* de) const {
    return n.vouched && de ? &n.vouched->entries[static_cast<std::size_t>(de - n.dl.data())] : nullptr;
  }

  // A destination entry's stat as the state file has it, when it has it.
  const stat_info* recorded_stat(const node& n, const dir_entry* de) const;

  // The permission bits the entry made in the destination directory of `n` gets.
  void source_mode(const node& n, plan& p) const;

  // The set-ID bits of `bits` a copy of `st` made in the destination directory of `n` may not keep.
  std::uint32_t setid_dropped(const node& n, const stat_info& st, std::uint32_t bits, file_type t) const;

  // The owner of a copy of `st` this run makes; -1 where the filesystem does not say.
  std::int64_t made_owner(const stat_info& st) const;

  // The group of a copy of `st` this run makes in the destination directory of `n`: the source's
  // where the run sets it (group_kept), otherwise the one a new entry gets there (given_group).
  std::int64_t made_group(const node& n, const stat_info& st) const {
    return s_.who.group_kept(st.gid) ? std::int64_t(st.gid) : given_group(n);
  }

  // The group the kernel gives an entry made in the destination directory of `n`; -1 if not known.
  std::int64_t given_group(const node& n) const;

  // The set-group-ID bit the destination directory of `n` has while its entries are made: the one
  // setgid_first gives it (the source's, as the run sees it), unless the run sets the group of
  // what it makes; then an existing directory's own until it is finished.
  std::uint32_t setgid_while_filled(const node& n) const {
    return (s_.who.sets_every_group() && !n.cold ? n.dst_st.mode : n.src_st.mode) & 02000u;
  }

  // Whether owner or group of the destination file `d` must change to match the source's `s`.
  bool owner_changes(const stat_info& s, const stat_info& d) const {
    return (s_.opt.owner && d.uid != s.uid) || (s_.who.group_kept(s.gid) && d.gid != s.gid);
  }

  // Whether a file whose data is current must be written afresh for its metadata (issue 12).
  bool fresh_inode_needed(const stat_info& s, const stat_info& d) const;

  struct content_ctx {
    walker* self;
    node* n;
    handle* s;
    handle* d;
    const std::string* name;
    bool follow;
    bool checked;
    std::error_code ec;
  };
  static bool content_thunk(void* p);

  verdict decide_file(node& n, const std::string& name, const dir_entry* de, plan& p);

  // A current file's metadata: its mtime restamped, its mode, or a racily clean copy's settle.
  verdict decide_meta(plan& p, bool verified_racy);

  verdict decide_link(node& n, const std::string& name, const dir_entry* de, plan& p);

  // A special file of the same kind needs its metadata only, or is made afresh; another is replaced.
  verdict decide_special(node& n, const std::string& name, const dir_entry* de, plan& p);

  // A source directory: becomes a node of its own, entered by whichever worker takes it.
  void enter_dir(node& n, const std::string& name, const dir_entry* de, plan& p, std::vector<node*>& children);

  // An anchor keeps the names from the anchor above it down to itself.
  static void set_segment(node& c);

  void report_case_collisions(const node& n);

  S& s_;
  typename S::fs_type& fs_;
  journal<S>& j_;
  source_reader<S> source_;
};

/// Opens a node's source directory, and its destination directory when there is one.
template <class S>
inline bool walker<S>::open(node& n) {
  node& p = *n.parent;
  std::error_code ec;
  n.src = fs_.open_dir(p.src, n.name, n.follow, ec);
  if (ec) return j_.source_failure(p.src, n.name, operation::opendir, ec), false;
  if (n.dst_type != file_type::directory) return true;
  if (s_.state.level() != verify_level::full && n.depth <= open_levels && n.rec && n.rec->listed) {
    // opened when first needed (open_dst): to write in it, to list it (its record is not taken),
    // or (verify::dirs) to stat its subdirectories; a no-op never opens a leaf directory
    n.dst_deferred = true;
    return true;
  }
  if (!open_dst(fs_, p, ec)) return j_.fail(side::destination, operation::opendir, ec), false;
  n.dst = fs_.open_dir(p.dst, n.name, false, ec);
  if (ec) return j_.fail(side::destination, operation::opendir, ec), false;
  n.have_dst = true;
  return true;
}

/// The destination directory of `n`, opened if it was deferred; false (reported) when it cannot be.
template <class S>
inline bool walker<S>::need_dst(node& n) {
  std::error_code ec;
  if (open_dst(fs_, n, ec)) return true;
  j_.fail(side::destination, operation::opendir, ec ? ec : std::make_error_code(std::errc::bad_file_descriptor));
  return false;
}

/// The state file's record of a node's destination directory, when the run may take its
/// listing from it: verify::dirs, when the directory's identity and stamps are those recorded
/// (and were already past the racy window then); verify::none, always, but for the root, whose
/// stat the run has anyway: its stamps must match too.
template <class S>
inline const dir_record* walker<S>::vouched(const node& n) const {
  const dir_record* r = n.rec && n.rec->listed ? n.rec : nullptr;
  const bool none = s_.state.level() == verify_level::none;
  if (!r || (none && n.parent)) return r;
  const stat_info& now = n.dst_st;
  const bool same = same_identity(r->self, now) && r->self.mtime_ns == now.mtime_ns && r->self.ctime_ns == now.ctime_ns;
  return same && (none || r->settled) ? r : nullptr;
}

/// Lists both sides of a node, sorts, merges.  False when the pair cannot be processed (for the
/// root, also when the empty-source guard refuses the run).
template <class S>
inline bool walker<S>::list_and_merge(node& n, bool root) {
  std::error_code ec;
  n.sl = fs_.list(n.src, ec);
  if (ec) return j_.fail(side::source, operation::list, ec), false;  // and delete nothing below: unreadable is not empty
  if (!n.cold && n.dst_exists()) {
    n.vouched = vouched(n);
    if (n.vouched) {
      n.dl.reserve(n.vouched->entries.size());
      for (const entry_record& e : n.vouched->entries) n.dl.push_back({e.name, e.type});
    } else {
      if (!need_dst(n)) return false;
      n.dl = fs_.list(n.dst, ec);
      if (ec) return j_.fail(side::destination, operation::list, ec), false;
    }
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
template <class S>
inline verdict walker<S>::source_entry(node& n, const dir_entry& e, const dir_entry* de,
                                       std::vector<node*>& children, plan& p) {
  j_.scanned();
  p.type = e.type;
  if (s_.is_state_file(j_.rel)) return j_.excluded(), verdict::none;  // the state file: never mirrored
  if (!source_.resolve(n.src, e, p) || p.type == file_type::none) return verdict::none;  // none: a skipped link
  if (excluded(p.type)) {
    j_.excluded();
    return de && n.dst_exists() ? verdict::remove : verdict::none;
  }
  // rsync --existing: nothing new (a new directory is walked for its source errors only, as
  // rsync's sender lists it, but nothing is made); --ignore-existing: nothing that exists is
  // changed (an existing directory is still entered)
  if (s_.opt.existing && !de) {
    const std::size_t before = children.size();
    if (p.type == file_type::directory) enter_dir(n, e.name, nullptr, p, children);
    if (children.size() > before) children.back()->scan = true;
    return verdict::none;
  }
  if (s_.opt.ignore_existing && de &&
      !(p.type == file_type::directory && (de->type == file_type::directory || de->type == file_type::unknown)))
    return verdict::none;
  if (p.type == file_type::regular && p.src.size > s_.opt.max_size) return verdict::none;  // rsync --max-size
  if (s_.opt.hard_links && p.type == file_type::regular && p.src.nlink > 1 && !source_.first_name(p.src))
    return verdict::none;  // another name of a file already being synced: linked at the end
  switch (p.type) {
    case file_type::regular: return decide_file(n, e.name, de, p);
    case file_type::directory: return enter_dir(n, e.name, de, p, children), verdict::none;
    case file_type::symlink: return decide_link(n, e.name, de, p);
    default:
      // special files are never opened: opening a FIFO blocks, a device may have side effects
      if (s_.who.makes_special(p.type)) return decide_special(n, e.name, de, p);
      j_.skip(p.type, operation::open, errc::special_file);
      return verdict::none;
  }
}

/// A destination entry the source lacks: a temporary an interrupted run left is always
/// removed; anything else as the deletion policy says.
template <class S>
inline verdict walker<S>::extraneous(node& n, const dir_entry& de, file_type& t) {
  t = de.type;
  if (is_temp_name(de.name))  // never where nothing is deleted (deletion::keep)
    return removes(n, t, false) ? verdict::clean : verdict::none;
  return consider_removal(n, de, t);
}

/// A destination entry with no source counterpart to sync (the source lacks it, or excludes
/// its own entry of that name): its type, and whether the deletion policy removes it.
template <class S>
inline verdict walker<S>::consider_removal(node& n, const dir_entry& de, file_type& t) {
  t = de.type;
  if ((s_.backup_rel == j_.rel && !s_.backup_rel.empty()) || (s_.temp_rel == j_.rel && !s_.temp_rel.empty()) ||
      s_.is_state_file(j_.rel))
    return verdict::none;
  if (t == file_type::unknown) {
    if (!need_dst(n)) return verdict::none;
    std::error_code ec;
    const stat_info st = fs_.stat(n.dst, de.name, false, ec);
    if (ec) return is_enoent(ec) ? verdict::none : (j_.fail(side::destination, operation::stat, ec), verdict::none);
    t = st.type;
  }
  const bool ex = excluded(t);
  if (removes(n, t, ex)) return verdict::remove;
  if (ex) j_.excluded();
  return verdict::none;
}

/// The identity of the destination directory of `n` as the run holds it open: asked of the open
/// directory once (the first time a deletion policy that takes it is asked about an entry in
/// it), then kept with the node.  Unknown when it cannot be opened (reported) or stat'ed.
template <class S>
inline dir_identity walker<S>::dst_identity(node& n) {
  if (!need_dst(n)) return dir_identity{};
  std::lock_guard<std::mutex> lock(n.mu);
  if (!n.dst_self.known) {
    std::error_code ec;
    const stat_info st = fs_.stat(n.dst, ".", false, ec);
    if (!ec) n.dst_self = dir_identity{st.dev, st.ino, true};
  }
  return n.dst_self;
}

/// An entry inside a directory tree being deleted (the pruner's walk reaches it; rel names it):
/// whether it goes too.  The backup directory and the state file stay; a temporary an
/// interrupted run left goes; anything else as the deletion policy says (an excluded entry
/// under deletion::extraneous stays: counted as excluded unless `quiet`, the pruner counting).
/// `in()`: the identity of the directory the pruner holds it in, asked only of a deletion
/// policy that takes it.
template <class S>
template <class Identity>
inline bool walker<S>::removes_within(const std::string& name, file_type t, bool quiet, Identity&& in) {
  if ((!s_.backup_rel.empty() && j_.rel == s_.backup_rel) || (!s_.temp_rel.empty() && j_.rel == s_.temp_rel) ||
      s_.is_state_file(j_.rel))
    return false;
  if (is_temp_name(name)) return true;
  const bool ex = excluded(t);
  if (s_.pol.removes_wants_dir() ? s_.pol.removes(std::string_view(j_.rel), t, ex, in())
                                 : s_.pol.removes(std::string_view(j_.rel), t, ex))
    return true;
  if (ex && !quiet) j_.excluded();
  return false;
}

/// hard_links: after the plan `p` of a first name `name` of `n` was carried out, whether the
/// destination has a file there; if not (an entry of another type that could not go, a failed
/// write), the next name of its group the walk reaches is copied instead and the others linked
/// to that one (rsync makes them: seed 4418207 case 575).  One stat, for such names only; not
/// in a dry run (nothing is written).
template <class S>
inline void walker<S>::check_first_copy(node& n, const std::string& name, const plan& p) {
  if (!s_.opt.hard_links || s_.opt.dry_run || p.type != file_type::regular || p.src.nlink < 2 ||
      p.what != plan::step::write)
    return;
  std::error_code ec;
  const stat_info now = fs_.stat(n.dst, name, false, ec);
  if (!ec && now.type == file_type::regular) return;
  source_.first_failed(p.src, j_.rel);
}

/// hard_links: what a further name (`name` in `d`) of a multiply-linked source file needs, once
/// the first name's copy (`fname` in `fd`) is in place: nothing when it is a name of that copy
/// already, else a link (p.old: what the destination holds there, replaced; p.src: the copy's
/// stat, p.dst: the old entry's).  A first name whose copy is not a regular file fails the link
/// (reported).  Reads only.
template <class S>
inline verdict walker<S>::link_request(handle& d, const std::string& name, handle& fd,
                                       const std::string& fname, const stat_info& source, plan& p) {
  std::error_code ec;
  p.type = file_type::regular;
  p.src = fs_.stat(fd, fname, false, ec);
  if (ec || p.src.type != file_type::regular)
    return j_.fail(side::destination, operation::link, ec ? ec : std::make_error_code(std::errc::no_such_file_or_directory)),
           verdict::none;
  p.dst = fs_.stat(d, name, false, ec);
  p.old = ec ? file_type::none : p.dst.type;
  if (p.old == file_type::regular && same_identity(p.dst, p.src)) return verdict::none;
  // a first name the run left other than the source (-u kept a newer one, --ignore-existing an
  // existing one, its copy failed) is linked to only where the name does not exist: an existing
  // one is left alone (rsync syncs it on its own; it is never overwritten by another copy)
  if (p.old != file_type::none && !(p.src.size == source.size && s_.time.same_mtime(p.src, source))) return verdict::none;
  // -i: what the name had that differs from the file it becomes (rsync: hf.st...... NAME => FIRST;
  // all '+' for a name that was not a file)
  p.changes = p.old == file_type::none ? changed::all : changed::all | changed::replaced;
  if (p.old == file_type::regular)
    p.changes = (p.dst.size != p.src.size ? changed::size : changed::none) |
                (!s_.time.same_mtime(p.dst, p.src) ? changed::mtime : changed::none) |
                (s_.opt.perms && p.dst.mode != p.src.mode ? changed::mode : changed::none) |
                (s_.opt.owner && p.dst.uid != p.src.uid ? changed::owner : changed::none) |
                (s_.who.group_kept(p.src.gid) && p.dst.gid != p.src.gid ? changed::group : changed::none);
  p.what = plan::step::write;
  return verdict::apply;
}

/// A directory the source has, about to be entered: made when the destination has no directory
/// at its name (the parent's listing said what it has: n.dst_type), after what is there goes
/// (p.old: the whole tree, as any replaced entry of another type).  An update when something
/// was there, else a create; every attribute is new (changed::all).  Reads nothing.
template <class S>
inline verdict walker<S>::new_dir(const node& n, plan& p) const {
  if (n.dst_type == file_type::directory) return verdict::none;
  p.what = plan::step::write;
  p.type = file_type::directory;
  p.old = n.dst_type;
  p.changes = changed::all;
  return verdict::apply;
}

/// The metadata a finished directory needs.  An existing one whose metadata changes is an
/// update_meta; one this run made gets all of it.
/// `stopped`: the run was stopped before the directory was done (cancel_on, errors::stop):
/// its content may be incomplete, so it keeps the mtime it has now (never the source's, which
/// would say it is complete; the next run sets it) and gets the rest.
template <class S>
inline dir_plan walker<S>::finish(const node& n, bool stopped) const {
  const stat_info& st = n.src_st;
  const stat_info* old = n.cold ? nullptr : &n.dst_st;
  dir_plan p;
  p.owner = s_.opt.owner && (!old || old->uid != st.uid);
  p.group = s_.who.group_kept(st.gid) && (!old || old->gid != st.gid);
  p.mode = !old || old->mode != st.mode || p.owner || p.group;
  const bool content_changed = n.modified.load();
  p.mtime = !stopped && (!old || content_changed || !s_.time.same_mtime(*old, st));
  p.fsync = s_.opt.durable && (!old || content_changed);
  // reported by the mode it had before a write opened it up (restored above: not a change)
  const std::uint32_t was = n.made_writable ? n.mode_before_writable : old ? old->mode : 0;
  p.meta = old && (was != st.mode || (p.mtime && !s_.time.same_mtime(*old, st)) || p.owner || p.group);
  return p;
}

// Type and (when the type alone does not settle it) stat of a destination entry; false when
// the stat failed (reported).
template <class S>
inline bool walker<S>::probe_dst(node& n, const std::string& name, const dir_entry* de, plan& p) {
  p.old = file_type::none;
  if (!de) return true;
  p.old = de->type;
  if (p.old != file_type::unknown && p.old != p.type) return true;  // d_type tells a type swap
  if (const stat_info* known = recorded_stat(n, de)) {
    p.dst = *known;
    p.old = known->type;
    return true;
  }
  if (!need_dst(n)) return p.old = file_type::none, false;
  std::error_code ec;
  p.dst = fs_.stat(n.dst, name, false, ec);
  if (ec) {
    p.old = file_type::none;
    return is_enoent(ec) ? true : (j_.fail(side::destination, operation::stat, ec), false);
  }
  p.old = p.dst.type;
  return true;
}

// A destination entry's stat as the state file has it: an entry's own, or for a directory under
// verify::none its own record's (under verify::dirs a directory is always stat'ed: its stamps
// decide whether its record is taken).
template <class S>
inline const stat_info* walker<S>::recorded_stat(const node& n, const dir_entry* de) const {
  const entry_record* r = recorded(n, de);
  if (!r) return nullptr;
  if (r->has_stat) return &r->st;
  if (r->type != file_type::directory || s_.state.level() != verify_level::none) return nullptr;
  const dir_record* d = s_.state.child(n.rec, de->name);
  return d && d->listed ? &d->self : nullptr;
}

// The permission bits the entry made in the destination directory of `n` gets (after
// probe_dst): the source's, less the set-ID bits the copy may not keep (setid_dropped), through
// --chmod (whose own set-ID bits are asked for by name); without perms, an existing entry of the
// same type keeps its own, a new one gets the source's under the umask, without set-ID or
// sticky bits (rsync --no-perms).
template <class S>
inline void walker<S>::source_mode(const node& n, plan& p) const {
  p.src.mode &= ~setid_dropped(n, p.src, p.src.mode, p.type);
  if (!s_.opt.chmod.empty())
    p.src.mode = s_.opt.chmod.apply(p.src.mode, p.type == file_type::directory, s_.opt.umask);
  if (!s_.opt.perms) p.src.mode = p.old == p.type ? p.dst.mode : (p.src.mode & 0777u & ~s_.opt.umask);
}

// The set-ID bits of `bits` that a copy, made in the destination directory of `n`, of the
// source entry `st` (of type `t`; its data, owner and group) may not keep: set-user-ID stays only
// where the copy's owner is the source's owner, set-group-ID only where the copy's group is the
// source's group, as the copy is made (made_owner, made_group); a bit that would give the copy's
// runner another identity than the source's is cleared (issue 43: a set-ID file copied by root
// for another user would run as root; a user's -g copy of another user's set-group-ID file, whose
// group the kernel refused, would run with the victim's group).  Where the filesystem does not
// say whom the run acts as, only what the options give (owner, group) counts.  A directory keeps
// both, as rsync -p does: no program runs with them; set-group-ID there only makes new entries
// take the directory's group, and Linux ignores set-user-ID on a directory.
template <class S>
inline std::uint32_t walker<S>::setid_dropped(const node& n, const stat_info& st, std::uint32_t bits,
                                              file_type t) const {
  if (t == file_type::directory || (bits & 06000u) == 0) return 0;
  std::uint32_t dropped = 0;
  if (made_owner(st) != std::int64_t(st.uid)) dropped |= 04000u;
  if ((bits & 02000u) != 0 && made_group(n, st) != std::int64_t(st.gid)) dropped |= 02000u;
  return dropped & bits;
}

// The owner of a copy of `st` this run makes: the source's with owner (root only), otherwise the
// user the run acts as; -1 where the filesystem does not say (no user_id).
template <class S>
inline std::int64_t walker<S>::made_owner(const stat_info& st) const {
  if (s_.opt.owner) return std::int64_t(st.uid);
  if constexpr (has_op<op_user_id, typename S::fs_type>::value) return fs_.user_id();
  return -1;
}

// The group an entry made in the destination directory of `n` gets from the kernel: the
// directory's own group while it has set-group-ID as it is filled (setgid_while_filled): an
// existing directory's, or for one this run made, the group its parent gave it, and so on up;
// otherwise the run's own group (run_state::own_group).  -1 where that is not known: the
// filesystem does not say (no user_groups), or the chain reaches a destination root this run
// made (whose group DST's parent gave it, not looked at).
template <class S>
inline std::int64_t walker<S>::given_group(const node& n) const {
  for (const node* d = &n; d; d = d->parent) {
    if (setgid_while_filled(*d) == 0) return s_.who.own_group();
    if (!d->cold) return d->dst_st.ino != 0 ? std::int64_t(d->dst_st.gid) : -1;  // ino 0: not stat'ed
  }
  return -1;
}

// A destination regular file whose data is current needs a fresh inode (a copy under a
// temporary name, renamed over it) rather than a metadata change by name when that change
// would otherwise act on an inode treesync did not just write (issue 12):
//  - its owner or group must change: never chown data treesync did not write (an attacker's
//    file with the quick-check size and mtime would become root's);
//  - a set-user/group-ID bit must be added: never to data treesync did not write;
//  - any metadata must change and the file has other links: the other name may be a hard
//    link planted from outside the destination, whose inode a chmod or utime would change.
// A racily clean copy verified equal is not "metadata to change": its settle (decide_meta) is
// a re-stamp of the mtime it already has, made by name only where the file has no other links;
// one with other links is left as it is (its content is compared again while it stays racy),
// never split from its other names for it: a hard link current in every other way stays.
template <class S>
inline bool walker<S>::fresh_inode_needed(const stat_info& s, const stat_info& d) const {
  if (owner_changes(s, d)) return true;
  const bool mode = d.mode != s.mode;
  if (mode && (s.mode & ~d.mode & 06000) != 0) return true;
  const bool restamp = s_.pol.restamp && !s_.time.same_mtime(d, s);
  return d.nlink > 1 && (mode || restamp);
}

template <class S>
inline bool walker<S>::content_thunk(void* p) {
  auto& c = *static_cast<content_ctx*>(p);
  c.checked = true;
  std::error_code ec;
  if (!open_dst(c.self->fs_, *c.n, ec)) {  // deferred (verify::none): opened for the comparison
    c.ec = ec ? ec : std::make_error_code(std::errc::bad_file_descriptor);
    return true;
  }
  const bool same = c.self->fs_.same_content(*c.s, *c.name, c.follow, *c.d, *c.name, ec);
  if (ec) c.ec = ec;
  return same || ec;  // undecidable: the engine reports the error and leaves the file alone
}

template <class S>
inline verdict walker<S>::decide_file(node& n, const std::string& name, const dir_entry* de, plan& p) {
  if (!probe_dst(n, name, de, p)) return verdict::none;
  source_mode(n, p);
  if (p.old == file_type::regular) {
    const bool racy = s_.time.racily_clean(p.src, p.dst);
    content_ctx ctx{this, &n, &n.src, &n.dst, &name, p.follow, false, {}};
    const file_pair pair(p.src, p.dst, racy, &content_thunk, &ctx, s_.time.resolution_ns);
    const bool current = s_.pol.up_to_date(pair);
    if (ctx.ec) return j_.fail(side::source, operation::compare, ctx.ec), verdict::none;
    // rsync -u: a destination file newer than its source is left entirely alone (mode, owner, times)
    if (current && s_.pol.keep_newer && p.dst.mtime_ns > p.src.mtime_ns && !s_.time.same_mtime(p.dst, p.src))
      return verdict::none;
    // The data is current; what is left is metadata, changed by name only where that cannot
    // reach an inode treesync has no business changing (see fresh_inode_needed): otherwise the
    // file is written afresh, and the new inode gets owner, group and mode.
    if (current && !fresh_inode_needed(p.src, p.dst))
      return decide_meta(p, ctx.checked && racy);
    p.current = current;  // written afresh for its metadata only (reported as update_meta)
    // without perms the new data gets the existing file's bits, less a set-ID bit its copy may
    // not carry by the source's owner and group (a root-owned set-user-ID file rewritten with
    // another user's data; the same owner's data keeps it, as rsync does)
    if (!current && !s_.opt.perms) p.src.mode &= ~setid_dropped(n, p.src, p.src.mode, p.type);
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
template <class S>
inline verdict walker<S>::decide_meta(plan& p, bool verified_racy) {
  p.what = plan::step::meta;
  if (s_.pol.restamp && !s_.time.same_mtime(p.dst, p.src)) {
    p.set_mtime = true;
    p.set_mode = p.dst.mode != p.src.mode;
    p.changes = differences(p.src, &p.dst) & ~changed::size;
  } else if (p.dst.mode != p.src.mode) {
    p.set_mode = true;
    p.op = operation::chmod;
    p.changes = changed::mode;
  } else if (verified_racy && s_.time.settled(p.src.mtime_ns) && p.dst.nlink <= 1) {
    p.set_mtime = p.settle = true;
    p.changes = changed::mtime;
  } else {
    return verdict::none;
  }
  return verdict::apply;
}

template <class S>
inline verdict walker<S>::decide_link(node& n, const std::string& name, const dir_entry* de, plan& p) {
  std::error_code ec;
  p.old = de ? de->type : file_type::none;
  if (p.old == file_type::unknown) {
    if (!need_dst(n)) return verdict::none;
    const stat_info ds = fs_.stat(n.dst, name, false, ec);
    if (ec && !is_enoent(ec)) return j_.fail(side::destination, operation::stat, ec), verdict::none;
    p.old = ec ? file_type::none : ds.type;
    ec.clear();
  }
  const entry_record* r = recorded(n, de);
  if (p.old == file_type::symlink) {  // the link's own stat: its mtime is kept too (rsync -t)
    if (r && r->has_stat) {
      p.dst = r->st;
    } else {
      if (!need_dst(n)) return verdict::none;
      p.dst = fs_.stat(n.dst, name, false, ec);
      if (ec && !is_enoent(ec)) return j_.fail(side::destination, operation::stat, ec), verdict::none;
      if (ec || p.dst.type != file_type::symlink) p.old = ec ? file_type::none : p.dst.type;
      ec.clear();
    }
  }
  bool same_target = false;
  if (p.old == file_type::symlink && r && r->has_target) {
    same_target = r->target == p.target;
  } else if (p.old == file_type::symlink) {
    if (!need_dst(n)) return verdict::none;
    const std::string current = fs_.read_link(n.dst, name, ec);
    same_target = !ec && current == p.target;
    if (ec && !is_enoent(ec)) return j_.fail(side::destination, operation::readlink, ec), verdict::none;
  }
  // a link whose owner or group must change (-o/-g) is made afresh with them, as a file whose
  // data is current is (never a chown of a node treesync did not make): .L....og...
  if (same_target && owner_changes(p.src, p.dst) && s_.time.link_meta) {
    p.what = plan::step::write;
    p.current = true;
    return verdict::apply;
  }
  if (same_target) {
    if (s_.time.same_mtime(p.dst, p.src) || !s_.time.link_meta) return verdict::none;
    p.what = plan::step::meta;  // .L..t......: the link's mtime, set without following it
    p.set_mtime = true;
    p.changes = changed::mtime;
    return verdict::apply;
  }
  p.what = plan::step::write;
  p.unseen = n.unseen && p.old == file_type::none;
  return verdict::apply;
}

// The same kind of node needs its metadata only.  It is made afresh (with its metadata: reported
// as such, .S....o....) when its owner or group must change (never a chown of a node treesync
// did not make, as for a file), or when it has other links (a hard link planted from outside
// would have its mode changed).  A node of another kind or device number is replaced.
template <class S>
inline verdict walker<S>::decide_special(node& n, const std::string& name, const dir_entry* de, plan& p) {
  if (!probe_dst(n, name, de, p)) return verdict::none;
  source_mode(n, p);
  if (p.old == p.type && p.dst.rdev == p.src.rdev) {
    const bool ids = owner_changes(p.src, p.dst);
    if (!ids && p.dst.mode == p.src.mode && s_.time.same_mtime(p.dst, p.src)) return verdict::none;
    if (ids || p.dst.nlink > 1) {
      p.what = plan::step::write;
      p.current = true;
      return verdict::apply;
    }
    p.what = plan::step::meta;
    p.set_mode = p.set_mtime = true;
    p.op = operation::chmod;
    p.changes = differences(p.src, &p.dst) & ~changed::size;
    return verdict::apply;
  }
  p.what = plan::step::write;
  return verdict::apply;
}

// A source directory: becomes a node of its own, entered by whichever worker takes it.
template <class S>
inline void walker<S>::enter_dir(node& n, const std::string& name, const dir_entry* de, plan& p,
                                 std::vector<node*>& children) {
  const stat_info& st = p.src;
  if (s_.roots.is_dst(st)) {
    // a followed link into a directory that holds the destination: entering it would copy the
    // destination into itself, level after level
    return j_.fail(side::source, operation::opendir, errc::nested_directory);
  }
  if (s_.opt.one_file_system && st.dev != s_.roots.src_dev) return j_.skip(file_type::directory, operation::opendir, errc::other_filesystem);
  // A cycle: the directory is one of the source directories from here up to the root.  Those
  // are all live nodes, so only a directory that is live somewhere needs the walk up.
  if (s_.cycles.live(st)) {
    for (const node* a = &n; a; a = a->parent)
      if (same_identity(a->src_st, st)) return j_.fail(side::source, operation::opendir, errc::symlink_cycle);
  }
  if (!probe_dst(n, name, de, p)) return;
  source_mode(n, p);  // st is p.src
  // without perms a new directory keeps the set-group-ID bit mkdir gives it in a parent that has
  // it (rsync --no-perms never chmods it); as a user other than root, not one without write
  // permission for its owner: rsync makes that one writable to fill it and chmods it at the
  // end to the mode it gets, which clears the bit
  if (!s_.opt.perms && p.old != file_type::directory && (s_.who.privileged || (p.src.mode & 0200) != 0))
    p.src.mode |= setgid_while_filled(n);
  auto child = std::make_unique<node>();
  child->dst_type = p.old;
  child->dst_st = p.dst;
  child->parent = &n;
  child->name = name;
  child->rec = s_.state.child(n.rec, name);
  child->src_st = st;
  child->follow = p.follow;
  child->depth = n.depth + 1;
  // made under a temporary name when the parent keeps its handle to the end (the rename needs
  // it) and no other run finishes the subtree (frontier); inside a staged directory the name
  // is final already
  child->stage = p.old == file_type::none && !n.unseen && s_.opt.frontier_depth == 0 && n.depth <= open_levels;
  s_.cycles.add(st);
  child->anchor = n.segment.empty() && n.parent ? n.anchor : &n;
  if (child->depth % anchor_levels == 0) set_segment(*child);
  n.pending.fetch_add(1);
  children.push_back(child.release());
}

// An anchor keeps the names from the anchor above it down to itself.
template <class S>
inline void walker<S>::set_segment(node& c) {
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

template <class S>
inline void walker<S>::report_case_collisions(const node& n) {
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
    j_.notice(side::source, operation::list, errc::case_collision);
  }
}

}  // namespace detail

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_WALK_HPP
