// treesync - mirror the directory tree SRC into DST with the treesync library.
//
//   treesync [OPTIONS] SRC DST          (`treesync --help` lists every option)
//
// Options are spelled as rsync's where the meaning is the same; the content of SRC is mirrored into
// DST like `rsync -a --delete SRC/ DST/`.  Helpers live in examples/cli/: options.hpp (parsing and
// the help text), output.hpp (itemize, -v, --stats, --json), progress.hpp (--progress and the
// count of the source behind its totals), text.hpp (escaping), run.hpp and run_*.cpp (the options
// as policies, and the sync() call).
//
// Exit status: 0 done; 1 usage error; 2 refused before anything was touched (missing source, same or
// nested directories, empty source, --max-delete exceeded: the refusal says how many entries the
// run would delete, counted by a dry run without the cap); 23 some entries failed; 24 some source
// entries vanished during the run (23 wins over 24); 130 / 143 interrupted by SIGINT / SIGTERM.
//
// Output: every path printed on stdout or stderr goes through treesync_cli::display(): ASCII
// controls, DEL and '\' as treesync::escape() writes them (\n, \t, \r, \xNN, \\), and the bytes of
// invalid UTF-8, C1 controls, U+2028/9 and bidi overrides as \xNN, so a name cannot forge a line or
// drive the terminal.  Errors go to stderr as `treesync: OPERATION PATH: reason`, PATH relative to
// SRC/DST ("." for the roots themselves).
//
// Interrupts: SIGINT / SIGTERM set the flag passed as treesync::cancel_on: no new work is started,
// entries in flight complete or are discarded (temporaries removed), nothing partial is left at a
// final name.  The partial report is printed (-i / -v / --json: what was done, in order) and the
// exit status is 130 / 143.  A second signal exits at once (_exit) with the same status, printing
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
//     "exit_code": 0,                     // the process's exit status
//     "refusal": null,                    // or {"code": 2, "category": "generic", "message": "...",
//                                         //     "path": "DST"}: the message in CLI spelling (flags, counts:
//                                         // "would delete 312 entries, --max-delete=100 (...)"), the path
//                                         // at fault ("" when it is about both), + "path_hex" if needed
//     "cancelled": false,                 // true when interrupted (the counts are partial)
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
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "cli/run.hpp"
#include "cli/text.hpp"

#include <treesync/treesync.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using namespace treesync_cli;

// ---- interrupts ------------------------------------------------------------------------------------

static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the signal handler needs lock-free atomics");
std::atomic<bool> cancel_flag{false};  // passed to treesync::cancel_on
std::atomic<int> first_signal{0};

extern "C" {
// Async-signal-safe: lock-free atomic operations and _exit only.
static void on_signal(int sig) {
  if (first_signal.exchange(sig) != 0) _exit(sig == SIGINT ? 130 : 143);  // a second signal
  cancel_flag.store(true);
}
}

void install_signal_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sa.sa_flags = 0;  // no SA_RESTART: a call blocked when the signal arrives returns (EINTR) and the run stops
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// ---- filter files ----------------------------------------------------------------------------------

