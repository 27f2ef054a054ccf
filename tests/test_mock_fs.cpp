// mock_fs itself: the tests of the engine are only as good as the filesystem they run on.
#include <treesync/mock_fs.hpp>

#include <doctest/doctest.h>

namespace {
using treesync::file_type;
using treesync::mock_fs;
using op = treesync::mock_fs::op;
using namespace std::chrono_literals;

mock_fs::dir_handle root(mock_fs& fs, const char* path) {
  std::error_code ec;
  auto h = fs.open_root(path, ec);
  REQUIRE_FALSE(ec);
  return h;
}
}  // namespace

TEST_CASE("mock_fs: every operation is counted by kind and writes are told apart from reads") {
  mock_fs fs;
  fs.write("/d/f", "abc");
  auto d = root(fs, "/d");
  std::error_code ec;
  fs.list(d, ec);
  fs.stat(d, "f", false, ec);
  fs.set_mode(d, "f", 0600, ec);
  fs.make_dir(d, "sub", 0755, ec);
  CHECK(fs.ops()[op::list] == 1);
  CHECK(fs.ops()[op::stat] == 1);
  CHECK(fs.ops()[op::chmod] == 1);
  CHECK(fs.ops()[op::mkdir] == 1);
  CHECK(fs.ops().writes() == 2);
  fs.reset_counters();
  CHECK(fs.ops().total() == 0);
}

TEST_CASE("mock_fs: the setup API is neither counted nor faulted") {
  mock_fs fs;
  fs.fail_any(1, std::errc::io_error);
  fs.write("/a/b", "x");
  fs.symlink("/a/l", "b");
  fs.chmod("/a/b", 0600);
  CHECK(fs.ops().total() == 0);
  CHECK(fs.read("/a/l") == "x");
}

TEST_CASE("mock_fs: a failure is injected at the n-th operation of a kind") {
  mock_fs fs;
  fs.write("/d/a", "1");
  fs.write("/d/b", "2");
  auto d = root(fs, "/d");
  fs.fail(op::stat, 2, std::errc::io_error);
  std::error_code ec;
  fs.stat(d, "a", false, ec);
  CHECK_FALSE(ec);
  fs.stat(d, "b", false, ec);
  CHECK(ec == std::errc::io_error);
  fs.stat(d, "b", false, ec);
  CHECK_FALSE(ec);
  CHECK(fs.faults_triggered() == 1);
}

TEST_CASE("mock_fs: a failure is injected at the n-th operation of any kind") {
  mock_fs fs;
  fs.write("/d/a", "1");
  auto d = root(fs, "/d");  // operation 1
  fs.fail_any(2, std::errc::no_space_on_device);
  std::error_code ec;
  fs.list(d, ec);
  CHECK_FALSE(ec);
  fs.make_dir(d, "x", 0755, ec);
  CHECK(ec == std::errc::no_space_on_device);
  CHECK_FALSE(fs.exists("/d/x"));
}

TEST_CASE("mock_fs: a failure is injected on a path, optionally for one kind") {
  mock_fs fs;
  fs.write("/d/a", "1");
  auto d = root(fs, "/d");
  fs.fail_path("/d/a", std::errc::permission_denied, op::open_read);
  std::error_code ec;
  fs.stat(d, "a", false, ec);
  CHECK_FALSE(ec);
  CHECK_FALSE(fs.same_content(d, "a", false, d, "a", ec));
  CHECK(ec == std::errc::permission_denied);
}

TEST_CASE("mock_fs: the hook sees each operation before it runs and may change the tree") {
  mock_fs fs;
  fs.write("/d/a", "1");
  auto d = root(fs, "/d");
  std::vector<std::string> seen;
  fs.on_operation([&](op k, const std::string& path) {
    seen.push_back(path);
    if (k == op::stat) fs.remove("/d/a");
  });
  std::error_code ec;
  fs.stat(d, "a", false, ec);
  CHECK(ec == std::errc::no_such_file_or_directory);
  CHECK(seen == std::vector<std::string>{"/d/a"});
}

