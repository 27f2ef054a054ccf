// tests/test_setid.cpp - issues 33 item 6 and 43 item 2: which set-user-ID and set-group-ID bits a
// copy keeps.
//
// The rule is what the copy is (detail/walk.hpp setid_dropped): set-user-ID stays only where the
// copy's owner is the source's owner, set-group-ID only where the copy's group is the source's
// group, as the copy is made: the source's group where the run sets it (preserve_group as root, or
// one of the user's groups), otherwise the group the kernel gives a new entry (the directory's where
// it has set-group-ID while it is filled, the run's own group elsewhere).  A set-ID file of another
// user copied by root must not become root's set-ID program; root's own 2755 root:root file stays
// 2755; a user's -g copy of another user's set-group-ID file whose group the kernel refuses must not
// keep the bit.  Over mock_fs (as root, its default, and as a user with groups: act_as), over the
// real filesystem as root, and as uid 65534 in a forked child.
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include "support/temp_dir.hpp"

#include <cstdint>
#include <cstdio>
#include <string>

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using treesync::mock_fs;
using namespace std::chrono_literals;

constexpr std::uint32_t user = 4242;  // the owner of the source file, not the run's user
constexpr std::uint32_t users_group = 4343;

// the user's set-ID program in /src; the run acts as root (mock_fs's default)
void setid_source(mock_fs& fs, std::uint32_t mode) {
  fs.write("/src/evil", "#!/bin/sh\nid\n", mode);
  fs.chown("/src/evil", user, users_group);
  fs.advance(10s);
}

// A real set-ID file at `file`: owner uid, group gid, mode `mode`.
void posix_setid_file(const std::filesystem::path& file, std::uint32_t uid, std::uint32_t gid, mode_t mode) {
  treesync_test::write_file(file, "#!/bin/sh\nid\n", 0755, 1'600'000'000'123'456'789);
  REQUIRE(::chown(file.c_str(), uid, gid) == 0);
  REQUIRE(::chmod(file.c_str(), mode) == 0);  // after the chown, which clears the bits
}

}  // namespace

TEST_CASE("set-ID: a set-user-ID file of another user copied by root without preserve_owner loses the bit") {
  mock_fs fs;  // acts as root
  setid_source(fs, 04755);
  const treesync::report r = treesync::sync(fs, "/src", "/dst");
  CHECK(r.ok());
  CHECK(fs.lstat("/dst/evil").uid == 0);  // root's copy ...
  CHECK(fs.lstat("/dst/evil").mode == 0755);  // ... that runs as whoever starts it
  fs.advance(10s);
  CHECK(treesync::sync(fs, "/src", "/dst").unchanged());  // the plan's mode: nothing to fix next time
}

TEST_CASE("set-ID: a set-group-ID file copied by root without preserve_group loses the bit") {
  mock_fs fs;  // acts as root
  setid_source(fs, 02755);
  CHECK(treesync::sync(fs, "/src", "/dst", treesync::preserve_owner).ok());
  CHECK(fs.lstat("/dst/evil").gid == 0);  // root's group, not the source's
  CHECK(fs.lstat("/dst/evil").mode == 0755);
}

TEST_CASE("set-ID: preserve_owner and preserve_group keep the bits, the copy being the source's owner's and group's") {
  mock_fs fs;  // acts as root
  setid_source(fs, 06755);
  CHECK(treesync::sync(fs, "/src", "/dst", treesync::preserve_owner, treesync::preserve_group).ok());
  CHECK(fs.lstat("/dst/evil").uid == user);
  CHECK(fs.lstat("/dst/evil").gid == users_group);
  CHECK(fs.lstat("/dst/evil").mode == 06755);
}

TEST_CASE("set-ID: a run that is not root copying its own file of its own group keeps both bits") {
  mock_fs fs;
  fs.mkdir("/dst", 0777);
  fs.act_as(user, {users_group});
  fs.write("/src/mine", "#!/bin/sh\nid\n", 06755);  // user:users_group, the user's own
  fs.advance(10s);
  CHECK(treesync::sync(fs, "/src", "/dst").ok());
  CHECK(fs.lstat("/dst/mine").uid == user);
  CHECK(fs.lstat("/dst/mine").gid == users_group);
  CHECK(fs.lstat("/dst/mine").mode == 06755);
}

