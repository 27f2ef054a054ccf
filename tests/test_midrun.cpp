// tests/test_midrun.cpp - the tree changes while a run is in progress (issue 6, item 2), through
// mock_fs's hook: a source file vanishes, grows, shrinks or becomes a directory; a source directory
// vanishes; a destination entry appears or vanishes.  Each run completes (no refusal), reports
// what happened (vanished / changed_during_copy / a per-entry error), never installs a file that
// looks up to date but is not, and the next run converges to the exact mirror.
// (test_engine.cpp already covers: a file vanishing when it is opened, a file growing during a
// warm copy, a destination directory swapped for a symlink during its deletion.)
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>

#include "support/mock_mirror.hpp"
#include "support/mock_trees.hpp"
#include "support/report_checks.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

using treesync::file_type;
using treesync::mock_fs;
using op = treesync::mock_fs::op;
using namespace std::chrono_literals;
using namespace treesync_test;

constexpr std::int64_t sec = 1000000000;

void tree(mock_fs& fs) {
  fs.write("/src/a.txt", "alpha alpha");
  fs.write("/src/b.txt", "bravo");
  fs.write("/src/include/x.h", "int x;");
  fs.write("/src/include/y.h", "int y;");
  fs.write("/src/zeta/z.h", "int z;");
  stamp_entries(fs, "/src", 1600000000 * sec + 5 + sec, sec);
  fs.set_mtime("/src", 1500000000 * sec + 3);
  fs.advance(10s);
}

// tree(), synced once, then the clock moves on
void synced_tree(mock_fs& fs) {
  tree(fs);
  REQUIRE(treesync::sync(fs, "/src", "/dst").ok());
  fs.advance(10s);
}

// The changing run: runs with `hook` installed (called once per operation), then removes it.
treesync::report changing_run(mock_fs& fs, std::function<void(op, const std::string&)> hook) {
  fs.on_operation(std::move(hook));
  std::error_code ec;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", ec);
  fs.on_operation(nullptr);
  CHECK_MESSAGE(!ec, "the run was refused: ", ec.message());
  CHECK(lying_files(fs, "/src", "/dst", true).empty());
  return r;
}

// The next run, with the tree now still: it succeeds and leaves the exact mirror.
void next_run_converges(mock_fs& fs) {
  fs.advance(10s);
  const treesync::report r = treesync::sync(fs, "/src", "/dst");
  CHECK(r.ok());
  CHECK(r.vanished.empty());
  CHECK(exact_mirror_diff(fs, "/src", "/dst", true) == "");
  CHECK(temporaries(fs, "/dst").empty());
  fs.reset_counters();
  (void)treesync::sync(fs, "/src", "/dst");
  CHECK(fs.ops().writes() == 0);
}

// once(k, path, fn): a hook that calls fn the first time operation k touches path
template <class F>
std::function<void(op, const std::string&)> once(op kind, std::string path, F fn) {
  auto done = std::make_shared<bool>(false);
  return [=](op k, const std::string& p) mutable {
    if (!*done && k == kind && p == path) {
      *done = true;
      fn();
    }
  };
}

// as once(), for the first operation of `kind` on a temporary in directory `dir`
template <class F>
std::function<void(op, const std::string&)> once_temp(op kind, std::string dir, F fn) {
  auto done = std::make_shared<bool>(false);
  return [=](op k, const std::string& p) mutable {
    if (!*done && k == kind && p.rfind(dir + "/.treesync-tmp-", 0) == 0) {
      *done = true;
      fn();
    }
  };
}

}  // namespace

// ---- the source changes -------------------------------------------------------------------------

TEST_CASE("mid-run: a source file that vanishes between the listing and its stat is reported as vanished") {
  mock_fs fs;
  synced_tree(fs);
  const auto r = changing_run(fs, once(op::stat, "/src/a.txt", [&] { fs.remove("/src/a.txt"); }));
  CHECK(r.errors.empty());
  CHECK(has_path(r.vanished, "a.txt"));
  next_run_converges(fs);
  CHECK_FALSE(fs.exists("/dst/a.txt"));
}

