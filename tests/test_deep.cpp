// Deep trees: no recursion, and a bounded number of open descriptors however deep the tree is.
#include <treesync/mock_fs.hpp>

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace {
using namespace std::chrono_literals;

// Lowers the soft limit on open files for the duration of a test.
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

// A chain of `depth` directories named "d" below `root`, built with *at() calls only (the path
// is far longer than PATH_MAX); a file at the bottom.  Returns false on failure.
bool make_chain(const std::string& root, int depth) {
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
  const struct timespec old[2] = {{0, UTIME_OMIT}, {1500000000, 0}};
  ::utimensat(fd, "leaf.txt", old, 0);
  ::close(fd);
  return ok;
}

// Reads the file at the bottom of a chain, or "" when the chain is broken.
std::string chain_leaf(const std::string& root, int depth) {
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

struct scratch {
  scratch() {
    // tmpfs when there is one: creating and removing 10,000 directories is fast there
    std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/treesync-deep-XXXXXX";
    path = ::mkdtemp(tmpl.data());
  }
  ~scratch() {
    std::error_code ec;  // remove_all recurses; for very deep trees fall back to rm
    std::filesystem::remove_all(path, ec);
    if (ec) std::system(("rm -rf '" + path + "'").c_str());
  }
  std::string path;
};
}  // namespace

TEST_CASE("a 2,000-level chain syncs over the mock without recursion, serial and parallel") {
  for (unsigned jobs : {1u, 4u}) {
    CAPTURE(jobs);
    treesync::mock_fs fs;
    std::string p = "/src";
    for (int i = 0; i < 2000; ++i) p += "/d";  // the mock's path strings make deeper chains slow
    fs.write(p + "/leaf.txt", "leaf");
    fs.advance(10s);
    const auto r = treesync::sync(fs, "/src", "/dst", treesync::jobs{jobs});
    CHECK(r.ok());
    CHECK(r.created == 2000 + 2);
    CHECK(fs.read("/dst" + p.substr(4) + "/leaf.txt") == "leaf");
    fs.advance(10s);
    fs.reset_counters();
    CHECK(treesync::sync(fs, "/src", "/dst", treesync::jobs{jobs}).unchanged());
    CHECK(fs.ops().writes() == 0);
  }
}

TEST_CASE("posix: a 10,000-level chain, far past PATH_MAX, syncs with a small descriptor limit") {
  scratch s;
  const std::string src = s.path + "/src", dst = s.path + "/dst";
  REQUIRE(::mkdir(src.c_str(), 0755) == 0);
  const int depth = 10000;  // "/d" x 10,000: 20,000 bytes of path, five times PATH_MAX
  REQUIRE(make_chain(src, depth));
  fd_limit limit(512);  // the first 128 levels keep their two handles open
  for (unsigned jobs : {1u, 3u}) {
    CAPTURE(jobs);
    const auto cold = treesync::sync(src, dst, treesync::jobs{jobs});
    const std::string first_error = cold.errors.empty() ? std::string() : treesync::to_string(cold.errors[0].operation) + std::string(" ") + cold.errors[0].code.message();
    INFO(first_error);
    CHECK(cold.ok());
    CHECK(chain_leaf(dst, depth) == "leaf");
    const auto warm = treesync::sync(src, dst, treesync::jobs{jobs});
    CHECK(warm.ok());
    CHECK(warm.unchanged());
    std::system(("rm -rf '" + dst + "'").c_str());
  }
}
