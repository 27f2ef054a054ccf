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

#include "detail/mock_setup.hpp"
#include "filesystem.hpp"


namespace treesync {
inline namespace v0 {

class mock_fs : public detail::mock_setup {
 public:
  // ---- setup API: detail::mock_setup (write, mkdir, symlink, ..., read, tree) ----------------
  using mock_setup::remove;
  using mock_setup::rename;
  using mock_setup::set_mtime;

  // ---- the filesystem requirements (see filesystem.hpp [treesync.filesystem]) ------------------

  /// Everything in the contract, in memory: owners, specials, hard links, xattrs, link mtimes,
  /// ctimes and inode identity (sync_dir only counts; there is nothing to make durable).
  static constexpr filesystem_capabilities capabilities() noexcept { return filesystem_capabilities::all(); }


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

  dir_handle open_root(const std::filesystem::path& p, std::error_code& ec);

  void make_root(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec);

  std::vector<dir_entry> list(dir_handle& d, std::error_code& ec);

  stat_info stat(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::stat, join(d.path, name), ec)) return {};
    const std::uint64_t ino = child(d, name, follow, ec);
    return ec ? stat_info{} : observe(join(d.path, name), info(ino));
  }

  dir_handle open_dir(dir_handle& d, const std::string& name, bool follow, std::error_code& ec);

  copy_result copy_file(dir_handle& sd, const std::string& name, dir_handle& dd, const std::string& dst_name,
                        const stat_info& expected, const copy_options& opt, std::error_code& ec);

  bool same_content(dir_handle& a, const std::string& an, bool follow, dir_handle& b, const std::string& bn,
                    std::error_code& ec);

  void set_mode(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec);

  void set_mtime(dir_handle& d, const std::string& name, std::int64_t ns, std::error_code& ec);

  void rename(dir_handle& d, const std::string& from, const std::string& to, std::error_code& ec);

  void remove(dir_handle& d, const std::string& name, std::error_code& ec);

  void remove_dir(dir_handle& d, const std::string& name, std::error_code& ec);

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

  std::string read_link(dir_handle& d, const std::string& name, std::error_code& ec);

  void set_owner(dir_handle& d, const std::string& name, std::int64_t uid, std::int64_t gid, std::error_code& ec);

  void make_special(dir_handle& d, const std::string& name, const stat_info& st, std::error_code& ec);

  void sync_dir(dir_handle& d, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!begin(op::fsync, d.path, ec)) return;
    ++counters_.syncs;
  }

  void link(dir_handle& td, const std::string& target, dir_handle& d, const std::string& name, std::error_code& ec);

  void move(dir_handle& from, const std::string& name, dir_handle& to, const std::string& to_name,
            std::error_code& ec);

  void copy_xattrs(dir_handle& src, dir_handle& dst, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    const auto& attrs = nodes_.at(src.ino).xattrs;
    if (attrs.empty()) return ec.clear();
    if (!begin(op::setxattr, dst.path, ec)) return;
    nodes_.at(dst.ino).xattrs = attrs;
  }

  // ---- the state file (state_file): counted and faulted like every other operation -----------

  // By the directory's handle and the file's name, as posix_fs: only a regular file is read,
  // replaced or removed (errc::state_not_regular otherwise).  read_state hands the content over in
  // pieces of 4 KiB (a line may straddle two).
  template <class Take>
  void read_state(dir_handle& d, const std::string& name, Take&& take, std::error_code& ec) {
    std::string data;
    {
      const std::lock_guard<std::recursive_mutex> lock(mu_);
      if (!begin(op::open_read, join(d.path, name), ec)) return;
      if (!state_regular(d, name, ec)) return;
      data = nodes_.at(nodes_.at(d.ino).entries.at(name)).data;
    }
    for (std::size_t off = 0; off < data.size(); off += 4096)
      if (!take(std::string_view(data).substr(off, 4096))) return;
  }
  /// Written under a temporary name in the same directory, then renamed over the file: a fault
  /// (or an exception thrown by the operation hook: a simulated crash) at either step leaves the
  /// old file whole.
  void save_state(dir_handle& d, const std::string& name, std::string_view text, std::error_code& ec);
  void drop_state(dir_handle& d, const std::string& name, std::error_code& ec) {
    const std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!state_regular(d, name, ec)) return;
    remove(d, name, ec);
  }

  /// Whether `name` in `d` is a regular file (ENOENT when missing, errc::state_not_regular else).
  bool state_regular(dir_handle& d, const std::string& name, std::error_code& ec);

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
  time_model timestamps(dir_handle& d, std::error_code& ec) const;

 private:
  /// The end of copy_file once the data is in (inode `src` copied to `dst`, named `dst_name` in
  /// `dd`): owner, extended attributes, mode, mtime and, if asked, fsync, each counted and faulted.
  void finish_copy(dir_handle& dd, const std::string& dst_name, std::uint64_t src, std::uint64_t dst,
                   const stat_info& expected, const copy_options& opt, copy_result& res, std::error_code& ec);
};

