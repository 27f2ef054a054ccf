// examples/cli/options.hpp - the treesync tool's command line: rsync spellings, parsed into a plain
// struct, and the --help text.  Part of the treesync example CLI (examples/treesync.cpp).
// Every option is one row: the library's switches (treesync::switch_table, treesync/policies.hpp)
// and the tool's own (cli_options() below: spellings, how it takes a value, what it does given and
// as --no-NAME); parse() reads the command line through them and knows no other name.
#ifndef TREESYNC_CLI_OPTIONS_HPP
#define TREESYNC_CLI_OPTIONS_HPP

#include "text.hpp"

#include <treesync/treesync.hpp>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace treesync_cli {

/// The default of -j/--jobs: 4, where the library's own default is 1.  Four workers overlap the
/// round trips of a network or FUSE filesystem, where a sync is latency bound, and they help on a
/// local disk too (a cold mirror of /usr/include on a 2-core VM: 2.3 s with -j1, 0.85 s with -j4;
/// the warm no-op run 0.17 s and 0.10 s).  Choosing by filesystem type would need statfs() magic
/// numbers that are neither portable nor conclusive (a local FUSE mount, a fast NFS on localhost),
/// so the tool does not guess: -j1 for strictly serial behaviour, -j0 for one worker per hardware
/// thread.
inline constexpr unsigned default_jobs = 4;

using compare_mode = treesync::compare::kind;    // the library's built-ins, chosen at run time
using links_mode = treesync::links::kind;
using deletion_mode = treesync::deletion::kind;

/// One filter option, kept in command-line order (rsync's rules: the first match wins).
struct filter_arg {
  enum kind_t { exclude, include, rule, exclude_from, include_from } kind;
  std::string value;  // the pattern, the --filter rule or the file name
};

struct options {
  // what is synced
  treesync::options lib;  // the library's switch table (treesync/policies.hpp): -n, -H, -o, -g, -x, -D, -X, --fsync, --max-size, ...
  deletion_mode deletion = deletion_mode::keep;  // rsync's default: nothing is deleted without --delete
  std::optional<std::size_t> max_delete;
  bool ignore_errors = false;  // --ignore-errors: delete even after a source error (rsync's)
  std::vector<filter_arg> filters;  // --exclude, --include, --filter, -F, --exclude-from, --include-from, in order
  links_mode links = links_mode::skip;  // rsync's default (the library's is links::dereference): -l, -L, -a change it
  compare_mode compare = compare_mode::size_mtime;  // -I alone: always (see parse())
  bool ignore_times = false;  // -I: rewrite every file the comparison would trust for its size and time (-u -I: newer DST files stay)
  std::int64_t modify_window_ns = 0;
  bool inplace = false;
  unsigned jobs = default_jobs;
  bool perms = true;             // -p (on unless --no-perms / --no-p)
  bool existing = false;         // --existing, --ignore-non-existing
  bool ignore_existing = false;  // --ignore-existing
  treesync::chmod_rules chmod;   // --chmod=CHMOD, each one added
  std::uint32_t umask = 022;     // the process's, read by parse() (--no-perms, --chmod without ugoa)
  std::optional<std::string> backup_dir;
  std::optional<std::string> state;  // --state=FILE
  bool insecure_links = false;  // --insecure-links: follow any symlink in DST, --*-from, --state, --backup-dir, --temp-dir
  std::uint64_t state_memory = treesync::default_state_memory;  // --state-memory=SIZE
  treesync::verify_level verify = treesync::verify_level::full;
  // what is printed
  bool itemize = false;
  bool verbose = false;
  bool quiet = false;
  bool stats = false;
  bool progress = false;         // --progress, --info=progress2 (off with -q and --json)
  bool progress_always = false;  // --progress=always: also when stdout is not a terminal
  bool json = false;
  bool human_readable = false;   // -h, --human-readable: the summary line's bytes in units
  // SRC DST, as given on the command line
  std::vector<std::string> operands;
  // The trees the run mirrors, by rsync's operand rule (resolve_operands()): SRC ending in '/'
  // (or whose last component is "." or "..") stands for its contents, mirrored into DST; any other
  // SRC for the directory itself, mirrored into DST/NAME.  `name` is NAME ("" for contents), the
  // prefix of the paths -i and -v print (rsync's: `s/f`).
  std::string src_root, dst_root, name;
};

/// rsync's meaning of the SRC operand: its contents when it ends in '/' or its last component is
/// "." or ".." (`s/`, `.`, `/`, `dir/.`, `..`), else the directory itself, whose name becomes a
/// directory in DST.  Returns that NAME, or "".
inline std::string source_name(const std::string& src) {
  if (src.empty() || src.back() == '/') return {};
  const std::size_t slash = src.rfind('/');
  const std::string last = slash == std::string::npos ? src : src.substr(slash + 1);
  if (last == "." || last == "..") return {};
  return last;
}

/// rsync's reading of an operand as remote (its check_for_hostspec()): "rsync://..." (a daemon
/// URL), or a colon before any '/': HOST:PATH (a remote shell), HOST::MODULE (a daemon); a
/// USER@ may precede HOST, and HOST may be an [IPv6] address.  A '/' before the first colon makes
/// the operand local (`./host:path`, `/abs:path`, `dir/a:b`); so does a '[' inside HOST, or a
/// bracketed HOST not followed by ':'.  Returns rsync's meaning ("HOST:PATH, a remote shell", ...)
/// or "" for a local path.
inline std::string remote_operand(const std::string& arg) {
  if (arg.size() >= 8) {
    std::string head = arg.substr(0, 8);
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (head == "rsync://") return "rsync://HOST/MODULE, an rsync daemon";
  }
  std::size_t host_start = 0;
  for (std::size_t i = 0; i < arg.size(); ++i) {
    const char c = arg[i];
    if (c == '/') return {};
    if (c == ':')
      return i + 1 < arg.size() && arg[i + 1] == ':' ? "HOST::MODULE, an rsync daemon"
             : host_start > 0                        ? "USER@HOST:PATH, a remote shell"
                                                     : "HOST:PATH, a remote shell";
    if (c == '@') {
      host_start = i + 1;
    } else if (c == '[') {
      if (i != host_start) return {};
      const std::size_t close = arg.find_first_of("]/", i + 1);
      if (close == std::string::npos || arg[close] != ']' || close == i + 1) return {};
      if (close + 1 < arg.size() && arg[close + 1] != ':') return {};
      i = close;  // the next character is ':' (remote) or the end (local)
    }
  }
  return {};
}

/// DST/NAME without doubled slashes ("/" + NAME for the root).
inline std::string join_name(std::string dst, const std::string& name) {
  while (dst.size() > 1 && dst.back() == '/') dst.pop_back();
  return dst == "/" ? dst + name : dst + '/' + name;
}

/// Sets o.src_root, o.dst_root and o.name from the operands (no filesystem access; see
/// prepare_destination() in run.hpp for the step that makes DST when it is missing).
inline void resolve_operands(options& o) {
  o.src_root = o.operands[0];
  o.name = source_name(o.operands[0]);
  o.dst_root = o.name.empty() ? o.operands[1] : join_name(o.operands[1], o.name);
}

