// examples/cli/run.hpp - how the treesync tool turns its options into one treesync::sync() call.
// Part of the treesync example CLI (examples/treesync.cpp).
//
// Every switch (dry run, write mode, durable, hard links, owner, ...) goes into a run-time
// treesync::options; the compare, deletion and links options are run-time policies of the CLI's
// own (each delegates to the built-ins).  So the tool instantiates sync() exactly once, in one
// translation unit.
#ifndef TREESYNC_CLI_RUN_HPP
#define TREESYNC_CLI_RUN_HPP

#include "options.hpp"
#include "output.hpp"

#include <treesync/treesync.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>

namespace treesync_cli {

/// --checksum, --size-only, --update, --modify-window.  restamp(): whether a current file whose
/// mtime differs gets the source's (true for checksum and size_only, whose verdict ignores mtimes,
/// like the library's compare::checksum and compare::size_only; false for size_mtime and newer).
/// `meter`: --progress, told of each file found current (its bytes are then done), or null.
struct cli_compare {
  compare_mode mode;
  std::chrono::nanoseconds window;
  progress_meter* meter;
  bool restamp() const { return mode == compare_mode::checksum || mode == compare_mode::size_only; }
  bool up_to_date(const treesync::file_pair& f) const {
    const bool current = verdict(f);
    if (current && meter) meter->on_current(f.src.size);
    return current;
  }
  bool verdict(const treesync::file_pair& f) const {
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
  unsigned jobs;
  const std::atomic<bool>* cancel;
  printer& observer;
  std::string backup_dir;  // empty: no backups
};

/// The library's run-time options for this command line.
inline treesync::options library_options(const run_context& c) {
  const options& o = c.opt;
  treesync::options t;
  t.dry_run = o.dry_run;
  t.allow_empty_source = o.allow_empty_source;
  t.durable = o.fsync;
  t.one_file_system = o.one_file_system;
  t.specials = o.specials;
  t.owner = o.owner;
  t.group = o.group;
  t.hard_links = o.hard_links;
  t.xattrs = o.xattrs;
  t.write = o.inplace ? treesync::write_mode::in_place : treesync::write_mode::atomic;
  t.jobs = c.jobs;
  t.cancel = c.cancel;
  t.backup_dir = c.backup_dir;
  return t;
}

/// The one sync() call of the tool.
inline treesync::report run(run_context& c, std::error_code& ec) {
  const cli_compare compare{c.opt.compare, std::chrono::nanoseconds(c.opt.modify_window_ns),
                            c.observer.current_files_meter()};
  return treesync::sync(c.opt.operands[0], c.opt.operands[1], library_options(c), compare, c.deletion, c.links,
                        c.patterns, c.observer, ec);
}

}  // namespace treesync_cli

#endif  // TREESYNC_CLI_RUN_HPP