// ---- mock_fs: the members' bodies, in the order of their declarations ---------------------------

inline mock_fs::dir_handle mock_fs::open_root(const std::filesystem::path& p, std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!begin(op::open_dir, p.string(), ec)) return {};
  std::string canon;
  const std::uint64_t ino = resolve(p.string(), true, ec, &canon);
  if (ec) return {};
  if (nodes_.at(ino).type != file_type::directory) return err(ec, std::errc::not_a_directory), dir_handle{};
  return {ino, canon};
}

inline void mock_fs::make_root(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!begin(op::mkdir, p.string(), ec)) return;
  auto [parent, name] = split_parent(p.string());
  const std::uint64_t dir = resolve(parent, true, ec);
  if (ec) return;
  create_in(dir, name, file_type::directory, mode, ec);
}

inline std::vector<dir_entry> mock_fs::list(dir_handle& d, std::error_code& ec) {
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

inline mock_fs::dir_handle mock_fs::open_dir(dir_handle& d, const std::string& name, bool follow,
                                             std::error_code& ec) {
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

inline copy_result mock_fs::copy_file(dir_handle& sd, const std::string& name, dir_handle& dd,
                                      const std::string& dst_name, const stat_info& expected,
                                      const copy_options& opt, std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  copy_result res;
  res.method = copy_method::memory;
  if (!begin(op::open_read, join(sd.path, name), ec)) return res;
  const std::uint64_t src = child(sd, name, opt.follow, ec);
  if (ec) return res;
  if (!check_readable(src, opt.follow, ec)) return res;
  res.destination_failed = true;  // until the data is read: a failure is the destination's
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
  // the source is read now: a hook that changed it above is seen, as a racing writer would be;
  // the cancel flag is checked before the data moves (one chunk: the whole of it)
  res.destination_failed = false;
  if (opt.cancel && opt.cancel->load()) return err(ec, std::errc::operation_canceled), res;
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
  finish_copy(dd, dst_name, src, dst, expected, opt, res, ec);
  return res;
}

inline bool mock_fs::same_content(dir_handle& a, const std::string& an, bool follow, dir_handle& b,
                                  const std::string& bn, std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!begin(op::open_read, join(a.path, an), ec)) return false;
  const std::uint64_t x = child(a, an, follow, ec);
  if (ec || !check_readable(x, follow, ec)) return false;
  if (!begin(op::open_read, join(b.path, bn), ec)) return false;
  const std::uint64_t y = child(b, bn, false, ec);
  if (ec || !check_readable(y, false, ec)) return false;
  return nodes_.at(x).data == nodes_.at(y).data;
}

inline void mock_fs::set_mode(dir_handle& d, const std::string& name, std::uint32_t mode,
                              std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!begin(op::chmod, join(d.path, name), ec)) return;
  const std::uint64_t ino = name == "." ? d.ino : child(d, name, true, ec);  // chmod follows links
  if (ec) return;
  nodes_.at(ino).mode = mode & 07777;
  nodes_.at(ino).ctime = stamp();
}

inline void mock_fs::set_mtime(dir_handle& d, const std::string& name, std::int64_t ns, std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!begin(op::utime, join(d.path, name), ec)) return;
  const std::uint64_t ino = name == "." ? d.ino : child(d, name, false, ec);
  if (ec) return;
  nodes_.at(ino).mtime = ns;
  nodes_.at(ino).ctime = stamp();
}

inline void mock_fs::rename(dir_handle& d, const std::string& from, const std::string& to,
                            std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!begin(op::rename, join(d.path, from), ec)) return;
  if (!may_write(d.ino, ec)) return;
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

inline void mock_fs::remove(dir_handle& d, const std::string& name, std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!begin(op::unlink, join(d.path, name), ec)) return;
  if (!may_write(d.ino, ec)) return;
  auto& entries = nodes_.at(d.ino).entries;
  const auto it = entries.find(name);
  if (it == entries.end()) return err(ec, std::errc::no_such_file_or_directory);
  if (nodes_.at(it->second).type == file_type::directory) return err(ec, std::errc::is_a_directory);
  unlink_tree(it->second);
  entries.erase(it);
  touch_dir(d.ino);
}

inline void mock_fs::remove_dir(dir_handle& d, const std::string& name, std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!begin(op::rmdir, join(d.path, name), ec)) return;
  if (!may_write(d.ino, ec)) return;
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

inline std::string mock_fs::read_link(dir_handle& d, const std::string& name, std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!begin(op::readlink, join(d.path, name), ec)) return {};
  const std::uint64_t ino = child(d, name, false, ec);
  if (ec) return {};
  if (nodes_.at(ino).type != file_type::symlink) return err(ec, std::errc::invalid_argument), std::string{};
  return nodes_.at(ino).data;
}

