// The semantics contract (README: Guarantees), one behaviour per test case, over mock_fs.
#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include <doctest/doctest.h>

#include "support/mock_mirror.hpp"

#include <algorithm>
#include <atomic>
#include <set>
#include <string>
#include <vector>

namespace {

using treesync::file_type;
using treesync::mock_fs;
using op = treesync::mock_fs::op;
using namespace std::chrono_literals;

constexpr std::int64_t sec = 1000000000;

// A small tree with nanosecond mtimes and varied modes; the clock then moves on, so the files are
// not "racily clean" when synced.
void small_tree(mock_fs& fs) {
  fs.write("/src/a.txt", "alpha", 0640);
  fs.write("/src/empty", "", 0600);
  fs.write("/src/bin/tool", "#!/bin/sh\necho hi\n", 0755);
  fs.write("/src/include/x/y.h", "int y;");
  fs.write("/src/include/z.h", "int z;");
  fs.mkdir("/src/emptydir", 0700);
  fs.set_mtime("/src/a.txt", 1600000000 * sec + 123456789);
  fs.set_mtime("/src/empty", 1600000001 * sec + 1);
  fs.set_mtime("/src/include/x/y.h", 1600000002 * sec + 999999999);
  fs.set_mtime("/src/include/x", 1500000000 * sec + 42);
  fs.set_mtime("/src/include", 1500000001 * sec + 43);
  fs.set_mtime("/src", 1500000002 * sec + 44);
  fs.advance(10s);
}

// dst mirrors src exactly: same relative paths, types, bytes, link targets, modes and mtimes
// (the roots' own mode and mtime included).
void check_mirror(const mock_fs& fs, const std::string& src = "/src", const std::string& dst = "/dst") {
  CHECK(treesync_test::exact_mirror_diff(fs, src, dst) == "");
}

treesync::report sync(mock_fs& fs) { return treesync::sync(fs, "/src", "/dst"); }

// A refused run: nothing written, the error code given, and the throwing overload throws.
template <class... Ps>
void check_refused(mock_fs& fs, std::error_code expected, Ps&&... ps) {
  const auto before = fs.tree("/");
  fs.reset_counters();
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/dst", ps..., ec);
  CHECK(ec == expected);
  CHECK(fs.ops().writes() == 0);
  CHECK_THROWS_AS((void)treesync::sync(fs, "/src", "/dst", ps...), std::filesystem::filesystem_error);
  CHECK(fs.ops().writes() == 0);
  CHECK(fs.tree("/") == before);
}

}  // namespace

// ---- 5.1 cold path ---------------------------------------------------------------------------

TEST_CASE("a cold sync mirrors files, directories, bytes, modes and nanosecond mtimes") {
  mock_fs fs;
  small_tree(fs);
  const auto r = sync(fs);
  CHECK(r.ok());
  CHECK(r.created == fs.tree("/src").size() + 1);  // + the destination root
  check_mirror(fs);
}

TEST_CASE("a cold sync performs no destination reads") {
  mock_fs fs;
  small_tree(fs);
  std::vector<std::string> dst_reads;
  fs.on_operation([&](op k, const std::string& path) {
    const bool read = k == op::list || k == op::stat || k == op::readlink || k == op::open_read;
    if (read && path.rfind("/dst/", 0) == 0) dst_reads.push_back(path);
    if (k == op::list && path == "/dst") dst_reads.push_back(path);
  });
  (void)sync(fs);
  CHECK(dst_reads.empty());
}

TEST_CASE("a directory's mtime and mode are set after its content is complete") {
  mock_fs fs;
  fs.write("/src/ro/file", "data");
  fs.chmod("/src/ro", 0555);
  fs.set_mtime("/src/ro", 1234 * sec + 5);
  fs.advance(10s);
  std::vector<std::string> after_dir_meta;
  bool dir_meta_done = false;
  fs.on_operation([&](op k, const std::string& path) {
    if ((k == op::utime || k == op::chmod) && path == "/dst/ro") dir_meta_done = true;
    else if (dir_meta_done && path.rfind("/dst/ro/", 0) == 0) after_dir_meta.push_back(path);
  });
  CHECK(sync(fs).ok());
  CHECK(after_dir_meta.empty());
  CHECK(fs.lstat("/dst/ro").mtime_ns == 1234 * sec + 5);
  CHECK(fs.lstat("/dst/ro").mode == 0555);
  CHECK(fs.read("/dst/ro/file") == "data");
}

TEST_CASE("listings without d_type give the same mirror") {
  mock_fs fs;
  fs.report_entry_types(false);
  small_tree(fs);
  fs.symlink("/src/link", "a.txt");
  CHECK(sync(fs).ok());
  CHECK(fs.lstat("/dst/link").type == file_type::regular);
  fs.remove("/src/link");
  CHECK(sync(fs).deleted == 1);
  check_mirror(fs);
}

