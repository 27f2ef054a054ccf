// The rule-file reader and the rule budget (issue 33 items 1 and 2): a name a rule file merges is
// resolved below the rule file's directory (never absolute, never '..', no symlink followed),
// nothing is opened for reading before it is known to be a regular file, and the rules parsed
// from rule files count against one budget (refused past it, or everything kept).
#include <treesync/treesync.hpp>

#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <filesystem>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <map>
#include <string>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using treesync::file_type;
using treesync::filter;
constexpr file_type F = file_type::regular;

// Rule files by "DIR/NAME", and which were asked for.
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

std::string what_of(const filter& f, std::string_view rel) {
  try {
    (void)f.excluded(rel, F);
  } catch (const treesync::filter_error& e) {
    return e.what();
  }
  return std::string();
}

std::string lines(int n, const std::string& prefix) {
  std::string out;
  for (int i = 0; i < n; ++i) out += prefix + std::to_string(i) + "\n";
  return out;
}

// The bytes the allocator has handed out and not had back (glibc: the arenas and the mmapped
// blocks; -1 where that is not known: another libc, or ASan's allocator).
long long heap_in_use() {
#if defined(__SANITIZE_ADDRESS__)
  return -1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return -1;
#endif
#endif
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 m = ::mallinfo2();
  return static_cast<long long>(m.uordblks + m.hblkhd);
#else
  return -1;
#endif
}

}  // namespace

TEST_CASE("rule files: an absolute merge name is a bad line and is never read") {
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "src");
  treesync_test::write_file(t / "secret", "- guess-me-42\n", 0600);
  treesync_test::write_file(t / "src" / ".rules", "merge " + (t / "secret").string() + "\n");
  filter f = filter::reading(t / "src");
  f.dir_merge(".rules");
  const std::string e = what_of(f, "guess-me-42");
  CHECK(e.find("merge file not below the rule file's directory") != std::string::npos);
  CHECK(e.find("guess-me") == std::string::npos);
  // the same refusal whether the named file exists or not: no existence oracle
  filter g = filter::reading(t / "src");
  g.dir_merge(".rules");
  treesync_test::write_file(t / "src" / ".rules", "merge " + (t / "missing").string() + "\n");
  CHECK(what_of(g, "guess-me-42") == e);
}

TEST_CASE("rule files: a merge name with a '..' component is a bad line, before the loader is asked") {
  for (const char* name : {"../x", "sub/../x", "..", "./x", "sub//x", "sub/"}) {
    map_loader files;
    files.files[".rules"] = std::string("merge ") + name + "\n";
    files.files["x"] = "- a\n";
    filter f(files.get());
    f.dir_merge(".rules");
    CAPTURE(name);
    CHECK(what_of(f, "a").find("merge file not below") != std::string::npos);
    CHECK(files.reads.size() == 1);  // .rules only
  }
}

TEST_CASE("rule files: an absolute or '..' dir-merge name inside a rule file is a bad line") {
  for (const char* line : {"dir-merge /etc/x", ": ../x", ":- /x"}) {
    map_loader files;
    files.files[".rules"] = std::string(line) + "\n";
    filter f(files.get());
    f.dir_merge(".rules");
    CAPTURE(line);
    CHECK(what_of(f, "a").find("merge file not below") != std::string::npos);
  }
}

TEST_CASE("rule files: 'merge sub/NAME' reads the file below the rule file's directory") {
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "src" / "d" / "sub");
  treesync_test::write_file(t / "src" / "d" / ".rules", "merge sub/more\n");
  treesync_test::write_file(t / "src" / "d" / "sub" / "more", "- *.o\n");
  filter f = filter::reading(t / "src");
  f.dir_merge(".rules");
  CHECK(f.excluded("d/a.o", F));
  CHECK_FALSE(f.excluded("d/a.c", F));
  CHECK_FALSE(f.excluded("a.o", F));
}

TEST_CASE("rule files: a merge name through a symlinked directory reads nothing") {
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "src");
  std::filesystem::create_directories(t / "outside");
  treesync_test::write_file(t / "outside" / "secret", "- guess-me-42\n", 0600);
  treesync_test::make_symlink((t / "outside").string(), t / "src" / "lnk");
  treesync_test::write_file(t / "src" / ".rules", "merge lnk/secret\n");
  filter f = filter::reading(t / "src");
  f.dir_merge(".rules");
  CHECK_FALSE(f.excluded("guess-me-42", F));
  // and the last component a symlink
  treesync_test::make_symlink((t / "outside" / "secret").string(), t / "src" / "direct");
  treesync_test::write_file(t / "src" / ".rules", "merge direct\n");
  filter g = filter::reading(t / "src");
  g.dir_merge(".rules");
  CHECK_FALSE(g.excluded("guess-me-42", F));
  // the same file below a real directory is read
  std::filesystem::create_directories(t / "src" / "real");
  treesync_test::write_file(t / "src" / "real" / "secret", "- guess-me-42\n");
  treesync_test::write_file(t / "src" / ".rules", "merge real/secret\n");
  filter h = filter::reading(t / "src");
  h.dir_merge(".rules");
  CHECK(h.excluded("guess-me-42", F));
}

