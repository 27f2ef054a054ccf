// treesync/filesystem.hpp - the filesystem contract: what a backend must do for the engine
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_FILESYSTEM_HPP
#define TREESYNC_FILESYSTEM_HPP

#include "core.hpp"
#include "detail/detect.hpp"

namespace treesync {
inline namespace v0 {

// [treesync.filesystem] -------------------------------------------------------------------------
//
// The filesystem requirements.  sync(fs, src, dst, ...) accepts any type FS that provides the
// operations below: there is no base class, a backend is recognised by what it can do
// (is_filesystem_v<FS>; under C++20 the concept treesync::filesystem), and each missing or
// mistyped operation is named by its own static_assert when sync() is called.  Backends shipped:
// posix_fs (handles are descriptors, the *at() calls), std_fs (std::filesystem, paths), mock_fs
// (in memory, with fault injection, for tests).  examples/custom_fs.hpp is a small backend to
// start one's own from; tests/test_conformance.cpp checks a backend against this contract.
//
// ---- conventions ---------------------------------------------------------------------------------
//
//  - Every operation but now() and racy_window() reports failure through its last argument,
//    `std::error_code& ec`, cleared on success whatever it held on entry.  Errors are compared
//    with std::errc conditions (ENOENT, EEXIST, ...) and treesync::errc; use
//    std::make_error_code(std::errc::...) or the system category with an errno value.
//    Operations do not throw for a filesystem error.
//  - `name` arguments are single path components, never containing '/': the engine walks one
//    level at a time through handles.  `"."` names the handle's own directory (stat(d, ".", ...),
//    open_dir(d, ".", ...), set_mode(d, ".", ...), set_mtime(d, ".", ...)).  `".."` is passed only
//    to open_dir (see there).  Paths (std::filesystem::path) appear only at the roots.
//  - Times are nanoseconds since the Unix epoch; modes are the permission bits (07777).
//  - Nothing is followed unless the call says so (`follow`, copy_options::follow): a symlink is
//    an entry of its own, statted, read, removed and replaced as such.
//
// ---- the handle ------------------------------------------------------------------------------------
//
//   using dir_handle = ...;
//
// An open directory.  Default-constructible (the empty handle) and movable; it need not be
// copyable.  It names the directory it was opened on for as long as it lives: the engine opens
// each directory once and does everything inside it through the handle.  A backend whose handle
// keeps naming the same directory even after that directory is renamed or replaced by a symlink
// (posix_fs: a descriptor) protects a run against a tree changed under it; one whose handle is a
// path (std_fs, custom_fs) does not, and says so with capabilities().pinned_handles = false.
// The engine destroys handles it no longer needs and keeps a bounded number open (two per level
// for the first 128 levels of a walk, per thread; deeper directories are closed and reopened, see
// ".." below).
//
// ---- the required operations -------------------------------------------------------------------
//
// At the roots (paths as the user gave them):
//   stat_info  stat_path(const path& p, bool follow, error_code&);
//        the source and destination roots' metadata, for the guards (missing source:
//        errc::source_missing is reported; a destination that is not a directory: ENOTDIR).
//   path       canonical(const path& p, error_code&);
//        p absolute with every link resolved: the same/nested-directory guard compares these.
//   dir_handle open_root(const path& p, error_code&);
//        opens a root, following links; ENOENT when missing, ENOTDIR when not a directory.
//   void       make_root(const path& p, std::uint32_t mode, error_code&);
//        creates the destination root (one level: ENOENT when its parent is missing, reported
//        as errc::destination_parent_missing; no `mkdir -p`).
//
// Reading, through a handle:
//   std::vector<dir_entry> list(dir_handle& d, error_code&);
//        every name in d except "." and "..", in any order (the engine sorts); dir_entry::type
//        may be file_type::unknown, and then the engine stats.  A failure is reported against
//        the directory, and nothing below it is deleted (unreadable is not empty).
//   stat_info  stat(dir_handle& d, const string& name, bool follow, error_code&);
//        ENOENT when there is no such name (the engine takes the entry as vanished or absent).
//        type, size, mtime_ns, mode always; dev+ino: the identity (below); ctime_ns: the last
//        status change, or std::numeric_limits<int64_t>::max() if unknown (capabilities().ctime);
//        nlink, uid, gid, rdev, blocks where the filesystem knows them (defaults otherwise).
//        A symlink's size is the length of its target.
//   dir_handle open_dir(dir_handle& d, const string& name, bool follow, error_code&);
//        opens the directory `name` in d.  With follow == false a symlink is never followed:
//        std::errc::too_many_symbolic_link_levels (ELOOP) or std::errc::not_a_directory (Linux's
//        openat(O_DIRECTORY | O_NOFOLLOW) says ENOTDIR); a name that is not a directory:
//        std::errc::not_a_directory; a missing one: ENOENT.  The engine takes ELOOP and ENOTDIR
//        under a directory it was emptying as "swapped under the run" and leaves it alone.
//        `"."` opens d again (a second handle on the same directory).  `".."` opens d's parent:
//        the engine uses it to reopen a directory it closed (deep trees) and always checks the
//        result's identity by stat(h, ".") against the (dev, ino) it saw before, falling back to
//        opening down from an ancestor by name; so ".." may fail (any error) but must never
//        open a directory with the expected identity that is not d's parent.
//   std::string read_link(dir_handle& d, const string& name, error_code&);
//        a symlink's target, byte for byte; EINVAL when `name` is not a link.
//   bool       same_content(dir_handle& a, const string& an, bool follow, dir_handle& b,
//                           const string& bn, error_code&);
//        whether two regular files hold the same bytes (the racy-file check and verify::full);
//        anything but two regular files (the first followed only when `follow`): an error,
//        errc::special_file, or the error opening it gives (a directory: EISDIR).
//
// Writing, through a handle:
//   copy_result copy_file(dir_handle& src, const string& name, dir_handle& dst,
//                         const string& dst_name, const stat_info& expected,
//                         const copy_options& opt, error_code&);
//        copies the data of the regular file `name` into `dst_name`, created exclusively (EEXIST
//        if the name exists) or, with opt.replace, truncated in place.  The source is followed
//        only with opt.follow (else a symlink: ELOOP); a source that is not a regular file:
//        errc::special_file, or the error opening it gives (a directory: EISDIR).  If the
//        source's size and mtime after the copy still equal `expected`'s, applies expected.mode
//        and expected.mtime_ns to the new file (and the owner with opt.owner / opt.group,
//        extended attributes with opt.xattrs, fsync with opt.sync); else fails with
//        errc::changed_during_copy and leaves the new file's mtime alone (the engine removes it
//        and reports the entry).  A set *opt.cancel ends the copy with
//        std::errc::operation_canceled.  On failure, copy_result::destination_failed says whether
//        the destination side failed (ENOSPC, EROFS, ...): such errors are reported against the
//        destination.  The engine copies into a temporary name and renames it over the final one
//        (write::in_place: opt.replace on the final name itself).
//   void set_mode(dir_handle& d, const string& name, std::uint32_t mode, error_code&);
//        the permission bits; never called on a symlink.
//   void set_mtime(dir_handle& d, const string& name, std::int64_t ns, error_code&);
//        the modification time, never following a link: on a symlink it sets the link's own
//        time or, where that is impossible (capabilities().link_mtime == false), does nothing
//        and succeeds; stat then reports such links' mtime_ns as 0 on both sides.
//        A filesystem may keep a coarser time: see racy_window() and timestamps().
//   void rename(dir_handle& d, const string& from, const string& to, error_code&);
//        renames within d, replacing an existing non-directory `to` ATOMICALLY: at no moment is
//        `to` absent, and a failed rename leaves `to` as it was.  This is how every file, link
//        and special is installed (made under a temporary name, then renamed over the old one),
//        so a reader of the mirror never sees a half-written file.  A staged new directory is
//        renamed to a name that does not exist.  ENOENT when `from` is missing.
//   void remove(dir_handle& d, const string& name, error_code&);
//        removes a non-directory (a link itself, never its target); a directory: EISDIR (or
//        EPERM); missing: ENOENT, which the engine accepts as "already gone".
//   void remove_dir(dir_handle& d, const string& name, error_code&);
//        removes an empty directory; not empty: ENOTEMPTY (or EEXIST); not a directory: ENOTDIR;
//        missing: ENOENT (accepted).  Trees are emptied first, entry by entry, through handles.
//   void make_dir(dir_handle& d, const string& name, std::uint32_t mode, error_code&);
//        creates a directory; EEXIST when the name exists, whatever it is.
//   void make_symlink(dir_handle& d, const string& name, const string& target, error_code&);
//        creates a symlink holding `target` verbatim (never resolved); EEXIST when the name exists.
//   void set_owner(dir_handle& d, const string& name, std::int64_t uid, std::int64_t gid,
//                  error_code&);   // -1: keep; never follows.  Called only under preserve_owner /
//        preserve_group.  Without capabilities().owners: std::errc::operation_not_supported.
//   void make_special(dir_handle& d, const string& name, const stat_info& st, error_code&);
//        a FIFO, socket or device node of st.type (st.rdev); called only under `specials`.
//        Without capabilities().specials: std::errc::operation_not_supported.
//   void link(dir_handle& target_dir, const string& target, dir_handle& d, const string& name,
//             error_code&);
//        a hard link `name` in d to `target` in target_dir (hard_links); EEXIST when it exists.
//   void move(dir_handle& from, const string& name, dir_handle& to, const string& to_name,
//             error_code&);
//        rename across directories of the same filesystem (backup_dir, temp_dir); EXDEV is
//        reported (temp_dir then copies the file beside its final name and renames it).
//   void copy_xattrs(dir_handle& src, dir_handle& dst, error_code&);
//        a directory's extended attributes (xattrs); without capabilities().xattrs: a no-op.
//   void sync_dir(dir_handle& d, error_code&);
//        makes d's entries durable (durable: after the renames, before the run reports);
//        without capabilities().durable: a no-op.
//
// Clocks:
//   std::int64_t now();           // the clock the filesystem stamps ctimes with (ns)
//   std::int64_t racy_window();   // timestamp granularity + clock slack (ns): a file whose mtime
//                                 // is this close to its copy's ctime is verified by content
//
// ---- the optional operations -------------------------------------------------------------------
//
// Detected by their presence (a backend without them works: the engine does without):
//   time_model timestamps(dir_handle& d, error_code&);
//        what the filesystem under d keeps (mtime resolution, whether ctime is its own, whether
//        a link's own mtime can be set); absent: nanosecond mtimes and a ctime.
//   template <class Take> void read_state(dir_handle&, const string& name, Take&& take, error_code&);
//   void save_state(dir_handle&, const string& name, std::string_view text, error_code&);
//   void drop_state(dir_handle&, const string& name, error_code&);
//        the state file (state_file), by its directory and name: read_state hands the content to
//        take(std::string_view) -> bool in pieces (false: stop); a missing file is ENOENT, and
//        anything but a regular file is errc::state_not_regular, never opened (a FIFO or device)
//        and never followed (a link); save_state replaces the file atomically and drop_state
//        removes it, each refusing (errc::state_not_regular) a name that holds anything but a
//        regular file.  Absent: no state file is kept (a notice, errc::state_not_kept).
//   void settle_special(dir_handle&, const string& name, const stat_info&, bool owner, bool group,
//                       error_code&);
//   void settle_link(dir_handle&, const string& name, const string& target, const stat_info&,
//                    bool owner, bool group, bool mtime, error_code&);
//   void touch_seen(dir_handle&, const string& name, const stat_info& seen, bool mtime,
//                   std::int64_t ns, bool mode, std::uint32_t bits, error_code&);
//   void check_made_dir(dir_handle& just_made, error_code&);
//   std::int64_t user_id() const;
//        for filesystems with other users (posix_fs): owner, mode and mtime of a just-made special
//        set through a descriptor checked to be that node; whether a just-made, opened directory
//        is the run's own; the user the process acts as (a leftover temporary name someone else
//        owns is never removed).  settle_link: owner/group/mtime of the symlink just made, only
//        when the object at the name is still it (this user's link, one link, holding `target`;
//        else EEXIST, nothing changed); touch_seen: an existing entry's mtime/mode only when it
//        still has seen's type and inode (else EEXIST).  Absent: set_owner / set_mode /
//        set_mtime by name (mock_fs and std_fs have no other user to race with).
//        user_id() not 0: the run acts as that user, as rsync run unprivileged: preserve_owner is
//        ignored, preserve_group sets only the user's groups (user_groups below), specials skips
//        device nodes, a directory without write permission is opened up for a hard link (and
//        its mode given back).  Absent: the run acts as root.
//   std::vector<std::int64_t> user_groups() const;
//        the groups the user the process acts as may give its files (effective and supplementary;
//        posix_fs: getegid, getgroups), the first the group its new entries get outside a
//        set-group-ID directory (the effective group).  Absent: every group is tried (a failure
//        is reported), and a copy keeps a set-group-ID bit only with preserve_group.
//
// And one declaration, read through filesystem_capabilities_v<FS>:
//   static constexpr filesystem_capabilities capabilities();
//        what the required operations really do on this backend (below).  Absent: everything.
//        A run that asks for what it lacks (preserve_owner / preserve_group without owners,
//        specials, hard_links, xattrs, durable) is refused before anything is read or written
//        (errc::unsupported); the operations behind them must still exist (they are not called).
//
// ---- the semantics the engine relies on ----------------------------------------------------------
//
//  - Identity.  Two stat_infos with equal (dev, ino) are the same object, for as long as the run
//    holds a handle on it: the same/nested guards, symlink-cycle detection (links::follow),
//    reopening a closed directory, hard-link groups (hard_links, with nlink > 1) and
//    one_file_system (dev) all compare them.  A backend that has no inode numbers must make one
//    up that is stable within a run, at least for directories (std_fs: a hash of the canonical
//    path, dev 0; capabilities().file_identity = false when files have none).
//  - Atomic rename over an existing name (above): the mirror is never seen half-written.
//  - A failed operation changed nothing, or the engine is told by the error; a partial write is
//    never reported as success.  ENOENT means "not there" everywhere.
//  - Threads.  Under jobs{n} the engine calls one filesystem object from n threads at once, and
//    the entries of one directory may be spread over several threads: operations through the
//    same dir_handle run concurrently (never a move or destruction of a handle in use).  A
//    backend with shared mutable state locks it (mock_fs, custom_fs: one mutex); posix_fs and
//    std_fs are stateless.  jobs{1} (the default) calls from the caller's thread only.
//  - Listings are re-read each run; the engine caches nothing between runs but the state file.

/// What the required operations of a backend really do.  A backend declares its own with
/// `static constexpr filesystem_capabilities capabilities()`; the engine and the conformance
/// suite read them through filesystem_capabilities_v<FS>.  The last three members are not
/// declared: they are detected (the optional operations are present).
struct filesystem_capabilities {
  bool owners = true;          ///< set_owner changes owners; stat reports uid/gid
  bool specials = true;        ///< make_special makes FIFOs, sockets and device nodes
  bool hard_links = true;      ///< link makes hard links and stat reports nlink and file identity
  bool xattrs = true;          ///< copy_xattrs and copy_options::xattrs copy extended attributes
  bool durable = true;         ///< sync_dir and copy_options::sync reach stable storage
  bool link_mtime = true;      ///< a symlink's own mtime is reported by stat and set by set_mtime
  bool ctime = true;           ///< stat reports a ctime the filesystem keeps by itself
  bool file_identity = true;   ///< stat reports (dev, ino) for every entry, not directories only
  bool pinned_handles = true;  ///< a dir_handle keeps naming its directory if the name is swapped
  // detected:
  bool state_file = false;   ///< read_state / save_state / drop_state
  bool timestamps = false;   ///< timestamps(dir_handle&, error_code&)
  bool safe_create = false;  ///< settle_special, check_made_dir and user_id

  /// Everything on (the assumption for a backend that declares nothing).
  static constexpr filesystem_capabilities all() noexcept { return {}; }
};

namespace detail {
template <class FS, class = void>
struct declares_capabilities : std::false_type {};
template <class FS>
struct declares_capabilities<FS, std::void_t<decltype(filesystem_capabilities(FS::capabilities()))>>
    : std::true_type {};

template <class FS>
constexpr filesystem_capabilities capabilities_of() noexcept {
  filesystem_capabilities c = filesystem_capabilities::all();
  if constexpr (declares_capabilities<FS>::value)
    c = FS::capabilities();
  c.state_file = has_state_ops<FS>::value;
  c.timestamps = has_timestamps<FS>::value;
  c.safe_create = has_op<op_settle_special, FS>::value && has_op<op_check_made_dir, FS>::value &&
                  has_op<op_user_id, FS>::value;
  return c;
}
}  // namespace detail

/// Whether FS provides the core of the requirements (dir_handle, list, stat, open_root,
/// racy_window); sync() then checks every other operation one by one.
template <class FS>
inline constexpr bool is_filesystem_v = detail::filesystem_like<std::decay_t<FS>>::value;

/// What FS declares it can do, with its optional operations detected.
template <class FS>
inline constexpr filesystem_capabilities filesystem_capabilities_v =
    detail::capabilities_of<std::decay_t<FS>>();

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_FILESYSTEM_HPP