// ---- 5.2 deletion and type swaps ------------------------------------------------------------

TEST_CASE("destination entries the source lacks are deleted, trees included") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.write("/dst/stale.txt", "old");
  fs.write("/dst/old/deep/er.h", "x");
  const auto r = sync(fs);
  CHECK(r.deleted == 4);  // stale.txt, old, old/deep, old/deep/er.h
  CHECK_FALSE(fs.exists("/dst/stale.txt"));
  CHECK_FALSE(fs.exists("/dst/old"));
  check_mirror(fs);
}

TEST_CASE("deleting a destination symlink never follows it") {
  mock_fs fs;
  small_tree(fs);
  fs.write("/outside/keep/me.txt", "precious");
  (void)sync(fs);
  fs.symlink("/dst/escape", "/outside/keep");
  fs.symlink("/dst/include/escape2", "../../outside");
  const auto outside = fs.tree("/outside");
  const auto r = sync(fs);
  CHECK(r.deleted == 2);
  CHECK_FALSE(fs.exists("/dst/escape"));
  CHECK(fs.tree("/outside") == outside);
  check_mirror(fs);
}

TEST_CASE("a file replaces a destination directory of the same name") {
  mock_fs fs;
  fs.write("/src/x", "now a file");
  fs.write("/dst/x/inner/deep.txt", "was a dir");
  fs.advance(10s);
  const auto r = sync(fs);
  CHECK(r.ok());
  CHECK(r.updated == 1);
  CHECK(r.deleted == 2);  // inner, inner/deep.txt
  check_mirror(fs);
}

TEST_CASE("a directory replaces a destination file of the same name") {
  mock_fs fs;
  fs.write("/src/x/inner.txt", "in a dir");
  fs.write("/dst/x", "was a file");
  fs.advance(10s);
  CHECK(sync(fs).ok());
  check_mirror(fs);
}

TEST_CASE("a directory replaces a destination symlink and nothing is written through it") {
  mock_fs fs;
  fs.write("/src/x/inner.txt", "in a dir");
  fs.write("/outside/inner.txt", "outside");
  fs.mkdir("/dst");
  fs.symlink("/dst/x", "/outside");
  fs.advance(10s);
  const auto outside = fs.tree("/outside");
  std::vector<std::string> writes_outside;
  fs.on_operation([&](op k, const std::string& path) {
    if (k != op::list && k != op::stat && k != op::open_dir && k != op::open_read && k != op::readlink &&
        path.rfind("/dst", 0) != 0)
      writes_outside.push_back(path);
  });
  CHECK(sync(fs).ok());
  CHECK(writes_outside.empty());
  CHECK(fs.tree("/outside") == outside);
  CHECK(fs.lstat("/dst/x").type == file_type::directory);
  check_mirror(fs);
}

TEST_CASE("a file replaces a destination symlink to a file outside, which stays untouched") {
  mock_fs fs;
  fs.write("/src/f", "source");
  fs.write("/outside/target", "outside");
  fs.mkdir("/dst");
  fs.symlink("/dst/f", "/outside/target");
  fs.advance(10s);
  CHECK(sync(fs).ok());
  CHECK(fs.read("/outside/target") == "outside");
  check_mirror(fs);
}

TEST_CASE("type swaps with preserved links converge in every direction") {
  const std::vector<std::string> kinds{"file", "dir", "link", "none"};
  for (const auto& from : kinds) {
    for (const auto& to : kinds) {
      if (to == "none") continue;
      CAPTURE(from);
      CAPTURE(to);
      mock_fs fs;
      fs.write("/src/keep", "k");
      fs.mkdir("/dst");
      auto make = [&](const std::string& root, const std::string& kind) {
        if (kind == "file") fs.write(root + "/e", "file " + root);
        if (kind == "dir") fs.write(root + "/e/child", "child " + root);
        if (kind == "link") fs.symlink(root + "/e", root == "/src" ? "keep" : "elsewhere");
      };
      make("/src", to);
      make("/dst", from);
      fs.advance(10s);
      const auto r = treesync::sync(fs, "/src", "/dst", treesync::links::preserve);
      CHECK(r.ok());
      check_mirror(fs);
    }
  }
}

// ---- 5.3 up-to-date files ---------------------------------------------------------------------

TEST_CASE("an up-to-date file is not opened") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.advance(10s);
  fs.reset_counters();
  (void)sync(fs);
  CHECK(fs.ops()[op::open_read] == 0);
  CHECK(fs.ops()[op::open_write] == 0);
}

TEST_CASE("a file whose data is current but whose mode differs only gets a chmod") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.chmod("/src/a.txt", 0600);
  fs.advance(10s);
  fs.reset_counters();
  const auto r = sync(fs);
  CHECK(r.meta_updated == 1);
  CHECK(r.updated == 0);
  CHECK(fs.ops()[op::chmod] == 1);
  CHECK(fs.ops().writes() == 1);
  check_mirror(fs);
}

