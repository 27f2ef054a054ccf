// treesync::filter's bounds and rule-file errors (issue 23 F/G, issue 24 item 4): what an entry
// costs with per-directory rule files (counted in allocations, never timed), how long a
// directory's rules are kept, the largest rule file, bad lines and merges inside rule files.
#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <condition_variable>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {
thread_local bool counting = false;
thread_local std::size_t counted_bytes = 0;
}  // namespace

// Allocations made by this thread while `counting` is set (the filter's path copies show here).
void* operator new(std::size_t n) {
  if (counting) counted_bytes += n;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (counting) counted_bytes += n;
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
// every unaligned form allocates with malloc, so every one frees with free (a sanitizer's own
// nothrow new paired with this delete is an alloc-dealloc mismatch)
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

using treesync::file_type;
using treesync::filter;
using treesync::mock_fs;
using namespace std::chrono_literals;

constexpr file_type F = file_type::regular;

// A loader over a map "DIR/NAME" -> text, counting the reads of each key.
struct map_loader {
  std::map<std::string, std::string> files;
  std::map<std::string, int> reads;
  filter::loader get() {
    return [this](std::string_view dir, std::string_view name) {
      std::string key(dir);
      if (!key.empty()) key += '/';
      key += name;
      ++reads[key];
      const auto it = files.find(key);
      return it == files.end() ? std::string() : it->second;
    };
  }
};

filter::loader mock_loader(const mock_fs& fs) {
  return [&fs](std::string_view dir, std::string_view name) {
    std::string p = "/src";
    if (!dir.empty()) p += "/" + std::string(dir);
    p += "/" + std::string(name);
    return fs.exists(p) ? fs.read(p) : std::string();
  };
}

std::string chain(int depth) {
  std::string rel;
  for (int i = 0; i < depth; ++i) rel += i ? "/d" : "d";
  return rel;
}

}  // namespace

TEST_CASE("filter with dir-merge: an entry 1,000 levels deep costs no path copies once its directory was entered") {
  map_loader files;
  files.files[".rules"] = "- core\n";
  filter f(files.get());
  f.dir_merge(".rules");
  const std::string dir = chain(1000);
  const std::string core = dir + "/core", keep = dir + "/keep";
  CHECK(f.excluded(core, F));  // enters the directory: its contexts are made once
  counted_bytes = 0;
  counting = true;
  bool all = true;
  for (int i = 0; i < 100; ++i) all = all && f.excluded(core, F) && !f.excluded(keep, F);
  counting = false;
  CHECK(all);
  // a copy of each ancestor's path per entry would be 1,000 x 1 KiB per call (200 MB here)
  CHECK(counted_bytes < 4096);
}

TEST_CASE("filter with dir-merge: a 1,000-level walk reads each directory's rule file once") {
  map_loader files;
  files.files[".rules"] = "- core\n";
  filter f(files.get());
  f.dir_merge(".rules");
  std::string dir;
  for (int i = 0; i < 1000; ++i) {
    CHECK(f.excluded(dir.empty() ? "core" : dir + "/core", F));
    CHECK_FALSE(f.excluded(dir.empty() ? "d" : dir + "/d", file_type::directory));
    dir += dir.empty() ? "d" : "/d";
  }
  std::size_t most = 0;
  for (const auto& kv : files.reads) most = std::max<std::size_t>(most, static_cast<std::size_t>(kv.second));
  CHECK(files.reads.size() == 1000);
  CHECK(most == 1);
}

