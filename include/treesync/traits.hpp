// treesync/traits.hpp - how a policy is recognised, the filesystem requirements, the policy pack
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_TRAITS_HPP
#define TREESYNC_TRAITS_HPP

#include "filter.hpp"
#include "policies.hpp"

namespace treesync {
inline namespace v0 {

// [treesync.traits] -----------------------------------------------------------------------------
//
// Policies are recognised by what they can do, not by a base class.  Each category has a trait
// (`is_compare_policy_v<P>`) and, under C++20, a concept of the same meaning (`compare_policy<P>`).

namespace detail {
template <class P, class = void>
struct compare_like : std::false_type {};
template <class P>
struct compare_like<P, std::void_t<decltype(bool(std::declval<const P&>().up_to_date(std::declval<const file_pair&>())))>>
    : std::true_type {};

template <class P, class = void>
struct deletion_like : std::false_type {};
template <class P>
struct deletion_like<P, std::void_t<decltype(bool(std::declval<const P&>().removes(std::declval<std::string_view>(),
                                                                                  std::declval<file_type>(), true))),
                                    decltype(std::size_t(std::declval<const P&>().limit()))>> : std::true_type {};

template <class P, class = void>
struct links_like : std::false_type {};
template <class P>
struct links_like<P, std::enable_if_t<std::is_same_v<decltype(std::declval<const P&>().on_symlink(
                                                         std::declval<std::string_view>(),
                                                         std::declval<std::string_view>(), true)),
                                                     link_action>>> : std::true_type {};

template <class P, class = void>
struct write_like : std::false_type {};
template <class P>
struct write_like<P, std::void_t<decltype(bool(P::atomic))>> : std::true_type {};

template <class P, class = void>
struct errors_like : std::false_type {};
template <class P>
struct errors_like<P, std::void_t<decltype(bool(P::stop_on_error))>> : std::true_type {};

template <class P, class = void>
struct observer_like : std::false_type {};
template <class P>
struct observer_like<P, std::void_t<decltype(std::declval<P&>()(std::declval<const action&>()))>> : std::true_type {};

template <class P, class = void>
struct compare_restamps : std::false_type {};
template <class P>
struct compare_restamps<P, std::void_t<decltype(P::restamp)>> : std::bool_constant<P::restamp> {};
template <class P, class = void>
struct has_restamp_fn : std::false_type {};
template <class P>
struct has_restamp_fn<P, std::void_t<decltype(bool(std::declval<const P&>().restamp()))>> : std::true_type {};
/// Whether a compare policy re-stamps the mtime of a file it finds current (see the requirement).
template <class P>
bool restamps(const P& p) {
  if constexpr (has_restamp_fn<P>::value)
    return p.restamp();
  else
    return compare_restamps<P>::value;
}

template <class P, class = void>
struct compare_keeps_newer : std::false_type {};
template <class P>
struct compare_keeps_newer<P, std::void_t<decltype(P::keep_newer)>> : std::bool_constant<P::keep_newer> {};
template <class P, class = void>
struct has_keep_newer_fn : std::false_type {};
template <class P>
struct has_keep_newer_fn<P, std::void_t<decltype(bool(std::declval<const P&>().keep_newer()))>> : std::true_type {};
/// Whether a compare policy keeps a destination file newer than its source as it is (rsync -u):
/// then such a file is left entirely alone, its mode, owner and times too.
template <class P>
bool keeps_newer(const P& p) {
  if constexpr (has_keep_newer_fn<P>::value)
    return p.keep_newer();
  else
    return compare_keeps_newer<P>::value;
}

template <class P, class = void>
struct links_needs_target : std::true_type {};
template <class P>
struct links_needs_target<P, std::void_t<decltype(P::needs_target)>> : std::bool_constant<P::needs_target> {};
}  // namespace detail

template <class P>
inline constexpr bool is_compare_policy_v = detail::compare_like<std::decay_t<P>>::value;
template <class P>
inline constexpr bool is_deletion_policy_v = detail::deletion_like<std::decay_t<P>>::value;
template <class P>
inline constexpr bool is_links_policy_v = detail::links_like<std::decay_t<P>>::value;
template <class P>
inline constexpr bool is_exclude_policy_v =
    detail::has_excluded_member<std::decay_t<P>>::value || detail::is_exclude_callable<std::decay_t<P>>::value;
template <class P>
inline constexpr bool is_write_policy_v = detail::write_like<std::decay_t<P>>::value;
template <class P>
inline constexpr bool is_errors_policy_v = detail::errors_like<std::decay_t<P>>::value;
template <class P>
inline constexpr bool is_observer_policy_v =
    detail::observer_like<std::decay_t<P>>::value && !is_exclude_policy_v<P>;
template <class P>
inline constexpr bool is_dry_run_policy_v = std::is_same_v<std::decay_t<P>, dry_run_t>;
template <class P>
inline constexpr bool is_allow_empty_source_policy_v = std::is_same_v<std::decay_t<P>, allow_empty_source_t>;
template <class P>
inline constexpr bool is_jobs_policy_v = std::is_same_v<std::decay_t<P>, jobs>;
template <class P>
inline constexpr bool is_cancel_policy_v = std::is_same_v<std::decay_t<P>, cancel_on>;
template <class P>
inline constexpr bool is_options_v = std::is_same_v<std::decay_t<P>, options>;
namespace detail {
// Which member of `options` a switch's tag sets (the switch table, policies.hpp).
#define TREESYNC_FLAG_MEMBER_OF(member, tag, state, cli, help) \
  constexpr auto switch_member(tag##_t) { return &options::member; }
TREESYNC_FLAGS(TREESYNC_FLAG_MEMBER_OF)
#undef TREESYNC_FLAG_MEMBER_OF
#define TREESYNC_VALUE_MEMBER_OF(member, type, def, tag, state, cli, help) \
  constexpr auto switch_member(tag) { return &options::member; }
TREESYNC_VALUES(TREESYNC_VALUE_MEMBER_OF)
#undef TREESYNC_VALUE_MEMBER_OF
template <class P, class = void>
struct is_switch_tag : std::false_type {};
template <class P>
struct is_switch_tag<P, std::void_t<decltype(switch_member(std::declval<P>()))>> : std::true_type {};
}  // namespace detail

/// A switch's tag (the switch table: durable, max_size{n}, ...).
template <class P>
inline constexpr bool is_switch_tag_v = detail::is_switch_tag<std::decay_t<P>>::value;

/// The flags: each is a category of its own (dry_run and allow_empty_source have theirs).
template <class P>
inline constexpr bool is_flag_policy_v =
    (is_switch_tag_v<P> && !std::is_same_v<std::decay_t<P>, dry_run_t> &&
     !std::is_same_v<std::decay_t<P>, allow_empty_source_t>) ||
    std::is_same_v<std::decay_t<P>, backup_dir> || std::is_same_v<std::decay_t<P>, frontier> ||
    std::is_same_v<std::decay_t<P>, subtree> || std::is_same_v<std::decay_t<P>, state_file>;
/// The verify levels (verify::full, verify::dirs, verify::none): one category.
template <class P>
inline constexpr bool is_verify_policy_v = std::is_same_v<std::decay_t<P>, verify::full_t> ||
                                           std::is_same_v<std::decay_t<P>, verify::dirs_t> ||
                                           std::is_same_v<std::decay_t<P>, verify::none_t>;

/// How many categories P belongs to: a policy must belong to exactly one.
template <class P>
inline constexpr int policy_category_count_v =
    int(is_compare_policy_v<P>) + int(is_deletion_policy_v<P>) + int(is_links_policy_v<P>) +
    int(is_exclude_policy_v<P>) + int(is_write_policy_v<P>) + int(is_errors_policy_v<P>) +
    int(is_observer_policy_v<P>) + int(is_dry_run_policy_v<P>) + int(is_allow_empty_source_policy_v<P>) +
    int(is_jobs_policy_v<P>) + int(is_cancel_policy_v<P>) + int(is_flag_policy_v<P>) + int(is_options_v<P>) +
    int(is_verify_policy_v<P>);

template <class P>
inline constexpr bool is_policy_v = policy_category_count_v<P> == 1;

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
template <class P>
concept compare_policy = is_compare_policy_v<P>;
template <class P>
concept deletion_policy = is_deletion_policy_v<P>;
template <class P>
concept links_policy = is_links_policy_v<P>;
template <class P>
concept exclude_policy = is_exclude_policy_v<P>;
template <class P>
concept write_policy = is_write_policy_v<P>;
template <class P>
concept errors_policy = is_errors_policy_v<P>;
template <class P>
concept observer_policy = is_observer_policy_v<P>;
template <class P>
concept policy = is_policy_v<P>;
#endif

/// The filesystem requirements.  Every operation reports failure through its last
/// `std::error_code&` argument; names are single path components; `"."` names the handle itself.
///
///   using dir_handle = ...;                                           // movable
///   stat_info  stat_path(const path&, bool follow, error_code&);      // for the guards
///   path       canonical(const path&, error_code&);
///   dir_handle open_root(const path&, error_code&);
///   void       make_root(const path&, std::uint32_t mode, error_code&);
///   std::vector<dir_entry> list(dir_handle&, error_code&);
///   stat_info  stat(dir_handle&, const std::string& name, bool follow, error_code&);
///   dir_handle open_dir(dir_handle&, const std::string& name, bool follow, error_code&);
///   copy_result copy_file(dir_handle& src, const std::string& name, dir_handle& dst,
///                         const std::string& dst_name, const stat_info& expected,
///                         const copy_options&, error_code&);
///        // copies data into dst_name (created exclusively, or truncated when `replace`);
///        // if the source's size and mtime after the copy still equal `expected`'s, applies
///        // expected.mode and expected.mtime_ns to the new file, else fails with
///        // errc::changed_during_copy and leaves the new file's mtime alone.
///   bool       same_content(dir_handle&, const std::string&, bool follow,
///                           dir_handle&, const std::string&, error_code&);
///   void set_mode(dir_handle&, const std::string&, std::uint32_t, error_code&);
///   void set_mtime(dir_handle&, const std::string&, std::int64_t ns, error_code&);   // no follow
///   void rename(dir_handle&, const std::string& from, const std::string& to, error_code&);
///   void remove(dir_handle&, const std::string&, error_code&);       // a non-directory
///   void remove_dir(dir_handle&, const std::string&, error_code&);   // an empty directory
///   void make_dir(dir_handle&, const std::string&, std::uint32_t mode, error_code&);
///   void make_symlink(dir_handle&, const std::string& name, const std::string& target, error_code&);
///   std::string read_link(dir_handle&, const std::string&, error_code&);
///   std::int64_t now();              // the clock the filesystem stamps ctimes with (ns)
///   std::int64_t racy_window();      // timestamp granularity + clock slack (ns)
///   // and, for the policies that use them:
///   void set_owner(dir_handle&, const std::string&, std::int64_t uid, std::int64_t gid, error_code&);  // -1: keep
///   void make_special(dir_handle&, const std::string&, const stat_info&, error_code&);  // FIFO, socket, device
///   void link(dir_handle& target_dir, const std::string& target, dir_handle&, const std::string&, error_code&);
///   void move(dir_handle& from, const std::string&, dir_handle& to, const std::string&, error_code&);
///   void copy_xattrs(dir_handle& src, dir_handle& dst, error_code&);
///   void sync_dir(dir_handle&, error_code&);
/// Each missing or mistyped operation is named by its own static_assert when sync() is called.
/// Optional:
///   time_model timestamps(dir_handle&, error_code&);  // what the filesystem under a directory
///                                                      // keeps; absent: ns mtimes and a ctime
///   template <class Take>                                         // the state file (state_file), by
///   void read_state(dir_handle&, const std::string&, Take&&, error_code&);  // its directory and name:
///   void save_state(dir_handle&, const std::string&, std::string_view, error_code&);
///   void drop_state(dir_handle&, const std::string&, error_code&);
///     read_state hands the content to take(std::string_view) -> bool in pieces (false: stop); a
///     missing file is ENOENT, and anything but a regular file is errc::state_not_regular, never
///     opened (a FIFO or device) and never followed (a link); save_state replaces the file
///     atomically and drop_state removes it, each refusing (errc::state_not_regular) a name that
///     holds anything but a regular file.  Absent: no state file is kept.
namespace detail {
struct state_piece_probe {  // what read_state's callback is called with
  bool operator()(std::string_view) const { return true; }
};
template <class FS, class = void>
struct has_state_ops : std::false_type {};
template <class FS>
struct has_state_ops<
    FS, std::void_t<decltype(std::declval<FS&>().read_state(std::declval<typename FS::dir_handle&>(),
                                                            std::declval<const std::string&>(), state_piece_probe{},
                                                            std::declval<std::error_code&>())),
                    decltype(std::declval<FS&>().save_state(std::declval<typename FS::dir_handle&>(),
                                                            std::declval<const std::string&>(),
                                                            std::declval<std::string_view>(),
                                                            std::declval<std::error_code&>())),
                    decltype(std::declval<FS&>().drop_state(std::declval<typename FS::dir_handle&>(),
                                                            std::declval<const std::string&>(),
                                                            std::declval<std::error_code&>()))>>
    : std::true_type {};

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
}  // namespace detail

template <class FS>
inline constexpr bool is_filesystem_v = detail::filesystem_like<std::decay_t<FS>>::value;

namespace detail {
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

// [treesync.api] --------------------------------------------------------------------------------
//
//   report sync(src, dst, policies...);                 // posix_fs; throws filesystem_error
//   report sync(src, dst, policies..., error_code& ec);  // never throws filesystem_error
//   report sync(fs, src, dst, policies... [, ec]);       // any filesystem (mock_fs, posix_fs, ...)
//
// Throws (or sets ec) only when the run is refused before touching anything (source missing or
// not a directory, same or nested directories, empty source, max_delete exceeded, destination
// root cannot be created) or stopped by errors::stop.  Per-entry failures are in report::errors.


// [treesync.detail.pack] ------------------------------------------------------------------------

namespace detail {

template <template <class> class Is, class Default>
Default& pick(Default& d) {
  return d;
}
template <template <class> class Is, class Default, class P, class... Rest>
decltype(auto) pick(Default& d, P& p, Rest&... rest) {
  if constexpr (Is<std::decay_t<P>>::value)
    return (p);
  else
    return pick<Is>(d, rest...);
}

template <template <class> class Is, class... Ps>
inline constexpr int count_in_pack = (0 + ... + int(Is<std::decay_t<Ps>>::value));

template <class P>
struct is_compare : std::bool_constant<is_compare_policy_v<P>> {};
template <class P>
struct is_deletion : std::bool_constant<is_deletion_policy_v<P>> {};
template <class P>
struct is_links : std::bool_constant<is_links_policy_v<P>> {};
template <class P>
struct is_exclude : std::bool_constant<is_exclude_policy_v<P>> {};
template <class P>
struct is_write : std::bool_constant<is_write_policy_v<P>> {};
template <class P>
struct is_errors : std::bool_constant<is_errors_policy_v<P>> {};
template <class P>
struct is_observer : std::bool_constant<is_observer_policy_v<P>> {};
template <class P>
struct is_dry_run : std::bool_constant<is_dry_run_policy_v<P>> {};
template <class P>
struct is_allow_empty : std::bool_constant<is_allow_empty_source_policy_v<P>> {};
template <class P>
struct is_jobs : std::bool_constant<is_jobs_policy_v<P>> {};
template <class P>
struct is_cancel : std::bool_constant<is_cancel_policy_v<P>> {};
template <class P>
struct is_options : std::bool_constant<is_options_v<P>> {};
template <class P>
struct is_verify : std::bool_constant<is_verify_policy_v<P>> {};
template <class F>
struct is_exactly {
  template <class P>
  struct test : std::is_same<std::decay_t<P>, F> {};
};
template <class F, class... Ps>
inline constexpr bool has_flag = count_in_pack<is_exactly<F>::template test, Ps...> > 0;

// Near misses: a type that names a category's member (or has a call operator) without meeting its
// requirement gets a hint naming the category and the expected signature.
template <class P, class = void>
struct names_up_to_date : std::false_type {};
template <class P>
struct names_up_to_date<P, std::void_t<decltype(&P::up_to_date)>> : std::true_type {};
template <class P, class = void>
struct names_removes : std::false_type {};
template <class P>
struct names_removes<P, std::void_t<decltype(&P::removes)>> : std::true_type {};
template <class P, class = void>
struct names_on_symlink : std::false_type {};
template <class P>
struct names_on_symlink<P, std::void_t<decltype(&P::on_symlink)>> : std::true_type {};
template <class P, class = void>
struct names_excluded : std::false_type {};
template <class P>
struct names_excluded<P, std::void_t<decltype(&P::excluded)>> : std::true_type {};
template <class P, class = void>
struct names_call : std::false_type {};
template <class P>
struct names_call<P, std::void_t<decltype(&P::operator())>> : std::true_type {};

template <class P>
constexpr bool check_one_policy() {
  constexpr bool none = policy_category_count_v<P> == 0;
  static_assert(!(none && names_up_to_date<P>::value),
                "treesync::sync: this looks like a compare policy, but its up_to_date is not "
                "`bool up_to_date(const treesync::file_pair&) const` (is it const? does it take the pair "
                "by const reference?)");
  static_assert(!(none && names_removes<P>::value),
                "treesync::sync: this looks like a deletion policy, but it lacks `bool removes(std::string_view "
                "rel, treesync::file_type, bool excluded) const` or `std::size_t limit() const`");
  static_assert(!(none && names_on_symlink<P>::value),
                "treesync::sync: this looks like a links policy, but its on_symlink is not "
                "`treesync::link_action on_symlink(std::string_view rel, std::string_view target, bool inside) "
                "const`");
  static_assert(!(none && names_excluded<P>::value),
                "treesync::sync: this looks like an exclude policy, but its excluded is not "
                "`bool excluded(std::string_view rel, treesync::file_type) const`");
  static_assert(!(none && names_call<P>::value),
                "treesync::sync: this callable is neither an observer, callable as `void(const treesync::action&)`, "
                "nor an exclude predicate, callable as `bool(std::string_view rel, treesync::file_type)`");
  static_assert(policy_category_count_v<P> != 0,
                "treesync::sync: an argument is not a treesync policy (no category's requirements are met: "
                "compare, deletion, links, exclude, write, errors, observer, jobs, cancel_on, options, or a flag such as "
                "dry_run)");
  static_assert(policy_category_count_v<P> <= 1,
                "treesync::sync: an argument meets the requirements of more than one policy category; "
                "make it satisfy exactly one");
  return true;
}

/// Whether P resembles some category without meeting it (check_one_policy gives it a hint).
template <class P>
inline constexpr bool resembles_policy_v = names_up_to_date<P>::value || names_removes<P>::value ||
                                           names_on_symlink<P>::value || names_excluded<P>::value ||
                                           names_call<P>::value;

template <class... Ps>
constexpr bool check_policies() {
  static_assert(count_in_pack<is_compare, Ps...> <= 1, "treesync::sync: more than one compare policy given");
  static_assert(count_in_pack<is_deletion, Ps...> <= 1, "treesync::sync: more than one deletion policy given");
  static_assert(count_in_pack<is_links, Ps...> <= 1, "treesync::sync: more than one links policy given");
  static_assert(count_in_pack<is_exclude, Ps...> <= 1,
                "treesync::sync: more than one exclude policy given (combine them with any_of / all_of)");
  static_assert(count_in_pack<is_write, Ps...> <= 1, "treesync::sync: more than one write policy given");
  static_assert(count_in_pack<is_errors, Ps...> <= 1, "treesync::sync: more than one errors policy given");
  static_assert(count_in_pack<is_observer, Ps...> <= 1, "treesync::sync: more than one observer given");
  static_assert(count_in_pack<is_dry_run, Ps...> <= 1, "treesync::sync: more than one dry_run given");
  static_assert(count_in_pack<is_allow_empty, Ps...> <= 1, "treesync::sync: more than one allow_empty_source given");
  static_assert(count_in_pack<is_jobs, Ps...> <= 1, "treesync::sync: more than one jobs (executor) policy given");
  static_assert(count_in_pack<is_cancel, Ps...> <= 1, "treesync::sync: more than one cancel_on given");
  static_assert(count_in_pack<is_options, Ps...> <= 1, "treesync::sync: more than one treesync::options given");
  static_assert((true && ... && (count_in_pack<is_exactly<std::decay_t<Ps>>::template test, Ps...> <= 1 ||
                                  !is_switch_tag_v<Ps>)),
                "treesync::sync: a switch (durable, specials, max_size, ...: the switch table) given twice");
  static_assert(count_in_pack<is_exactly<backup_dir>::template test, Ps...> <= 1,
                "treesync::sync: more than one backup_dir given");
  static_assert(count_in_pack<is_exactly<frontier>::template test, Ps...> <= 1,
                "treesync::sync: more than one frontier given");
  static_assert(count_in_pack<is_exactly<subtree>::template test, Ps...> <= 1,
                "treesync::sync: more than one subtree given");
  static_assert(count_in_pack<is_exactly<state_file>::template test, Ps...> <= 1,
                "treesync::sync: more than one state_file given");
  static_assert(count_in_pack<is_verify, Ps...> <= 1, "treesync::sync: more than one verify level given");
  return (true && ... && check_one_policy<std::decay_t<Ps>>());
}

}  // namespace detail

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_TRAITS_HPP