TEST_CASE("set-ID: root's own set-group-ID file of root's group copied by root without preserve_group keeps the bit") {
  // 2755 root:root copied by root: the copy is root:root, what the source is
  mock_fs fs;  // acts as root
  fs.write("/src/tool", "t", 02755);
  fs.advance(10s);
  CHECK(treesync::sync(fs, "/src", "/dst").ok());
  CHECK(fs.lstat("/dst/tool").gid == 0);
  CHECK(fs.lstat("/dst/tool").mode == 02755);
  fs.advance(10s);
  CHECK(treesync::sync(fs, "/src", "/dst").unchanged());
}

TEST_CASE("set-ID: a user's preserve_group copy of another user's set-group-ID file of a group not the user's loses the bit") {
  // the option asks for the victim's group, the user may not give it: the copy is the user's group
  mock_fs fs;
  fs.write("/src/victims", "#!/bin/sh\nid\n", 02755);
  fs.chown("/src/victims", 5000, 5000);
  fs.mkdir("/dst", 0777);
  fs.advance(10s);
  fs.act_as(user, {users_group});
  treesync::options o;
  o.group = true;
  o.owner = true;  // ignored as a user
  CHECK(treesync::sync(fs, "/src", "/dst", o).ok());
  CHECK(fs.lstat("/dst/victims").gid == users_group);
  CHECK(fs.lstat("/dst/victims").mode == 0755);
}

TEST_CASE("set-ID: a user's preserve_group copy of a set-group-ID file of one of the user's other groups keeps the bit") {
  constexpr std::uint32_t other_group = 4444;  // a supplementary group of the user's
  mock_fs fs;
  fs.write("/src/shared", "s", 02755);
  fs.chown("/src/shared", 5000, other_group);
  fs.mkdir("/dst", 0777);
  fs.advance(10s);
  fs.act_as(user, {users_group, other_group});
  treesync::options o;
  o.group = true;
  CHECK(treesync::sync(fs, "/src", "/dst", o).ok());
  CHECK(fs.lstat("/dst/shared").gid == other_group);
  CHECK(fs.lstat("/dst/shared").mode == 02755);
}

TEST_CASE("set-ID: a user's copy without preserve_group of a set-group-ID file of the user's other group loses the bit") {
  constexpr std::uint32_t other_group = 4444;
  mock_fs fs;
  fs.mkdir("/dst", 0777);
  fs.act_as(user, {users_group, other_group});
  fs.write("/src/shared", "s", 02755);
  fs.chown("/src/shared", user, other_group);
  fs.advance(10s);
  CHECK(treesync::sync(fs, "/src", "/dst").ok());
  CHECK(fs.lstat("/dst/shared").gid == users_group);  // the user's own group, not the source's
  CHECK(fs.lstat("/dst/shared").mode == 0755);
}

TEST_CASE("set-ID: root's own set-group-ID file copied by root without preserve_group loses that bit only") {
  // /usr/bin/wall (root:tty 2755) copied as root:root 2755 would run with group root
  mock_fs fs;  // acts as root
  fs.write("/src/wall", "w", 06755);
  fs.chown("/src/wall", 0, 5);
  fs.advance(10s);
  CHECK(treesync::sync(fs, "/src", "/dst").ok());
  CHECK(fs.lstat("/dst/wall").mode == 04755);
}

TEST_CASE("set-ID: mock_fs acting as root keeps the bits of root's own file of root's group only, without preserve_owner and preserve_group") {
  mock_fs fs;  // acts as root (mock_fs::act_as: user_id() 0)
  fs.write("/src/evil", "e", 06755);
  fs.chown("/src/evil", user, users_group);
  fs.write("/src/mine", "m", 06755);  // root:root, the run's own
  fs.advance(10s);
  CHECK(treesync::sync(fs, "/src", "/dst").ok());
  CHECK(fs.lstat("/dst/evil").mode == 0755);
  CHECK(fs.lstat("/dst/mine").mode == 06755);
  CHECK(treesync::sync(fs, "/src", "/kept", treesync::preserve_owner, treesync::preserve_group).ok());
  CHECK(fs.lstat("/kept/evil").mode == 06755);
}