/// What parse() decided: run, or exit with `exit_code` after printing `message` (help and
/// version go to stdout, errors to stderr).
struct parse_result {
  options opt;
  bool exit_now = false;
  int exit_code = 0;
  std::string message;
};

struct parse_state;

/// How an option takes its value: none, always (`--opt=V`, `--opt V`, `-jV`, `-j V`), or only
/// when written `--opt=V` (--progress[=WHEN]).
enum class takes { nothing, value, attached };

/// Where --help lists an option.
enum class section { synced, printed };

/// How far an option reaches: over the entries one at a time, or over the whole tree in one
/// process (a state file, a backup or temporary directory checked once, the live line; the
/// library's switches say so with treesync::switch_whole_tree).  A tool that shares a mirror out
/// in subtrees (treesync_mpi) refuses the latter: whole_tree_options().
enum class reach { entries, whole_tree };

/// One row of the tool's own options (the library's switches are treesync::switch_table's rows):
/// `cli`, its spellings as the library table writes them ("c,checksum": letters and long names;
/// "max-delete=N": the value's name for --help; after a ';', spellings accepted but not listed in
/// --help's head, e.g. "delete;del"); `py`, the keyword of Python's treesync.sync() that means the
/// same ("delete", "compare=checksum"; "" for none: python/tests walks this column against sync()'s
/// keywords); how it takes a value; what it does when given (`on`, with
/// the name as spelled and its value, or nullptr) and when given as --no-NAME (`off`; nullptr: no
/// such option); where --help lists it and its help (wrapped where it holds '\n', else at 108
/// columns); how far it reaches (reach::entries unless written).  A handler returns false
/// after parse_state::fail().  A row without `on` is help only (--no-OPTION); the row without `cli` stands for the library's switches, listed there.
struct cli_option {
  const char* cli;
  const char* py;  // Python's sync() keyword of the same meaning ("KEYWORD" or "KEYWORD=VALUE"), "" for none
  takes arg;
  bool (*on)(parse_state&, const std::string& name, const std::string* value);
  bool (*off)(parse_state&, const std::string& name);
  section where;
  const char* help;
  reach extent = reach::entries;
};

/// The tool's options, in --help's order (below parse_state).
inline const std::vector<cli_option>& cli_options();

/// One option's --help lines: its spellings in a 28-column field (a letter as -x, first; a name
/// as --name), then `help`, wrapped at its '\n's, or at 108 columns when it has none.
inline std::string option_help(std::string_view cli, std::string_view help) {
  cli = cli.substr(0, std::min(cli.find(';'), cli.size()));  // after ';': not listed
  std::string head = "  ";
  bool first = true;
  while (!cli.empty()) {
    const std::size_t comma = std::min(cli.find(','), cli.size());
    const std::string_view one = cli.substr(0, comma);
    const bool letter = one.size() == 1;
    if (first && !letter) head += "    ";
    if (!first) head += ", ";
    head += (letter ? "-" : "--") + std::string(one);
    first = false;
    cli.remove_prefix(std::min(comma + 1, cli.size()));
  }
  std::string out;
  std::string line = head;
  line.resize(std::max<std::size_t>(line.size() + 2, 28), ' ');
  if (help.find('\n') != std::string_view::npos) {  // broken where the row says
    while (true) {
      const std::size_t end = std::min(help.find('\n'), help.size());
      out += line + std::string(help.substr(0, end)) + '\n';
      if (end == help.size()) return out;
      help.remove_prefix(end + 1);
      line.assign(28, ' ');
    }
  }
  while (!help.empty()) {  // greedy, at 108 columns
    const std::size_t space = std::min(help.find(' '), help.size());
    const std::string_view word = help.substr(0, space);
    if (line.size() > 28 && line.size() + 1 + word.size() > 108) {
      out += line + '\n';
      line.assign(28, ' ');
    } else if (line.size() > 28) {
      line += ' ';
    }
    line += word;
    help.remove_prefix(std::min(space + 1, help.size()));
  }
  return out + line + '\n';
}

/// The --help lines of the options listed under `where`, in the table's order (the library's
/// switches where the table has its row without spellings).
inline std::string options_help(section where) {
  std::string out;
  for (const auto& row : cli_options()) {
    if (row.where != where) continue;
    if (row.cli) {
      out += option_help(row.cli, row.help);
      continue;
    }
    for (const auto& lib : treesync::switch_table)
      if (*lib.cli) out += option_help(lib.cli, lib.help);
  }
  return out;
}

/// The lines of --help listing the library's option_rules (defined below find_option()).
inline std::string rules_help();

