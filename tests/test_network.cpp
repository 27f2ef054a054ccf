// Destinations that keep neither a ctime nor nanoseconds (SFTPv3 as sshfs shows it), over
// mock_fs::sftp_semantics(): mtimes read back as whole seconds and ctime == mtime.
//
// What must hold there, as on a local disk: a warm run on an unchanged tree writes nothing and
// reads no file data (after at most one settling run for copies made within the racy window),
// and a source rewritten within its timestamp tick after its copy is still caught.
#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include <doctest/doctest.h>

#include <random>
#include <string>

namespace {

using treesync::file_type;
using treesync::mock_fs;
using op = treesync::mock_fs::op;
using namespace std::chrono_literals;

constexpr std::int64_t sec = 1000000000;

// A local source with nanosecond mtimes (a 1 ms clock, as a coarse kernel clock) and a racy window
// of 1 s (posix_fs's default); `dst_sftp` and `src_sftp` say which trees are on "sshfs".
void network_fs(mock_fs& fs, bool src_sftp, bool dst_sftp) {
  fs.set_granularity(1ms);
  fs.set_racy_window(1s);
  if (src_sftp) fs.sftp_semantics("/src");
  if (dst_sftp) fs.sftp_semantics("/dst");
}

void some_tree(mock_fs& fs) {
  fs.write("/src/a.h", "alpha");
  fs.write("/src/inc/b.h", "beta", 0640);
  fs.write("/src/inc/deep/c.h", "gamma");
  fs.write("/src/bin/tool", "#!/bin/sh\n", 0755);
  fs.mkdir("/src/empty", 0700);
  fs.set_mtime("/src/a.h", 1600000000 * sec + 123456789);
  fs.set_mtime("/src/inc/b.h", 1600000001 * sec + 987654321);
  fs.set_mtime("/src/inc", 1600000002 * sec + 5);
}

treesync::report sync(mock_fs& fs) { return treesync::sync(fs, "/src", "/dst"); }

// The destination shows every source entry's bytes and mode, and its mtime at whole seconds.
void check_mirror_at_seconds(const mock_fs& fs) {
  const auto s = fs.tree("/src");
  const auto d = fs.tree("/dst");
  REQUIRE(s.size() == d.size());
  for (const auto& kv : s) {
    INFO("entry: ", kv.first);
    REQUIRE(d.count(kv.first) == 1);
    const auto& a = kv.second;
    const auto& b = d.at(kv.first);
    CHECK(a.type == b.type);
    CHECK(a.data == b.data);
    CHECK(a.mode == b.mode);
    if (a.type != file_type::symlink) CHECK(a.mtime_ns / sec == b.mtime_ns / sec);
  }
}

TEST_CASE("mock_fs::sftp_semantics shows whole-second mtimes and a ctime equal to the mtime") {
  mock_fs fs;
  fs.sftp_semantics("/dst");
  fs.write("/dst/f", "x");
  fs.set_mtime("/dst/f", 1600000000 * sec + 700000000);
  fs.write("/dstx/f", "x");
  fs.set_mtime("/dstx/f", 1600000000 * sec + 700000000);
  CHECK(fs.lstat("/dst/f").mtime_ns == 1600000000 * sec);
  CHECK(fs.lstat("/dst/f").ctime_ns == 1600000000 * sec);
  CHECK(fs.lstat("/dstx/f").mtime_ns == 1600000000 * sec + 700000000);  // a sibling prefix is not under it
}

TEST_CASE("local to sshfs: a warm no-op on an old tree writes nothing and reads no data") {
  mock_fs fs;
  network_fs(fs, false, true);
  some_tree(fs);
  fs.advance(10s);
  CHECK(sync(fs).ok());
  check_mirror_at_seconds(fs);
  fs.advance(10s);
  fs.reset_counters();
  const auto r = sync(fs);
  CHECK(r.ok());
  CHECK(fs.ops().writes() == 0);
  CHECK(fs.ops()[op::open_read] == 0);
  CHECK(r.meta_updated == 0);
  CHECK(r.updated == 0);
}

TEST_CASE("local to sshfs: copies made within the racy window settle in one run, then a no-op is quiet") {
  mock_fs fs;
  network_fs(fs, false, true);
  for (int i = 0; i < 20; ++i) fs.write("/src/d" + std::to_string(i % 4) + "/f" + std::to_string(i), "data");
  CHECK(sync(fs).ok());  // every source file was written this very tick: every copy is racy
  fs.advance(5s);
  auto r = sync(fs);  // the settling run
  CHECK(r.ok());
  check_mirror_at_seconds(fs);
  for (int run = 0; run < 3; ++run) {
    fs.advance(5s);
    fs.reset_counters();
    r = sync(fs);
    CHECK(r.ok());
    CHECK(fs.ops().writes() == 0);
    CHECK(fs.ops()[op::open_read] == 0);
    CHECK(r.meta_updated == 0);
  }
}

TEST_CASE("sshfs to sshfs: after the settling run a warm no-op writes nothing and reads no data") {
  mock_fs fs;
  network_fs(fs, true, true);
  some_tree(fs);
  for (int i = 0; i < 10; ++i) fs.write("/src/new/f" + std::to_string(i), "fresh");  // racy at the first run
  CHECK(sync(fs).ok());
  fs.advance(5s);
  CHECK(sync(fs).ok());
  check_mirror_at_seconds(fs);
  fs.advance(5s);
  fs.reset_counters();
  const auto r = sync(fs);
  CHECK(fs.ops().writes() == 0);
  CHECK(fs.ops()[op::open_read] == 0);
  CHECK(r.meta_updated == 0);
}

TEST_CASE("without ctime, a racy copy is smudged and the next run stamps the exact mtime") {
  mock_fs fs;
  network_fs(fs, false, true);
  fs.write("/src/gen.h", "v1");
  fs.set_mtime("/src/gen.h", fs.time() - 100000000);  // 0.1 s ago: within the racy window
  const std::int64_t mtime = fs.lstat("/src/gen.h").mtime_ns;
  CHECK(sync(fs).ok());
  CHECK(fs.lstat("/dst/gen.h").mtime_ns == treesync::smudged_mtime(mtime));
  fs.advance(5s);
  CHECK(sync(fs).updated == 1);
  CHECK(fs.lstat("/dst/gen.h").mtime_ns == mtime / sec * sec);
}

TEST_CASE("without ctime, a source rewritten in the same tick after its copy is caught") {
  mock_fs fs;
  fs.set_granularity(1s);  // a coarse source clock: the rewrite keeps size and mtime
  fs.set_racy_window(1s);
  fs.sftp_semantics("/dst");
  fs.write("/src/gen.h", "v1");
  const std::int64_t mtime = fs.lstat("/src/gen.h").mtime_ns;
  CHECK(sync(fs).ok());
  fs.write("/src/gen.h", "v2");
  REQUIRE(fs.lstat("/src/gen.h").mtime_ns == mtime);
  fs.advance(5s);
  const auto r = sync(fs);
  CHECK(r.updated == 1);
  CHECK(fs.read("/dst/gen.h") == "v2");
  CHECK(fs.lstat("/dst/gen.h").mtime_ns == mtime);
}

TEST_CASE("without ctime, under a compare window a smudged copy is verified by content and re-stamped") {
  mock_fs fs;
  network_fs(fs, false, true);
  fs.write("/src/gen.h", "v1");
  const std::int64_t mtime = fs.lstat("/src/gen.h").mtime_ns;
  CHECK(sync(fs).ok());
  fs.advance(5s);
  fs.reset_counters();
  const auto r = treesync::sync(fs, "/src", "/dst", treesync::compare::size_mtime{3s});
  CHECK(fs.ops()[op::open_read] == 2);  // both sides compared once
  CHECK(fs.ops()[op::open_write] == 0);
  CHECK(r.meta_updated == 1);  // the smudged mtime differed: a change, not a settled file
  CHECK(r.settled == 0);
  CHECK(fs.lstat("/dst/gen.h").mtime_ns == mtime / sec * sec);
  fs.advance(5s);
  fs.reset_counters();
  (void)treesync::sync(fs, "/src", "/dst", treesync::compare::size_mtime{3s});
  CHECK(fs.ops().writes() == 0);
  CHECK(fs.ops()[op::open_read] == 0);
}

TEST_CASE("with a ctime, a racy copy keeps its exact mtime (no smudge)") {
  mock_fs fs;
  fs.set_racy_window(1s);
  fs.write("/src/gen.h", "v1");
  const std::int64_t mtime = fs.lstat("/src/gen.h").mtime_ns;
  CHECK(sync(fs).ok());
  CHECK(fs.lstat("/dst/gen.h").mtime_ns == mtime);
}

TEST_CASE("without ctime, random churn converges and every settled no-op is quiet") {
  for (unsigned seed = 1; seed <= 40; ++seed) {
    INFO("seed: ", seed);
    mock_fs fs;
    network_fs(fs, seed % 2 == 0, true);
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return int(rng() % unsigned(n)); };
    auto path = [&] { return "/src/d" + std::to_string(pick(3)) + "/f" + std::to_string(pick(8)); };
    for (int i = 0; i < 15; ++i) fs.write(path(), std::string(std::size_t(pick(4)), 'a'));
    for (int round = 0; round < 6; ++round) {
      for (int i = 0, n = pick(6); i < n; ++i) {
        const std::string p = path();
        switch (pick(4)) {
          case 0: fs.write(p, std::string(std::size_t(pick(4)), 'b')); break;  // often the same size
          case 1: if (fs.exists(p)) fs.remove(p); break;
          case 2: if (fs.exists(p)) fs.chmod(p, 0600); break;
          default: fs.write(p, "c"); break;
        }
      }
      if (pick(2)) fs.advance(std::chrono::milliseconds(pick(3000)));
      REQUIRE(sync(fs).ok());
    }
    fs.advance(5s);
    REQUIRE(sync(fs).ok());  // settles whatever the last round copied racily
    check_mirror_at_seconds(fs);
    fs.advance(5s);
    fs.reset_counters();
    const auto r = sync(fs);
    CHECK(fs.ops().writes() == 0);
    CHECK(fs.ops()[op::open_read] == 0);
    CHECK(r.meta_updated == 0);
  }
}

