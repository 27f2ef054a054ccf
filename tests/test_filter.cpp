// treesync::filter: rsync's include/exclude rules (first match wins), its pattern semantics and
// per-directory rule files (dir-merge), one behaviour per test case; the engine over mock_fs, the
// rule files' reader on a real temporary directory.  The comparison with rsync itself, rule set by
// rule set, is examples/cli_test.py's group filter_rsync.
#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using treesync::file_type;
using treesync::filter;
using treesync::mock_fs;
using namespace std::chrono_literals;

constexpr file_type F = file_type::regular;
constexpr file_type D = file_type::directory;

// The relative paths of the files and directories below `root`.
std::set<std::string> paths(const mock_fs& fs, const std::string& root) {
  std::set<std::string> out;
  for (const auto& kv : fs.tree(root))
    if (!kv.first.empty()) out.insert(kv.first);
  return out;
}

// A loader reading the per-directory files of mock_fs's /src.
filter::loader mock_loader(const mock_fs& fs) {
  return [&fs](std::string_view dir, std::string_view name) {
    std::string p = "/src";
    if (!dir.empty()) p += "/" + std::string(dir);
    p += "/" + std::string(name);
    return fs.exists(p) ? fs.read(p) : std::string();
  };
}

void source_tree(mock_fs& fs) {
  for (const char* p : {"/src/a.h", "/src/a.c", "/src/lib/b.h", "/src/lib/b.c", "/src/lib/deep/c.h",
                        "/src/lib/deep/c.c", "/src/doc/x.md"})
    fs.write(p, p);
  fs.advance(10s);
}

}  // namespace

TEST_CASE("exclude::from_lines: a pattern a line; blank, '#' and ';' lines skipped, a CRLF's '\\r' dropped, spaces kept") {
  const auto e = treesync::exclude::from_lines("*.o\r\n\n# *.c\n; *.h\n  lead.txt\nlast/");
  CHECK(e.excluded("a/main.o", F));         // the '\r' of a CRLF line is no part of the pattern
  CHECK(!e.excluded("main.c", F));          // a '#' line is a comment
  CHECK(!e.excluded("main.h", F));          // so is a ';' line
  CHECK(e.excluded("  lead.txt", F));       // leading spaces are part of the pattern (rsync)
  CHECK(!e.excluded("lead.txt", F));
  CHECK(e.excluded("last", D));             // the last line, without a newline
  CHECK(!e.excluded("last", F));
}

TEST_CASE("filter: an entry that no rule matches is included") {
  filter f;
  f.exclude("*.o");
  CHECK_FALSE(f.excluded("a.c", F));
  CHECK_FALSE(filter{}.excluded("a.o", F));
}

TEST_CASE("filter: the first matching rule decides") {
  filter f;
  f.include("keep.o").exclude("*.o").include("*.o");
  CHECK_FALSE(f.excluded("keep.o", F));
  CHECK(f.excluded("x.o", F));
}

TEST_CASE("filter: a pattern without a slash matches the last component at any depth") {
  filter f;
  f.exclude("*.o");
  CHECK(f.excluded("x.o", F));
  CHECK(f.excluded("a/b/x.o", F));
  CHECK_FALSE(f.excluded("x.o/y", F));
}

TEST_CASE("filter: a leading slash anchors the pattern at the root") {
  filter f;
  f.exclude("/build");
  CHECK(f.excluded("build", D));
  CHECK_FALSE(f.excluded("sub/build", D));
}

TEST_CASE("filter: a trailing slash matches directories only") {
  filter f;
  f.exclude("cache/");
  CHECK(f.excluded("a/cache", D));
  CHECK_FALSE(f.excluded("a/cache", F));
  CHECK_FALSE(f.excluded("a/cache", file_type::symlink));
}

TEST_CASE("filter: an unanchored pattern with a slash matches the last components of the path") {
  filter f;
  f.exclude("lib/x.c");
  CHECK(f.excluded("lib/x.c", F));
  CHECK(f.excluded("src/lib/x.c", F));
  CHECK_FALSE(f.excluded("mylib/x.c", F));
  CHECK_FALSE(f.excluded("x.c", F));
}