TEST_CASE("a file with a different size or mtime is rewritten") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.write("/src/a.txt", "ALPHA");  // same size, new mtime
  fs.write("/src/include/z.h", "int zz;");
  fs.advance(10s);
  const auto r = sync(fs);
  CHECK(r.updated == 2);
  check_mirror(fs);
}

// ---- 5.4 temporary name + rename ------------------------------------------------------------

TEST_CASE("files joining an existing directory are written under a temporary name and renamed into place") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.write("/src/new.txt", "new");
  fs.write("/src/include/x/w.h", "int w;");
  fs.write("/src/a.txt", "alpha, rewritten");
  fs.advance(10s);
  std::vector<std::string> opened_for_write;
  fs.on_operation([&](op k, const std::string& path) {
    if (k == op::open_write) opened_for_write.push_back(path);
  });
  fs.reset_counters();
  const auto r = sync(fs);
  CHECK(opened_for_write.size() == 3);
  for (const auto& p : opened_for_write) {
    const auto name = p.substr(p.rfind('/') + 1);
    CHECK(name.rfind(".treesync-tmp-", 0) == 0);
  }
  CHECK(fs.ops()[op::rename] == 3);
  CHECK(r.ok());
}

TEST_CASE("a directory the run creates is populated under a temporary name and renamed into place complete") {
  mock_fs fs;
  small_tree(fs);
  std::vector<std::string> written;
  std::size_t renamed_dirs = 0;
  fs.on_operation([&](op k, const std::string& path) {
    if (k == op::open_write || k == op::symlink) written.push_back(path);
    if (k == op::rename && fs.lstat(path).type == file_type::directory) {
      ++renamed_dirs;
      // complete when it moves into place: its files are all there, with their final mtimes
      const std::string name = path.substr(path.rfind('/') + 1);
      CHECK(name.rfind(".treesync-tmp-", 0) == 0);
    }
  });
  const auto r = sync(fs);
  CHECK(r.ok());
  for (const auto& p : written) {
    INFO("written: ", p);
    // a new file inside a new directory is written at its final name, inside the staged directory
    if (p.rfind("/dst/bin/", 0) == 0 || p.rfind("/dst/include/", 0) == 0) FAIL("written at a final path");
  }
  CHECK(renamed_dirs == 3);                          // bin, emptydir, include (include/x inside include)
  CHECK(fs.ops()[op::rename] == renamed_dirs + 2);  // + a.txt and empty at the existing root
  check_mirror(fs);
}

TEST_CASE("a cancelled cold run puts its new directories in place with every file it finished, their mtimes left for the next run") {
  for (std::size_t stop_at = 1; stop_at < 40; stop_at += 3) {
    INFO("cancelled at write ", stop_at);
    mock_fs fs;
    for (int i = 0; i < 30; ++i) fs.write("/src/d" + std::to_string(i % 3) + "/e" + std::to_string(i % 2) + "/f" + std::to_string(i), "data");
    fs.advance(10s);
    std::atomic<bool> cancel{false};
    std::size_t writes = 0;
    fs.on_operation([&](op k, const std::string&) {
      if (k == op::open_write && ++writes == stop_at) cancel = true;
    });
    std::error_code ec;
    const auto r = treesync::sync(fs, "/src", "/dst", treesync::cancel_on(cancel), ec);
    fs.on_operation(nullptr);
    const auto src = fs.tree("/src");
    std::size_t files = 0;
    for (const auto& kv : fs.tree("/dst")) {
      INFO("at: ", kv.first);
      CHECK(kv.first.find(".treesync-tmp-") == std::string::npos);  // no staged directory stays behind
      if (kv.second.type == file_type::regular) {
        ++files;
        CHECK(kv.second.data == "data");  // complete, with the source's mtime
        CHECK(kv.second.mtime_ns == src.at(kv.first).mtime_ns);
        continue;
      }
      // a directory not complete keeps the mtime it has: never the source's, which says "done"
      bool complete = true;
      for (const auto& s : src)
        if (s.first.rfind(kv.first + "/", 0) == 0 && !fs.exists("/dst/" + s.first)) complete = false;
      if (!complete) CHECK(kv.second.mtime_ns != src.at(kv.first).mtime_ns);
    }
    CHECK(files == r.created - (fs.tree("/dst").size() - files) - 1);  // reported: the files kept, the dirs, the root
    cancel = false;
    fs.reset_counters();
    CHECK(sync(fs).ok());
    CHECK(fs.ops()[op::open_write] == 30 - files);  // the next run copies only the rest
    check_mirror(fs);
  }
}

TEST_CASE("a staged directory left by an interrupted run is removed by a run that deletes (never under deletion::keep: issue 23)") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.write("/dst/.treesync-tmp-4242-9/sub/f", "partial");
  fs.write("/dst/.treesync-tmp-4242-9/g", "partial");
  fs.advance(10s);
  const auto r = treesync::sync(fs, "/src", "/dst", treesync::deletion::extraneous);
  CHECK(r.ok());
  CHECK(r.cleaned == 1);
  CHECK(r.deleted == 0);
  check_mirror(fs);
}

