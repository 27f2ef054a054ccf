// examples/cli/run.hpp - how the treesync tool turns its options into one treesync::sync() call.
// Part of the treesync example CLI (examples/treesync.cpp).
//
// Every switch (dry run, write mode, durable, hard links, owner, ...) goes into a run-time
// treesync::options; the compare, deletion and links options are run-time policies of the CLI's
// own (each delegates to the built-ins).  So the tool instantiates sync() exactly once, in one
// translation unit.  count_source() is --progress's counting run (cli/progress.hpp), through the
// same run().
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
#include <map>
#include <memory>
#include <vector>
#include <algorithm>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <sys/stat.h>
#include <unistd.h>

namespace treesync_cli {

/// --checksum, --size-only, --update, --modify-window: the library's built-in comparison chosen
/// at run time.  `meter`: --progress, told of each file found current (its bytes are then done),
/// or null.
struct cli_compare {
  treesync::compare::chosen choice;
  progress_meter* meter;
  bool restamp() const { return choice.restamp(); }
  bool keep_newer() const { return choice.keep_newer(); }  // -u: a newer DST file is left alone
  std::string state_key() const { return choice.state_key(); }
  bool up_to_date(const treesync::file_pair& f) const {
    const bool current = choice.up_to_date(f);
    if (current && meter) meter->on_current(f.src.size);
    return current;
  }
};

/// --no-delete, --delete-excluded, --max-delete: `cli_deletion{mode, max}`, and (with_dst_rules())
/// the rule files of DST's directories: rsync -F/dir-merge with --delete reads them where it deletes
/// (an entry they exclude is kept), treesync reads SRC's for the transfer and both for deletion, so
/// an entry either side's rule files exclude is kept (README: rule_files_both_sides).
struct cli_deletion {
  treesync::deletion::kind k = treesync::deletion::kind::extraneous;
  std::size_t max = treesync::unlimited;
  std::shared_ptr<const treesync::filter> dst_rules;  // the same rules, rule files read from DST
  std::string prefix;                                 // SRC without a slash: "NAME/" (named_filter)

  cli_deletion(treesync::deletion::kind mode, std::size_t cap) : k(mode), max(cap) {}

  const char* state_key() const { return treesync::deletion::chosen{k, max}.state_key(); }
  std::size_t limit() const { return max; }
  bool removes(std::string_view rel, treesync::file_type t, bool excluded) const {
    if (!treesync::deletion::chosen{k, max}.removes(rel, t, excluded)) return false;
    if (k != treesync::deletion::kind::extraneous || !dst_rules) return true;
    try {
      return !dst_rules->excluded(prefix + std::string(rel), t);
    } catch (const treesync::filter_error&) {
      return false;  // a bad rule file in DST: what it may protect is kept
    }
  }
  cli_deletion with_dst_rules(std::shared_ptr<const treesync::filter> rules, std::string name) const {
    cli_deletion d = *this;
    d.dst_rules = std::move(rules);
    d.prefix = name.empty() ? std::string() : name + '/';
    return d;
  }
};

/// -L, -l, --copy-unsafe-links, --no-links.  It needs the link's target (--copy-unsafe-links), so
/// the engine reads each source symlink once more than links::dereference would.
using cli_links = treesync::links::chosen;

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
  treesync::options t = o.lib;  // the switch table's switches, as parsed
  // the empty-source guard protects DST from deletions: without them an empty SRC copies nothing
  // and deletes nothing, as in rsync
  t.allow_empty_source = o.lib.allow_empty_source || o.deletion == deletion_mode::keep;
  t.write = o.inplace ? treesync::write_mode::in_place : treesync::write_mode::atomic;
  t.jobs = jobs;
  t.cancel = cancel;
  t.backup_dir = backup_dir;
  if (o.state) t.state = *o.state;
  t.verify = o.verify;
  t.perms = o.perms;
  t.chmod = o.chmod;
  t.existing = o.existing;
  t.ignore_existing = o.ignore_existing;
  t.keep_on_source_error = !o.ignore_errors;  // rsync: an I/O error stops the deletions
  t.umask = o.umask;
  return t;
}

inline treesync::options library_options(const run_context& c) {
  return library_options(c.opt, c.jobs, c.cancel, c.backup_dir);
}

