// examples/cli/outcome.hpp - what a run of a treesync tool comes to: the exit status, the refusal
// in the CLI's words, usage errors under --json, and everything printed after the run (refusal,
// errors, skipped specials, the interrupt notice, then --json or --stats or the summary line).
// Shared by examples/treesync.cpp and examples/treesync_mpi.cpp.
#ifndef TREESYNC_CLI_OUTCOME_HPP
#define TREESYNC_CLI_OUTCOME_HPP

#include "options.hpp"
#include "output.hpp"
#include "refusal.hpp"
#include "signals.hpp"
#include "text.hpp"

#include <treesync/treesync.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace treesync_cli {

/// `would_delete`: what the run would delete, for a --max-delete refusal (report::would_delete).
inline refusal_text describe_refusal(const options& opt, const std::error_code& ec, std::size_t would_delete) {
  refusal_facts facts{opt.src_root, opt.dst_root, opt.max_delete, would_delete, opt.state, std::nullopt};
  if (!opt.lib.temp_dir.empty()) facts.temp_dir = opt.lib.temp_dir.string();
  return describe_refusal(facts, ec, spelling::cli);
}

/// Whether the command line asks for --json (before any "--"): a usage error then prints JSON too.
inline bool wants_json(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") return false;
    if (a == "--json") return true;
  }
  return false;
}

/// --json for a usage error: one object, like the report's head, with the message (its first line,
/// without "NAME: ").
inline void print_usage_json(const tool_info& tool, const std::string& message) {
  const std::string prefix = std::string(tool.name) + ": ";
  std::string text = message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
  const std::size_t nl = text.find('\n');
  if (nl != std::string::npos) text.resize(nl);
  std::string s = "{\"schema\":1,\"version\":" + json_string(TREESYNC_VERSION_STRING) +
                  ",\"status\":\"usage\",\"exit_code\":1,\"message\":" + json_string(text) + "}\n";
  std::fputs(s.c_str(), stdout);
}

/// A usage error found after parse() (`message` as usage_message() or "NAME: reason\n"): printed on
/// stderr, and as JSON under --json.  Returns the exit status, 1.
inline int usage_exit(const tool_info& tool, bool json, const std::string& message) {
  std::fputs(message.c_str(), stderr);
  if (json) print_usage_json(tool, message);
  return 1;
}

/// What parse() decided when it did not return options to run with: help, version or a usage
/// error, printed.  Returns the exit status.
inline int parse_exit(const tool_info& tool, const parse_result& parsed, int argc, char** argv) {
  if (parsed.exit_code == 0) {
    std::fputs(parsed.message.c_str(), stdout);
    return 0;
  }
  return usage_exit(tool, wants_json(argc, argv), parsed.message);
}

/// The exit status and the status word of a run: interrupted (`sig`, first_signal), refused
/// (`refusal`), errors, vanished, or ok.
inline outcome decide_outcome(int sig, const std::error_code& refusal, const treesync::report& r) {
  outcome out;
  if (sig != 0) {
    out.exit_code = interrupted_exit_code(sig);
    out.status = "interrupted";
    out.signal = sig == SIGINT ? "SIGINT" : "SIGTERM";
  } else if (refusal) {
    out.exit_code = classify_refusal(refusal).exit_code;  // rsync's statuses where rsync has one
    out.status = "refused";
    out.refusal = refusal;
  } else if (!r.errors.empty()) {
    out.exit_code = 23;
    out.status = "errors";
  } else if (!r.vanished.empty()) {
    out.exit_code = 24;
    out.status = "vanished";
  }
  return out;
}

/// What a tool adds to the report: members of the --json object (after "jobs", each with its
/// leading comma) and lines after --stats.
struct report_extras {
  std::string json_members;
  std::string stats_lines;
};

/// Everything printed after the run, in order: the refusal, the errors and vanished entries, the
/// skipped specials (not under -q) and the interrupt notice on stderr; then --json (`actions`: the
/// printer's, with -i or -v), or --stats or the summary line unless refused.  The -i / -v lines
/// were printed by printer::finish() before.  Returns the exit status (23 when stdout fails).
inline int print_report(const options& opt, const treesync::report& r, outcome out, const refusal_text& refused,
                        const std::vector<std::string>* actions, const report_extras& extras = {}) {
  if (out.refusal) std::fprintf(stderr, "treesync: refused: %s\n", refused.message.c_str());
  print_errors(r, roots{opt.src_root, opt.dst_root});
  if (out.deletions_stopped)
    std::fprintf(stderr, "treesync: deletions stopped at --max-delete=%zu: %zu more not listed (dry run: nothing "
                         "was changed; without -n the run makes no deletion and exits 25)\n",
                 opt.max_delete ? *opt.max_delete : std::size_t{0}, out.deletions_stopped);
  // rsync: with --delete, any error reading SRC (not a vanished file) stops the deletions and is
  // said once, also when nothing was left to delete (library: keep_on_source_error)
  if (opt.deletion != deletion_mode::keep && !opt.ignore_errors &&
      std::any_of(r.errors.begin(), r.errors.end(),
                  [](const treesync::entry_error& e) { return e.side == treesync::side::source; }))
    std::fprintf(stderr, "IO error encountered -- skipping file deletion\n");
  if (!opt.quiet) print_skipped(r, opt.name, opt.links == links_mode::preserve_safe);
  if (out.signal)
    std::fprintf(stderr, "treesync: interrupted by %s: no new work was started; every file finished is kept "
                         "(none partial at a final name) and the report lists what was done\n", out.signal);

  if (opt.json) {
    const std::string text = json_report(opt, r, out, actions, refused.message, refused.path, extras.json_members);
    std::fputs(text.c_str(), stdout);
  } else if (!out.refusal) {
    if (opt.stats) {
      print_stats(r, opt.lib.dry_run, out.signal != nullptr);
      std::fputs(extras.stats_lines.c_str(), stdout);
    } else if (!opt.quiet) {
      print_summary(r, opt.lib.dry_run, out.signal != nullptr, opt.human_readable);
    }
  }
  if (std::fflush(stdout) != 0 && out.exit_code == 0) {
    std::fprintf(stderr, "treesync: write stdout: %s\n", std::strerror(errno));
    out.exit_code = 23;
  }
  return out.exit_code;
}

/// A rule file that stops the run: `e` (treesync::filter_error) in `text`, the whole line
/// ("treesync: ...\n").  A line that is no rule is a usage error, exit 1 (rsync's "Unknown filter
/// rule": RERR_SYNTAX); merges nested past rsync's depth limit (treesync::merge_depth_error: a
/// merge file that merges itself) are refused with rsync's status for it, 11 (RERR_FILEIO), the
/// report naming `path` (SRC or DST, whose rule file it is).
inline int filter_error_exit(const tool_info& tool, const options& opt, const treesync::filter_error& e,
                             const std::string& text, const std::string& path) {
  if (dynamic_cast<const treesync::merge_depth_error*>(&e) == nullptr) return usage_exit(tool, opt.json, text);
  outcome out;
  out.exit_code = 11;
  out.status = "refused";
  out.refusal = std::make_error_code(std::errc::too_many_symbolic_link_levels);  // ELOOP: a loop of merges
  std::string message = text;
  const std::string prefix = std::string(tool.name) + ": ";
  if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
  while (!message.empty() && message.back() == '\n') message.pop_back();
  const std::vector<std::string> no_actions;
  return print_report(opt, treesync::report{}, out, refusal_text{message, path},
                      opt.itemize || opt.verbose ? &no_actions : nullptr);
}

}  // namespace treesync_cli

#endif  // TREESYNC_CLI_OUTCOME_HPP
