// tests/test_trusted_path.cpp - issue 33 item 7: treesync::open_trusted(), rsync 3.5's walk of an
// operator-named path (the CLI's DST, --backup-dir, --state, --exclude-from files): a symbolic link
// is followed only when owned by root or the effective user.  Real filesystem, in a temp_dir; the
// cases with another user's link need root (they plant a link owned by uid 65534) and say so
// when skipped.
#include <doctest/doctest.h>

#include <treesync/treesync.hpp>

#include "support/temp_dir.hpp"

#include <fstream>
#include <functional>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

constexpr uid_t other_user = 65534;

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// A symlink `link` -> `target` owned by `owner` (lchown: the link itself).
void link_owned(const std::filesystem::path& target, const std::filesystem::path& link, uid_t owner) {
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  REQUIRE(::lchown(link.c_str(), owner, owner) == 0);
}

std::string read_all(int fd) {
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  return text;
}

bool root() {
  if (::geteuid() == 0) return true;
  MESSAGE("skipped: needs root to plant a symlink owned by another user");
  return false;
}

}  // namespace

TEST_CASE("open_trusted follows a symlink owned by the caller, at the leaf and in the middle") {
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "real" / "d");
  write_file(t / "real" / "d" / "f", "content");
  link_owned(t / "real", t / "mid", ::geteuid());
  link_owned("d/f", t / "real" / "leaf", ::geteuid());
  const treesync::trusted_open_result r = treesync::open_trusted((t / "mid" / "leaf").string(), O_RDONLY | O_CLOEXEC);
  REQUIRE(r.fd >= 0);
  CHECK_FALSE(r.refused());
  CHECK(read_all(r.fd) == "content");
  ::close(r.fd);
}

TEST_CASE("open_trusted resolves a relative path with '.' and '..' and a trailing slash") {
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "a" / "b");
  std::filesystem::create_directories(t / "c");
  const std::string rel = (t / "a" / "b").string() + "/./../../c/";
  const treesync::trusted_open_result r = treesync::open_trusted(rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(r.fd >= 0);
  struct stat got, want;
  REQUIRE(::fstat(r.fd, &got) == 0);
  REQUIRE(::stat((t / "c").c_str(), &want) == 0);
  CHECK(got.st_ino == want.st_ino);
  ::close(r.fd);
}

TEST_CASE("meets_untrusted_symlink answers no for a path missing from some component on") {
  treesync_test::temp_dir t;
  treesync::trusted_open_result r;
  CHECK_FALSE(treesync::meets_untrusted_symlink((t / "missing" / "deeper").string(), r));
  CHECK(r.error == ENOENT);
}

TEST_CASE("open_trusted stops a symlink cycle with ELOOP without naming an untrusted link") {
  treesync_test::temp_dir t;
  link_owned(t / "b", t / "a", ::geteuid());
  link_owned(t / "a", t / "b", ::geteuid());
  const treesync::trusted_open_result r = treesync::open_trusted((t / "a").string(), O_RDONLY | O_CLOEXEC);
  CHECK(r.fd < 0);
  CHECK(r.error == ELOOP);
  CHECK_FALSE(r.refused());
}

TEST_CASE("open_trusted refuses another user's symlink at the last component, canary unread") {
  if (!root()) return;
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "outside");
  write_file(t / "outside" / "secret", "canary");
  link_owned(t / "outside" / "secret", t / "plant", other_user);
  const treesync::trusted_open_result r = treesync::open_trusted((t / "plant").string(), O_RDONLY | O_CLOEXEC);
  CHECK(r.fd < 0);
  CHECK(r.error == ELOOP);
  CHECK(r.refused());
  CHECK(r.untrusted == (t / "plant").string());
  CHECK(r.owner == other_user);
}

TEST_CASE("open_trusted refuses another user's symlink at a parent component") {
  if (!root()) return;
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "outside");
  write_file(t / "outside" / "rules", "canary");
  link_owned(t / "outside", t / "parent", other_user);
  treesync::trusted_open_result r;
  CHECK(treesync::meets_untrusted_symlink((t / "parent" / "rules").string(), r));
  CHECK(r.untrusted == (t / "parent").string());
  CHECK(treesync::meets_untrusted_symlink((t / "parent" / "missing").string(), r));  // refused before the miss
}

TEST_CASE("open_trusted refuses another user's symlink reached through a root-owned link's target") {
  if (!root()) return;
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "admin" / "real");
  std::filesystem::create_directories(t / "outside");
  link_owned(t / "outside", t / "admin" / "planted", other_user);
  link_owned(t / "admin", t / "backup", 0);  // the administrator's link: followed
  treesync::trusted_open_result r;
  CHECK_FALSE(treesync::meets_untrusted_symlink((t / "backup" / "real").string(), r));
  CHECK(treesync::meets_untrusted_symlink((t / "backup" / "planted" / "x").string(), r));
  CHECK(r.untrusted == (t / "admin" / "planted").string());
}