TEST_CASE("rule files: read_rule_file_below follows no symlink in the directory's components") {
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "dst" / "real");
  std::filesystem::create_directories(t / "outside");
  treesync_test::write_file(t / "outside" / ".rules", "- x\n");
  treesync_test::write_file(t / "dst" / "real" / ".rules", "- y\n");
  treesync_test::make_symlink((t / "outside").string(), t / "dst" / "lnk");
  const int fd = ::open((t / "dst").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  CHECK(filter::read_rule_file_below(fd, "real", ".rules") == "- y\n");
  CHECK(filter::read_rule_file_below(fd, "lnk", ".rules").empty());
  CHECK(filter::read_rule_file_below(fd, "", "lnk/.rules").empty());
  CHECK(filter::read_rule_file_below(fd, "real/..", "lnk/.rules").empty());
  CHECK(filter::read_rule_file_below(fd, "", "../outside/.rules").empty());
  ::close(fd);
}

TEST_CASE("rule files: a FIFO named by a rule file is never opened for I/O") {
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "src");
  treesync_test::make_fifo(t / "src" / "fifo", 0644);
  treesync_test::make_fifo(t / "src" / ".rules2", 0644);
  treesync_test::write_file(t / "src" / ".rules", "merge fifo\n");
  const int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  REQUIRE(in >= 0);
  REQUIRE(::inotify_add_watch(in, (t / "src" / "fifo").c_str(), IN_OPEN) >= 0);
  REQUIRE(::inotify_add_watch(in, (t / "src" / ".rules2").c_str(), IN_OPEN) >= 0);
  const auto opens = [&] {
    int n = 0;
    alignas(inotify_event) char buf[4096];
    for (ssize_t r; (r = ::read(in, buf, sizeof buf)) > 0;)
      for (char* p = buf; p < buf + r;) {
        const auto* e = reinterpret_cast<const inotify_event*>(p);
        if (e->mask & IN_OPEN) ++n;
        p += sizeof(inotify_event) + e->len;
      }
    return n;
  };
  filter f = filter::reading(t / "src");
  f.dir_merge(".rules").dir_merge(".rules2");  // a merged FIFO, and a per-directory one
  CHECK_FALSE(f.excluded("a", F));
  CHECK(filter::read_rule_file((t / "src" / "fifo").c_str()).empty());
  CHECK(opens() == 0);
  // the probe sees an open for reading
  const int probe = ::open((t / "src" / "fifo").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(probe >= 0);
  ::close(probe);
  CHECK(opens() == 1);
  ::close(in);
}

TEST_CASE("rule budget: counted as parsed rules; past it a rule file refuses the run by default") {
  map_loader files;
  files.files[".rules"] = lines(5, "- a");
  files.files["d/.rules"] = lines(6, "- b");
  filter f(files.get());
  f.dir_merge(".rules").max_rules(10);
  CHECK(f.max_rules() == 10);
  CHECK(f.excluded("a3", F));
  CHECK(f.rules_held() == 5);
  const std::string e = what_of(f, "d/x");
  CHECK(e.find("more than 10 rules") != std::string::npos);
  CHECK(f.budget_overflows() == 1);
  CHECK(f.rules_held() <= 10);
}

TEST_CASE("rule budget: with keep_all_past_budget a rule file past it excludes everything below its directory") {
  map_loader files;
  files.files[".rules"] = lines(5, "- a");
  files.files["d/.rules"] = lines(6, "- b");
  filter f(files.get());
  f.dir_merge(".rules").max_rules(10).keep_all_past_budget(true);
  CHECK(f.excluded("d/x", F));
  CHECK(f.excluded("d/e/y", file_type::directory));
  CHECK_FALSE(f.excluded("x", F));  // the root's file was within it
  CHECK(f.budget_overflows() == 1);
  CHECK(f.rules_held() == 5);
}

TEST_CASE("rule budget: a directory's rules are given back when every thread has left it") {
  map_loader files;
  files.files["d/.rules"] = lines(8, "- b");
  files.files["e/.rules"] = lines(8, "- c");
  filter f(files.get());
  f.dir_merge(".rules").max_rules(10);
  CHECK(f.excluded("d/b1", F));
  CHECK(f.rules_held() == 8);
  CHECK(f.excluded("e/c1", F));  // d's contexts released: within the budget again
  CHECK(f.rules_held() == 8);
}