TEST_CASE("set-ID: a warm run takes the bit off a current copy that has it (made by an earlier run)") {
  mock_fs fs;  // acts as root
  setid_source(fs, 04755);
  fs.write("/dst/evil", "#!/bin/sh\nid\n", 04755);  // root's, with the source's size and mtime
  fs.set_mtime("/dst/evil", fs.lstat("/src/evil").mtime_ns);
  fs.advance(10s);
  const treesync::report r = treesync::sync(fs, "/src", "/dst");
  CHECK(r.ok());
  CHECK(fs.lstat("/dst/evil").mode == 0755);
}

TEST_CASE("set-ID: perms off, a root-owned set-user-ID file rewritten with another user's data loses the bit") {
  mock_fs fs;  // acts as root
  setid_source(fs, 0755);
  fs.write("/dst/evil", "the old program", 04711);  // root's own set-user-ID file
  fs.advance(10s);
  treesync::options o;
  o.perms = false;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", o);
  CHECK(r.ok());
  CHECK(fs.read("/dst/evil") == "#!/bin/sh\nid\n");
  CHECK(fs.lstat("/dst/evil").mode == 0711);  // the existing file's bits, less set-user-ID
}

TEST_CASE("set-ID: perms off, root's own set-user-ID file rewritten with root's data keeps its bits (rsync --no-perms)") {
  mock_fs fs;  // acts as root
  fs.write("/src/tool", "the new program", 0755);  // root's
  fs.write("/dst/tool", "the old program", 04711);
  fs.advance(10s);
  treesync::options o;
  o.perms = false;
  CHECK(treesync::sync(fs, "/src", "/dst", o).ok());
  CHECK(fs.read("/dst/tool") == "the new program");
  CHECK(fs.lstat("/dst/tool").mode == 04711);
}

TEST_CASE("set-ID: --chmod's own set-ID bits are asked for by name and kept") {
  mock_fs fs;  // acts as root
  setid_source(fs, 0755);
  treesync::options o;
  REQUIRE(o.chmod.parse("Fu+s"));
  CHECK(treesync::sync(fs, "/src", "/dst", o).ok());
  CHECK(fs.lstat("/dst/evil").mode == 04755);
}

TEST_CASE("set-ID: a directory keeps its set-group-ID bit without preserve_group (what new entries inherit)") {
  mock_fs fs;  // acts as root
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
  posix_setid_file(src / "evil", user, users_group, 06755);
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
  posix_setid_file(src / "evil", user, users_group, 06755);
  CHECK(treesync::sync(src, dst, treesync::preserve_owner, treesync::preserve_group).ok());
  const struct ::stat st = treesync_test::lstat_of(dst / "evil");
  CHECK(st.st_uid == user);
  CHECK(st.st_gid == users_group);
  CHECK((st.st_mode & 07777) == 06755);
}

namespace {

// 0 for a run without errors; otherwise 1, its errors on stderr (the child's).
int ok(const treesync::report& r) {
  for (const auto& e : r.errors) std::fprintf(stderr, "%s: %s\n", e.path.c_str(), e.code.message().c_str());
  return r.ok() ? 0 : 1;
}

// Runs `body` in a forked child acting as uid:gid (no supplementary groups); its exit status.
template <class F>
int as_user(std::uint32_t uid, std::uint32_t gid, F body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 || ::setresuid(uid, uid, uid) != 0) ::_exit(99);
    ::_exit(body());
  }
  REQUIRE(pid > 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("set-ID, posix: root's own 2755 root:root file copied by root keeps set-group-ID") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root");
    return;
  }
  treesync_test::temp_dir t;
  const auto src = t / "src", dst = t / "dst";
  treesync_test::make_dir(src);
  posix_setid_file(src / "tool", 0, 0, 02755);
  CHECK(treesync::sync(src, dst).ok());
  const struct ::stat st = treesync_test::lstat_of(dst / "tool");
  CHECK(st.st_gid == 0);
  CHECK((st.st_mode & 07777) == 02755);
  CHECK(treesync::sync(src, dst).unchanged());
}

