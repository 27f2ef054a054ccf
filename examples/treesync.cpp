// treesync - mirror the directory tree SRC into DST with the treesync library.
//
//   treesync [OPTIONS] SRC DST          (`treesync --help` lists every option)
//
// Options are spelled as rsync's where the meaning is the same; the content of SRC is mirrored into
// DST like `rsync -a --delete SRC/ DST/`.  Helpers live in examples/cli/, shared with treesync_mpi:
// options.hpp (parsing and the help text), run.hpp (the options as policies and filters, the
// sync() call, --progress's count of the source), output.hpp (itemize, -v, --stats, --json),
// progress.hpp (--progress: the meter behind its line), outcome.hpp (exit status, refusals, what
// is printed after the run), signals.hpp (SIGINT, SIGTERM), text.hpp (escaping).
//
// Exit status: 0 done; 1 usage error; 2 refused before anything was touched (same or nested
// directories, empty source); 3 DST reached through a symlink of another user than root or the
// caller, 11 the same for --backup-dir, an --exclude-from / --include-from file or --state=FILE (rsync
// 3.5's rule and statuses, cli/trust.hpp; --insecure-links opts out); 23 some entries failed, or a missing source; 24 some source entries
// vanished during the run (23 wins over 24); 25 --max-delete exceeded (every other change made, no
// deletion; the refusal says how many entries the run would delete: report::would_delete);
// 20 interrupted by SIGINT / SIGTERM (rsync's status).
//
// Output: every path printed on stdout or stderr goes through treesync_cli::display(): ASCII
// controls, DEL and '\' as treesync::escape() writes them (\n, \t, \r, \xNN, \\), and the bytes of
// invalid UTF-8, C1 controls, U+2028/9 and bidi overrides as \xNN, so a name cannot forge a line or
// drive the terminal.  Errors go to stderr as `treesync: OPERATION PATH (SIDE FULL-PATH): reason`,
// PATH relative to SRC/DST ("." for the roots themselves), SIDE `source` or `destination`, FULL-PATH
// that side's operand joined with PATH.
//
// Interrupts: SIGINT / SIGTERM set the flag passed as treesync::cancel_on: no new work is started,
// entries in flight complete or are discarded (temporaries removed), nothing partial is left at a
// final name, and every file finished is kept (a new directory is put in place with what it
// holds), so the next run copies only the rest.  The report of what was done is printed (-i / -v /
// --json: what exists now, in order) and the exit status is 20, as rsync's.  A second signal exits at once (_exit) with the same status, printing
// nothing more (the -i / -v lines are kept until the end of the run, so none are printed):
// temporaries in flight may stay behind under their `.treesync-tmp-*` names, never at a final
// name, and the next run removes them.  (--inplace writes at the final name by design: an
// interrupted --inplace copy leaves a partial file with a wrong mtime, which the next run rewrites.)
//
// --json schema (version 1).  One object on one line on stdout; nothing else is written to stdout
// (errors still go to stderr as text).  A usage error (exit 1) with --json on the command line
// prints one object too: {"schema": 1, "version": "0.1.0", "status": "usage", "exit_code": 1,
// "message": "unknown option --bogus"} (the message as on stderr, without "treesync: ").
//
//   {
//     "schema": 1,                        // bumped on incompatible changes
//     "version": "0.1.0",                 // treesync version
//     "source": "SRC", "destination": "DST",   // as given on the command line
//     "dry_run": false,
//     "jobs": 4,                          // workers used
//     "status": "ok",                     // "ok" | "errors" | "vanished" | "refused" | "interrupted"
//                                         // (refused: exit 2, or 3 / 11 for another user's symlink, 23, 25)
//     "exit_code": 0,                     // the process's exit status
//     "refusal": null,                    // or {"code": 2, "category": "generic", "message": "...",
//                                         //     "path": "DST"}: the message in CLI spelling (flags, counts:
//                                         // "would delete 312 entries, --max-delete=100 (...)"), the path
//                                         // at fault ("" when it is about both), + "path_hex" if needed
//     "cancelled": false,                 // true when interrupted (the counts: what was done before)
//     "signal": null,                     // or "SIGINT" / "SIGTERM"
//     "counts": {"scanned": 0, "created": 0, "updated": 0, "meta_updated": 0, "deleted": 0,
//                "excluded": 0, "skipped": 0, "cleaned": 0, "settled": 0, "errors": 0, "vanished": 0},
//                                         // settled: files verified by content whose (already equal)
//                                         // mtime was set again so later runs trust it; no action
//     "bytes_copied": 0,
//     "elapsed_seconds": 0.001234,
//     "bytes_per_second": 0,
//     "errors":   [ENTRY...],             // per-entry failures (exit 23); the lists are sorted as
//                                         // the actions are
//     "vanished": [ENTRY...],             // source entries that vanished or changed (exit 24)
//     "skipped":  [ENTRY...],             // special files, skipped links, other filesystems (-x)
//     "notices":  [ENTRY...],             // things worth knowing that are not failures
//     "actions":  [ACTION...]             // only with -i or -v: every action, in the order of -i
//                                         // (rsync's; see `treesync --help`), whatever -j is
//   }
//   ENTRY  = {"path": "sub/f", "operation": "copy", "code": 13, "category": "generic",
//             "message": "Permission denied"}
//   ACTION = {"kind": "create",           // create | update | update_meta | remove | skip | error | vanished
//             "type": "file",             // file | directory | symlink | fifo | socket | block device |
//                                         // character device | none
//             "path": "sub/f",            // relative to SRC/DST, "" for the roots
//             "target": "../f",           // symlinks created or updated only: the link's target
//             "itemize": ">f+++++++++",   // the -i code, or null (skip, error, vanished)
//             "changes": ["size", "mtime", "mode"],  // attributes that differed
//             "src_size": 10, "dst_size": 0,
//             "method": "copy_file_range",  // how the data was copied: reflink | copy_file_range |
//                                         // sendfile | read_write | memory, or null (nothing copied)
//             "sparse": false,            // the copy kept the source's holes
//             "message": null}            // the reason for skip / error / vanished
//   "code" / "category": std::error_code's value and category name ("generic" and "system": errno
//   values; "treesync": treesync::errc).
//
// Strings are JSON-escaped as RFC 8259 requires: '"', '\' and control characters (\n, \t, \u001b,
// ...); DEL, C1 controls, U+2028 and U+2029 are written as \uXXXX too.  File names are bytes, not
// necessarily UTF-8: a byte that is not part of well-formed UTF-8 is written as \u00XX (the byte's
// Latin-1 reading), which every parser accepts but which is ambiguous, so every "path", "source"
// and "destination" that is not well-formed UTF-8 is followed by "path_hex" / "source_hex" /
// "destination_hex": the exact bytes, two lowercase hex digits each.
#include "cli/options.hpp"
#include "cli/outcome.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "cli/run.hpp"
#include "cli/signals.hpp"
#include "cli/text.hpp"
#include "cli/trust.hpp"

