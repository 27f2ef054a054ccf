// treesync/sync.hpp - sync(...): the policy pack folded into options, and the run
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_SYNC_HPP
#define TREESYNC_SYNC_HPP

#include "detail/engine.hpp"
#include "posix_fs.hpp"
#include "std_fs.hpp"

namespace treesync {
inline namespace v0 {

// [treesync.api.impl] ---------------------------------------------------------------------------

namespace detail {

// The one place where the argument spellings of the switches become `options`.  Arguments of the
// code-generating categories (compare, deletion, links, exclude, observer) and the options
// themselves fold to nothing.
template <class P>
void fold_option(options& o, const P& p) {
  using T = std::decay_t<P>;
  if constexpr (is_write_policy_v<T>) {
    o.write = T::atomic ? write_mode::atomic : write_mode::in_place;
  } else if constexpr (is_errors_policy_v<T>) {
    o.errors = T::stop_on_error ? error_mode::stop : error_mode::collect;
  } else if constexpr (is_switch_tag_v<T>) {  // the switch table: a flag's tag sets it, a value's carries it
    if constexpr (std::is_empty_v<T>)
      o.*switch_member(p) = true;
    else
      o.*switch_member(p) = p.value;
  } else if constexpr (std::is_same_v<T, jobs>) {
    o.jobs = p.n;
  } else if constexpr (std::is_same_v<T, cancel_on>) {
    o.cancel = p.flag;
  } else if constexpr (std::is_same_v<T, backup_dir>) {
    o.backup_dir = p.path;
  } else if constexpr (std::is_same_v<T, temp_dir>) {
    o.temp_dir = p.path;
  } else if constexpr (std::is_same_v<T, state_file>) {
    o.state = p.path;
    o.state_memory = p.max_memory;
  } else if constexpr (std::is_same_v<T, verify::full_t> || std::is_same_v<T, verify::dirs_t> ||
                       std::is_same_v<T, verify::none_t>) {
    o.verify = T::level;
  } else if constexpr (std::is_same_v<T, subtree>) {
    o.subtree = p.rel;
  } else if constexpr (std::is_same_v<T, frontier>) {
    o.frontier_depth = p.depth;
    if (p.on_subtree) o.on_subtree = [&p](std::string_view rel) { p.on_subtree(rel); };  // the caller's own object
  } else {
    (void)o;
    (void)p;
  }
}

/// Everything below sync<...>(): one function per filesystem type, whatever the policies (they
/// arrive as a policy_view).
template <class FS>
report run_core(FS& fs, const std::filesystem::path& src, const std::filesystem::path& dst, std::error_code& ec,
                const policy_view& pol, const run_options& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  report rep;
  // one walk, whatever the policies: under max_delete the deletions wait for its end and are
  // counted before the first (deferred_pass)
  engine<FS> eng(fs, pol, opt, rep);
  ec = eng.run(src, dst);
  rep.elapsed = std::chrono::steady_clock::now() - t0;
  return rep;
}

}  // namespace detail
}  // namespace v0
}  // namespace treesync

// The core compiled once (as {fmt}'s vformat): by default every translation unit that calls
// sync() instantiates run_core for its filesystem type (header-only).  A project may compile it in
// one translation unit instead: that one defines TREESYNC_CORE_INSTANTIATE before including
// treesync.hpp (treesync/engine.cpp is that file), every other one defines TREESYNC_SEPARATE_CORE
// (CMake: link treesync::core, which does both; Meson: treesync_core_dep).  Then a sync() call
// costs its caller the adapter above only: folding the arguments and a policy_view.
// TREESYNC_CORE_INSTANTIATE_POSIX_FS, _STD_FS or _MOCK_FS beside it instantiates that engine only:
// the libraries compile engine.cpp once for each, so that a program links only the engine it calls.
//
// The same for a filesystem of your own, at namespace scope, with its fully qualified name:
//   TREESYNC_ENGINE_EXTERN(my::fs)       where sync() is called with it (after its definition,
//                                        e.g. at the end of its header): those calls compile only
//                                        the adapter
//   TREESYNC_ENGINE_INSTANTIATE(my::fs)  in one .cpp of yours (after including treesync.hpp and
//                                        its header): the engine for my::fs, compiled there once
#define TREESYNC_ENGINE_SIGNATURE_(FS)                                                                     \
  ::treesync::report treesync::detail::run_core<FS>(FS&, const std::filesystem::path&,                      \
                                                     const std::filesystem::path&, std::error_code&,        \
                                                     const ::treesync::detail::policy_view&,                \
                                                     const ::treesync::detail::run_options&)
