// tests/test_create_then_set.cpp - issue 23 items 4 and 6, issue 24 item 2, issue 33 item 5.
//
// Create-then-set: what the run makes (a special file, a directory) gets its owner and mode only
// on the object it made.  The attacker acts from a filesystem wrapper at a chosen point (right
// after the mknod, the mkdir or the symlink, or before an existing entry is opened or restamped), as
// the owner of the destination can; a
// canary tree outside the destination is compared before and after.  Then: a file whose content
// is shorter than its stat size, the leftover purge, a cancel during a copy, and the side each
// failure is reported on (mock_fs fault injection; real tmpfs and read-only mounts as root).
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include "support/canary.hpp"
#include "support/report_checks.hpp"
#include "support/temp_dir.hpp"

#include <atomic>
#include <cstring>
#include <functional>
#include <string>

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace treesync_test;
using op = treesync::mock_fs::op;

constexpr uid_t attacker_uid = 4242;

bool is_root() { return ::geteuid() == 0; }

// posix_fs with the attacker's move right after a make_special / make_dir / at a copy's start.
struct hooked_fs : treesync::posix_fs {
  std::function<void(dir_handle&, const std::string&)> after_mknod, after_mkdir, before_copy, after_symlink, before_touch,
      before_open_dir, before_compare;
  bool same_content(dir_handle& a, const std::string& an, bool follow, dir_handle& b, const std::string& bn,
                    std::error_code& ec) const {
    if (before_compare) before_compare(b, bn);
    return posix_fs::same_content(a, an, follow, b, bn, ec);
  }
  dir_handle open_dir(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const {
    if (before_open_dir) before_open_dir(d, name);
    return posix_fs::open_dir(d, name, follow, ec);
  }
  void make_special(dir_handle& d, const std::string& name, const treesync::stat_info& st, std::error_code& ec) const {
    posix_fs::make_special(d, name, st, ec);
    if (!ec && after_mknod) after_mknod(d, name);
  }
  void make_dir(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) const {
    posix_fs::make_dir(d, name, mode, ec);
    if (!ec && after_mkdir) after_mkdir(d, name);
  }
  void make_symlink(dir_handle& d, const std::string& name, const std::string& target, std::error_code& ec) const {
    posix_fs::make_symlink(d, name, target, ec);
    if (!ec && after_symlink) after_symlink(d, name);
  }
  // an existing entry's metadata change, by whichever call the engine makes it
  void set_mtime(dir_handle& d, const std::string& name, std::int64_t ns, std::error_code& ec) const {
    if (before_touch && name != ".") before_touch(d, name);
    posix_fs::set_mtime(d, name, ns, ec);
  }
  void touch_seen(dir_handle& d, const std::string& name, const treesync::stat_info& seen, bool mtime, std::int64_t ns,
                  bool mode, std::uint32_t bits, std::error_code& ec) const {
    if (before_touch) before_touch(d, name);
    posix_fs::touch_seen(d, name, seen, mtime, ns, mode, bits, ec);
  }
  treesync::copy_result copy_file(dir_handle& sd, const std::string& name, dir_handle& dd, const std::string& dst_name,
                                  const treesync::stat_info& expected, const treesync::copy_options& opt,
                                  std::error_code& ec) const {
    if (before_copy) before_copy(dd, dst_name);
    return posix_fs::copy_file(sd, name, dd, dst_name, expected, opt, ec);
  }
};

struct arena {
  temp_dir t;
  fs::path src = t / "src", dst = t / "dst", outside = t / "outside";
  canary_snapshot before;
  arena() {
    make_dir(src);
    make_dir(dst);
    make_dir(outside);
    plant_canary(outside);
  }
  void seal() { before = snapshot(outside); }
  std::string canary_changes() const { return changes(before, snapshot(outside)); }
};

// The entry of `dir` (not below) with inode `ino`, if any.
std::optional<struct ::stat> find_inode(const fs::path& dir, ino_t ino) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const struct ::stat st = lstat_of(e.path());
    if (st.st_ino == ino) return st;
  }
  return std::nullopt;
}

bool has_temp(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().rfind(".treesync-tmp-", 0) == 0) return true;
  return false;
}

const treesync::entry_error* error_at(const treesync::report& r, const std::string& path) {
  for (const auto& e : r.errors)
    if (e.path == path) return &e;
  return nullptr;
}

// A private mount for the test's directory (tmpfs of `size`, or a read-only bind of `from`);
// unmounted on destruction.  ok() is false where mounting is not allowed.
struct scoped_mount {
  fs::path at;
  bool ok = false;
  scoped_mount(const fs::path& where, const char* size) : at(where) {
    const std::string opts = std::string("size=") + size;
    ok = ::mount("none", at.c_str(), "tmpfs", 0, opts.c_str()) == 0;
  }
  scoped_mount(const fs::path& from, const fs::path& where) : at(where) {
    ok = ::mount(from.c_str(), at.c_str(), nullptr, MS_BIND, nullptr) == 0;
    if (ok && ::mount(nullptr, at.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
      ::umount2(at.c_str(), MNT_DETACH);
      ok = false;
    }
  }
  ~scoped_mount() {
    if (ok) ::umount2(at.c_str(), MNT_DETACH);
  }
  scoped_mount(const scoped_mount&) = delete;
  scoped_mount& operator=(const scoped_mount&) = delete;
};

}  // namespace