inline const char* help_text() {
  static const std::string text = std::string(
      "usage: treesync [OPTIONS] SRC DST\n"
      "Copy the directory tree SRC into DST as `rsync -a` does: what is new or changed is copied, permission\n"
      "bits and modification times (ns) are kept, a run on an unchanged tree writes nothing.  As in rsync,\n"
      "SRC/ (a trailing slash, or SRC ending in . or ..) means its contents, copied into DST; SRC without it\n"
      "means the directory itself, copied into DST/NAME (DST is made when missing, not its parents).\n"
      "Nothing is deleted unless --delete is given: then DST (or DST/NAME) becomes a mirror of SRC.\n"
      "\n"
      "What is synced:\n") + options_help(section::synced) + std::string(
      "\n"
      "What is printed (errors always go to stderr as `treesync: OPERATION PATH (SIDE FULL-PATH): reason`):\n"
      ) + options_help(section::printed) + std::string(
      "\n"
      "Options refused together (a usage error, exit 1, nothing touched; the library's own refusals):\n"
      ) + rules_help() + std::string(
      "\n"

      "Filter rules (rsync's): --exclude, --include, --filter, -F and the --*-from files add rules in the\n"
      "order given; each entry, as the walk reaches it, gets the action of the first rule that matches it\n"
      "(none: included).  An excluded directory is not entered; a directory no rule excludes is.  A leading\n"
      "'/' anchors a pattern at SRC; a trailing '/' matches directories only; '*' and '?' stop at '/', '**'\n"
      "spans directories, 'dir/***' is dir and all below it, '[a-z]' a class; a pattern without '/' matches\n"
      "the last name, one with '/' the end of the path.  Only *.h files: --include='*/' --include='*.h'\n"
      "--exclude='*'.  Per-directory files (-F: .rsync-filter in any SRC directory) hold rules for what is\n"
      "below their directory, ahead of the rules after the dir-merge; a leading '/' there means that directory.\n"
      "A name such a file merges must lie below its directory (absolute or '..': refused, exit 1; symlinks not\n"
      "followed); SRC's rules count against a budget of 1,000,000 (past it the run stops), DST's (with --delete)\n"
      "against their own of 4,000 in force at once (past it, that directory keeps everything, with a notice).\n"
      "\n"
      "-i codes: YXcstpog... with Y: '>' file copied, 'c' created (directory, link), '.' metadata only,\n"
      "'h' hard link (-H: hf+++++++++ NAME => FIRST), '*deleting' removed; X: f file, d directory, L symlink,\n"
      "D device, S special; then c content differs (a link: its target), s size, t time, p permissions,\n"
      "o owner, g group ('+' on all when new or replacing another type).  Example: >f.st...... sub/data.csv\n"
      "A symlink written shows its target: cL+++++++++ lib/libz.so -> libz.so.1 (read from DST after the\n"
      "run; from SRC under -n).  A file whose data and mtime already matched, only re-stamped so later\n"
      "runs trust it (it was copied within 1 s of its source's mtime), is no change: not listed, counted\n"
      "as settled in --stats and --json.\n"
      "\n"
      "Order: -i, -v, the --json actions and the errors come in one order whatever -j is, rsync's: the\n"
      "printing waits for the end of the run (an interrupted run prints what was done).  A directory's line\n"
      "comes first, then the deletions in it, then its other entries by name, then its sub-directories by\n"
      "name (compared as NAME/, so a-b/ before a/), each followed by its contents.  Deletions in a\n"
      "directory: sub-directories, then other entries, each in reverse name order, a deleted directory's\n"
      "contents before it (rsync's --delete-during; rsync itself may print some of them earlier).\n"
      "\n"
      "Jobs: 4 workers overlap the round trips of a network filesystem and help on local disks too;\n"
      "the tool does not guess the filesystem (statfs types are not conclusive).\n"
      "\n"
      "Exit status: 0 done; 1 usage error (also --state=FILE in a missing directory, a missing\n"
      "--temp-dir, and the options refused together above: refused before anything is written); 2\n"
      "refused, nothing touched (same or nested directories, empty source, DST not a directory); 3 DST\n"
      "reached through another user's symlink (see --insecure-links; rsync's status); 11 the same for\n"
      "--backup-dir, --temp-dir, --state=FILE or an --exclude-from / --include-from file (rsync's \"failed\n"
      "to open exclude file\"), and for rule files whose merges nest past 32 files (a merge file that\n"
      "merges itself: rsync's \"merge-file include depth limit (32) exceeded\"); 23 some entries failed,\n"
      "or SRC is missing (as rsync); 24 some source entries vanished during the run; 25 --max-delete\n"
      "stopped the deletions (as rsync; here none is made, or under -n the first N are listed); 20\n"
      "interrupted by SIGINT / SIGTERM, as rsync (every file finished is kept and the report of what was\n"
      "done is printed; a second signal exits at once; either way no partial file is left at a final\n"
      "name, and the next run copies only the rest and removes the "
      "temporaries).\n"
      "\n"
      "Where treesync differs from rsync (each difference deletes or overwrites nothing rsync would keep):\n"
      "  | rsync                                  | treesync                                              |\n"
      "  | -r, -t are options                     | always on (--no-r, --no-t are usage errors)           |\n"
      "  | -p is an option (off by default)       | on unless --no-perms / --no-p (-p is accepted)        |\n"
      "  | -p (-a) as root without -o/-g keeps a  | set-user-ID kept only with SRC's owner (-o, or a run  |\n"
      "  | set-ID bit on root's copy of another   | as that owner), set-group-ID only with SRC's group    |\n"
      "  | user's file (a set-uid root program)   | (-g, or a run as that owner that is not root)         |\n"
      "  | SRC may be a file                      | SRC must be a directory (a file: refused, exit 2)     |\n"
      "  | DST/NAME of another type is replaced   | DST/NAME not a directory: refused, nothing touched    |\n"
      "  | --max-delete=N deletes N, then stops   | every other change made, no deletion (exit 25)        |\n"
      "  | an empty SRC empties DST (--delete)    | refused without --allow-empty-source (exit 2)         |\n"
      "  | --backup-dir=REL is relative to DST    | relative to the directory mirrored (DST/NAME for SRC) |\n"
      "  | --temp-dir=REL is relative to DST      | relative to the directory mirrored (DST/NAME for SRC) |\n"
      "  | --delete deletes a --temp-dir in DST   | never deleted (rsync's transfers then fail)           |\n"
      "  | --temp-dir through a symlink: followed | refused, nothing touched (exit 2; 11: another user's) |\n"
      "  | --del/--delete-after/... differ in when | all delete at the end of the run, none after a       |\n"
      "  | they delete                            | source error anywhere (rsync may have deleted some)   |\n"
      "  | -v lists names                         | -v lists create/update/meta/delete/skip and the name  |\n"
      "  | -c, --size-only, -u combine            | they exclude each other (usage error, exit 1)         |\n"
      "  | -i: 'created directory DST'            | not printed                                           |\n"
      "  | -i escapes a newline in a name: \\#012  | as \\n, \\t, \\x1b, '\\' as '\\\\', whatever the locale:    |\n"
      "  | and in a C locale each byte over 0x7f  | well-formed UTF-8 as it is, invalid bytes as \\xNN     |\n"
      "  | skipping non-regular file: on stdout   | on stderr (silenced by -q)                            |\n"
      "  | IO error encountered -- skipping file  | on stderr                                             |\n"
      "  | deletion: on stdout                    |                                                       |\n"
      "  | cannot delete non-empty directory: on  | an rmdir error on stderr (Directory not empty); for   |\n"
      "  | stdout                                 | an extraneous directory kept for its excluded         |\n"
      "  |                                        | entries (--delete): nothing                           |\n"
      "  | -i adds no summary line                | a summary line ends the output (-q drops it)          |\n"
      "  | -i: an owner/group change of a set-ID  | .f....o.... / .f.....g..., the change it is           |\n"
      "  | file is .f...p..... (chown clears it)  |                                                       |\n"
      "  | chown/chmod keeps a DST file's inode   | an owner change (or metadata of a file with other     |\n"
      "  |                                        | links) writes it afresh, with DST's owner and group   |\n"
      "  |                                        | where -o/-g do not set them: a DST hard link is split |\n"
      "  |                                        | (-i then lists the change of each of its names)       |\n"
      "  | -H: a group's first member is a DST    | the first name the walk reaches (copied afresh when   |\n"
      "  | member rsync keeps or its last name    | its metadata changes); other names' -i lines, and the |\n"
      "  |                                        | group's owner/group without -o/-g, may differ         |\n"
      "  | -H --existing, DST's entry of another  | the file replaces it, as without -H                   |\n"
      "  | type at a group's name: removed, and   |                                                       |\n"
      "  | nothing made if the group's last name  |                                                       |\n"
      "  | is new                                 |                                                       |\n"
      "  | -H, first name kept by -u or           | an existing other name is left alone, a new one is    |\n"
      "  | --ignore-existing: others synced alone | linked to DST's copy of the first name                |\n"
      "  | -F --delete: DST's rule files protect  | SRC's and DST's rule files protect (keeps more; a     |\n"
      "  | (a dir replaced by another type: none) | directory replaced by another type too: exit 23)      |\n"
      "  | a rule file merges any number of files | at most 1,024 in all (past that: a bad rule file,     |\n"
      "  | (nested at most 32 deep)               | exit 1); nested at most 32 deep, as rsync             |\n"
      "  | --no-perms: a special file replacing   | SRC's bits, umask applied, as any new entry           |\n"
      "  | another type gets that entry's bits    |                                                       |\n"
      "  | -L, symlink cycle: copied round the    | 'symbolic link cycle': not entered, nothing deleted,  |\n"
      "  | loop up to 40 links, exit 23           | exit 23                                               |\n"
      "  | an empty SRC (no slash) into a missing | DST/NAME, as for any SRC                              |\n"
      "  | DST becomes DST itself                 |                                                       |\n"
      "  | --existing: an empty SRC/ into a       | DST is made (empty), as for any SRC                   |\n"
      "  | missing DST makes nothing              |                                                       |\n"
      "\n"
      "Examples: --delete makes DST a mirror of SRC, deleting what SRC lacks, so give it a DST that only\n"
      "treesync fills; without --delete nothing in DST is deleted.\n"
      "  treesync -i --stats --delete build/include/ pkg/include    mirror generated headers into a directory\n"
      "                                                   that holds nothing else; list what changed, statistics\n"
      "  treesync -n -i -a src backup                     dry run: what would copying src into backup/src change?\n"
      "  treesync -u --exclude='__pycache__/' --exclude='*.pyc' build/lib/pkg/ src/pkg\n"
      "        copy-back of a package build into the checkout: no --delete, so the checkout's own files stay;\n"
      "        -u leaves a source edited since the build alone; build/lib/pkg/ (trailing slash) is the\n"
      "        package's contents, so they land in src/pkg (not src/pkg/pkg); byte-code caches stay out\n"
      "  treesync --delete --exclude-from=.syncignore --max-delete=100 data/ /mnt/mirror\n"
      "        mirror into a dedicated copy; refuse if more than 100 deletions are planned\n"
      "  treesync --json --delete src/ backup > report.json    machine-readable report for a CI log\n");
  return text.c_str();
}


