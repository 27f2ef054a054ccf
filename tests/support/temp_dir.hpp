// tests/support/temp_dir.hpp - a temporary directory for tests of the real (POSIX) backend, and
// the few filesystem helpers those tests need (files with given bytes, mode and nanosecond mtime;
// directories, symlinks and FIFOs; reading a file back).
//
// A temp_dir is created under test_tmpdir() (the directory named by $TREESYNC_TEST_TMPDIR when it
// is set and not empty, else std::filesystem::temp_directory_path()) with a unique name (mkdtemp)
// and removed recursively when it goes out of scope, whatever the tests did to it: directories
// made unreadable or read-only (chmod 000 / 0555) are made accessible again first, and symlinks
// are removed, never followed.
//
// $TREESYNC_TEST_TMPDIR puts the tests' trees on another filesystem: the sshfs suite
// (tests/sshfs/) points it at an sshfs mount. $TREESYNC_TEST_SRC_TMPDIR, when set too, names where
// tests that keep a source apart (tests/test_posix.cpp's fixture) create it: the local->sshfs run.
#ifndef TREESYNC_TESTS_SUPPORT_TEMP_DIR_HPP
#define TREESYNC_TESTS_SUPPORT_TEMP_DIR_HPP

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

namespace treesync_test {

namespace fs = std::filesystem;

[[noreturn]] inline void throw_errno(const char* what, const fs::path& p) {
  throw fs::filesystem_error(what, p, std::error_code(errno, std::generic_category()));
}

/// A nanosecond timestamp `seconds_ago` seconds before now, with the given nanosecond part: a
/// past mtime, out of treesync's racy window, that a copy must keep exactly.
inline std::int64_t past_ns(std::int64_t seconds_ago, std::int64_t nanos = 123456789) {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return (std::int64_t(ts.tv_sec) - seconds_ago) * 1000000000 + nanos;
}

/// Sets the mtime of `p` (not following a symlink) to `ns` nanoseconds since the epoch.
inline void set_mtime(const fs::path& p, std::int64_t ns) {
  struct timespec ts[2];
  ts[0].tv_sec = 0;
  ts[0].tv_nsec = UTIME_OMIT;
  ts[1].tv_sec = static_cast<time_t>(ns / 1000000000);
  ts[1].tv_nsec = static_cast<long>(ns % 1000000000);
  if (::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) throw_errno("utimensat", p);
}

inline void set_mode(const fs::path& p, mode_t mode) {
  if (::chmod(p.c_str(), mode) != 0) throw_errno("chmod", p);
}

/// Creates or truncates `p` with exactly `content`, then sets its mode (umask does not apply) and,
/// when `mtime_ns` is not 0, its mtime.
inline void write_file(const fs::path& p, std::string_view content, mode_t mode = 0644, std::int64_t mtime_ns = 0) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw_errno("open", p);
  std::size_t done = 0;
  while (done < content.size()) {
    const ::ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      errno = e;
      throw_errno("write", p);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, mode) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    throw_errno("fchmod", p);
  }
  ::close(fd);
  if (mtime_ns != 0) set_mtime(p, mtime_ns);
}

/// Appends `content` to `p`, then sets its mtime when `mtime_ns` is not 0.
inline void append_file(const fs::path& p, std::string_view content, std::int64_t mtime_ns = 0) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw_errno("open", p);
  if (::write(fd, content.data(), content.size()) != static_cast<::ssize_t>(content.size())) {
    const int e = errno;
    ::close(fd);
    errno = e;
    throw_errno("write", p);
  }
  ::close(fd);
  if (mtime_ns != 0) set_mtime(p, mtime_ns);
}

