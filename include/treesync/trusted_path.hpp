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
#include <utility>

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

/// One walk of open_trusted(): the directory reached (a descriptor of its own, or the working
/// directory), its path for messages, what is left of the path, and the links left to follow.
/// Each step takes one component; a step that ends the walk leaves its outcome in the result.
class trusted_walk {
 public:
  trusted_walk(int flags, bool keep_parent) : flags_(flags), keep_parent_(keep_parent) {}
  trusted_walk(const trusted_walk&) = delete;
  trusted_walk& operator=(const trusted_walk&) = delete;
  ~trusted_walk() { close_dir(); }

  trusted_open_result run(std::string_view path, int start, std::string_view start_shown) {
    if (begin(path, start, start_shown))
      while (step()) {
      }
    return std::move(r_);
  }

 private:
  static constexpr int dir_flags = O_PATH | O_DIRECTORY | O_CLOEXEC;

  void close_dir() {
    if (dfd_ >= 0) ::close(dfd_);
    dfd_ = -1;
  }
  int at() const { return dfd_ >= 0 ? dfd_ : AT_FDCWD; }
  bool restart_at_root() {
    close_dir();
    dfd_ = ::open("/", dir_flags);
    reached_ = "/";
    return dfd_ >= 0;
  }
  // Ends the walk with `error` (an errno value).  Always false.
  bool stop(int error) {
    r_.error = error;
    close_dir();
    return false;
  }

  // The walk's start: the caller's directory (a descriptor of our own), or the working directory;
  // the root for an absolute path.  False when it ended there.
  bool begin(std::string_view path, int start, std::string_view start_shown) {
    if (path.empty()) return stop(ENOENT);
    if (start >= 0) {
      dfd_ = ::openat(start, ".", dir_flags);
      if (dfd_ < 0) return stop(errno);
      reached_ = std::string(start_shown);
    }
    remaining_ = std::string(path);
    if (remaining_[0] == '/' && !restart_at_root()) return stop(errno);
    return true;
  }

  // The next component of what is left: skipped ("."), missing, a link (followed when trusted),
  // the last one (opened), or a directory entered.  False when the walk ended.
  bool step() {
    const std::size_t first = remaining_.find_first_not_of('/');
    if (first == std::string::npos) return open_final(".", flags_);  // nothing left: the directory reached itself
    remaining_.erase(0, first);
    const std::size_t slash = remaining_.find('/');
    const std::string comp = remaining_.substr(0, slash);
    const bool last = remaining_.find_first_not_of('/', comp.size()) == std::string::npos;
    remaining_.erase(0, slash == std::string::npos ? remaining_.size() : slash);
    const std::string shown = reached_.empty()         ? comp
                              : reached_.back() == '/' ? reached_ + comp
                                                       : reached_ + '/' + comp;
    if (comp == "." && !last) return true;
    const bool named = comp != "." && comp != "..";
    struct stat st;
    if (named && ::fstatat(at(), comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return missing(errno, comp, last);
    if (named && S_ISLNK(st.st_mode)) return follow(comp, shown, last);
    if (last) return open_final(comp, flags_ | O_NOFOLLOW);
    const int next = ::openat(at(), comp.c_str(), dir_flags | O_NOFOLLOW);
    if (next < 0) return stop(errno);
    close_dir();
    dfd_ = next;
    reached_ = shown;  // (".." kept as spelled: the name is for messages only)
    return true;
  }

  // What the path names, opened in the directory reached.  Always false (the walk ends).
  bool open_final(const std::string& name, int flags) {
    r_.fd = ::openat(at(), name.c_str(), flags);
    if (r_.fd < 0) r_.error = errno;
    close_dir();
    return false;
  }

  // A component that could not be stat'ed (`error`).  With keep_parent, a missing last component
  // not reached through a link keeps the directory reached and the name, for the caller to make.
  bool missing(int error, const std::string& comp, bool last) {
    r_.error = error;
    if (error == ENOENT && last && keep_parent_ && via_link_) r_.dangling = true;
    if (error == ENOENT && last && keep_parent_ && !via_link_) {  // the name to make, in the directory reached
      r_.parent = dfd_ >= 0 ? dfd_ : ::open(".", dir_flags);
      dfd_ = -1;
      r_.leaf = comp;
      if (r_.parent < 0) r_.error = errno;
    }
    close_dir();
    return false;
  }

  // A symbolic link at `comp`: followed when root or the effective user owns it (at most 40),
  // its target put before what is left.  The owner is checked and the target read on one
  // descriptor of the link: a link exchanged for another after the check is not the one read
  // (readlinkat of "" reads the link itself).  False when the walk ended.
  bool follow(const std::string& comp, const std::string& shown, bool last) {
    struct stat st;
    const int link = ::openat(at(), comp.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (link < 0 || ::fstat(link, &st) != 0 || !S_ISLNK(st.st_mode)) {
      const int error = link < 0 ? errno : EAGAIN;  // (no longer a link: the path changed during the walk)
      if (link >= 0) ::close(link);
      return stop(error);
    }
    if (st.st_uid != 0 && st.st_uid != me_) {
      ::close(link);
      r_.untrusted = shown;
      r_.owner = st.st_uid;
      return stop(ELOOP);
    }
    if (--links_ < 0) return ::close(link), stop(ELOOP);
    std::string target(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 0) + 256, '\0');
    const ssize_t n = ::readlinkat(link, "", &target[0], target.size());
    const int read_error = errno;
    ::close(link);
    if (last) via_link_ = true;  // what the path ends at is reached through a link
    if (n < 0 || static_cast<std::size_t>(n) >= target.size()) return stop(n < 0 ? read_error : ENAMETOOLONG);
    target.resize(static_cast<std::size_t>(n));
    if (target.empty()) return stop(ENOENT);
    remaining_ = target + remaining_;  // the link's target, then what followed the link
    if (target[0] == '/' && !restart_at_root()) return stop(errno);
    return true;
  }

  int flags_;
  bool keep_parent_;
  uid_t me_ = ::geteuid();
  int dfd_ = -1;          // -1: the working directory (AT_FDCWD), not owned
  std::string reached_;   // the directory reached, as a path ("" for the working directory)
  std::string remaining_;
  int links_ = 40;
  bool via_link_ = false;  // the last component was a link, followed
  trusted_open_result r_;
};

inline trusted_open_result walk_trusted(std::string_view path, int flags, bool keep_parent, int start,
                                        std::string_view start_shown) {
  return trusted_walk(flags, keep_parent).run(path, start, start_shown);
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