// ---- posix_fs: what a destination keeps, judged from a directory's own stat -----------------------

treesync::stat_info dir_times(std::int64_t mtime, std::int64_t ctime) {
  treesync::stat_info s;
  s.type = file_type::directory;
  s.mtime_ns = mtime;
  s.ctime_ns = ctime;
  return s;
}

TEST_CASE("posix_fs takes whole-second timestamps with ctime equal to mtime for SFTP: 1 s, no ctime") {
  const auto m = treesync::posix_fs::judge_timestamps(dir_times(1700000000 * sec, 1700000000 * sec), false);
  CHECK(m.resolution_ns == sec);
  CHECK_FALSE(m.ctime);
}

TEST_CASE("posix_fs takes nanosecond digits in a directory's ctime for nanosecond timestamps with a ctime") {
  const auto m = treesync::posix_fs::judge_timestamps(dir_times(1700000000 * sec + 123456789, 1700000001 * sec + 987654321), false);
  CHECK(m.resolution_ns == 1);
  CHECK(m.ctime);
}

TEST_CASE("posix_fs takes timestamps in 100 ns units for a 100 ns resolution (SMB)") {
  const auto m = treesync::posix_fs::judge_timestamps(dir_times(1700000000 * sec + 123456700, 1700000000 * sec + 987654300), false);
  CHECK(m.resolution_ns == 100);
  CHECK(m.ctime);
}

TEST_CASE("posix_fs keeps the ctime rule on a local filesystem known to keep one, whole seconds or not") {
  const auto m = treesync::posix_fs::judge_timestamps(dir_times(1700000000 * sec, 1700000000 * sec), true);
  CHECK(m.resolution_ns == sec);
  CHECK(m.ctime);
}

TEST_CASE("posix_fs: a local temporary directory keeps nanoseconds and a ctime") {
  std::error_code ec;
  const auto base = std::filesystem::temp_directory_path(ec);
  REQUIRE_FALSE(ec);
  treesync::posix_fs fs;
  auto d = fs.open_root(base, ec);
  REQUIRE_FALSE(ec);
  const auto m = fs.timestamps(d, ec);
  CHECK_FALSE(ec);
  CHECK(m.ctime);
  CHECK(m.resolution_ns < sec);
}

}  // namespace
