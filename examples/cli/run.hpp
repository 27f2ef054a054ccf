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
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <memory>
#include <mutex>
#include <vector>
#include <algorithm>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace treesync_cli {

/// --checksum, --size-only, --update, --modify-window, --ignore-times: the library's built-in
/// comparison chosen at run time (-I alone is compare::always); `ignore_times` with -u (rsync's
/// -u -I): a DST file newer than SRC's is kept, every other one rewritten.  `meter`: --progress,
/// told of each file found current (its bytes are then done), or null.
struct cli_compare {
  treesync::compare::chosen choice;
  progress_meter* meter;
  bool ignore_times = false;
  bool restamp() const { return choice.restamp(); }
  bool keep_newer() const { return choice.keep_newer(); }  // -u: a newer DST file is left alone
  std::string state_key() const {
    return choice.state_key() + (ignore_times && choice.k == treesync::compare::kind::newer ? " ignore_times" : "");
  }
  bool up_to_date(const treesync::file_pair& f) const {
    const bool current = ignore_times && choice.k == treesync::compare::kind::newer
                             ? f.dst.mtime_ns > f.src.mtime_ns + choice.window.count()  // -u's rule only
                             : choice.up_to_date(f);
    if (current && meter) meter->on_current(f.src.size);
    return current;
  }
};

/// DST as the walk under rsync 3.5's rule reached it (walk_destination(), cli/trust.hpp), kept
/// open: the run works in that very directory (pin_dst()), DST's rule files are read from it and
/// the files those merge below it, never by path (dst_rule_files()), and a missing DST is made in
/// the directory the walk checked (prepare_destination()).  So the check holds until the open.
struct dst_directories {
  int parent = -1;   // the directory options::dst_root is in: DST for SRC without a slash (DST/NAME)
  int top = -1;      // options::dst_root, -1 while it does not exist
  int made_in = -1;  // SRC without a slash and DST missing: DST's parent, where DST is made (O_PATH)
  std::string made_leaf;  // and DST's name there
  std::string path;  // DST as the run names it (options::dst_root)
  std::string name;
  int unreachable = 0;  // the walk could not reach DST (an errno value): every run on it fails so
  std::string operand;  // SRC without a slash: DST itself (the DST operand), also unreachable then
  int state_dir = -1;          // --state=FILE's directory as walked, outside DST's root
  std::string state_dir_path;  // that directory as the library names it (FILE's parent, or ".")
  int state_dir_unreachable = 0;  // its walk reached no directory (an errno value): the run fails so
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, std::string> texts;  // merged files, read once, before any write
  std::size_t bytes = 0;
  bool texts_full = false;  // a merged file past dst_merge_budget was not kept ("- *" there)
  dst_directories() = default;
  dst_directories(const dst_directories&) = delete;
  dst_directories& operator=(const dst_directories&) = delete;
  ~dst_directories() {
    if (parent >= 0) ::close(parent);
    if (top >= 0) ::close(top);
    if (made_in >= 0) ::close(made_in);
    if (state_dir >= 0) ::close(state_dir);
  }
};

/// The directories of DST a run kept everything in because they were not the ones DST's rule
/// files were read from (cli_deletion::removes), by their path below DST's root as the run names
/// it (the engine's root: DST, or DST/NAME).
struct dst_swaps {
  std::mutex mu;
  std::set<std::string> dirs;
};