TEST_CASE("a failed copy inside a new directory leaves no partial file there") {
  mock_fs fs;
  small_tree(fs);
  bool armed = false;
  fs.on_operation([&](op k, const std::string& path) {
    if (k == op::open_write && !armed && path.size() > 5 && path.compare(path.size() - 5, 5, "/tool") == 0) {
      armed = true;
      fs.fail(op::utime, 1, std::errc::io_error);  // its own mtime, after its data is written
    }
  });
  const auto r = sync(fs);
  fs.on_operation(nullptr);
  CHECK(armed);
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].path == "bin/tool");
  CHECK(fs.lstat("/dst/bin").type == file_type::directory);
  CHECK_FALSE(fs.exists("/dst/bin/tool"));
  fs.clear_faults();
  CHECK(sync(fs).ok());
  check_mirror(fs);
}

TEST_CASE("a failed copy leaves no partial file at the final name and no temporary") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.write("/src/a.txt", "changed content");
  fs.advance(10s);
  fs.fail(op::utime, 1, std::errc::io_error);  // the copy fails after its data is written
  const auto r = sync(fs);
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].path == "a.txt");
  CHECK(fs.read("/dst/a.txt") == "alpha");
  for (const auto& kv : fs.tree("/dst")) CHECK(kv.first.find(".treesync-tmp-") == std::string::npos);
  fs.clear_faults();
  CHECK(sync(fs).ok());
  check_mirror(fs);
}

TEST_CASE("temporaries left by an interrupted run are removed by a run that deletes, and not counted as deleted") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.write("/dst/.treesync-tmp-4242-7", "partial");
  fs.write("/dst/include/.treesync-tmp-4242-8", "partial");
  fs.advance(10s);
  const auto r = treesync::sync(fs, "/src", "/dst", treesync::deletion::extraneous);
  CHECK(r.cleaned == 2);
  CHECK(r.deleted == 0);
  check_mirror(fs);
}

// ---- 5.5 zero writes --------------------------------------------------------------------------

TEST_CASE("a warm run on an unchanged tree performs zero writes and one stat per entry per side") {
  mock_fs fs;
  std::size_t dirs = 1, entries = 0;
  for (int d = 0; d < 40; ++d) {
    const std::string dir = "/src/d" + std::to_string(d);
    for (int f = 0; f < 80; ++f) fs.write(dir + "/f" + std::to_string(f) + ".h", "content " + std::to_string(f));
    fs.write(dir + "/sub/leaf.h", "leaf");
    dirs += 2;
    entries += 80 + 3;  // files, d, sub, leaf
  }
  fs.advance(10s);
  REQUIRE(sync(fs).ok());
  fs.advance(10s);
  fs.reset_counters();
  const auto r = sync(fs);
  CHECK(r.unchanged());
  CHECK(r.scanned == entries);
  CHECK(fs.ops().writes() == 0);
  CHECK(fs.ops()[op::open_read] == 0);
  CHECK(fs.ops()[op::list] == 2 * dirs);
  const std::size_t stats = fs.ops()[op::stat];
  CHECK(stats >= 2 * entries);
  CHECK(stats <= 2 * entries + 8);  // the guards: a few stats of the roots and their ancestors
}

TEST_CASE("a second run right after a cold sync writes nothing") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.reset_counters();
  CHECK(sync(fs).unchanged());
  CHECK(fs.ops().writes() == 0);
}

// ---- 5.6 nothing outside dst ------------------------------------------------------------------

TEST_CASE("no operation of any run writes outside the destination") {
  mock_fs fs;
  small_tree(fs);
  fs.write("/outside/x", "x");
  fs.mkdir("/dst/include");
  fs.symlink("/dst/include/x", "/outside");
  fs.symlink("/dst/a.txt", "/outside/x");
  fs.advance(10s);
  std::vector<std::string> bad;
  fs.on_operation([&](op k, const std::string& path) {
    const bool write = !(k == op::list || k == op::stat || k == op::open_dir || k == op::open_read || k == op::readlink);
    if (write && path.rfind("/dst", 0) != 0) bad.push_back(path);
  });
  CHECK(sync(fs).ok());
  CHECK(bad.empty());
  CHECK(fs.read("/outside/x") == "x");
  check_mirror(fs);
}

// ---- 5.7 refusals -----------------------------------------------------------------------------

TEST_CASE("a missing source is refused") {
  mock_fs fs;
  fs.write("/dst/a", "a");
  check_refused(fs, treesync::errc::source_missing);  // == no_such_file_or_directory too
}

TEST_CASE("a source that is a file is refused") {
  mock_fs fs;
  fs.write("/src", "not a dir");
  check_refused(fs, std::make_error_code(std::errc::not_a_directory));
}