TEST_CASE("mid-run: a source file that shrinks while it is copied is not installed and the next run copies it") {
  mock_fs fs;
  synced_tree(fs);
  fs.write("/src/a.txt", "alpha alpha, version 2");
  fs.advance(10s);
  const auto r = changing_run(fs, once_temp(op::open_write, "/dst", [&] { fs.write("/src/a.txt", "v3"); }));
  REQUIRE(r.vanished.size() == 1);
  CHECK(r.vanished[0].path == "a.txt");
  CHECK(r.vanished[0].code == treesync::errc::changed_during_copy);
  CHECK(fs.read("/dst/a.txt") == "alpha alpha");  // the old copy stays
  next_run_converges(fs);
  CHECK(fs.read("/dst/a.txt") == "v3");
}

TEST_CASE("mid-run: a source file that grows while a cold sync copies it is not installed and the next run copies it") {
  mock_fs fs;
  tree(fs);
  // include/ is new: it is populated under a temporary name, x.h written at its own name in it
  auto done = std::make_shared<bool>(false);
  const auto r = changing_run(fs, [&, done](op k, const std::string& p) {
    if (*done || k != op::open_write || p.size() < 4 || p.compare(p.size() - 4, 4, "/x.h") != 0) return;
    *done = true;
    fs.write("/src/include/x.h", "int x; int more_than_before;");
  });
  CHECK(*done);
  REQUIRE(r.vanished.size() == 1);
  CHECK(r.vanished[0].path == "include/x.h");
  CHECK(r.vanished[0].code == treesync::errc::changed_during_copy);
  CHECK_FALSE(fs.exists("/dst/include/x.h"));
  CHECK(fs.read("/dst/include/y.h") == "int y;");  // the rest is synced
  next_run_converges(fs);
}

TEST_CASE("mid-run: a source file rewritten with the same size while it is copied is not installed") {
  mock_fs fs;
  synced_tree(fs);
  fs.write("/src/b.txt", "BRAVO");
  fs.advance(10s);
  const auto r = changing_run(fs, once_temp(op::open_write, "/dst", [&] {
                                fs.advance(1s);
                                fs.write("/src/b.txt", "b-r-v");  // same size, new mtime
                              }));
  CHECK(has_path(r.vanished, "b.txt"));
  CHECK(fs.read("/dst/b.txt") == "bravo");
  next_run_converges(fs);
}

TEST_CASE("mid-run: a source file that becomes a directory while it is being copied is reported and then mirrored") {
  mock_fs fs;
  synced_tree(fs);
  fs.write("/src/a.txt", "alpha, version 2");
  fs.advance(10s);
  const auto r = changing_run(fs, once(op::open_read, "/src/a.txt", [&] {
                                fs.remove("/src/a.txt");
                                fs.write("/src/a.txt/inside", "now a directory");
                              }));
  CHECK((has_path(r.errors, "a.txt") || has_path(r.vanished, "a.txt")));
  CHECK(fs.lstat("/dst/a.txt").type == file_type::regular);
  CHECK(fs.read("/dst/a.txt") == "alpha alpha");
  next_run_converges(fs);
  CHECK(fs.read("/dst/a.txt/inside") == "now a directory");
}

TEST_CASE("mid-run: a source file that becomes a directory between the listing and its stat is mirrored as a directory") {
  mock_fs fs;
  synced_tree(fs);
  const auto r = changing_run(fs, once(op::stat, "/src/b.txt", [&] {
                                fs.remove("/src/b.txt");
                                fs.write("/src/b.txt/inside", "now a directory");
                              }));
  CHECK(r.errors.empty());
  next_run_converges(fs);
  CHECK(fs.lstat("/dst/b.txt").type == file_type::directory);
}

TEST_CASE("mid-run: a source file replaced by a symlink between the listing and its stat is reported as vanished") {
  mock_fs fs;
  synced_tree(fs);
  const auto r = changing_run(fs, once(op::stat, "/src/b.txt", [&] {
                                fs.remove("/src/b.txt");
                                fs.symlink("/src/b.txt", "a.txt");
                              }));
  CHECK(has_path(r.vanished, "b.txt"));
  CHECK(fs.read("/dst/b.txt") == "bravo");
  next_run_converges(fs);
  CHECK(fs.read("/dst/b.txt") == "alpha alpha");
}