// Two workers, as the engine's on a chain with one file per level: they take turns by level going
// down, then one goes back up through the files the other left behind, then both go on down.
// Each directory's file is read once: a thread takes the contexts another thread made, and one
// going back up and down again reads nothing anew.  Before, each thread read every directory it
// entered (twice per level here) and one coming down again re-read every level below where it
// had been, O(depth) reads and openat() calls per jump; at 20,000 levels that made the lagging
// worker ever slower, the engine's deep directories stayed open while it lagged, and the run
// ended in EMFILE (exit 23).
TEST_CASE("filter with dir-merge: two threads taking turns down a chain and back up read each directory's file once") {
  map_loader files;
  files.files[".rules"] = "- core\n";
  std::mutex load_mu;  // map_loader is not thread-safe; the turns below serialize anyway
  filter::loader inner = files.get();
  filter f([&](std::string_view dir, std::string_view name) {
    std::lock_guard<std::mutex> lock(load_mu);
    return inner(dir, name);
  });
  f.dir_merge(".rules");
  constexpr int depth = 400;
  std::vector<std::string> dirs{""};
  for (int i = 1; i <= 2 * depth; ++i) dirs.push_back(dirs.back().empty() ? "d" : dirs.back() + "/d");
  const auto in = [&](int level, const char* name) {
    return dirs[static_cast<std::size_t>(level)].empty() ? std::string(name)
                                                        : dirs[static_cast<std::size_t>(level)] + "/" + name;
  };
  // turn-taking: each step runs on its thread (0 or 1), in order; the other thread waits
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<int, std::function<void()>>> steps;
  bool ok = true;
  for (int level = 0; level <= depth; ++level)  // down, taking turns by level: the directory entry only
    steps.push_back({level % 2, [&, level] { ok = ok && !f.excluded(in(level, "d"), file_type::directory); }});
  for (int level = depth - 1; level >= 0; level -= 2)  // thread 1 goes back up through the files
    steps.push_back({1, [&, level] { ok = ok && f.excluded(in(level, "core"), F) && !f.excluded(in(level, "f"), F); }});
  for (int level = depth + 1; level < 2 * depth; ++level)  // and both go on down
    steps.push_back({level % 2, [&, level] {
                       ok = ok && !f.excluded(in(level, "d"), file_type::directory) && f.excluded(in(level, "core"), F);
                     }});
  std::size_t next = 0;
  const auto worker = [&](int me) {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return next == steps.size() || steps[next].first == me; });
      if (next == steps.size()) return;
      steps[next].second();
      ++next;
      cv.notify_all();
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  CHECK(ok);
  CHECK(files.reads.size() == static_cast<std::size_t>(2 * depth));  // the root and every directory but the last
  std::size_t most = 0, total = 0;
  for (const auto& kv : files.reads) {
    most = std::max<std::size_t>(most, static_cast<std::size_t>(kv.second));
    total += static_cast<std::size_t>(kv.second);
  }
  CHECK(most == 1);
  CHECK(total == static_cast<std::size_t>(2 * depth));
}

TEST_CASE("filter with dir-merge: the rules of a directory the walk has left are not kept") {
  map_loader files;
  for (int i = 0; i < 50; ++i) files.files["d" + std::to_string(i) + "/.rules"] = std::string(1000, '#') + "\n- x\n";
  filter f(files.get());
  f.dir_merge(".rules");
  for (int i = 0; i < 50; ++i) CHECK(f.excluded("d" + std::to_string(i) + "/x", F));
  CHECK(files.reads["d0/.rules"] == 1);
  CHECK(f.excluded("d0/x", F));  // back in d0: its file is read again, nothing was cached for it
  CHECK(files.reads["d0/.rules"] == 2);
}

TEST_CASE("filter::read_rule_file refuses a file larger than 4 MiB with an error, not as an empty rule set") {
  treesync_test::temp_dir t;
  treesync_test::write_file(t / "big", std::string((4u << 20) + 1, '#'));
  treesync_test::write_file(t / "fits", std::string((1u << 20) + 1, '#'));
  CHECK_THROWS_WITH_AS(filter::read_rule_file((t / "big").c_str()), doctest::Contains("larger than"),
                       std::runtime_error);
  CHECK(filter::read_rule_file((t / "fits").c_str()).size() == (1u << 20) + 1);
}

TEST_CASE("sync with filter: a bad line in a per-directory rule file stops the run before anything is written") {
  mock_fs fs;
  fs.write("/src/a.c", "a");
  fs.write("/src/b.h", "b");
  fs.write("/src/.rules", "garbage\n- *.c\n");
  fs.advance(10s);
  filter f(mock_loader(fs));
  f.dir_merge(".rules");
  CHECK_THROWS_WITH_AS((void)treesync::sync(fs, "/src", "/dst", f),
                       doctest::Contains("Unknown filter rule: <rule from .rules line 1>"), std::runtime_error);
  CHECK_FALSE(fs.exists("/dst/a.c"));
  CHECK_FALSE(fs.exists("/dst/b.h"));
}

TEST_CASE("filter: a bad line in a rule file below the root is an error naming the file and line") {
  map_loader files;
  files.files["sub/.rules"] = "- *.o\n\n+ ok\nexclud x\n";
  filter f(files.get());
  f.dir_merge(".rules");
  CHECK_FALSE(f.excluded("a.o", F));
  CHECK_THROWS_WITH_AS(f.excluded("sub/a.o", F), doctest::Contains("Unknown filter rule: <rule from sub/.rules line 4>"),
                       std::runtime_error);
}

TEST_CASE("filter: an error for a bad line never quotes it, so a merged file is not copied into the message") {
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "src" / "sub");
  treesync_test::write_file(t / "src" / "sub" / "secret", "canary-secret-4721\n");
  treesync_test::write_file(t / "src" / "sub" / ".rules", "merge secret\n");
  treesync_test::write_file(t / "src" / ".rules", "canary-own-line\n");
  filter f = filter::reading(t / "src");
  f.dir_merge(".rules");
  std::string root_message, merged_message;
  try {
    (void)f.excluded("a", F);
  } catch (const treesync::filter_error& e) {
    root_message = e.what();
  }
  treesync_test::write_file(t / "src" / ".rules", "- *.o\n");
  filter g = filter::reading(t / "src");
  g.dir_merge(".rules");
  try {
    (void)g.excluded("sub/a", F);
  } catch (const treesync::filter_error& e) {
    merged_message = e.what();
  }
  CHECK(root_message == "Unknown filter rule: <rule from .rules line 1>");
  CHECK(merged_message == "Unknown filter rule: <rule from the file merged at sub/.rules line 1, its line 1>");
  CHECK(merged_message.find("canary") == std::string::npos);
  CHECK(root_message.find("canary") == std::string::npos);
}

