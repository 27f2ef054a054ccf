// tests/test_setid.cpp - issue 33 item 6: which set-user-ID and set-group-ID bits a copy keeps.
//
// A set-ID file of another user, copied by root with the default options, must not become a
// set-ID program of root's (rsync's default, which has no -p, strips the bits).  The rule is the
// walker's (detail/walk.hpp setid_dropped): set-user-ID stays where the copy gets the source's
// owner (preserve_owner) or the run acts as that owner; set-group-ID where the copy gets the
// source's group (preserve_group) or the run acts as the source's owner and is not root.  Over
// mock_fs (user_mock below sets the identity user_id() reports), and over the real filesystem as
// root with a source file of another uid.
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include "support/temp_dir.hpp"

#include <cstdint>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

namespace {

using treesync::mock_fs;
using namespace std::chrono_literals;

constexpr std::uint32_t user = 4242;  // the owner of the source file, not the run's user
constexpr std::uint32_t users_group = 4343;

// mock_fs whose runs act as `uid` as far as user_id() says (mock_fs::act_as also changes what
// the mock permits; here only the run's identity matters)
struct user_mock : mock_fs {
  std::int64_t uid = 0;
  std::int64_t user_id() const { return uid; }
};

// the user's set-ID program in /src; the run then acts as `run_as`
void setid_source(user_mock& fs, std::int64_t run_as, std::uint32_t mode) {
  fs.uid = run_as;
  fs.write("/src/evil", "#!/bin/sh\nid\n", mode);
  fs.chown("/src/evil", user, users_group);
  fs.advance(10s);
}

}  // namespace

TEST_CASE("set-ID: a set-user-ID file of another user copied by root without preserve_owner loses the bit") {
  user_mock fs;
  setid_source(fs, 0, 04755);
  const treesync::report r = treesync::sync(fs, "/src", "/dst");
  CHECK(r.ok());
  CHECK(fs.lstat("/dst/evil").uid == 0);  // root's copy ...
  CHECK(fs.lstat("/dst/evil").mode == 0755);  // ... that runs as whoever starts it
  fs.advance(10s);
  CHECK(treesync::sync(fs, "/src", "/dst").unchanged());  // the plan's mode: nothing to fix next time
}

TEST_CASE("set-ID: a set-group-ID file copied by root without preserve_group loses the bit") {
  user_mock fs;
  setid_source(fs, 0, 02755);
  CHECK(treesync::sync(fs, "/src", "/dst", treesync::preserve_owner).ok());
  CHECK(fs.lstat("/dst/evil").gid == 0);  // root's group, not the source's
  CHECK(fs.lstat("/dst/evil").mode == 0755);
}

TEST_CASE("set-ID: preserve_owner and preserve_group keep the bits, the copy being the source's owner's and group's") {
  user_mock fs;
  setid_source(fs, 0, 06755);
  CHECK(treesync::sync(fs, "/src", "/dst", treesync::preserve_owner, treesync::preserve_group).ok());
  CHECK(fs.lstat("/dst/evil").uid == user);
  CHECK(fs.lstat("/dst/evil").gid == users_group);
  CHECK(fs.lstat("/dst/evil").mode == 06755);
}

TEST_CASE("set-ID: a run that is not root, acting as the source file's owner, keeps both bits") {
  user_mock fs;
  setid_source(fs, user, 06755);
  CHECK(treesync::sync(fs, "/src", "/dst").ok());
  CHECK(fs.lstat("/dst/evil").mode == 06755);
}

TEST_CASE("set-ID: root's own set-group-ID file copied by root without preserve_group loses that bit only") {
  // /usr/bin/wall (root:tty 2755) copied as root:root 2755 would run with group root
  user_mock fs;
  fs.uid = 0;
  fs.write("/src/wall", "w", 06755);
  fs.chown("/src/wall", 0, 5);
  fs.advance(10s);
  CHECK(treesync::sync(fs, "/src", "/dst").ok());
  CHECK(fs.lstat("/dst/wall").mode == 04755);
}

