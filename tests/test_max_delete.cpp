// max_delete plans and applies from one walk (issue 26, item 1): the deletions of entries the
// source lacks wait for the end of the walk and are counted before the first; over the cap none
// of them is made and the run ends with errc::max_delete_exceeded, the copies and updates made
// staying.  A directory replaced by an entry of another type is counted when it comes.
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstddef>
#include <map>
#include <string>
#include <system_error>
#include <vector>

using namespace std::chrono_literals;
using treesync::mock_fs;
using op = mock_fs::op;

namespace {

// A mirrored tree, then: a new source file, and in the destination 2 extraneous files (one a level
// down) and an extraneous directory holding 3 entries: 6 deletions.
void six_deletions(mock_fs& fs) {
  fs.write("/src/a.txt", "a");
  fs.write("/src/d/b.txt", "b");
  fs.write("/src/d/e/c.txt", "c");
  fs.advance(10s);
  REQUIRE(treesync::sync(fs, "/src", "/dst").ok());
  fs.write("/src/new.txt", "new");
  fs.write("/dst/x.txt", "x");
  fs.write("/dst/d/y.txt", "y");
  fs.write("/dst/gone/1", "1");
  fs.write("/dst/gone/sub/2", "2");
  fs.advance(10s);
  fs.reset_counters();
}

bool none_deleted(const mock_fs& fs) {
  return fs.exists("/dst/x.txt") && fs.exists("/dst/d/y.txt") && fs.exists("/dst/gone/1") && fs.exists("/dst/gone/sub/2");
}

bool all_deleted(const mock_fs& fs) {
  return !fs.exists("/dst/x.txt") && !fs.exists("/dst/d/y.txt") && !fs.exists("/dst/gone");
}

}  // namespace

TEST_CASE("max_delete: one walk, every directory listed once (the deleted ones included)") {
  for (const std::size_t cap : {std::size_t{5}, std::size_t{6}}) {  // over and at the cap
    CAPTURE(cap);
    mock_fs fs;
    six_deletions(fs);
    std::map<std::string, std::size_t> listed;
    fs.on_operation([&listed](op k, const std::string& path) {
      if (k == op::list) ++listed[path];
    });
    std::error_code ec;
    (void)treesync::sync(fs, "/src", "/dst", treesync::max_delete{cap}, ec);
    CHECK(bool(ec) == (cap == 5));
    for (const auto& entry : listed) {
      const std::string& path = entry.first;
      CAPTURE(path);
      CHECK(entry.second == 1);
    }
    // both trees' directories, and the deleted tree's two
    CHECK(listed.size() == 3 + 3 + 2);
    CHECK(fs.ops()[op::list] == 8);
  }
}

TEST_CASE("max_delete: over the cap no deletion is made, the copies stay, and the run ends with max_delete_exceeded") {
  mock_fs fs;
  six_deletions(fs);
  std::error_code ec;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::max_delete{5}, ec);
  CHECK(ec == treesync::errc::max_delete_exceeded);
  CHECK(r.deleted == 0);
  CHECK(r.would_delete == 6);
  CHECK(r.created == 1);
  CHECK(fs.read("/dst/new.txt") == "new");
  CHECK(none_deleted(fs));
  CHECK(fs.ops()[op::unlink] == 0);
  CHECK(fs.ops()[op::rmdir] == 0);
  CHECK(r.errors.empty());

  // the throwing overload throws the same code
  std::error_code thrown;
  try {
    (void)treesync::sync(fs, "/src", "/dst", treesync::max_delete{5});
  } catch (const std::filesystem::filesystem_error& e) {
    thrown = e.code();
  }
  CHECK(thrown == treesync::errc::max_delete_exceeded);
  CHECK(none_deleted(fs));
}

TEST_CASE("max_delete: at the cap every deletion is made") {
  mock_fs fs;
  six_deletions(fs);
  std::error_code ec;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::max_delete{6}, ec);
  CHECK_FALSE(ec);
  CHECK(r.ok());
  CHECK(r.deleted == 6);
  CHECK(r.would_delete == 0);
  CHECK(all_deleted(fs));
  CHECK(fs.read("/dst/new.txt") == "new");
}

TEST_CASE("max_delete: a directory replaced by a file counts its entries when it comes; past the cap it stays") {
  const auto setup = [](mock_fs& fs) {
    fs.write("/src/t", "now a file");
    fs.write("/dst/t/1", "1");
    fs.write("/dst/t/2", "2");
    fs.write("/dst/t/3", "3");
    fs.write("/src/u/inner", "a directory now");
    fs.write("/dst/u", "was a file");  // replaced by a directory: not a deletion
    fs.advance(10s);
  };
  {
    mock_fs fs;
    setup(fs);
    std::error_code ec;
    const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::max_delete{2}, ec);
    CHECK(ec == treesync::errc::max_delete_exceeded);
    CHECK(r.would_delete == 3);
    CHECK(r.deleted == 0);
    CHECK(fs.exists("/dst/t/1"));
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].path == "t");
    CHECK(r.errors[0].code == treesync::errc::max_delete_exceeded);
    CHECK(fs.read("/dst/u/inner") == "a directory now");
  }
  {
    mock_fs fs;
    setup(fs);
    std::error_code ec;
    const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::max_delete{3}, ec);
    CHECK_FALSE(ec);
    CHECK(r.deleted == 3);
    CHECK(fs.read("/dst/t") == "now a file");
    CHECK(fs.read("/dst/u/inner") == "a directory now");
  }
}

