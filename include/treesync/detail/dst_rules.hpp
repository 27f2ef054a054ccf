// treesync/detail/dst_rules.hpp - DST's per-directory rule files, read up front (-F / dir-merge with --delete)
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync (include <treesync/treesync.hpp>), shared by the CLI, the MPI tool and the
// Python binding: rsync -F / dir-merge with --delete reads DST's rule files where it deletes,
// before it writes there; a run that mirrors into DST reads them all before its first write
// (read_dst_rule_tree) and hands them to the filter through a loader that looks them up
// (dst_rule_texts::lookup).
//
// Identity (issue 45 item 2): each directory read is recorded with its device and inode, from the
// descriptor its rule files were read through (dst_rule_texts::lookup: `seen`, `dev`, `ino`), so
// that whoever later works in DST by name can tell the directory it holds from the one read under
// that name (a directory exchanged with another in between) and trust the rules for neither: the
// CLI's deletion policy keeps what is in such a directory and reports it (examples/cli/run.hpp).
//
// Memory: O(depth + what is recorded), not O(depth^2).  The texts and identities hang off a tree
// of nodes, one per directory read (or that could not be read), charged to the budget like the
// texts (past it, what was not recorded keeps everything); a node holds its parent's index, its
// own name and identity, never a path.  The read's walk
// holds, per level of the directory it is in, a descriptor (or its place to reopen it), the node
// (made only when something is recorded at or below it) and the names of that directory's
// subdirectories.  Time: a lookup resolves its path one component at a time through a hash of
// (parent, name), stopping at the first component that has no node: O(len(dir)) once.
//
// Descriptors: the walk keeps the deepest `window` levels open; a level above them is closed and,
// when the walk comes back up to it, reopened through ".." of the level below and checked to be
// the same directory (device and inode).  So a DST of any depth is read with a bounded number of
// descriptors.  A directory that cannot be opened or listed (permissions; descriptors exhausted by
// the process: dst_rule_texts::out_of_descriptors), or one that is not the same directory when
// reopened (renamed meanwhile), is recorded as unread: nothing at or below it is deleted.
//
// Merged files (read_dst_merge_file): what DST's rule files merge is read for whoever could write
// them, and refused (a filter_error, the run refused) when that writer could not read it, a
// missing one alike, so a rule file cannot be an oracle on what the run may read and its writer
// may not.
#ifndef TREESYNC_DETAIL_DST_RULES_HPP
#define TREESYNC_DETAIL_DST_RULES_HPP

#include "../filter.hpp"

#include <deque>
#include <unordered_map>