bool read_file(const std::string& name, std::string& text, std::error_code& ec) {
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

/// A refusal in the CLI's spelling: the message (options as flags, with counts) and the path at
/// fault ("" when the refusal is about both).  `would_delete`: what the run would delete, counted
/// for a --max-delete refusal.
struct refusal_text {
  std::string message;
  std::string path;
};

refusal_text describe_refusal(const options& opt, const std::error_code& ec, std::size_t would_delete) {
  const std::string& src = opt.operands[0];
  const std::string& dst = opt.operands[1];
  struct stat st;
  if (ec == treesync::errc::max_delete_exceeded)
    return {"would delete " + std::to_string(would_delete) + " entries, --max-delete=" +
                std::to_string(opt.max_delete ? *opt.max_delete : 0) + " (nothing was touched)",
            dst};
  if (ec == treesync::errc::empty_source)
    return {"source " + display(src) + " is empty and destination " + display(dst) +
                " is not (--allow-empty-source to proceed)",
            src};
  if (ec == treesync::errc::same_directory)
    return {"source " + display(src) + " and destination " + display(dst) + " are the same directory", dst};
  if (ec == treesync::errc::nested_directory)
    return {"source " + display(src) + " and destination " + display(dst) + " are nested in each other", dst};
  if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) {
    if (::stat(src.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {"source " + display(src) + ": " + ec.message(), src};
    if (::stat(dst.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      return {"destination " + display(dst) + ": " + ec.message(), dst};
    if (ec == std::errc::no_such_file_or_directory)
      return {"destination " + display(dst) + ": its parent directory does not exist", dst};
  }
  return {display(src) + " -> " + display(dst) + ": " + ec.message(), ""};
}

/// --progress's totals: a dry run of the same command line (filters, links, -x, --specials, -H)
/// into a destination that does not exist, next to DST, so that every entry the mirror carries is
/// reported once, as created; it reads only.  Returns whether it covered the whole source.
bool count_source(const options& opt, const treesync::filter& patterns, progress_meter& meter) {
  options counting = opt;
  counting.dry_run = true;
  counting.itemize = counting.verbose = counting.json = counting.progress = false;
  counting.backup_dir.reset();
  std::string dst = opt.operands[1];
  while (dst.size() > 1 && dst.back() == '/') dst.pop_back();
  const std::filesystem::path parent = std::filesystem::path(dst).parent_path();
  const std::string name = ".treesync-progress-count-" + std::to_string(::getpid());
  counting.operands[1] = parent.empty() ? name : (parent / name).string();
  printer counter(counting, &meter, printer::role::count);
  run_context context{counting, cli_deletion{deletion_mode::keep, treesync::unlimited}, cli_links{opt.links},
                      patterns, opt.jobs, meter.count_cancel(), counter, std::string()};
  std::error_code ec;
  const treesync::report r = run(context, ec);
  return !ec && !r.cancelled;
}

/// Whether the command line asks for --json (before any "--"): a usage error then prints JSON too.
bool wants_json(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") return false;
    if (a == "--json") return true;
  }
  return false;
}

/// --json for a usage error: one object, like the report's head, with the message.
void print_usage_json(const std::string& message) {
  std::string text = message.rfind("treesync: ", 0) == 0 ? message.substr(10) : message;
  const std::size_t nl = text.find('\n');
  if (nl != std::string::npos) text.resize(nl);
  std::string s = "{\"schema\":1,\"version\":" + json_string(TREESYNC_VERSION_STRING) +
                  ",\"status\":\"usage\",\"exit_code\":1,\"message\":" + json_string(text) + "}\n";
  std::fputs(s.c_str(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const parse_result parsed = parse(argc, argv);
  if (parsed.exit_now) {
    std::fputs(parsed.message.c_str(), parsed.exit_code == 0 ? stdout : stderr);
    if (parsed.exit_code != 0 && wants_json(argc, argv)) print_usage_json(parsed.message);
    return parsed.exit_code;
  }
  const options& opt = parsed.opt;
  const std::string& src = opt.operands[0];

  // the filter rules, in command-line order; per-directory rule files (-F, dir-merge) are read
  // from SRC's directories
  treesync::filter patterns = treesync::filter::reading(src);
  for (const auto& f : opt.filters) {
    switch (f.kind) {
      case filter_arg::exclude: patterns.add_plain(f.value, false); break;
      case filter_arg::include: patterns.add_plain(f.value, true); break;
      case filter_arg::rule:
        if (!patterns.add_rule(f.value)) {
          const std::string m = "treesync: --filter: not a rule treesync knows: " + display(f.value) +
                                " (use '+ PATTERN', '- PATTERN', 'dir-merge NAME' or '!')";
          std::fprintf(stderr, "%s\nTry 'treesync --help' for more information.\n", m.c_str());
          if (opt.json) print_usage_json(m);
          return 1;
        }
        break;
      case filter_arg::exclude_from:
      case filter_arg::include_from: {
        std::error_code ec;
        std::string text;
        if (!read_file(f.value, text, ec)) {
          const std::string m = "treesync: read " + display(f.value) + ": " + ec.message();
          std::fprintf(stderr, "%s\n", m.c_str());
          if (opt.json) print_usage_json(m);
          return 1;
        }
        patterns.add_rules(text, f.kind == filter_arg::include_from);
        break;
      }
    }
  }

  install_signal_handlers();

  // --progress: the meter, and the count of the source that gives it its totals (cli/progress.hpp)
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  std::unique_ptr<progress_meter> meter;
  if (opt.progress && (terminal || opt.progress_always)) {
    meter = std::make_unique<progress_meter>(terminal);
    meter->set_counting_current(!opt.max_delete);  // the library's plan would compare every file twice
    meter->start([&opt, &patterns, m = meter.get()] { return count_source(opt, patterns, *m); }, &cancel_flag);
  }
  printer observer(opt, meter.get());
  run_context context{opt,
                      cli_deletion{opt.deletion, opt.max_delete ? *opt.max_delete : treesync::unlimited},
                      cli_links{opt.links},
                      patterns,
                      opt.jobs,
                      &cancel_flag,
                      observer,
                      opt.backup_dir ? *opt.backup_dir : std::string()};
  std::error_code ec;
  treesync::report r = run(context, ec);
  if (meter) {
    const bool signalled = first_signal.load() != 0;
    meter->finish(!ec && !signalled, ec && !signalled && !r.cancelled);  // refused: nothing was done
  }
  observer.finish();
  sort_entries(r);  // errors, vanished, skipped, notices: in the order of the actions

  outcome out;
  const int sig = first_signal.load();
  if (sig != 0) {
    out.exit_code = sig == SIGINT ? 130 : 143;
    out.status = "interrupted";
    out.signal = sig == SIGINT ? "SIGINT" : "SIGTERM";
  } else if (ec) {
    out.exit_code = 2;
    out.status = "refused";
    out.refusal = ec;
  } else if (!r.errors.empty()) {
    out.exit_code = 23;
    out.status = "errors";
  } else if (!r.vanished.empty()) {
    out.exit_code = 24;
    out.status = "vanished";
  }

  refusal_text refused;
  if (out.refusal) {
    std::size_t would_delete = 0;
    if (ec == treesync::errc::max_delete_exceeded) {
      // the library refuses before its first deletion without saying how many it planned: count
      // them with a dry run of the same command line, without the cap (reads only)
      options counting = opt;
      counting.dry_run = true;
      counting.itemize = counting.verbose = counting.json = counting.progress = false;
      printer quiet(counting);
      run_context plan{counting, cli_deletion{opt.deletion, treesync::unlimited}, cli_links{opt.links}, patterns,
                       opt.jobs, &cancel_flag, quiet, std::string()};
      std::error_code plan_ec;
      would_delete = run(plan, plan_ec).deleted;
    }
    refused = describe_refusal(opt, ec, would_delete);
    std::fprintf(stderr, "treesync: refused: %s\n", refused.message.c_str());
  }
  print_errors(r);
  if (!opt.quiet) print_skipped(r);
  if (out.signal)
    std::fprintf(stderr, "treesync: interrupted by %s: no new work was started and no partial file was left "
                         "at a final name; the report is partial\n", out.signal);

  if (opt.json) {
    const std::string text = json_report(opt, r, out, opt.itemize || opt.verbose ? &observer.json_actions() : nullptr,
                                         refused.message, refused.path);
    std::fputs(text.c_str(), stdout);
  } else if (!out.refusal) {
    if (opt.stats)
      print_stats(r, opt.dry_run, out.signal != nullptr);
    else if (!opt.quiet)
      print_summary(r, opt.dry_run, out.signal != nullptr);
  }
  if (std::fflush(stdout) != 0 && out.exit_code == 0) {
    std::fprintf(stderr, "treesync: write stdout: %s\n", std::strerror(errno));
    out.exit_code = 23;
  }
  return out.exit_code;
}
