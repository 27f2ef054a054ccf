// treesync/traits.hpp - how a policy is recognised, the policy pack (the filesystem contract: filesystem.hpp)
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_TRAITS_HPP
#define TREESYNC_TRAITS_HPP

#include "filter.hpp"
#include "filesystem.hpp"
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
    std::is_same_v<std::decay_t<P>, backup_dir> || std::is_same_v<std::decay_t<P>, temp_dir> ||
    std::is_same_v<std::decay_t<P>, frontier> ||
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

// The filesystem requirements, the optional operations and the capability flags are written in
// <treesync/filesystem.hpp> ([treesync.filesystem]): is_filesystem_v, filesystem_capabilities_v.

// [treesync.api] --------------------------------------------------------------------------------
//
//   report sync(src, dst, policies...);                 // posix_fs; throws filesystem_error
//   report sync(src, dst, policies..., error_code& ec);  // never throws filesystem_error
//   report sync(fs, src, dst, policies... [, ec]);       // any filesystem (mock_fs, posix_fs, ...)
//
// Throws (or sets ec) only when the run is refused before touching anything (source missing or
// not a directory, same or nested directories, empty source, destination root cannot be
// created), when max_delete is exceeded (the run is made but for its deletions: none of them;
// report::would_delete says how many) or stopped by errors::stop.  Per-entry failures are in
// report::errors.


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
  static_assert(count_in_pack<is_exactly<temp_dir>::template test, Ps...> <= 1,
                "treesync::sync: more than one temp_dir given");
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
