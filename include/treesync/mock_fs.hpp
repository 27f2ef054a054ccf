// mock_fs.hpp - an in-memory filesystem for testing treesync and your own policies
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// Inodes (hard links, device+inode identity), file content, directories, symlinks (relative,
// absolute, dangling, loops), FIFOs and sockets, nanosecond mtimes and ctimes from a controllable
// clock with a timestamp granularity, permission bits.  Every filesystem operation the engine
// performs is counted by kind; a failure (an errno) can be injected at the N-th operation of a
// kind, at the N-th operation of any kind, or on a path; a hook sees every operation before it
// happens and may change the tree (a file vanishing or growing in the middle of a run).
//
// The setup API (write, mkdir, symlink, ...) is for tests: it is not counted, not hooked and never
// fails by injection.
#ifndef TREESYNC_MOCK_FS_HPP
#define TREESYNC_MOCK_FS_HPP

#include <treesync/treesync.hpp>

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

class mock_fs {
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

  using hook_fn = std::function<void(op, const std::string& path)>;

  mock_fs() {
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

  // ---- setup API (not counted, never faulted) -------------------------------------------------

  void mkdir(const std::string& path, std::uint32_t mode = 0755) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    const std::uint64_t ino = ensure_dirs(path);
    nodes_.at(ino).mode = mode;
  }

