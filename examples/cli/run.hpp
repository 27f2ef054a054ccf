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
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace treesync_cli {

/// --checksum, --size-only, --update, --modify-window.  restamp(): whether a current file whose
/// mtime differs gets the source's (true for checksum and size_only, whose verdict ignores mtimes,
/// like the library's compare::checksum and compare::size_only; false for size_mtime and newer).
struct cli_compare {
  compare_mode mode;
  std::chrono::nanoseconds window;
  bool restamp() const { return mode == compare_mode::checksum || mode == compare_mode::size_only; }
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
  const treesync::filter& patterns;  // --exclude, --include, --filter, -F, --*-from
  unsigned jobs;
  const std::atomic<bool>* cancel;
  printer& observer;
  std::string backup_dir;  // empty: no backups
};

/// The library's run-time options for the command line `o`.
inline treesync::options library_options(const options& o, unsigned jobs, const std::atomic<bool>* cancel,
                                         const std::string& backup_dir) {
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
  t.jobs = jobs;
  t.cancel = cancel;
  t.backup_dir = backup_dir;
  return t;
}

inline treesync::options library_options(const run_context& c) {
  return library_options(c.opt, c.jobs, c.cancel, c.backup_dir);
}

/// sync() of `src` into `dst` with the policies of the command line `o` (compare, links, and
/// `deletion` with its limit), the filter and the run-time options `lib`, plus `extra...`: an
/// observer, and for a run split in pieces treesync::frontier or treesync::subtree
/// (examples/treesync_mpi.cpp).
template <class... Extra>
treesync::report sync_with(const options& o, const cli_deletion& deletion, const treesync::filter& patterns,
                           const std::filesystem::path& src, const std::filesystem::path& dst,
                           const treesync::options& lib, std::error_code& ec, Extra&&... extra) {
  const cli_compare compare{o.compare, std::chrono::nanoseconds(o.modify_window_ns)};
  return treesync::sync(src, dst, lib, compare, deletion, cli_links{o.links}, patterns,
                        std::forward<Extra>(extra)..., ec);
}

/// The one sync() call of the tool.
inline treesync::report run(run_context& c, std::error_code& ec) {
  return sync_with(c.opt, c.deletion, c.patterns, c.opt.operands[0], c.opt.operands[1], library_options(c), ec,
                   c.observer);
}

/// Reads the file `name` ("-": stdin) into `text`.
inline bool read_file(const std::string& name, std::string& text, std::error_code& ec) {
  std::FILE* f = name == "-" ? stdin : std::fopen(name.c_str(), "rb");
  if (!f) {
    ec.assign(errno, std::generic_category());
    return false;
  }
  char buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  if (failed) ec.assign(errno ? errno : EIO, std::generic_category());
  if (f != stdin) std::fclose(f);
  return !failed;
}

/// Why make_filter() failed: the message without the tool's name, and whether it is a usage error
/// (a --filter rule treesync does not know) or a file that could not be read.
struct filter_error {
  std::string message;
  bool usage = false;
};

/// The filter rules of the command line, in command-line order; per-directory rule files (-F,
/// dir-merge) are read from SRC's directories.  `read(name, text, ec)` reads a --exclude-from /
/// --include-from file (read_file(), or the text rank 0 read and broadcast).  Returns false, with
/// `error` set, on the first rule or file that fails.
template <class Read>
bool make_filter(const options& o, Read&& read, treesync::filter& patterns, filter_error& error) {
  patterns = treesync::filter::reading(o.operands[0]);
  for (const auto& f : o.filters) {
    switch (f.kind) {
      case filter_arg::exclude: patterns.add_plain(f.value, false); break;
      case filter_arg::include: patterns.add_plain(f.value, true); break;
      case filter_arg::rule:
        if (!patterns.add_rule(f.value)) {
          error = {"--filter: not a rule treesync knows: " + display(f.value) +
                       " (use '+ PATTERN', '- PATTERN', 'dir-merge NAME' or '!')",
                   true};
          return false;
        }
        break;
      case filter_arg::exclude_from:
      case filter_arg::include_from: {
        std::error_code ec;
        std::string text;
        if (!read(f.value, text, ec)) {
          error = {"read " + display(f.value) + ": " + ec.message(), false};
          return false;
        }
        patterns.add_rules(text, f.kind == filter_arg::include_from);
        break;
      }
    }
  }
  return true;
}

}  // namespace treesync_cli

#endif  // TREESYNC_CLI_RUN_HPP