/// Who parses the command line: the name in messages and --version, the --help text, and the
/// options it refuses as usage errors (treesync_mpi: those that span the whole tree).  The treesync
/// tool is the default.
struct tool_info {
  const char* name = "treesync";
  const char* (*help)() = help_text;
  std::vector<std::string> not_supported;  // options it refuses, one spelling each (every spelling of its row is refused)
  const char* not_supported_why = "";      // appended to "-H: not supported by NAME"
};

/// The usage error message of `tool`: "NAME: WHAT" and the pointer to --help, two lines.
inline std::string usage_message(const tool_info& tool, const std::string& what) {
  return std::string(tool.name) + ": " + what + "\nTry '" + tool.name + " --help' for more information.\n";
}

namespace detail {

/// Whether `name` (without dashes) is one of a row's spellings ("n,dry-run", "max-size=SIZE",
/// "progress[=WHEN]", "delete;del").
inline bool spelled(std::string_view cli, std::string_view name) {
  while (!cli.empty()) {
    const std::size_t comma = std::min(cli.find_first_of(",;"), cli.size());
    std::string_view one = cli.substr(0, comma);
    one = one.substr(0, std::min(one.find_first_of("=["), one.size()));
    if (!name.empty() && one == name) return true;
    cli.remove_prefix(std::min(comma + 1, cli.size()));
  }
  return false;
}

/// A size as rsync's --max-size takes it: a number (fractions allowed) and an optional unit K, M,
/// G or T (powers of 1024; a trailing B or iB is accepted).
inline bool parse_switch_value(const std::string& text, std::uint64_t& out) {
  errno = 0;
  char* end = nullptr;
  const double n = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno != 0 || !std::isfinite(n) || n < 0 || text[0] == '-' || text[0] == '+') return false;
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit == "B" || unit.empty()) unit = "";
  else if (unit.size() >= 2 && unit.back() == 'B') unit.pop_back();
  if (unit.size() == 2 && unit[1] == 'I') unit.pop_back();
  double scale = 1;
  if (unit == "K") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty()) return false;
  const double v = n * scale;
  if (v >= 18446744073709551615.0) return false;
  out = static_cast<std::uint64_t>(v);
  return true;
}
inline std::string value_kind(std::uint64_t) { return "size"; }

inline bool parse_count(std::string_view text, unsigned long long& out) {
  if (text.empty() || text.size() > 19) return false;
  unsigned long long v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  out = v;
  return true;
}

inline bool parse_seconds(const std::string& text, std::int64_t& ns) {
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const double s = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(s) || s < 0 || s > 1e9) return false;
  ns = static_cast<std::int64_t>(std::llround(s * 1e9));
  return true;
}

}  // namespace detail

/// What parse() holds while it reads the command line besides `options`: the choices rsync
/// settles only once every option is read (the links mode, the comparison, -F's count, what is
/// not supported), and the usage error that stops it.
struct parse_state {
  options& o;
  const tool_info& tool;
  parse_result& r;
  bool copy_links = false, copy_unsafe = false, safe_links = false;
  int links = -1;         // -l / --no-links, the last one wins (neither: skip, as --no-links)
  int compare_given = 0;  // 1: one of -c, --size-only, -u; 2: two different ones
  int rule_file_flags = 0;  // -F given so many times
  std::vector<std::string> unsupported;

  parse_state(options& opt, const tool_info& t, parse_result& res) : o(opt), tool(t), r(res) {}

  /// A usage error: parse() stops and the tool exits 1 with `what`.  Always false.
  bool fail(const std::string& what) {
    r.exit_now = true;
    r.exit_code = 1;
    r.message = usage_message(tool, what);
    return false;
  }
  void set_compare(compare_mode m) {
    compare_given = compare_given != 0 && o.compare != m ? 2 : 1;
    o.compare = m;
  }
  void reset_compare(compare_mode m) {  // --no-checksum and the like: only the mode it names
    if (o.compare != m) return;
    o.compare = compare_mode::size_mtime;
    compare_given = 0;
  }
};

namespace detail {
// a handler that sets a flag of parse_state or options: on() and off() from one pointer to member
template <auto Member>
bool set_on(parse_state& s, const std::string&, const std::string*) {
  s.o.*Member = true;
  return true;
}
template <auto Member>
bool set_off(parse_state& s, const std::string&) {
  s.o.*Member = false;
  return true;
}
// a handler that sets the path an option names (`to`): an empty one is a usage error, "--NAME: an
// empty WHAT name"
template <class T>
bool set_path(parse_state& s, const std::string& name, const std::string& value, const char* what, T& to) {
  if (value.empty()) return s.fail("--" + name + ": an empty " + what + " name");
  to = value;
  return true;
}
inline bool always_on(parse_state& s, const std::string& name) {
  return s.fail("--no-" + name + ": treesync always recurses and keeps times");
}
}  // namespace detail