TEST_CASE("set-ID, posix: in a set-group-ID DST directory root's copy takes the directory's group: the bit stays only where that is the source's") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root");
    return;
  }
  treesync_test::temp_dir t;
  const auto src = t / "src", dst = t / "dst";
  treesync_test::make_dir(src);
  treesync_test::make_dir(src / "d", 02775);
  REQUIRE(::chmod((src / "d").c_str(), 02775) == 0);
  treesync_test::make_dir(dst);
  treesync_test::make_dir(dst / "d", 02775);
  REQUIRE(::chown((dst / "d").c_str(), 0, users_group) == 0);
  REQUIRE(::chmod((dst / "d").c_str(), 02775) == 0);
  posix_setid_file(src / "d" / "roots", 0, 0, 02755);             // the copy's group: the directory's
  posix_setid_file(src / "d" / "groups", 0, users_group, 02755);   // the copy's group: its own
  CHECK(treesync::sync(src, dst).ok());
  const struct ::stat roots = treesync_test::lstat_of(dst / "d" / "roots");
  CHECK(roots.st_gid == users_group);
  CHECK((roots.st_mode & 07777) == 0755);
  const struct ::stat groups = treesync_test::lstat_of(dst / "d" / "groups");
  CHECK(groups.st_gid == users_group);
  CHECK((groups.st_mode & 07777) == 02755);
}

TEST_CASE("set-ID, posix: below a directory root made set-group-ID, a copy has the group root gave that directory") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root");
    return;
  }
  treesync_test::temp_dir t;
  const auto src = t / "src", dst = t / "dst";
  treesync_test::make_dir(src);
  treesync_test::make_dir(src / "d", 02775);
  REQUIRE(::chown((src / "d").c_str(), 0, users_group) == 0);
  REQUIRE(::chmod((src / "d").c_str(), 02775) == 0);
  posix_setid_file(src / "d" / "roots", 0, 0, 02755);
  posix_setid_file(src / "d" / "groups", 0, users_group, 02755);
  CHECK(treesync::sync(src, dst).ok());  // d made by root (group 0), set-group-ID while filled
  CHECK((treesync_test::lstat_of(dst / "d" / "roots").st_mode & 07777) == 02755);
  CHECK(treesync_test::lstat_of(dst / "d" / "groups").st_gid == 0);
  CHECK((treesync_test::lstat_of(dst / "d" / "groups").st_mode & 07777) == 0755);
}

TEST_CASE("set-ID, posix: a user's preserve_group copy of another user's 2755 file keeps neither the victim's group nor the bit") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root (a victim's file, a forked user)");
    return;
  }
  treesync_test::temp_dir t;
  const auto src = t / "src", dst = t / "dst";
  treesync_test::make_dir(src, 0755);
  treesync_test::make_dir(dst, 0755);
  REQUIRE(::chown(dst.c_str(), 65534, 65534) == 0);  // the user's own DST
  REQUIRE(::chmod(t.path().c_str(), 0755) == 0);
  posix_setid_file(src / "victims", user, users_group, 02755);
  const int rc = as_user(65534, 65534, [&] {
    treesync::options o;
    o.group = true;
    o.owner = true;
    return ok(treesync::sync(src, dst, o));
  });
  REQUIRE(rc == 0);
  const struct ::stat st = treesync_test::lstat_of(dst / "victims");
  CHECK(st.st_uid == 65534);
  CHECK(st.st_gid == 65534);
  CHECK((st.st_mode & 07777) == 0755);
}

TEST_CASE("set-ID, posix: a user's copy of its own 2755 file of its own group keeps the bit") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root (a forked user)");
    return;
  }
  treesync_test::temp_dir t;
  const auto src = t / "src", dst = t / "dst";
  treesync_test::make_dir(src, 0755);
  treesync_test::make_dir(dst, 0755);
  REQUIRE(::chown(dst.c_str(), 65534, 65534) == 0);  // the user's own DST
  REQUIRE(::chmod(t.path().c_str(), 0755) == 0);
  posix_setid_file(src / "mine", 65534, 65534, 02755);
  REQUIRE(as_user(65534, 65534, [&] { return ok(treesync::sync(src, dst)); }) == 0);
  const struct ::stat st = treesync_test::lstat_of(dst / "mine");
  CHECK(st.st_gid == 65534);
  CHECK((st.st_mode & 07777) == 02755);
}