TEST_CASE("a destination that is a file is refused") {
  mock_fs fs;
  fs.write("/src/a", "a");
  fs.write("/dst", "a file");
  check_refused(fs, std::make_error_code(std::errc::not_a_directory));
}

TEST_CASE("the same directory as source and destination is refused") {
  mock_fs fs;
  fs.write("/src/a", "a");
  const auto before = fs.tree("/");
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/src/", ec);
  CHECK(ec == treesync::errc::same_directory);
  CHECK(fs.tree("/") == before);
}

TEST_CASE("in-place writes with a backup directory are refused before anything is touched, by tag or option") {
  mock_fs fs;
  fs.write("/src/a", "new");
  fs.write("/dst/a", "old");
  const auto expected = treesync::make_error_code(treesync::errc::inplace_with_backup);
  check_refused(fs, expected, treesync::write::in_place, treesync::backup_dir{"/backup"});
  treesync::options o;
  o.write = treesync::write_mode::in_place;
  o.backup_dir = "/backup";
  check_refused(fs, expected, o);
  CHECK(expected.message() == "inplace and backup_dir exclude each other (a backup needs the old file kept whole)");
  o.backup_dir.clear();  // either one alone runs
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/dst", o, ec);
  CHECK(!ec);
  CHECK(fs.read("/dst/a") == "new");
}

namespace {
// Sets the option `key` of an option_rules row away from its default (the test's own mapping,
// checked against the library's option_set()).
void set_option(treesync::options& o, std::string_view key) {
  if (key == "inplace") o.write = treesync::write_mode::in_place;
  else if (key == "backup_dir") o.backup_dir = "/backup";
  else if (key == "state") o.state = "/state.file";
  else if (key == "hard_links") o.hard_links = true;
  else if (key == "verify") o.verify = treesync::verify_level::dirs;
  REQUIRE_MESSAGE(treesync::option_set(o, key).value_or(false), "the test cannot set option " << key);
}
}  // namespace

TEST_CASE("option_rules: every row names two options the library knows, and the defaults break none") {
  const treesync::options defaults;
  CHECK(std::size(treesync::option_rules) >= 4);
  for (const auto& rule : treesync::option_rules) {
    CHECK_MESSAGE(treesync::option_set(defaults, rule.first).has_value(), rule.first);
    CHECK_MESSAGE(treesync::option_set(defaults, rule.second).has_value(), rule.second);
  }
  CHECK(treesync::refused_combination(defaults) == nullptr);
  CHECK_FALSE(treesync::option_set(defaults, "no_such_option").has_value());
}

TEST_CASE("option_rules: sync refuses each row's combination with the row's code and words, touching nothing") {
  for (const auto& rule : treesync::option_rules) {
    CAPTURE(rule.first);
    CAPTURE(rule.second);
    mock_fs fs;
    fs.write("/src/a", "new");
    fs.write("/dst/a", "old");
    treesync::options o;
    set_option(o, rule.first);
    if (!rule.needs) set_option(o, rule.second);
    CHECK(treesync::refused_combination(o) == &rule);
    const std::error_code expected = treesync::make_error_code(rule.code);
    check_refused(fs, expected, o);
    CHECK(expected.message() == treesync::option_rule_text(rule, [](const char* key) { return key; }));
    // the first option alone (with the second, for a needs row) runs
    treesync::options alone;
    set_option(alone, rule.first);
    if (rule.needs) set_option(alone, rule.second);
    CHECK(treesync::refused_combination(alone) == nullptr);
  }
}

TEST_CASE("a destination reached through a symlink to the source is refused") {
  mock_fs fs;
  fs.write("/src/a", "a");
  fs.symlink("/dst", "src");
  check_refused(fs, treesync::make_error_code(treesync::errc::same_directory));
}

TEST_CASE("a destination inside the source is refused, existing or not") {
  mock_fs fs;
  fs.write("/src/a", "a");
  const auto before = fs.tree("/");
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/src/mirror", ec);
  CHECK(ec == treesync::errc::nested_directory);
  fs.mkdir("/src/sub");
  (void)treesync::sync(fs, "/src", "/src/sub", ec);
  CHECK(ec == treesync::errc::nested_directory);
  fs.symlink("/alias", "/src/sub");
  (void)treesync::sync(fs, "/src", "/alias/deeper", ec);
  CHECK(ec == treesync::errc::nested_directory);
  CHECK_FALSE(fs.exists("/src/mirror"));
}

TEST_CASE("a source inside the destination is refused") {
  mock_fs fs;
  fs.write("/dst/src/a", "a");
  const auto before = fs.tree("/");
  std::error_code ec;
  (void)treesync::sync(fs, "/dst/src", "/dst", ec);
  CHECK(ec == treesync::errc::nested_directory);
  CHECK(fs.tree("/") == before);
}