/// The tool's options, in --help's order: every spelling parse() accepts besides the library's
/// switch table, what each does and its help.  --no-NAME works for each spelling of a row with
/// `off`.  A new option is a row here (and its behaviour where the run reads `options`).
inline const std::vector<cli_option>& cli_options() {
  using s_t = parse_state;
  using v_t = const std::string*;
  using n_t = const std::string&;
  static const std::vector<cli_option> rows = {
      {"a,archive", "", takes::nothing,
       [](s_t& s, n_t, v_t) {  // rsync's -rlptgoD; -o only as root, as rsync does
         s.links = 1;
         s.o.perms = true;
         s.o.lib.group = true;
         s.o.lib.specials = true;
         if (::geteuid() == 0) s.o.lib.owner = true;
         return true;
       },
       nullptr,
       section::synced,
       "rsync's -rlptgoD; here: -l (keep symlinks), -g (group), -D (specials and\n"
       "devices), and -o (owner) when run as root (as rsync does); -r -t are always on,\n"
       "-p unless --no-perms"},
      // the library's switches (treesync::switch_table), in its order
      {nullptr, nullptr, takes::nothing, nullptr, nullptr, section::synced, nullptr},
      // rsync's spellings (they differ in when rsync deletes; treesync plans every deletion before
      // the first one); the last of --delete / --no-delete wins; --delete-excluded implies it
      {"delete;del,delete-before,delete-during,delete-after,delete-delay", "delete", takes::nothing,
       [](s_t& s, n_t, v_t) {
         if (s.o.deletion == deletion_mode::keep) s.o.deletion = deletion_mode::extraneous;
         return true;
       },
       nullptr,
       section::synced,
       "delete DST entries that SRC lacks (off by default, as in rsync); rsync's\n"
       "--del, --delete-before, --delete-during, --delete-after, --delete-delay\n"
       "are the same here (the deletions come last, at the end of the run)"},
      {"no-delete", "delete=False", takes::nothing, [](s_t& s, n_t, v_t) { return s.o.deletion = deletion_mode::keep, true; }, nullptr,
       section::synced,
       "keep DST entries that SRC lacks (the default; the last of --delete /\n"
       "--no-delete wins)"},
      {"delete-excluded", "delete_excluded", takes::nothing, [](s_t& s, n_t, v_t) { return s.o.deletion = deletion_mode::excluded, true; },
       [](s_t& s, n_t) {
         if (s.o.deletion == deletion_mode::excluded) s.o.deletion = deletion_mode::extraneous;
         return true;
       },
       section::synced,
       "also delete excluded entries from DST (implies --delete)"},
      {"max-delete=N", "max_delete", takes::value,
       [](s_t& s, n_t, v_t v) {
         unsigned long long n = 0;
         if (!detail::parse_count(*v, n)) return s.fail("--max-delete: not a count: " + display(*v));
         s.o.max_delete = static_cast<std::size_t>(n);
         return true;
       },
       nullptr,
       section::synced,
       "delete nothing if the run would delete more than N: every other change\n"
       "is made, then exit 25; with -n: list the first N deletions, exit 25 as rsync"},
      {"exclude=PATTERN", "exclude", takes::value, [](s_t& s, n_t, v_t v) { return s.o.filters.push_back({filter_arg::exclude, *v}), true; },
       nullptr,
       section::synced,
       "exclude what matches PATTERN: neither copied nor deleted (see Filter rules)"},
      {"include=PATTERN", "include", takes::value, [](s_t& s, n_t, v_t v) { return s.o.filters.push_back({filter_arg::include, *v}), true; },
       nullptr,
       section::synced,
       "include what matches PATTERN (a rule before it may still exclude it)"},
      {"f,filter=RULE", "filter", takes::value, [](s_t& s, n_t, v_t v) { return s.o.filters.push_back({filter_arg::rule, *v}), true; },
       nullptr,
       section::synced,
       "one rule: '+ PATTERN', '- PATTERN', 'dir-merge NAME' (': NAME'), '!' (clear)"},
      // rsync: the first -F reads .rsync-filter files, the second also excludes them
      {"F", "filter", takes::nothing,
       [](s_t& s, n_t, v_t) {
         s.o.filters.push_back(
             {filter_arg::rule, ++s.rule_file_flags == 1 ? "dir-merge .rsync-filter" : "- .rsync-filter"});
         return true;
       },
       nullptr,
       section::synced,
       "the same as --filter='dir-merge .rsync-filter'; twice (-FF): also\n"
       "--filter='- .rsync-filter' (the rule files themselves are not copied)"},
      {"exclude-from=FILE", "exclude_from", takes::value,
       [](s_t& s, n_t, v_t v) { return s.o.filters.push_back({filter_arg::exclude_from, *v}), true; }, nullptr,
       section::synced,
       "exclude patterns from FILE, one per line; '+ ' / '- ' prefixes are honoured;\n"
       "blank lines and lines starting with '#' or ';' are skipped; '-' is stdin"},
      {"include-from=FILE", "include_from", takes::value,
       [](s_t& s, n_t, v_t v) { return s.o.filters.push_back({filter_arg::include_from, *v}), true; }, nullptr,
       section::synced,
       "include patterns from FILE, read the same way"},
      {"ignore-errors", "", takes::nothing, detail::set_on<&options::ignore_errors>, detail::set_off<&options::ignore_errors>,
       section::synced,
       "delete even after an error reading SRC (by default, as in rsync, a source\n"
       "error stops the deletions: IO error encountered -- skipping file deletion;\n"
       "they wait for the end of the run, so an error anywhere stops every one)"},
      {"L,copy-links", "links=follow", takes::nothing, [](s_t& s, n_t, v_t) { return s.copy_links = true; },
       [](s_t& s, n_t) { return s.copy_links = false, true; },
       section::synced,
       "copy what a symlink in SRC points to"},
      {"l,links", "links=preserve", takes::nothing, [](s_t& s, n_t, v_t) { return s.links = 1, true; },
       [](s_t& s, n_t) { return s.links = 0, true; },
       section::synced,
       "recreate symlinks as symlinks (-L wins over -l, as in rsync)"},
      {"copy-unsafe-links", "links=copy_unsafe_links", takes::nothing, [](s_t& s, n_t, v_t) { return s.copy_unsafe = true; },
       [](s_t& s, n_t) { return s.copy_unsafe = false, true; },
       section::synced,
       "keep symlinks that stay inside SRC, copy what the others point to"},
      {"safe-links", "links=safe_links", takes::nothing, [](s_t& s, n_t, v_t) { return s.safe_links = true; },
       [](s_t& s, n_t) { return s.safe_links = false, true; },
       section::synced,
       "with -l (-a): skip symlinks unsafe to rsync: absolute, or climbing above SRC/\n"
       "(SRC's parent for SRC without a slash) or with '..' after a name; DST's entry\n"
       "there is kept, -v lists each as skipped (--copy-unsafe-links and -L win)"},
      {"no-links", "links=skip", takes::nothing, [](s_t& s, n_t, v_t) { return s.links = 0, true; }, nullptr,
       section::synced,
       "skip symlinks, each named on stderr: skipping non-regular file \"NAME\" (the\n"
       "default without -l, -L, -a or --copy-unsafe-links, as in rsync)"},
      {"c,checksum", "compare=checksum", takes::nothing, [](s_t& s, n_t, v_t) { return s.set_compare(compare_mode::checksum), true; },
       [](s_t& s, n_t) { return s.reset_compare(compare_mode::checksum), true; },
       section::synced,
       "a DST file is current when size and content match (reads both)"},
      {"size-only", "compare=size_only", takes::nothing, [](s_t& s, n_t, v_t) { return s.set_compare(compare_mode::size_only), true; },
       [](s_t& s, n_t) { return s.reset_compare(compare_mode::size_only), true; },
       section::synced,
       "a DST file is current when its size matches"},
      {"u,update", "compare=update", takes::nothing, [](s_t& s, n_t, v_t) { return s.set_compare(compare_mode::newer), true; },
       [](s_t& s, n_t) { return s.reset_compare(compare_mode::newer), true; },
       section::synced,
       "leave DST files newer than SRC's alone (data, mode, owner, times);\n"
       "otherwise compare size and time"},
      // rsync's -I: its quick check takes no file for current; -c and --size-only decide before it
      // does (rsync's order), -u's newer files are left alone before any check (parse() settles it)
      {"I,ignore-times", "compare=ignore_times", takes::nothing, detail::set_on<&options::ignore_times>,
       detail::set_off<&options::ignore_times>,
       section::synced,
       "rewrite every file, even one whose size and time match; -c and --size-only\n"
       "win over it, and with -u a newer DST file is still left alone (as rsync)"},
      {"modify-window=SECS", "modify_window", takes::value,
       [](s_t& s, n_t, v_t v) {
         return detail::parse_seconds(*v, s.o.modify_window_ns) ||
                s.fail("--modify-window: not a number of seconds: " + display(*v));
       },
       nullptr,
       section::synced,
       "times within SECS seconds (fractions allowed) count as equal (FAT: 2)"},
      {"inplace", "inplace", takes::nothing, detail::set_on<&options::inplace>, detail::set_off<&options::inplace>,
       section::synced,
       "write into existing DST files instead of a temporary renamed into place"},
      {"j,jobs=N", "jobs", takes::value,
       [](s_t& s, n_t, v_t v) {
         unsigned long long n = 0;
         if (!detail::parse_count(*v, n) || n > 1024) return s.fail("--jobs: not a worker count (0-1024): " + display(*v));
         s.o.jobs = static_cast<unsigned>(n);
         return true;
       },
       nullptr,
       section::synced,
       "N parallel workers (default 4: see Jobs below; 1 serial; 0 one per CPU)"},
      {"backup-dir=DIR", "backup_dir", takes::value,
       [](s_t& s, n_t, v_t v) { return detail::set_path(s, "backup-dir", *v, "directory", s.o.backup_dir); },
       nullptr,
       section::synced,
       "move replaced and deleted DST files into DIR (relative: to DST), same paths;\n"
       "not with --inplace (a usage error naming both)",
       reach::whole_tree},
      {"T,temp-dir=DIR", "temp_dir", takes::value,
       [](s_t& s, n_t, v_t v) { return detail::set_path(s, "temp-dir", *v, "directory", s.o.lib.temp_dir); },
       nullptr,
       section::synced,
       "make each changed file's temporary in DIR (relative: to DST; it must exist,\n"
       "else exit 1), then move it into place (from another filesystem: copied beside\n"
       "the file, then renamed); inside DST it is never deleted",
       reach::whole_tree},
      {"state=FILE", "state", takes::value,
       [](s_t& s, n_t, v_t v) { return detail::set_path(s, "state", *v, "file", s.o.state); },
       nullptr,
       section::synced,
       "keep a state file: what the run left in DST, written at the end of a run that\n"
       "was not stopped, removed before its first write (FILE outside DST is best;\n"
       "inside DST it is never deleted or mirrored); --verify says how far it is trusted",
       reach::whole_tree},
      {"verify=LEVEL", "verify", takes::value,
       [](s_t& s, n_t, v_t v) {
         if (*v == "full") s.o.verify = treesync::verify_level::full;
         else if (*v == "dirs") s.o.verify = treesync::verify_level::dirs;
         else if (*v == "none") s.o.verify = treesync::verify_level::none;
         else return s.fail("--verify=" + display(*v) + ": expected full, dirs or none");
         return true;
       },
       nullptr,
       section::synced,
       "with --state: full (the default) reads all of DST, the state file is only\n"
       "written; dirs stats each DST directory and takes the entries of one whose\n"
       "stamps are unchanged from FILE: it misses a file edited in place or chmod'ed\n"
       "in DST; none reads nothing of DST that FILE vouches for: it misses anything\n"
       "done to DST since the last run with FILE (deleted, added, edited entries)",
       reach::whole_tree},
      {"state-memory=SIZE", "state_memory", takes::value,
       [](s_t& s, n_t, v_t v) {
         return (detail::parse_switch_value(*v, s.o.state_memory) && s.o.state_memory != 0) ||
                s.fail("--state-memory=" + display(*v) + ": expected a size above 0 (K, M, G: powers of 1024)");
       },
       nullptr,
       section::synced,
       "the most memory FILE's records may take (default 256M, about 1.3 million\n"
       "entries; K, M, G: powers of 1024): a larger FILE is ignored (a notice)"},
      {"insecure-links", "insecure_links", takes::nothing, detail::set_on<&options::insecure_links>,
       detail::set_off<&options::insecure_links>,
       section::synced,
       "follow any symlink in the paths named on the command line (rsync's opt-out):\n"
       "by default (rsync 3.5's rule) a symlink at any component of DST (DST/NAME\n"
       "too), --backup-dir, --temp-dir, --state or an --exclude-from / --include-from\n"
       "file is followed only when owned by root or by the user running treesync; one\n"
       "of another user is refused before anything is written (exit 3 or 11, below)"},
      {"A,acls", "", takes::nothing,
       [](s_t& s, n_t, v_t) { return s.unsupported.push_back("-A/--acls (the library has no ACL policy)"), true; },
       nullptr,
       section::synced,
       "not supported yet (a usage error, never silently ignored)"},
      {"r,recursive", "", takes::nothing, [](s_t&, n_t, v_t) { return true; }, detail::always_on,
       section::synced,
       "always on (accepted for rsync habits)"},
      {"t,times", "", takes::nothing, [](s_t&, n_t, v_t) { return true; }, detail::always_on,
       section::synced,
       "always on: modification times are kept (accepted for rsync habits)"},
      {"p,perms", "", takes::nothing, detail::set_on<&options::perms>, detail::set_off<&options::perms>,
       section::synced,
       "permission bits are kept (on by default, unlike rsync; -a sets it too);\n"
       "set-user-ID only with SRC's owner (-o, or run as that owner), set-group-ID\n"
       "only with SRC's group (-g, or run as that owner, not root): see below"},
      {"no-perms,no-p", "", takes::nothing, [](s_t& s, n_t, v_t) { return s.o.perms = false, true; }, nullptr,
       section::synced,
       "existing DST entries keep their permission bits (also when rewritten); new\n"
       "ones get SRC's under the umask, without set-ID/sticky bits (as rsync)"},
      {"chmod=CHMOD", "", takes::value,
       [](s_t& s, n_t, v_t v) {
         std::string why;
         return s.o.chmod.parse(*v, &why) || s.fail("--chmod=" + display(*v) + ": " + why);
       },
       nullptr,
       section::synced,
       "change SRC's permission bits as the run sees them, as rsync: comma-separated\n"
       "[ugoa][+-=][rwxXst] or [ugoa][+-=][ugo] items, octal modes, D (directories\n"
       "only) or F (the others) in front; no class named: the umask's bits stay"},
      {"existing;ignore-non-existing", "existing", takes::nothing, detail::set_on<&options::existing>,
       detail::set_off<&options::existing>,
       section::synced,
       "create nothing in DST, only update what exists (a new directory is not entered)"},
      {"ignore-existing", "ignore_existing", takes::nothing, detail::set_on<&options::ignore_existing>,
       detail::set_off<&options::ignore_existing>,
       section::synced,
       "change nothing that exists in DST, only create (directories are still entered)"},
      {"no-OPTION", "", takes::nothing, nullptr, nullptr,
       section::synced,
       "turn OPTION off (--no-l, --no-D, --no-inplace, ...): the last one given wins"},
      {"i,itemize-changes", "", takes::nothing, detail::set_on<&options::itemize>, detail::set_off<&options::itemize>,
       section::printed,
       "one line per change: rsync's 11-character code, then the path"},
      {"v,verbose", "", takes::nothing, detail::set_on<&options::verbose>, detail::set_off<&options::verbose>,
       section::printed,
       "one line per action: create, update, meta, delete or skip, then the path"},
      {"q,quiet", "", takes::nothing, detail::set_on<&options::quiet>, detail::set_off<&options::quiet>,
       section::printed,
       "no summary line, no --progress (what -i, -v, --stats, --json ask for is still\n"
       "printed)"},
      {"stats", "", takes::nothing, detail::set_on<&options::stats>, detail::set_off<&options::stats>,
       section::printed,
       "counts, bytes copied, elapsed time and rate, instead of the summary line"},
      {"progress[=WHEN]", "", takes::attached,  // --progress=WHEN; a bare --progress is auto
       [](s_t& s, n_t, v_t v) {
         const std::string when = v ? *v : std::string("auto");
         if (when != "auto" && when != "always" && when != "never")
           return s.fail("--progress=" + display(when) + ": expected auto, always or never");
         s.o.progress = when != "never";
         s.o.progress_always = when == "always";
         return true;
       },
       [](s_t& s, n_t) { return s.o.progress = s.o.progress_always = false, true; },
       section::printed,
       "one live line on a terminal (WHEN auto, the default): bytes done/total,\n"
       "percentage, rate, ETA, to-chk=LEFT/ENTRIES, the latest entry; totals come\n"
       "from a count of SRC run alongside, marked '+' (and no % or ETA) until it\n"
       "ends.  WHEN always: also when stdout is not a terminal, a line a second;\n"
       "never: off.  Never with -q or --json",
       reach::whole_tree},
      {"info=progress2", "", takes::value,
       [](s_t& s, n_t, v_t v) {
         if (*v != "progress2")
           return s.fail("--info=" + display(*v) +
                         ": not supported (treesync knows --info=progress2 only, the same as --progress)");
         return s.o.progress = true;
       },
       nullptr,
       section::printed,
       "the same as --progress (no other --info flag is supported)",
       reach::whole_tree},
      {"json", "", takes::nothing, detail::set_on<&options::json>, detail::set_off<&options::json>,
       section::printed,
       "the report as one JSON object on stdout, nothing else (actions too with -i/-v);\n"
       "usage errors and refusals too (status \"usage\" / \"refused\", the path at fault)"},
      {"h,human-readable", "", takes::nothing, detail::set_on<&options::human_readable>,
       detail::set_off<&options::human_readable>,
       section::printed,
       "the summary line's byte count in units (K, M, G: powers of 1024)"},
      {"help", "", takes::nothing,
       [](s_t& s, n_t, v_t) {
         s.r.exit_now = true;
         s.r.message = s.tool.help();
         return true;
       },
       nullptr,
       section::printed,
       "this help (so is -h given alone, as in rsync)"},
      {"version", "", takes::nothing,
       [](s_t& s, n_t, v_t) {
         s.r.exit_now = true;
         s.r.message = std::string(s.tool.name) + ' ' + TREESYNC_VERSION_STRING + "\n";
         return true;
       },
       nullptr,
       section::printed,
       "print the version"},
  };
  return rows;
}

