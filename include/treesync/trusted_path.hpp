// treesync/trusted_path.hpp - opening a path an operator named (a destination, a rule file, a
// state file) the way rsync 3.5 does: component by component, following a symbolic link only when
// it is owned by root or by the effective user, so that a link another user planted (or raced in)
// anywhere along the path is refused instead of followed.
#ifndef TREESYNC_TRUSTED_PATH_HPP
#define TREESYNC_TRUSTED_PATH_HPP

#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

namespace treesync {

/// What open_trusted() met: the descriptor (or -1 and `error`, an errno value), and when the walk
/// stopped at a symbolic link owned by another user than root or the effective user, that link
/// (`untrusted`: its path as the walk reached it, after the trusted links before it were followed)
/// and its owner.  `error` is then ELOOP, as rsync's open_no_attacker_symlinks() reports it.
struct trusted_open_result {
  int fd = -1;
  int error = 0;
  std::string untrusted;  // "" unless a link was refused
  uid_t owner = 0;        // the refused link's owner
  // open_trusted_dir() only: when the path's last component is missing (and was not reached
  // through a link), its parent's descriptor (O_PATH) and that component; fd is then -1, error ENOENT
  int parent = -1;
  std::string leaf;
  bool dangling = false;  // open_trusted_dir(): the last component is a link to nothing (ENOENT)
  bool refused() const { return !untrusted.empty(); }
  /// Whether the path is missing but its parent was reached: `parent` and `leaf` name it.
  bool missing_leaf() const { return fd < 0 && parent >= 0; }
};

namespace detail {
inline trusted_open_result walk_trusted(std::string_view path, int flags, bool keep_parent, int start = -1,
                                        std::string_view start_shown = {});
}  // namespace detail

/// Opens `path` (absolute, or relative to the working directory) with `flags` (O_NOFOLLOW is
/// added for the last component; O_CREAT is not supported), resolving it one component at a
/// time from descriptors: a symbolic link at any component, the last one included, is followed
/// only when its owner is root or geteuid() (rsync 3.5's rule for operator-supplied paths: the
/// `/backup -> /mnt/disk` link an administrator made is followed, one an unprivileged user planted
/// in a directory it owns is not); at most 40 links are followed.  Empty components and "." are
/// skipped, ".." goes to the parent of the directory reached (the physical one, as the kernel).
/// On failure fd is -1 and `error` says why (ENOENT when a component is missing: nothing there
/// was followed, the caller decides whether a missing path is an error).
inline trusted_open_result open_trusted(std::string_view path, int flags) {
  return detail::walk_trusted(path, flags, false);
}

/// open_trusted() of the directory `path` (O_RDONLY | O_DIRECTORY): the directory a run is to use,
/// reached by the same walk that checked it.  When only its last component is missing, and the
/// walk did not reach that name through a link, the result keeps the parent's descriptor
/// (`parent`, O_PATH) and the name (`leaf`): the caller makes the directory there with mkdirat()
/// and opens it with O_NOFOLLOW, so that the check holds until the open (posix_fs::pin_missing_root).
/// The caller closes `fd` and `parent`.
inline trusted_open_result open_trusted_dir(std::string_view path) {
  return detail::walk_trusted(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, true);
}

/// open_trusted_dir() of `path` relative to the directory open as `dirfd` (a relative `path`; the
/// walk may leave `dirfd` by ".." or an absolute link target), `shown` being that directory's path
/// for the names in the result.  The CLI walks DST, then NAME from DST's descriptor.
inline trusted_open_result open_trusted_dir_at(int dirfd, std::string_view shown, std::string_view path) {
  return detail::walk_trusted(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, true, dirfd, shown);
}

namespace detail {
inline trusted_open_result walk_trusted(std::string_view path, int flags, bool keep_parent, int start,
                                        std::string_view start_shown) {
  trusted_open_result r;
  if (path.empty()) {
    r.error = ENOENT;
    return r;
  }
  const int dir_flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  const uid_t me = ::geteuid();
  int dfd = -1;  // -1: the working directory (AT_FDCWD), not owned
  std::string reached;  // the directory reached, as a path ("" for the working directory)
  if (start >= 0) {  // from the caller's directory: a descriptor of our own
    dfd = ::openat(start, ".", dir_flags);
    if (dfd < 0) {
      r.error = errno;
      return r;
    }
    reached = std::string(start_shown);
  }
  const auto close_dir = [&dfd] {
    if (dfd >= 0) ::close(dfd);
    dfd = -1;
  };
  const auto at = [&dfd] { return dfd >= 0 ? dfd : AT_FDCWD; };
  const auto restart_at_root = [&]() -> bool {
    close_dir();
    dfd = ::open("/", dir_flags);
    reached = "/";
    return dfd >= 0;
  };
  std::string remaining(path);
  if (remaining[0] == '/' && !restart_at_root()) {
    r.error = errno;
    return r;
  }
  int links = 40;
  bool via_link = false;  // the last component was a link, followed
  for (;;) {
    std::size_t start = remaining.find_first_not_of('/');
    if (start == std::string::npos) {  // nothing left: the directory reached itself
      const int fd = ::openat(at(), ".", flags);
      if (fd < 0) r.error = errno;
      r.fd = fd;
      close_dir();
      return r;
    }
    remaining.erase(0, start);
    const std::size_t slash = remaining.find('/');
    const std::string comp = remaining.substr(0, slash);
    const bool last = remaining.find_first_not_of('/', comp.size()) == std::string::npos;
    remaining.erase(0, slash == std::string::npos ? remaining.size() : slash);
    const std::string shown = reached.empty() ? comp : reached.back() == '/' ? reached + comp : reached + '/' + comp;
    if (comp == "." && !last) continue;
    struct stat st;
    if (comp != "." && comp != ".." && ::fstatat(at(), comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      r.error = errno;
      if (r.error == ENOENT && last && keep_parent && via_link) r.dangling = true;
      if (r.error == ENOENT && last && keep_parent && !via_link) {  // the name to make, in the directory reached
        r.parent = dfd >= 0 ? dfd : ::open(".", dir_flags);
        dfd = -1;
        r.leaf = comp;
        if (r.parent < 0) r.error = errno;
      }
      close_dir();
      return r;
    }
    if (comp != "." && comp != ".." && S_ISLNK(st.st_mode)) {
      // the owner checked and the target read on one descriptor of the link: a link exchanged for
      // another after the check is not the one read (readlinkat of "" reads the link itself)
      const int link = ::openat(at(), comp.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (link < 0 || ::fstat(link, &st) != 0 || !S_ISLNK(st.st_mode)) {
        r.error = link < 0 ? errno : EAGAIN;  // (no longer a link: the path changed during the walk)
        if (link >= 0) ::close(link);
        close_dir();
        return r;
      }
      if (st.st_uid != 0 && st.st_uid != me) {
        ::close(link);
        r.error = ELOOP;
        r.untrusted = shown;
        r.owner = st.st_uid;
        close_dir();
        return r;
      }
      if (--links < 0) {
        ::close(link);
        r.error = ELOOP;
        close_dir();
        return r;
      }
      std::string target(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 0) + 256, '\0');
      const ssize_t n = ::readlinkat(link, "", &target[0], target.size());
      ::close(link);
      if (last) via_link = true;  // what the path ends at is reached through a link
      if (n < 0 || static_cast<std::size_t>(n) >= target.size()) {
        r.error = n < 0 ? errno : ENAMETOOLONG;
        close_dir();
        return r;
      }
      target.resize(static_cast<std::size_t>(n));
      if (target.empty()) {
        r.error = ENOENT;
        close_dir();
        return r;
      }
      remaining = target + remaining;  // the link's target, then what followed the link
      if (target[0] == '/' && !restart_at_root()) {
        r.error = errno;
        close_dir();
        return r;
      }
      continue;
    }
    if (last) {
      r.fd = ::openat(at(), comp.c_str(), flags | O_NOFOLLOW);
      if (r.fd < 0) r.error = errno;
      close_dir();
      return r;
    }
    const int next = ::openat(at(), comp.c_str(), dir_flags | O_NOFOLLOW);
    if (next < 0) {
      r.error = errno;
      close_dir();
      return r;
    }
    close_dir();
    dfd = next;
    reached = shown;  // (".." kept as spelled: the name is for messages only)
  }
}
}  // namespace detail

/// Whether the walk of `path` (as open_trusted() does it, nothing opened but O_PATH descriptors)
/// meets a symbolic link owned by another user than root or the effective user; `result` then
/// names it.  A path that does not exist (entirely or from some component on) answers no for
/// the part missing: nothing there can be followed.
inline bool meets_untrusted_symlink(std::string_view path, trusted_open_result& result) {
  result = open_trusted(path, O_PATH | O_CLOEXEC);
  if (result.fd >= 0) ::close(result.fd);
  result.fd = -1;
  return result.refused();
}

}  // namespace treesync

#endif  // TREESYNC_TRUSTED_PATH_HPP