// ---- issue 23 item 4: create-then-set on the object made -------------------------------------

TEST_CASE("create-then-set: a name swapped in between mknod and the owner/mode calls never gets root's owner or set-ID bits") {
  if (!is_root()) {
    MESSAGE("skipped: needs root (a root-owned set-uid FIFO in the source, an attacker of another uid)");
    return;
  }
  arena a;
  make_fifo(a.src / "pipe", 0600);
  REQUIRE(::chmod((a.src / "pipe").c_str(), 04755) == 0);
  // the attacker's own program: one link, owned by the attacker
  const fs::path prog = a.t / "prog";
  write_file(prog, "#!/bin/sh\nid\n", 0755);
  REQUIRE(::chown(prog.c_str(), attacker_uid, attacker_uid) == 0);
  const ino_t prog_ino = lstat_of(prog).st_ino;
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.after_mknod = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped) return;
    swapped = true;
    REQUIRE(::rename(prog.c_str(), (a.dst / name).c_str()) == 0);
  };
  const treesync::report r =
      treesync::sync(hfs, a.src, a.dst, treesync::specials, treesync::preserve_owner, treesync::preserve_group);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, prog_ino);
  REQUIRE(st);
  CHECK(st->st_uid == attacker_uid);
  CHECK((st->st_mode & (S_ISUID | S_ISGID)) == 0);
  CHECK((st->st_mode & 07777) == 0755);
  CHECK(has_error(r, "pipe"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: a FIFO made as root gets its owner and set-ID mode on the node itself") {
  if (!is_root()) {
    MESSAGE("skipped: needs root (chown to another uid)");
    return;
  }
  arena a;
  make_fifo(a.src / "pipe", 0600);
  REQUIRE(::chown((a.src / "pipe").c_str(), attacker_uid, attacker_uid) == 0);
  REQUIRE(::chmod((a.src / "pipe").c_str(), 02750) == 0);
  const treesync::report r =
      treesync::sync(a.src, a.dst, treesync::specials, treesync::preserve_owner, treesync::preserve_group);
  CHECK(r.ok());
  const struct ::stat st = lstat_of(a.dst / "pipe");
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(st.st_uid == attacker_uid);
  CHECK(st.st_gid == attacker_uid);
  CHECK((st.st_mode & 07777) == 02750);
  CHECK(mtime_ns_of(st) == mtime_ns_of(lstat_of(a.src / "pipe")));
}

TEST_CASE("create-then-set: a directory swapped in between mkdir and open is never filled, chowned or chmodded") {
  if (!is_root()) {
    MESSAGE("skipped: needs root (an attacker's directory of another uid)");
    return;
  }
  arena a;
  make_dir(a.src / "sub", 0755);
  write_file(a.src / "sub" / "f", "data\n", 04755);
  REQUIRE(::chmod((a.src / "sub").c_str(), 02755) == 0);
  const fs::path theirs = a.t / "theirs";
  make_dir(theirs, 0777);
  REQUIRE(::chmod(theirs.c_str(), 0777) == 0);
  REQUIRE(::chown(theirs.c_str(), attacker_uid, attacker_uid) == 0);
  const ino_t their_ino = lstat_of(theirs).st_ino;
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.after_mkdir = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped) return;
    swapped = true;
    REQUIRE(::rename(theirs.c_str(), (a.dst / name).c_str()) == 0);  // over the empty directory just made
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst, treesync::preserve_owner, treesync::preserve_group);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, their_ino);
  REQUIRE(st);
  CHECK(st->st_uid == attacker_uid);
  CHECK((st->st_mode & 07777) == 0777);
  CHECK(st->st_nlink == 2);  // nothing made inside it
  CHECK(!r.ok());
  CHECK(a.canary_changes() == "");
}

// ---- issue 33 item 5: a link's owner and mtime on the link made -------------------------------

namespace {

constexpr uid_t nobody = 65534;

// Exchanges two names of one filesystem (renameat2 RENAME_EXCHANGE), as the owner of both
// directories can.
void exchange(const fs::path& a, const fs::path& b) {
  const long rc = ::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), 2u /* RENAME_EXCHANGE */);
  const std::string why = rc == 0 ? "" : std::strerror(errno);
  INFO("renameat2 " << a << " " << b << ": " << why);
  REQUIRE(rc == 0);
}

// The attacker's own file, outside the destination: nobody's, mode 0644, an old mtime.
struct their_file {
  fs::path path;
  ino_t ino;
  std::int64_t mtime;
  explicit their_file(const fs::path& p) : path(p) {
    write_file(p, "mine\n", 0644);
    REQUIRE(::chown(p.c_str(), nobody, nobody) == 0);
    const struct timespec ts[2] = {{0, UTIME_OMIT}, {1000000, 0}};
    REQUIRE(::utimensat(AT_FDCWD, p.c_str(), ts, 0) == 0);
    const struct ::stat st = lstat_of(p);
    ino = st.st_ino;
    mtime = mtime_ns_of(st);
  }
};

}  // namespace

