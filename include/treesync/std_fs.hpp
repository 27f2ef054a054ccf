// treesync/std_fs.hpp - the portable backend (std::filesystem only)
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_STD_FS_HPP
#define TREESYNC_STD_FS_HPP

#include "core.hpp"
#include "filesystem.hpp"

namespace treesync {
inline namespace v0 {

// [treesync.std_fs] -----------------------------------------------------------------------------
//
// The portable backend, on std::filesystem alone (Windows, or anywhere posix_fs is not built).
// Differences from posix_fs, all consequences of what std::filesystem offers:
//  - handles are paths: nothing protects against a directory swapped for a symlink mid-run;
//  - identity (the same/nested guard, cycle detection) is the canonical path, not device+inode,
//    so a bind mount is not recognised;
//  - no ctime: racily clean files are not detected (size+mtime is trusted);
//  - mtimes have the resolution of file_time_type; no owners, device nodes, FIFOs or xattrs;
//    a symlink's own mtime is neither read nor set;
//  - data is copied by std::filesystem::copy_file.
// capabilities() declares these (filesystem.hpp); the conformance suite skips what it lacks.

class std_fs {
 public:
  struct dir_handle {
    std::filesystem::path path;
  };

  /// What std::filesystem cannot do, declared (see filesystem_capabilities): set_owner and
  /// make_special report std::errc::operation_not_supported, copy_xattrs and sync_dir do nothing
  /// and succeed, set_mtime leaves a link's own time alone (stat reports 0 for links on both
  /// sides), files have no identity (link copies hard links as separate files under hard_links),
  /// there is no ctime and a handle is a path.
  static constexpr filesystem_capabilities capabilities() noexcept {
    filesystem_capabilities c;
    c.owners = false;
    c.specials = false;
    c.hard_links = false;
    c.xattrs = false;
    c.durable = false;
    c.link_mtime = false;
    c.ctime = false;
    c.file_identity = false;
    c.pinned_handles = false;
    return c;
  }

  explicit std_fs(std::chrono::nanoseconds racy_window = std::chrono::seconds(1))
      : racy_(racy_window.count()),
        // file_time_type's epoch is the library's choice: one fixed offset to the Unix epoch,
        // taken once, keeps conversions exact both ways within a run
        offset_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::filesystem::file_time_type::clock::now().time_since_epoch()) -
                std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())) {}

  stat_info stat_path(const std::filesystem::path& p, bool follow, std::error_code& ec) const {
    return info(p, follow, ec);
  }
  std::filesystem::path canonical(const std::filesystem::path& p, std::error_code& ec) const {
    return std::filesystem::canonical(p, ec);
  }
  dir_handle open_root(const std::filesystem::path& p, std::error_code& ec) const {
    if (!std::filesystem::is_directory(std::filesystem::status(p, ec)) && !ec)
      ec = std::make_error_code(std::errc::not_a_directory);
    return {p};
  }
  void make_root(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec) const {
    make(p, mode, ec);
  }
  std::vector<dir_entry> list(dir_handle& d, std::error_code& ec) const {
    std::vector<dir_entry> out;
    for (std::filesystem::directory_iterator it(d.path, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code tec;
      const auto st = it->symlink_status(tec);
      out.push_back({it->path().filename().string(), tec ? file_type::unknown : kind(st.type())});
    }
    return out;
  }
  stat_info stat(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const {
    // "." is the directory itself, also when the handle was opened through a followed link
    return info(at(d, name), follow || name == ".", ec);
  }
  dir_handle open_dir(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const {
    const auto p = at(d, name);
    const auto st = follow ? std::filesystem::status(p, ec) : std::filesystem::symlink_status(p, ec);
    if (ec) return {};
    if (st.type() == std::filesystem::file_type::symlink)
      ec = std::make_error_code(std::errc::too_many_symbolic_link_levels);
    else if (st.type() != std::filesystem::file_type::directory)
      ec = std::make_error_code(std::errc::not_a_directory);
    return {name == ".." ? d.path.parent_path() : p};
  }
  copy_result copy_file(dir_handle& sd, const std::string& name, dir_handle& dd, const std::string& dst_name,
                        const stat_info& expected, const copy_options& opt, std::error_code& ec) const {
    copy_result res;
    res.method = copy_method::read_write;
    ec.clear();  // the checks below may leave it untouched
    const auto from = at(sd, name), to = at(dd, dst_name);
    if (!opt.follow && std::filesystem::is_symlink(std::filesystem::symlink_status(from, ec)))
      return ec = std::make_error_code(std::errc::too_many_symbolic_link_levels), res;
    if (ec) return res;
    if (!std::filesystem::is_regular_file(std::filesystem::status(from, ec))) {
      if (!ec) ec = errc::special_file;
      return res;
    }
    if (opt.cancel && opt.cancel->load()) return ec = std::make_error_code(std::errc::operation_canceled), res;
    res.destination_failed = true;
    if (!opt.replace && std::filesystem::exists(std::filesystem::symlink_status(to)))
      return ec = std::make_error_code(std::errc::file_exists), res;
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
    // one call does both sides: what only a destination can say is the destination's
    if (ec) return res.destination_failed = ec == std::errc::no_space_on_device || ec == std::errc::read_only_file_system ||
                                            ec == std::errc::file_too_large || ec == std::errc::is_a_directory,
                   res;
    res.bytes = std::filesystem::file_size(to, ec);
    if (ec) return res;
    res.destination_failed = false;
    const stat_info after = info(from, true, ec);
    if (ec) return res;
    if (after.size != expected.size || after.mtime_ns != expected.mtime_ns || res.bytes != expected.size)
      return ec = errc::changed_during_copy, res;
    set_mode_path(to, expected.mode, ec);
    if (!ec) set_mtime_path(to, expected.mtime_ns, ec);
    res.destination_failed = bool(ec);
    return res;
  }
  bool same_content(dir_handle& a, const std::string& an, bool follow, dir_handle& b, const std::string& bn,
                    std::error_code& ec) const {
    ec.clear();
    // only regular files are opened (by path: a swap after this check is not detected here)
    const auto ta = follow ? std::filesystem::status(at(a, an), ec) : std::filesystem::symlink_status(at(a, an), ec);
    if (ec) return false;
    const auto tb = std::filesystem::symlink_status(at(b, bn), ec);
    if (ec) return false;
    if (!std::filesystem::is_regular_file(ta) || !std::filesystem::is_regular_file(tb)) return ec = errc::special_file, false;
    std::FILE* fa = std::fopen(at(a, an).string().c_str(), "rb");
    std::FILE* fb = std::fopen(at(b, bn).string().c_str(), "rb");
    bool same = fa && fb;
    if (!same) ec = std::make_error_code(std::errc::permission_denied);
    std::vector<char> ba(1 << 16), bb(1 << 16);
    while (same) {
      const std::size_t na = std::fread(ba.data(), 1, ba.size(), fa);
      const std::size_t nb = std::fread(bb.data(), 1, bb.size(), fb);
      if (na != nb || std::memcmp(ba.data(), bb.data(), na) != 0) same = false;
      if (na == 0) break;
    }
    if (fa) std::fclose(fa);
    if (fb) std::fclose(fb);
    return same;
  }
  void set_mode(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) const {
    set_mode_path(at(d, name), mode, ec);
  }
  void set_mtime(dir_handle& d, const std::string& name, std::int64_t ns, std::error_code& ec) const {
    // a link's own mtime is beyond std::filesystem (last_write_time follows it): left alone, and
    // stat reports 0 for links on both sides, so none is ever seen to differ
    const auto p = at(d, name);
    if (std::filesystem::is_symlink(std::filesystem::symlink_status(p, ec)) && !ec) return;
    if (ec) return;
    set_mtime_path(p, ns, ec);
  }
  void rename(dir_handle& d, const std::string& from, const std::string& to, std::error_code& ec) const {
    std::filesystem::rename(at(d, from), at(d, to), ec);
  }
  void remove(dir_handle& d, const std::string& name, std::error_code& ec) const {
    const auto p = at(d, name);
    if (std::filesystem::is_directory(std::filesystem::symlink_status(p)))
      return ec = std::make_error_code(std::errc::is_a_directory), void();
    if (!std::filesystem::remove(p, ec) && !ec) ec = std::make_error_code(std::errc::no_such_file_or_directory);
  }
  void remove_dir(dir_handle& d, const std::string& name, std::error_code& ec) const {
    const auto st = std::filesystem::symlink_status(at(d, name), ec);  // remove() takes files too
    if (!ec && st.type() != std::filesystem::file_type::directory && std::filesystem::exists(st))
      return ec = std::make_error_code(std::errc::not_a_directory), void();
    if (!std::filesystem::remove(at(d, name), ec) && !ec) ec = std::make_error_code(std::errc::no_such_file_or_directory);
  }
  void make_dir(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) const {
    make(at(d, name), mode, ec);
  }
  void make_symlink(dir_handle& d, const std::string& name, const std::string& target, std::error_code& ec) const {
    std::filesystem::create_symlink(target, at(d, name), ec);
  }
  std::string read_link(dir_handle& d, const std::string& name, std::error_code& ec) const {
    return std::filesystem::read_symlink(at(d, name), ec).string();
  }
  void set_owner(dir_handle&, const std::string&, std::int64_t, std::int64_t, std::error_code& ec) const {
    ec = std::make_error_code(std::errc::operation_not_supported);
  }
  void make_special(dir_handle&, const std::string&, const stat_info&, std::error_code& ec) const {
    ec = std::make_error_code(std::errc::operation_not_supported);
  }
  void sync_dir(dir_handle&, std::error_code& ec) const { ec.clear(); }
  void link(dir_handle& td, const std::string& target, dir_handle& d, const std::string& name,
            std::error_code& ec) const {
    std::filesystem::create_hard_link(at(td, target), at(d, name), ec);
  }
  void move(dir_handle& from, const std::string& name, dir_handle& to, const std::string& to_name,
            std::error_code& ec) const {
    std::filesystem::rename(at(from, name), at(to, to_name), ec);
  }
  void copy_xattrs(dir_handle&, dir_handle&, std::error_code& ec) const { ec.clear(); }
  std::int64_t now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  std::int64_t racy_window() const noexcept { return racy_; }

 private:
  static std::filesystem::path at(const dir_handle& d, const std::string& name) {
    return name == "." ? d.path : d.path / name;
  }
  static file_type kind(std::filesystem::file_type t) noexcept {
    switch (t) {
      case std::filesystem::file_type::regular: return file_type::regular;
      case std::filesystem::file_type::directory: return file_type::directory;
      case std::filesystem::file_type::symlink: return file_type::symlink;
      case std::filesystem::file_type::fifo: return file_type::fifo;
      case std::filesystem::file_type::socket: return file_type::socket;
      case std::filesystem::file_type::block: return file_type::block;
      case std::filesystem::file_type::character: return file_type::character;
      case std::filesystem::file_type::not_found: return file_type::none;
      default: return file_type::unknown;
    }
  }
  stat_info info(const std::filesystem::path& p, bool follow, std::error_code& ec) const {
    stat_info i;
    const auto st = follow ? std::filesystem::status(p, ec) : std::filesystem::symlink_status(p, ec);
    if (ec) return i;
    if (st.type() == std::filesystem::file_type::not_found)
      return ec = std::make_error_code(std::errc::no_such_file_or_directory), i;
    i.type = kind(st.type());
    i.mode = static_cast<std::uint32_t>(st.permissions()) & 07777;
    std::error_code ignored;
    if (i.type == file_type::regular) i.size = std::filesystem::file_size(p, ignored);
    if (i.type == file_type::symlink) {
      i.size = std::filesystem::read_symlink(p, ignored).string().size();
    } else {
      const auto t = std::filesystem::last_write_time(p, ignored);
      i.mtime_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count() - offset_.count();
    }
    i.ctime_ns = std::numeric_limits<std::int64_t>::max();  // unknown: never "racily clean"
    // identity: the canonical path (dev 0), for the guards and cycle detection
    if (i.type == file_type::directory) {
      const auto c = std::filesystem::canonical(p, ignored);
      i.ino = std::hash<std::string>{}(c.string());
    }
    return i;
  }
  void set_mode_path(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec) const {
    std::filesystem::permissions(p, static_cast<std::filesystem::perms>(mode & 07777),
                                 std::filesystem::perm_options::replace, ec);
  }
  void set_mtime_path(const std::filesystem::path& p, std::int64_t ns, std::error_code& ec) const {
    const auto d = std::chrono::duration_cast<std::filesystem::file_time_type::duration>(
        std::chrono::nanoseconds(ns) + offset_);
    std::filesystem::last_write_time(p, std::filesystem::file_time_type(d), ec);
  }
  void make(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec) const {
    if (!std::filesystem::create_directory(p, ec) && !ec) ec = std::make_error_code(std::errc::file_exists);
    if (!ec) set_mode_path(p, mode, ec);
  }

  std::int64_t racy_;
  std::chrono::nanoseconds offset_;
};

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_STD_FS_HPP