TEST_CASE("set-ID: mock_fs acting as root keeps set-user-ID on root's own file only, set-group-ID only with preserve_group") {
  mock_fs fs;  // acts as root (mock_fs::act_as: user_id() 0)
  fs.write("/src/evil", "e", 06755);
  fs.chown("/src/evil", user, users_group);
  fs.write("/src/mine", "m", 06755);  // uid 0: the run's own
  fs.advance(10s);
  CHECK(treesync::sync(fs, "/src", "/dst").ok());
  CHECK(fs.lstat("/dst/evil").mode == 0755);
  CHECK(fs.lstat("/dst/mine").mode == 04755);
  CHECK(treesync::sync(fs, "/src", "/kept", treesync::preserve_owner, treesync::preserve_group).ok());
  CHECK(fs.lstat("/kept/evil").mode == 06755);
}

TEST_CASE("set-ID: a warm run takes the bit off a current copy that has it (made by an earlier run)") {
  user_mock fs;
  setid_source(fs, 0, 04755);
  fs.write("/dst/evil", "#!/bin/sh\nid\n", 04755);  // root's, with the source's size and mtime
  fs.set_mtime("/dst/evil", fs.lstat("/src/evil").mtime_ns);
  fs.advance(10s);
  const treesync::report r = treesync::sync(fs, "/src", "/dst");
  CHECK(r.ok());
  CHECK(fs.lstat("/dst/evil").mode == 0755);
}

TEST_CASE("set-ID: perms off, a root-owned set-user-ID file rewritten with another user's data loses the bit") {
  user_mock fs;
  setid_source(fs, 0, 0755);
  fs.write("/dst/evil", "the old program", 04711);  // root's own set-user-ID file
  fs.advance(10s);
  treesync::options o;
  o.perms = false;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", o);
  CHECK(r.ok());
  CHECK(fs.read("/dst/evil") == "#!/bin/sh\nid\n");
  CHECK(fs.lstat("/dst/evil").mode == 0711);  // the existing file's bits, less set-user-ID
}

TEST_CASE("set-ID: --chmod's own set-ID bits are asked for by name and kept") {
  user_mock fs;
  setid_source(fs, 0, 0755);
  treesync::options o;
  REQUIRE(o.chmod.parse("Fu+s"));
  CHECK(treesync::sync(fs, "/src", "/dst", o).ok());
  CHECK(fs.lstat("/dst/evil").mode == 04755);
}

TEST_CASE("set-ID: a directory keeps its set-group-ID bit without preserve_group (what new entries inherit)") {
  user_mock fs;
  fs.uid = 0;
  fs.mkdir("/src/shared", 02775);
  fs.chown("/src/shared", user, users_group);
  fs.write("/src/shared/f", "f");
  fs.advance(10s);
  CHECK(treesync::sync(fs, "/src", "/dst").ok());
  CHECK(fs.lstat("/dst/shared").mode == 02775);
}

TEST_CASE("set-ID, posix: root's default copy of another user's set-user-ID program is not set-user-ID root") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root (a source file of another uid)");
    return;
  }
  treesync_test::temp_dir t;
  const auto src = t / "src", dst = t / "dst";
  treesync_test::make_dir(src);
  treesync_test::write_file(src / "evil", "#!/bin/sh\nid\n", 0755, 1'600'000'000'123'456'789);
  REQUIRE(::chown((src / "evil").c_str(), user, users_group) == 0);
  REQUIRE(::chmod((src / "evil").c_str(), 06755) == 0);  // after the chown, which clears the bits
  CHECK(treesync::sync(src, dst).ok());
  const struct ::stat st = treesync_test::lstat_of(dst / "evil");
  CHECK(st.st_uid == 0);
  CHECK((st.st_mode & 07777) == 0755);
  CHECK(treesync::sync(src, dst).unchanged());
}

TEST_CASE("set-ID, posix: root's copy with the source's owner and group keeps both bits") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root (a source file of another uid)");
    return;
  }
  treesync_test::temp_dir t;
  const auto src = t / "src", dst = t / "dst";
  treesync_test::make_dir(src);
  treesync_test::write_file(src / "evil", "#!/bin/sh\nid\n", 0755, 1'600'000'000'123'456'789);
  REQUIRE(::chown((src / "evil").c_str(), user, users_group) == 0);
  REQUIRE(::chmod((src / "evil").c_str(), 06755) == 0);
  CHECK(treesync::sync(src, dst, treesync::preserve_owner, treesync::preserve_group).ok());
  const struct ::stat st = treesync_test::lstat_of(dst / "evil");
  CHECK(st.st_uid == user);
  CHECK(st.st_gid == users_group);
  CHECK((st.st_mode & 07777) == 06755);
}
