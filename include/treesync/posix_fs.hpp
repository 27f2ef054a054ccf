// treesync/posix_fs.hpp - the POSIX backend (handle based, *at() calls)
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_POSIX_FS_HPP
#define TREESYNC_POSIX_FS_HPP

#include "core.hpp"
#include "filesystem.hpp"
#include "detail/posix_io.hpp"
#include "detail/posix_roots.hpp"

#include <algorithm>
#include <vector>

namespace treesync {
inline namespace v0 {

// [treesync.posix] ------------------------------------------------------------------------------
//
// Every operation below the roots is relative to a directory handle (the *at() family) and never
// follows a link the engine did not ask to follow, so nothing is resolved through a symlink that
// appeared in the destination, and paths longer than PATH_MAX work.

#if TREESYNC_HAS_POSIX
class posix_fs : private detail::posix_files, private detail::posix_roots {
 public:
  /// An open directory (O_DIRECTORY | O_CLOEXEC), closed on destruction.
  class dir_handle {
   public:
    dir_handle() noexcept = default;
    explicit dir_handle(int fd) noexcept : fd_(fd) {}
    dir_handle(dir_handle&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    dir_handle& operator=(dir_handle&& o) noexcept {
      if (this != &o) {
        reset();
        fd_ = std::exchange(o.fd_, -1);
      }
      return *this;
    }
    dir_handle(const dir_handle&) = delete;
    dir_handle& operator=(const dir_handle&) = delete;
    ~dir_handle() { reset(); }
    int fd() const noexcept { return fd_; }

   private:
    void reset() noexcept {
      if (fd_ >= 0) ::close(fd_);
      fd_ = -1;
    }
    int fd_ = -1;
  };

  /// Everything in the contract (filesystem.hpp); xattrs where the platform has them (copy_xattrs
  /// is a no-op elsewhere), durable through fsync.  What a mounted filesystem keeps of timestamps
  /// (a link's own mtime, a ctime) is told per run by timestamps(), not here.
  static constexpr filesystem_capabilities capabilities() noexcept {
    filesystem_capabilities c;
#if !defined(__linux__)
    c.xattrs = false;  // copy_fd_xattrs is Linux only
#endif
    return c;
  }

  /// `racy_window`: how close to a source file's mtime a copy must be to be verified by content on
  /// the next run (timestamp granularity plus clock slack; 1 s covers NFS servers with 1 s stamps).
  explicit posix_fs(std::chrono::nanoseconds racy_window = std::chrono::seconds(1)) noexcept
      : racy_(racy_window.count()), euid_(::geteuid()) {}

  // ---- the roots: pinned (detail::posix_roots), stat'ed, resolved, opened, made -----------------
  using detail::posix_roots::pin_root;
  using detail::posix_roots::pin_missing_root;
  using detail::posix_roots::pin_unreachable;
  stat_info stat_path(const std::filesystem::path& p, bool follow, std::error_code& ec) const;
  std::filesystem::path canonical(const std::filesystem::path& p, std::error_code& ec) const;
  dir_handle open_root(const std::filesystem::path& p, std::error_code& ec) const;
  void make_root(const std::filesystem::path& p, std::uint32_t mode, std::error_code& ec) const;

  // ---- reading: a directory's entries, an entry's stat, a directory below, a link's target ------
  std::vector<dir_entry> list(dir_handle& d, std::error_code& ec) const;
  stat_info stat(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const;
  dir_handle open_dir(dir_handle& d, const std::string& name, bool follow, std::error_code& ec) const;
  std::string read_link(dir_handle& d, const std::string& name, std::error_code& ec) const;

  // ---- data: a file copied (its metadata with it), two files compared ---------------------------
  copy_result copy_file(dir_handle& sd, const std::string& name, dir_handle& dd, const std::string& dst_name,
                        const stat_info& expected, const copy_options& opt, std::error_code& ec) const;
  bool same_content(dir_handle& a, const std::string& an, bool follow, dir_handle& b, const std::string& bn,
                    std::error_code& ec) const;

  // ---- metadata of an entry there: mode, mtime, owner, extended attributes ----------------------
  // chmod never follows a link.  fchmodat(AT_SYMLINK_NOFOLLOW) refuses links without opening the
  // entry (glibc >= 2.32 emulates it with O_PATH, so a device node is not opened either); where it
  // is not available at all, the entry is opened without following and changed through its fd.
  //
  // Metadata changes by name (mode, mtime, owner) act on one inode the engine may change: on Linux
  // the entry is opened with O_PATH | O_NOFOLLOW (nothing is opened for I/O, a device or FIFO
  // neither), refused with EMLINK when it is not a directory and has other links (one of them
  // could be a hard link planted from outside the destination), and changed through that
  // descriptor (/proc/self/fd), so a name swapped in between the check and the change cannot
  // redirect it.  Without /proc, the change is made by name, never following a link.
  void set_mode(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) const;
  void set_mtime(dir_handle& d, const std::string& name, std::int64_t ns, std::error_code& ec) const;
  /// Owner and group (-1: unchanged), never following a link.
  void set_owner(dir_handle& d, const std::string& name, std::int64_t uid, std::int64_t gid,
                 std::error_code& ec) const;
  /// The mtime (`mtime`: ns) and permission bits (`mode`: bits) of an existing entry the walk
  /// stat'ed as `seen`, on that entry only: it is opened O_PATH | O_NOFOLLOW and fstat must show
  /// seen's type and, where the walk had one, seen's inode (EEXIST otherwise: nothing changed);
  /// not a directory, it must have no other link (EMLINK, as set_mode).  A symlink's mode is
  /// never set (ENOTSUP).  The changes go through /proc/self/fd; where that or O_PATH is missing,
  /// set_mode / set_mtime by name (neither follows a link; neither gives anything away).
  void touch_seen(dir_handle& d, const std::string& name, const stat_info& seen, bool mtime, std::int64_t ns,
                  bool mode, std::uint32_t bits, std::error_code& ec) const;
  /// Copies the extended attributes of one directory to another.
  void copy_xattrs(dir_handle& src, dir_handle& dst, std::error_code& ec) const { copy_fd_xattrs(src.fd(), dst.fd(), ec); }

  // ---- names: renamed, removed, made, linked, moved; a directory flushed ------------------------
  void rename(dir_handle& d, const std::string& from, const std::string& to, std::error_code& ec) const {
    check(::renameat(d.fd(), from.c_str(), d.fd(), to.c_str()), ec);
  }
  void remove(dir_handle& d, const std::string& name, std::error_code& ec) const {
    check(::unlinkat(d.fd(), name.c_str(), 0), ec);
  }
  void remove_dir(dir_handle& d, const std::string& name, std::error_code& ec) const {
    check(::unlinkat(d.fd(), name.c_str(), AT_REMOVEDIR), ec);
  }
  void make_dir(dir_handle& d, const std::string& name, std::uint32_t mode, std::error_code& ec) const {
    check(::mkdirat(d.fd(), name.c_str(), static_cast<mode_t>(mode)), ec);
  }
  /// Whether the directory just made (make_dir) and opened (open_dir) is the one this run made:
  /// a directory of this process's user with no permission for others (it was made 0700), so a
  /// directory swapped in at the name between the two calls is never filled, chowned or chmodded
  /// (EEXIST otherwise).
  void check_made_dir(dir_handle& h, std::error_code& ec) const;
  void make_symlink(dir_handle& d, const std::string& name, const std::string& target, std::error_code& ec) const {
    check(::symlinkat(target.c_str(), d.fd(), name.c_str()), ec);
  }
  /// A hard link `name` in `d` to `target` in `td`.
  void link(dir_handle& td, const std::string& target, dir_handle& d, const std::string& name,
            std::error_code& ec) const {
    check(::linkat(td.fd(), target.c_str(), d.fd(), name.c_str(), 0), ec);
  }
  /// Moves an entry to another directory of the same filesystem, replacing what is there.
  void move(dir_handle& from, const std::string& name, dir_handle& to, const std::string& to_name,
            std::error_code& ec) const {
    check(::renameat(from.fd(), name.c_str(), to.fd(), to_name.c_str()), ec);
  }
  /// Flushes a directory (its entries) to stable storage.
  void sync_dir(dir_handle& d, std::error_code& ec) const { check(::fsync(d.fd()), ec); }

  // ---- FIFOs, sockets, devices and links made here, then settled on that very entry -------------
  /// A FIFO, socket or device node like `st` (mode bits set separately).
  void make_special(dir_handle& d, const std::string& name, const stat_info& st, std::error_code& ec) const;
  /// Gives the node make_special just made at `name` the owner (when asked), mode and mtime of `st`,
  /// on that node only: it is opened O_PATH | O_NOFOLLOW (never for I/O), and fstat must show this
  /// process's node of st's type (and device number), with one link, or nothing is changed
  /// (EEXIST: something else is at the name now).  Owner, then mode (set-ID bits only once the
  /// owner is final), then mtime, all through the descriptor; where that is not possible (no
  /// O_PATH, no /proc) the node keeps mode 0600 and the call fails with ENOTSUP: a name is never
  /// chowned or chmodded.
  void settle_special(dir_handle& d, const std::string& name, const stat_info& st, bool owner, bool group,
                      std::error_code& ec) const;
  /// Gives the symlink make_symlink just made at `name`, holding `target`, the owner and group of
  /// `st` (when asked) and st's mtime (with `mtime`), on that link only (issue 33, 5): it is
  /// opened O_PATH | O_NOFOLLOW right after it was made, and fstat must show a symlink of this
  /// process's user with one link whose content (read through the descriptor) is `target`, or
  /// nothing is changed (EEXIST: something else is at the name now, as an attacker who owns the
  /// directory can exchange names).  No call returns the inode symlinkat made, so "the link just
  /// made" is what only this run could have put there: a link of its own user, never hard-linked,
  /// holding this target; everything after the check goes through the descriptor (fchownat
  /// AT_EMPTY_PATH, utimensat on /proc/self/fd, which lands on the link itself).  Without
  /// O_PATH / AT_EMPTY_PATH the call fails with ENOTSUP when an owner or group is asked (a name
  /// is never chowned) and sets the mtime by name, not following the link, after an lstat
  /// check; without /proc, an mtime asked fails with ENOTSUP.
  void settle_link(dir_handle& d, const std::string& name, const std::string& target, const stat_info& st, bool owner,
                   bool group, bool mtime, std::error_code& ec) const;

  // ---- the user this process acts as ------------------------------------------------------------
  /// The user this process acts as (leftovers of an earlier run are removed only when theirs).
  std::int64_t user_id() const noexcept { return static_cast<std::int64_t>(euid_); }
  /// The groups this process may give a file it owns: its effective group and its supplementary
  /// groups (preserve_group as a user other than root sets only these, as rsync -g does).
  std::vector<std::int64_t> user_groups() const;

  // ---- the state file (state_file): by its directory and name (posix_files) ---------------------
  template <class Take>
  void read_state(dir_handle& d, const std::string& name, Take&& take, std::error_code& ec) const {
    read_regular_at(d.fd(), name, std::forward<Take>(take), ec);
  }
  void save_state(dir_handle& d, const std::string& name, std::string_view text, std::error_code& ec) const {
    replace_at(d.fd(), name, text, ec);
  }
  void drop_state(dir_handle& d, const std::string& name, std::error_code& ec) const {
    remove_regular_at(d.fd(), name, ec);
  }

  // ---- time: the clock, the racy window, what a filesystem keeps of timestamps ------------------
  std::int64_t now() const noexcept;
  std::int64_t racy_window() const noexcept { return racy_; }
  /// What the filesystem under `d` keeps of timestamps, judged from the directory's own stat.  The
  /// resolution is the coarsest decimal unit, up to 1 s, that both its mtime and its ctime are
  /// whole multiples of: the ctime comes from the filesystem's clock, so on a fine-grained
  /// filesystem its digits are not round (a false "1 s" has odds of 1 in 10^18).  A ctime equal
  /// to the mtime at whole seconds is no ctime at all (SFTPv3, as sshfs shows it), unless the
  /// filesystem is a local one known to keep a ctime (ext2/3/4, XFS, btrfs, tmpfs, F2FS, ZFS,
  /// bcachefs; recognized by its magic number).  A filesystem of whole seconds that does keep a
  /// ctime may be taken for one without: the engine then marks racy copies itself, which is
  /// correct on any filesystem, only less quiet.
  time_model timestamps(dir_handle& d, std::error_code& ec) const;
  /// The judgement of timestamps() from a directory's stat (`known_ctime`: a local filesystem
  /// known to keep a ctime, and nanosecond timestamps unless it stores whole seconds only, as
  /// ext2/3 with small inodes do).  Elsewhere the unit is guessed from the round digits the two
  /// stamps share; a directory just changed has mtime == ctime, so that is one sample: a
  /// nanosecond filesystem unknown here is taken for a 10 ns one once in ten (mtimes closer
  /// than that then count as equal, which no real change is).
  static time_model judge_timestamps(const stat_info& dir, bool known_ctime) noexcept;

 private:
  // A symlink this process could just have made holding `target`: its user's, with one link, of
  // the target's length (settle_link).
  bool made_link(const struct ::stat& cur, const std::string& target) const noexcept;
#if defined(__linux__) && defined(O_PATH) && defined(AT_EMPTY_PATH)
  // Whether the link opened O_PATH as `fd` holds exactly `target` (readlinkat on the descriptor).
  static bool holds_target(int fd, const std::string& target);
#endif

  /// The end of copy_file once the data is in: an empty source proven empty, then owner, extended
  /// attributes, mode (unless the file was created with it), mtime and, if asked, fsync.
  static void finish_copy(int in, int out, const stat_info& expected, const copy_options& opt, bool direct_mode,
                          copy_result& res, std::error_code& ec);

  std::int64_t racy_;
  uid_t euid_;  // the user this process acts as, taken once (settle_special, settle_link, check_made_dir, user_id)
};

// ---- posix_fs: the members' bodies, in the order of their declarations --------------------------

inline stat_info posix_fs::stat_path(const std::filesystem::path& p, bool follow, std::error_code& ec) const {
  struct ::stat st;
  int rc;
  const pinned_dir* d = pinned(p);
  if (d && d->error) {
    rc = -1;
    errno = d->error;
  } else if (!d) {
    rc = follow ? ::stat(p.c_str(), &st) : ::lstat(p.c_str(), &st);
  } else if (d->leaf.empty()) {
    rc = ::fstat(d->fd, &st);
  } else {
    rc = ::fstatat(d->fd, d->leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW);
    if (rc == 0 && follow && S_ISLNK(st.st_mode)) {  // not followed: what the run was pinned to is not there
      rc = -1;
      errno = ELOOP;
    }
  }
  if (rc != 0) return set_errno(ec), stat_info{};
  ec.clear();
  return convert(st);
}

inline std::filesystem::path posix_fs::canonical(const std::filesystem::path& p, std::error_code& ec) const {
  const std::string want = strip(p.native());
  for (const auto& d : pins_) {
    std::string at;  // the pinned directory's path now, from its descriptor
    if (d->error && (want == d->path || want == d->parent())) {
      ec.assign(d->error, std::generic_category());
      return std::filesystem::path();
    } else if (d->error) {
      continue;
    } else if (want == d->path && d->leaf.empty()) {
      at = fd_path(d->fd);
    } else if (!d->leaf.empty() && want == d->parent()) {
      at = fd_path(d->fd);
    } else if (!d->leaf.empty() && want == d->path) {
      struct ::stat st;
      if (::fstatat(d->fd, d->leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return set_errno(ec), std::filesystem::path();
      if (!S_ISDIR(st.st_mode))
        return ec = std::make_error_code(std::errc::not_a_directory), std::filesystem::path();
      at = fd_path(d->fd);
      if (!at.empty()) at += (at == "/" ? "" : "/") + d->leaf;
    } else {
      continue;
    }
    if (!at.empty()) return ec.clear(), std::filesystem::path(at);
    break;
  }
  return std::filesystem::canonical(p, ec);
}

inline posix_fs::dir_handle posix_fs::open_root(const std::filesystem::path& p, std::error_code& ec) const {
  // a pinned root: a new open file description of the same directory (a dup would share the
  // listing offset with the descriptor's other users)
  const pinned_dir* d = pinned(p);
  if (d && d->error) return ec.assign(d->error, std::generic_category()), dir_handle{};
  const int fd = !d               ? ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                 : d->leaf.empty() ? ::openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                   : ::openat(d->fd, d->leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return set_errno(ec), dir_handle{};
  ec.clear();
  return dir_handle(fd);
}

inline void posix_fs::make_root(const std::filesystem::path& p, std::uint32_t mode,
                                std::error_code& ec) const {
  const pinned_dir* d = pinned(p);
  if (d && d->error) return ec.assign(d->error, std::generic_category());
  if (d && !d->leaf.empty()) return check(::mkdirat(d->fd, d->leaf.c_str(), static_cast<mode_t>(mode)), ec);
  check(::mkdir(p.c_str(), static_cast<mode_t>(mode)), ec);
}

inline std::vector<dir_entry> posix_fs::list(dir_handle& d, std::error_code& ec) const {
  std::vector<dir_entry> out;
  ec.clear();
#if defined(__linux__)
  // getdents64 straight on the handle: no fdopendir (which costs an fstat and an fcntl).
  alignas(8) static thread_local char buf[64 * 1024];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, d.fd(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      set_errno(ec);
      return {};
    }
    if (n == 0) break;
    for (long off = 0; off < n;) {
      // struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
      std::uint16_t reclen;
      std::memcpy(&reclen, buf + off + 16, sizeof reclen);
      const auto dtype = static_cast<unsigned char>(buf[off + 18]);
      const char* name = buf + off + 19;
      if (!(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))))
        out.push_back({std::string(name), from_dtype(dtype)});
      off += reclen;
    }
  }
#else
  const int fd = ::openat(d.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return set_errno(ec), out;
  DIR* dir = ::fdopendir(fd);
  if (!dir) {
    set_errno(ec);
    ::close(fd);
    return out;
  }
  errno = 0;
  while (const struct dirent* e = ::readdir(dir)) {
    const char* name = e->d_name;
    if (!(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))))
      out.push_back({std::string(name), from_dtype(e->d_type)});
  }
  if (errno) set_errno(ec);
  ::closedir(dir);
#endif
  return out;
}

inline stat_info posix_fs::stat(dir_handle& d, const std::string& name, bool follow,
                                std::error_code& ec) const {
  struct ::stat st;
  if (::fstatat(d.fd(), name.c_str(), &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) != 0) return set_errno(ec), stat_info{};
  ec.clear();
  return convert(st);
}

inline posix_fs::dir_handle posix_fs::open_dir(dir_handle& d, const std::string& name, bool follow,
                                               std::error_code& ec) const {
  const int fd = ::openat(d.fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
  if (fd < 0) return set_errno(ec), dir_handle{};
  ec.clear();
  return dir_handle(fd);
}

inline std::string posix_fs::read_link(dir_handle& d, const std::string& name, std::error_code& ec) const {
  std::string buf(256, '\0');
  for (;;) {
    const ::ssize_t n = ::readlinkat(d.fd(), name.c_str(), buf.data(), buf.size());
    if (n < 0) return set_errno(ec), std::string{};
    if (static_cast<std::size_t>(n) < buf.size()) {
      buf.resize(static_cast<std::size_t>(n));
      ec.clear();
      return buf;
    }
    buf.resize(buf.size() * 2);
  }
}

inline copy_result posix_fs::copy_file(dir_handle& sd, const std::string& name, dir_handle& dd,
                                       const std::string& dst_name, const stat_info& expected,
                                       const copy_options& opt, std::error_code& ec) const {
  ec.clear();
  copy_result res;
  // O_NONBLOCK: should a FIFO have been swapped in since the stat, opening it must not hang.
  const fd_guard in(::openat(sd.fd(), name.c_str(),
                             O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (opt.follow ? 0 : O_NOFOLLOW)));
  if (in.fd < 0) return set_errno(ec), res;
  // No fstat before the copy: `expected` is the stat the engine just took, and no byte is read
  // before the descriptor is known to be a regular file (copy_data: the in-kernel calls refuse
  // anything else; a user-space fallback checks first).  The one fstat after the copy proves
  // it was the same file all along (device, inode, size, mtime).
  // A new file is created with its final permission bits where the umask keeps them, so that
  // no fchmod is needed; never with set-ID or sticky bits, nor when its owner is still to change.
  const std::uint32_t want = expected.mode & 07777;
  const bool direct_mode = !opt.replace && !opt.owner && !opt.group && (want & ~0777u) == 0 &&
                           (want & ~process_umask()) == want;
  // In place (replace): the existing file is opened without truncating, never blocking (a FIFO
  // swapped in), and written only once fstat shows a regular file with no other link (a hard
  // link planted from outside the destination is never written through).
  const int flags =
      O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | (opt.replace ? O_NONBLOCK : (O_CREAT | O_EXCL));
  // Every failure from here to the end of the data is the destination's, but a read's.
  res.destination_failed = true;
  const fd_guard out(::openat(dd.fd(), dst_name.c_str(), flags, direct_mode ? static_cast<mode_t>(want) : 0600));
  if (out.fd < 0) return set_errno(ec), res;
  if (opt.replace) {
    struct ::stat cur;
    if (::fstat(out.fd, &cur) != 0) return set_errno(ec), res;
    if (!S_ISREG(cur.st_mode)) return ec = errc::special_file, res;
    if (cur.st_nlink != 1) return ec = std::make_error_code(std::errc::too_many_links), res;
    if (::ftruncate(out.fd, 0) != 0) return set_errno(ec), res;
  }
  res.destination_failed = false;
  copy_data(in.fd, out.fd, expected, res, ec, opt.cancel);
  if (ec) return res;
  struct ::stat after;
  if (::fstat(in.fd, &after) != 0) return set_errno(ec), res;
  if (!S_ISREG(after.st_mode)) return ec = errc::special_file, res;
  const stat_info a = convert(after);
  // Fewer bytes than the stat said, from a file whose stat has not changed: a file whose content
  // is shorter than its size (sysfs), copied as what was read.
  if (a.size != expected.size || a.mtime_ns != expected.mtime_ns || res.bytes > expected.size ||
      (res.bytes < expected.size && a.ctime_ns != expected.ctime_ns && expected.ctime_ns != 0) ||
      (expected.ino != 0 && (a.ino != expected.ino || a.dev != expected.dev))) {
    ec = errc::changed_during_copy;
    return res;
  }
  finish_copy(in.fd, out.fd, expected, opt, direct_mode, res, ec);
  return res;
}

inline bool posix_fs::same_content(dir_handle& a, const std::string& an, bool follow, dir_handle& b,
                                   const std::string& bn, std::error_code& ec) const {
  ec.clear();
  struct ::stat sa, sb;
  const fd_guard fa(open_data(a.fd(), an, follow, sa, ec));
  if (fa.fd < 0) return false;
  const fd_guard fb(open_data(b.fd(), bn, false, sb, ec));
  if (fb.fd < 0) return false;
  if (sa.st_size != sb.st_size) return false;
  // No more than the size stat gave is read (a /proc file says 0 and may never end); a byte past
  // it on either side, or a short read, means the file changed: not the same.
  std::vector<char> ba(1 << 16), bb(1 << 16);
  for (auto left = static_cast<std::uint64_t>(sa.st_size); left > 0;) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, ba.size()));
    const ::ssize_t na = read_full(fa.fd, ba.data(), want, ec);
    if (ec) return false;
    const ::ssize_t nb = read_full(fb.fd, bb.data(), want, ec);
    if (ec) return false;
    if (na != nb || static_cast<std::size_t>(na) != want || std::memcmp(ba.data(), bb.data(), want) != 0) return false;
    left -= want;
  }
  char probe;
  if (read_full(fa.fd, &probe, 1, ec) != 0 || ec) return false;
  return read_full(fb.fd, &probe, 1, ec) == 0 && !ec;
}

inline void posix_fs::set_mode(dir_handle& d, const std::string& name, std::uint32_t mode,
                               std::error_code& ec) const {
  if (name == ".") return check(::fchmod(d.fd(), static_cast<mode_t>(mode)), ec);
#if defined(__linux__) && defined(O_PATH)
  {
    const path_fd p(d.fd(), name, ec);
    if (ec) return;
    if (S_ISLNK(p.st.st_mode)) return ec = std::make_error_code(std::errc::operation_not_supported), void();
    if (::chmod(proc_fd_path(p.fd).c_str(), static_cast<mode_t>(mode)) == 0) return ec.clear();
    if (errno != ENOENT) return set_errno(ec);
  }
#endif
  if (::fchmodat(d.fd(), name.c_str(), static_cast<mode_t>(mode), AT_SYMLINK_NOFOLLOW) == 0) return ec.clear();
  if (errno != ENOTSUP && errno != EOPNOTSUPP && errno != ENOSYS) return set_errno(ec);
  const fd_guard f(::openat(d.fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (f.fd < 0) return set_errno(ec);
  check(::fchmod(f.fd, static_cast<mode_t>(mode)), ec);
}

inline void posix_fs::set_mtime(dir_handle& d, const std::string& name, std::int64_t ns,
                                std::error_code& ec) const {
  const struct timespec ts[2] = {{0, UTIME_OMIT}, to_timespec(ns)};
  if (name == ".") return check(::futimens(d.fd(), ts), ec);
#if defined(__linux__) && defined(O_PATH)
  {
    const path_fd p(d.fd(), name, ec);
    if (ec) return;
    if (!S_ISLNK(p.st.st_mode)) {  // a link's own times: by name, below
      if (::utimensat(AT_FDCWD, proc_fd_path(p.fd).c_str(), ts, 0) == 0) return ec.clear();
      if (errno != ENOENT) return set_errno(ec);
    }
  }
#endif
  check(::utimensat(d.fd(), name.c_str(), ts, AT_SYMLINK_NOFOLLOW), ec);
}

inline void posix_fs::set_owner(dir_handle& d, const std::string& name, std::int64_t uid, std::int64_t gid,
                                std::error_code& ec) const {
  const auto u = static_cast<uid_t>(uid < 0 ? static_cast<uid_t>(-1) : static_cast<uid_t>(uid));
  const auto g = static_cast<gid_t>(gid < 0 ? static_cast<gid_t>(-1) : static_cast<gid_t>(gid));
  if (name == ".") return check(::fchown(d.fd(), u, g), ec);
#if defined(__linux__) && defined(O_PATH) && defined(AT_EMPTY_PATH)
  {
    const path_fd p(d.fd(), name, ec);
    if (ec) return;
    return check(::fchownat(p.fd, "", u, g, AT_EMPTY_PATH), ec);  // the link itself, for a link
  }
#endif
  check(::fchownat(d.fd(), name.c_str(), u, g, AT_SYMLINK_NOFOLLOW), ec);
}

inline void posix_fs::touch_seen(dir_handle& d, const std::string& name, const stat_info& seen, bool mtime,
                                 std::int64_t ns, bool mode, std::uint32_t bits, std::error_code& ec) const {
#if defined(__linux__) && defined(O_PATH)
  {
    const path_fd p(d.fd(), name, ec);
    if (ec) return;
    if ((seen.type != file_type::unknown && from_mode(p.st.st_mode) != seen.type) ||
        (seen.ino != 0 && static_cast<std::uint64_t>(p.st.st_ino) != seen.ino))
      return ec = std::make_error_code(std::errc::file_exists), void();
    const std::string self = proc_fd_path(p.fd);
    const struct timespec ts[2] = {{0, UTIME_OMIT}, to_timespec(ns)};
    if (mode && S_ISLNK(p.st.st_mode)) return ec = std::make_error_code(std::errc::operation_not_supported), void();
    bool proc = true;
    if (mtime && ::utimensat(AT_FDCWD, self.c_str(), ts, 0) != 0) {
      if (errno != ENOENT) return set_errno(ec);
      proc = false;
    }
    if (proc && mode && ::chmod(self.c_str(), static_cast<mode_t>(bits)) != 0) {
      if (errno != ENOENT) return set_errno(ec);
      proc = false;
    }
    if (proc) return ec.clear();
    // no /proc: by name below
  }
#else
  (void)seen;
#endif
  if (mtime) set_mtime(d, name, ns, ec);
  if (!ec && mode) set_mode(d, name, bits, ec);
}

inline void posix_fs::check_made_dir(dir_handle& h, std::error_code& ec) const {
  struct ::stat cur;
  if (::fstat(h.fd(), &cur) != 0) return set_errno(ec);
  if (!S_ISDIR(cur.st_mode) || cur.st_uid != euid_ || (cur.st_mode & 0077) != 0)
    return ec = std::make_error_code(std::errc::file_exists), void();
  ec.clear();
}

inline void posix_fs::make_special(dir_handle& d, const std::string& name, const stat_info& st,
                                   std::error_code& ec) const {
  mode_t type = 0;
  switch (st.type) {
    case file_type::fifo: type = S_IFIFO; break;
    case file_type::socket: type = S_IFSOCK; break;
    case file_type::block: type = S_IFBLK; break;
    case file_type::character: type = S_IFCHR; break;
    default: ec = std::make_error_code(std::errc::invalid_argument); return;
  }
  check(::mknodat(d.fd(), name.c_str(), type | 0600, static_cast<dev_t>(st.rdev)), ec);
}

inline void posix_fs::settle_special(dir_handle& d, const std::string& name, const stat_info& st, bool owner,
                                     bool group, std::error_code& ec) const {
#if defined(__linux__) && defined(O_PATH) && defined(AT_EMPTY_PATH)
  const fd_guard f(::openat(d.fd(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (f.fd < 0) return set_errno(ec);
  struct ::stat cur;
  if (::fstat(f.fd, &cur) != 0) return set_errno(ec);
  const bool device = st.type == file_type::block || st.type == file_type::character;
  if (from_mode(cur.st_mode) != st.type || cur.st_uid != euid_ || cur.st_nlink != 1 ||
      (device && static_cast<std::uint64_t>(cur.st_rdev) != st.rdev))
    return ec = std::make_error_code(std::errc::file_exists), void();
  if (owner || group) {
    const uid_t u = owner ? static_cast<uid_t>(st.uid) : static_cast<uid_t>(-1);
    const gid_t g = group ? static_cast<gid_t>(st.gid) : static_cast<gid_t>(-1);
    if (::fchownat(f.fd, "", u, g, AT_EMPTY_PATH) != 0) return set_errno(ec);
  }
  const std::string self = proc_fd_path(f.fd);
  if (::chmod(self.c_str(), static_cast<mode_t>(st.mode & 07777)) != 0)
    return errno == ENOENT ? void(ec = std::make_error_code(std::errc::operation_not_supported)) : set_errno(ec);
  const struct timespec ts[2] = {{0, UTIME_OMIT}, to_timespec(st.mtime_ns)};
  check(::utimensat(AT_FDCWD, self.c_str(), ts, 0), ec);
#else
  (void)d, (void)name, (void)st, (void)owner, (void)group;
  ec = std::make_error_code(std::errc::operation_not_supported);
#endif
}

inline void posix_fs::settle_link(dir_handle& d, const std::string& name, const std::string& target,
                                  const stat_info& st, bool owner, bool group, bool mtime,
                                  std::error_code& ec) const {
  const struct timespec ts[2] = {{0, UTIME_OMIT}, to_timespec(st.mtime_ns)};
#if defined(__linux__) && defined(O_PATH) && defined(AT_EMPTY_PATH)
  const fd_guard f(::openat(d.fd(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (f.fd < 0) return set_errno(ec);
  struct ::stat cur;
  if (::fstat(f.fd, &cur) != 0) return set_errno(ec);
  if (!made_link(cur, target) || !holds_target(f.fd, target))
    return ec = std::make_error_code(std::errc::file_exists), void();
  if (owner || group) {
    const uid_t u = owner ? static_cast<uid_t>(st.uid) : static_cast<uid_t>(-1);
    const gid_t g = group ? static_cast<gid_t>(st.gid) : static_cast<gid_t>(-1);
    if (::fchownat(f.fd, "", u, g, AT_EMPTY_PATH) != 0) return set_errno(ec);
  }
  if (mtime && ::utimensat(AT_FDCWD, proc_fd_path(f.fd).c_str(), ts, 0) != 0)
    return errno == ENOENT ? void(ec = std::make_error_code(std::errc::operation_not_supported)) : set_errno(ec);
  ec.clear();
#else
  if (owner || group) return ec = std::make_error_code(std::errc::operation_not_supported), void();
  struct ::stat cur;
  if (::fstatat(d.fd(), name.c_str(), &cur, AT_SYMLINK_NOFOLLOW) != 0) return set_errno(ec);
  if (!made_link(cur, target)) return ec = std::make_error_code(std::errc::file_exists), void();
  if (mtime) return check(::utimensat(d.fd(), name.c_str(), ts, AT_SYMLINK_NOFOLLOW), ec);
  ec.clear();
#endif
}

inline std::vector<std::int64_t> posix_fs::user_groups() const {
  std::vector<std::int64_t> out{static_cast<std::int64_t>(::getegid())};
  const int n = ::getgroups(0, nullptr);
  if (n > 0) {
    std::vector<gid_t> g(static_cast<std::size_t>(n));
    const int got = ::getgroups(n, g.data());
    for (int i = 0; i < got; ++i) out.push_back(static_cast<std::int64_t>(g[static_cast<std::size_t>(i)]));
  }
  return out;
}

inline std::int64_t posix_fs::now() const noexcept {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline time_model posix_fs::timestamps(dir_handle& d, std::error_code& ec) const {
  struct ::stat st;
  if (::fstat(d.fd(), &st) != 0) return set_errno(ec), time_model{};
  ec.clear();
  const bool local = local_with_ctime(d.fd());
  time_model m = judge_timestamps(convert(st), local);
  m.link_meta = local;  // setting a link's own times elsewhere may follow it (sshfs)
  return m;
}

inline time_model posix_fs::judge_timestamps(const stat_info& dir, bool known_ctime) noexcept {
  time_model m;
  std::int64_t unit = 1;
  const bool fine = known_ctime && (dir.mtime_ns % 1000000000 != 0 || dir.ctime_ns % 1000000000 != 0);
  while (!fine && unit < 1000000000 && dir.mtime_ns % (unit * 10) == 0 && dir.ctime_ns % (unit * 10) == 0)
    unit *= 10;
  m.resolution_ns = unit;
  m.ctime = known_ctime || !(unit == 1000000000 && dir.ctime_ns == dir.mtime_ns);
  return m;
}

inline bool posix_fs::made_link(const struct ::stat& cur, const std::string& target) const noexcept {
  return S_ISLNK(cur.st_mode) && cur.st_uid == euid_ && cur.st_nlink == 1 &&
         static_cast<std::uint64_t>(cur.st_size) == target.size();
}

#if defined(__linux__) && defined(O_PATH) && defined(AT_EMPTY_PATH)
inline bool posix_fs::holds_target(int fd, const std::string& target) {
  std::string buf(target.size() + 1, '\0');
  const ::ssize_t n = ::readlinkat(fd, "", buf.data(), buf.size());
  return n >= 0 && static_cast<std::size_t>(n) == target.size() && buf.compare(0, target.size(), target) == 0;
}
#endif

inline void posix_fs::finish_copy(int in, int out, const stat_info& expected, const copy_options& opt,
                                  bool direct_mode, copy_result& res, std::error_code& ec) {
  if (expected.size == 0) {
    // Nothing was copied, so nothing showed the end: a regular file that says 0 bytes may still
    // have content (/proc): one byte read past the end tells, and means "changed".
    char probe;
    ::ssize_t n;
    do n = ::read(in, &probe, 1);
    while (n < 0 && errno == EINTR);
    if (n != 0) return n < 0 ? set_errno(ec) : void(ec = errc::changed_during_copy);
  }
  res.destination_failed = true;  // the copy's metadata: a failure from here on is the destination's
  const auto fail = [&] { set_errno(ec); };
  if (opt.owner || opt.group) {  // before the chmod: a chown clears set-user/group-ID bits
    const uid_t u = opt.owner ? static_cast<uid_t>(expected.uid) : static_cast<uid_t>(-1);
    const gid_t g = opt.group ? static_cast<gid_t>(expected.gid) : static_cast<gid_t>(-1);
    if (::fchown(out, u, g) != 0) return fail();
  }
  if (opt.xattrs) {
    copy_fd_xattrs(in, out, ec);
    if (ec) return;
  }
  if (!direct_mode && ::fchmod(out, static_cast<mode_t>(expected.mode)) != 0) return fail();
  const struct timespec ts[2] = {{0, UTIME_OMIT}, to_timespec(expected.mtime_ns)};
  if (::futimens(out, ts) != 0) return fail();
  if (opt.sync && ::fsync(out) != 0) return fail();
  res.destination_failed = false;
}

#endif  // TREESYNC_HAS_POSIX

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_POSIX_FS_HPP