/// The comparison of the command line `o` (--checksum, --size-only, --update, --modify-window).
/// `meter`: --progress's, told of each file found current, or null (the MPI tool: no meter).
inline cli_compare make_compare(const options& o, progress_meter* meter = nullptr) {
  return cli_compare{{o.compare, std::chrono::nanoseconds(o.modify_window_ns)}, meter};
}

/// sync() of `src` into `dst` with the comparison `compare`, the policies of the command line `o`
/// (links, and `deletion` with its limit), the filter and the run-time options `lib`, plus
/// `extra...`: an observer, and for a run split in pieces treesync::frontier or treesync::subtree
/// (examples/treesync_mpi.cpp).
template <class... Extra>
treesync::report sync_with(const options& o, const cli_compare& compare, const cli_deletion& deletion,
                           const treesync::filter& patterns, const std::filesystem::path& src,
                           const std::filesystem::path& dst, const treesync::options& lib, std::error_code& ec,
                           Extra&&... extra) {
  return treesync::sync(src, dst, lib, compare, deletion, cli_links{o.links}, patterns,
                        std::forward<Extra>(extra)..., ec);
}

/// The same with the comparison of `o` and no --progress meter.
template <class... Extra>
treesync::report sync_with(const options& o, const cli_deletion& deletion, const treesync::filter& patterns,
                           const std::filesystem::path& src, const std::filesystem::path& dst,
                           const treesync::options& lib, std::error_code& ec, Extra&&... extra) {
  return sync_with(o, make_compare(o), deletion, patterns, src, dst, lib, ec, std::forward<Extra>(extra)...);
}

/// The filter of a run whose SRC is the directory itself (no trailing slash): rsync matches its
/// rules against paths that start with the directory's NAME (an anchored `/NAME/sub`, and `sub`
/// rather than `/sub`), and reads per-directory rule files from SRC's parent down (make_filter()
/// reads from there).  So each path is asked as NAME/path.
struct named_filter {
  const treesync::filter& rules;
  std::string prefix;  // NAME + '/'
  const char* state_key() const { return "filter"; }
  bool excluded(std::string_view rel, treesync::file_type t) const {
    std::string path = prefix;
    path.append(rel.data(), rel.size());
    return rules.excluded(path, t);
  }
};

/// The one sync() call of the tool, from opt.src_root into opt.dst_root.  The comparison tells the
/// printer's --progress meter of the files it finds current (the counting run's printer has none
/// to tell).
inline treesync::report run(run_context& c, std::error_code& ec) {
  const cli_compare compare = make_compare(c.opt, c.observer.current_files_meter());
  if (!c.opt.name.empty())
    return treesync::sync(c.opt.src_root, c.opt.dst_root, library_options(c), compare, c.deletion,
                          cli_links{c.opt.links}, named_filter{c.patterns, c.opt.name + '/'}, c.observer, ec);
  return sync_with(c.opt, compare, c.deletion, c.patterns, c.opt.src_root, c.opt.dst_root, library_options(c), ec,
                   c.observer);
}

