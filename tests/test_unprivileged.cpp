// A run as a user other than root (issue 32, item 1): preserve_owner, preserve_group, specials,
// hard_links and read-only directories mean what rsync -o, -g, -D, -H mean run unprivileged.
// The mock acts as the user (mock_fs::act_as): what it makes is the user's, a chown to another
// user or to a group the user is not in fails (EPERM), a device cannot be made, a directory
// without write permission cannot be changed (EACCES).
#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include <doctest/doctest.h>

#include <string>

namespace {
using treesync::file_type;
using treesync::mock_fs;
using op = treesync::mock_fs::op;
using namespace std::chrono_literals;

constexpr std::uint32_t user = 1000, own_group = 1000, extra_group = 100, foreign_group = 200;

// A source whose entries have owners and groups of all kinds, and a mock acting as `user`
// (groups own_group and extra_group).
void owned_tree(mock_fs& fs) {
  fs.write("/src/mine.txt", "mine");
  fs.write("/src/extra.txt", "extra");
  fs.write("/src/foreign.txt", "foreign");
  fs.mkdir("/src/sub");
  fs.write("/src/sub/f", "f");
  fs.chown("/src", user, own_group);
  fs.chown("/src/mine.txt", user, own_group);
  fs.chown("/src/extra.txt", user, extra_group);
  fs.chown("/src/foreign.txt", 0, foreign_group);  // root's, of a group the user is not in
  fs.chown("/src/sub", 4321, foreign_group);
  fs.chown("/src/sub/f", 4321, extra_group);
  fs.mkdir("/home");
  fs.chown("/home", user, own_group);
  fs.advance(10s);
  fs.act_as(user, {own_group, extra_group});
}
}  // namespace

TEST_CASE("as a user, preserve_group gives an entry the source's group only where the user is in it, silently") {
  mock_fs fs;
  owned_tree(fs);
  const auto r = treesync::sync(fs, "/src", "/home/dst", treesync::preserve_group);
  CHECK(r.ok());
  CHECK(r.errors.empty());
  CHECK(r.created == 1 + 1 + 4);  // the root, sub, four files
  CHECK(fs.lstat("/home/dst/mine.txt").gid == own_group);
  CHECK(fs.lstat("/home/dst/extra.txt").gid == extra_group);
  CHECK(fs.lstat("/home/dst/sub/f").gid == extra_group);
  // not the user's to give: the group the user's new entries get
  CHECK(fs.lstat("/home/dst/foreign.txt").gid == own_group);
  CHECK(fs.lstat("/home/dst/sub").gid == own_group);
}

TEST_CASE("as a user, preserve_owner changes no owner and fails nothing") {
  mock_fs fs;
  owned_tree(fs);
  const auto r = treesync::sync(fs, "/src", "/home/dst", treesync::preserve_owner, treesync::preserve_group);
  CHECK(r.ok());
  CHECK(r.errors.empty());
  CHECK(fs.lstat("/home/dst/foreign.txt").uid == user);
  CHECK(fs.lstat("/home/dst/sub").uid == user);
  CHECK(fs.lstat("/home/dst/sub/f").uid == user);
  CHECK(fs.lstat("/home/dst/sub/f").gid == extra_group);
}

TEST_CASE("as a user, a second run with preserve_owner and preserve_group over a complete copy changes nothing") {
  mock_fs fs;
  owned_tree(fs);
  REQUIRE(treesync::sync(fs, "/src", "/home/dst", treesync::preserve_owner, treesync::preserve_group).ok());
  fs.advance(10s);
  fs.reset_counters();
  // the owners and the foreign groups still differ from the source's: not the user's to change,
  // so neither rewritten nor reported (rsync: no 'o', no 'g')
  const auto r = treesync::sync(fs, "/src", "/home/dst", treesync::preserve_owner, treesync::preserve_group);
  CHECK(r.unchanged());
  CHECK(fs.ops().writes() == 0);
  CHECK(fs.ops()[op::chown] == 0);
}