TEST_CASE("rule budget: shared by two filters (SRC's and DST's)") {
  map_loader src, dst;
  src.files[".rules"] = lines(6, "- a");
  dst.files[".rules"] = lines(6, "- b");
  filter s(src.get());
  s.dir_merge(".rules").max_rules(10);
  filter d(dst.get());
  d.dir_merge(".rules").share_rule_budget(s).keep_all_past_budget(true);
  CHECK(d.max_rules() == 10);
  CHECK(s.excluded("a1", F));
  CHECK(d.excluded("anything", F));  // 6 + 6 > 10: DST's root file not parsed, all kept
  CHECK(d.budget_overflows() == 1);
  CHECK(s.rules_held() == 6);
}

TEST_CASE("rule budget: a chain of 64 directories whose rule files are one large text stops at the budget") {
  map_loader files;
  const std::string big = lines(1000, "- x");
  std::string dir;
  for (int i = 0; i < 64; ++i) {
    files.files[dir + (dir.empty() ? "" : "/") + ".rules"] = big;
    dir += dir.empty() ? "d" : "/d";
  }
  filter f(files.get());
  f.dir_merge(".rules").max_rules(10000);
  const std::string e = what_of(f, dir + "/y");
  CHECK(e.find("more than 10000 rules") != std::string::npos);
  CHECK(f.rules_held() <= 10000);
  CHECK(files.reads.size() == 11);  // 10 files of 1,000 rules held, the 11th past it
  filter g(files.get());
  g.dir_merge(".rules").max_rules(10000).keep_all_past_budget(true);
  CHECK(g.excluded(dir + "/y", F));
  CHECK(g.rules_held() == 10000);
}

TEST_CASE("rule budget: 32 lines 'merge big' in one rule file count each merged rule") {
  map_loader files;
  std::string fan;
  for (int i = 0; i < 32; ++i) fan += "merge big\n";
  files.files[".rules"] = fan;
  files.files["big"] = lines(1000, "- x");
  filter f(files.get());
  f.dir_merge(".rules").max_rules(10000);
  CHECK(what_of(f, "y").find("more than 10000 rules") != std::string::npos);
  CHECK(f.rules_held() == 0);  // the file past the budget holds nothing
  CHECK(files.reads["big"] == 10);  // the 10th merge's rules cross the budget: no more read
  filter g(files.get());
  g.dir_merge(".rules").max_rules(40000);
  CHECK(g.excluded("x5", F));
  CHECK(g.rules_held() == 32 * 1000 + 32);  // the merged rules and the 32 merge lines
}

TEST_CASE("rule budget: a rule file past it gives its rules' memory back, in every directory of a chain") {
  // issue 45 item 4: each directory's file parses 32 x 1,000 merged rules, more than the budget;
  // its rules were cleared but the vector kept its capacity (~1.8 MB a directory here, ~55 MB
  // with the default budget), held for as long as the walk was below it
  map_loader files;
  std::string fan;
  for (int i = 0; i < 32; ++i) fan += "merge big\n";
  const std::string big = lines(1000, "- x");
  std::string dir;
  for (int i = 0; i < 16; ++i) {
    dir += dir.empty() ? "d" : "/d";
    files.files[dir + "/.rules"] = fan;
    files.files[dir + "/big"] = big;
  }
  filter f(files.get());
  f.dir_merge(".rules").max_rules(20000).keep_all_past_budget(true);
  const long long before = heap_in_use();
  CHECK(f.excluded(dir + "/y", F));  // the walk's contexts, d down to the 16th level, held now
  const long long after = heap_in_use();
  CHECK(f.budget_overflows() == 16);
  CHECK(f.rules_held() == 0);
  CHECK(files.reads[dir + "/big"] == 20);  // 20,000 rules parsed in each, then given back
  if (before >= 0 && after >= 0) {
    MESSAGE("the 16 directories' contexts hold ", after - before, " bytes");
    CHECK(after - before < 256 * 1024);  // was ~29 MB
  }
}

TEST_CASE("rule budget: a merged file's patterns count each time it is parsed, a long pattern by its length") {
  // 64 KB of pattern merged 64 times held 4 MB for 128 counted rules; now a rule counts once more
  // per 64 bytes of its pattern (filter::max_rules)
  map_loader files;
  std::string fan;
  for (int i = 0; i < 64; ++i) fan += "merge long\n";
  files.files[".rules"] = fan;
  files.files["long"] = "- " + std::string(64000, 'a') + "\n";
  filter f(files.get());
  f.dir_merge(".rules").max_rules(10000);
  CHECK(what_of(f, "y").find("more than 10000 rules") != std::string::npos);
  CHECK(f.rules_held() == 0);
  CHECK(files.reads["long"] == 10);  // 9 x (1 + 1 + 64,000 / 64) = 9,018; the 10th crosses 10,000
  filter g(files.get());
  g.dir_merge(".rules").max_rules(100000);
  CHECK(g.excluded(std::string(64000, 'a'), F));
  CHECK(g.rules_held() == 64 * (1 + 1 + 64000 / 64));
}