TEST_CASE("mock_fs: timestamps come from the clock, floored to the granularity") {
  mock_fs fs;
  fs.set_granularity(1s);
  fs.set_time(100 * 1000000000LL + 700000000);
  fs.write("/f", "x");
  CHECK(fs.lstat("/f").mtime_ns == 100 * 1000000000LL);
  CHECK(fs.lstat("/f").ctime_ns == 100 * 1000000000LL);
  fs.advance(2s);
  fs.chmod("/f", 0600);
  CHECK(fs.lstat("/f").ctime_ns == 102 * 1000000000LL);
  CHECK(fs.lstat("/f").mtime_ns == 100 * 1000000000LL);
  CHECK(fs.racy_window() == 1000000000LL);
}

TEST_CASE("mock_fs: hard links share an inode") {
  mock_fs fs;
  fs.write("/a", "shared");
  fs.hard_link("/a", "/b");
  CHECK(fs.lstat("/a").ino == fs.lstat("/b").ino);
  fs.write("/a", "changed");
  CHECK(fs.read("/b") == "changed");
}

TEST_CASE("mock_fs: symlinks resolve relative, absolute, chained; loops and dangling links fail") {
  mock_fs fs;
  fs.write("/dir/file", "x");
  fs.symlink("/dir/rel", "file");
  fs.symlink("/abs", "/dir/file");
  fs.symlink("/chain", "abs");
  fs.symlink("/dir/up", "../dir/file");
  fs.symlink("/loop1", "loop2");
  fs.symlink("/loop2", "loop1");
  fs.symlink("/dangling", "nowhere");
  CHECK(fs.read("/dir/rel") == "x");
  CHECK(fs.read("/chain") == "x");
  CHECK(fs.read("/dir/up") == "x");
  auto r = root(fs, "/");
  std::error_code ec;
  fs.stat(r, "loop1", true, ec);
  CHECK(ec == std::errc::too_many_symbolic_link_levels);
  fs.stat(r, "dangling", true, ec);
  CHECK(ec == std::errc::no_such_file_or_directory);
  CHECK(fs.stat(r, "dangling", false, ec).type == file_type::symlink);
  CHECK(fs.canonical("/chain", ec) == "/dir/file");
}

TEST_CASE("mock_fs: open_dir refuses a symlink unless asked to follow") {
  mock_fs fs;
  fs.mkdir("/real");
  fs.symlink("/alias", "real");
  auto r = root(fs, "/");
  std::error_code ec;
  fs.open_dir(r, "alias", false, ec);
  CHECK(ec == std::errc::too_many_symbolic_link_levels);
  auto h = fs.open_dir(r, "alias", true, ec);
  CHECK_FALSE(ec);
  CHECK(fs.stat(h, ".", false, ec).ino == fs.lstat("/real").ino);
}

TEST_CASE("mock_fs: opening a FIFO for data is counted as a special open and refused") {
  mock_fs fs;
  fs.fifo("/d/p");
  fs.write("/d/f", "");
  auto d = root(fs, "/d");
  std::error_code ec;
  treesync::stat_info st;
  fs.copy_file(d, "p", d, "copy", st, treesync::copy_options{}, ec);
  CHECK(ec == treesync::errc::special_file);
  CHECK(fs.ops().special_opens == 1);
}

TEST_CASE("mock_fs: rename replaces files but not non-empty directories") {
  mock_fs fs;
  fs.write("/d/a", "a");
  fs.write("/d/b", "b");
  fs.write("/d/full/x", "x");
  auto d = root(fs, "/d");
  std::error_code ec;
  fs.rename(d, "a", "b", ec);
  CHECK_FALSE(ec);
  CHECK(fs.read("/d/b") == "a");
  fs.rename(d, "b", "full", ec);
  CHECK(ec == std::errc::is_a_directory);
}

TEST_CASE("mock_fs: listings are not sorted, so the engine must sort") {
  mock_fs fs;
  fs.write("/d/a", "");
  fs.write("/d/b", "");
  fs.write("/d/c", "");
  auto d = root(fs, "/d");
  std::error_code ec;
  const auto l = fs.list(d, ec);
  REQUIRE(l.size() == 3);
  CHECK(l.front().name == "c");
}