TEST_CASE("sync with filter: ':- .gitignore' in a rule file reads .gitignore as excludes from that directory down") {
  mock_fs fs;
  for (const char* p : {"/src/a.log", "/src/lib/a.log", "/src/lib/a.c", "/src/lib/sub/b.log", "/src/lib/sub/b.tmp",
                        "/src/lib/sub/b.c"})
    fs.write(p, p);
  fs.write("/src/lib/.rules", ":- .gitignore\n");
  fs.write("/src/lib/.gitignore", "*.log\n# a comment\n");
  fs.write("/src/lib/sub/.gitignore", "*.tmp\n");
  fs.advance(10s);
  filter f(mock_loader(fs));
  f.dir_merge(".rules");
  (void)treesync::sync(fs, "/src", "/dst", f);
  CHECK(fs.exists("/dst/a.log"));  // above the directory holding the dir-merge rule
  CHECK_FALSE(fs.exists("/dst/lib/a.log"));
  CHECK_FALSE(fs.exists("/dst/lib/sub/b.log"));  // inherited
  CHECK_FALSE(fs.exists("/dst/lib/sub/b.tmp"));  // sub's own .gitignore
  CHECK(fs.exists("/dst/lib/sub/b.c"));
  CHECK(fs.exists("/dst/lib/.gitignore"));
}

TEST_CASE("filter: 'merge FILE' in a rule file reads FILE in place, relative to the rule file's directory") {
  map_loader files;
  files.files["sub/.rules"] = "+ keep.o\n. more\n- *.c\n";
  files.files["sub/more"] = "- *.o\n+ x.c\n";
  filter f(files.get());
  f.dir_merge(".rules");
  CHECK_FALSE(f.excluded("sub/keep.o", F));
  CHECK(f.excluded("sub/a.o", F));
  CHECK_FALSE(f.excluded("sub/x.c", F));  // the merged include comes before the file's later exclude
  CHECK(f.excluded("sub/y.c", F));
  CHECK_FALSE(f.excluded("a.o", F));
}

TEST_CASE("filter: the rules of a ':n- NAME' file apply in its directory only, and 'e' excludes NAME") {
  map_loader files;
  files.files[".rules"] = ":n-e .local\n";
  files.files["a/.local"] = "*.o\n";
  filter f(files.get());
  f.dir_merge(".rules");
  CHECK(f.excluded("a/x.o", F));
  CHECK_FALSE(f.excluded("a/b/x.o", F));
  CHECK(f.excluded("a/.local", F));
}

TEST_CASE("filter::reading reads a rule file deeper than PATH_MAX below its root") {
  treesync_test::temp_dir t;
  const std::string root = (t / "src").string();
  REQUIRE(::mkdir(root.c_str(), 0755) == 0);
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(fd >= 0);
  constexpr int depth = 2100;  // "d/" x 2100: 4,200 bytes, past PATH_MAX (4,096)
  for (int i = 0; i < depth; ++i) {
    REQUIRE(::mkdirat(fd, "d", 0755) == 0);
    const int next = ::openat(fd, "d", O_RDONLY | O_DIRECTORY);
    ::close(fd);
    fd = next;
    REQUIRE(fd >= 0);
  }
  const int rf = ::openat(fd, ".rules", O_WRONLY | O_CREAT, 0644);
  REQUIRE(rf >= 0);
  REQUIRE(::write(rf, "- x\n", 4) == 4);
  ::close(rf);
  ::close(fd);
  filter f = filter::reading(root);
  f.dir_merge(".rules");
  std::string dir;
  for (int i = 0; i < depth; ++i) {
    CHECK_FALSE(f.excluded(dir.empty() ? "x" : dir + "/x", F));
    dir += dir.empty() ? "d" : "/d";
  }
  CHECK(f.excluded(dir + "/x", F));
  CHECK_FALSE(f.excluded(dir + "/y", F));
  // remove the chain bottom up through descriptors (temp_dir's removal uses paths)
  std::vector<int> fds{::open(root.c_str(), O_RDONLY | O_DIRECTORY)};
  for (int i = 0; i < depth; ++i) fds.push_back(::openat(fds.back(), "d", O_RDONLY | O_DIRECTORY));
  ::unlinkat(fds.back(), ".rules", 0);
  for (int i = depth; i > 0; --i) {
    ::close(fds[static_cast<std::size_t>(i)]);
    ::unlinkat(fds[static_cast<std::size_t>(i) - 1], "d", AT_REMOVEDIR);
  }
  ::close(fds[0]);
}