/// --no-delete, --delete-excluded, --max-delete: `cli_deletion{mode, max}`, and (with_dst_rules())
/// the rule files of DST's directories: rsync -F/dir-merge with --delete reads them where it deletes
/// (an entry they exclude is kept), treesync reads SRC's for the transfer and both for deletion, so
/// an entry either side's rule files exclude is kept (README: rule_files_both_sides).
/// DST's rule files were read before the run, each directory's recorded with the directory's
/// identity (detail::read_dst_rule_tree); the engine gives the identity of the directory it holds
/// (the four-argument removes()), and a directory that is not the one read under its name
/// (exchanged with another meanwhile), or one never read, has nothing deleted in it: its rules are
/// trusted for no other directory, and it is reported (swaps, report_dst_swaps: exit 23).
struct cli_deletion {
  treesync::deletion::kind k = treesync::deletion::kind::extraneous;
  std::size_t max = treesync::unlimited;
  std::shared_ptr<const treesync::filter> dst_rules;  // the same rules, rule files read from DST
  std::string prefix;                                 // SRC without a slash: "NAME/" (named_filter)
  std::shared_ptr<const dst_directories> dst_dirs;  // where dst_rules were read (pin_dst)
  std::shared_ptr<const treesync::detail::dst_rule_texts> dst_read;  // what was read, with identities
  std::uint64_t dst_read_id = 0;  // one per dst_read given (a thread's lookup place is this one's)
  std::shared_ptr<dst_swaps> swaps;  // the directories kept for not being the ones read

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
  /// The same, where the directory `rel` is in is held as `in`: what DST's rules allow is deleted
  /// only when `in` is the directory they were read from under that path.
  bool removes(std::string_view rel, treesync::file_type t, bool excluded, const treesync::dir_identity& in) const {
    if (!removes(rel, t, excluded)) return false;
    if (k != treesync::deletion::kind::extraneous || !dst_rules || !dst_read) return true;
    const std::size_t slash = rel.rfind('/');
    const std::string_view dir = slash == std::string_view::npos ? std::string_view() : rel.substr(0, slash);
    std::string path = prefix.empty() ? std::string(dir) : prefix.substr(0, prefix.size() - 1);
    if (!prefix.empty() && !dir.empty()) path.append("/").append(dir.data(), dir.size());
    // each thread resumes from the directory it looked up last (in this dst_read): a walk down a
    // deep DST resolves each level once, not its whole path again per entry
    thread_local std::pair<std::uint64_t, treesync::detail::dst_rule_texts::place> last;
    if (last.first != dst_read_id) last = {dst_read_id, treesync::detail::dst_rule_texts::place()};
    const auto read = dst_read->lookup(path, std::string_view(), &last.second);
    if (in.known && read.seen && read.dev == in.dev && read.ino == in.ino) return true;
    if (swaps) {
      std::lock_guard<std::mutex> lock(swaps->mu);
      swaps->dirs.emplace(dir);
    }
    return false;
  }
  cli_deletion with_dst_rules(std::shared_ptr<const treesync::filter> rules, std::string name) const {
    cli_deletion d = *this;
    d.dst_rules = std::move(rules);
    d.prefix = name.empty() ? std::string() : name + '/';
    return d;
  }
};

/// The directories cli_deletion kept everything in for not being the ones DST's rule files were
/// read from, added to the report `r` as errors (errc::directory_changed: exit 23, as other
/// entries kept for safety), each named by its path below the run's DST root.
inline void report_dst_swaps(const cli_deletion& deletion, treesync::report& r) {
  if (!deletion.swaps) return;
  std::lock_guard<std::mutex> lock(deletion.swaps->mu);
  for (const std::string& d : deletion.swaps->dirs)
    r.errors.push_back({d, treesync::operation::unlink, treesync::errc::directory_changed, treesync::side::destination});
}