/// The row of cli_options() or of the library's switch table spelled `name` (without dashes), as
/// given (`negated` false) or as --no-NAME (true: `name` has its "no-" prefix); nullptr for none.
/// A library switch is returned as its switch_row, the tool's own option as its cli_option.
struct found_option {
  const cli_option* row = nullptr;
  const treesync::switch_row* lib = nullptr;
  bool negated = false;
  std::string base;  // the spelling after "no-" when negated
  explicit operator bool() const { return row != nullptr || lib != nullptr; }
  bool takes_value() const { return !negated && ((row && row->arg == takes::value) || (lib && lib->value)); }
};
inline found_option find_option(const std::string& name) {
  found_option f;
  f.base = name;
  for (const int pass : {0, 1}) {
    if (pass == 1) {
      if (name.size() <= 3 || name.compare(0, 3, "no-") != 0) break;
      f.negated = true;
      f.base = name.substr(3);
    }
    for (const auto& row : treesync::switch_table)
      if (detail::spelled(row.cli, f.base)) return f.lib = &row, f;
    for (const auto& row : cli_options())
      if (row.cli && row.on && detail::spelled(row.cli, f.base) && (!f.negated || row.off)) return f.row = &row, f;
  }
  return found_option{};
}

/// The options that reach over the whole tree (reach::whole_tree; the library's switches with
/// treesync::switch_whole_tree), one spelling each, in --help's order: what a tool that shares a
/// mirror out in subtrees refuses (tool_info::not_supported).
inline std::vector<std::string> whole_tree_options() {
  const auto first = [](std::string_view cli) {
    return std::string(cli.substr(0, std::min(cli.find_first_of(",;=["), cli.size())));
  };
  std::vector<std::string> names;
  for (const auto& row : cli_options()) {
    if (!row.cli) {  // the library's switches stand here
      for (const auto& lib : treesync::switch_table)
        if (lib.whole_tree) names.push_back(first(lib.cli));
    } else if (row.extent == reach::whole_tree) {
      names.push_back(first(row.cli));
    }
  }
  return names;
}

