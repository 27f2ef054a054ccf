// tests/support/canary.hpp - a canary tree outside the destination, for the hostile tests.
//
// plant_canary() fills a directory with entries an attacker would like treesync to touch (a
// root-only 0600 file, a 0666 file, a set-user-ID file, a subdirectory, a symlink); snapshot()
// records every entry below a directory, the directory itself included, without following links:
// type and mode bits, owner, group, size, mtime, inode, link count and content (a file's bytes, a
// symlink's target).  A hostile test takes a snapshot before the run and compares it with one
// taken after: changes() lists every difference, and is empty when the tree was not touched.
#ifndef TREESYNC_TESTS_SUPPORT_CANARY_HPP
#define TREESYNC_TESTS_SUPPORT_CANARY_HPP

#include "temp_dir.hpp"

#include <map>
#include <sstream>
#include <string>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace treesync_test {

struct canary_entry {
  mode_t mode = 0;  // type and permission bits
  uid_t uid = 0;
  gid_t gid = 0;
  std::int64_t size = 0;
  std::int64_t mtime_ns = 0;
  ino_t ino = 0;
  nlink_t nlink = 0;
  std::string content;  // a regular file's bytes, a symlink's target

  bool operator==(const canary_entry& o) const {
    return mode == o.mode && uid == o.uid && gid == o.gid && size == o.size && mtime_ns == o.mtime_ns &&
           ino == o.ino && nlink == o.nlink && content == o.content;
  }
  bool operator!=(const canary_entry& o) const { return !(*this == o); }
};

/// Every entry below a directory, by relative path ("." for the directory itself).
using canary_snapshot = std::map<std::string, canary_entry>;

namespace detail_canary {

inline canary_entry entry_of(int dir, const std::string& name, const struct ::stat& st) {
  canary_entry e;
  e.mode = st.st_mode;
  e.uid = st.st_uid;
  e.gid = st.st_gid;
  e.size = static_cast<std::int64_t>(st.st_size);
  e.mtime_ns = mtime_ns_of(st);
  e.ino = st.st_ino;
  e.nlink = st.st_nlink;
  if (S_ISREG(st.st_mode)) {
    const int fd = ::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0) {
      char buf[4096];
      for (;;) {
        const ::ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        e.content.append(buf, static_cast<std::size_t>(n));
      }
      ::close(fd);
    } else {
      e.content = "<unreadable>";
    }
  } else if (S_ISLNK(st.st_mode)) {
    char buf[4096];
    const ::ssize_t n = ::readlinkat(dir, name.c_str(), buf, sizeof buf);
    if (n > 0) e.content.assign(buf, static_cast<std::size_t>(n));
  }
  return e;
}

inline void walk(int dir, const std::string& prefix, canary_snapshot& out) {
  const int fd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return;
  }
  std::vector<std::string> names;
  while (const struct dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  for (const auto& n : names) {
    struct ::stat st;
    if (::fstatat(dir, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const std::string rel = prefix.empty() ? n : prefix + "/" + n;
    out[rel] = entry_of(dir, n, st);
    if (S_ISDIR(st.st_mode)) {
      const int sub = ::openat(dir, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) {
        walk(sub, rel, out);
        ::close(sub);
      }
    }
  }
  ::closedir(d);
}

inline std::string describe(const canary_entry& e) {
  std::ostringstream s;
  s << "mode " << std::oct << e.mode << std::dec << " uid " << e.uid << " gid " << e.gid << " size " << e.size
    << " mtime " << e.mtime_ns << " ino " << e.ino << " nlink " << e.nlink << " content \"" << e.content.substr(0, 40)
    << "\"";
  return s.str();
}

}  // namespace detail_canary

/// A snapshot of `root` and everything below it (links are recorded, never followed).
inline canary_snapshot snapshot(const fs::path& root) {
  canary_snapshot out;
  const int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw_errno("open", root);
  struct ::stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw_errno("fstat", root);
  }
  out["."] = detail_canary::entry_of(fd, ".", st);
  detail_canary::walk(fd, "", out);
  ::close(fd);
  return out;
}

/// Every difference between two snapshots, one line each; empty when there is none.
inline std::string changes(const canary_snapshot& before, const canary_snapshot& after) {
  std::string out;
  for (const auto& [rel, e] : before) {
    const auto it = after.find(rel);
    if (it == after.end())
      out += "removed: " + rel + "\n";
    else if (it->second != e)
      out += "changed: " + rel + ": " + detail_canary::describe(e) + " -> " + detail_canary::describe(it->second) + "\n";
  }
  for (const auto& [rel, e] : after)
    if (!before.count(rel)) out += "added: " + rel + ": " + detail_canary::describe(e) + "\n";
  return out;
}

/// Fills the existing directory `dir` with the canary entries: secret (0600), open (0666),
/// tool (04755), sub/inner (0644), link -> secret; all with past mtimes.
inline void plant_canary(const fs::path& dir) {
  write_file(dir / "secret", "root only\n", 0600, past_ns(7000));
  write_file(dir / "open", "anyone may write\n", 0666, past_ns(7000));
  write_file(dir / "tool", "#!/bin/sh\necho canary\n", 04755, past_ns(7000));
  make_dir(dir / "sub");
  write_file(dir / "sub" / "inner", "inner\n", 0644, past_ns(7000));
  set_mtime(dir / "sub", past_ns(7000));
  make_symlink("secret", dir / "link");
}

}  // namespace treesync_test

#endif  // TREESYNC_TESTS_SUPPORT_CANARY_HPP
