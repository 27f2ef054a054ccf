// tests/support/deep_tree.hpp - directory chains far deeper than PATH_MAX, for the tests of deep
// trees (test_deep.cpp) and of resource exhaustion (test_security.cpp):
//
//   deep_scratch s("deep")          a directory on tmpfs when there is one (/dev/shm, else /tmp),
//                                    removed with `rm -rf` (which copes with any depth);
//   make_chain(root, depth[, s])    `depth` directories named "d" below `root`, made with *at()
//                                    calls only, and leaf.txt ("leaf") at the bottom, with the
//                                    mtime s seconds after the epoch when s is given;
//   chain_leaf(root, depth)         the bottom file's content, or "" when the chain is broken;
//   fd_limit limit(n)                lowers the soft limit on open files for a scope.
#ifndef TREESYNC_TESTS_SUPPORT_DEEP_TREE_HPP
#define TREESYNC_TESTS_SUPPORT_DEEP_TREE_HPP

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace treesync_test {

class deep_scratch {
 public:
  explicit deep_scratch(const std::string& name) {
    const std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/treesync-" + name + "-XXXXXX";
    if (const char* p = ::mkdtemp(tmpl.data())) path = p;
  }
  ~deep_scratch() {
    if (!path.empty()) std::system(("rm -rf '" + path + "'").c_str());
  }
  deep_scratch(const deep_scratch&) = delete;
  deep_scratch& operator=(const deep_scratch&) = delete;
  std::string path;
};

class fd_limit {
 public:
  explicit fd_limit(rlim_t soft) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = std::min<rlim_t>(soft, saved_.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &lowered);
  }
  ~fd_limit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  fd_limit(const fd_limit&) = delete;
  fd_limit& operator=(const fd_limit&) = delete;

 private:
  rlimit saved_{};
};

/// Returns false on failure.
inline bool make_chain(const std::string& root, int depth, std::int64_t leaf_mtime_s = 0) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; fd >= 0 && i < depth; ++i) {
    ::mkdirat(fd, "d", 0755);
    const int next = ::openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    fd = next;
  }
  if (fd < 0) return false;
  const int f = ::openat(fd, "leaf.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  const bool ok = f >= 0 && ::write(f, "leaf", 4) == 4;
  if (f >= 0) ::close(f);
  if (leaf_mtime_s != 0) {
    const struct timespec times[2] = {{0, UTIME_OMIT}, {static_cast<time_t>(leaf_mtime_s), 0}};
    ::utimensat(fd, "leaf.txt", times, 0);
  }
  ::close(fd);
  return ok;
}

inline std::string chain_leaf(const std::string& root, int depth) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; fd >= 0 && i < depth; ++i) {
    const int next = ::openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(fd);
    fd = next;
  }
  if (fd < 0) return "";
  char buf[16] = {};
  const int f = ::openat(fd, "leaf.txt", O_RDONLY | O_CLOEXEC);
  const auto n = f >= 0 ? ::read(f, buf, sizeof buf) : -1;
  if (f >= 0) ::close(f);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
}

}  // namespace treesync_test

#endif  // TREESYNC_TESTS_SUPPORT_DEEP_TREE_HPP