#define TREESYNC_ENGINE_EXTERN(FS) extern template TREESYNC_ENGINE_SIGNATURE_(FS)
#define TREESYNC_ENGINE_INSTANTIATE(FS) template TREESYNC_ENGINE_SIGNATURE_(FS)

#if defined(TREESYNC_CORE_INSTANTIATE) && !defined(TREESYNC_CORE_INSTANTIATE_POSIX_FS) && \
    !defined(TREESYNC_CORE_INSTANTIATE_STD_FS) && !defined(TREESYNC_CORE_INSTANTIATE_MOCK_FS)
#define TREESYNC_CORE_INSTANTIATE_POSIX_FS
#define TREESYNC_CORE_INSTANTIATE_STD_FS
#define TREESYNC_CORE_INSTANTIATE_MOCK_FS
#endif
#if TREESYNC_HAS_POSIX
#if defined(TREESYNC_CORE_INSTANTIATE_POSIX_FS)
TREESYNC_ENGINE_INSTANTIATE(treesync::posix_fs);
#elif defined(TREESYNC_SEPARATE_CORE) || defined(TREESYNC_CORE_INSTANTIATE)
TREESYNC_ENGINE_EXTERN(treesync::posix_fs);
#endif
#if defined(TREESYNC_CORE_INSTANTIATE_STD_FS)
TREESYNC_ENGINE_INSTANTIATE(treesync::std_fs);
#elif defined(TREESYNC_SEPARATE_CORE) || defined(TREESYNC_CORE_INSTANTIATE)
TREESYNC_ENGINE_EXTERN(treesync::std_fs);
#endif
#endif
// mock_fs's (detail/mock_engine.hpp): from here or from mock_fs.hpp, whichever comes second
#if defined(TREESYNC_MOCK_FS_HPP)
#include "detail/mock_engine.hpp"
#endif