// ---- issue 45 item 1: the directory the walk checked is the one the run uses --------------------
// Each case walks DST as the CLI does (open_trusted_dir), then exchanges a component of its path
// for a link to a victim directory at the exact point between the walk and the run, then runs
// sync() on a posix_fs pinned to what the walk reached: the victim must be untouched.

namespace {

// t/src with one file; t/p (DST's parent) and t/victim with a canary
void pin_tree(const treesync_test::temp_dir& t) {
  std::filesystem::create_directories(t / "src");
  std::filesystem::create_directories(t / "p");
  std::filesystem::create_directories(t / "victim");
  write_file(t / "src" / "a", "a\n");
  write_file(t / "victim" / "canary", "c\n");
}

// DST's parent exchanged for a link (the caller's own: the rule would follow it) to the victim
void exchange_parent(const treesync_test::temp_dir& t) {
  std::filesystem::rename(t / "p", t / "p-checked");
  link_owned(t / "victim", t / "p", ::geteuid());
}

}  // namespace

TEST_CASE("open_trusted_dir + pin_root: an existing DST is run in as checked though its parent became a link since") {
  treesync_test::temp_dir t;
  pin_tree(t);
  std::filesystem::create_directories(t / "p" / "dst");
  const std::filesystem::path dst = t / "p" / "dst";
  const treesync::trusted_open_result r = treesync::open_trusted_dir(dst.string());
  REQUIRE(r.fd >= 0);
  CHECK(r.parent < 0);
  treesync::posix_fs fs;
  fs.pin_root(dst, r.fd);
  ::close(r.fd);
  std::filesystem::create_directories(t / "victim" / "dst");
  write_file(t / "victim" / "dst" / "precious", "p\n");
  exchange_parent(t);
  const treesync::report rep = treesync::sync(fs, t / "src", dst, treesync::deletion::extraneous);
  CHECK(rep.errors.empty());
  CHECK(std::filesystem::exists(t / "p-checked" / "dst" / "a"));
  CHECK(std::filesystem::exists(t / "victim" / "dst" / "precious"));
  CHECK_FALSE(std::filesystem::exists(t / "victim" / "dst" / "a"));
}

TEST_CASE("open_trusted_dir of a missing DST keeps its parent; pin_missing_root makes DST there though the parent became a link since") {
  treesync_test::temp_dir t;
  pin_tree(t);
  const std::filesystem::path dst = t / "p" / "dst";
  const treesync::trusted_open_result r = treesync::open_trusted_dir(dst.string());
  REQUIRE(r.missing_leaf());
  CHECK(r.error == ENOENT);
  CHECK(r.leaf == "dst");
  treesync::posix_fs fs;
  fs.pin_missing_root(dst, r.parent);
  ::close(r.parent);
  exchange_parent(t);
  std::error_code ec;
  const treesync::report rep = treesync::sync(fs, t / "src", dst, treesync::options{}, ec);
  CHECK_FALSE(ec);
  CHECK(rep.errors.empty());
  CHECK(std::filesystem::exists(t / "p-checked" / "dst" / "a"));
  CHECK_FALSE(std::filesystem::exists(t / "victim" / "dst"));
  CHECK(std::filesystem::exists(t / "victim" / "canary"));
}

TEST_CASE("pin_missing_root: a link put at DST's name after the walk is refused, nothing written through it") {
  treesync_test::temp_dir t;
  pin_tree(t);
  const std::filesystem::path dst = t / "p" / "dst";
  const treesync::trusted_open_result r = treesync::open_trusted_dir(dst.string());
  REQUIRE(r.missing_leaf());
  treesync::posix_fs fs;
  fs.pin_missing_root(dst, r.parent);
  ::close(r.parent);
  link_owned(t / "victim", dst, ::geteuid());  // DST's name now a link to the victim
  std::error_code ec;
  const treesync::report rep = treesync::sync(fs, t / "src", dst, treesync::deletion::extraneous, ec);
  CHECK(ec == std::errc::too_many_symbolic_link_levels);
  CHECK_FALSE(std::filesystem::exists(t / "victim" / "a"));
  CHECK(std::filesystem::exists(t / "victim" / "canary"));
}

