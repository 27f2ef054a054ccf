// treesync/detail/posix_roots.hpp - the POSIX backend's pinned roots: a root path tied to a descriptor
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_DETAIL_POSIX_ROOTS_HPP
#define TREESYNC_DETAIL_POSIX_ROOTS_HPP

#include "../core.hpp"

#include <algorithm>
#include <climits>
#include <memory>
#include <vector>

namespace treesync {
inline namespace v0 {
namespace detail {

#if TREESYNC_HAS_POSIX
/// posix_fs's roots pinned to descriptors (pin_root, pin_missing_root, pin_unreachable): the table
/// posix_fs's stat_path, canonical, open_root and make_root look a root path up in first.
class posix_roots {
 public:
  /// Makes the directory open as `fd` the one the path `p` names for this filesystem (several paths
  /// may be pinned: the CLI pins DST and the directory of --state=FILE): open_root(p)
  /// and stat_path(p) for exactly that path use the descriptor (a duplicate is kept), not the
  /// path, and canonical(p) is the descriptor's.  A caller that checked or read something through
  /// `fd` before the run (the CLI: the walk of DST under rsync's untrusted-symlink rule, DST's
  /// rule files) then runs on that very directory, even if the name was given to another one in
  /// between.  `fd` may be an O_PATH descriptor.
  void pin_root(const std::filesystem::path& p, int fd) { pin(p, fd, std::string()); }

  /// The same for a root `p` that does not exist yet, whose parent directory is open as
  /// `parent_fd` (open_trusted_dir()'s `parent`): stat_path(p) is fstatat() of p's last component
  /// there and never follows a link (a link put there since is refused: ELOOP), make_root(p) is
  /// mkdirat() there, open_root(p) opens it there with O_NOFOLLOW, and canonical() of p's parent
  /// is the descriptor's.  So a missing destination is made and opened in the directory checked,
  /// whatever that directory's path names by then.
  void pin_missing_root(const std::filesystem::path& p, int parent_fd) {
    const std::string leaf = strip(p.native()).substr(strip(p.native()).rfind('/') + 1);
    if (leaf.empty() || leaf == "." || leaf == "..") return;
    pin(p, parent_fd, leaf);
  }

  /// The root `p` (and its parent, for the nesting guard) could not be reached as checked
  /// (open_trusted_dir() failed with `error`, an errno value): stat_path, open_root, make_root and
  /// canonical of `p`, and canonical of its parent, fail with `error`, whatever the path names by
  /// the time the run starts; so the run is refused for what the check met.
  void pin_unreachable(const std::filesystem::path& p, int error) {
    auto d = std::make_shared<pinned_dir>(strip(p.native()), -1, std::string());
    d->error = error ? error : ENOENT;
    add(std::move(d));
  }

 protected:
  posix_roots() = default;

  // pin_root(): `fd` is the root `path`; pin_missing_root(): `fd` is its parent and `leaf` its name
  struct pinned_dir {
    std::string path;  // without trailing separators
    int fd;
    std::string leaf;
    int error = 0;  // pin_unreachable(): what every operation on `path` fails with
    pinned_dir(std::string p, int f, std::string l) : path(std::move(p)), fd(f), leaf(std::move(l)) {}
    pinned_dir(const pinned_dir&) = delete;
    pinned_dir& operator=(const pinned_dir&) = delete;
    ~pinned_dir() {
      if (fd >= 0) ::close(fd);
    }
    std::string parent() const {  // `path` without its last component, as stripped paths spell it
      const std::size_t slash = path.rfind('/');
      return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    }
  };
  static std::string strip(std::string p) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return p;
  }
  // the path the descriptor's directory has now ("" when /proc cannot say)
  static std::string fd_path(int fd) {
    char buf[PATH_MAX + 1];
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
    if (n <= 0 || buf[0] != '/') return std::string();
    return std::string(buf, static_cast<std::size_t>(n));
  }
  void pin(const std::filesystem::path& p, int fd, std::string leaf) {
    const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) return;
    add(std::make_shared<const pinned_dir>(strip(p.native()), own, std::move(leaf)));
  }
  void add(std::shared_ptr<const pinned_dir> d) {
    pins_.erase(std::remove_if(pins_.begin(), pins_.end(), [&d](const auto& e) { return e->path == d->path; }),
                pins_.end());
    pins_.push_back(std::move(d));
  }
  const pinned_dir* pinned(const std::filesystem::path& p) const {
    if (pins_.empty()) return nullptr;
    const std::string want = strip(p.native());
    for (const auto& d : pins_)
      if (d->path == want) return d.get();
    return nullptr;
  }

  std::vector<std::shared_ptr<const pinned_dir>> pins_;  // pin_root(), pin_missing_root(): copies share them
};
#endif  // TREESYNC_HAS_POSIX

}  // namespace detail
}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_POSIX_ROOTS_HPP