inline void mock_fs::set_owner(dir_handle& d, const std::string& name, std::int64_t uid, std::int64_t gid,
                               std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!begin(op::chown, join(d.path, name), ec)) return;
  const std::uint64_t ino = child(d, name, false, ec);
  if (ec) return;
  inode& n = nodes_.at(ino);
  if (!may_chown(n, uid, gid, ec)) return;
  if (uid >= 0) n.uid = static_cast<std::uint32_t>(uid);
  if (gid >= 0) n.gid = static_cast<std::uint32_t>(gid);
  n.ctime = stamp();
}

inline void mock_fs::make_special(dir_handle& d, const std::string& name, const stat_info& st,
                                  std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!begin(op::mknod, join(d.path, name), ec)) return;
  if (!is_special(st.type)) return err(ec, std::errc::invalid_argument);
  if (uid_ != 0 && (st.type == file_type::block || st.type == file_type::character))
    return err(ec, std::errc::operation_not_permitted);
  const std::uint64_t ino = create_in(d.ino, name, st.type, 0600, ec);
  if (!ec) nodes_.at(ino).rdev = st.rdev;
}

inline void mock_fs::link(dir_handle& td, const std::string& target, dir_handle& d, const std::string& name,
                          std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!begin(op::link, join(d.path, name), ec)) return;
  const std::uint64_t ino = child(td, target, false, ec);
  if (ec) return;
  if (nodes_.at(ino).type == file_type::directory) return err(ec, std::errc::operation_not_permitted);
  if (nodes_.at(d.ino).entries.count(name)) return err(ec, std::errc::file_exists);
  if (!may_write(d.ino, ec)) return;
  link_into(d.ino, name, ino);
  nodes_.at(ino).ctime = stamp();
}

inline void mock_fs::move(dir_handle& from, const std::string& name, dir_handle& to,
                          const std::string& to_name, std::error_code& ec) {
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

inline void mock_fs::save_state(dir_handle& d, const std::string& name, std::string_view text,
                                std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  const std::string temp = ".treesync-tmp-state";
  if (!begin(op::open_write, join(d.path, temp), ec)) return;
  if (!state_regular(d, name, ec) && ec != std::errc::no_such_file_or_directory) return;
  ec.clear();
  auto& entries = nodes_.at(d.ino).entries;
  if (entries.count(temp)) {
    unlink_tree(entries.at(temp));
    entries.erase(temp);
  }
  const std::uint64_t ino = create_in(d.ino, temp, file_type::regular, 0644, ec);
  if (ec) return;
  nodes_.at(ino).data = std::string(text);
  rename(d, temp, name, ec);
}

inline bool mock_fs::state_regular(dir_handle& d, const std::string& name, std::error_code& ec) {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  ec.clear();
  const auto& entries = nodes_.at(d.ino).entries;
  const auto it = entries.find(name);
  if (it == entries.end()) return err(ec, std::errc::no_such_file_or_directory), false;
  if (nodes_.at(it->second).type != file_type::regular) return ec = errc::state_not_regular, false;
  return true;
}

inline time_model mock_fs::timestamps(dir_handle& d, std::error_code& ec) const {
  const std::lock_guard<std::recursive_mutex> lock(mu_);
  ec.clear();
  time_model m;
  if (sftp_at(d.path)) {
    m.resolution_ns = 1000000000;
    m.ctime = false;
  }
  return m;
}

inline void mock_fs::finish_copy(dir_handle& dd, const std::string& dst_name, std::uint64_t src,
                                 std::uint64_t dst, const stat_info& expected, const copy_options& opt,
                                 copy_result& res, std::error_code& ec) {
  res.destination_failed = true;  // the copy's metadata
  if (opt.owner || opt.group) {
    if (!begin(op::chown, join(dd.path, dst_name), ec)) return;
    if (!may_chown(nodes_.at(dst), opt.owner ? std::int64_t(expected.uid) : -1,
                   opt.group ? std::int64_t(expected.gid) : -1, ec))
      return;
    if (opt.owner) nodes_.at(dst).uid = expected.uid;
    if (opt.group) nodes_.at(dst).gid = expected.gid;
  }
  if (opt.xattrs && !nodes_.at(src).xattrs.empty()) {
    if (!begin(op::setxattr, join(dd.path, dst_name), ec)) return;
    nodes_.at(dst).xattrs = nodes_.at(src).xattrs;
  }
  if (!begin(op::chmod, join(dd.path, dst_name), ec)) return;
  nodes_.at(dst).mode = expected.mode & 07777;
  if (!begin(op::utime, join(dd.path, dst_name), ec)) return;
  nodes_.at(dst).mtime = expected.mtime_ns;
  nodes_.at(dst).ctime = stamp();
  if (opt.sync) {
    if (!begin(op::fsync, join(dd.path, dst_name), ec)) return;
    ++counters_.syncs;
  }
  res.destination_failed = false;
}

}  // namespace v0
}  // namespace treesync

// the engine for mock_fs compiled once (treesync::core): from here or from sync.hpp, whichever
// comes second
#if defined(TREESYNC_SYNC_HPP)
#include "detail/mock_engine.hpp"
#endif

#endif  // TREESYNC_MOCK_FS_HPP
