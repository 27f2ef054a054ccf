// treesync/detail/policy_view.hpp - the policies that are code, seen by the engine through one
// non-template view
//
// SPDX-License-Identifier: MIT
// Copyright (c) treesync authors
//
// A part of treesync: include <treesync/treesync.hpp>, which includes every part in order.
#ifndef TREESYNC_DETAIL_POLICY_VIEW_HPP
#define TREESYNC_DETAIL_POLICY_VIEW_HPP

#include "../traits.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace treesync {
inline namespace v0 {
namespace detail {

// sync<...>() folds its arguments into `options` (data) and this view of the five policies that
// are code (compare, deletion, links, exclude, observer).  The engine is written against the view
// alone, so it is stamped out once per filesystem type, not once per set of policy types: a
// second sync() with another compare policy costs its few thunks below, not another engine.
//
// Each policy is a pointer to the caller's object and a plain function pointer that calls it
// (no allocation, no std::function): one indirect call per entry, next to at least one system
// call per entry.  What a policy says about itself once (restamp, keep_newer, needs_target,
// limit) is read once, here.

struct policy_view {
  const void* cmp = nullptr;
  bool (*up_to_date_fn)(const void*, const file_pair&) = nullptr;
  bool restamp = false;     ///< a current file whose mtime differs gets the source's
  bool keep_newer = false;  ///< a destination file newer than its source is left alone (-u)

  const void* del = nullptr;
  bool (*removes_fn)(const void*, std::string_view, file_type, bool) = nullptr;
  /// The policy's four-argument removes(), when it has one (null: the engine takes no identity)
  bool (*removes_in_fn)(const void*, std::string_view, file_type, bool, const dir_identity&) = nullptr;
  std::size_t limit = unlimited;

  const void* lnk = nullptr;
  link_action (*on_symlink_fn)(const void*, std::string_view, std::string_view, bool) = nullptr;
  bool needs_target = true;  ///< on_symlink looks at the target: it is read before asking

  const void* exc = nullptr;  ///< null: nothing is excluded (no call at all)
  bool (*excluded_fn)(const void*, std::string_view, file_type) = nullptr;

  void* obs = nullptr;  ///< null: no observer (no call, no lock)
  void (*observe_fn)(void*, const action&) = nullptr;

  /// The state keys of compare, deletion, links and exclude, one line each ("?" for a policy
  /// without state_key(): then no state file is trusted or written, see state_keys_known).
  std::string state_keys;
  bool state_keys_known = true;
  std::string unkeyed;  ///< the first category whose policy has no state_key()

  bool up_to_date(const file_pair& f) const { return up_to_date_fn(cmp, f); }
  bool removes(std::string_view rel, file_type t, bool excluded) const { return removes_fn(del, rel, t, excluded); }
  /// Whether the deletion policy is to be given the identity of the directory it is asked about.
  bool removes_wants_dir() const { return removes_in_fn != nullptr; }
  bool removes(std::string_view rel, file_type t, bool excluded, const dir_identity& in) const {
    return removes_in_fn(del, rel, t, excluded, in);
  }
  link_action on_symlink(std::string_view rel, std::string_view target, bool inside) const {
    return on_symlink_fn(lnk, rel, target, inside);
  }
  bool excluded(std::string_view rel, file_type t) const { return excluded_fn && excluded_fn(exc, rel, t); }
  bool observed() const { return observe_fn != nullptr; }
  void observe(const action& a) const { observe_fn(obs, a); }
};

template <class P>
void add_state_key(policy_view& v, const P& p, const char* category) {
  v.state_keys += '\n';
  if constexpr (has_state_key<P>::value) {
    v.state_keys += category;
    v.state_keys += ' ';
    v.state_keys += std::string(p.state_key());
  } else {
    (void)p;
    v.state_keys += '?';
    if (v.state_keys_known) v.unkeyed = category;
    v.state_keys_known = false;
  }
}

/// The view of one set of policies.  The objects must outlive the run (they are the caller's).
template <class Cmp, class Del, class Lnk, class Exc, class Obs>
policy_view make_policy_view(const Cmp& cmp, const Del& del, const Lnk& lnk, const Exc& exc, Obs& obs) {
  policy_view v;
  v.cmp = std::addressof(cmp);
  v.up_to_date_fn = [](const void* p, const file_pair& f) { return bool(static_cast<const Cmp*>(p)->up_to_date(f)); };
  v.restamp = restamps(cmp);
  v.keep_newer = keeps_newer(cmp);
  v.del = std::addressof(del);
  v.removes_fn = [](const void* p, std::string_view rel, file_type t, bool ex) {
    return bool(static_cast<const Del*>(p)->removes(rel, t, ex));
  };
  if constexpr (has_removes_in<Del>::value) {
    v.removes_in_fn = [](const void* p, std::string_view rel, file_type t, bool ex, const dir_identity& in) {
      return bool(static_cast<const Del*>(p)->removes(rel, t, ex, in));
    };
  }
  v.limit = del.limit();
  v.lnk = std::addressof(lnk);
  v.on_symlink_fn = [](const void* p, std::string_view rel, std::string_view target, bool inside) {
    return static_cast<const Lnk*>(p)->on_symlink(rel, target, inside);
  };
  v.needs_target = links_needs_target<Lnk>::value;
  if constexpr (!std::is_same_v<Exc, exclude_nothing_t>) {
    v.exc = std::addressof(exc);
    v.excluded_fn = [](const void* p, std::string_view rel, file_type t) {
      return call_excluded(*static_cast<const Exc*>(p), rel, t);
    };
  }
  if constexpr (!std::is_same_v<std::remove_const_t<Obs>, no_observer_t>) {
    v.obs = const_cast<void*>(static_cast<const void*>(std::addressof(obs)));
    v.observe_fn = [](void* p, const action& a) { (*static_cast<Obs*>(p))(a); };
  } else {
    (void)obs;
  }
  add_state_key(v, cmp, "compare");
  add_state_key(v, del, "deletion");
  add_state_key(v, lnk, "links");
  add_state_key(v, exc, "exclude");
  return v;
}

}  // namespace detail
}  // namespace v0
}  // namespace treesync

#endif  // TREESYNC_DETAIL_POLICY_VIEW_HPP