TEST_CASE("create-then-set: a file exchanged for the temporary link before its owner is set is never chowned or restamped") {
  if (!is_root()) {
    MESSAGE("skipped: needs root (chown of a link, an attacker file of uid 65534)");
    return;
  }
  arena a;
  make_symlink("target-of-the-link", a.src / "lnk");  // root's, as the source link of the issue
  const fs::path side = a.t / "attacker";
  make_dir(side);
  const their_file mine(side / "mine");
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.after_symlink = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped) return;
    swapped = true;
    exchange(a.dst / name, mine.path);  // the temporary link goes out, the attacker's file comes in
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst, treesync::links::preserve, treesync::preserve_owner,
                                            treesync::preserve_group);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, mine.ino);
  REQUIRE(st);
  CHECK(st->st_uid == nobody);
  CHECK(st->st_gid == nobody);
  CHECK(mtime_ns_of(*st) == mine.mtime);
  CHECK(S_ISREG(st->st_mode));
  CHECK(has_error(r, "lnk"));
  CHECK(!fs::exists(a.dst / "lnk"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: a link exchanged for another of the same user and target length is never restamped") {
  // settle_link's last check: the owner, the link count and the target's length all match; only
  // the target read through the descriptor tells the two links apart.  Any user (mtime only).
  arena a;
  make_symlink("target-A", a.src / "lnk");
  const struct timespec ts[2] = {{0, UTIME_OMIT}, {200000000, 7}};
  REQUIRE(::utimensat(AT_FDCWD, (a.src / "lnk").c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
  const fs::path side = a.t / "side";
  make_dir(side);
  make_symlink("target-B", side / "other");  // this process's, one link, a target of the same length
  const struct ::stat other = lstat_of(side / "other");
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.after_symlink = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped) return;
    swapped = true;
    exchange(a.dst / name, side / "other");  // the link just made goes out, the other comes in
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst, treesync::links::preserve);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, other.st_ino);
  REQUIRE(st);
  CHECK(S_ISLNK(st->st_mode));
  CHECK(mtime_ns_of(*st) == mtime_ns_of(other));
  CHECK(mtime_ns_of(*st) != mtime_ns_of(lstat_of(a.src / "lnk")));
  CHECK(has_error(r, "lnk"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: a link made as root gets its owner, group and mtime on the link itself") {
  if (!is_root()) {
    MESSAGE("skipped: needs root (chown of a link to another uid)");
    return;
  }
  arena a;
  make_symlink("../elsewhere", a.src / "lnk");
  REQUIRE(::lchown((a.src / "lnk").c_str(), attacker_uid, attacker_uid + 1) == 0);
  const struct timespec ts[2] = {{0, UTIME_OMIT}, {123456789, 42}};
  REQUIRE(::utimensat(AT_FDCWD, (a.src / "lnk").c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
  const treesync::report r =
      treesync::sync(a.src, a.dst, treesync::links::preserve, treesync::preserve_owner, treesync::preserve_group);
  CHECK(r.ok());
  const struct ::stat st = lstat_of(a.dst / "lnk");
  REQUIRE(S_ISLNK(st.st_mode));
  CHECK(fs::read_symlink(a.dst / "lnk") == "../elsewhere");
  CHECK(st.st_uid == attacker_uid);
  CHECK(st.st_gid == attacker_uid + 1);
  CHECK(mtime_ns_of(st) == mtime_ns_of(lstat_of(a.src / "lnk")));
}

TEST_CASE("create-then-set: a file exchanged for an existing link whose mtime is restamped keeps its mtime") {
  if (!is_root()) {
    MESSAGE("skipped: needs root (an attacker file of uid 65534)");
    return;
  }
  arena a;
  make_symlink("same-target", a.src / "lnk");
  make_symlink("same-target", a.dst / "lnk");  // current but for its mtime: the run restamps it
  const struct timespec ts[2] = {{0, UTIME_OMIT}, {200000000, 0}};
  REQUIRE(::utimensat(AT_FDCWD, (a.src / "lnk").c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
  const fs::path side = a.t / "attacker";
  make_dir(side);
  const their_file mine(side / "mine");
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.before_touch = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped || name != "lnk") return;
    swapped = true;
    exchange(a.dst / name, mine.path);
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst, treesync::links::preserve);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, mine.ino);
  REQUIRE(st);
  CHECK(mtime_ns_of(*st) == mine.mtime);
  CHECK(st->st_uid == nobody);
  CHECK(has_error(r, "lnk"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: an existing directory exchanged for the attacker's before it is opened is never chowned") {
  if (!is_root()) {
    MESSAGE("skipped: needs root (an attacker directory of uid 65534)");
    return;
  }
  arena a;
  make_dir(a.src / "sub", 0755);
  REQUIRE(::chown((a.src / "sub").c_str(), attacker_uid, attacker_uid) == 0);
  make_dir(a.dst / "sub", 0755);  // root's: the run chowns it to the source's owner
  const fs::path theirs = a.t / "theirs";
  make_dir(theirs, 0755);
  REQUIRE(::chown(theirs.c_str(), nobody, nobody) == 0);
  const ino_t their_ino = lstat_of(theirs).st_ino;
  const ino_t dst_ino = lstat_of(a.dst).st_ino;
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.before_open_dir = [&](hooked_fs::dir_handle& d, const std::string& name) {
    struct ::stat at;
    if (swapped || name != "sub" || ::fstat(d.fd(), &at) != 0 || at.st_ino != dst_ino) return;
    swapped = true;
    exchange(a.dst / name, theirs);
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst, treesync::preserve_owner, treesync::preserve_group);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, their_ino);
  REQUIRE(st);
  CHECK(st->st_uid == nobody);
  CHECK(st->st_gid == nobody);
  CHECK(has_error(r, "sub"));
  CHECK(a.canary_changes() == "");
}

// ---- issue 45: each check that guards an open or a change, pinned by the exchange it stops -------

TEST_CASE("create-then-set: a destination file exchanged for a link before write::in_place opens it is never written through") {
  // copy_file's O_NOFOLLOW on the destination: what the link names is a regular file with one
  // link, so the checks after the open would pass it; only the open refuses it.  Any user.
  arena a;
  write_file(a.src / "f", "first\n", 0644, past_ns(3000));
  REQUIRE(treesync::sync(a.src, a.dst).ok());
  write_file(a.src / "f", "source data\n", 0644, past_ns(2000));
  write_file(a.outside / "victim", "victim\n");
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.before_copy = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped || name != "f") return;
    swapped = true;
    REQUIRE(::unlink((a.dst / "f").c_str()) == 0);
    make_symlink((a.outside / "victim").string(), a.dst / "f");
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst, treesync::write::in_place);
  REQUIRE(swapped);
  CHECK(read_file(a.outside / "victim") == "victim\n");
  CHECK(has_error(r, "f"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: a source file exchanged for a link before the copy opens it is never opened through the link") {
  // copy_file's O_NOFOLLOW on the source: the checks after the copy would refuse the other inode,
  // but only once it was read (its bytes in a temporary in DST).  inotify tells whether what the
  // link names was opened at all.  Any user.
  arena a;
  write_file(a.src / "f", "source data\n", 0644, past_ns(2000));
  write_file(a.outside / "secret", "secret\n", 0600);
  a.seal();
  const int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  REQUIRE(in >= 0);
  REQUIRE(::inotify_add_watch(in, (a.outside / "secret").c_str(), IN_OPEN | IN_ACCESS) >= 0);
  hooked_fs hfs;
  bool swapped = false;
  hfs.before_copy = [&](hooked_fs::dir_handle&, const std::string&) {  // (the copy's name is a temporary)
    if (swapped) return;
    swapped = true;
    REQUIRE(::unlink((a.src / "f").c_str()) == 0);
    make_symlink((a.outside / "secret").string(), a.src / "f");
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst);
  REQUIRE(swapped);
  char events[4096];
  const ::ssize_t n = ::read(in, events, sizeof events);
  const int read_errno = errno;
  ::close(in);
  CHECK(n < 0);  // no event queued: the secret was never opened
  CHECK(read_errno == EAGAIN);
  CHECK(has_error(r, "f"));
  CHECK_FALSE(exists_nofollow(a.dst / "f"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: a regular file of this user swapped in after mknod never gets the FIFO's mode or mtime") {
  // settle_special's type check alone: the file is this process's, with one link.  Any user.
  arena a;
  make_fifo(a.src / "pipe", 0640);
  set_mtime(a.src / "pipe", past_ns(5000));
  const fs::path mine = a.t / "mine";
  write_file(mine, "mine\n", 0600, past_ns(100));
  const struct ::stat before = lstat_of(mine);
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.after_mknod = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped) return;
    swapped = true;
    REQUIRE(::rename(mine.c_str(), (a.dst / name).c_str()) == 0);
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst, treesync::specials);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, before.st_ino);
  REQUIRE(st);
  CHECK((st->st_mode & 07777) == 0600);
  CHECK(mtime_ns_of(*st) == mtime_ns_of(before));
  CHECK(has_error(r, "pipe"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: a FIFO of this user with a second link outside swapped in after mknod is never changed") {
  // settle_special's link count alone: type and owner match what mknod made.  Any user.
  arena a;
  make_fifo(a.src / "pipe", 0640);
  set_mtime(a.src / "pipe", past_ns(5000));
  const fs::path theirs = a.t / "their-pipe";  // outside DST, with a second name planted in it
  make_fifo(theirs, 0600);
  const struct ::stat before = lstat_of(theirs);
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.after_mknod = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped) return;
    swapped = true;
    REQUIRE(::unlink((a.dst / name).c_str()) == 0);
    REQUIRE(::link(theirs.c_str(), (a.dst / name).c_str()) == 0);
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst, treesync::specials);
  REQUIRE(swapped);
  const struct ::stat after = lstat_of(theirs);
  CHECK((after.st_mode & 07777) == 0600);
  CHECK(mtime_ns_of(after) == mtime_ns_of(before));
  CHECK(has_error(r, "pipe"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: another user's FIFO swapped in after mknod never gets the source's owner or set-ID bits") {
  // settle_special's owner check alone: a FIFO with one link, as mknod made.
  if (!is_root()) {
    MESSAGE("skipped: needs root (a FIFO of another uid)");
    return;
  }
  arena a;
  make_fifo(a.src / "pipe", 0600);
  REQUIRE(::chmod((a.src / "pipe").c_str(), 06755) == 0);
  const fs::path theirs = a.t / "their-pipe";
  make_fifo(theirs, 0600);
  REQUIRE(::chown(theirs.c_str(), attacker_uid, attacker_uid) == 0);
  const ino_t their_ino = lstat_of(theirs).st_ino;
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.after_mknod = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped) return;
    swapped = true;
    REQUIRE(::rename(theirs.c_str(), (a.dst / name).c_str()) == 0);
  };
  const treesync::report r =
      treesync::sync(hfs, a.src, a.dst, treesync::specials, treesync::preserve_owner, treesync::preserve_group);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, their_ino);
  REQUIRE(st);
  CHECK(st->st_uid == attacker_uid);
  CHECK((st->st_mode & 07777) == 0600);
  CHECK(has_error(r, "pipe"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: an existing file exchanged for another of the same type before its mode is set keeps its mode") {
  // touch_seen's inode check alone: a regular file of this process's, with one link, as the walk
  // saw at the name.  Any user.
  arena a;
  write_file(a.src / "f", "same\n", 0640, past_ns(3000));
  write_file(a.dst / "f", "same\n", 0600, past_ns(3000));  // current but for its mode
  const fs::path other = a.t / "other";
  write_file(other, "other\n", 0600, past_ns(100));
  const struct ::stat before = lstat_of(other);
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.before_touch = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped || name != "f") return;
    swapped = true;
    exchange(a.dst / name, other);
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, before.st_ino);
  REQUIRE(st);
  CHECK((st->st_mode & 07777) == 0600);
  CHECK(mtime_ns_of(*st) == mtime_ns_of(before));
  CHECK(has_error(r, "f"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: a directory of this user open to others swapped in between mkdir and open is never filled or chmodded") {
  // check_made_dir's mode check alone (the run makes its directories 0700): the owner and the
  // type match.  Any user.
  arena a;
  make_dir(a.src / "sub", 0755);
  write_file(a.src / "sub" / "f", "data\n", 0644);
  const fs::path mine = a.t / "mine";
  make_dir(mine, 0755);
  REQUIRE(::chmod(mine.c_str(), 0755) == 0);
  const ino_t mine_ino = lstat_of(mine).st_ino;
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.after_mkdir = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped) return;
    swapped = true;
    REQUIRE(::rename(mine.c_str(), (a.dst / name).c_str()) == 0);  // over the empty directory just made
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, mine_ino);
  REQUIRE(st);
  CHECK((st->st_mode & 07777) == 0755);
  for (const auto& e : fs::directory_iterator(a.dst))
    if (lstat_of(e.path()).st_ino == mine_ino) CHECK(fs::is_empty(e.path()));  // nothing made inside it
  CHECK(!r.ok());
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: another user's private directory swapped in between mkdir and open is never filled or chowned") {
  // check_made_dir's owner check alone: a directory of mode 0700, as mkdir made.
  if (!is_root()) {
    MESSAGE("skipped: needs root (a directory of another uid)");
    return;
  }
  arena a;
  make_dir(a.src / "sub", 0700);
  write_file(a.src / "sub" / "f", "data\n", 0644);
  const fs::path theirs = a.t / "theirs";
  make_dir(theirs, 0700);
  REQUIRE(::chmod(theirs.c_str(), 0700) == 0);
  REQUIRE(::chown(theirs.c_str(), attacker_uid, attacker_uid) == 0);
  const ino_t their_ino = lstat_of(theirs).st_ino;
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.after_mkdir = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped) return;
    swapped = true;
    REQUIRE(::rename(theirs.c_str(), (a.dst / name).c_str()) == 0);
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst, treesync::preserve_owner, treesync::preserve_group);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, their_ino);
  REQUIRE(st);
  CHECK(st->st_uid == attacker_uid);
  CHECK(st->st_nlink == 2);  // nothing made inside it
  CHECK(!r.ok());
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: a private file exchanged in the source for the one stat'ed, same size and mtime, is never copied with the other's mode") {
  // copy_file's inode check after the copy alone: size and mtime are what the walk saw, so only
  // the inode tells that the bytes read are another file's (here a 0600 one, copied as 0644
  // without it).  The run copies what is at the name now, with its own mode.  Any user.
  arena a;
  write_file(a.src / "f", "source data\n", 0644, past_ns(2000));
  const fs::path secret = a.t / "secret";
  write_file(secret, "SECRET data\n", 0600, past_ns(2000));  // same size, same mtime
  REQUIRE(lstat_of(secret).st_size == lstat_of(a.src / "f").st_size);
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.before_copy = [&](hooked_fs::dir_handle&, const std::string&) {  // (the copy's name is a temporary)
    if (swapped) return;
    swapped = true;
    REQUIRE(::rename(secret.c_str(), (a.src / "f").c_str()) == 0);
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst);
  REQUIRE(swapped);
  CHECK(r.errors.size() <= 1);
  if (exists_nofollow(a.dst / "f") && read_file(a.dst / "f") == "SECRET data\n")
    CHECK((lstat_of(a.dst / "f").st_mode & 07777) == 0600);
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: a link of this user with the same target and a second name outside, exchanged for the one made, is never restamped") {
  // settle_link's link count alone: owner and target match the link made.  Any user (mtime only).
  arena a;
  make_symlink("target-A", a.src / "lnk");
  const struct timespec ts[2] = {{0, UTIME_OMIT}, {200000000, 7}};
  REQUIRE(::utimensat(AT_FDCWD, (a.src / "lnk").c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
  const fs::path side = a.t / "side";
  make_dir(side);
  make_symlink("target-A", side / "other");
  REQUIRE(::linkat(AT_FDCWD, (side / "other").c_str(), AT_FDCWD, (side / "second").c_str(), 0) == 0);
  const struct ::stat other = lstat_of(side / "other");
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.after_symlink = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped) return;
    swapped = true;
    exchange(a.dst / name, side / "other");
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst, treesync::links::preserve);
  REQUIRE(swapped);
  CHECK(mtime_ns_of(lstat_of(side / "second")) == mtime_ns_of(other));
  CHECK(has_error(r, "lnk"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: another user's link with the same target, exchanged for the one made, is never chowned or restamped") {
  // settle_link's owner check alone: one link, the target the run wrote.
  if (!is_root()) {
    MESSAGE("skipped: needs root (a link of another uid)");
    return;
  }
  arena a;
  make_symlink("target-A", a.src / "lnk");
  REQUIRE(::lchown((a.src / "lnk").c_str(), attacker_uid, attacker_uid) == 0);
  const struct timespec ts[2] = {{0, UTIME_OMIT}, {200000000, 7}};
  REQUIRE(::utimensat(AT_FDCWD, (a.src / "lnk").c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
  const fs::path side = a.t / "side";
  make_dir(side);
  make_symlink("target-A", side / "other");
  REQUIRE(::lchown((side / "other").c_str(), nobody, nobody) == 0);
  const struct ::stat other = lstat_of(side / "other");
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.after_symlink = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped) return;
    swapped = true;
    exchange(a.dst / name, side / "other");
  };
  const treesync::report r =
      treesync::sync(hfs, a.src, a.dst, treesync::links::preserve, treesync::preserve_owner, treesync::preserve_group);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, other.st_ino);
  REQUIRE(st);
  CHECK(st->st_uid == nobody);
  CHECK(mtime_ns_of(*st) == mtime_ns_of(other));
  CHECK(has_error(r, "lnk"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: an existing file given a second link outside DST before its mode is set keeps its mode") {
  // set_mode's link count (EMLINK) alone: the entry is the very inode the walk saw, of its type;
  // only the name planted outside DST since tells.  Any user.
  arena a;
  write_file(a.src / "f", "same\n", 0640, past_ns(3000));
  write_file(a.dst / "f", "same\n", 0600, past_ns(3000));  // current but for its mode
  const fs::path planted = a.t / "planted";
  a.seal();
  hooked_fs hfs;
  bool linked = false;
  hfs.before_touch = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (linked || name != "f") return;
    linked = true;
    REQUIRE(::link((a.dst / name).c_str(), planted.c_str()) == 0);
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst);
  REQUIRE(linked);
  CHECK((lstat_of(planted).st_mode & 07777) == 0600);
  CHECK(has_error(r, "f"));
  CHECK(a.canary_changes() == "");
}

TEST_CASE("create-then-set: a destination file exchanged for a link before a checksum compare is never opened through the link") {
  // same_content's O_NOFOLLOW on the destination: what the link names would be read and compared
  // (one bit of it told by the run's outcome).  inotify tells whether it was opened.  Any user.
  arena a;
  write_file(a.src / "f", "source data\n", 0644, past_ns(2000));
  write_file(a.dst / "f", "source DATA\n", 0644, past_ns(2000));  // same size and mtime: compared
  write_file(a.outside / "secret", "secret\n", 0600);
  a.seal();
  const int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  REQUIRE(in >= 0);
  REQUIRE(::inotify_add_watch(in, (a.outside / "secret").c_str(), IN_OPEN | IN_ACCESS) >= 0);
  hooked_fs hfs;
  bool swapped = false;
  hfs.before_compare = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped || name != "f") return;
    swapped = true;
    REQUIRE(::unlink((a.dst / "f").c_str()) == 0);
    make_symlink((a.outside / "secret").string(), a.dst / "f");
  };
  const treesync::report r = treesync::sync(hfs, a.src, a.dst, treesync::compare::checksum);
  REQUIRE(swapped);
  char events[4096];
  const ::ssize_t n = ::read(in, events, sizeof events);
  const int read_errno = errno;
  ::close(in);
  CHECK(n < 0);  // no event queued: the secret was never opened
  CHECK(read_errno == EAGAIN);
  CHECK(a.canary_changes() == "");
  (void)r;
}