TEST_CASE("filter: * and ? do not match a slash, ** does") {
  filter f;
  f.exclude("/src/*.c").exclude("/t?p").exclude("/deep/**.h");
  CHECK(f.excluded("src/a.c", F));
  CHECK_FALSE(f.excluded("src/sub/a.c", F));
  CHECK(f.excluded("top", F));
  CHECK_FALSE(f.excluded("t/p", F));
  CHECK(f.excluded("deep/a/b/c.h", F));
}

TEST_CASE("filter: ** followed by a slash does not match zero directories, as in rsync") {
  filter f;
  f.exclude("/a/**/b");
  CHECK(f.excluded("a/x/b", F));
  CHECK(f.excluded("a/x/y/b", F));
  CHECK_FALSE(f.excluded("a/b", F));
}

TEST_CASE("filter: dir/*** matches the directory itself and everything below it") {
  filter f;
  f.include("/src/***").exclude("*");
  CHECK_FALSE(f.excluded("src", D));
  CHECK_FALSE(f.excluded("src/a/b.c", F));
  CHECK(f.excluded("other", D));
}

TEST_CASE("filter: character classes with ranges, negation and POSIX names") {
  filter f;
  f.exclude("[a-c]*.txt").exclude("[!x-z]?.md").exclude("v[[:digit:]]");
  CHECK(f.excluded("b1.txt", F));
  CHECK_FALSE(f.excluded("d1.txt", F));
  CHECK(f.excluded("a1.md", F));
  CHECK_FALSE(f.excluded("y1.md", F));
  CHECK(f.excluded("v7", F));
  CHECK_FALSE(f.excluded("vx", F));
}

TEST_CASE("filter: a backslash makes a wildcard literal") {
  filter f;
  f.exclude("data\\[1\\].csv");
  CHECK(f.excluded("data[1].csv", F));
  CHECK_FALSE(f.excluded("data1.csv", F));
}

TEST_CASE("filter: add_rule reads +, -, include, exclude, dir-merge, :, ! and the ! modifier and refuses the rest") {
  filter f;
  CHECK(f.add_rule("+ keep.o"));
  CHECK(f.add_rule("- *.o"));
  CHECK(f.add_rule("include *.c"));
  CHECK(f.add_rule("exclude *.c"));
  CHECK(f.add_rule("dir-merge .rsync-filter"));
  CHECK(f.add_rule(": .other"));
  CHECK(f.size() == 6);
  CHECK_FALSE(f.add_rule("merge file"));
  CHECK_FALSE(f.add_rule("-p x"));  // a modifier treesync does not know (rsync's perishable)
  CHECK_FALSE(f.add_rule("+"));
  CHECK(f.size() == 6);
  CHECK(f.add_rule("-! x"));  // rsync's negation modifier
  CHECK(f.size() == 7);
  CHECK(f.add_rule("!"));
  CHECK(f.empty());
}

TEST_CASE("filter: add_rules skips blank lines and # or ; comments and counts what it did not understand") {
  filter f;
  CHECK(f.add_rules("# comment\n; comment\n\n- *.o\r\nnot a rule\n+ *.c\n") == 1);
  CHECK(f.size() == 2);
  CHECK(f.excluded("x.o", F));
}

TEST_CASE("filter: exclude-from lines are patterns unless they start with '+ ' or '- '") {
  filter f;
  f.add_rules("+ keep.o\n*.o\n", /*plain_include=*/false);
  CHECK_FALSE(f.excluded("keep.o", F));
  CHECK(f.excluded("x.o", F));
  filter g;
  g.add_rules("*.h\n- *\n", /*plain_include=*/true);
  CHECK_FALSE(g.excluded("a.h", F));
  CHECK(g.excluded("a.c", F));
}

TEST_CASE("filter: add_plain takes a '+ ' prefix as an include and a lone ! as clear") {
  filter f;
  f.add_plain("+ *.h", false).add_plain("*", false);
  CHECK_FALSE(f.excluded("a.h", F));
  CHECK(f.excluded("a.c", F));
  f.add_plain("!", false);
  CHECK(f.empty());
}

TEST_CASE("sync with filter: + */, + *.h, - * copies the headers of every directory") {
  mock_fs fs;
  source_tree(fs);
  filter f;
  f.include("*/").include("*.h").exclude("*");
  (void)treesync::sync(fs, "/src", "/dst", f);
  CHECK(paths(fs, "/dst") == std::set<std::string>{"a.h", "doc", "lib", "lib/b.h", "lib/deep", "lib/deep/c.h"});
}

