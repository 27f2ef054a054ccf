// treesync/detail/mock_setup.hpp - mock_fs's setup API: building a tree and reading it back
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of mock_fs: include <treesync/mock_fs.hpp>.
#ifndef TREESYNC_DETAIL_MOCK_SETUP_HPP
#define TREESYNC_DETAIL_MOCK_SETUP_HPP

#include "mock_store.hpp"

namespace treesync {
inline namespace v0 {
namespace detail {

/// What a test does to a mock_fs directly, by absolute path: make and change entries, and read
/// them back.  Not counted, not hooked, never failed by injection; a missing path throws.
class mock_setup : public mock_store {
 public:
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

 private:
  void make_special(const std::string& path, file_type t) {
    auto [parent, name] = split_parent(path);
    const std::uint64_t dir = ensure_dirs(parent);
    if (nodes_.at(dir).entries.count(name)) remove(path);
    link_into(dir, name, new_inode(t, 0644));
  }
};

}  // namespace detail
}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_MOCK_SETUP_HPP