TEST_CASE("rule files: a merge file that merges itself stops at rsync's depth limit (32 files) with merge_depth_error") {
  // rsync's testsuite filter-merge-recursion: ': .merge' with a .merge holding '. .merge'
  map_loader files;
  files.files[".merge"] = ". .merge\n";
  filter f(files.get());
  f.dir_merge(".merge");
  bool depth_error = false;
  try {
    (void)f.excluded("file.txt", F);
  } catch (const treesync::merge_depth_error& e) {
    depth_error = std::string(e.what()).find("merge-file include depth limit (32) exceeded") != std::string::npos;
  }
  CHECK(depth_error);
  CHECK(files.reads[".merge"] == 32);  // the per-directory file and 31 merges of it; the 33rd refused
}

TEST_CASE("rule files: a chain of 32 rule files merging the next is read whole") {
  map_loader files;
  files.files[".merge"] = ". m1\n";
  for (int i = 1; i < 31; ++i) files.files["m" + std::to_string(i)] = ". m" + std::to_string(i + 1) + "\n";
  files.files["m31"] = "- deep\n";
  filter f(files.get());
  f.dir_merge(".merge");
  CHECK(f.excluded("deep", F));
  CHECK_FALSE(f.excluded("shallow", F));
}

TEST_CASE("rule files: one rule file merging 40 files side by side is read whole (rsync bounds only the depth)") {
  map_loader files;
  std::string fan;
  for (int i = 0; i < 40; ++i) {
    fan += ". m" + std::to_string(i) + "\n";
    files.files["m" + std::to_string(i)] = "- f" + std::to_string(i) + "\n";
  }
  files.files[".rules"] = fan;
  filter f(files.get());
  f.dir_merge(".rules");
  CHECK(f.excluded("f0", F));
  CHECK(f.excluded("f39", F));
  CHECK_FALSE(f.excluded("f40", F));
}

TEST_CASE("rule files: one rule file merging more than 1,024 files in all is a filter_error") {
  map_loader files;
  std::string fan;
  for (int i = 0; i < 1025; ++i) fan += ". m\n";
  files.files[".rules"] = fan;
  files.files["m"] = "- x\n";
  filter f(files.get());
  f.dir_merge(".rules");
  CHECK(what_of(f, "y").find("more than 1024 merge files read for one rule file (.rules line 1025)") != std::string::npos);
  CHECK(files.reads["m"] == 1024);
}

TEST_CASE("posix_fs::pin_root: the run works in the directory pinned though its name was given to another since") {
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "src");
  std::filesystem::create_directories(t / "dst");
  treesync_test::write_file(t / "src" / "a", "a\n");
  treesync_test::write_file(t / "dst" / "old", "old\n");
  const int fd = ::open((t / "dst").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  treesync::posix_fs fs;
  fs.pin_root(t / "dst", fd);
  ::close(fd);  // pin_root keeps its own
  std::filesystem::rename(t / "dst", t / "read");  // the directory read before the run
  std::filesystem::create_directories(t / "dst");  // a decoy under DST's name
  treesync_test::write_file(t / "dst" / "victim", "v\n");
  const treesync::report r = treesync::sync(fs, t / "src", t / "dst", treesync::deletion::extraneous);
  CHECK(r.errors.empty());
  CHECK(std::filesystem::exists(t / "read" / "a"));
  CHECK_FALSE(std::filesystem::exists(t / "read" / "old"));
  CHECK(std::filesystem::exists(t / "dst" / "victim"));
  CHECK_FALSE(std::filesystem::exists(t / "dst" / "a"));
}

TEST_CASE("rule budget: the texts parsed at once (a file and the files it merges) are bounded by twice the largest rule file") {
  const std::string pad((std::size_t{3} << 20) - 64, '#');  // one comment line of ~3 MiB
  map_loader files;
  files.files[".rules"] = "merge a\n" + pad + "\n";
  files.files["a"] = "merge b\n" + pad + "\n";
  files.files["b"] = pad + "\n- x\n";
  filter f(files.get());
  f.dir_merge(".rules");
  CHECK(what_of(f, "x").find("MiB at once") != std::string::npos);
  files.files["a"] = "merge b\n- y\n";  // 6 MiB at once: within
  filter g(files.get());
  g.dir_merge(".rules");
  CHECK(g.excluded("x", F));
  CHECK(g.excluded("y", F));
}