TEST_CASE("as a user, a destination file of a group the user may give is regrouped, one of a foreign group is left alone") {
  mock_fs fs;
  owned_tree(fs);
  REQUIRE(treesync::sync(fs, "/src", "/home/dst", treesync::preserve_group).ok());
  fs.act_as(0);
  fs.chown("/home/dst/extra.txt", user, own_group);      // the source's (extra_group) can be given back
  fs.chown("/home/dst/mine.txt", user, foreign_group);   // the source's (own_group) too
  fs.act_as(user, {own_group, extra_group});
  fs.advance(10s);
  const auto r = treesync::sync(fs, "/src", "/home/dst", treesync::preserve_group);
  CHECK(r.ok());
  CHECK(r.meta_updated == 2);
  CHECK(fs.lstat("/home/dst/extra.txt").gid == extra_group);
  CHECK(fs.lstat("/home/dst/mine.txt").gid == own_group);
  CHECK(fs.lstat("/home/dst/foreign.txt").gid == own_group);
}

TEST_CASE("as a user, specials makes FIFOs and skips device nodes (skipped, not failed)") {
  mock_fs fs;
  fs.mkdir("/src");
  fs.fifo("/src/pipe");
  fs.device("/src/null", file_type::character, 0x103);
  fs.mkdir("/home");
  fs.chown("/home", user, own_group);
  fs.advance(10s);
  fs.act_as(user);
  const auto r = treesync::sync(fs, "/src", "/home/dst", treesync::specials);
  CHECK(r.ok());
  CHECK(r.errors.empty());
  CHECK(r.skipped == 1);
  CHECK(fs.lstat("/home/dst/pipe").type == file_type::fifo);
  CHECK(fs.ops()[op::mknod] == 1);
  CHECK_FALSE(fs.exists("/home/dst/null"));
}

TEST_CASE("as root (the mock's default), specials makes device nodes") {
  mock_fs fs;
  fs.mkdir("/src");
  fs.device("/src/null", file_type::character, 0x103);
  fs.advance(10s);
  const auto r = treesync::sync(fs, "/src", "/dst", treesync::specials);
  CHECK(r.ok());
  CHECK(fs.lstat("/dst/null").type == file_type::character);
}

TEST_CASE("as a user, a read-only source directory is filled and gets its mode last") {
  mock_fs fs;
  fs.write("/src/ro/inner/f", "x");
  fs.chmod("/src/ro/inner", 0555);
  fs.chmod("/src/ro", 0555);
  fs.mkdir("/home");
  fs.chown("/home", user, own_group);
  fs.advance(10s);
  fs.act_as(user);
  auto r = treesync::sync(fs, "/src", "/home/dst");
  CHECK(r.ok());
  CHECK(fs.read("/home/dst/ro/inner/f") == "x");
  CHECK(fs.lstat("/home/dst/ro").mode == 0555);
  CHECK(fs.lstat("/home/dst/ro/inner").mode == 0555);
  // a new file in the read-only directories: opened up for it, the mode back after
  fs.act_as(0);
  fs.write("/src/ro/inner/g", "y");
  fs.advance(10s);
  fs.act_as(user);
  r = treesync::sync(fs, "/src", "/home/dst");
  CHECK(r.ok());
  CHECK(fs.read("/home/dst/ro/inner/g") == "y");
  CHECK(fs.lstat("/home/dst/ro/inner").mode == 0555);
}

TEST_CASE("as a user, hard_links links into a read-only directory and gives it its mode back") {
  mock_fs fs;
  fs.write("/src/a/one", "shared");
  fs.hard_link("/src/a/one", "/src/ro/two");
  fs.chmod("/src/ro", 0555);
  fs.mkdir("/home");
  fs.chown("/home", user, own_group);
  fs.advance(10s);
  fs.act_as(user);
  const auto r = treesync::sync(fs, "/src", "/home/dst", treesync::hard_links);
  CHECK(r.ok());
  CHECK(r.errors.empty());
  CHECK(fs.lstat("/home/dst/ro/two").ino == fs.lstat("/home/dst/a/one").ino);
  CHECK(fs.lstat("/home/dst/ro").mode == 0555);
  CHECK(fs.lstat("/home/dst/ro").mtime_ns == fs.lstat("/src/ro").mtime_ns);
}
