// examples/cli/run.hpp - how the treesync tool turns its options into one treesync::sync() call.
// Part of the treesync example CLI (examples/treesync.cpp).
//
// The compare, deletion and links options are run-time policies of the CLI's own (each delegates
// to the built-ins), so the engine is instantiated once per write policy and per value of the
// compare policy's compile-time `restamp` trait (-c and --size-only re-stamp a current file's
// mtime like compare::checksum and compare::size_only; -u and --modify-window must not).  The
// flag policies (treesync::dry_run, durable, hard_links, ...) are tag types: choosing N of them at
// run time takes 2^N instantiations of sync().  Under dry_run nothing is written, so the write
// policy and durable cannot change the outcome and dry runs leave both out:
//   dry runs        2 compare types x 2^6 flag sets = 128   run_dry.cpp
//   write::atomic   2 x 2^7 = 256                            run_atomic.cpp, run_atomic_restamp.cpp
//   write::in_place 2 x 2^7 = 256                            run_in_place.cpp, run_in_place_restamp.cpp
// Each instantiation is small (the engine is shared), but hundreds in one translation unit need
// gigabytes to compile under clang + ASan, hence five files of at most 128.  A run-time form of
// the flags in the library would make all of this one instantiation.
#ifndef TREESYNC_CLI_RUN_HPP
#define TREESYNC_CLI_RUN_HPP

#include "options.hpp"
#include "output.hpp"

#include <treesync/treesync.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>

namespace treesync_cli {

/// --checksum, --size-only, --update, --modify-window.  Restamp: whether a current file whose
/// mtime differs gets the source's (the library's `restamp` trait: true for checksum and
/// size_only, whose verdict ignores mtimes; false for size_mtime and newer).
template <bool Restamp>
struct cli_compare {
  static constexpr bool restamp = Restamp;
  compare_mode mode;
  std::chrono::nanoseconds window;
  bool up_to_date(const treesync::file_pair& f) const {
    switch (mode) {
      case compare_mode::checksum: return treesync::compare::checksum.up_to_date(f);
      case compare_mode::size_only: return treesync::compare::size_only.up_to_date(f);
      case compare_mode::update:  // compare::newer, with the window
        if (f.dst.mtime_ns > f.src.mtime_ns + window.count()) return true;
        return treesync::compare::size_mtime{window}.up_to_date(f);
      case compare_mode::size_mtime: break;
    }
    return treesync::compare::size_mtime{window}.up_to_date(f);
  }
};

/// --no-delete, --delete-excluded, --max-delete
struct cli_deletion {
  deletion_mode mode;
  std::size_t max;
  bool removes(std::string_view rel, treesync::file_type t, bool excluded) const {
    switch (mode) {
      case deletion_mode::keep: return treesync::deletion::keep.removes(rel, t, excluded);
      case deletion_mode::excluded: return treesync::deletion::delete_excluded.removes(rel, t, excluded);
      case deletion_mode::extraneous: break;
    }
    return treesync::deletion::extraneous.removes(rel, t, excluded);
  }
  std::size_t limit() const { return max; }
};

/// -L, -l, --copy-unsafe-links, --no-links.  It needs the link's target (--copy-unsafe-links), so
/// the engine reads each source symlink once more than links::dereference would.
struct cli_links {
  links_mode mode;
  treesync::link_action on_symlink(std::string_view rel, std::string_view target, bool inside) const {
    switch (mode) {
      case links_mode::preserve: return treesync::links::preserve.on_symlink(rel, target, inside);
      case links_mode::unsafe: return treesync::links::dereference_unsafe.on_symlink(rel, target, inside);
      case links_mode::skip: return treesync::links::skip.on_symlink(rel, target, inside);
      case links_mode::dereference: break;
    }
    return treesync::links::dereference.on_symlink(rel, target, inside);
  }
};

/// Everything one run needs, decided from the options.
struct run_context {
  const options& opt;
  cli_deletion deletion;
  cli_links links;
  const treesync::filter& patterns;  // --exclude, --include, --filter, -F, --*-from
  treesync::jobs workers;
  treesync::cancel_on cancel;
  printer& observer;
  treesync::backup_dir backups;  // an empty path: no backups
};

/// Calls k(acc..., the tags among Tags whose entry in `on` is set).
template <class K, class... Acc>
treesync::report with_tags(const bool*, K& k, const Acc&... acc) {
  return k(acc...);
}
template <class Tag, class... Tags, class K, class... Acc>
treesync::report with_tags(const bool* on, K& k, const Acc&... acc) {
  if (*on) return with_tags<Tags...>(on + 1, k, acc..., Tag{});
  return with_tags<Tags...>(on + 1, k, acc...);
}

/// -c and --size-only decide without mtimes, so a current file gets the source's mtime.
inline bool restamps(const options& o) {
  return o.compare == compare_mode::checksum || o.compare == compare_mode::size_only;
}

/// The run, with the flags the options ask for after `lead` (treesync::dry_run or a write policy).
/// The varying flags go first: the library's per-pack recursion then shares the packs' common tail.
template <bool Restamp, class Lead, class... Tags>
treesync::report run_with(run_context& c, std::error_code& ec, const Lead& lead, const bool* on) {
  const std::string& src = c.opt.operands[0];
  const std::string& dst = c.opt.operands[1];
  const cli_compare<Restamp> compare{c.opt.compare, std::chrono::nanoseconds(c.opt.modify_window_ns)};
  auto call = [&](const auto&... flags) {
    return treesync::sync(src, dst, flags..., lead, compare, c.deletion, c.links, c.patterns, c.workers, c.cancel,
                          c.observer, c.backups, ec);
  };
  return with_tags<Tags...>(on, call);
}

/// A run that writes with `Write`: every flag policy but dry_run.
template <bool Restamp, class Write>
treesync::report run_writing(run_context& c, std::error_code& ec) {
  const options& o = c.opt;
  const bool on[] = {o.allow_empty_source, o.hard_links, o.owner, o.group, o.one_file_system, o.specials, o.fsync};
  return run_with<Restamp, Write, treesync::allow_empty_source_t, treesync::hard_links_t, treesync::preserve_owner_t,
                  treesync::preserve_group_t, treesync::one_file_system_t, treesync::specials_t, treesync::durable_t>(
      c, ec, Write{}, on);
}

treesync::report run_dry(run_context& c, std::error_code& ec);               // run_dry.cpp
treesync::report run_atomic(run_context& c, std::error_code& ec);            // run_atomic.cpp
treesync::report run_atomic_restamp(run_context& c, std::error_code& ec);    // run_atomic_restamp.cpp
treesync::report run_in_place(run_context& c, std::error_code& ec);          // run_in_place.cpp
treesync::report run_in_place_restamp(run_context& c, std::error_code& ec);  // run_in_place_restamp.cpp

/// The one sync() call of the tool.
inline treesync::report run(run_context& c, std::error_code& ec) {
  if (c.opt.dry_run) return run_dry(c, ec);
  if (c.opt.inplace) return restamps(c.opt) ? run_in_place_restamp(c, ec) : run_in_place(c, ec);
  return restamps(c.opt) ? run_atomic_restamp(c, ec) : run_atomic(c, ec);
}

}  // namespace treesync_cli

#endif  // TREESYNC_CLI_RUN_HPP
