// treesync/detail/posix_io.hpp - the POSIX backend's toolkit: descriptor guards, stat conversion, the copy strategies
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_DETAIL_POSIX_IO_HPP
#define TREESYNC_DETAIL_POSIX_IO_HPP

#include "../core.hpp"

namespace treesync {
inline namespace v0 {
namespace detail {

#if TREESYNC_HAS_POSIX
/// What posix_fs is built from: descriptors closed on every path, stat conversion, full reads and
/// writes, and the data copy (reflink clone, copy_file_range, sparse-aware, plain read/write),
/// which remembers once a filesystem refused to clone.
class posix_io {
 protected:
  posix_io() = default;
  struct fd_guard {
    explicit fd_guard(int f) noexcept : fd(f) {}
    fd_guard(const fd_guard&) = delete;
    fd_guard& operator=(const fd_guard&) = delete;
    ~fd_guard() {
      if (fd >= 0) ::close(fd);
    }
    int fd;
  };

#if defined(__linux__) && defined(O_PATH)
  // An entry opened for a metadata change (see set_mode): O_PATH, never following a link, with its
  // fstat; ec is set (EMLINK) when it is not a directory and has other links.
  struct path_fd {
    path_fd(int dir, const std::string& name, std::error_code& ec) noexcept
        : fd(::openat(dir, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC)) {
      if (fd < 0)
        set_errno(ec);
      else if (::fstat(fd, &st) != 0)
        set_errno(ec);
      else if (!S_ISDIR(st.st_mode) && st.st_nlink > 1)
        ec = std::make_error_code(std::errc::too_many_links);
      else
        ec.clear();
    }
    path_fd(const path_fd&) = delete;
    path_fd& operator=(const path_fd&) = delete;
    ~path_fd() {
      if (fd >= 0) ::close(fd);
    }
    int fd;
    struct ::stat st {};
  };
  static std::string proc_fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }
#endif

  static void set_errno(std::error_code& ec) noexcept { ec.assign(errno, std::system_category()); }

  // Opens an entry to read its data: never blocking (a FIFO swapped in), never as a controlling
  // terminal, following a link only when asked, and checked by fstat to be a regular file before
  // anything is read; -1 with ec set otherwise (errc::special_file for a FIFO, socket or device).
  static int open_data(int dir, const std::string& name, bool follow, struct ::stat& st, std::error_code& ec) noexcept;
  static void check(int rc, std::error_code& ec) noexcept {
    if (rc != 0)
      set_errno(ec);
    else
      ec.clear();
  }

  static struct timespec to_timespec(std::int64_t ns) noexcept;
  static file_type from_mode(mode_t m) noexcept;
  static file_type from_dtype(unsigned char t) noexcept;
  static stat_info convert(const struct ::stat& st) noexcept;
  static ::ssize_t read_full(int fd, char* buf, std::size_t len, std::error_code& ec) noexcept;
  static bool write_all(int fd, const char* buf, std::size_t len, std::error_code& ec) noexcept;
  static void copy_fd_xattrs(int in, int out, std::error_code& ec);

  // "This way of copying is not available here" (as opposed to a real I/O error, which is
  // reported and never retried another way).
  static bool unsupported(int e) noexcept {
    return e == EXDEV || e == EINVAL || e == ENOSYS || e == EOPNOTSUPP || e == ENOTTY || e == EBADF ||
           e == ETXTBSY || e == EPERM
#if defined(ENOTSUP) && ENOTSUP != EOPNOTSUPP
           || e == ENOTSUP
#endif
        ;
  }

  // What an in-kernel copy call's error says of the side that failed: out of space or quota, a
  // read-only filesystem, a file too large for it (everything else is taken as the source's).
  static bool destination_errno(int e) noexcept { return e == ENOSPC || e == EDQUOT || e == EROFS || e == EFBIG; }

  // The cancel flag of a copy (copy_options::cancel), between chunks: true, with ec set to
  // operation_canceled, when it is set.
  static bool cancelled(const std::atomic<bool>* flag, std::error_code& ec) noexcept {
    if (!flag || !flag->load(std::memory_order_relaxed)) return false;
    ec = std::make_error_code(std::errc::operation_canceled);
    return true;
  }

  // The copy ladder: reflink (shared extents), then a sparse-aware copy for files with holes,
  // then copy_file_range (in kernel), then sendfile, then read/write with one buffer.  Each rung
  // is left only on "not supported here"; a real I/O error ends the copy.
  // Copies at most `st.size` bytes (what the stat said: a file that grows, or a /proc file whose
  // stat says 0, is not read on and on; the size check after the copy reports the change).  A file
  // whose content ends before that size (sysfs: 4096 said, 23 there) is copied as far as it goes:
  // res.bytes < st.size, nothing padded.  `cancel` is checked between chunks; an error on the
  // destination's side sets res.destination_failed.
  void copy_data(int in, int out, const stat_info& st, copy_result& res, std::error_code& ec,
                 const std::atomic<bool>* cancel = nullptr) const;

  // The user-space paths read before the kernel could refuse a device or a FIFO: check first.
  static bool regular(int fd, std::error_code& ec) {
    struct ::stat st;
    if (::fstat(fd, &st) != 0) return set_errno(ec), false;
    if (!S_ISREG(st.st_mode)) return ec = errc::special_file, false;
    return true;
  }

  // The process's umask, read once without changing it (/proc/self/status, Linux >= 4.7); where
  // it cannot be read, 0777: every new file then gets an explicit fchmod.
  static std::uint32_t process_umask();

  // Copies only the data extents (SEEK_DATA / SEEK_HOLE) and sizes the file, so holes stay holes.
  // False, with ec clear, when the filesystem cannot tell extents: the caller copies densely.  A
  // read that ends inside a data extent is the end of the content (a sysfs file says 4096 bytes
  // of data and has 23): the copy ends there, never padded to the size stat gave.
  bool copy_sparse(int in, int out, std::uint64_t size, copy_result& res, std::error_code& ec,
                   const std::atomic<bool>* cancel) const;

  // Copies the data with the first call that works here, at most `size` bytes (what the stat
  // said: a /proc file says 0 and may never end).  Every call asks for one byte more than is still
  // due, so the call that reaches the end also shows there is nothing past it, at no extra system
  // call; a byte past `size` means the file grew, or never had the size it claimed:
  // errc::changed_during_copy, and the copy is not installed.  With a cancel flag, calls move at
  // most 16 MiB each and the flag is checked before each one (a signal stops a large copy within
  // a chunk's time); without one, up to 1 GiB.
  void copy_stream(int in, int out, std::uint64_t size, copy_result& res, std::error_code& ec,
                   const std::atomic<bool>* cancel) const;

  mutable std::atomic<bool> reflink_{true};  // cleared once a filesystem says it cannot clone

  static bool local_with_ctime(int fd) noexcept;
};

// ---- posix_io: the members' bodies, in the order of their declarations --------------------------

inline int posix_io::open_data(int dir, const std::string& name, bool follow, struct ::stat& st,
                               std::error_code& ec) noexcept {
  const int fd = ::openat(dir, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW));
  if (fd < 0) return set_errno(ec), -1;
  if (::fstat(fd, &st) != 0) {
    set_errno(ec);
  } else if (S_ISREG(st.st_mode)) {
    ec.clear();
    return fd;
  } else {
    ec = S_ISDIR(st.st_mode) ? std::make_error_code(std::errc::is_a_directory) : make_error_code(errc::special_file);
  }
  ::close(fd);
  return -1;
}

inline struct timespec posix_io::to_timespec(std::int64_t ns) noexcept {
  struct timespec ts;
  std::int64_t sec = ns / 1000000000;
  std::int64_t rem = ns % 1000000000;
  if (rem < 0) {
    rem += 1000000000;
    --sec;
  }
  ts.tv_sec = static_cast<time_t>(sec);
  ts.tv_nsec = static_cast<long>(rem);
  return ts;
}

inline file_type posix_io::from_mode(mode_t m) noexcept {
  switch (m & S_IFMT) {
    case S_IFREG: return file_type::regular;
    case S_IFDIR: return file_type::directory;
    case S_IFLNK: return file_type::symlink;
    case S_IFIFO: return file_type::fifo;
    case S_IFSOCK: return file_type::socket;
    case S_IFBLK: return file_type::block;
    case S_IFCHR: return file_type::character;
    default: return file_type::unknown;
  }
}

inline file_type posix_io::from_dtype(unsigned char t) noexcept {
  switch (t) {
    case DT_REG: return file_type::regular;
    case DT_DIR: return file_type::directory;
    case DT_LNK: return file_type::symlink;
    case DT_FIFO: return file_type::fifo;
    case DT_SOCK: return file_type::socket;
    case DT_BLK: return file_type::block;
    case DT_CHR: return file_type::character;
    default: return file_type::unknown;
  }
}

inline stat_info posix_io::convert(const struct ::stat& st) noexcept {
  stat_info i;
  i.type = from_mode(st.st_mode);
  i.size = static_cast<std::uint64_t>(st.st_size);
#if defined(__APPLE__)
  i.mtime_ns = std::int64_t(st.st_mtimespec.tv_sec) * 1000000000 + st.st_mtimespec.tv_nsec;
  i.ctime_ns = std::int64_t(st.st_ctimespec.tv_sec) * 1000000000 + st.st_ctimespec.tv_nsec;
#else
  i.mtime_ns = std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  i.ctime_ns = std::int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
#endif
  i.mode = static_cast<std::uint32_t>(st.st_mode & 07777);
  i.dev = static_cast<std::uint64_t>(st.st_dev);
  i.ino = static_cast<std::uint64_t>(st.st_ino);
  i.nlink = static_cast<std::uint64_t>(st.st_nlink);
  i.uid = static_cast<std::uint32_t>(st.st_uid);
  i.gid = static_cast<std::uint32_t>(st.st_gid);
  i.rdev = static_cast<std::uint64_t>(st.st_rdev);
  i.blocks = static_cast<std::uint64_t>(st.st_blocks);
  return i;
}

inline ::ssize_t posix_io::read_full(int fd, char* buf, std::size_t len, std::error_code& ec) noexcept {
  std::size_t got = 0;
  while (got < len) {
    const ::ssize_t n = ::read(fd, buf + got, len - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      set_errno(ec);
      return -1;
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<::ssize_t>(got);
}

inline bool posix_io::write_all(int fd, const char* buf, std::size_t len, std::error_code& ec) noexcept {
  while (len > 0) {
    const ::ssize_t n = ::write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      set_errno(ec);
      return false;
    }
    buf += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

inline void posix_io::copy_fd_xattrs(int in, int out, std::error_code& ec) {
#if defined(__linux__)
  ec.clear();
  ::ssize_t len = ::flistxattr(in, nullptr, 0);
  if (len < 0) return (errno == ENOTSUP || errno == EOPNOTSUPP) ? void() : set_errno(ec);
  if (len == 0) return;
  std::vector<char> names(static_cast<std::size_t>(len));
  len = ::flistxattr(in, names.data(), names.size());
  if (len < 0) return set_errno(ec);
  std::vector<char> value;
  for (std::size_t pos = 0; pos < static_cast<std::size_t>(len);) {
    const char* name = names.data() + pos;
    pos += std::strlen(name) + 1;
    ::ssize_t vlen = ::fgetxattr(in, name, nullptr, 0);
    if (vlen < 0) continue;  // vanished in between
    value.resize(static_cast<std::size_t>(vlen));
    vlen = ::fgetxattr(in, name, value.data(), value.size());
    if (vlen < 0) continue;
    if (::fsetxattr(out, name, value.data(), static_cast<std::size_t>(vlen), 0) != 0) {
      if (errno == ENOTSUP || errno == EOPNOTSUPP || (errno == EPERM && std::strncmp(name, "trusted.", 8) == 0))
        continue;  // the destination cannot hold it (or only root may write trusted.*)
      return set_errno(ec);
    }
  }
#else
  (void)in;
  (void)out;
  ec.clear();
#endif
}

inline void posix_io::copy_data(int in, int out, const stat_info& st, copy_result& res, std::error_code& ec,
                                const std::atomic<bool>* cancel) const {
  const std::uint64_t size = st.size;
  if (size == 0 || cancelled(cancel, ec)) return;
#if defined(__linux__) && defined(FICLONE)
  if (reflink_.load(std::memory_order_relaxed)) {
    if (::ioctl(out, FICLONE, in) == 0) {
      res.bytes = size;
      res.method = copy_method::reflink;
      return;
    }
    if (!unsupported(errno)) return res.destination_failed = destination_errno(errno), set_errno(ec);
    if (errno == EOPNOTSUPP || errno == ENOTTY || errno == EINVAL) reflink_.store(false);  // this filesystem: never
  }
#endif
#if defined(SEEK_DATA) && defined(SEEK_HOLE)
  // fewer 512-byte blocks than the size needs: the file has holes worth keeping
  if (st.blocks < (size + 511) / 512) {
    if (!regular(in, ec)) return;
    if (copy_sparse(in, out, size, res, ec, cancel)) return;
    if (ec) return;
  }
#endif
  // dense: no more than the size the stat gave, and a byte past it is a change (see copy_stream)
  copy_stream(in, out, size, res, ec, cancel);
}

inline std::uint32_t posix_io::process_umask() {
  static const std::uint32_t mask = [] {
    std::uint32_t m = 0777;
#if defined(__linux__)
    const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buf[4096];
      const ::ssize_t n = ::read(fd, buf, sizeof buf - 1);
      ::close(fd);
      if (n > 0) {
        buf[n] = '\0';
        if (const char* p = std::strstr(buf, "\nUmask:")) m = static_cast<std::uint32_t>(std::strtoul(p + 7, nullptr, 8)) & 0777;
      }
    }
#endif
    return m;
  }();
  return mask;
}

inline bool posix_io::copy_sparse(int in, int out, std::uint64_t size, copy_result& res, std::error_code& ec,
                                  const std::atomic<bool>* cancel) const {
  off_t pos = 0;
  off_t end = static_cast<off_t>(size);
  std::vector<char> buf;
  while (pos < end) {
    const off_t data = ::lseek(in, pos, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // only a hole remains
      if (pos == 0 && unsupported(errno)) return false;
      return set_errno(ec), true;
    }
    off_t hole = ::lseek(in, data, SEEK_HOLE);
    if (hole < 0) return set_errno(ec), true;
    if (hole > end) hole = end;
    for (off_t at = data; at < hole;) {
      const std::size_t want = static_cast<std::size_t>(std::min<off_t>(hole - at, off_t(1) << 20));
      if (buf.size() < want) buf.resize(want);
      if (cancelled(cancel, ec)) return true;
      const ::ssize_t n = ::pread(in, buf.data(), want, at);
      if (n < 0) {
        if (errno == EINTR) continue;
        return set_errno(ec), true;
      }
      if (n == 0) {  // the content ends here (or shrank under us: the stat after the copy tells)
        end = at;
        break;
      }
      for (::ssize_t done = 0; done < n;) {
        const ::ssize_t w = ::pwrite(out, buf.data() + done, static_cast<std::size_t>(n - done), at + done);
        if (w < 0) {
          if (errno == EINTR) continue;
          return res.destination_failed = true, set_errno(ec), true;
        }
        done += w;
      }
      at += n;
      res.bytes += static_cast<std::uint64_t>(n);
    }
    pos = end < hole ? end : hole;
  }
  if (::ftruncate(out, end) != 0) return res.destination_failed = true, set_errno(ec), true;
  // the holes count as copied bytes: the destination has the source's size (or its content's)
  res.bytes = static_cast<std::uint64_t>(end);
  res.method = copy_method::read_write;
  res.sparse = true;
  return true;
}

inline void posix_io::copy_stream(int in, int out, std::uint64_t size, copy_result& res, std::error_code& ec,
                                  const std::atomic<bool>* cancel) const {
  const std::uint64_t chunk = cancel ? std::uint64_t(1) << 24 : std::uint64_t(1) << 30;
  const auto want = [&] { return static_cast<std::size_t>(std::min<std::uint64_t>(size - res.bytes + 1, chunk)); };
  // One step: n bytes (or n <= 0) from a call that asked for `len`.  True when the copy is over.
  const auto step = [&](long long n, std::size_t len) {
    res.bytes += static_cast<std::uint64_t>(n);
    if (res.bytes > size) return ec = errc::changed_during_copy, true;
    return res.bytes == size && static_cast<std::size_t>(n) < len;  // a short call at the end: EOF
  };
  // Repeats one in-kernel copy call to the end.  True when done (or failed for real, ec set);
  // false when this call is not supported here and nothing was copied yet.
  const auto pump = [&](copy_method method, auto&& call) {
    res.method = method;
    for (;;) {
      if (cancelled(cancel, ec)) return true;
      const std::size_t len = want();
      const long long n = call(len);
      if (n > 0) {
        if (step(n, len)) return true;
        continue;
      }
      if (n == 0) return true;  // the end; shorter than the stat said: the check after the copy reports it
      if (errno == EINTR) continue;
      if (res.bytes != 0 || !unsupported(errno)) return res.destination_failed = destination_errno(errno), set_errno(ec), true;
      return false;
    }
  };
#if defined(__linux__) && defined(SYS_copy_file_range)
  // refuses (EINVAL) anything but regular files before reading a byte
  if (pump(copy_method::copy_file_range, [&](std::size_t len) {
        return static_cast<long long>(::syscall(SYS_copy_file_range, in, nullptr, out, nullptr, len, 0u));
      }))
    return;
#endif
  if (!regular(in, ec)) return;
#if defined(__linux__)
  if (pump(copy_method::sendfile,
           [&](std::size_t len) { return static_cast<long long>(::sendfile(out, in, nullptr, len)); }))
    return;
#endif
  res.method = copy_method::read_write;
  std::vector<char> buf(1 << 17);
  for (;;) {
    if (cancelled(cancel, ec)) return;
    const std::size_t len = std::min(buf.size(), want());
    const ::ssize_t n = ::read(in, buf.data(), len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return set_errno(ec);
    }
    if (n == 0) return;
    if (res.bytes + static_cast<std::uint64_t>(n) > size) return void(ec = errc::changed_during_copy);
    if (!write_all(out, buf.data(), static_cast<std::size_t>(n), ec)) return void(res.destination_failed = true);
    if (step(n, len)) return;
  }
}

inline bool posix_io::local_with_ctime(int fd) noexcept {
#if defined(__linux__)
  struct ::statfs sf;
  if (::fstatfs(fd, &sf) != 0) return false;
  switch (static_cast<unsigned long>(sf.f_type) & 0xFFFFFFFFUL) {
    case 0xEF53UL:      // ext2/3/4
    case 0x58465342UL:  // XFS
    case 0x9123683EUL:  // btrfs
    case 0x01021994UL:  // tmpfs
    case 0xF2F52010UL:  // F2FS
    case 0x2FC12FC1UL:  // ZFS
    case 0xCA451A4EUL:  // bcachefs
      return true;
    default: return false;
  }
#else
  (void)fd;
  return false;
#endif
}

/// The state file, by its directory's descriptor and its name: read in pieces only when it is a
/// regular file, replaced atomically, removed; a name that holds anything else is never opened,
/// replaced or removed (errc::state_not_regular).
class posix_files : protected posix_io {
 protected:
  // What is at `name` now: ENOENT, or errc::state_not_regular unless a regular file.
  static bool regular_at(int dir, const std::string& name, std::error_code& ec, struct ::stat* out = nullptr) {
    struct ::stat st;
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return set_errno(ec), false;
    if (!S_ISREG(st.st_mode)) return ec = errc::state_not_regular, false;
    if (out) *out = st;
    return true;
  }

  /// Hands the content of the regular file `name` to take() in pieces of 64 KiB.  A FIFO, device
  /// or link is never opened (checked first); the open does not block or follow a link, and the
  /// file opened must be the one checked.
  template <class Take>
  static void read_regular_at(int dir, const std::string& name, Take&& take, std::error_code& ec) {
    ec.clear();
    struct ::stat before;
    if (!regular_at(dir, name, ec, &before)) return;
    const fd_guard f(::openat(dir, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
    if (f.fd < 0) return errno == ELOOP ? void(ec = errc::state_not_regular) : set_errno(ec);
    struct ::stat st;
    if (::fstat(f.fd, &st) != 0) return set_errno(ec);
    if (!S_ISREG(st.st_mode) || st.st_ino != before.st_ino || st.st_dev != before.st_dev)
      return void(ec = errc::state_not_regular);
    std::vector<char> buf(std::size_t(1) << 16);
    for (::ssize_t n; (n = read_full(f.fd, buf.data(), buf.size(), ec)) > 0;)
      if (!take(std::string_view(buf.data(), static_cast<std::size_t>(n)))) return;
  }

  /// Replaces `name` in `dir` with `text`: written to a temporary beside it, flushed, renamed over
  /// it; the temporary is removed on failure.  What is at `name` must be a regular file (or
  /// nothing).
  static void replace_at(int dir, const std::string& name, std::string_view text, std::error_code& ec) {
    ec.clear();
    if (!regular_at(dir, name, ec) && ec != std::errc::no_such_file_or_directory) return;
    ec.clear();
    const std::string temp = ".treesync-tmp-state-" + std::to_string(::getpid());
    ::unlinkat(dir, temp.c_str(), 0);  // a leftover of a killed run of this process id
    const int fd = ::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return set_errno(ec);
    if (write_all(fd, text.data(), text.size(), ec) && ::fsync(fd) != 0) set_errno(ec);
    if (::close(fd) != 0 && !ec) set_errno(ec);
    if (!ec && ::renameat(dir, temp.c_str(), dir, name.c_str()) == 0) return;
    if (!ec) set_errno(ec);
    ::unlinkat(dir, temp.c_str(), 0);
  }

  /// Removes the regular file `name` from `dir` (anything else there is left alone).
  static void remove_regular_at(int dir, const std::string& name, std::error_code& ec) {
    ec.clear();
    if (!regular_at(dir, name, ec)) return;
    if (::unlinkat(dir, name.c_str(), 0) != 0) set_errno(ec);
  }
};
#endif  // TREESYNC_HAS_POSIX

}  // namespace detail
}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_POSIX_IO_HPP