TEST_CASE("a missing destination parent is refused") {
  mock_fs fs;
  fs.write("/src/a", "a");
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/no/such/dst", ec);
  CHECK(ec == treesync::errc::destination_parent_missing);
  CHECK(ec == std::errc::no_such_file_or_directory);  // still, for callers that compare with ENOENT
  CHECK_FALSE(fs.exists("/no"));
}

// ---- 5.8 per-entry failures -----------------------------------------------------------------

TEST_CASE("an unreadable source file is reported with path, operation and code, the rest is synced") {
  mock_fs fs;
  small_tree(fs);
  fs.fail_path("/src/include/z.h", std::errc::permission_denied, op::open_read);
  const auto r = sync(fs);
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].path == "include/z.h");
  CHECK(r.errors[0].operation == treesync::operation::copy);
  CHECK(r.errors[0].code == std::errc::permission_denied);
  CHECK_FALSE(fs.exists("/dst/include/z.h"));
  CHECK(fs.read("/dst/include/x/y.h") == "int y;");
  CHECK(fs.read("/dst/a.txt") == "alpha");
}

TEST_CASE("an unreadable source file keeps the destination's existing copy") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.write("/src/a.txt", "newer");
  fs.advance(10s);
  fs.fail_path("/src/a.txt", std::errc::permission_denied, op::open_read);
  const auto r = sync(fs);
  CHECK(r.errors.size() == 1);
  CHECK(fs.read("/dst/a.txt") == "alpha");
}

TEST_CASE("a dangling source symlink is reported and everything else is synced") {
  mock_fs fs;
  small_tree(fs);
  fs.symlink("/src/dangling", "no/such/target");
  const auto r = sync(fs);
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].path == "dangling");
  CHECK(r.errors[0].code == treesync::errc::dangling_symlink);
  CHECK_FALSE(fs.exists("/dst/dangling"));
  fs.remove("/src/dangling");
  check_mirror(fs);
}

TEST_CASE("a symlink cycle is reported by device and inode and the run terminates") {
  mock_fs fs;
  fs.write("/src/a/file", "f");
  fs.symlink("/src/a/up", "..");
  fs.symlink("/src/a/self", "self");
  fs.advance(10s);
  const auto r = sync(fs);
  REQUIRE(r.errors.size() == 2);
  std::set<std::string> paths;
  for (const auto& e : r.errors) paths.insert(e.path);
  CHECK(paths == std::set<std::string>{"a/up", "a/self"});
  for (const auto& e : r.errors)
    if (e.path == "a/up") CHECK(e.code == treesync::errc::symlink_cycle);
  CHECK(fs.read("/dst/a/file") == "f");
}

TEST_CASE("a source file that vanishes during the run is reported as vanished, not as a failure") {
  mock_fs fs;
  small_tree(fs);
  fs.on_operation([&](op k, const std::string& path) {
    if (k == op::open_read && path == "/src/a.txt") fs.remove("/src/a.txt");
  });
  const auto r = sync(fs);
  CHECK(r.errors.empty());
  REQUIRE(r.vanished.size() == 1);
  CHECK(r.vanished[0].path == "a.txt");
  CHECK_FALSE(fs.exists("/dst/a.txt"));
  fs.on_operation(nullptr);
  CHECK(sync(fs).ok());
  check_mirror(fs);
}

TEST_CASE("a source file that changes while it is copied is not installed and the next run converges") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.write("/src/a.txt", "version 2");
  fs.advance(10s);
  fs.on_operation([&](op k, const std::string& path) {
    if (k == op::open_write && path.find("/dst/.treesync-tmp-") == 0) fs.write("/src/a.txt", "version 3, longer");
  });
  const auto r = sync(fs);
  REQUIRE(r.vanished.size() == 1);
  CHECK(r.vanished[0].code == treesync::errc::changed_during_copy);
  CHECK(fs.read("/dst/a.txt") == "alpha");  // the old copy stays; nothing half-new looks current
  fs.on_operation(nullptr);
  fs.advance(10s);
  CHECK(sync(fs).ok());
  CHECK(fs.read("/dst/a.txt") == "version 3, longer");
  check_mirror(fs);
}

// ---- 5.9 special files ------------------------------------------------------------------------

TEST_CASE("FIFOs and sockets are never opened, skipped with a report entry") {
  mock_fs fs;
  small_tree(fs);
  fs.fifo("/src/pipe");
  fs.socket("/src/include/sock");
  const auto r = sync(fs);
  CHECK(fs.ops().special_opens == 0);
  CHECK(r.skipped == 2);
  REQUIRE(r.skipped_entries.size() == 2);
  CHECK(r.skipped_entries[0].code == treesync::errc::special_file);
  CHECK_FALSE(fs.exists("/dst/pipe"));
  CHECK(fs.read("/dst/a.txt") == "alpha");
}

// ---- 5.10 exclusion -----------------------------------------------------------------------------