TEST_CASE("mid-run: a source directory that vanishes before it is opened is reported as vanished, its copy kept") {
  mock_fs fs;
  synced_tree(fs);
  const auto r = changing_run(fs, once(op::open_dir, "/src/include", [&] { fs.remove("/src/include"); }));
  CHECK(r.errors.empty());
  CHECK(has_path(r.vanished, "include"));
  CHECK(fs.read("/dst/include/x.h") == "int x;");  // nothing deleted on a vanished listing
  next_run_converges(fs);
  CHECK_FALSE(fs.exists("/dst/include"));
}

TEST_CASE("mid-run: a source directory that vanishes after it is opened does not fail the run, and the next run converges") {
  mock_fs fs;
  synced_tree(fs);
  const auto r = changing_run(fs, once(op::list, "/src/include", [&] { fs.remove("/src/include"); }));
  CHECK(r.errors.empty());
  next_run_converges(fs);
  CHECK_FALSE(fs.exists("/dst/include"));
}

TEST_CASE("mid-run: a source file added to a directory already listed is picked up by the next run") {
  mock_fs fs;
  synced_tree(fs);
  const auto r = changing_run(fs, once(op::stat, "/src/zeta/z.h", [&] { fs.write("/src/aaa-late.txt", "late"); }));
  CHECK(r.ok());
  CHECK_FALSE(fs.exists("/dst/aaa-late.txt"));
  next_run_converges(fs);
}

// ---- the destination changes --------------------------------------------------------------------

TEST_CASE("mid-run: a destination file that appears where a file is being created is replaced by the copy") {
  mock_fs fs;
  tree(fs);
  const auto r = changing_run(fs, once_temp(op::open_write, "/dst", [&] { fs.write("/dst/a.txt", "intruder"); }));
  CHECK(r.ok());
  CHECK(fs.read("/dst/a.txt") == "alpha alpha");
  next_run_converges(fs);
}

TEST_CASE("mid-run: a destination file that appears where a directory is being created is reported, then replaced") {
  mock_fs fs;
  tree(fs);
  // include/ is new: created under a temporary name, renamed into place once complete
  const auto r = changing_run(fs, once_temp(op::mkdir, "/dst", [&] { fs.write("/dst/include", "intruder"); }));
  CHECK(has_path(r.errors, "include"));
  next_run_converges(fs);
}

TEST_CASE("mid-run: a destination directory that appears where a file is being created is reported, then replaced") {
  mock_fs fs;
  tree(fs);
  const auto r = changing_run(fs, once_temp(op::open_write, "/dst", [&] { fs.write("/dst/b.txt/inner", "intruder"); }));
  CHECK((has_path(r.errors, "b.txt") || fs.lstat("/dst/b.txt").type == file_type::regular));
  next_run_converges(fs);
}

TEST_CASE("mid-run: an extraneous destination entry that vanishes before its deletion does not fail the run") {
  mock_fs fs;
  synced_tree(fs);
  fs.write("/dst/junk.txt", "j");
  fs.write("/dst/junkdir/deep/j", "j");
  fs.advance(10s);
  auto h1 = once(op::unlink, "/dst/junk.txt", [&] { fs.remove("/dst/junk.txt"); });
  auto h2 = once(op::open_dir, "/dst/junkdir", [&] { fs.remove("/dst/junkdir"); });
  const auto r = changing_run(fs, [&](op k, const std::string& p) {
    h1(k, p);
    h2(k, p);
  });
  CHECK(r.ok());
  next_run_converges(fs);
}

TEST_CASE("mid-run: a destination file that vanishes before its comparison is created again in the same run") {
  mock_fs fs;
  synced_tree(fs);
  const auto r = changing_run(fs, once(op::stat, "/dst/a.txt", [&] { fs.remove("/dst/a.txt"); }));
  CHECK(r.ok());
  CHECK(fs.read("/dst/a.txt") == "alpha alpha");
  next_run_converges(fs);
}

TEST_CASE("mid-run: a destination directory that vanishes before it is opened is reported and recreated by the next run") {
  mock_fs fs;
  synced_tree(fs);
  fs.write("/src/include/new.h", "new");
  fs.advance(10s);
  const auto r = changing_run(fs, once(op::open_dir, "/dst/include", [&] { fs.remove("/dst/include"); }));
  CHECK((has_path(r.errors, "include") || fs.exists("/dst/include/new.h")));
  next_run_converges(fs);
}