namespace treesync {
inline namespace v0 {
namespace detail {

template <class FS, class... Ps>
report run_sync(FS& fs, const std::filesystem::path& src, const std::filesystem::path& dst, std::error_code& ec,
                Ps&... ps) {
  static_assert(is_filesystem_v<FS>, "treesync::sync: the first argument does not meet the filesystem requirements");
  static_assert(check_filesystem<FS>(), "treesync::sync: the filesystem is incomplete (see the messages above)");
  static_assert(check_policies<Ps...>(), "treesync::sync: invalid policy set");
  ec.clear();
  compare::size_mtime default_compare{};
  deletion::extraneous_t default_deletion{};
  links::dereference_t default_links{};
  exclude_nothing_t default_exclude{};
  no_observer_t default_observer{};

  auto& cmp = pick<is_compare>(default_compare, ps...);
  auto& del = pick<is_deletion>(default_deletion, ps...);
  auto& lnk = pick<is_links>(default_links, ps...);
  auto& exc = pick<is_exclude>(default_exclude, ps...);
  auto& obs = pick<is_observer>(default_observer, ps...);
  const options default_options{};
  options opt = pick<is_options>(default_options, ps...);
  (fold_option(opt, ps), ...);
  opt.jobs = jobs{opt.jobs}.count();
  while (!opt.subtree.empty() && opt.subtree.back() == '/') opt.subtree.pop_back();
  return run_core(fs, src, dst, ec, make_policy_view(cmp, del, lnk, exc, obs), opt);
}

template <class... Args>
constexpr bool ends_with_error_code() {
  if constexpr (sizeof...(Args) == 0) {
    return false;
  } else {
    using last = std::tuple_element_t<sizeof...(Args) - 1, std::tuple<Args...>>;
    return std::is_same_v<last, std::error_code&>;
  }
}

template <class FS, class Tuple, std::size_t... I>
report run_with_error_code(FS& fs, const std::filesystem::path& src, const std::filesystem::path& dst, Tuple& args,
                           std::index_sequence<I...>) {
  std::error_code& ec = std::get<sizeof...(I)>(args);
  return run_sync(fs, src, dst, ec, std::get<I>(args)...);
}

}  // namespace detail

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
/// What sync() takes after the two paths, under C++20 a constraint of sync: a type of at least one
/// policy category, or a trailing `std::error_code&`.  A type that resembles a category without
/// meeting it (a member named up_to_date, removes, on_symlink or excluded, or a call operator)
/// passes too, so that sync's static_assert can say what is wrong with it; anything else (an int,
/// a string) makes sync not viable (`requires { treesync::sync(src, dst, 42); }` is false).
template <class A>
concept sync_argument = policy_category_count_v<std::decay_t<A>> >= 1 ||
                        std::is_same_v<std::decay_t<A>, std::error_code> ||
                        detail::resembles_policy_v<std::decay_t<A>>;
/// A filesystem sync() accepts: its handle type and the basic listing calls (sync's
/// static_asserts then name any other operation it lacks).
template <class FS>
concept filesystem = is_filesystem_v<FS>;
#define TREESYNC_SYNC_CONSTRAINT(FS_TYPE) requires(filesystem<FS_TYPE> && (sync_argument<Args> && ...))
#define TREESYNC_SYNC_PATH_CONSTRAINT requires(sync_argument<Args> && ...)
#else
#define TREESYNC_SYNC_CONSTRAINT(FS_TYPE)
#define TREESYNC_SYNC_PATH_CONSTRAINT
#endif

/// Mirrors `src` into `dst` over the filesystem `fs`, composed from `policies` (any order, at most
/// one per category).  With a trailing `std::error_code&` it reports refusals there instead of
/// throwing `std::filesystem::filesystem_error`.  Under C++20 it is constrained by the concepts
/// `filesystem` and `sync_argument`.
template <class FS, class... Args, std::enable_if_t<is_filesystem_v<FS>, int> = 0>
TREESYNC_SYNC_CONSTRAINT(FS)
[[nodiscard]] report sync(FS& fs, const std::filesystem::path& src, const std::filesystem::path& dst, Args&&... args) {
  if constexpr (detail::ends_with_error_code<Args...>()) {
    auto refs = std::forward_as_tuple(args...);
    return detail::run_with_error_code(fs, src, dst, refs, std::make_index_sequence<sizeof...(Args) - 1>{});
  } else {
    std::error_code ec;
    report r = detail::run_sync(fs, src, dst, ec, args...);
    if (ec) {
      if (!r.errors.empty() && r.errors.back().code == ec) {
        const auto& e = r.errors.back();
        throw std::filesystem::filesystem_error(std::string("treesync::sync: ") + to_string(e.operation), src / e.path, dst / e.path, ec);
      }
      throw std::filesystem::filesystem_error("treesync::sync: refused", src, dst, ec);
    }
    return r;
  }
}

#if TREESYNC_HAS_POSIX
/// Mirrors `src` into `dst` on the real filesystem (posix_fs).
template <class... Args>
TREESYNC_SYNC_PATH_CONSTRAINT
[[nodiscard]] report sync(const std::filesystem::path& src, const std::filesystem::path& dst, Args&&... args) {
  posix_fs fs;
  return sync(fs, src, dst, std::forward<Args>(args)...);
}
#endif

#undef TREESYNC_SYNC_CONSTRAINT
#undef TREESYNC_SYNC_PATH_CONSTRAINT

}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_SYNC_HPP
