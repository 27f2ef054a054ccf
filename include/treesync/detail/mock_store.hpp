// treesync/detail/mock_store.hpp - mock_fs's storage: inodes, path resolution, clock, operation counters, faults
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of mock_fs: include <treesync/mock_fs.hpp>.
#ifndef TREESYNC_DETAIL_MOCK_STORE_HPP
#define TREESYNC_DETAIL_MOCK_STORE_HPP

#include "../core.hpp"

#include <array>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>

namespace treesync {
inline namespace v0 {
namespace detail {

/// The bookkeeping every mock_fs operation goes through (`begin`): a counter per kind of
/// operation, injected faults, a simulated crash and the test's hook; and the lock that guards
/// the whole mock.
class mock_ops {
 public:
  /// The operations the engine can perform, one counter each.
  enum class op {
    list, stat, open_dir, open_read, open_write, rename, unlink, rmdir, chmod, utime, mkdir, symlink, readlink,
    chown, mknod, link, setxattr, fsync
  };
  static constexpr std::size_t op_count = 18;

  struct counters {
    std::array<std::size_t, op_count> by_kind{};
    std::uint64_t bytes_written = 0;
    std::size_t special_opens = 0;  ///< attempts to open a FIFO/socket/device for data: must stay 0
    std::size_t syncs = 0;          ///< files and directories flushed (durable)

    std::size_t operator[](op k) const { return by_kind[static_cast<std::size_t>(k)]; }
    /// Every operation that modifies the filesystem.
    std::size_t writes() const {
      return (*this)[op::open_write] + (*this)[op::rename] + (*this)[op::unlink] + (*this)[op::rmdir] +
             (*this)[op::chmod] + (*this)[op::utime] + (*this)[op::mkdir] + (*this)[op::symlink] +
             (*this)[op::chown] + (*this)[op::mknod] + (*this)[op::link] + (*this)[op::setxattr] + (*this)[op::fsync];
    }
    std::size_t total() const {
      std::size_t t = 0;
      for (auto n : by_kind) t += n;
      return t;
    }
  };

  using hook_fn = std::function<void(op, const std::string& path)>;


  // ---- counters, faults, hook -----------------------------------------------------------------

  const counters& ops() const noexcept {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    return counters_;
  }
  void reset_counters() noexcept {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    counters_ = counters{};
  }

  /// The n-th (1-based) operation of `kind` from now on fails with `e`.
  void fail(op kind, std::size_t nth, std::errc e) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    faults_.push_back({kind, counters_[kind] + nth, {}, e, false});
  }
  /// The n-th (1-based) operation of any kind from now on fails with `e`.
  void fail_any(std::size_t nth, std::errc e) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    faults_.push_back({std::nullopt, counters_.total() + nth, {}, e, false});
  }
  /// Every operation on `path` (of `kind`, when given) fails with `e`.
  void fail_path(std::string path, std::errc e, std::optional<op> kind = std::nullopt) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    faults_.push_back({kind, 0, std::move(path), e, true});
  }
  void clear_faults() {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    faults_.clear();
  }
  /// A simulated crash: from now on (the operation being started included, when called from the
  /// hook) every operation fails with EIO and changes nothing, as if the machine had stopped;
  /// what is on "disk" is what a crash at this point leaves.  revive() ends it.
  void crash() {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    crashed_ = true;
  }
  void revive() {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    crashed_ = false;
  }
  std::size_t faults_triggered() const noexcept {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    return triggered_;
  }

  /// Called before every counted operation with its kind and absolute path; may change the tree
  /// through the setup API.
  void on_operation(hook_fn fn) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    hook_ = std::move(fn);
  }

 protected:
  struct fault {
    std::optional<op> kind;
    std::size_t at;  // counter value that fails (kind or total)
    std::string path;
    std::errc error;
    bool by_path;
  };

  static void err(std::error_code& ec, std::errc e) { ec = std::make_error_code(e); }

  // Counts the operation, runs the hook, applies injected faults.
  bool begin(op kind, const std::string& path, std::error_code& ec) {
    ec.clear();
    ++counters_.by_kind[static_cast<std::size_t>(kind)];
    if (hook_) hook_(kind, path);
    if (crashed_) return err(ec, std::errc::io_error), false;
    const std::size_t total = counters_.total();
    for (const auto& f : faults_) {
      bool hit = false;
      if (f.by_path)
        hit = f.path == path && (!f.kind || *f.kind == kind);
      else if (f.kind)
        hit = *f.kind == kind && counters_[kind] == f.at;
      else
        hit = total == f.at;
      if (hit) {
        ++triggered_;
        err(ec, f.error);
        return false;
      }
    }
    return true;
  }

  counters counters_;
  std::vector<fault> faults_;
  std::size_t triggered_ = 0;
  bool crashed_ = false;
  hook_fn hook_;
  mutable std::recursive_mutex mu_;  // jobs{n} calls in from several threads; hooks re-enter
};