TEST_CASE("create-then-set: a device of this user with another device number swapped in after mknod is never changed") {
  // settle_special's device-number check alone: type, owner and link count match what mknod made.
  if (!is_root()) {
    MESSAGE("skipped: needs root (mknod of a character device)");
    return;
  }
  arena a;
  if (::mknod((a.src / "dev").c_str(), S_IFCHR | 0600, ::makedev(1, 3)) != 0) {
    MESSAGE("skipped: mknod of a character device is not allowed here");
    return;
  }
  REQUIRE(::chmod((a.src / "dev").c_str(), 0666) == 0);
  REQUIRE(::chown((a.src / "dev").c_str(), attacker_uid, attacker_uid) == 0);
  const fs::path other = a.t / "other-dev";
  REQUIRE(::mknod(other.c_str(), S_IFCHR | 0600, ::makedev(1, 5)) == 0);
  const struct ::stat before = lstat_of(other);
  a.seal();
  hooked_fs hfs;
  bool swapped = false;
  hfs.after_mknod = [&](hooked_fs::dir_handle&, const std::string& name) {
    if (swapped) return;
    swapped = true;
    REQUIRE(::rename(other.c_str(), (a.dst / name).c_str()) == 0);
  };
  const treesync::report r =
      treesync::sync(hfs, a.src, a.dst, treesync::specials, treesync::preserve_owner, treesync::preserve_group);
  REQUIRE(swapped);
  const auto st = find_inode(a.dst, before.st_ino);
  REQUIRE(st);
  CHECK(st->st_uid == 0);
  CHECK((st->st_mode & 07777) == 0600);
  CHECK(has_error(r, "dev"));
  CHECK(a.canary_changes() == "");
}