  /// Creates or overwrites a regular file (overwriting keeps the inode), creating parents.
  void write(const std::string& path, std::string_view content, std::uint32_t mode = 0644) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    auto [parent, name] = split_parent(path);
    const std::uint64_t dir = ensure_dirs(parent);
    auto& entries = nodes_.at(dir).entries;
    auto it = entries.find(name);
    if (it != entries.end() && nodes_.at(it->second).type == file_type::regular) {
      inode& n = nodes_.at(it->second);
      n.data = std::string(content);
      n.mtime = n.ctime = stamp();
      return;
    }
    if (it != entries.end()) remove(path);
    const std::uint64_t ino = new_inode(file_type::regular, mode);
    nodes_.at(ino).data = std::string(content);
    link_into(dir, name, ino);
  }

  void symlink(const std::string& path, std::string_view target) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    auto [parent, name] = split_parent(path);
    const std::uint64_t dir = ensure_dirs(parent);
    if (nodes_.at(dir).entries.count(name)) remove(path);
    const std::uint64_t ino = new_inode(file_type::symlink, 0777);
    nodes_.at(ino).data = std::string(target);
    link_into(dir, name, ino);
  }

  void fifo(const std::string& path) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    make_special(path, file_type::fifo);
  }
  void socket(const std::string& path) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    make_special(path, file_type::socket);
  }
  /// A device node (file_type::block or file_type::character) with a device number.
  void device(const std::string& path, file_type type, std::uint64_t rdev) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    make_special(path, type);
    nodes_.at(must(path, false)).rdev = rdev;
  }
  void chown(const std::string& path, std::uint32_t uid, std::uint32_t gid) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    inode& n = nodes_.at(must(path, false));
    n.uid = uid;
    n.gid = gid;
    n.ctime = stamp();
  }
  void set_xattr(const std::string& path, const std::string& name, const std::string& value) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    nodes_.at(must(path, false)).xattrs[name] = value;
  }
  /// Gives a directory another device number, as the root of another mounted filesystem.
  void mount_point(const std::string& path, std::uint64_t dev) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    nodes_.at(must(path, true)).dev = dev;
  }

  /// A second name for an existing inode (a hard link).
  void hard_link(const std::string& existing, const std::string& path) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    const std::uint64_t ino = must(existing, false);
    auto [parent, name] = split_parent(path);
    const std::uint64_t dir = ensure_dirs(parent);
    link_into(dir, name, ino);
  }

  void set_mtime(const std::string& path, std::int64_t ns) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    inode& n = nodes_.at(must(path, false));
    n.mtime = ns;
    n.ctime = stamp();
  }
  void chmod(const std::string& path, std::uint32_t mode) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    inode& n = nodes_.at(must(path, false));
    n.mode = mode & 07777;
    n.ctime = stamp();
  }
  /// Removes an entry (a directory with everything in it).
  void remove(const std::string& path) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    auto [parent, name] = split_parent(path);
    const std::uint64_t dir = must(parent, true);
    auto& entries = nodes_.at(dir).entries;
    auto it = entries.find(name);
    if (it == entries.end()) throw std::runtime_error("mock_fs::remove: no such entry: " + path);
    unlink_tree(it->second);
    entries.erase(it);
    touch_dir(dir);
  }
  void rename(const std::string& from, const std::string& to) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    auto [fp, fname] = split_parent(from);
    auto [tp, tname] = split_parent(to);
    const std::uint64_t fdir = must(fp, true);
    const std::uint64_t tdir = ensure_dirs(tp);
    const std::uint64_t ino = nodes_.at(fdir).entries.at(fname);
    if (nodes_.at(tdir).entries.count(tname)) remove(to);
    nodes_.at(fdir).entries.erase(fname);
    nodes_.at(tdir).entries[tname] = ino;
    touch_dir(fdir);
    touch_dir(tdir);
  }

  bool exists(const std::string& path) const {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    std::error_code ec;
    resolve(path, false, ec);
    return !ec;
  }
  /// lstat of a path.
  stat_info lstat(const std::string& path) const {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    return observe(path, info(must(path, false)));
  }
  std::string read(const std::string& path) const {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    const inode& n = nodes_.at(must(path, true));
    if (n.type != file_type::regular) throw std::runtime_error("mock_fs::read: not a file: " + path);
    return n.data;
  }

  /// Every entry below `root` (not following links), keyed by relative path.
  std::map<std::string, node> tree(const std::string& root) const {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    std::map<std::string, node> out;
    collect(must(root, true), "", out);
    if (!sftp_.empty()) {  // what a stat would show under sftp_semantics()
      for (auto& kv : out) kv.second.mtime_ns = observe(root + "/" + kv.first, stat_info{file_type::regular, 0, kv.second.mtime_ns}).mtime_ns;
    }
    return out;
  }

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

  // ---- the filesystem requirements (see treesync.hpp [treesync.traits]) -----------------------

  stat_info stat_path(const std::filesystem::path& p, bool follow, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::stat, p.string(), ec)) return {};
    const std::uint64_t ino = resolve(p.string(), follow, ec);
    return ec ? stat_info{} : observe(p.string(), info(ino));
  }

  std::filesystem::path canonical(const std::filesystem::path& p, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    std::string out;
    resolve(p.string(), true, ec, &out);
    return ec ? std::filesystem::path{} : std::filesystem::path(out);
  }

  dir_handle open_root(const std::filesystem::path& p, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::open_dir, p.string(), ec)) return {};
    std::string canon;
    const std::uint64_t ino = resolve(p.string(), true, ec, &canon);
    if (ec) return {};
    if (nodes_.at(ino).type != file_type::directory) return err(ec, std::errc::not_a_directory), dir_handle{};
    return {ino, canon};
  }

  void make_root(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::mkdir, p.string(), ec)) return;
    auto [parent, name] = split_parent(p.string());
    const std::uint64_t dir = resolve(parent, true, ec);
    if (ec) return;
    create_in(dir, name, file_type::directory, mode, ec);
  }

  std::vector<dir_entry> list(dir_handle& d, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::list, d.path, ec)) return {};
    const inode& n = nodes_.at(d.ino);
    if (n.type != file_type::directory) return err(ec, std::errc::not_a_directory), std::vector<dir_entry>{};
    std::vector<dir_entry> out;
    out.reserve(n.entries.size());
    // reverse order: the engine must not rely on listings being sorted
    for (auto it = n.entries.rbegin(); it != n.entries.rend(); ++it)
      out.push_back({it->first, dtype_ ? nodes_.at(it->second).type : file_type::unknown});
    return out;
  }

  stat_info stat(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::stat, join(d.path, name), ec)) return {};
    const std::uint64_t ino = child(d, name, follow, ec);
    return ec ? stat_info{} : observe(join(d.path, name), info(ino));
  }

  dir_handle open_dir(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (name == "..") {  // the parent, by path: mock handles do not know their parents
      if (!begin(op::open_dir, d.path, ec)) return {};
      const std::string up = split_parent(d.path).first;
      const std::uint64_t ino = resolve(up, true, ec);
      if (ec) return {};
      return {ino, up};
    }
    const std::string path = join(d.path, name);
    if (!begin(op::open_dir, path, ec)) return {};
    const std::uint64_t ino = child(d, name, false, ec);
    if (ec) return {};
    std::uint64_t target = ino;
    if (nodes_.at(ino).type == file_type::symlink) {
      if (!follow) return err(ec, std::errc::too_many_symbolic_link_levels), dir_handle{};
      target = child(d, name, true, ec);
      if (ec) return {};
    }
    if (nodes_.at(target).type != file_type::directory) return err(ec, std::errc::not_a_directory), dir_handle{};
    return {target, path};
  }

  copy_result copy_file(dir_handle& sd, const std::string& name, dir_handle& dd, const std::string& dst_name,
                        const stat_info& expected, const copy_options& opt, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    copy_result res;
    res.method = copy_method::memory;
    if (!begin(op::open_read, join(sd.path, name), ec)) return res;
    const std::uint64_t src = child(sd, name, opt.follow, ec);
    if (ec) return res;
    if (!check_readable(src, opt.follow, ec)) return res;
    if (!begin(op::open_write, join(dd.path, dst_name), ec)) return res;
    std::uint64_t dst = 0;
    if (opt.replace) {
      dst = child(dd, dst_name, false, ec);
      if (ec) return res;
      if (nodes_.at(dst).type == file_type::symlink) return err(ec, std::errc::too_many_symbolic_link_levels), res;
      if (nodes_.at(dst).type != file_type::regular) return err(ec, std::errc::is_a_directory), res;
    } else {
      dst = create_in(dd.ino, dst_name, file_type::regular, 0600, ec);
      if (ec) return res;
    }
    // the source is read now: a hook that changed it above is seen, as a racing writer would be
    if (!nodes_.count(src)) return err(ec, std::errc::no_such_file_or_directory), res;
    const std::string data = nodes_.at(src).data;
    inode& out = nodes_.at(dst);
    out.data = data;
    out.mtime = out.ctime = stamp();
    counters_.bytes_written += data.size();
    res.bytes = data.size();
    const stat_info after = observe(join(sd.path, name), info(src));
    if (after.size != expected.size || after.mtime_ns != expected.mtime_ns || data.size() != expected.size) {
      ec = errc::changed_during_copy;
      return res;
    }
    if (opt.owner || opt.group) {
      if (!begin(op::chown, join(dd.path, dst_name), ec)) return res;
      if (opt.owner) nodes_.at(dst).uid = expected.uid;
      if (opt.group) nodes_.at(dst).gid = expected.gid;
    }
    if (opt.xattrs && !nodes_.at(src).xattrs.empty()) {
      if (!begin(op::setxattr, join(dd.path, dst_name), ec)) return res;
      nodes_.at(dst).xattrs = nodes_.at(src).xattrs;
    }
    if (!begin(op::chmod, join(dd.path, dst_name), ec)) return res;
    nodes_.at(dst).mode = expected.mode & 07777;
    if (!begin(op::utime, join(dd.path, dst_name), ec)) return res;
    nodes_.at(dst).mtime = expected.mtime_ns;
    nodes_.at(dst).ctime = stamp();
    if (opt.sync) {
      if (!begin(op::fsync, join(dd.path, dst_name), ec)) return res;
      ++counters_.syncs;
    }
    return res;
  }

  bool same_content(dir_handle& a, const std::string& an, bool follow, dir_handle& b, const std::string& bn,
                    std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::open_read, join(a.path, an), ec)) return false;
    const std::uint64_t x = child(a, an, follow, ec);
    if (ec || !check_readable(x, follow, ec)) return false;
    if (!begin(op::open_read, join(b.path, bn), ec)) return false;
    const std::uint64_t y = child(b, bn, false, ec);
    if (ec || !check_readable(y, false, ec)) return false;
    return nodes_.at(x).data == nodes_.at(y).data;
  }

  void set_mode(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::chmod, join(d.path, name), ec)) return;
    const std::uint64_t ino = name == "." ? d.ino : child(d, name, true, ec);  // chmod follows links
    if (ec) return;
    nodes_.at(ino).mode = mode & 07777;
    nodes_.at(ino).ctime = stamp();
  }

  void set_mtime(dir_handle& d, const std::string& name, std::int64_t ns, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::utime, join(d.path, name), ec)) return;
    const std::uint64_t ino = name == "." ? d.ino : child(d, name, false, ec);
    if (ec) return;
    nodes_.at(ino).mtime = ns;
    nodes_.at(ino).ctime = stamp();
  }

  void rename(dir_handle& d, const std::string& from, const std::string& to, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::rename, join(d.path, from), ec)) return;
    auto& entries = nodes_.at(d.ino).entries;
    const auto it = entries.find(from);
    if (it == entries.end()) return err(ec, std::errc::no_such_file_or_directory);
    const std::uint64_t moving = it->second;
    const auto old = entries.find(to);
    if (old != entries.end()) {
      const inode& o = nodes_.at(old->second);
      const bool moving_dir = nodes_.at(moving).type == file_type::directory;
      if (o.type == file_type::directory && !moving_dir) return err(ec, std::errc::is_a_directory);
      if (o.type != file_type::directory && moving_dir) return err(ec, std::errc::not_a_directory);
      if (o.type == file_type::directory && !o.entries.empty()) return err(ec, std::errc::directory_not_empty);
      unlink_tree(old->second);
      entries.erase(old);
    }
    entries.erase(from);
    entries[to] = moving;
    nodes_.at(moving).ctime = stamp();
    touch_dir(d.ino);
  }

  void remove(dir_handle& d, const std::string& name, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::unlink, join(d.path, name), ec)) return;
    auto& entries = nodes_.at(d.ino).entries;
    const auto it = entries.find(name);
    if (it == entries.end()) return err(ec, std::errc::no_such_file_or_directory);
    if (nodes_.at(it->second).type == file_type::directory) return err(ec, std::errc::is_a_directory);
    unlink_tree(it->second);
    entries.erase(it);
    touch_dir(d.ino);
  }

  void remove_dir(dir_handle& d, const std::string& name, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::rmdir, join(d.path, name), ec)) return;
    auto& entries = nodes_.at(d.ino).entries;
    const auto it = entries.find(name);
    if (it == entries.end()) return err(ec, std::errc::no_such_file_or_directory);
    const inode& n = nodes_.at(it->second);
    if (n.type != file_type::directory) return err(ec, std::errc::not_a_directory);
    if (!n.entries.empty()) return err(ec, std::errc::directory_not_empty);
    unlink_tree(it->second);
    entries.erase(it);
    touch_dir(d.ino);
  }

  void make_dir(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::mkdir, join(d.path, name), ec)) return;
    create_in(d.ino, name, file_type::directory, mode, ec);
  }

  void make_symlink(dir_handle& d, const std::string& name, const std::string& target, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::symlink, join(d.path, name), ec)) return;
    const std::uint64_t ino = create_in(d.ino, name, file_type::symlink, 0777, ec);
    if (!ec) nodes_.at(ino).data = target;
  }

  std::string read_link(dir_handle& d, const std::string& name, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::readlink, join(d.path, name), ec)) return {};
    const std::uint64_t ino = child(d, name, false, ec);
    if (ec) return {};
    if (nodes_.at(ino).type != file_type::symlink) return err(ec, std::errc::invalid_argument), std::string{};
    return nodes_.at(ino).data;
  }

  void set_owner(dir_handle& d, const std::string& name, std::int64_t uid, std::int64_t gid, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::chown, join(d.path, name), ec)) return;
    const std::uint64_t ino = child(d, name, false, ec);
    if (ec) return;
    inode& n = nodes_.at(ino);
    if (uid >= 0) n.uid = static_cast<std::uint32_t>(uid);
    if (gid >= 0) n.gid = static_cast<std::uint32_t>(gid);
    n.ctime = stamp();
  }

  void make_special(dir_handle& d, const std::string& name, const stat_info& st, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::mknod, join(d.path, name), ec)) return;
    if (!is_special(st.type)) return err(ec, std::errc::invalid_argument);
    const std::uint64_t ino = create_in(d.ino, name, st.type, 0600, ec);
    if (!ec) nodes_.at(ino).rdev = st.rdev;
  }

  void sync_dir(dir_handle& d, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::fsync, d.path, ec)) return;
    ++counters_.syncs;
  }

  void link(dir_handle& td, const std::string& target, dir_handle& d, const std::string& name, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::link, join(d.path, name), ec)) return;
    const std::uint64_t ino = child(td, target, false, ec);
    if (ec) return;
    if (nodes_.at(ino).type == file_type::directory) return err(ec, std::errc::operation_not_permitted);
    if (nodes_.at(d.ino).entries.count(name)) return err(ec, std::errc::file_exists);
    link_into(d.ino, name, ino);
    nodes_.at(ino).ctime = stamp();
  }

  void move(dir_handle& from, const std::string& name, dir_handle& to, const std::string& to_name,
            std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::rename, join(from.path, name), ec)) return;
    auto& src = nodes_.at(from.ino).entries;
    const auto it = src.find(name);
    if (it == src.end()) return err(ec, std::errc::no_such_file_or_directory);
    const std::uint64_t ino = it->second;
    auto& dst = nodes_.at(to.ino).entries;
    const auto old = dst.find(to_name);
    if (old != dst.end()) {
      const inode& o = nodes_.at(old->second);
      if (o.type == file_type::directory && !o.entries.empty()) return err(ec, std::errc::directory_not_empty);
      unlink_tree(old->second);
      dst.erase(old);
    }
    src.erase(name);
    nodes_.at(to.ino).entries[to_name] = ino;
    nodes_.at(ino).ctime = stamp();
    touch_dir(from.ino);
    touch_dir(to.ino);
  }

  void copy_xattrs(dir_handle& src, dir_handle& dst, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    const auto& attrs = nodes_.at(src.ino).xattrs;
    if (attrs.empty()) return ec.clear();
    if (!begin(op::setxattr, dst.path, ec)) return;
    nodes_.at(dst.ino).xattrs = attrs;
  }

  std::int64_t now() const noexcept {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    return now_;
  }
  std::int64_t racy_window() const noexcept {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    return racy_window_ >= 0 ? racy_window_ : granularity_;
  }
  /// Nanosecond mtimes and a ctime of its own, or whole seconds without ctime under
  /// sftp_semantics().
  time_model timestamps(dir_handle& d, std::error_code& ec) const {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    ec.clear();
    time_model m;
    if (sftp_at(d.path)) {
      m.resolution_ns = 1000000000;
      m.ctime = false;
    }
    return m;
  }

 private:
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

  struct fault {
    std::optional<op> kind;
    std::size_t at;  // counter value that fails (kind or total)
    std::string path;
    std::errc error;
    bool by_path;
  };

  static void err(std::error_code& ec, std::errc e) { ec = std::make_error_code(e); }

  std::int64_t stamp() const noexcept { return now_ - ((now_ % granularity_) + granularity_) % granularity_; }

  static std::string join(const std::string& dir, const std::string& name) {
    if (name == ".") return dir;
    return dir == "/" ? "/" + name : dir + "/" + name;
  }

  // Counts the operation, runs the hook, applies injected faults.
  bool begin(op kind, const std::string& path, std::error_code& ec) {
    ec.clear();
    ++counters_.by_kind[static_cast<std::size_t>(kind)];
    if (hook_) hook_(kind, path);
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

  std::uint64_t new_inode(file_type t, std::uint32_t mode) {
    inode n;
    n.type = t;
    n.mode = mode & 07777;
    n.mtime = n.ctime = stamp();
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

  void make_special(const std::string& path, file_type t) {
    auto [parent, name] = split_parent(path);
    const std::uint64_t dir = ensure_dirs(parent);
    if (nodes_.at(dir).entries.count(name)) remove(path);
    link_into(dir, name, new_inode(t, 0644));
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
  std::int64_t now_ = std::int64_t(1700000000) * 1000000000;
  std::int64_t granularity_ = 1000000;  // 1 ms
  std::int64_t racy_window_ = -1;        // -1: use the granularity
  std::vector<std::string> sftp_;         // subtrees with SFTPv3 timestamps
  bool dtype_ = true;
  counters counters_;
  std::vector<fault> faults_;
  std::size_t triggered_ = 0;
  hook_fn hook_;
  mutable std::recursive_mutex mu_;  // jobs{n} calls in from several threads; hooks re-enter
};

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_MOCK_FS_HPP