/// What mock_fs is built on: the inode table and path resolution and the clock, over mock_ops's
/// counters, faults and hook.
class mock_store : public mock_ops {
 public:
  /// What `tree()` reports for one entry.
  struct node {
    file_type type = file_type::none;
    std::uint32_t mode = 0;
    std::int64_t mtime_ns = 0;
    std::string data;  ///< file content, or symlink target
    std::uint64_t ino = 0;
    std::uint32_t uid = 0;
    std::uint32_t gid = 0;
    std::uint64_t rdev = 0;
    std::map<std::string, std::string> xattrs;
    friend bool operator==(const node& a, const node& b) {
      return a.type == b.type && a.mode == b.mode && a.mtime_ns == b.mtime_ns && a.data == b.data;
    }
    friend bool operator!=(const node& a, const node& b) { return !(a == b); }
  };

  struct dir_handle {
    std::uint64_t ino = 0;
    std::string path;  ///< absolute path it was opened as (for hooks, faults, relative link targets)
  };

  mock_store() {
    inode root;
    root.type = file_type::directory;
    root.mode = 0755;
    root.nlink = 1;
    nodes_.emplace(root_ino, root);
  }

  // ---- clock ----------------------------------------------------------------------------------

  /// Current time (ns).  Timestamps written are floored to the granularity.
  std::int64_t time() const noexcept {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    return now_;
  }
  void set_time(std::int64_t ns) noexcept {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    now_ = ns;
  }
  void advance(std::chrono::nanoseconds d) noexcept {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    now_ += d.count();
  }
  void set_granularity(std::chrono::nanoseconds g) noexcept {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    granularity_ = g.count() > 0 ? g.count() : 1;
  }
  /// The engine's racy window (defaults to the granularity).
  void set_racy_window(std::chrono::nanoseconds w) noexcept {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    racy_window_ = w.count();
  }
  /// Makes the subtree at `path` behave like SFTPv3 as sshfs shows it: mtimes read back floored
  /// to whole seconds, a ctime that always equals the mtime, and timestamps() says so.  A test of
  /// "local -> sshfs" marks the destination; "sshfs -> sshfs" marks both trees.
  void sftp_semantics(const std::string& path) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    sftp_.push_back(p);
  }
  /// Listings carry entry types (d_type) unless told otherwise.
  void report_entry_types(bool on) noexcept {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    dtype_ = on;
  }

  /// The user the mock's operations act as: `uid`, member of `groups` (the first is the group of
  /// what it makes; none: the group `uid`).  By default root (uid 0, group 0), who may do
  /// anything.  Any other user, as the kernel has it: entries it makes (the setup API's too) are
  /// its own; set_owner and copy_file's owner/group fail (EPERM) unless the owner stays and the
  /// group is one of `groups`, on an entry the user owns; make_special of a device fails (EPERM);
  /// creating, linking, renaming or removing in a directory without write permission for the
  /// user fails (EACCES).  user_id() and user_groups() report it.
  void act_as(std::uint32_t uid, std::vector<std::uint32_t> groups = {}) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (groups.empty()) groups.push_back(uid);
    uid_ = uid;
    groups_ = std::move(groups);
  }
  std::int64_t user_id() const {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    return uid_;
  }
  std::vector<std::int64_t> user_groups() const {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    return std::vector<std::int64_t>(groups_.begin(), groups_.end());
  }


 protected:
  static constexpr std::uint64_t root_ino = 1;
  static constexpr std::uint64_t default_device = 1;

  struct inode {
    file_type type = file_type::none;
    std::uint32_t mode = 0;
    std::int64_t mtime = 0;
    std::int64_t ctime = 0;
    std::string data;
    std::map<std::string, std::uint64_t> entries;
    std::uint32_t nlink = 0;
    std::uint32_t uid = 0;
    std::uint32_t gid = 0;
    std::uint64_t rdev = 0;
    std::uint64_t dev = 0;  // 0: the mock's one device; see mount_point()
    std::map<std::string, std::string> xattrs;
  };

  std::int64_t stamp() const noexcept { return now_ - ((now_ % granularity_) + granularity_) % granularity_; }

  static std::string join(const std::string& dir, const std::string& name) {
    if (name == ".") return dir;
    return dir == "/" ? "/" + name : dir + "/" + name;
  }

  std::uint64_t new_inode(file_type t, std::uint32_t mode) {
    inode n;
    n.type = t;
    n.mode = mode & 07777;
    n.mtime = n.ctime = stamp();
    n.uid = uid_;
    n.gid = groups_.front();
    const std::uint64_t ino = next_ino_++;
    nodes_.emplace(ino, std::move(n));
    return ino;
  }

  void link_into(std::uint64_t dir, const std::string& name, std::uint64_t ino) {
    nodes_.at(dir).entries[name] = ino;
    ++nodes_.at(ino).nlink;
    touch_dir(dir);
  }

  void touch_dir(std::uint64_t dir) {
    inode& n = nodes_.at(dir);
    n.mtime = n.ctime = stamp();
  }

  std::uint64_t create_in(std::uint64_t dir, const std::string& name, file_type t, std::uint32_t mode,
                          std::error_code& ec) {
    inode& d = nodes_.at(dir);
    if (d.type != file_type::directory) return err(ec, std::errc::not_a_directory), 0;
    if (d.entries.count(name)) return err(ec, std::errc::file_exists), 0;
    if (!may_write(dir, ec)) return 0;
    const std::uint64_t ino = new_inode(t, mode);
    link_into(dir, name, ino);
    return ino;
  }

  void unlink_tree(std::uint64_t ino) {
    inode& n = nodes_.at(ino);
    if (n.nlink > 0) --n.nlink;
    if (n.type == file_type::directory) {
      for (auto& e : n.entries) unlink_tree(e.second);
      n.entries.clear();
    }
    n.ctime = stamp();
  }

  // act_as: whether the user may change the entries of directory `dir` (EACCES otherwise).
  bool may_write(std::uint64_t dir, std::error_code& ec) const {
    if (uid_ == 0) return true;
    const inode& d = nodes_.at(dir);
    const std::uint32_t bit = d.uid == uid_ ? 0200u : in_groups(d.gid) ? 0020u : 0002u;
    return (d.mode & bit) != 0 || (err(ec, std::errc::permission_denied), false);
  }
  // act_as: whether the user may give `n` the owner `uid` and group `gid` (-1: unchanged).
  bool may_chown(const inode& n, std::int64_t uid, std::int64_t gid, std::error_code& ec) const {
    if (uid_ == 0) return true;
    const bool ok = (uid < 0 || std::uint32_t(uid) == n.uid) &&
                    (gid < 0 || std::uint32_t(gid) == n.gid || (n.uid == uid_ && in_groups(std::uint32_t(gid))));
    return ok || (err(ec, std::errc::operation_not_permitted), false);
  }
  bool in_groups(std::uint32_t gid) const {
    return std::find(groups_.begin(), groups_.end(), gid) != groups_.end();
  }

  bool check_readable(std::uint64_t ino, bool, std::error_code& ec) {
    const file_type t = nodes_.at(ino).type;
    if (is_special(t)) {
      ++counters_.special_opens;
      return ec = errc::special_file, false;
    }
    if (t == file_type::directory) return err(ec, std::errc::is_a_directory), false;
    if (t == file_type::symlink) return err(ec, std::errc::too_many_symbolic_link_levels), false;
    return true;
  }

  static std::pair<std::string, std::string> split_parent(const std::string& path) {
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    const auto slash = p.rfind('/');
    if (slash == std::string::npos) return {"/", p};
    return {slash == 0 ? "/" : p.substr(0, slash), p.substr(slash + 1)};
  }

  // Path resolution from the root, following links (all but the last unless follow_last),
  // handling "." and "..".  `canon` receives the resolved absolute path.
  std::uint64_t resolve(const std::string& path, bool follow_last, std::error_code& ec,
                        std::string* canon = nullptr) const {
    ec.clear();
    std::deque<std::string> todo = components(path);
    std::vector<std::pair<std::string, std::uint64_t>> stack{{"", root_ino}};
    int links = 0;
    while (!todo.empty()) {
      const std::string c = todo.front();
      todo.pop_front();
      if (c.empty() || c == ".") continue;
      if (c == "..") {
        if (stack.size() > 1) stack.pop_back();
        continue;
      }
      const inode& dir = nodes_.at(stack.back().second);
      if (dir.type != file_type::directory) return err(ec, std::errc::not_a_directory), 0;
      const auto it = dir.entries.find(c);
      if (it == dir.entries.end()) return err(ec, std::errc::no_such_file_or_directory), 0;
      const inode& n = nodes_.at(it->second);
      if (n.type == file_type::symlink && (!todo.empty() || follow_last)) {
        if (++links > 40) return err(ec, std::errc::too_many_symbolic_link_levels), 0;
        std::deque<std::string> target = components(n.data);
        if (!n.data.empty() && n.data.front() == '/') stack.resize(1);
        todo.insert(todo.begin(), target.begin(), target.end());
        continue;
      }
      stack.push_back({c, it->second});
    }
    if (canon) {
      canon->clear();
      for (std::size_t i = 1; i < stack.size(); ++i) *canon += "/" + stack[i].first;
      if (canon->empty()) *canon = "/";
    }
    return stack.back().second;
  }

  static std::deque<std::string> components(const std::string& path) {
    std::deque<std::string> out;
    std::size_t pos = 0;
    while (pos <= path.size()) {
      std::size_t end = path.find('/', pos);
      if (end == std::string::npos) end = path.size();
      if (end > pos) out.push_back(path.substr(pos, end - pos));
      pos = end + 1;
    }
    return out;
  }

  // A child of an open directory; links are followed (relative to the directory's path) when asked.
  std::uint64_t child(const dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const {
    ec.clear();
    if (name == ".") return d.ino;
    const inode& dir = nodes_.at(d.ino);
    if (dir.type != file_type::directory) return err(ec, std::errc::not_a_directory), 0;
    const auto it = dir.entries.find(name);
    if (it == dir.entries.end()) return err(ec, std::errc::no_such_file_or_directory), 0;
    if (!follow || nodes_.at(it->second).type != file_type::symlink) return it->second;
    return resolve(join(d.path, name), true, ec);
  }

  std::uint64_t must(const std::string& path, bool follow) const {
    std::error_code ec;
    const std::uint64_t ino = resolve(path, follow, ec);
    if (ec) throw std::runtime_error("mock_fs: " + path + ": " + ec.message());
    return ino;
  }

  std::uint64_t ensure_dirs(const std::string& path) {
    std::uint64_t cur = root_ino;
    for (const auto& c : components(path)) {
      if (c == ".") continue;
      auto& entries = nodes_.at(cur).entries;
      const auto it = entries.find(c);
      if (it == entries.end()) {
        const std::uint64_t ino = new_inode(file_type::directory, 0755);
        link_into(cur, c, ino);
        cur = ino;
      } else {
        std::error_code ec;
        cur = nodes_.at(it->second).type == file_type::symlink ? resolve(path.substr(0, path.find(c) + c.size()), true, ec)
                                                               : it->second;
        if (ec || nodes_.at(cur).type != file_type::directory)
          throw std::runtime_error("mock_fs: not a directory: " + path);
      }
    }
    return cur;
  }

  bool sftp_at(const std::string& path) const {
    for (const std::string& p : sftp_) {
      if (p == "/" || path == p || (path.size() > p.size() && path.compare(0, p.size(), p) == 0 && path[p.size()] == '/'))
        return true;
    }
    return false;
  }
  // What a stat through `path` shows of an inode: under sftp_semantics(), whole-second mtimes and
  // ctime == mtime.
  stat_info observe(const std::string& path, stat_info s) const {
    if (sftp_.empty() || !sftp_at(path)) return s;
    constexpr std::int64_t second = 1000000000;
    s.mtime_ns -= ((s.mtime_ns % second) + second) % second;
    s.ctime_ns = s.mtime_ns;
    return s;
  }

  stat_info info(std::uint64_t ino) const {
    const inode& n = nodes_.at(ino);
    stat_info s;
    s.type = n.type;
    s.size = n.type == file_type::directory ? 4096 : n.data.size();
    s.mtime_ns = n.mtime;
    s.ctime_ns = n.ctime;
    s.mode = n.mode;
    s.dev = n.dev != 0 ? n.dev : default_device;
    s.ino = ino;
    s.nlink = n.nlink;
    s.uid = n.uid;
    s.gid = n.gid;
    s.rdev = n.rdev;
    return s;
  }

  void collect(std::uint64_t dir, const std::string& prefix, std::map<std::string, node>& out) const {
    for (const auto& [name, ino] : nodes_.at(dir).entries) {
      const inode& n = nodes_.at(ino);
      const std::string rel = prefix.empty() ? name : prefix + "/" + name;
      node v;
      v.type = n.type;
      v.mode = n.mode;
      v.mtime_ns = n.mtime;
      v.data = n.type == file_type::directory ? std::string{} : n.data;
      v.ino = ino;
      v.uid = n.uid;
      v.gid = n.gid;
      v.rdev = n.rdev;
      v.xattrs = n.xattrs;
      out.emplace(rel, v);
      if (n.type == file_type::directory) collect(ino, rel, out);
    }
  }

  std::unordered_map<std::uint64_t, inode> nodes_;
  std::uint64_t next_ino_ = 2;
  std::uint32_t uid_ = 0;                     // act_as
  std::vector<std::uint32_t> groups_{0};
  std::int64_t now_ = std::int64_t(1700000000) * 1000000000;
  std::int64_t granularity_ = 1000000;  // 1 ms
  std::int64_t racy_window_ = -1;        // -1: use the granularity
  std::vector<std::string> sftp_;         // subtrees with SFTPv3 timestamps
  bool dtype_ = true;
};

}  // namespace detail
}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_MOCK_STORE_HPP