/// The options `names` (one spelling each) as a list for a help text: each by its letter where it
/// has one ("-H"), else its first long name ("--backup-dir"), joined by ", ".
inline std::string options_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    const found_option f = find_option(n);
    std::string_view cli = f.row ? f.row->cli : f.lib ? f.lib->cli : n.c_str();
    cli = cli.substr(0, std::min(cli.find_first_of(",;=["), cli.size()));  // the first spelling
    out += std::string(out.empty() ? "" : ", ") + (cli.size() == 1 ? "-" : "--") + std::string(cli);
  }
  return out;
}

/// A row of the library's option_rules in its words, each option spelled as the command line
/// spells it (a letter where it has one: "-H", else its long name: "--backup-dir").
inline std::string rule_text(const treesync::option_rule& rule) {
  return treesync::option_rule_text(rule, [](const char* key) {
    std::string name = key;
    for (char& c : name) c = c == '_' ? '-' : c;
    return options_list({name});
  });
}

inline std::string rules_help() {
  std::string out;
  for (const auto& rule : treesync::option_rules) out += "  " + rule_text(rule) + '\n';
  return out;
}

/// The library's run-time options for the command line `o` (parse() checks them against the library's
/// option_rules; run.hpp runs with them).
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
  t.state_memory = o.state_memory;
  t.verify = o.verify;
  t.perms = o.perms;
  t.chmod = o.chmod;
  t.existing = o.existing;
  t.ignore_existing = o.ignore_existing;
  t.keep_on_source_error = !o.ignore_errors;  // rsync: an I/O error stops the deletions
  t.umask = o.umask;
  return t;
}

