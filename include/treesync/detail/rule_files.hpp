// treesync/detail/rule_files.hpp - filter's rule files read: the one reader, no link followed
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of filter.hpp (treesync::filter is its public face); include <treesync/treesync.hpp>.
#ifndef TREESYNC_DETAIL_RULE_FILES_HPP
#define TREESYNC_DETAIL_RULE_FILES_HPP

#include "../core.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace treesync {
inline namespace v0 {

/// A rule file treesync cannot use: a line that is no rule it knows (rsync's "Unknown filter
/// rule"), a rule file larger than filter::max_rule_file_size, merges nested too deep
/// (merge_depth_error).  Thrown by filter::excluded() when it reads such a file; the run stops
/// (sync() rethrows it).
class filter_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The filter_error of a rule file whose `merge` / `.` lines nest more than max_merge_depth files
/// deep (a merge file that merges itself): rsync's "merge-file include depth limit (32) exceeded",
/// which stops rsync with its file-I/O status, 11 (the CLI's too).
class merge_depth_error : public filter_error {
 public:
  static constexpr int max_merge_depth = 32;
  using filter_error::filter_error;
};

namespace detail {

// The rule files of a filter (filter_rules), read: SRC's, DST's, the merged ones, and the loader
// of filter::reading() that reads them below a root.
class rule_file_reader {
 protected:
  static constexpr std::size_t max_file_size = std::size_t{4} << 20;

  // [treesync.detail.filter.read] -----------------------------------------------------------
  //
  // The one rule-file reader (SRC's, DST's, merged files): nothing is opened for reading before
  // it is known to be a regular file.  With O_PATH: the name is opened O_PATH|O_NOFOLLOW (which
  // does nothing to the object: a FIFO, a device or a socket is not opened for I/O), fstat'ed, and
  // a regular file reopened through /proc/self/fd/N (without /proc: by name, O_NONBLOCK|O_NOCTTY),
  // then fstat'ed again: the same device and inode or nothing is read.  Without O_PATH: opened
  // O_NONBLOCK|O_NOCTTY|O_NOFOLLOW and refused without a read unless regular.

  /// A descriptor open for reading on the regular file `name` of the directory `at` (the last
  /// component not followed), or -1 (missing, not a regular file, unreadable, swapped).
  static int open_regular(int at, const char* name) {
    struct stat a;
    struct stat b;
#ifdef O_PATH
    const int p = ::openat(at, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (p < 0) return -1;
    if (::fstat(p, &a) != 0 || !S_ISREG(a.st_mode)) {
      ::close(p);
      return -1;
    }
    const std::string self = "/proc/self/fd/" + std::to_string(p);
    int fd = ::open(self.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)  // no /proc
      fd = ::openat(at, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    ::close(p);
#else
    const int fd = ::openat(at, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0 && ::fstat(fd, &a) != 0) a.st_mode = 0;
#endif
    if (fd < 0) return -1;
    if (::fstat(fd, &b) != 0 || !S_ISREG(b.st_mode) || !S_ISREG(a.st_mode) || a.st_dev != b.st_dev ||
        a.st_ino != b.st_ino) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  /// The text of the file open as `fd` (closed here); `what` names it in the error for a file
  /// larger than max_file_size.
  static std::string read_open(int fd, const std::string& what) {
    std::string out;
    if (fd < 0) return out;
    struct stat st;
    bool too_large = ::fstat(fd, &st) != 0 || static_cast<std::uintmax_t>(st.st_size) > max_file_size;
    char buf[8192];
    while (!too_large) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n < 0) out.clear();
        break;
      }
      out.append(buf, static_cast<std::size_t>(n));
      too_large = out.size() > max_file_size;
    }
    ::close(fd);
    if (too_large)
      throw filter_error("rule file " + what + " is larger than " + std::to_string(max_file_size >> 20) + " MiB");
    return out;
  }

  /// See filter::read_rule_file.
  static std::string read_file(const char* path, int at = AT_FDCWD) { return read_open(open_regular(at, path), path); }

  /// Whether `name` is a name a rule file may merge: a relative path of components below the rule
  /// file's directory ("x", "sub/x"); never absolute, never a "." or ".." component, no empty one.
  static bool merge_name_ok(std::string_view name) {
    if (name.empty() || name.front() == '/') return false;
    std::size_t pos = 0;
    for (;;) {
      std::size_t end = name.find('/', pos);
      if (end == std::string_view::npos) end = name.size();
      const std::string_view c = name.substr(pos, end - pos);
      if (c.empty() || c == "." || c == "..") return false;
      if (end == name.size()) return true;
      pos = end + 1;
    }
  }

  /// A descriptor on the directory `rel` (components below `at`, "" for `at` itself), each
  /// component opened from its parent's descriptor with O_NOFOLLOW (a symlink is not followed);
  /// -1 when one is missing, a symlink or no directory.  `at` itself is duplicated for "".
  static int open_dir_below(int at, std::string_view rel) {
    int cur = ::fcntl(at, F_DUPFD_CLOEXEC, 0);
    std::size_t pos = 0;
    while (cur >= 0 && pos < rel.size()) {
      std::size_t end = rel.find('/', pos);
      if (end == std::string_view::npos) end = rel.size();
      const std::string c(rel.substr(pos, end - pos));
      pos = end + 1;
      if (c.empty() || c == ".") continue;
      int next = -1;
      if (c != "..") {
#ifdef O_PATH
        next = ::openat(cur, c.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
#else
        next = ::openat(cur, c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
#endif
      }
      ::close(cur);
      cur = next;
    }
    return cur;
  }

  /// See filter::read_rule_file_below.
  static std::string read_below(int at, std::string_view dir, std::string_view name) {
    if (!merge_name_ok(name)) return std::string();
    const auto slash = name.rfind('/');
    std::string sub(dir);
    if (slash != std::string_view::npos) {
      if (!sub.empty()) sub += '/';
      sub.append(name.data(), slash);
    }
    const int d = open_dir_below(at, sub);
    if (d < 0) return std::string();
    const std::string last(slash == std::string_view::npos ? name : name.substr(slash + 1));
    const int fd = open_regular(d, last.c_str());
    ::close(d);
    return read_open(fd, std::string(name));
  }

  // A `merge` / `.` / `dir-merge` / `:` name in a rule file: resolved below the directory of the
  // rule file, as the file itself (merge_name_ok); anything else (absolute, a ".." component) is a
  // bad line, refused before anything is opened.  The line's text is not quoted.
  static void check_merge_name(std::string_view name, const std::string& where, std::size_t lineno) {
    if (!merge_name_ok(name))
      throw filter_error("merge file not below the rule file's directory (absolute, or a '..' component): <rule from " +
                         where + " line " + std::to_string(lineno) + ">");
  }

  // filter::reading()'s loader: per thread, the directory it read from last, open.
  struct dir_reader {
    struct place {
      std::string dir;
      int fd = -1;
    };
    std::filesystem::path root;
    std::mutex mu;
    std::vector<std::pair<std::thread::id, std::shared_ptr<place>>> places;

    ~dir_reader() {
      for (auto& p : places)
        if (p.second->fd >= 0) ::close(p.second->fd);
    }

    std::shared_ptr<place> mine() {
      const auto me = std::this_thread::get_id();
      std::lock_guard<std::mutex> lock(mu);
      for (auto& p : places)
        if (p.first == me) return p.second;
      if (places.size() >= 64) {  // threads of runs gone by
        for (auto& p : places)
          if (p.second->fd >= 0) ::close(p.second->fd);
        places.clear();
      }
      places.emplace_back(me, std::make_shared<place>());
      return places.back().second;
    }

    std::string read(std::string_view dir, std::string_view name) {
      // an absolute name: only a command-line dir-merge rule's (a rule file's are refused by
      // parse_file); the operator named it
      if (!name.empty() && name.front() == '/') return read_file(std::string(name).c_str());
      const std::shared_ptr<place> p = mine();
      std::size_t pos = 0;  // what is left to descend to from p->fd
      const bool below = p->fd >= 0 && (p->dir.empty() || (dir.size() >= p->dir.size() &&
                                                           dir.compare(0, p->dir.size(), p->dir) == 0 &&
                                                           (dir.size() == p->dir.size() || dir[p->dir.size()] == '/')));
      if (below) {
        pos = p->dir.size();
      } else {
        if (p->fd >= 0) ::close(p->fd);
        p->dir.clear();
        p->fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (p->fd < 0) return std::string();
      }
      while (pos < dir.size()) {
        if (dir[pos] == '/') ++pos;
        std::size_t end = dir.find('/', pos);
        if (end == std::string_view::npos) end = dir.size();
        const std::string comp(dir.substr(pos, end - pos));
        const int next = ::openat(p->fd, comp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (next < 0) return std::string();  // p->dir still names p->fd
        ::close(p->fd);
        p->fd = next;
        p->dir.assign(dir.data(), end);
        pos = end;
      }
      return read_below(p->fd, std::string_view(), name);  // components below, no symlink followed
    }
  };
};

}  // namespace detail
}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_RULE_FILES_HPP