/// -L, -l, --copy-unsafe-links, --safe-links, --no-links.  It needs the link's target
/// (--copy-unsafe-links, --safe-links), so the engine reads each source symlink once more than
/// links::dereference would.  For SRC without a trailing slash rsync judges a link from the top of
/// its transfer, SRC's parent, so `NAME/l -> ../x` (DST/NAME/l naming DST/x) is safe: the same test
/// the engine made is made again for `NAME/path`.
struct cli_links {
  treesync::links::kind k;
  std::string prefix;  // SRC without a slash: "NAME/"
  const char* state_key() const {
    // the transfer's top changes which links are safe: a state file of one is not the other's
    const bool judges = k == treesync::links::kind::dereference_unsafe || k == treesync::links::kind::preserve_safe;
    return !judges || prefix.empty() ? treesync::links::chosen{k}.state_key()
           : k == treesync::links::kind::preserve_safe ? "preserve_safe/NAME"
                                                       : "dereference_unsafe/NAME";
  }
  treesync::link_action on_symlink(std::string_view rel, std::string_view target, bool inside) const {
    if (!prefix.empty()) {
      std::string path = prefix;
      path.append(rel.data(), rel.size());
      inside = treesync::detail::link_stays_inside(path, target);
    }
    return treesync::links::chosen{k}.on_symlink(rel, target, inside);
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

inline treesync::options library_options(const run_context& c) {
  return library_options(c.opt, c.jobs, c.cancel, c.backup_dir);
}

/// The comparison of the command line `o` (--checksum, --size-only, --update, --modify-window).
/// `meter`: --progress's, told of each file found current, or null (the MPI tool: no meter).
inline cli_compare make_compare(const options& o, progress_meter* meter = nullptr) {
  return cli_compare{{o.compare, std::chrono::nanoseconds(o.modify_window_ns)}, meter, o.ignore_times};
}

/// The filesystem of a run (posix_fs): DST pinned to the directory the walk checked and DST's rule
/// files were read from (walk_destination, keep_dst_rule_files), or, when DST does not exist yet,
/// to the directory it is to be made in; --state's directory to the one its walk reached; so a
/// name given to another directory (or to a link) in between is not where the run works.
inline void pin_dst(treesync::posix_fs& fs, const cli_deletion& deletion) {
  const dst_directories* d = deletion.dst_dirs.get();
  if (!d) return;
  if (d->unreachable) {
    fs.pin_unreachable(d->path, d->unreachable);
    if (!d->operand.empty()) fs.pin_unreachable(d->operand, d->unreachable);
  } else if (d->top >= 0)
    fs.pin_root(d->path, d->top);
  else if (d->parent >= 0)
    fs.pin_missing_root(d->path, d->parent);
  if (d->state_dir >= 0) fs.pin_root(d->state_dir_path, d->state_dir);  // --state's directory, as walked
  else if (d->state_dir_unreachable) fs.pin_unreachable(d->state_dir_path, d->state_dir_unreachable);
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
  treesync::posix_fs fs;
  pin_dst(fs, deletion);
  return treesync::sync(fs, src, dst, lib, compare, deletion, cli_links{o.links, {}}, patterns,
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
  if (!c.opt.name.empty()) {
    treesync::posix_fs fs;
    pin_dst(fs, c.deletion);
    return treesync::sync(fs, c.opt.src_root, c.opt.dst_root, library_options(c), compare, c.deletion,
                          cli_links{c.opt.links, c.opt.name + '/'}, named_filter{c.patterns, c.opt.name + '/'}, c.observer, ec);
  }
  return sync_with(c.opt, compare, c.deletion, c.patterns, c.opt.src_root, c.opt.dst_root, library_options(c), ec,
                   c.observer);
}

/// Whether the directory `path` would be made in lies in the directory `dir` (or is it): its
/// parent's real path and each ancestor of it compared with `dir` by device and inode.  A parent
/// that cannot be resolved answers no (mkdir fails there, and the library says why).
inline bool inside_directory(std::string path, const struct stat& dir) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::size_t slash = path.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  char* real = ::realpath(parent.c_str(), nullptr);
  if (!real) return false;
  std::string p = real;
  std::free(real);
  for (;;) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && st.st_dev == dir.st_dev && st.st_ino == dir.st_ino) return true;
    if (p == "/") return false;
    const std::size_t up = p.rfind('/');
    p = up == 0 ? "/" : p.substr(0, up);
  }
}