// ---- issue 23 item 6 ----------------------------------------------------------------------------

TEST_CASE("short content: a file whose content is shorter than its stat size is copied as read, never padded") {
  const fs::path sys = "/sys/kernel/mm/transparent_hugepage/enabled";
  struct ::stat st;
  if (::stat(sys.c_str(), &st) != 0) {
    MESSAGE("skipped: " << sys << " is not here");
    return;
  }
  const std::string content = read_file(sys);
  if (content.empty() || static_cast<std::uint64_t>(st.st_size) <= content.size()) {
    MESSAGE("skipped: " << sys << " is not shorter than its stat size here");
    return;
  }
  temp_dir t;
  make_dir(t / "src");
  make_symlink(sys.string(), t / "src" / "enabled");  // followed (links::dereference, the default)
  const treesync::report r = treesync::sync(t / "src", t / "dst");
  CHECK(r.ok());
  CHECK(read_file(t / "dst" / "enabled") == content);
  CHECK(r.bytes_copied == content.size());
}

TEST_CASE("leftovers: nothing is purged under deletion::keep") {
  treesync::mock_fs fs;
  fs.mkdir("/src");
  fs.write("/src/a", "a");
  fs.mkdir("/dst");
  fs.write("/dst/.treesync-tmp-4242-1-7", "partial");
  fs.write("/dst/.treesync-tmp-4242-9/g", "partial");
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::deletion::keep);
  CHECK(r.ok());
  CHECK(fs.exists("/dst/.treesync-tmp-4242-1-7"));
  CHECK(fs.exists("/dst/.treesync-tmp-4242-9/g"));
  CHECK(r.cleaned == 0);
}