namespace detail {

/// Applies the option `name` (a long name without dashes, one short letter, or --no-NAME's
/// "no-NAME") by its row; `value` is set for options that take one.  False after a usage error.
inline bool apply_option(parse_state& st, const std::string& name, const std::string* value) {
  const found_option f = find_option(name);
  for (const auto& u : st.tool.not_supported)
    if (const found_option no = find_option(u); f && !f.negated && f.row == no.row && f.lib == no.lib)
      return st.fail((name.size() == 1 ? "-" : "--") + name + ": not supported by " + st.tool.name +
                     st.tool.not_supported_why);
  if (!f) return st.fail("unknown option " + display(name.size() == 1 ? "-" + name : "--" + name));
  if (!f.lib) return f.negated ? f.row->off(st, f.base) : f.row->on(st, name, value);
  // a switch of the library's table: set (with its value) or reset to its default
  options& o = st.o;
#define TREESYNC_CLI_FLAG(m, tag, state, cli, help) \
  if (std::string_view(f.lib->member) == #m) return o.lib.m = !f.negated, true;
  TREESYNC_FLAGS(TREESYNC_CLI_FLAG)
#undef TREESYNC_CLI_FLAG
#define TREESYNC_CLI_VALUE(m, type, def, tag, state, cli, help)                                      \
  if (std::string_view(f.lib->member) == #m) {                                                       \
    if (f.negated) return o.lib.m = def, true;                                                       \
    return detail::parse_switch_value(*value, o.lib.m) ||                                            \
           st.fail("--" + name + ": not a " + detail::value_kind(o.lib.m) + ": " + display(*value)); \
  }
  TREESYNC_VALUES(TREESYNC_CLI_VALUE)
#undef TREESYNC_CLI_VALUE
  return st.fail("unknown option --" + display(name));
}

/// `--name`, `--name=VALUE` or `--name VALUE` at argv[i]; returns the index of the last argument
/// it took.
inline int read_long_option(parse_state& st, int argc, char** argv, int i) {
  const std::string arg = argv[i];
  const auto eq = arg.find('=');
  const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
  const found_option f = find_option(name);
  if (f.takes_value()) {
    if (eq == std::string::npos && i + 1 >= argc) return st.fail("option --" + display(name) + " needs a value"), i;
    const std::string value = eq != std::string::npos ? arg.substr(eq + 1) : argv[++i];
    apply_option(st, name, &value);
  } else if (eq == std::string::npos) {
    apply_option(st, name, nullptr);
  } else if (f.row && !f.negated && f.row->arg == takes::attached) {  // --progress=WHEN
    const std::string value = arg.substr(eq + 1);
    apply_option(st, name, &value);
  } else {
    st.fail(f ? "option --" + display(name) + " takes no value" : "unknown option --" + display(name));
  }
  return i;
}

/// `-abc`, `-j4` or `-j 4` at argv[i]; returns the index of the last argument it took.
inline int read_short_options(parse_state& st, int argc, char** argv, int i) {
  const std::string arg = argv[i];
  for (std::size_t k = 1; k < arg.size() && !st.r.exit_now; ++k) {
    const std::string name(1, arg[k]);
    if (!find_option(name).takes_value()) {
      apply_option(st, name, nullptr);
      continue;
    }
    if (k + 1 == arg.size() && i + 1 >= argc) return st.fail("option -" + display(name) + " needs a value"), i;
    const std::string value = k + 1 < arg.size() ? arg.substr(k + 1) : argv[++i];
    apply_option(st, name, &value);
    break;
  }
  return i;
}

/// What the options decide together, once all are read: the usage errors of combinations, the
/// library's refusals, the links mode, the operands.  False after a usage error.
inline bool settle_options(parse_state& st) {
  options& o = st.o;
  if (!st.unsupported.empty()) {
    std::string list;
    for (const auto& u : st.unsupported) list += (list.empty() ? "" : ", ") + u;
    return st.fail(list + ": not supported yet");
  }
  if (st.compare_given == 2) return st.fail("-c/--checksum, --size-only and -u/--update exclude each other");
  // -I (rsync's order): -c and --size-only decide a file before -I is looked at, so it changes
  // nothing there; -u keeps a newer DST file, then -I rewrites the rest; alone, nothing is current
  if (o.compare == compare_mode::checksum || o.compare == compare_mode::size_only) o.ignore_times = false;
  else if (o.ignore_times && o.compare == compare_mode::size_mtime) o.compare = compare_mode::always;
  // the library's refusals (treesync::option_rules), in its words with the command line's spellings
  if (const treesync::option_rule* rule =
          treesync::refused_combination(library_options(o, 1, nullptr, o.backup_dir.value_or(""))))
    return st.fail(rule_text(*rule));
  if (o.json || o.quiet) o.progress = o.progress_always = false;  // JSON: stdout carries the object only; -q wins
  if (st.copy_links)
    o.links = links_mode::dereference;
  else if (st.copy_unsafe)
    o.links = links_mode::dereference_unsafe;
  else if (st.links == 1)  // --safe-links: only with -l, as in rsync
    o.links = st.safe_links ? links_mode::preserve_safe : links_mode::preserve;
  else  // neither -l, -a, -L nor --copy-unsafe-links: rsync skips symlinks, naming each (--safe-links too)
    o.links = links_mode::skip;
  if (o.operands.size() != 2)
    return st.fail(o.operands.size() < 2 ? "SRC and DST are required" : "too many operands (expected SRC DST)");
  // rsync reads HOST:PATH, USER@HOST:PATH, HOST::MODULE and rsync://HOST/ as remote: copying
  // into (or from) a local directory of that name would look like a remote copy made
  for (const std::string& arg : o.operands)
    if (const std::string form = remote_operand(arg); !form.empty())
      return st.fail("'" + display(arg) + "' names a remote host to rsync (" + form + "); " + st.tool.name +
                     " copies local trees only: write ./" + display(arg) + " for a local path of that name");
  resolve_operands(o);
  const mode_t mask = ::umask(0);  // read and put back while the tool has no other thread
  ::umask(mask);
  o.umask = static_cast<std::uint32_t>(mask);
  return true;
}

}  // namespace detail


/// Parses argv.  Short options combine (`-niv`, `-j4`); long options take `--opt=VALUE` or
/// `--opt VALUE`; `--` ends the options.  What each option does is its row: cli_options() and
/// the library's treesync::switch_table.
inline parse_result parse(int argc, char** argv, const tool_info& tool = {}) {
  parse_result r;
  parse_state st(r.opt, tool, r);
  if (argc == 2 && std::string_view(argv[1]) == "-h") {  // rsync: -h alone prints the help
    r.exit_now = true;
    r.message = tool.help();
    return r;
  }
  bool options_done = false;
  for (int i = 1; i < argc && !r.exit_now; ++i) {
    const std::string_view arg = argv[i];
    if (options_done || arg.size() < 2 || arg[0] != '-')
      r.opt.operands.emplace_back(arg);
    else if (arg == "--")
      options_done = true;
    else
      i = arg[1] == '-' ? detail::read_long_option(st, argc, argv, i) : detail::read_short_options(st, argc, argv, i);
  }
  if (!r.exit_now) detail::settle_options(st);
  return r;
}

}  // namespace treesync_cli

#endif  // TREESYNC_CLI_OPTIONS_HPP