TEST_CASE("pin_missing_root: a link put at DST's name right after the run made DST is never opened, nothing written through it") {
  // open_root's O_NOFOLLOW on the pinned name: the exchange comes after make_root, past the stat
  // that refuses a link found at the name before.  Any user.
  struct made_then_exchanged : treesync::posix_fs {
    std::function<void()> after_make_root;
    void make_root(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec) const {
      posix_fs::make_root(p, mode, ec);
      if (!ec && after_make_root) after_make_root();
    }
  };
  treesync_test::temp_dir t;
  pin_tree(t);
  const std::filesystem::path dst = t / "p" / "dst";
  const treesync::trusted_open_result r = treesync::open_trusted_dir(dst.string());
  REQUIRE(r.missing_leaf());
  made_then_exchanged fs;
  fs.pin_missing_root(dst, r.parent);
  ::close(r.parent);
  bool swapped = false;
  fs.after_make_root = [&] {
    swapped = true;
    std::filesystem::rename(dst, t / "made");
    link_owned(t / "victim", dst, ::geteuid());  // DST's name now a link to the victim
  };
  std::error_code ec;
  const treesync::report rep = treesync::sync(fs, t / "src", dst, treesync::deletion::extraneous, ec);
  REQUIRE(swapped);
  CHECK((ec || !rep.errors.empty()));
  CHECK_FALSE(std::filesystem::exists(t / "victim" / "a"));
  CHECK(std::filesystem::exists(t / "victim" / "canary"));
}

TEST_CASE("open_trusted_dir keeps no parent for a missing name reached through a link (a dangling DST link)") {
  treesync_test::temp_dir t;
  std::filesystem::create_directories(t / "p");
  link_owned(t / "p" / "gone", t / "dst", ::geteuid());
  const treesync::trusted_open_result r = treesync::open_trusted_dir((t / "dst").string());
  CHECK(r.fd < 0);
  CHECK(r.parent < 0);
  CHECK(r.error == ENOENT);
}

TEST_CASE("open_trusted_dir keeps no parent when a component above the last one is missing") {
  treesync_test::temp_dir t;
  const treesync::trusted_open_result r = treesync::open_trusted_dir((t / "none" / "dst").string());
  CHECK(r.fd < 0);
  CHECK(r.parent < 0);
  CHECK(r.error == ENOENT);
}

TEST_CASE("posix_fs pins several roots: the state file's directory as walked keeps the state file though its name became a link since") {
  treesync_test::temp_dir t;
  pin_tree(t);
  std::filesystem::create_directories(t / "p" / "dst");
  std::filesystem::create_directories(t / "states");
  const std::filesystem::path dst = t / "p" / "dst";
  const treesync::trusted_open_result d = treesync::open_trusted_dir(dst.string());
  const treesync::trusted_open_result s = treesync::open_trusted_dir((t / "states").string());
  REQUIRE(d.fd >= 0);
  REQUIRE(s.fd >= 0);
  treesync::posix_fs fs;
  fs.pin_root(dst, d.fd);
  fs.pin_root(t / "states", s.fd);
  ::close(d.fd);
  ::close(s.fd);
  std::filesystem::rename(t / "states", t / "states-checked");  // the state directory exchanged for a link
  link_owned(t / "victim", t / "states", ::geteuid());
  exchange_parent(t);  // and DST's parent too: both pins hold
  treesync::options o;
  o.state = t / "states" / "run.state";
  std::error_code ec;
  const treesync::report rep = treesync::sync(fs, t / "src", dst, o, ec);
  CHECK_FALSE(ec);
  CHECK(rep.errors.empty());
  CHECK(std::filesystem::exists(t / "states-checked" / "run.state"));
  CHECK_FALSE(std::filesystem::exists(t / "victim" / "run.state"));
  CHECK(std::filesystem::exists(t / "p-checked" / "dst" / "a"));
  CHECK_FALSE(std::filesystem::exists(t / "victim" / "dst"));
}

TEST_CASE("pin_unreachable: a DST the walk could not reach refuses the run with the walk's error though the path leads somewhere since") {
  treesync_test::temp_dir t;
  pin_tree(t);
  const std::filesystem::path dst = t / "gone" / "dst";  // DST's parent missing at the walk
  const treesync::trusted_open_result r = treesync::open_trusted_dir(dst.string());
  REQUIRE(r.fd < 0);
  REQUIRE_FALSE(r.missing_leaf());
  CHECK(r.error == ENOENT);
  treesync::posix_fs fs;
  fs.pin_unreachable(dst, r.error);
  link_owned(t / "victim", t / "gone", ::geteuid());  // the parent appears, as a link to the victim
  std::error_code ec;
  const treesync::report rep = treesync::sync(fs, t / "src", dst, treesync::options{}, ec);
  CHECK(ec == treesync::errc::destination_parent_missing);
  CHECK_FALSE(std::filesystem::exists(t / "victim" / "dst"));
}