namespace treesync {
inline namespace v0 {
namespace detail {

// [treesync.detail.dst_rules] -------------------------------------------------------------------

/// DST's per-directory rule files as they were before the run, read up front.  Bounded: the
/// texts, their names and the nodes of their directories count against `budget`; past it nothing
/// more is recorded (`full`) and a directory whose rule files were not recorded keeps everything.
/// Directories are named relative to the loader's root ("" the root, "a/b" below it).
class dst_rule_texts {
 public:
  using node_id = std::size_t;
  static constexpr node_id root_node = 0;
  static constexpr node_id no_node = static_cast<node_id>(-1);
  /// What a node costs besides its name (its record and its entry in the hash), and a recorded
  /// file besides its name and text: charged to `bytes`.
  static constexpr std::size_t node_cost = 96;
  static constexpr std::size_t file_cost = 2 * sizeof(std::string);

  std::size_t bytes = 0;   // charged: nodes, names, texts
  std::size_t budget = 0;  // the most `bytes` may reach
  bool full = false;       // the budget was spent: what was not recorded is not known
  bool out_of_descriptors = false;  // a directory was not read for want of descriptors (EMFILE, ENFILE)
  std::size_t walk_peak = 0;  // the most bytes read_dst_rule_tree's walk held at once (its stack)
  std::size_t reopened = 0;   // levels the walk reopened through ".." (they had fallen out of its window)

  dst_rule_texts() { nodes_.push_back(node{no_node, std::string(), false, {}}); }
  explicit dst_rule_texts(std::size_t budget_bytes) : dst_rule_texts() { budget = budget_bytes; }
  // the hash's keys view the nodes' names: a copy would view the original's
  dst_rule_texts(const dst_rule_texts&) = delete;
  dst_rule_texts& operator=(const dst_rule_texts&) = delete;
  dst_rule_texts(dst_rule_texts&&) = default;
  dst_rule_texts& operator=(dst_rule_texts&&) = default;
  ~dst_rule_texts() = default;

  /// Records `text` for the rule file `name` of the directory `dir`; false once the budget is spent.
  bool keep(std::string_view dir, std::string_view name, std::string text) {
    const node_id n = make_path(dir);
    return n != no_node && keep(n, name, std::move(text));
  }
  bool keep(node_id dir, std::string_view name, std::string text) {
    if (!charge(file_cost + name.size() + text.size())) return false;
    auto& files = nodes_[dir].files;
    for (auto& f : files)
      if (f.first == name) {
        bytes -= file_cost + f.first.size() + f.second.size();
        f.second = std::move(text);
        return true;
      }
    files.emplace_back(std::string(name), std::move(text));
    ++file_count_;
    return true;
  }
  /// Records that `dir` could not be read: nothing at or below it is deleted.  False once the
  /// budget is spent (then `full` says so, and nothing unrecorded is deleted either).
  bool keep_unread(std::string_view dir) {
    const node_id n = make_path(dir);
    return n != no_node && keep_unread(n);
  }
  bool keep_unread(node_id dir) { return nodes_[dir].unread = true; }

  /// Records that the directory of the node `dir` was read as the directory (dev, ino).
  void see(node_id dir, std::uint64_t dev, std::uint64_t ino) {
    node& n = nodes_[dir];
    n.dev = dev;
    n.ino = ino;
    n.seen = true;
  }
  bool see(std::string_view dir, std::uint64_t dev, std::uint64_t ino) {
    const node_id n = make_path(dir);
    if (n == no_node) return false;
    see(n, dev, ino);
    return true;
  }

  /// The subdirectory `name` of the node `parent`, made (and charged) if need be; no_node once
  /// the budget is spent.
  node_id child(node_id parent, std::string_view name) {
    if (const node_id c = find_child(parent, name); c != no_node) return c;
    if (!charge(node_cost + name.size())) return no_node;
    nodes_.push_back(node{parent, std::string(name), false, {}});
    const node_id c = nodes_.size() - 1;
    children_.emplace(key{parent, nodes_.back().name}, c);
    return c;
  }

  /// What is recorded for the rule file `name` of `dir`: its text (null: none recorded), whether
  /// `dir` is at or below a directory that was not read, and whether `dir` itself was read
  /// (`seen`) as the directory (`dev`, `ino`).  One walk down `dir`'s components, no copy of it.
  struct found {
    const std::string* text = nullptr;
    bool below_unread = false;
    bool seen = false;
    std::uint64_t dev = 0;
    std::uint64_t ino = 0;
  };
  /// Where a lookup ended (lookup's `from`): the next lookup of a directory at or below it starts
  /// there, so a walk down a chain of N directories resolves each component once, not O(N^2).
  /// One per thread (and per dst_rule_texts); a default one starts at the root.
  struct place {
    std::string dir;  // every component resolved, to `node`
    node_id node = root_node;
    bool below_unread = false;
  };
  found lookup(std::string_view dir, std::string_view name, place* from = nullptr) const {
    found out;
    node_id n = root_node;
    out.below_unread = nodes_[n].unread;
    std::size_t pos = 0;
    if (from && !from->dir.empty() && from->node < nodes_.size() && dir.size() >= from->dir.size() &&
        dir.compare(0, from->dir.size(), from->dir) == 0 && (dir.size() == from->dir.size() || dir[from->dir.size()] == '/')) {
      n = from->node;
      out.below_unread = from->below_unread;
      pos = from->dir.size() + 1;
    }
    while (pos < dir.size()) {
      std::size_t end = dir.find('/', pos);
      if (end == std::string_view::npos) end = dir.size();
      if (end > pos) {
        n = find_child(n, dir.substr(pos, end - pos));
        if (n == no_node) return out;  // nothing recorded there or below
        out.below_unread = out.below_unread || nodes_[n].unread;
      }
      pos = end + 1;
    }
    if (from) {
      from->dir.assign(dir.data(), dir.size());
      from->node = n;
      from->below_unread = out.below_unread;
    }
    for (const auto& f : nodes_[n].files)
      if (f.first == name) out.text = &f.second;
    out.seen = nodes_[n].seen;
    out.dev = nodes_[n].dev;
    out.ino = nodes_[n].ino;
    return out;
  }
  /// The text recorded for (dir, name), or null.
  const std::string* find(std::string_view dir, std::string_view name) const { return lookup(dir, name).text; }
  /// Whether `dir` is at or below a directory that was not read.
  bool below_unread(std::string_view dir) const { return lookup(dir, std::string_view()).below_unread; }

  /// The number of rule files recorded.
  std::size_t size() const noexcept { return file_count_; }
  bool empty() const noexcept { return file_count_ == 0; }
  /// The number of nodes (the root included).
  std::size_t nodes() const noexcept { return nodes_.size(); }

  /// `f(dir, name, text)` for each recorded rule file, depth first (a directory before those
  /// below it, subdirectories and file names in byte order), `dir` as the loader names it.  The
  /// path is extended and cut back as the walk goes: O(nodes + the length of the paths' names).
  template <class F>
  void for_each_file(F&& f) const {
    std::vector<node_id> first(nodes_.size(), no_node), next(nodes_.size(), no_node);
    for (node_id i = nodes_.size(); i-- > 1;) {  // each node's children, listed in byte order below
      next[i] = first[nodes_[i].parent];
      first[nodes_[i].parent] = i;
    }
    std::vector<node_id> kids;
    for (node_id i = 0; i < nodes_.size(); ++i) {
      kids.clear();
      for (node_id c = first[i]; c != no_node; c = next[c]) kids.push_back(c);
      if (kids.size() < 2) continue;
      std::sort(kids.begin(), kids.end(), [&](node_id a, node_id b) { return nodes_[a].name < nodes_[b].name; });
      first[i] = kids[0];
      for (std::size_t k = 0; k + 1 < kids.size(); ++k) next[kids[k]] = kids[k + 1];
      next[kids.back()] = no_node;
    }
    std::vector<std::pair<node_id, std::size_t>> stack{{root_node, 0}};  // (node, its path's length)
    std::string path;
    std::vector<const std::pair<std::string, std::string>*> files;
    while (!stack.empty()) {
      const auto [i, length] = stack.back();
      stack.pop_back();
      const node& n = nodes_[i];
      path.resize(length);
      if (i != root_node) {
        if (length > 0) path += '/';
        path += n.name;
      }
      files.clear();
      for (const auto& file : n.files) files.push_back(&file);
      std::sort(files.begin(), files.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
      for (const auto* file : files) f(static_cast<const std::string&>(path), file->first, file->second);
      kids.clear();
      for (node_id c = first[i]; c != no_node; c = next[c]) kids.push_back(c);
      for (auto c = kids.rbegin(); c != kids.rend(); ++c) stack.emplace_back(*c, path.size());
    }
  }

 private:
  struct node {
    node_id parent;
    std::string name;
    bool unread;
    std::vector<std::pair<std::string, std::string>> files;  // (rule file name, text)
    std::uint64_t dev = 0;  // the directory read, when `seen`
    std::uint64_t ino = 0;
    bool seen = false;
  };
  struct key {
    node_id parent;
    std::string_view name;  // views the node's own name (nodes_ is a deque: they do not move)
    bool operator==(const key& o) const { return parent == o.parent && name == o.name; }
  };
  struct key_hash {
    std::size_t operator()(const key& k) const {
      return std::hash<std::string_view>()(k.name) ^ static_cast<std::size_t>(k.parent * 0x9e3779b97f4a7c15ull);
    }
  };

  node_id find_child(node_id parent, std::string_view name) const {
    const auto it = children_.find(key{parent, name});
    return it == children_.end() ? no_node : it->second;
  }
  node_id make_path(std::string_view dir) {
    node_id n = root_node;
    std::size_t pos = 0;
    while (pos < dir.size() && n != no_node) {
      std::size_t end = dir.find('/', pos);
      if (end == std::string_view::npos) end = dir.size();
      if (end > pos) n = child(n, dir.substr(pos, end - pos));
      pos = end + 1;
    }
    return n;
  }
  bool charge(std::size_t n) {
    if (full || bytes + n > budget) return full = true, false;
    bytes += n;
    return true;
  }

  std::deque<node> nodes_;
  std::unordered_map<key, node_id, key_hash> children_;
  std::size_t file_count_ = 0;
};

/// The text of DST's rule file `name` in the directory `dir`, before the run: nothing when there
/// is none (or it is not a file); "- *" (keep everything there) when it cannot be read, is larger
/// than a rule file may be, or is a symlink: never followed (it could name a device whose open does
/// something), and what rsync would read through it may protect anything, so all is kept.
inline std::optional<std::string> read_dst_rule_file(int dir, const std::string& name) {
  const std::string keep_all = "- *";
  struct stat st;
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT || errno == ENOTDIR ? std::nullopt : std::optional<std::string>(keep_all);
  if (S_ISLNK(st.st_mode)) return keep_all;
  if (!S_ISREG(st.st_mode)) return std::nullopt;
  try {
    std::string text = filter::read_rule_file(name.c_str(), dir);  // O_NOFOLLOW, regular only
    if (text.empty() && st.st_size > 0) return keep_all;  // unreadable, or swapped since the stat
    return text;
  } catch (const filter_error&) {  // larger than a rule file may be
    return keep_all;
  }
}

// [treesync.detail.dst_rules.merge] -------------------------------------------------------------
//
// A file that one of DST's rule files merges (`merge NAME`, `. NAME`, or the `dir-merge NAME` of a
// rule file) is read by the run, often root, for whoever wrote the rule file: its rules decide
// what is deleted, and a `merge,- FILE` turns each of FILE's lines into a pattern, so which guess
// survives a run, or whether the run is refused, tells that writer what FILE holds and whether it
// exists.  So the file is read only when the writer could read it anyway.  The writers are the
// owners of the directories from the one the rule files are read below (DST) down to the rule
// file's own directory, other than root and the user the run acts as (each of them can put a rule
// file there); with none (root's DST, or the runner's own), nothing changes.  For each writer the
// merged file must be owned by the writer or root, and readable by the writer by its permission
// bits, each directory from the rule file's directory down to it searchable (a merge name never
// leaves that directory, and the writer reached it to write the rule file).  The writer's groups
// are not known here (a uid has no group list on disk): where the writer does not own an entry,
// both its group and its other bits must grant the access, so whichever class the kernel puts the
// writer in, it would grant it too (a file only the writer's group may read is refused; ACLs are
// not consulted).  Everything is decided on what was opened (a handle's own stat, the opened
// file's), never on a name looked up again, so nothing swapped in between is read.  A file refused,
// and a missing one, throw the same filter_error: the run is refused as for an unsafe merge name,
// and neither the exit status nor the message says which it was.

/// Whether the permission bits of `st` give the user `uid` the access `want` (4: read, 1: search)
/// whatever its groups: the owner's bits when `uid` owns it, else the group's and the others' both.
inline bool dst_writer_may(const stat_info& st, std::uint32_t uid, std::uint32_t want) {
  if (st.uid == uid) return ((st.mode >> 6) & want) == want;
  return ((st.mode >> 3) & want) == want && (st.mode & want) == want;
}

template <class H, class = void>
struct handle_has_fd : std::false_type {};
template <class H>
struct handle_has_fd<H, std::void_t<decltype(int(std::declval<const H&>().fd()))>> : std::true_type {};

/// Splits the path `s` at its slashes into its components (empty ones dropped), appended to `out`.
inline void split_dst_path(std::string_view s, std::vector<std::string>& out) {
  std::size_t pos = 0;
  while (pos < s.size()) {
    std::size_t end = s.find('/', pos);
    if (end == std::string_view::npos) end = s.size();
    if (end > pos) out.emplace_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
}

/// The writers of a merged file (read_dst_merge_file): the owners of the directories from DST
/// down to the rule file's, other than root and the runner, and what each of them must be allowed.
struct dst_merge_writers {
  std::int64_t runner;      // the user the run acts as (fs.user_id())
  const std::string& path;  // the merged file, as the refusal names it
  std::vector<std::uint32_t> uids;

  /// Counts the owner of `st` among the writers, unless it is root, the runner or counted already.
  void note(const stat_info& st);
  /// Throws the refusal (the same filter_error for a file refused and a missing one).
  std::string refuse() const;
  /// What an entry missing or not of its type gives: nothing without writers, else the refusal.
  std::string missing() const { return uids.empty() ? std::string() : refuse(); }
  /// Whether the permission bits of `st` give every writer the access `want` (4: read, 1: search).
  bool may(const stat_info& st, std::uint32_t want) const;
  /// Whether `st` is owned by root or by every writer.
  bool owned(const stat_info& st) const;
};

/// read_dst_merge_file's walk from the handle `at`: down to the rule file's directory (noting its
/// writers), down to the merged file's (each searchable by them), then the file itself (owned by
/// them or root, readable by them).  Each step decides on what it opened and returns the text to
/// give when the walk ends there (nothing: go on); a refusal throws.
template <class Fs>
struct dst_merge_reader {
  using handle = typename Fs::dir_handle;
  Fs& fs;
  dst_merge_writers writers;
  handle* h;            // the deepest directory reached: `at`, then `cur`
  handle cur;           // the one opened last
  stat_info st;         // the last entry stat'ed
  std::error_code ec;

  dst_merge_reader(Fs& f, handle& at, const std::string& path)
      : fs(f), writers{static_cast<std::int64_t>(f.user_id()), path, {}}, h(&at) {}
  /// Stats `at` itself and notes its owner; when that fails, no writer is known: nothing read.
  std::optional<std::string> start();
  /// Opens the directories `down` to the rule file's, one from the other, noting their owners.
  std::optional<std::string> to_rule_dir(const std::vector<std::string>& down);
  /// Opens the directories `below` the rule file's to the merged file's, each searchable by the writers.
  std::optional<std::string> to_merged_dir(const std::vector<std::string>& below);
  /// The merged file `last` of the directory reached: owned and readable as the writers need.
  std::string read_file(const std::string& last);
};

/// The text of the file `name` merged by a rule file of the directory `dir` (relative to the
/// directory open as `at`, "" for `at` itself), read through `fs` as the comment above says: each
/// component opened from its parent's handle without following a symlink, a regular file only
/// (else empty: no rules).  When the rule file's directory has writers other than root and the
/// user `fs` acts as (fs.user_id()), a file they may not read, or a missing one, throws filter_error.
/// filter_error too for a file larger than filter::max_rule_file_size.  `name` is one the filter
/// accepted (below the rule file's directory); any other reads nothing.
template <class Fs>
std::string read_dst_merge_file(Fs& fs, typename Fs::dir_handle& at, std::string_view dir, std::string_view name) {
  std::string path(dir);
  if (!path.empty()) path += '/';
  path.append(name.data(), name.size());
  if (!filter::merge_name_allowed(name)) return std::string();
  dst_merge_reader<Fs> r(fs, at, path);
  std::vector<std::string> down;  // the rule file's directory, below `at`
  split_dst_path(dir, down);
  std::vector<std::string> below;  // the merged file's directories below that, then its name
  split_dst_path(name, below);
  const std::string last = below.back();
  below.pop_back();

  if (auto end = r.start()) return std::move(*end);
  if (auto end = r.to_rule_dir(down)) return std::move(*end);
  if (!r.writers.may(r.st, 1)) return r.writers.refuse();  // the rule file's directory: searchable by its writers
  if (auto end = r.to_merged_dir(below)) return std::move(*end);
  return r.read_file(last);
}

inline void dst_merge_writers::note(const stat_info& st) {
  if (st.uid != 0 && st.uid != runner && std::find(uids.begin(), uids.end(), st.uid) == uids.end())
    uids.push_back(st.uid);
}

inline std::string dst_merge_writers::refuse() const {
  std::string who;
  for (const std::uint32_t u : uids) who += (who.empty() ? "uid " : " and uid ") + std::to_string(u);
  throw filter_error("merge file " + path + " refused: a file DST's rule files merge must be a regular file that root or " +
                     who + " (owning the rule file's directory) owns and " + who +
                     " may read (a missing one is refused alike)");
}

inline bool dst_merge_writers::may(const stat_info& st, std::uint32_t want) const {
  for (const std::uint32_t u : uids)
    if (!dst_writer_may(st, u, want)) return false;
  return true;
}

inline bool dst_merge_writers::owned(const stat_info& st) const {
  for (const std::uint32_t u : uids)
    if (st.uid != 0 && st.uid != u) return false;
  return true;
}

template <class Fs>
std::optional<std::string> dst_merge_reader<Fs>::start() {
  st = fs.stat(*h, ".", false, ec);
  if (ec) return std::string();  // `at` itself: no writer known, nothing read
  writers.note(st);
  return std::nullopt;
}

template <class Fs>
std::optional<std::string> dst_merge_reader<Fs>::to_rule_dir(const std::vector<std::string>& down) {
  for (const std::string& c : down) {  // the writers: the owners of the directories down to the rule file's
    handle next = fs.open_dir(*h, c, false, ec);
    if (!ec) st = fs.stat(next, ".", false, ec);
    if (ec || st.type != file_type::directory) return writers.missing();
    cur = std::move(next);
    h = &cur;
    writers.note(st);
  }
  return std::nullopt;
}

template <class Fs>
std::optional<std::string> dst_merge_reader<Fs>::to_merged_dir(const std::vector<std::string>& below) {
  for (const std::string& c : below) {
    handle next = fs.open_dir(*h, c, false, ec);
    if (!ec) st = fs.stat(next, ".", false, ec);
    if (ec || st.type != file_type::directory) return writers.missing();
    if (!writers.may(st, 1)) return writers.refuse();
    cur = std::move(next);
    h = &cur;
  }
  return std::nullopt;
}

template <class Fs>
std::string dst_merge_reader<Fs>::read_file(const std::string& last) {
  if constexpr (handle_has_fd<handle>::value) {  // descriptors: decided on the open file, then read
    const int fd = filter::open_rule_file(h->fd(), last.c_str());
    struct ::stat raw;
    if (fd < 0 || ::fstat(fd, &raw) != 0) {
      if (fd >= 0) ::close(fd);
      return writers.missing();
    }
    st.type = file_type::regular;  // open_rule_file opens nothing else
    st.uid = static_cast<std::uint32_t>(raw.st_uid);
    st.mode = static_cast<std::uint32_t>(raw.st_mode) & 07777;
    if (!writers.owned(st) || !writers.may(st, 4)) {
      ::close(fd);
      return writers.refuse();
    }
    return filter::read_open_rule_file(fd, writers.path);
  } else {  // a handle that is no descriptor (mock_fs): the stat, then the read by name
    st = fs.stat(*h, last, false, ec);
    if (ec || st.type != file_type::regular) return writers.missing();
    if (!writers.owned(st) || !writers.may(st, 4)) return writers.refuse();
    if (st.size > filter::max_rule_file_size)
      throw filter_error("rule file " + writers.path + " is larger than " + std::to_string(filter::max_rule_file_size >> 20) +
                         " MiB");
    std::string text;
    fs.read_state(*h, last, [&](std::string_view piece) { return text.append(piece.data(), piece.size()), true; }, ec);
    if (ec) return writers.missing();
    return text;
  }
}

/// How many levels of the walk read_dst_rule_tree() keeps open at once (the deepest ones).
inline constexpr std::size_t dst_rule_window = 16;

/// The names of the subdirectories (and of the entries of unknown type) of the directory open as
/// `fd`, appended to `out`; false when it cannot be listed (errno says why).  Reads through `fd`
/// itself (its offset is left at the end), so no descriptor more is needed.
inline bool list_dst_subdirs(int fd, std::vector<std::string>& out) {
#if defined(__linux__) && defined(SYS_getdents64)
  alignas(8) char buf[16384];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    for (long off = 0; off < n;) {
      // struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
      std::uint16_t reclen;
      std::memcpy(&reclen, buf + off + 16, sizeof reclen);
      const auto type = static_cast<unsigned char>(buf[off + 18]);
      const std::string_view name(buf + off + 19);
      off += reclen;
      if (name == "." || name == ".." || (type != DT_DIR && type != DT_UNKNOWN)) continue;
      out.emplace_back(name);
    }
  }
#else
  const int listing = ::dup(fd);
  DIR* d = listing < 0 ? nullptr : ::fdopendir(listing);
  if (!d) {
    const int e = errno;
    if (listing >= 0) ::close(listing);
    errno = e;
    return false;
  }
  while (const dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (n == "." || n == ".." || (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN)) continue;
    out.emplace_back(n);
  }
  ::closedir(d);
  return true;
#endif
}

/// read_dst_rule_tree's walk (see there): a stack of the levels of the directories it is in, the
/// deepest `window` of them open, and the descriptor of the level it left last (`carry`), through
/// whose ".." a closed level above is reopened.
struct dst_rule_walk {
  using node_id = dst_rule_texts::node_id;
  static constexpr node_id none = dst_rule_texts::no_node;
  /// A directory the walk is in.
  struct level {
    int fd = -1;    // -1: closed (it fell out of the window)
    dev_t dev = 0;  // what fd is, to check it when reopened
    ino_t ino = 0;
    node_id node = none;  // made when something is recorded at or below it
    std::vector<std::string> subdirs;
    std::size_t next = 0;
    std::size_t cost = 0;  // bytes counted in out.walk_peak for this level
  };

  dst_rule_texts& out;
  std::string_view base;                  // what the walk's root is recorded as
  const std::vector<std::string>& names;  // the rule files read in each directory
  std::size_t window;                     // the most levels open at once
  std::vector<level> stack;
  std::size_t held = 0;  // the bytes the levels in the stack count (their `cost`)
  bool stop = false;     // the budget is spent: the walk stops (what was not recorded is kept)
  int carry = -1;               // the descriptor of a level popped last, to reopen a level above it
  std::size_t carry_depth = 0;  // its index in the stack when it was there

  dst_rule_walk(dst_rule_texts& o, std::string_view b, const std::vector<std::string>& n, std::size_t w)
      : out(o), base(b), names(n), window(w == 0 ? 1 : w) {}
  /// Reads the tree below the directory open as `root` (a duplicate of it is the first level),
  /// then closes every descriptor it holds.
  void run(int root);
  /// Closes `carry`, if any.
  void close_carry();
  /// The node of stack[k], made with those of the levels above it that have none; none once the
  /// budget is spent.
  node_id node_of(std::size_t k);
  /// Notes in `out` that errno says descriptors ran out (EMFILE, ENFILE).
  void note_errno();
  /// stack[k] is not read further: nothing at or below it is deleted.
  void unread(std::size_t k);
  /// Reads the rule files of the directory open as `fd` and pushes its level.
  void enter(int fd);
  /// Records the identity of stack[k]'s directory (its descriptor's device and inode); false when
  /// the budget is spent.
  bool identify(std::size_t k);
  /// Reads and records the rule files of stack[k]'s directory; false when the budget is spent.
  bool read_rules(std::size_t k);
  /// Lists the subdirectories of stack[k]'s directory (unread below it when it cannot be listed)
  /// and counts what the level holds in `held` and out.walk_peak.
  void list(std::size_t k);
  /// Closes the level that falls out of the window, if one does.
  void close_out_of_window();
  /// Reopens stack.back(), closed, through ".." from `carry`; false when it cannot be reopened or
  /// is not the directory it was.
  bool reopen();
  /// Leaves stack.back(), done with: its descriptor becomes `carry`.
  void back_up();
  /// Opens the next subdirectory of stack.back() and enters it; one there that cannot be opened
  /// is recorded as unread (one that is no directory, or gone, is passed over).
  void descend();
};

/// Reads the rule files `names` of the directory open as `root` and of every directory below it
/// (recorded as `base`, `base/SUB`, ...), into `out`.  Directories are reached through
/// descriptors, each opened O_NOFOLLOW from its parent's: a directory swapped for a symlink is not
/// entered, so no rule file outside the tree is read.  At most `window` levels are open at once,
/// the deepest; a level above them that the walk comes back to with subdirectories still to read
/// is reopened through ".." from the deepest descriptor still held, and checked to be the
/// directory it was (device and inode).  A directory that cannot be opened or listed, or is not
/// the same when reopened, is recorded as unread.  Each directory read is recorded with its
/// identity (dst_rule_texts::see: the device and inode of the descriptor read).  The walk stops
/// when the budget is spent (`out.full`).
inline void read_dst_rule_tree(int root, std::string_view base, const std::vector<std::string>& names,
                               dst_rule_texts& out, std::size_t window = dst_rule_window) {
  dst_rule_walk(out, base, names, window).run(root);
}

inline void dst_rule_walk::run(int root) {
  if (const int fd = ::dup(root); fd >= 0) {
    enter(fd);
  } else {
    note_errno();
    out.keep_unread(base);
  }
  while (!stack.empty() && !stop && !out.full) {
    level& top = stack.back();
    if (top.next == top.subdirs.size()) {  // done with it: back up
      back_up();
      continue;
    }
    if (top.fd < 0 && !reopen()) {
      unread(stack.size() - 1);  // the rest of it is not read
      continue;
    }
    close_carry();
    descend();
  }
  close_carry();
  for (const level& l : stack)
    if (l.fd >= 0) ::close(l.fd);
}

inline void dst_rule_walk::close_carry() {
  if (carry >= 0) ::close(carry);
  carry = -1;
}

inline dst_rule_walk::node_id dst_rule_walk::node_of(std::size_t k) {
  std::size_t j = k + 1;
  while (j > 0 && stack[j - 1].node == none) --j;
  if (j == 0) {  // stack[0] is `base`
    node_id n = dst_rule_texts::root_node;
    std::size_t pos = 0;
    while (pos < base.size() && n != none) {
      std::size_t end = base.find('/', pos);
      if (end == std::string_view::npos) end = base.size();
      if (end > pos) n = out.child(n, base.substr(pos, end - pos));
      pos = end + 1;
    }
    if (n == none) return n;
    stack[0].node = n;
    j = 1;
  }
  for (; j <= k; ++j) {
    const level& up = stack[j - 1];
    const node_id n = out.child(up.node, up.subdirs[up.next - 1]);
    if (n == none) return n;
    stack[j].node = n;
  }
  return stack[k].node;
}

inline void dst_rule_walk::note_errno() {
  if (errno == EMFILE || errno == ENFILE) out.out_of_descriptors = true;
}

inline void dst_rule_walk::unread(std::size_t k) {
  const node_id n = node_of(k);
  if (n == none || !out.keep_unread(n)) stop = true;
  stack[k].next = stack[k].subdirs.size();
}

inline void dst_rule_walk::enter(int fd) {
  stack.emplace_back();
  const std::size_t k = stack.size() - 1;
  stack[k].fd = fd;
  if (!identify(k) || !read_rules(k)) return;  // the budget is spent: `stop` says so
  list(k);
  close_out_of_window();
}

inline bool dst_rule_walk::identify(std::size_t k) {
  struct stat st;
  if (::fstat(stack[k].fd, &st) == 0) {
    stack[k].dev = st.st_dev;
    stack[k].ino = st.st_ino;
    const node_id id = node_of(k);  // the directory read under its path (a node per directory)
    if (id == none) {
      stop = true;  // the budget is spent: what was not recorded is kept
      return false;
    }
    out.see(id, static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino));
  }
  return true;
}

inline bool dst_rule_walk::read_rules(std::size_t k) {
  for (const auto& n : names) {
    auto text = read_dst_rule_file(stack[k].fd, n);
    if (!text) continue;
    const node_id id = node_of(k);
    if (id == none || !out.keep(id, n, std::move(*text))) {
      stop = true;  // the budget is spent: the walk stops (what was not recorded is kept)
      return false;
    }
  }
  return true;
}

inline void dst_rule_walk::list(std::size_t k) {
  if (!list_dst_subdirs(stack[k].fd, stack[k].subdirs)) {
    note_errno();
    stack[k].subdirs.clear();
    unread(k);  // its own files were read; what is below it is not known
  }
  level& top = stack[k];
  top.subdirs.shrink_to_fit();
  top.cost = sizeof(level) + top.subdirs.capacity() * sizeof(std::string);
  for (const auto& s : top.subdirs)
    if (s.capacity() > 15) top.cost += s.capacity() + 1;  // beyond the string's own buffer
  held += top.cost;
  out.walk_peak = std::max(out.walk_peak, held);
}

inline void dst_rule_walk::close_out_of_window() {
  if (stack.size() > window) {  // the level that falls out of the window is closed
    level& old = stack[stack.size() - 1 - window];
    if (old.fd >= 0) ::close(old.fd);
    old.fd = -1;
  }
}

inline bool dst_rule_walk::reopen() {
  level& top = stack.back();
  const std::size_t k = stack.size() - 1;
  if (carry < 0 || carry_depth <= k) return false;
  int fd = carry;
  for (std::size_t ups = carry_depth - k; ups > 0;) {
    const std::size_t step = std::min<std::size_t>(ups, 1000);  // "../" * step within PATH_MAX
    std::string up;
    for (std::size_t i = 0; i < step; ++i) up += i ? "/.." : "..";
    const int next = ::openat(fd, up.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (next < 0) note_errno();
    if (fd != carry) ::close(fd);
    if (next < 0) return false;
    fd = next;
    ups -= step;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_dev != top.dev || st.st_ino != top.ino) {
    ::close(fd);  // not the directory it was (moved meanwhile)
    return false;
  }
  top.fd = fd;
  ++out.reopened;
  return true;
}

inline void dst_rule_walk::back_up() {
  level& top = stack.back();
  if (top.fd >= 0) {
    close_carry();
    carry = top.fd;  // to reopen a closed level above with work left
    carry_depth = stack.size() - 1;
  }
  held -= top.cost;
  stack.pop_back();
}

inline void dst_rule_walk::descend() {
  level& top = stack.back();
  const std::string& name = top.subdirs[top.next++];
  const int fd = ::openat(top.fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    enter(fd);  // (it moves the stack: `top` and `name` are not used after it)
  } else if (errno != ENOTDIR && errno != ELOOP && errno != ENOENT) {
    note_errno();
    // a directory there that could not be opened
    const node_id up = node_of(stack.size() - 1);
    const node_id n = up == none ? up : out.child(up, name);
    if (n == none || !out.keep_unread(n)) stop = true;
  }
}

}  // namespace detail
}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_DST_RULES_HPP