/// The whole content of `p` (following a symlink).
inline std::string read_file(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("open", p);
  std::string out;
  char buf[65536];
  for (;;) {
    const ::ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      errno = e;
      throw_errno("read", p);
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

/// Creates directory `p` with exactly `mode` (umask does not apply) and, when `mtime_ns` is not 0,
/// that mtime.  Set a directory's mtime after its content is in place: adding entries changes it.
inline void make_dir(const fs::path& p, mode_t mode = 0755, std::int64_t mtime_ns = 0) {
  if (::mkdir(p.c_str(), 0700) != 0) throw_errno("mkdir", p);
  set_mode(p, mode);
  if (mtime_ns != 0) set_mtime(p, mtime_ns);
}

/// Creates the symlink `p` -> `target` (the target text is stored as given).
inline void make_symlink(const std::string& target, const fs::path& p) {
  if (::symlink(target.c_str(), p.c_str()) != 0) throw_errno("symlink", p);
}

inline void make_fifo(const fs::path& p, mode_t mode = 0644) {
  if (::mkfifo(p.c_str(), mode) != 0) throw_errno("mkfifo", p);
  set_mode(p, mode);
}

// A character device with the null device's numbers at `p`, for a test that needs a device node:
// never /dev/null itself, which a broken check would replace or remove for every process on the
// machine.  Root only (mknod of a device needs CAP_MKNOD): false where it cannot be made.
inline bool make_null_device(const fs::path& p) { return ::mknod(p.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0; }

/// lstat(2) of `p`; throws when it does not exist.
inline struct ::stat lstat_of(const fs::path& p) {
  struct ::stat st;
  if (::lstat(p.c_str(), &st) != 0) throw_errno("lstat", p);
  return st;
}

/// Whether anything (even a dangling symlink) exists at `p`.
inline bool exists_nofollow(const fs::path& p) {
  struct ::stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

#if defined(__APPLE__)
inline std::int64_t mtime_ns_of(const struct ::stat& st) {
  return std::int64_t(st.st_mtimespec.tv_sec) * 1000000000 + st.st_mtimespec.tv_nsec;
}
inline std::int64_t ctime_ns_of(const struct ::stat& st) {
  return std::int64_t(st.st_ctimespec.tv_sec) * 1000000000 + st.st_ctimespec.tv_nsec;
}
#else
inline std::int64_t mtime_ns_of(const struct ::stat& st) {
  return std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}
inline std::int64_t ctime_ns_of(const struct ::stat& st) {
  return std::int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
}
#endif

/// The target text of the symlink `p`.
inline std::string read_link(const fs::path& p) {
  std::string buf(4096, '\0');
  const ::ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size());
  if (n < 0) throw_errno("readlink", p);
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

/// The directory named by the environment variable `var`, when it is set and not empty.
inline std::optional<fs::path> tmpdir_from_env(const char* var) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return fs::path(v);
}

/// Where temp_dirs are created: $TREESYNC_TEST_TMPDIR, else temp_directory_path().
inline fs::path test_tmpdir() {
  if (auto p = tmpdir_from_env("TREESYNC_TEST_TMPDIR")) return *p;
  return fs::temp_directory_path();
}

/// Where a test that keeps its source tree apart creates it: $TREESYNC_TEST_SRC_TMPDIR, or nothing
/// (the source then lives in the test's one temp_dir, next to the destination).
inline std::optional<fs::path> source_tmpdir() { return tmpdir_from_env("TREESYNC_TEST_SRC_TMPDIR"); }

/// A uniquely named directory under test_tmpdir() (or under `parent`), removed with everything in
/// it on destruction.
class temp_dir {
 public:
  temp_dir() : temp_dir(test_tmpdir()) {}
  explicit temp_dir(const fs::path& parent) {
    std::string pattern = (parent / "treesync-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw_errno("mkdtemp", pattern);
    path_ = pattern;
  }
  ~temp_dir() { remove_tree(path_); }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const fs::path& path() const noexcept { return path_; }
  fs::path operator/(const fs::path& rel) const { return path_ / rel; }

 private:
  // Never throws: makes each directory accessible (a test may leave one 000 or 0555), removes its
  // entries without following symlinks, then the directory itself.  Works relative to directory
  // handles, so a runaway tree deeper than PATH_MAX is removed too.
  static void remove_tree(const fs::path& dir) noexcept { remove_dir_at(AT_FDCWD, dir.c_str()); }

  static void remove_dir_at(int parent, const char* name) noexcept {
    ::fchmodat(parent, name, 0700, 0);
    const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      if (DIR* d = ::fdopendir(fd)) {
        std::vector<std::string> names;
        while (const struct dirent* e = ::readdir(d)) {
          const std::string_view n = e->d_name;
          if (n != "." && n != "..") names.emplace_back(n);
        }
        for (const auto& n : names) {
          struct ::stat st;
          if (::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
          if (S_ISDIR(st.st_mode))
            remove_dir_at(fd, n.c_str());
          else
            ::unlinkat(fd, n.c_str(), 0);
        }
        ::closedir(d);  // closes fd
      } else {
        ::close(fd);
      }
    }
    ::unlinkat(parent, name, AT_REMOVEDIR);
  }

  fs::path path_;
};

}  // namespace treesync_test

#endif  // TREESYNC_TESTS_SUPPORT_TEMP_DIR_HPP