TEST_CASE("an excluded directory is not entered, not copied and not deleted") {
  mock_fs fs;
  small_tree(fs);
  fs.write("/src/build/obj.o", "o");
  fs.write("/dst/build/stale.o", "old");
  fs.advance(10s);
  std::vector<std::string> listed;
  fs.on_operation([&](op k, const std::string& path) {
    if (k == op::list) listed.push_back(path);
  });
  const auto r = treesync::sync(fs, "/src", "/dst", treesync::exclude{"build/"});
  CHECK(r.excluded == 2);  // build/, on each side
  CHECK(std::find(listed.begin(), listed.end(), "/src/build") == listed.end());
  CHECK(fs.read("/dst/build/stale.o") == "old");
  CHECK_FALSE(fs.exists("/dst/build/obj.o"));
}

// ---- 5.11 careful deletion ----------------------------------------------------------------------

TEST_CASE("nothing is deleted in a directory whose source listing failed") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.write("/dst/include/only-in-dst.h", "x");
  fs.advance(10s);
  fs.fail_path("/src/include", std::errc::io_error, op::list);
  const auto r = sync(fs);
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].operation == treesync::operation::list);
  CHECK(r.errors[0].path == "include");
  CHECK(fs.exists("/dst/include/only-in-dst.h"));
  CHECK(fs.exists("/dst/include/z.h"));
}

TEST_CASE("an empty source over a non-empty destination is refused unless allowed") {
  mock_fs fs;
  fs.mkdir("/src");
  fs.write("/dst/precious", "p");
  check_refused(fs, treesync::make_error_code(treesync::errc::empty_source));
  const auto r = treesync::sync(fs, "/src", "/dst", treesync::allow_empty_source);
  CHECK(r.deleted == 1);
  CHECK_FALSE(fs.exists("/dst/precious"));
}

TEST_CASE("an empty source over a missing or empty destination is fine") {
  mock_fs fs;
  fs.mkdir("/src");
  CHECK(sync(fs).ok());
  CHECK(sync(fs).ok());
}

TEST_CASE("max_delete: over the cap the run makes no deletion and ends with max_delete_exceeded") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.write("/dst/x1", "1");
  fs.write("/dst/x2", "2");
  fs.write("/dst/x3/inner", "3");
  fs.write("/src/new", "n");  // created all the same
  fs.advance(10s);
  fs.reset_counters();
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/dst", treesync::max_delete{3}, ec);
  CHECK(ec == treesync::errc::max_delete_exceeded);
  CHECK(fs.ops()[op::unlink] == 0);
  CHECK(fs.ops()[op::rmdir] == 0);
  CHECK(fs.exists("/dst/x3/inner"));
  CHECK(fs.read("/dst/new") == "n");
  const auto r = treesync::sync(fs, "/src", "/dst", treesync::max_delete{4});
  CHECK(r.deleted == 4);
  check_mirror(fs);
}

// ---- 5.12 names ---------------------------------------------------------------------------------

TEST_CASE("names are compared byte for byte and any byte but '/' and NUL survives") {
  mock_fs fs;
  fs.write("/src/Readme", "upper");
  fs.write("/src/readme", "lower");
  fs.write("/src/line\nbreak", "nl");
  fs.write("/src/-rf", "dash");
  fs.write("/src/\xff\xfe", "bytes");
  fs.write("/src/" + std::string(255, 'n'), "long");
  fs.advance(10s);
  CHECK(sync(fs).ok());
  check_mirror(fs);
}

// ---- 5.13 racily clean files --------------------------------------------------------------------

TEST_CASE("a file rewritten within the timestamp granularity after its copy is detected") {
  mock_fs fs;
  fs.set_granularity(1s);
  fs.write("/src/gen.h", "v1");
  const std::int64_t mtime = fs.lstat("/src/gen.h").mtime_ns;
  (void)sync(fs);  // same tick: the copy is racy
  fs.write("/src/gen.h", "v2");  // same size, and the coarse clock gives the same mtime
  REQUIRE(fs.lstat("/src/gen.h").mtime_ns == mtime);
  fs.advance(5s);
  const auto r = sync(fs);
  CHECK(r.updated == 1);
  CHECK(fs.read("/dst/gen.h") == "v2");
  CHECK(fs.lstat("/dst/gen.h").mtime_ns == mtime);  // exact mtimes kept: no backdating
}

TEST_CASE("a racily clean file is verified by content once, then trusted") {
  mock_fs fs;
  fs.set_granularity(1s);
  fs.write("/src/gen.h", "v1");
  (void)sync(fs);
  fs.advance(5s);
  fs.reset_counters();
  auto r = sync(fs);
  CHECK(fs.ops()[op::open_read] == 2);  // both sides read once
  CHECK(r.updated == 0);
  CHECK(fs.ops()[op::open_write] == 0);
  fs.advance(5s);
  fs.reset_counters();
  r = sync(fs);
  CHECK(fs.ops()[op::open_read] == 0);
  CHECK(fs.ops().writes() == 0);
}