TEST_CASE("leftovers: a name with the prefix but not the tool's pattern is an ordinary entry") {
  treesync::mock_fs fs;
  fs.mkdir("/src");
  fs.write("/src/a", "a");
  fs.mkdir("/dst");
  fs.write("/dst/.treesync-tmp-x/keep", "precious");
  fs.write("/dst/.treesync-tmp-12-abc", "precious");
  const treesync::report r =
      treesync::sync(fs, "/src", "/dst", treesync::exclude{".treesync-tmp-x", ".treesync-tmp-12-abc"});
  CHECK(r.ok());
  CHECK(fs.read("/dst/.treesync-tmp-x/keep") == "precious");
  CHECK(fs.read("/dst/.treesync-tmp-12-abc") == "precious");
}

TEST_CASE("leftovers: a leftover-named entry owned by another user is not purged") {
  if (!is_root()) {
    MESSAGE("skipped: needs root (an entry of another uid)");
    return;
  }
  arena a;
  write_file(a.src / "a", "a\n");
  const fs::path left = a.dst / ".treesync-tmp-1-2-3";
  make_dir(left);
  write_file(left / "theirs", "not yours\n");
  REQUIRE(::chown(left.c_str(), attacker_uid, attacker_uid) == 0);
  const treesync::report r = treesync::sync(a.src, a.dst, treesync::exclude{".treesync-tmp-*"});
  CHECK(r.ok());
  CHECK(read_file(left / "theirs") == "not yours\n");
}