/// The DST prepare_destination() made, to be taken back when the library then refuses the run:
/// DST's parent gets its times back too, so a refusal leaves nothing changed.
struct made_destination {
  std::string path;    // "" when nothing was made
  std::string parent;  // DST's parent, and its times before the mkdir
  struct timespec times[2] = {};
  int at = -1;         // DST's parent as walked (dst_directories::made_in), or -1: by path
  std::string leaf;    // DST's name there
};

/// rsync makes a missing DST (not its parents) before it copies SRC into DST/NAME.  Called before
/// the run when SRC is the directory itself (opt.name set): DST is made only when SRC is a
/// directory (else the library's refusal names SRC, and nothing is written), not under -n, and
/// not inside SRC (DST/NAME would be nested in SRC: the run goes to DST itself, which the library
/// refuses as nested before anything is written).
/// When DST cannot be made (its parent is missing, ...) or under -n, the run goes to DST itself:
/// the library then refuses with DST's own reason, or, under -n, plans DST/NAME's contents as new
/// into a DST that does not exist, which is the same plan.  A DST made here that the library then
/// refuses to fill (an unsafe --backup-dir, ...) is removed again: unmake_destination().
/// `dirs`: DST as walked (walk_destination): DST is made there with mkdirat() and opened with
/// O_NOFOLLOW (dirs->parent), and the run then makes NAME in it; without (--insecure-links), by path.
inline made_destination prepare_destination(options& opt, dst_directories* dirs = nullptr) {
  made_destination made;
  if (opt.name.empty()) return made;
  if (dirs && dirs->unreachable) {  // the walk met no DST to make NAME in: nothing is made
    if (dirs->unreachable == ENOENT) opt.dst_root = opt.operands[1];  // (DST's parent missing: refused for DST)
    return made;
  }
  struct stat st;
  if (::stat(opt.operands[1].c_str(), &st) == 0 || errno != ENOENT) return made;  // exists (or the library says why not)
  if (::lstat(opt.operands[1].c_str(), &st) == 0) {  // a dangling symlink: the library refuses it
    opt.dst_root = opt.operands[1];
    return made;
  }
  if (::stat(opt.src_root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || opt.lib.dry_run ||
      inside_directory(opt.operands[1], st)) {
    opt.dst_root = opt.operands[1];
    return made;
  }
  std::string dst = opt.operands[1];
  while (dst.size() > 1 && dst.back() == '/') dst.pop_back();
  const std::size_t slash = dst.rfind('/');
  made.parent = slash == std::string::npos ? "." : slash == 0 ? "/" : dst.substr(0, slash);
  struct stat parent;
  const bool have_times = ::stat(made.parent.c_str(), &parent) == 0;
  if (dirs && dirs->made_in >= 0) {  // in the directory the walk checked, never through a link there
    if (::mkdirat(dirs->made_in, dirs->made_leaf.c_str(), 0777) != 0) {
      opt.dst_root = opt.operands[1];
      return made_destination{};
    }
    made.at = dirs->made_in;
    made.leaf = dirs->made_leaf;
    dirs->parent = ::openat(dirs->made_in, dirs->made_leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  } else if (::mkdir(opt.operands[1].c_str(), 0777) != 0) {
    opt.dst_root = opt.operands[1];
    return made_destination{};
  }
  made.path = dst;
  if (have_times) {
    made.times[0] = parent.st_atim;
    made.times[1] = parent.st_mtim;
  } else {
    made.times[0].tv_nsec = made.times[1].tv_nsec = UTIME_OMIT;
  }
  return made;
}

/// Takes back the DST prepare_destination() made, after a refusal: removed if still empty, its
/// parent's times set back.
inline void unmake_destination(const made_destination& made) {
  if (made.path.empty()) return;
  if (made.at >= 0 ? ::unlinkat(made.at, made.leaf.c_str(), AT_REMOVEDIR) != 0 : ::rmdir(made.path.c_str()) != 0) return;
  ::utimensat(AT_FDCWD, made.parent.c_str(), made.times, 0);
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

/// DST's per-directory rule files as they were before the run (dst_rule_files), read up front:
/// the library's reader (treesync/detail/dst_rules.hpp), shared with the MPI tool and Python.
using treesync::detail::dst_rule_texts;
using treesync::detail::read_dst_rule_file;
using treesync::detail::read_dst_rule_tree;

/// The most DST's rule files may hold in memory (texts and their directories' names).  Past it, a
/// directory whose rule files were not read keeps everything.
inline constexpr std::size_t dst_rule_budget = std::size_t{16} << 20;

/// The most the files DST's rule files merge may hold in memory (their texts and names, read
/// once and kept for the run): a file merged past it is "- *" (all kept in its directory).  Small,
/// so that a chain of rule files each merging a large one stays within twice what the run uses
/// without them (issue 45 item 4: 32 x "merge m" a level, m 356 KB, 64 levels held 23 MB).
inline constexpr std::size_t dst_merge_budget = std::size_t{2} << 20;

/// The most rules DST's rule files may hold at once (filter::max_rules, DST's own budget, not
/// shared with SRC's): a thread holds the rule files from DST's root down to its directory, so this
/// is the cap on DST's rules in force in a directory, and what an entry's match can cost (issue 45
/// item 5).  Past it, the directory whose rule file crossed it (and each one below it that adds a
/// rule) keeps everything in it, with a notice; a file is parsed only up to it.
inline constexpr std::size_t dst_max_rules = 4000;

/// The names of the per-directory rule files the command line's dir-merge rules (-F, ':') read.
inline std::vector<std::string> dir_merge_names(const options& o) {
  std::vector<std::string> names;
  for (const auto& f : o.filters) {
    if (f.kind != filter_arg::rule || !(f.value.rfind(':', 0) == 0 || f.value.rfind("dir-merge", 0) == 0)) continue;
    const auto space = f.value.find_last_of(' ');
    if (space != std::string::npos && space + 1 < f.value.size()) names.push_back(f.value.substr(space + 1));
  }
  return names;
}

/// The text of a file that a DST rule file merges, `name` in DST's directory `dir` (its name checked
/// by the filter: below the rule file's directory): read below DST's descriptor, no symlink
/// followed, once (keep_dst_rule_files() asks for all of them before any write), within the budget
/// of merged texts (past it: "- *", keep everything there).
inline std::string merged_rule_text(dst_directories& merged, std::string_view dir, std::string_view name) {
  std::lock_guard<std::mutex> lock(merged.mu);
  const std::pair<std::string, std::string> key{std::string(dir), std::string(name)};
  if (const auto m = merged.texts.find(key); m != merged.texts.end()) return m->second;
  // read for whoever could write the rule file (detail::read_dst_merge_file: a file they may not
  // read, or a missing one, refuses the run alike, as an unsafe merge name does)
  const auto below = [&](int at, std::string_view d) {
    treesync::posix_fs fs;
    treesync::posix_fs::dir_handle h(::fcntl(at, F_DUPFD_CLOEXEC, 0));
    return h.fd() < 0 ? std::string() : treesync::detail::read_dst_merge_file(fs, h, d, name);
  };
  std::string text;
  const std::string& n = merged.name;
  if (n.empty()) {
    if (merged.top >= 0) text = below(merged.top, dir);
  } else if (dir.empty()) {
    if (merged.parent >= 0) text = below(merged.parent, dir);
  } else if (merged.top >= 0 && dir.compare(0, n.size(), n) == 0 && (dir.size() == n.size() || dir[n.size()] == '/')) {
    text = below(merged.top, dir.substr(std::min(dir.size(), n.size() + 1)));
  }
  if (merged.bytes + text.size() + key.first.size() + key.second.size() > dst_merge_budget) {
    std::string keep_all("- *");  // keep all there; the text's memory given back (an assignment keeps it)
    text.swap(keep_all);
    merged.texts_full = true;
  }
  merged.bytes += text.size() + key.first.size() + key.second.size();
  return merged.texts.emplace(key, std::move(text)).first->second;
}

/// -F / dir-merge with --delete: the per-directory rule files of DST as they are before the run
/// (rsync reads them where it deletes, before it writes there; the run may copy SRC's over them).
/// Every file named by a dir-merge rule of the command line is read up front, in DST (for SRC
/// without a slash: in DST's parent itself and from DST/NAME down), through read_dst_rule_tree;
/// another file a rule file merges (its name below the rule file's directory: the filter refuses
/// any other) is read when first asked (keep_dst_rule_files asks for all before any write), below
/// the DST descriptor the tree was read from (detail::read_dst_merge_file: no symlink followed,
/// regular files only, and only one that whoever could write the rule file may read: otherwise,
/// or missing, a filter_error that refuses the run), and kept for the run, within dst_merge_budget
/// bytes ("- *" past it).  `dirs`: those
/// descriptors, for the run to work in the same DST (pin_dst).  The loader's directories are
/// relative to DST (make_filter).  A directory whose rule files were not read (unreadable, or past
/// `budget`: `texts.full`) is given "- *": what is in it is kept.
inline treesync::filter::loader dst_rule_files(const options& o, std::shared_ptr<dst_rule_texts>& texts,
                                               std::size_t budget = dst_rule_budget,
                                               std::shared_ptr<const dst_directories>* dirs = nullptr,
                                               std::shared_ptr<dst_directories> walked = nullptr) {
  const std::vector<std::string> names = dir_merge_names(o);
  namespace fs = std::filesystem;
  const fs::path top = o.dst_root;
  const fs::path root = o.name.empty() ? top : (top.parent_path().empty() ? fs::path(".") : top.parent_path());
  texts = std::make_shared<dst_rule_texts>();
  texts->budget = budget;
  const auto open_dir = [](const fs::path& p) { return ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); };
  // the directories as walked (walk_destination), or under --insecure-links opened by path here
  auto merged = walked ? walked : std::make_shared<dst_directories>();
  if (!walked) {
    merged->name = o.name;
    merged->path = o.dst_root;
    if (!o.name.empty()) merged->parent = open_dir(root);
    merged->top = open_dir(top);
  }
  if (dirs) *dirs = merged;
  if (!o.name.empty()) {  // DST itself (NAME's parent): its own files only
    const int fd = merged->parent;
    for (const auto& n : names)
      if (auto text = fd < 0 ? std::nullopt : read_dst_rule_file(fd, n)) texts->keep("", n, std::move(*text));
  }
  if (merged->top >= 0) read_dst_rule_tree(merged->top, o.name, names, *texts);
  // else: DST does not exist yet (or is not a directory): it holds no rule files
  std::shared_ptr<const dst_rule_texts> held = texts;
  static std::atomic<std::uint64_t> loaders{0};
  const std::uint64_t loader_id = ++loaders;
  return [held, names, merged, loader_id](std::string_view dir, std::string_view name) -> std::string {
    // each thread resumes from the directory it looked up last (this loader's): a walk down a deep
    // DST resolves each level once, not its whole path again per level (issue 45 item 5)
    thread_local std::pair<std::uint64_t, dst_rule_texts::place> last;
    if (last.first != loader_id) last = {loader_id, dst_rule_texts::place()};
    const auto kept = held->lookup(dir, name, &last.second);
    if (kept.text) return *kept.text;
    if (std::find(names.begin(), names.end(), name) != names.end())
      return held->full || kept.below_unread ? "- *" : std::string();  // none before the run
    return merged_rule_text(*merged, dir, name);
  };
}

/// --delete with per-directory rule files (-F, dir-merge): `deletion` made to keep what DST's rule
/// files exclude too, as they are now, before any write (dst_rule_files).  `read` reads the
/// --exclude-from / --include-from files as for make_filter.  Every rule file DST holds is parsed
/// here: false, with `message` set ("treesync: ...\n"), when one has a line that is not a rule, and
/// the run is refused before any write (rsync stops, exit 1, where it meets it, having deleted
/// what came before).  `notice`: a line for stderr when DST's rule files were past
/// dst_rule_budget or dst_max_rules.  Nothing changes without --delete or without a dir-merge rule.
template <class Read>
bool keep_dst_rule_files(const options& opt, Read&& read, cli_deletion& deletion, std::string& message,
                         std::string& notice, const treesync::filter* /*src_rules: unused, DST's budget is its own*/ = nullptr,
                         std::optional<treesync::merge_depth_error>* depth_error = nullptr,
                         std::shared_ptr<dst_directories> walked = nullptr) {
  if (opt.deletion != deletion_mode::extraneous ||
      std::none_of(opt.filters.begin(), opt.filters.end(), [](const filter_arg& f) {
        return f.kind == filter_arg::rule && (f.value.rfind(':', 0) == 0 || f.value.rfind("dir-merge", 0) == 0);
      }))
    return true;
  auto rules = std::make_shared<treesync::filter>();
  std::shared_ptr<dst_rule_texts> texts;
  std::shared_ptr<const dst_directories> dirs;
  filter_error bad;
  if (!make_filter(opt, read, *rules, bad, dst_rule_files(opt, texts, dst_rule_budget, &dirs, std::move(walked))))
    return true;  // the source's filter failed first
  // DST's own budget of parsed rules (SRC's rules do not use it up); past it, DST's keep everything
  rules->max_rules(dst_max_rules).keep_all_past_budget(true);
  try {
    texts->for_each_file([&](const std::string& dir, const std::string&, const std::string&) {
      (void)rules->excluded(dir.empty() ? "-" : dir + "/-", treesync::file_type::regular);
    });
  } catch (const treesync::filter_error& e) {
    message = std::string("treesync: ") + e.what() + " in DST " + display(opt.dst_root) + " (nothing was written)\n";
    if (const auto* d = dynamic_cast<const treesync::merge_depth_error*>(&e); d && depth_error) *depth_error = *d;
    return false;
  }
  if (rules->budget_overflows() > 0)
    notice = "treesync: DST's rule files hold more than " + std::to_string(rules->max_rules()) +
             " rules: in a directory whose rule files were not parsed, nothing is deleted\n";
  if (texts->full || (dirs && dirs->texts_full))
    notice = "treesync: DST's rule files hold more than " + std::to_string(dst_rule_budget >> 20) +
             " MiB, or the files they merge more than " + std::to_string(dst_merge_budget >> 20) +
             " MiB: in a directory whose rule files were not read, nothing is deleted\n";
  else if (texts->out_of_descriptors)
    notice = "treesync: DST's rule files were not all read (no file descriptors left): below a directory"
             " not read, nothing is deleted\n";
  deletion = deletion.with_dst_rules(std::move(rules), opt.name);
  deletion.dst_dirs = std::move(dirs);  // the run works in the DST whose rule files were read
  static std::atomic<std::uint64_t> reads{0};
  deletion.dst_read_id = ++reads;
  deletion.dst_read = std::move(texts);  // and in each directory of it read (cli_deletion::removes)
  deletion.swaps = std::make_shared<dst_swaps>();
  return true;
}

/// --progress's totals: a dry run of the same command line (filters, links, -x, --specials, -H)
/// into a destination that does not exist, next to DST, so that every entry the mirror carries is
/// reported once, as created; it reads only.  Returns whether it covered the whole source.
inline bool count_source(const options& opt, const treesync::filter& patterns, progress_meter& meter) {
  options counting = opt;
  counting.lib.dry_run = true;
  counting.itemize = counting.verbose = counting.json = counting.progress = false;
  counting.backup_dir.reset();
  counting.lib.temp_dir.clear();  // (relative: inside a DST the count never makes)
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