#include <treesync/treesync.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include <sys/stat.h>
#include <unistd.h>

using namespace treesync_cli;

namespace {

/// --state=FILE: its directory must exist, or the whole run would be done before the save fails
/// (DST itself may be missing: the run makes it before it saves a state file kept inside it).
/// Returns the exit status of a usage error.
std::optional<int> check_state_dir(const tool_info& tool, const options& opt) {
  if (!opt.state) return std::nullopt;
  const std::filesystem::path dir = std::filesystem::path(*opt.state).parent_path();
  struct stat st;
  const auto norm = [](const std::filesystem::path& p) {
    std::string t = p.lexically_normal().string();
    while (t.size() > 1 && t.back() == '/') t.pop_back();
    return t;
  };
  const bool in_dst = norm(dir) == norm(opt.dst_root);
  if (dir.empty() || in_dst || (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) return std::nullopt;
  return usage_exit(tool, opt.json,
                    usage_message(tool, "--state=" + display(*opt.state) + ": directory " + display(dir.string()) +
                                            " " + (errno == ENOENT ? "does not exist" : "is not a directory") +
                                            " (nothing was written)"));
}

/// What the run reads before it writes: the filter rules in command-line order, DST (and
/// --backup-dir, --state) walked under rsync 3.5's rule, the source root's rule files and, with
/// --delete, DST's.  Returns the exit status of a refusal (1, 3 or 11).
struct prepared {
  treesync::filter patterns;
  std::shared_ptr<dst_directories> dst_dirs;
  cli_deletion deletion;
};
std::optional<int> prepare(const tool_info& tool, const options& opt, prepared& p) {
  filter_error bad;
  const rule_file_reader read_rules{&opt};  // rsync 3.5: no other user's symlink followed (cli/trust.hpp)
  if (!make_filter(opt, read_rules, p.patterns, bad)) {
    if (*read_rules.refused) return print_untrusted_refusal(opt, **read_rules.refused);  // exit 11
    return usage_exit(tool, opt.json, bad.usage ? usage_message(tool, bad.message) : "treesync: " + bad.message + "\n");
  }
  // DST, --backup-dir, --state: a component that is another user's symlink is refused (exit 3; 11)
  // (what DST's walk reached is where the run works, its rule files are read and DST is made: the
  // check holds until the open)
  if (const auto t = untrusted_operator_path(opt, &p.dst_dirs)) return print_untrusted_refusal(opt, *t);
  try {  // the source root's rule files (-F, dir-merge): a bad one stops the run before any write
    p.patterns.prepare();
  } catch (const treesync::filter_error& e) {  // exit 1, or 11 past the merge depth limit
    return filter_error_exit(tool, opt, e, std::string("treesync: ") + e.what() + "\n", opt.src_root);
  }
  // --delete with per-directory rule files (-F, dir-merge): what DST's rule files exclude is kept
  // too (rsync reads those where it deletes; cli_deletion)
  p.deletion.dst_dirs = p.dst_dirs;
  std::string message, notice;
  std::optional<treesync::merge_depth_error> depth_error;
  if (!keep_dst_rule_files(opt, read_rules, p.deletion, message, notice, &p.patterns, &depth_error, p.dst_dirs))
    return depth_error ? filter_error_exit(tool, opt, *depth_error, message, opt.dst_root)
                       : usage_exit(tool, opt.json, message);
  std::fputs(notice.c_str(), stderr);
  return std::nullopt;
}

/// --progress: the meter, and the count of the source that gives it its totals (cli/progress.hpp);
/// null without --progress, or when stdout is not a terminal (but for --progress=always).
std::unique_ptr<progress_meter> start_meter(options& opt, const treesync::filter& patterns) {
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  if (!opt.progress || !(terminal || opt.progress_always)) return nullptr;
  auto meter = std::make_unique<progress_meter>(terminal);
  meter->start([&opt, &patterns, m = meter.get()] { return count_source(opt, patterns, *m); }, &cancel_flag);
  return meter;
}

/// The run, and everything printed after it.  Returns the exit status.
int run_and_report(const tool_info& tool, options& opt, prepared& p) {
  // SRC without a trailing slash: DST is made when missing (rsync), and taken back on a refusal
  const made_destination made = prepare_destination(opt, p.dst_dirs.get());
  const std::unique_ptr<progress_meter> meter = start_meter(opt, p.patterns);
  printer observer(opt, meter.get());
  // -n --max-delete=N: rsync lists the first N deletions (and every other change) and exits 25;
  // the library's cap is for runs that write (over it, none of the deletions is made)
  const bool list_capped = opt.lib.dry_run && opt.max_delete;
  if (list_capped) observer.limit_removals(*opt.max_delete);
  cli_deletion deletion = p.deletion;
  deletion.max = opt.max_delete && !list_capped ? *opt.max_delete : treesync::unlimited;
  run_context context{opt, deletion, p.patterns, opt.jobs, &cancel_flag, observer, opt.backup_dir.value_or("")};
  std::error_code ec;
  treesync::report r;
  try {
    r = run(context, ec);
  } catch (const treesync::filter_error& e) {  // a bad rule file below the root: the run stopped there
    if (meter) meter->finish(false, false);
    return filter_error_exit(tool, opt, e, std::string("treesync: ") + e.what() + "\n", opt.src_root);
  }
  const bool signalled = first_signal.load() != 0;
  // refused: nothing was done (over --max-delete the run was made, but for its deletions)
  if (meter) meter->finish(!ec && !signalled, ec && ec != treesync::errc::max_delete_exceeded && !signalled && !r.cancelled);
  observer.finish();
  report_dst_swaps(context.deletion, r);  // DST directories exchanged since their rule files were read
  sort_entries(r);  // errors, vanished, skipped, notices: in the order of the actions
  outcome out = decide_outcome(first_signal.load(), ec, r);
  if (out.refusal && ec != treesync::errc::max_delete_exceeded) unmake_destination(made);  // nothing was written
  if (list_capped && !out.refusal && first_signal.load() == 0 && r.deleted > *opt.max_delete) {
    out.exit_code = 25;
    out.status = "max_delete";
    out.deletions_stopped = r.deleted - *opt.max_delete;
    r.deleted = *opt.max_delete;
  }
  const refusal_text refused = out.refusal ? describe_refusal(opt, ec, r.would_delete) : refusal_text{};
  return print_report(opt, r, out, refused, opt.itemize || opt.verbose ? &observer.json_actions() : nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  const tool_info tool;
  const parse_result parsed = parse(argc, argv, tool);
  if (parsed.exit_now) return parse_exit(tool, parsed, argc, argv);
  options opt = parsed.opt;
  if (const std::optional<int> refused = check_state_dir(tool, opt)) return *refused;
  prepared p{{}, {}, cli_deletion{opt.deletion, treesync::unlimited}};
  if (const std::optional<int> refused = prepare(tool, opt, p)) return *refused;
  // SRC without a trailing slash: rsync matches the rules against NAME itself too; an excluded
  // NAME transfers nothing, deletes nothing and makes no DST (exit 0)
  if (!opt.name.empty() && p.patterns.excluded(opt.name, treesync::file_type::directory)) {
    printer nothing(opt);
    nothing.finish();
    return print_report(opt, treesync::report{}, outcome{}, refusal_text{},
                        opt.itemize || opt.verbose ? &nothing.json_actions() : nullptr);
  }
  install_signal_handlers();
  return run_and_report(tool, opt, p);
}