TEST_CASE("cancel: a copy in progress stops at the next chunk and leaves no temporary") {
  arena a;
  write_file(a.src / "big", std::string(8u << 20, 'x'), 0644, past_ns(100));
  std::atomic<bool> stop{false};
  hooked_fs hfs;
  hfs.before_copy = [&](hooked_fs::dir_handle&, const std::string&) { stop = true; };  // the signal arrives now
  std::error_code ec;
  const treesync::report r = treesync::sync(hfs, a.src, a.dst, treesync::cancel_on(stop), ec);
  CHECK(ec == std::errc::operation_canceled);
  CHECK(r.cancelled);
  CHECK_FALSE(exists_nofollow(a.dst / "big"));
  CHECK_FALSE(has_temp(a.dst));
  CHECK(r.bytes_copied == 0);
}

TEST_CASE("cancel: a mock copy cancelled after the destination file is opened leaves no temporary and no error") {
  treesync::mock_fs fs;
  fs.mkdir("/src");
  fs.write("/src/f", "data");
  std::atomic<bool> stop{false};
  fs.on_operation([&](op k, const std::string&) {
    if (k == op::open_write) stop = true;
  });
  std::error_code ec;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::cancel_on(stop), ec);
  CHECK(r.cancelled);
  CHECK(r.errors.empty());
  CHECK_FALSE(fs.exists("/dst/f"));
  for (const auto& kv : fs.tree("/dst")) CHECK(kv.first.find(".treesync-tmp-") == std::string::npos);
}