TEST_CASE("sync with filter: a directory excluded by - * is not entered, whatever later rules include") {
  mock_fs fs;
  source_tree(fs);
  std::vector<std::string> listed;
  fs.on_operation([&](mock_fs::op k, const std::string& path) {
    if (k == mock_fs::op::list) listed.push_back(path);
  });
  filter f;
  f.include("*.h").exclude("*").include("*/");
  const auto r = treesync::sync(fs, "/src", "/dst", f);
  CHECK(paths(fs, "/dst") == std::set<std::string>{"a.h"});
  CHECK(std::find(listed.begin(), listed.end(), "/src/lib") == listed.end());
  CHECK(r.excluded == 3);  // a.c, lib, doc
}

TEST_CASE("sync with filter: dir-merge rules apply to the subtree of the directory holding the file") {
  mock_fs fs;
  source_tree(fs);
  fs.write("/src/lib/.rules", "- *.c\n");
  fs.advance(10s);
  filter f(mock_loader(fs));
  f.dir_merge(".rules");
  (void)treesync::sync(fs, "/src", "/dst", f);
  CHECK(fs.exists("/dst/a.c"));
  CHECK_FALSE(fs.exists("/dst/lib/b.c"));
  CHECK_FALSE(fs.exists("/dst/lib/deep/c.c"));
  CHECK(fs.exists("/dst/lib/.rules"));
}

TEST_CASE("sync with filter: a leading slash in a per-directory file anchors at that directory") {
  mock_fs fs;
  source_tree(fs);
  fs.write("/src/lib/.rules", "- /deep/c.c\n- /b.h\n");
  fs.write("/src/lib/deep/b.h", "another b.h");
  fs.advance(10s);
  filter f(mock_loader(fs));
  f.dir_merge(".rules");
  (void)treesync::sync(fs, "/src", "/dst", f);
  CHECK_FALSE(fs.exists("/dst/lib/deep/c.c"));
  CHECK_FALSE(fs.exists("/dst/lib/b.h"));
  CHECK(fs.exists("/dst/lib/deep/b.h"));
  CHECK(fs.exists("/dst/lib/deep/c.h"));
}

TEST_CASE("sync with filter: a deeper per-directory file takes precedence over a shallower one") {
  mock_fs fs;
  source_tree(fs);
  fs.write("/src/.rules", "- *.h\n");
  fs.write("/src/lib/deep/.rules", "+ c.h\n");
  fs.advance(10s);
  filter f(mock_loader(fs));
  f.dir_merge(".rules");
  (void)treesync::sync(fs, "/src", "/dst", f);
  CHECK_FALSE(fs.exists("/dst/a.h"));
  CHECK_FALSE(fs.exists("/dst/lib/b.h"));
  CHECK(fs.exists("/dst/lib/deep/c.h"));
}

TEST_CASE("sync with filter: per-directory rules sit between the rules before and after the dir-merge rule") {
  mock_fs fs;
  source_tree(fs);
  fs.write("/src/lib/.rules", "+ b.c\n- b.h\n+ c.h\n");
  fs.advance(10s);
  filter f(mock_loader(fs));
  f.exclude("c.h").dir_merge(".rules").exclude("*.c").include("b.h");
  (void)treesync::sync(fs, "/src", "/dst", f);
  CHECK(fs.exists("/dst/lib/b.c"));         // the file's include beats the later outer exclude
  CHECK_FALSE(fs.exists("/dst/lib/b.h"));   // the file's exclude beats the later outer include
  CHECK_FALSE(fs.exists("/dst/lib/deep/c.h"));  // the earlier outer exclude beats the file's include
  CHECK_FALSE(fs.exists("/dst/a.c"));
}

TEST_CASE("filter: a ! in a per-directory file drops the rules inherited from above") {
  std::map<std::string, std::string> files{{"", "- *.h\n"}, {"sub", "!\n- *.c\n"}};
  filter f([&](std::string_view dir, std::string_view) {
    const auto it = files.find(std::string(dir));
    return it == files.end() ? std::string() : it->second;
  });
  f.dir_merge(".rules");
  CHECK(f.excluded("a.h", F));
  CHECK_FALSE(f.excluded("sub/a.h", F));
  CHECK(f.excluded("sub/a.c", F));
  CHECK_FALSE(f.excluded("a.c", F));
}

