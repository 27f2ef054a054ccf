// treesync/detail/detect.hpp - how a filesystem's operations are detected and checked
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
// The contract these detectors check is written in <treesync/filesystem.hpp>; this header is the
// machinery only: one detector per operation (has_op<op_x, FS>), the optional groups
// (has_state_ops, has_timestamps), the capability merge behind filesystem_capabilities_v, and
// check_filesystem<FS>(), whose static_asserts name each missing or mistyped operation.
#ifndef TREESYNC_DETAIL_DETECT_HPP
#define TREESYNC_DETAIL_DETECT_HPP

#include "../core.hpp"

namespace treesync {
inline namespace v0 {

namespace detail {

// ---- the generic detector -------------------------------------------------------------------------

// One detector per operation the engine calls, so that a filesystem of one's own that lacks one,
// or declares it with other parameters, is told which (check_filesystem, from sync()).
template <class T>
T& lv();  // an lvalue of T, in unevaluated operands only
template <class FS>
using handle_of = typename FS::dir_handle;
template <template <class> class Op, class FS, class = void>
struct has_op : std::false_type {};
template <template <class> class Op, class FS>
struct has_op<Op, FS, std::void_t<Op<FS>>> : std::true_type {};

// ---- the required operations ----------------------------------------------------------------------

template <class FS>
using op_stat_path =
    decltype(lv<FS>().stat_path(lv<const std::filesystem::path>(), true, lv<std::error_code>()));
template <class FS>
using op_canonical = decltype(lv<FS>().canonical(lv<const std::filesystem::path>(), lv<std::error_code>()));
template <class FS>
using op_make_root =
    decltype(lv<FS>().make_root(lv<const std::filesystem::path>(), 0u, lv<std::error_code>()));
template <class FS>
using op_open_dir =
    decltype(lv<FS>().open_dir(lv<handle_of<FS>>(), lv<const std::string>(), true, lv<std::error_code>()));
template <class FS>
using op_copy_file = decltype(lv<FS>().copy_file(
    lv<handle_of<FS>>(), lv<const std::string>(), lv<handle_of<FS>>(), lv<const std::string>(),
    lv<const stat_info>(), lv<const copy_options>(), lv<std::error_code>()));
template <class FS>
using op_same_content = decltype(bool(lv<FS>().same_content(lv<handle_of<FS>>(), lv<const std::string>(),
                                                            true, lv<handle_of<FS>>(),
                                                            lv<const std::string>(), lv<std::error_code>())));
template <class FS>
using op_set_mode = decltype(lv<FS>().set_mode(lv<handle_of<FS>>(), lv<const std::string>(), std::uint32_t(0),
                                               lv<std::error_code>()));
template <class FS>
using op_set_mtime = decltype(lv<FS>().set_mtime(lv<handle_of<FS>>(), lv<const std::string>(),
                                                 std::int64_t(0), lv<std::error_code>()));
template <class FS>
using op_rename = decltype(lv<FS>().rename(lv<handle_of<FS>>(), lv<const std::string>(),
                                           lv<const std::string>(), lv<std::error_code>()));
template <class FS>
using op_remove =
    decltype(lv<FS>().remove(lv<handle_of<FS>>(), lv<const std::string>(), lv<std::error_code>()));
template <class FS>
using op_remove_dir =
    decltype(lv<FS>().remove_dir(lv<handle_of<FS>>(), lv<const std::string>(), lv<std::error_code>()));
template <class FS>
using op_make_dir = decltype(lv<FS>().make_dir(lv<handle_of<FS>>(), lv<const std::string>(), std::uint32_t(0),
                                               lv<std::error_code>()));
template <class FS>
using op_make_symlink = decltype(lv<FS>().make_symlink(lv<handle_of<FS>>(), lv<const std::string>(),
                                                       lv<const std::string>(), lv<std::error_code>()));
template <class FS>
using op_read_link = decltype(std::string(
    lv<FS>().read_link(lv<handle_of<FS>>(), lv<const std::string>(), lv<std::error_code>())));
template <class FS>
using op_now = decltype(std::int64_t(lv<FS>().now()));
template <class FS>
using op_set_owner = decltype(lv<FS>().set_owner(lv<handle_of<FS>>(), lv<const std::string>(),
                                                 std::int64_t(0), std::int64_t(0), lv<std::error_code>()));
template <class FS>
using op_make_special = decltype(lv<FS>().make_special(lv<handle_of<FS>>(), lv<const std::string>(),
                                                       lv<const stat_info>(), lv<std::error_code>()));
template <class FS>
using op_link = decltype(lv<FS>().link(lv<handle_of<FS>>(), lv<const std::string>(), lv<handle_of<FS>>(),
                                       lv<const std::string>(), lv<std::error_code>()));
template <class FS>
using op_move = decltype(lv<FS>().move(lv<handle_of<FS>>(), lv<const std::string>(), lv<handle_of<FS>>(),
                                       lv<const std::string>(), lv<std::error_code>()));
template <class FS>
using op_copy_xattrs =
    decltype(lv<FS>().copy_xattrs(lv<handle_of<FS>>(), lv<handle_of<FS>>(), lv<std::error_code>()));
template <class FS>
using op_sync_dir = decltype(lv<FS>().sync_dir(lv<handle_of<FS>>(), lv<std::error_code>()));

// ---- the optional operations ----------------------------------------------------------------------

// Operations a filesystem may offer to make a create-then-set sequence safe (posix_fs does):
// settle_special sets a just-made node's owner, mode and mtime through a descriptor checked to
// be that node; check_made_dir tells whether a just-made and opened directory is the run's own;
// user_id is the user the process acts as.  Without them the engine calls set_owner / set_mode /
// set_mtime by name (a filesystem with no other user, like mock_fs, needs no more).
template <class FS>
using op_settle_special = decltype(lv<FS>().settle_special(
    lv<handle_of<FS>>(), lv<const std::string>(), lv<const stat_info>(), true, true, lv<std::error_code>()));
// settle_link does the same for a just-made symlink holding a target (owner, group, mtime);
// touch_seen changes an existing entry's mtime and mode only when it is still the entry the walk
// stat'ed (type, inode).
template <class FS>
using op_settle_link = decltype(lv<FS>().settle_link(lv<handle_of<FS>>(), lv<const std::string>(),
                                                     lv<const std::string>(), lv<const stat_info>(), true, true,
                                                     true, lv<std::error_code>()));
template <class FS>
using op_touch_seen = decltype(lv<FS>().touch_seen(lv<handle_of<FS>>(), lv<const std::string>(),
                                                   lv<const stat_info>(), true, std::int64_t(0), true,
                                                   std::uint32_t(0), lv<std::error_code>()));
template <class FS>
using op_check_made_dir = decltype(lv<FS>().check_made_dir(lv<handle_of<FS>>(), lv<std::error_code>()));
template <class FS>
using op_user_id = decltype(std::int64_t(lv<const FS>().user_id()));
// The groups the user the process acts as belongs to (its effective group and supplementary
// groups): where user_id() is not 0, preserve_group gives an entry the source's group only when
// it is one of them (rsync -g as a user); absent, every group is tried.
template <class FS>
using op_user_groups = decltype(std::vector<std::int64_t>(lv<const FS>().user_groups()));

struct state_piece_probe {  // what read_state's callback is called with
  bool operator()(std::string_view) const { return true; }
};
template <class FS, class = void>
struct has_state_ops : std::false_type {};
template <class FS>
struct has_state_ops<
    FS, std::void_t<decltype(std::declval<FS&>().read_state(
                        std::declval<typename FS::dir_handle&>(), std::declval<const std::string&>(),
                        state_piece_probe{}, std::declval<std::error_code&>())),
                    decltype(std::declval<FS&>().save_state(
                        std::declval<typename FS::dir_handle&>(), std::declval<const std::string&>(),
                        std::declval<std::string_view>(), std::declval<std::error_code&>())),
                    decltype(std::declval<FS&>().drop_state(
                        std::declval<typename FS::dir_handle&>(), std::declval<const std::string&>(),
                        std::declval<std::error_code&>()))>> : std::true_type {};

template <class FS, class = void>
struct has_timestamps : std::false_type {};
template <class FS>
struct has_timestamps<FS, std::void_t<decltype(std::declval<FS&>().timestamps(
                              std::declval<typename FS::dir_handle&>(), std::declval<std::error_code&>()))>>
    : std::true_type {};

template <class FS, class = void>
struct filesystem_like : std::false_type {};
template <class FS>
struct filesystem_like<
    FS, std::void_t<typename FS::dir_handle,
                    decltype(std::declval<FS&>().list(std::declval<typename FS::dir_handle&>(),
                                                      std::declval<std::error_code&>())),
                    decltype(std::declval<FS&>().stat(std::declval<typename FS::dir_handle&>(),
                                                      std::declval<const std::string&>(), true,
                                                      std::declval<std::error_code&>())),
                    decltype(std::declval<FS&>().open_root(std::declval<const std::filesystem::path&>(),
                                                           std::declval<std::error_code&>())),
                    decltype(std::declval<FS&>().racy_window())>> : std::true_type {};

// ---- the checks sync() makes ------------------------------------------------------------------------

template <class FS>
constexpr bool check_filesystem() {
  static_assert(has_op<op_stat_path, FS>::value,
                "treesync: the filesystem lacks stat_info stat_path(const path&, bool follow, error_code&)");
  static_assert(has_op<op_canonical, FS>::value,
                "treesync: the filesystem lacks path canonical(const path&, error_code&)");
  static_assert(has_op<op_make_root, FS>::value,
                "treesync: the filesystem lacks void make_root(const path&, uint32_t mode, error_code&)");
  static_assert(has_op<op_open_dir, FS>::value,
                "treesync: the filesystem lacks dir_handle open_dir(dir_handle&, const string&, bool follow, "
                "error_code&)");
  static_assert(has_op<op_copy_file, FS>::value,
                "treesync: the filesystem lacks copy_result copy_file(dir_handle&, const string&, "
                "dir_handle&, const string&, const stat_info&, const copy_options&, error_code&)");
  static_assert(has_op<op_same_content, FS>::value,
                "treesync: the filesystem lacks bool same_content(dir_handle&, const string&, bool follow, "
                "dir_handle&, const string&, error_code&)");
  static_assert(
      has_op<op_set_mode, FS>::value,
      "treesync: the filesystem lacks void set_mode(dir_handle&, const string&, uint32_t, error_code&)");
  static_assert(
      has_op<op_set_mtime, FS>::value,
      "treesync: the filesystem lacks void set_mtime(dir_handle&, const string&, int64_t ns, error_code&)");
  static_assert(has_op<op_rename, FS>::value,
                "treesync: the filesystem lacks void rename(dir_handle&, const string& from, const string& "
                "to, error_code&)");
  static_assert(has_op<op_remove, FS>::value,
                "treesync: the filesystem lacks void remove(dir_handle&, const string&, error_code&)");
  static_assert(has_op<op_remove_dir, FS>::value,
                "treesync: the filesystem lacks void remove_dir(dir_handle&, const string&, error_code&)");
  static_assert(
      has_op<op_make_dir, FS>::value,
      "treesync: the filesystem lacks void make_dir(dir_handle&, const string&, uint32_t mode, error_code&)");
  static_assert(has_op<op_make_symlink, FS>::value,
                "treesync: the filesystem lacks void make_symlink(dir_handle&, const string& name, const "
                "string& target, error_code&)");
  static_assert(has_op<op_read_link, FS>::value,
                "treesync: the filesystem lacks string read_link(dir_handle&, const string&, error_code&)");
  static_assert(has_op<op_now, FS>::value, "treesync: the filesystem lacks int64_t now()");
  static_assert(has_op<op_set_owner, FS>::value,
                "treesync: the filesystem lacks void set_owner(dir_handle&, const string&, int64_t uid, "
                "int64_t gid, error_code&)");
  static_assert(has_op<op_make_special, FS>::value,
                "treesync: the filesystem lacks void make_special(dir_handle&, const string&, const "
                "stat_info&, error_code&)");
  static_assert(has_op<op_link, FS>::value,
                "treesync: the filesystem lacks void link(dir_handle& target_dir, const string& target, "
                "dir_handle&, const string&, error_code&)");
  static_assert(has_op<op_move, FS>::value,
                "treesync: the filesystem lacks void move(dir_handle& from, const string&, dir_handle& to, "
                "const string&, error_code&)");
  static_assert(
      has_op<op_copy_xattrs, FS>::value,
      "treesync: the filesystem lacks void copy_xattrs(dir_handle& src, dir_handle& dst, error_code&)");
  static_assert(has_op<op_sync_dir, FS>::value,
                "treesync: the filesystem lacks void sync_dir(dir_handle&, error_code&)");
  return true;
}
}  // namespace detail

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_DETECT_HPP