// ---- issue 24 item 2: the side of a failure ----------------------------------------------------

namespace {
// A mock pair /src (one file f) and /dst (synced once, so that later runs update), with a fault.
treesync::report run_with_fault(treesync::mock_fs& fs, op kind, std::errc e, bool warm = true) {
  fs.mkdir("/src");
  fs.write("/src/f", "one");
  if (warm) {
    REQUIRE(treesync::sync(fs, "/src", "/dst").ok());
    fs.write("/src/f", "two, longer");
  }
  fs.fail(kind, 1, e);
  std::error_code ec;
  return treesync::sync(fs, "/src", "/dst", ec);
}
}  // namespace

TEST_CASE("error side: a failed write of the copy (ENOSPC) is the destination's") {
  treesync::mock_fs fs;
  const treesync::report r = run_with_fault(fs, op::open_write, std::errc::no_space_on_device);
  const auto* e = error_at(r, "f");
  REQUIRE(e);
  CHECK(e->side == treesync::side::destination);
}

TEST_CASE("error side: a failed chmod of the copy is the destination's") {
  treesync::mock_fs fs;
  const treesync::report r = run_with_fault(fs, op::chmod, std::errc::read_only_file_system);
  const auto* e = error_at(r, "f");
  REQUIRE(e);
  CHECK(e->side == treesync::side::destination);
}

TEST_CASE("error side: a failed utimens of the copy is the destination's") {
  treesync::mock_fs fs;
  const treesync::report r = run_with_fault(fs, op::utime, std::errc::read_only_file_system);
  const auto* e = error_at(r, "f");
  REQUIRE(e);
  CHECK(e->side == treesync::side::destination);
}

TEST_CASE("error side: a failed rename into place is the destination's") {
  treesync::mock_fs fs;
  const treesync::report r = run_with_fault(fs, op::rename, std::errc::read_only_file_system);
  const auto* e = error_at(r, "f");
  REQUIRE(e);
  CHECK(e->side == treesync::side::destination);
}

TEST_CASE("error side: a failed unlink of an extraneous entry is the destination's") {
  treesync::mock_fs fs;
  fs.mkdir("/src");
  fs.write("/src/f", "one");
  fs.mkdir("/dst");
  fs.write("/dst/gone", "x");
  fs.fail(op::unlink, 1, std::errc::read_only_file_system);
  std::error_code ec;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", ec);
  const auto* e = error_at(r, "gone");
  REQUIRE(e);
  CHECK(e->side == treesync::side::destination);
}

TEST_CASE("error side: a failed read of the source is the source's") {
  treesync::mock_fs fs;
  const treesync::report r = run_with_fault(fs, op::open_read, std::errc::io_error);
  const auto* e = error_at(r, "f");
  REQUIRE(e);
  CHECK(e->side == treesync::side::source);
}

TEST_CASE("error side: a full tmpfs destination is the destination's, and leaves no temporary") {
  if (!is_root()) {
    MESSAGE("skipped: needs root (mount -t tmpfs)");
    return;
  }
  temp_dir t;
  make_dir(t / "src");
  make_dir(t / "mnt");
  write_file(t / "src" / "big", std::string(512u << 10, 'b'));
  scoped_mount m(t / "mnt", "64k");
  if (!m.ok) {
    MESSAGE("skipped: mounting a tmpfs is not allowed here");
    return;
  }
  std::error_code ec;
  const treesync::report r = treesync::sync(t / "src", t / "mnt" / "dst", ec);
  const auto* e = error_at(r, "big");
  REQUIRE(e);
  CHECK(e->side == treesync::side::destination);
  CHECK(e->code == std::errc::no_space_on_device);
  CHECK_FALSE(has_temp(t / "mnt"));
}

TEST_CASE("error side: a read-only destination (bind mount) is the destination's") {
  if (!is_root()) {
    MESSAGE("skipped: needs root (mount --bind, remount ro)");
    return;
  }
  temp_dir t;
  make_dir(t / "src");
  make_dir(t / "dst");
  make_dir(t / "ro");
  write_file(t / "src" / "f", "data\n");
  scoped_mount m(t / "dst", t / "ro");
  if (!m.ok) {
    MESSAGE("skipped: a read-only bind mount is not allowed here");
    return;
  }
  std::error_code ec;
  const treesync::report r = treesync::sync(t / "src", t / "ro", ec);
  const auto* e = error_at(r, "f");
  REQUIRE(e);
  CHECK(e->side == treesync::side::destination);
  CHECK(e->code == std::errc::read_only_file_system);
}