TEST_CASE("settling a racily clean file whose mtime already matched is counted as settled, not as an action") {
  mock_fs fs;
  fs.set_granularity(1s);
  fs.write("/src/gen.h", "v1");
  (void)sync(fs);  // same tick: the copy is racily clean
  fs.advance(5s);
  const std::int64_t mtime = fs.lstat("/src/gen.h").mtime_ns;
  REQUIRE(fs.lstat("/dst/gen.h").mtime_ns == mtime);
  std::vector<std::string> seen;
  const auto r = treesync::sync(fs, "/src", "/dst", [&](const treesync::action& a) {
    seen.push_back(std::string(treesync::to_string(a.kind)) + ' ' + std::string(a.path));
  });
  CAPTURE(seen.size());
  CHECK(r.ok());
  CHECK(r.settled == 1);
  CHECK(r.meta_updated == 0);
  CHECK(r.updated == 0);
  CHECK_FALSE(r.unchanged());  // the file's ctime moved
  CHECK(seen.empty());
  CHECK(fs.lstat("/dst/gen.h").mtime_ns == mtime);
  fs.advance(5s);
  CHECK(sync(fs).settled == 0);  // trusted from now on
}

TEST_CASE("a file older than the racy window is trusted without reading") {
  mock_fs fs;
  fs.set_granularity(1s);
  fs.write("/src/old.h", "v1");
  fs.advance(5s);
  (void)sync(fs);
  fs.advance(5s);
  fs.reset_counters();
  (void)sync(fs);
  CHECK(fs.ops()[op::open_read] == 0);
}

TEST_CASE("a destination directory swapped for a symlink while it is being deleted is unlinked, not walked") {
  mock_fs fs;
  small_tree(fs);
  (void)sync(fs);
  fs.write("/dst/old/a", "a");
  fs.write("/outside/a", "keep me");
  fs.advance(10s);
  bool swapped = false;
  fs.on_operation([&](op k, const std::string& path) {
    if (k == op::open_dir && path == "/dst/old" && !swapped) {
      swapped = true;
      fs.remove("/dst/old");
      fs.symlink("/dst/old", "/outside");
    }
  });
  const auto r = sync(fs);
  CHECK(swapped);
  CHECK(r.ok());
  CHECK_FALSE(fs.exists("/dst/old"));
  CHECK(fs.read("/outside/a") == "keep me");
}

TEST_CASE("cancel_on stops the run early, leaves nothing partial, and the next run converges") {
  mock_fs fs;
  for (int i = 0; i < 50; ++i) fs.write("/src/d" + std::to_string(i % 5) + "/f" + std::to_string(i), "data");
  fs.advance(10s);
  std::atomic<bool> cancel{false};
  std::size_t writes = 0;
  fs.on_operation([&](op k, const std::string&) {
    if (k == op::open_write && ++writes == 10) cancel = true;
  });
  std::error_code ec;
  const auto r = treesync::sync(fs, "/src", "/dst", treesync::cancel_on(cancel), ec);
  CHECK(ec == std::errc::operation_canceled);
  CHECK(r.cancelled);
  CHECK(r.created < 50);
  CHECK_THROWS_AS((void)treesync::sync(fs, "/src", "/dst", treesync::cancel_on(cancel)), std::filesystem::filesystem_error);
  for (const auto& kv : fs.tree("/dst")) {
    if (kv.second.type != file_type::regular) continue;
    CHECK(kv.second.data == "data");
  }
  fs.on_operation(nullptr);
  cancel = false;
  CHECK(sync(fs).ok());
  check_mirror(fs);
}

TEST_CASE("a new directory whose source cannot be listed is made empty with the source's mode and reported created, as rsync") {
  mock_fs fs;
  fs.write("/src/ok/f", "fine");
  fs.write("/src/locked/secret", "unreadable");
  fs.chmod("/src/locked", 0500);
  fs.advance(10s);
  fs.fail_path("/src/locked", std::errc::permission_denied, op::list);
  std::vector<std::string> created;
  const auto r = treesync::sync(fs, "/src", "/dst", [&](const treesync::action& a) {
    if (a.kind == treesync::action_kind::create) created.emplace_back(a.path);
  });
  fs.clear_faults();
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].path == "locked");
  CHECK(r.errors[0].side == treesync::side::source);
  CHECK(std::find(created.begin(), created.end(), "locked") != created.end());
  REQUIRE(fs.exists("/dst/locked"));  // rsync: cd+++++++++ locked/, then the sender's opendir error
  CHECK(fs.lstat("/dst/locked").type == file_type::directory);
  CHECK(fs.lstat("/dst/locked").mode == 0500);
  CHECK(fs.tree("/dst/locked").empty());
  CHECK(fs.read("/dst/ok/f") == "fine");
  CHECK(treesync_test::temporaries(fs, "/dst").empty());
}