/// rsync makes a missing DST (not its parents) before it copies SRC into DST/NAME.  Called before
/// the run when SRC is the directory itself (opt.name set): DST is made only when SRC is a
/// directory (else the library's refusal names SRC, and nothing is written) and not under -n.
/// When DST cannot be made (its parent is missing, ...) or under -n, the run goes to DST itself:
/// the library then refuses with DST's own reason, or, under -n, plans DST/NAME's contents as new
/// into a DST that does not exist, which is the same plan.
inline void prepare_destination(options& opt) {
  if (opt.name.empty()) return;
  struct stat st;
  if (::stat(opt.operands[1].c_str(), &st) == 0 || errno != ENOENT) return;  // exists (or the library says why not)
  if (::lstat(opt.operands[1].c_str(), &st) == 0) {  // a dangling symlink: the library refuses it
    opt.dst_root = opt.operands[1];
    return;
  }
  if (::stat(opt.src_root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || opt.lib.dry_run ||
      ::mkdir(opt.operands[1].c_str(), 0777) != 0)
    opt.dst_root = opt.operands[1];
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
bool make_filter(const options& o, Read&& read, treesync::filter& patterns, filter_error& error,
                 treesync::filter::loader rule_files = {}) {
  // rule files are read from SRC down, or, for SRC without a trailing slash, from its parent down
  // (rsync's transfer root; named_filter asks paths as NAME/...); `rule_files`: another side's
  // (DST's, for the deletion policy: cli_deletion)
  std::filesystem::path rules_root = o.src_root;
  if (!o.name.empty()) {
    rules_root = rules_root.parent_path();
    if (rules_root.empty()) rules_root = ".";  // SRC "s": its parent is the working directory
  }
  patterns = rule_files ? treesync::filter(std::move(rule_files)) : treesync::filter::reading(rules_root);
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

/// -F / dir-merge with --delete: the per-directory rule files of DST as they are before the run
/// (rsync reads them where it deletes, before it writes there; the run may copy SRC's over them).
/// Every file named by a dir-merge rule of the command line is read up front, in DST (for SRC
/// without a slash: in DST itself and below DST/NAME), without following symlinks; another file a
/// rule file merges is read when asked.  The loader's directories are relative to DST (make_filter).
inline treesync::filter::loader dst_rule_files(const options& o) {
  std::vector<std::string> names;
  for (const auto& f : o.filters) {
    if (f.kind != filter_arg::rule || !(f.value.rfind(':', 0) == 0 || f.value.rfind("dir-merge", 0) == 0)) continue;
    const auto space = f.value.find_last_of(' ');
    if (space != std::string::npos && space + 1 < f.value.size()) names.push_back(f.value.substr(space + 1));
  }
  namespace fs = std::filesystem;
  const fs::path top = o.dst_root;
  const fs::path root = o.name.empty() ? top : (top.parent_path().empty() ? fs::path(".") : top.parent_path());
  auto files = std::make_shared<std::map<std::pair<std::string, std::string>, std::string>>();
  const auto read_dir = [&](const fs::path& dir, const std::string& rel) {
    for (const auto& n : names) {
      struct stat st;
      const fs::path p = dir / n;
      if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      try {
        (*files)[{rel, n}] = treesync::filter::read_rule_file(p.c_str());
      } catch (const treesync::filter_error&) {
        (*files)[{rel, n}] = "- *";  // too large to read: what it may protect is kept
      }
    }
  };
  std::error_code ec;
  if (!o.name.empty()) read_dir(root, "");
  const std::string base = o.name.empty() ? std::string() : o.name;
  read_dir(top, base);
  for (fs::recursive_directory_iterator it(top, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    const std::string rel = it->path().lexically_relative(top).generic_string();
    read_dir(it->path(), base.empty() ? rel : base + '/' + rel);
  }
  return [files, names, root](std::string_view dir, std::string_view name) -> std::string {
    const auto it = files->find({std::string(dir), std::string(name)});
    if (it != files->end()) return it->second;
    if (std::find(names.begin(), names.end(), name) != names.end()) return std::string();  // none before the run
    const fs::path p = dir.empty() ? root / std::string(name) : root / std::string(dir) / std::string(name);
    return treesync::filter::read_rule_file(p.c_str());
  };
}

/// --progress's totals: a dry run of the same command line (filters, links, -x, --specials, -H)
/// into a destination that does not exist, next to DST, so that every entry the mirror carries is
/// reported once, as created; it reads only.  Returns whether it covered the whole source.
inline bool count_source(const options& opt, const treesync::filter& patterns, progress_meter& meter) {
  options counting = opt;
  counting.lib.dry_run = true;
  counting.itemize = counting.verbose = counting.json = counting.progress = false;
  counting.backup_dir.reset();
  counting.state.reset();  // the count reads no state file (it would be another destination's)
  counting.verify = treesync::verify_level::full;
  std::string dst = opt.dst_root;
  while (dst.size() > 1 && dst.back() == '/') dst.pop_back();
  const std::filesystem::path parent = std::filesystem::path(dst).parent_path();
  const std::string name = ".treesync-progress-count-" + std::to_string(::getpid());
  counting.dst_root = parent.empty() ? name : (parent / name).string();
  printer counter(counting, &meter, printer::role::count);
  run_context context{counting, cli_deletion{deletion_mode::keep, treesync::unlimited}, patterns, opt.jobs,
                      meter.count_cancel(), counter, std::string()};
  std::error_code ec;
  try {
    const treesync::report r = run(context, ec);
    return !ec && !r.cancelled;
  } catch (const treesync::filter_error&) {  // a bad rule file: the run itself reports it
    return false;
  }
}

}  // namespace treesync_cli

#endif  // TREESYNC_CLI_RUN_HPP
