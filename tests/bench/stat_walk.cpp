// stat_walk - the floor under a warm no-op sync: list every directory of the given trees with
// getdents64 and fstatat every entry, nothing else (no comparison, no allocation per entry beyond
// the directory queue). A mirror that finds nothing to do cannot need less than this walk of both
// trees; anything it spends above it is overhead.
//
//   stat_walk [-j N] DIR...        N threads (default 1) share one queue of open directories
//
// Prints "<directories> dirs, <entries> entries" on stdout. Exit status 1 if any call failed.
// Part of the treesync benchmark harness (tests/bench/run.sh); not run by the unit tests.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct linux_dirent64 {
  std::uint64_t d_ino;
  std::int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];  // really NUL-terminated, d_reclen long
};

std::atomic<std::uint64_t> dirs{0}, entries{0}, failures{0};

void fail(const char* op, const char* name) {
  std::fprintf(stderr, "stat_walk: %s %s: %s\n", op, name, std::strerror(errno));
  failures.fetch_add(1, std::memory_order_relaxed);
}

// Lists the directory `fd`, stats each entry, and hands each subdirectory (opened) to `push`.
// Closes `fd`.
template <class Push>
void walk_one(int fd, std::vector<char>& buf, Push&& push) {
  dirs.fetch_add(1, std::memory_order_relaxed);
  std::uint64_t n = 0;
  for (;;) {
    const long got = syscall(SYS_getdents64, fd, buf.data(), buf.size());
    if (got < 0) {
      fail("getdents64", "(dir)");
      break;
    }
    if (got == 0) break;
    for (long off = 0; off < got;) {
      const auto* d = reinterpret_cast<const linux_dirent64*>(buf.data() + off);
      off += d->d_reclen;
      const char* name = d->d_name;
      if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
      struct stat st;
      if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        fail("fstatat", name);
        continue;
      }
      ++n;
      if (S_ISDIR(st.st_mode)) {
        const int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) fail("openat", name);
        else push(sub);
      }
    }
  }
  entries.fetch_add(n, std::memory_order_relaxed);
  close(fd);
}

void walk_serial(int fd, std::vector<char>& buf) {
  std::vector<int> subdirs;
  walk_one(fd, buf, [&](int sub) { subdirs.push_back(sub); });
  for (int sub : subdirs) walk_serial(sub, buf);
}

// N workers over a LIFO queue of open directory handles (LIFO keeps the frontier, and so the
// number of open handles, small). `pending` counts directories queued or being listed.
class pool {
 public:
  explicit pool(unsigned n) : n_(n) {}

  void run(const std::vector<int>& roots) {
    for (int fd : roots) queue_.push_back(fd);
    pending_ = roots.size();
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < n_; ++i) threads.emplace_back([this] { work(); });
    for (auto& t : threads) t.join();
  }

 private:
  void work() {
    std::vector<char> buf(64 * 1024);
    std::vector<int> found;
    for (;;) {
      int fd;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !queue_.empty() || pending_ == 0; });
        if (queue_.empty()) return;  // pending_ == 0: everything is walked
        fd = queue_.back();
        queue_.pop_back();
      }
      found.clear();
      walk_one(fd, buf, [&](int sub) { found.push_back(sub); });
      bool wake;
      {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.insert(queue_.end(), found.begin(), found.end());
        pending_ += found.size();
        --pending_;
        wake = pending_ == 0 || !found.empty();  // the end, or new work for idle workers
      }
      if (wake) cv_.notify_all();
    }
  }

  unsigned n_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> queue_;
  std::size_t pending_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  unsigned threads = 1;
  std::vector<const char*> roots;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-j") == 0 && i + 1 < argc) threads = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (std::strncmp(argv[i], "-j", 2) == 0 && argv[i][2] != '\0') threads = static_cast<unsigned>(std::atoi(argv[i] + 2));
    else roots.push_back(argv[i]);
  }
  if (roots.empty() || threads == 0) {
    std::fprintf(stderr, "usage: stat_walk [-j N] DIR...\n");
    return 2;
  }
  // Each queued directory holds a handle: allow as many as the hard limit.
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }

  std::vector<int> fds;
  for (const char* r : roots) {
    const int fd = open(r, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) fail("open", r);
    else fds.push_back(fd);
  }
  if (threads == 1) {
    std::vector<char> buf(64 * 1024);
    for (int fd : fds) walk_serial(fd, buf);
  } else {
    pool(threads).run(fds);
  }
  std::printf("%llu dirs, %llu entries\n", static_cast<unsigned long long>(dirs.load()),
              static_cast<unsigned long long>(entries.load()));
  return failures.load() == 0 ? 0 : 1;
}