TEST_CASE("filter::reading reads regular rule files below the root and never through a final symlink") {
  treesync_test::temp_dir t;
  const auto root = t.path();
  treesync_test::make_dir(root / "a");
  treesync_test::make_dir(root / "b");
  treesync_test::write_file(root / "a" / ".rules", "- *.o\n");
  treesync_test::write_file(root / "elsewhere", "- *.c\n");
  treesync_test::make_symlink("../elsewhere", root / "b" / ".rules");
  treesync_test::make_dir(root / "c");
  treesync_test::make_dir(root / "c" / ".rules");
  filter f = filter::reading(root);
  f.dir_merge(".rules");
  CHECK(f.excluded("a/x.o", F));
  CHECK_FALSE(f.excluded("b/x.c", F));
  CHECK_FALSE(f.excluded("c/x.o", F));
  CHECK_FALSE(f.excluded("missing/x.o", F));
}

TEST_CASE("filter::read_rule_file reads a regular file whole (the 4 MiB cap: test_filter_bounds.cpp)") {
  treesync_test::temp_dir t;
  treesync_test::write_file(t / "big", std::string((1u << 20) + 1, '#'));
  treesync_test::write_file(t / "small", "- x\n");
  CHECK(filter::read_rule_file((t / "big").c_str()).size() == (1u << 20) + 1);
  CHECK(filter::read_rule_file((t / "small").c_str()) == "- x\n");
}

TEST_CASE("filter: concurrent callers get the serial verdicts; a thread reads a directory's file when it enters it") {
  std::atomic<int> loads{0};
  filter f([&](std::string_view dir, std::string_view) {
    ++loads;
    return dir.size() % 2 == 0 ? std::string("- *.o\n") : std::string("+ *.o\n- *\n");
  });
  f.dir_merge(".rules").exclude("*.c");
  std::vector<std::string> rels;
  for (int d = 0; d < 40; ++d)
    for (const char* n : {"x.o", "y.c", "z.h"}) rels.push_back("d" + std::string(d % 7 + 1, 'x') + "/" + n);
  std::vector<bool> serial;
  filter fresh([](std::string_view dir, std::string_view) {
    return dir.size() % 2 == 0 ? std::string("- *.o\n") : std::string("+ *.o\n- *\n");
  });
  fresh.dir_merge(".rules").exclude("*.c");
  for (const auto& r : rels) serial.push_back(fresh.excluded(r, F));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 8; ++k)
    threads.emplace_back([&] {
      for (int round = 0; round < 50; ++round)
        for (std::size_t i = 0; i < rels.size(); ++i)
          if (f.excluded(rels[i], F) != serial[i]) ++mismatches;
    });
  for (auto& th : threads) th.join();
  CHECK(mismatches.load() == 0);
  CHECK(loads.load() >= 8);  // 7 directories and the root, each read at least once...
  // ...and then once per thread each time the thread enters a directory (40 changes a round; the
  // root's stays with the thread): a directory left is not kept
  CHECK(loads.load() <= 8 * (50 * 40 + 1));
}

TEST_CASE("sync with filter under jobs{4}: the per-directory rules give the serial run's destination") {
  treesync_test::temp_dir t;
  const auto src = t / "src";
  treesync_test::make_dir(src);
  for (int d = 0; d < 12; ++d) {
    const auto dir = src / ("d" + std::to_string(d));
    treesync_test::make_dir(dir);
    treesync_test::make_dir(dir / "sub");
    for (const char* n : {"a.c", "a.o", "a.h"}) {
      treesync_test::write_file(dir / n, n);
      treesync_test::write_file(dir / "sub" / n, n);
    }
    if (d % 3 == 0) treesync_test::write_file(dir / ".rules", "- *.o\n");
    if (d % 4 == 0) treesync_test::write_file(dir / "sub" / ".rules", "+ a.o\n- *.h\n");
  }
  const auto run = [&](const std::filesystem::path& dst, unsigned n) {
    filter f = filter::reading(src);
    f.dir_merge(".rules");
    (void)treesync::sync(src, dst, f, treesync::jobs{n});
    std::set<std::string> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dst))
      out.insert(std::filesystem::relative(e.path(), dst).string());
    return out;
  };
  const auto serial = run(t / "one", 1);
  CHECK(serial.count("d0/a.o") == 0);
  CHECK(serial.count("d0/sub/a.o") == 1);
  CHECK(serial.count("d4/sub/a.h") == 0);
  CHECK(run(t / "four", 4) == serial);
}