TEST_CASE("max_delete: the replacements count with the deletions of what the source lacks") {
  mock_fs fs;
  fs.write("/src/t", "now a file");
  fs.write("/dst/t/1", "1");
  fs.write("/dst/t/2", "2");
  fs.write("/dst/x", "extraneous");
  fs.advance(10s);
  std::error_code ec;
  // the replacement's 2 fit the cap, the deletion after the walk does not: it is not made
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::max_delete{2}, ec);
  CHECK(ec == treesync::errc::max_delete_exceeded);
  CHECK(r.would_delete == 3);
  CHECK(r.deleted == 2);
  CHECK(fs.read("/dst/t") == "now a file");
  CHECK(fs.exists("/dst/x"));
}

TEST_CASE("max_delete with jobs: over the cap none is made, at the cap all are (looped)") {
  for (int round = 0; round < 200; ++round) {
    CAPTURE(round);
    for (const std::size_t cap : {std::size_t{5}, std::size_t{6}}) {
      mock_fs fs;
      six_deletions(fs);
      for (int i = 0; i < 20; ++i) fs.write("/src/d/f" + std::to_string(i), "f");  // work for the other workers
      fs.advance(10s);
      std::error_code ec;
      const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::jobs{4}, treesync::max_delete{cap}, ec);
      if (cap == 5) {
        REQUIRE(ec == treesync::errc::max_delete_exceeded);
        REQUIRE(r.deleted == 0);
        REQUIRE(r.would_delete == 6);
        REQUIRE(none_deleted(fs));
      } else {
        REQUIRE_FALSE(ec);
        REQUIRE(r.deleted == 6);
        REQUIRE(all_deleted(fs));
      }
      REQUIRE(fs.read("/dst/d/f19") == "f");
      REQUIRE(fs.read("/dst/new.txt") == "new");
    }
  }
}

TEST_CASE("max_delete with keep_on_source_error: a source failure skips the deletions, else they are counted") {
  for (const unsigned jobs : {1u, 3u}) {
    CAPTURE(jobs);
    treesync::options o;
    o.jobs = jobs;
    o.keep_on_source_error = true;
    {  // a source failure: no deletion, whatever the cap says; the skip is the notice
      mock_fs fs;
      six_deletions(fs);
      fs.write("/src/bad", "unreadable");
      fs.advance(10s);
      fs.fail_path("/src/bad", std::errc::io_error);
      std::error_code ec;
      const treesync::report r = treesync::sync(fs, "/src", "/dst", o, treesync::max_delete{100}, ec);
      CHECK_FALSE(ec);
      CHECK(r.errors.size() == 1);
      CHECK(r.deleted == 0);
      CHECK(none_deleted(fs));
      REQUIRE(r.notices.size() == 1);
      CHECK(r.notices[0].code == treesync::errc::deletions_skipped);
    }
    {  // none: over the cap, refused; at it, made
      mock_fs fs;
      six_deletions(fs);
      std::error_code ec;
      treesync::report r = treesync::sync(fs, "/src", "/dst", o, treesync::max_delete{5}, ec);
      CHECK(ec == treesync::errc::max_delete_exceeded);
      CHECK(r.deleted == 0);
      CHECK(none_deleted(fs));
      r = treesync::sync(fs, "/src", "/dst", o, treesync::max_delete{6}, ec);
      CHECK_FALSE(ec);
      CHECK(r.deleted == 6);
      CHECK(all_deleted(fs));
    }
  }
}

TEST_CASE("max_delete: a dry run over the cap reports the other changes, no deletion, and max_delete_exceeded") {
  mock_fs fs;
  six_deletions(fs);
  treesync::options o;
  o.dry_run = true;
  std::vector<treesync::action_kind> seen;
  std::error_code ec;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", o, treesync::max_delete{5},
                                            [&seen](const treesync::action& a) { seen.push_back(a.kind); }, ec);
  CHECK(ec == treesync::errc::max_delete_exceeded);
  CHECK(r.would_delete == 6);
  CHECK(r.deleted == 0);
  CHECK(r.created == 1);
  CHECK(std::count(seen.begin(), seen.end(), treesync::action_kind::create) == 1);
  CHECK(std::count(seen.begin(), seen.end(), treesync::action_kind::remove) == 0);
  CHECK(fs.ops().writes() == 0);
  // at the cap, the dry run reports all six
  const treesync::report all = treesync::sync(fs, "/src", "/dst", o, treesync::max_delete{6}, ec);
  CHECK_FALSE(ec);
  CHECK(all.deleted == 6);
  CHECK(fs.ops().writes() == 0);
}

TEST_CASE("max_delete over the cap with a state file: the entries kept are recorded, the next run deletes them") {
  mock_fs fs;
  six_deletions(fs);
  treesync::options o;
  o.state = "/state";
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/dst", o, treesync::max_delete{5}, ec);
  CHECK(ec == treesync::errc::max_delete_exceeded);
  CHECK(none_deleted(fs));
  fs.advance(10s);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", o, treesync::max_delete{6}, ec);
  CHECK_FALSE(ec);
  CHECK(r.deleted == 6);
  CHECK(all_deleted(fs));
}
