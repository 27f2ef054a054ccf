// treesync_mpi - one mirror of SRC into DST sharded over the ranks of an MPI job.
//
//   mpirun -np N treesync_mpi [OPTIONS] SRC DST        (srun treesync_mpi ... under Slurm)
//
// Options, output formats (-i, -v, --stats, --json) and exit status are those of the treesync CLI
// (examples/treesync.cpp, whose --json schema applies unchanged; "jobs" is the per-rank worker
// count and the object gains "ranks" and "frontier_depth").  Supported: -n, --delete,
// --no-delete, --delete-excluded, --max-delete=N, --exclude=P, --exclude-from=F,
// --allow-empty-source, -L, -l, --no-links, --copy-unsafe-links, -c, --size-only, -u,
// --modify-window=S, --inplace, -j N (threads per rank), -i, -v, -q, --stats, --json, -r -t -p
// (always on), -h, --version.  Options whose meaning spans the whole tree (-H, -x, --backup-dir)
// or that the CLI keeps for a single process (--progress) are usage errors.
//
// How the work is split (the library's seam for external schedulers, treesync::frontier and
// treesync::subtree):
//   1. guards, decided once by rank 0 before anything is written, then broadcast: dry-run shallow
//      passes with frontier{d} for d = 1, 2, ... find the depth at which there are several
//      subtrees per rank (and refuse like the library: missing source, same or nested
//      directories, empty source); with --max-delete, every rank dry-runs the subtrees it is
//      handed and the deletion counts are summed, so the limit holds for the whole run;
//   2. rank 0 runs the shallow pass (levels above the frontier: created, updated, deleted as
//      usual, directories at the frontier created but not entered) on a thread, and its main
//      thread hands the frontier's relative paths out on demand: a worker rank sends a request,
//      rank 0 answers with a path or "done" (MPI point-to-point; a large subtree does not stall
//      the others).  Rank 0 also syncs subtrees on a thread of its own;
//   3. every rank syncs each subtree with sync(SRC/rel, DST/rel, subtree{rel}, same policies,
//      allow_empty_source, jobs{-j});
//   4. after every rank has finished, rank 0 reruns the shallow pass, which sets the mtimes of
//      the shallow directories (its counts are not added: it only completes the first pass);
//   5. the per-rank reports are gathered by rank 0: counts summed, errors / vanished / skipped
//      entries and -i / -v / --json actions merged and sorted by path.
#include "cli/output.hpp"
#include "cli/text.hpp"

#include <treesync/treesync.hpp>

// the C API only (Open MPI and MPICH otherwise pull in their deprecated C++ bindings)
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using treesync_cli::display;
using treesync_cli::human_bytes;
using treesync_cli::json_path;
using treesync_cli::json_string;

// ---- options (the CLI's spelling) ------------------------------------------------------------------

enum class compare_mode { size_mtime, checksum, size_only, update };
enum class links_mode { dereference, preserve, unsafe, skip };
enum class deletion_mode { extraneous, keep, excluded };

struct options {
  bool dry_run = false;
  deletion_mode deletion = deletion_mode::extraneous;
  std::optional<std::size_t> max_delete;
  std::vector<std::string> excludes;
  std::vector<std::string> exclude_files;
  bool allow_empty_source = false;
  links_mode links = links_mode::dereference;
  compare_mode compare = compare_mode::size_mtime;
  std::int64_t modify_window_ns = 0;
  bool inplace = false;
  unsigned jobs = 4;
  bool itemize = false, verbose = false, quiet = false, stats = false, json = false;
  std::vector<std::string> operands;
};

const char* help_text() {
  return "usage: mpirun -np N treesync_mpi [OPTIONS] SRC DST\n"
         "Mirror SRC into DST like `treesync SRC DST`, the subtrees shared out over the MPI ranks.\n"
         "\n"
         "  -n, --dry-run             report what would be done, change nothing\n"
         "      --delete              delete DST entries SRC lacks (the default)\n"
         "      --no-delete           keep DST entries SRC lacks\n"
         "      --delete-excluded     also delete excluded DST entries\n"
         "      --max-delete=N        refuse the run if it would delete more than N entries (whole run)\n"
         "      --exclude=PATTERN     neither copy nor delete what matches (repeatable)\n"
         "      --exclude-from=FILE   read patterns from FILE ('-': stdin of rank 0)\n"
         "      --allow-empty-source  let an empty SRC empty DST\n"
         "  -L, --copy-links          copy what symlinks point to (the default)\n"
         "  -l, --links               copy symlinks as symlinks\n"
         "      --no-links            skip symlinks\n"
         "      --copy-unsafe-links   dereference links that point outside SRC, keep the others\n"
         "  -c, --checksum            compare content, not size and mtime\n"
         "      --size-only           compare sizes only\n"
         "  -u, --update              skip files newer in DST\n"
         "      --modify-window=S     mtimes within S seconds are equal\n"
         "      --inplace             write into existing DST files\n"
         "  -j, --jobs=N              N worker threads in each rank (default 4; 0 = one per hardware thread)\n"
         "  -i, --itemize-changes     one rsync-style line per change (sorted by path)\n"
         "  -v, --verbose             one line per action (sorted by path)\n"
         "  -q, --quiet               no summary line\n"
         "      --stats               statistics instead of the summary line\n"
         "      --json                one JSON object (the CLI's schema) on stdout\n"
         "  -h, --help                this help\n"
         "      --version             print the version\n"
         "\n"
         "Exit status: 0 done, 1 usage, 2 refused (nothing touched), 23 some entries failed, 24 some\n"
         "source entries vanished, 130/143 interrupted.\n";
}

struct parse_result {
  options opt;
  bool exit_now = false;
  int exit_code = 0;
  std::string message;
};

bool parse_count(std::string_view text, unsigned long long& out) {
  if (text.empty() || text.size() > 19) return false;
  unsigned long long v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  out = v;
  return true;
}

bool parse_seconds(const std::string& text, std::int64_t& ns) {
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const double s = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(s) || s < 0 || s > 1e9) return false;
  ns = static_cast<std::int64_t>(std::llround(s * 1e9));
  return true;
}

parse_result parse(int argc, char** argv) {
  parse_result r;
  options& o = r.opt;
  bool copy_links = false, copy_unsafe = false, no_delete = false, delete_excluded = false;
  int links = -1, compare_given = 0;
  const auto usage_error = [&](const std::string& what) {
    r.exit_now = true;
    r.exit_code = 1;
    r.message = "treesync_mpi: " + what + "\nTry 'treesync_mpi --help' for more information.\n";
    return false;
  };
  const auto set_compare = [&](compare_mode m) {
    compare_given = compare_given != 0 && o.compare != m ? 2 : 1;
    o.compare = m;
  };
  const auto apply = [&](const std::string& name, const std::string* value) -> bool {
    unsigned long long n = 0;
    if (name == "dry-run" || name == "n") o.dry_run = true;
    else if (name == "delete" || name == "r" || name == "recursive" || name == "t" || name == "times" ||
             name == "p" || name == "perms") {
    } else if (name == "no-delete") {
      no_delete = true;
      o.deletion = deletion_mode::keep;
    } else if (name == "delete-excluded") {
      delete_excluded = true;
      o.deletion = deletion_mode::excluded;
    } else if (name == "max-delete") {
      if (!parse_count(*value, n)) return usage_error("--max-delete: not a count: " + display(*value));
      o.max_delete = static_cast<std::size_t>(n);
    } else if (name == "exclude") o.excludes.push_back(*value);
    else if (name == "exclude-from") o.exclude_files.push_back(*value);
    else if (name == "allow-empty-source") o.allow_empty_source = true;
    else if (name == "copy-links" || name == "L") copy_links = true;
    else if (name == "links" || name == "l") links = 1;
    else if (name == "no-links") links = 0;
    else if (name == "copy-unsafe-links") copy_unsafe = true;
    else if (name == "checksum" || name == "c") set_compare(compare_mode::checksum);
    else if (name == "size-only") set_compare(compare_mode::size_only);
    else if (name == "update" || name == "u") set_compare(compare_mode::update);
    else if (name == "modify-window") {
      if (!parse_seconds(*value, o.modify_window_ns))
        return usage_error("--modify-window: not a number of seconds: " + display(*value));
    } else if (name == "inplace") o.inplace = true;
    else if (name == "jobs" || name == "j") {
      if (!parse_count(*value, n) || n > 1024) return usage_error("--jobs: not a worker count (0-1024): " + display(*value));
      o.jobs = static_cast<unsigned>(n);
    } else if (name == "itemize-changes" || name == "i") o.itemize = true;
    else if (name == "verbose" || name == "v") o.verbose = true;
    else if (name == "quiet" || name == "q") o.quiet = true;
    else if (name == "stats") o.stats = true;
    else if (name == "json") o.json = true;
    else if (name == "help" || name == "h") {
      r.exit_now = true;
      r.message = help_text();
    } else if (name == "version") {
      r.exit_now = true;
      r.message = std::string("treesync_mpi ") + TREESYNC_VERSION_STRING + "\n";
    } else if (name == "hard-links" || name == "H" || name == "one-file-system" || name == "x" ||
               name == "backup-dir" || name == "progress") {
      const std::string shown = name.size() == 1 ? "-" + name : "--" + name;
      return usage_error(shown + ": not supported by treesync_mpi (use the treesync CLI)");
    } else {
      const std::string shown = name.size() == 1 ? "-" + name : "--" + name;
      return usage_error("unknown option " + display(shown));
    }
    return true;
  };
  const auto takes_value = [](std::string_view name) {
    return name == "j" || name == "max-delete" || name == "exclude" || name == "exclude-from" ||
           name == "modify-window" || name == "jobs" || name == "backup-dir";
  };
  bool options_done = false;
  for (int i = 1; i < argc && !r.exit_now; ++i) {
    const std::string arg = argv[i];
    if (options_done || arg.size() < 2 || arg[0] != '-') {
      o.operands.push_back(arg);
    } else if (arg == "--") {
      options_done = true;
    } else if (arg[1] == '-') {
      const auto eq = arg.find('=');
      const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (takes_value(name)) {
        std::string value;
        if (eq != std::string::npos) value = arg.substr(eq + 1);
        else if (i + 1 < argc) value = argv[++i];
        else return usage_error("option --" + display(name) + " needs a value"), r;
        apply(name, &value);
      } else if (eq != std::string::npos) {
        usage_error("option --" + display(name) + " takes no value");
      } else {
        apply(name, nullptr);
      }
    } else {
      for (std::size_t k = 1; k < arg.size() && !r.exit_now; ++k) {
        const std::string name(1, arg[k]);
        if (takes_value(name)) {
          std::string value;
          if (k + 1 < arg.size()) value = arg.substr(k + 1);
          else if (i + 1 < argc) value = argv[++i];
          else return usage_error("option -" + display(name) + " needs a value"), r;
          apply(name, &value);
          break;
        }
        apply(name, nullptr);
      }
    }
  }
  if (r.exit_now) return r;
  if (compare_given == 2) return usage_error("-c/--checksum, --size-only and -u/--update exclude each other"), r;
  if (no_delete && delete_excluded) return usage_error("--no-delete and --delete-excluded exclude each other"), r;
  if (copy_links) o.links = links_mode::dereference;
  else if (copy_unsafe) o.links = links_mode::unsafe;
  else if (links == 1) o.links = links_mode::preserve;
  else if (links == 0) o.links = links_mode::skip;
  if (o.operands.size() != 2)
    usage_error(o.operands.size() < 2 ? "SRC and DST are required" : "too many operands (expected SRC DST)");
  return r;
}

// ---- the policies the options select (as the CLI's) ---------------------------------------------------

struct cli_compare {
  compare_mode mode;
  std::chrono::nanoseconds window;
  // -c and --size-only give a current file the source's mtime, as compare::checksum / size_only do
  bool restamp() const { return mode == compare_mode::checksum || mode == compare_mode::size_only; }
  bool up_to_date(const treesync::file_pair& f) const {
    switch (mode) {
      case compare_mode::checksum: return treesync::compare::checksum.up_to_date(f);
      case compare_mode::size_only: return treesync::compare::size_only.up_to_date(f);
      case compare_mode::update:
        if (f.dst.mtime_ns > f.src.mtime_ns + window.count()) return true;
        return treesync::compare::size_mtime{window}.up_to_date(f);
      case compare_mode::size_mtime: break;
    }
    return treesync::compare::size_mtime{window}.up_to_date(f);
  }
};

struct cli_deletion {  // no limit: --max-delete is decided for the whole run before any rank writes
  deletion_mode mode;
  bool removes(std::string_view rel, treesync::file_type t, bool excluded) const {
    switch (mode) {
      case deletion_mode::keep: return treesync::deletion::keep.removes(rel, t, excluded);
      case deletion_mode::excluded: return treesync::deletion::delete_excluded.removes(rel, t, excluded);
      case deletion_mode::extraneous: break;
    }
    return treesync::deletion::extraneous.removes(rel, t, excluded);
  }
  std::size_t limit() const { return treesync::unlimited; }
};

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

// ---- error codes across ranks ----------------------------------------------------------------------

int category_id(const std::error_code& ec) {
  if (ec.category() == std::system_category()) return 1;
  if (ec.category() == treesync::error_category()) return 2;
  return 0;  // generic (and anything else, which the library does not produce)
}
std::error_code make_code(int value, int cat) {
  if (cat == 1) return {value, std::system_category()};
  if (cat == 2) return {value, treesync::error_category()};
  return {value, std::generic_category()};
}

// ---- what a rank did ----------------------------------------------------------------------------------

struct recorded_action {  // treesync::action with its own path
  treesync::action_kind kind;
  treesync::file_type type;
  std::string path;
  std::uint64_t src_size, dst_size;
  std::error_code code;
  unsigned changes;
  treesync::action view() const {
    treesync::action a{kind, type, path, src_size, dst_size, code, changes};
    return a;
  }
};

struct collector {  // the observer of every sync on a rank (two run at once on rank 0)
  bool on = false;
  std::mutex mu;
  std::vector<recorded_action> actions;
  void operator()(const treesync::action& a) {
    if (!on) return;
    std::lock_guard<std::mutex> lock(mu);
    actions.push_back({a.kind, a.type, std::string(a.path), a.src_size, a.dst_size, a.code, a.changes});
  }
};

/// The shallow pass's observer: also notes the frontier directories the pass creates or replaces.
struct shallow_observer {
  collector* c;
  std::size_t depth;
  std::mutex* mu;
  std::vector<std::string>* fresh;  // sorted at the end
  void operator()(const treesync::action& a) const {
    (*c)(a);
    if (a.type == treesync::file_type::directory &&
        (a.kind == treesync::action_kind::create || a.kind == treesync::action_kind::update) &&
        !a.path.empty() && static_cast<std::size_t>(std::count(a.path.begin(), a.path.end(), '/')) + 1 == depth) {
      std::lock_guard<std::mutex> lock(*mu);
      fresh->emplace_back(a.path);
    }
  }
};

/// A subtree sync's observer.  When the shallow pass has just created (or replaced) the subtree's
/// root, the serial run would count that directory once, as created; the subtree sync sees it
/// again (an existing directory with the wrong mode and mtime, or, in a dry run, a directory to
/// create).  That second action is not reported, and undone in the counts by the caller.
struct subtree_observer {
  collector* c;
  const std::string* root;
  bool fresh;
  std::size_t* dropped_meta;
  std::size_t* dropped_create;
  void operator()(const treesync::action& a) const {
    if (fresh && a.type == treesync::file_type::directory && a.path == *root) {
      if (a.kind == treesync::action_kind::update_meta) return void(++*dropped_meta);
      if (a.kind == treesync::action_kind::create) return void(++*dropped_create);
    }
    (*c)(a);
  }
};

void add(treesync::report& into, treesync::report&& r) {
  into.scanned += r.scanned;
  into.created += r.created;
  into.updated += r.updated;
  into.meta_updated += r.meta_updated;
  into.deleted += r.deleted;
  into.excluded += r.excluded;
  into.skipped += r.skipped;
  into.cleaned += r.cleaned;
  into.settled += r.settled;
  into.bytes_copied += r.bytes_copied;
  for (auto v : {&treesync::report::errors, &treesync::report::vanished, &treesync::report::skipped_entries,
                  &treesync::report::notices})
    for (auto& e : r.*v) (into.*v).push_back(std::move(e));
  into.cancelled = into.cancelled || r.cancelled;
}

// A flat byte buffer: a report and the actions, sent to rank 0.
struct writer {
  std::string b;
  void u64(std::uint64_t v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void str(std::string_view s) {
    u64(s.size());
    b.append(s.data(), s.size());
  }
  void code(const std::error_code& ec) {
    u64(static_cast<std::uint64_t>(static_cast<std::int64_t>(ec.value())));
    u64(static_cast<std::uint64_t>(category_id(ec)));
  }
  void entries(const std::vector<treesync::entry_error>& v) {
    u64(v.size());
    for (const auto& e : v) {
      str(e.path);
      str(e.operation);
      code(e.code);
    }
  }
};
struct reader {
  const char* p;
  const char* end;
  std::uint64_t u64() {
    std::uint64_t v = 0;
    if (end - p >= 8) std::memcpy(&v, p, sizeof v);
    p += std::min<std::ptrdiff_t>(8, end - p);
    return v;
  }
  std::string str() {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(u64(), std::uint64_t(end - p)));
    std::string s(p, n);
    p += n;
    return s;
  }
  std::error_code code() {
    const int v = static_cast<int>(static_cast<std::int64_t>(u64()));
    return make_code(v, static_cast<int>(u64()));
  }
  std::vector<treesync::entry_error> entries() {
    std::vector<treesync::entry_error> v(static_cast<std::size_t>(u64()));
    for (auto& e : v) {
      e.path = str();
      e.operation = str();
      e.code = code();
    }
    return v;
  }
};

std::string serialize(const treesync::report& r, const std::vector<recorded_action>& actions, std::uint64_t subtrees) {
  writer w;
  w.u64(subtrees);
  for (std::size_t v : {r.scanned, r.created, r.updated, r.meta_updated, r.deleted, r.excluded, r.skipped, r.cleaned,
                        r.settled})
    w.u64(v);
  w.u64(r.bytes_copied);
  w.u64(r.cancelled ? 1 : 0);
  w.entries(r.errors);
  w.entries(r.vanished);
  w.entries(r.skipped_entries);
  w.entries(r.notices);
  w.u64(actions.size());
  for (const auto& a : actions) {
    w.u64(static_cast<std::uint64_t>(a.kind));
    w.u64(static_cast<std::uint64_t>(a.type));
    w.str(a.path);
    w.u64(a.src_size);
    w.u64(a.dst_size);
    w.code(a.code);
    w.u64(a.changes);
  }
  return std::move(w.b);
}

/// Returns the number of subtrees the rank synced.
std::uint64_t deserialize(const std::string& buf, treesync::report& r, std::vector<recorded_action>& actions) {
  reader rd{buf.data(), buf.data() + buf.size()};
  const std::uint64_t subtrees = rd.u64();
  for (std::size_t* v : {&r.scanned, &r.created, &r.updated, &r.meta_updated, &r.deleted, &r.excluded, &r.skipped,
                         &r.cleaned, &r.settled})
    *v = static_cast<std::size_t>(rd.u64());
  r.bytes_copied = rd.u64();
  r.cancelled = rd.u64() != 0;
  r.errors = rd.entries();
  r.vanished = rd.entries();
  r.skipped_entries = rd.entries();
  r.notices = rd.entries();
  const std::size_t n = static_cast<std::size_t>(rd.u64());
  for (std::size_t k = 0; k < n && rd.p < rd.end; ++k) {
    recorded_action a;
    a.kind = static_cast<treesync::action_kind>(rd.u64());
    a.type = static_cast<treesync::file_type>(rd.u64());
    a.path = rd.str();
    a.src_size = rd.u64();
    a.dst_size = rd.u64();
    a.code = rd.code();
    a.changes = static_cast<unsigned>(rd.u64());
    actions.push_back(std::move(a));
  }
  return subtrees;
}

// ---- output (the CLI's formats) ---------------------------------------------------------------------

char type_letter(treesync::file_type t) {
  switch (t) {
    case treesync::file_type::regular: return 'f';
    case treesync::file_type::directory: return 'd';
    case treesync::file_type::symlink: return 'L';
    case treesync::file_type::block:
    case treesync::file_type::character: return 'D';
    case treesync::file_type::fifo:
    case treesync::file_type::socket: return 'S';
    default: return '?';
  }
}

std::string itemize_code(const treesync::action& a, bool checksum) {
  using treesync::action_kind;
  using treesync::file_type;
  namespace changed = treesync::changed;
  std::string code(11, '.');
  code[1] = type_letter(a.type);
  switch (a.kind) {
    case action_kind::remove: return "*deleting  ";
    case action_kind::create:
      code[0] = a.type == file_type::regular ? '>' : 'c';
      for (std::size_t k = 2; k < code.size(); ++k) code[k] = '+';
      return code;
    case action_kind::update:
      if (a.type == file_type::directory) {
        code[0] = 'c';
        for (std::size_t k = 2; k < code.size(); ++k) code[k] = '+';
        return code;
      }
      if (a.type == file_type::symlink) {
        code[0] = 'c';
        code[2] = 'c';
        return code;
      }
      code[0] = '>';
      if ((a.changes & changed::size) == 0 && (checksum || (a.changes & changed::mtime) == 0)) code[2] = 'c';
      break;
    case action_kind::update_meta: break;
    case action_kind::skip:
    case action_kind::error:
    case action_kind::vanished: return {};
  }
  if (a.changes & changed::size) code[3] = 's';
  if (a.changes & changed::mtime) code[4] = 't';
  if (a.changes & changed::mode) code[5] = 'p';
  return code;
}

const char* verbose_label(treesync::action_kind k) {
  switch (k) {
    case treesync::action_kind::create: return "create  ";
    case treesync::action_kind::update: return "update  ";
    case treesync::action_kind::update_meta: return "meta    ";
    case treesync::action_kind::remove: return "delete  ";
    case treesync::action_kind::skip: return "skip    ";
    case treesync::action_kind::error: return "error   ";
    case treesync::action_kind::vanished: return "vanished";
  }
  return "?";
}

std::string shown_path(const treesync::action& a) {
  std::string p = a.path.empty() ? std::string(".") : display(a.path);
  if (a.type == treesync::file_type::directory) p += '/';
  return p;
}

std::string json_action(const treesync::action& a, bool checksum) {
  std::string s = "{\"kind\":" + json_string(treesync::to_string(a.kind));
  s += ",\"type\":" + json_string(treesync::to_string(a.type));
  s += ',' + json_path("path", a.path);
  s += ",\"itemize\":";
  const std::string code = itemize_code(a, checksum);
  s += code.empty() ? std::string("null") : json_string(code);
  s += ",\"changes\":[";
  const char* sep = "";
  for (const auto& [bit, name] : {std::pair<unsigned, const char*>{treesync::changed::size, "size"},
                                  {treesync::changed::mtime, "mtime"},
                                  {treesync::changed::mode, "mode"}}) {
    if (a.changes & bit) {
      s += sep;
      s += json_string(name);
      sep = ",";
    }
  }
  s += "],\"src_size\":" + std::to_string(a.src_size) + ",\"dst_size\":" + std::to_string(a.dst_size);
  s += ",\"message\":";
  s += a.code ? json_string(a.code.message()) : std::string("null");
  return s + '}';
}

// the summary line, the rate and the elapsed seconds are the CLI's (cli/output.hpp)
using treesync_cli::print_summary;
using treesync_cli::rate;
using treesync_cli::seconds;

void print_stats(const treesync::report& r, bool dry, bool interrupted, int ranks) {
  treesync_cli::print_stats(r, dry, interrupted);  // the CLI's --stats, then the ranks
  std::printf("Ranks:               %d\n", ranks);
}

void print_entries(const std::vector<treesync::entry_error>& v, const char* suffix) {
  for (const auto& e : v)
    std::fprintf(stderr, "treesync: %s %s: %s%s\n", display(e.operation).c_str(),
                 e.path.empty() ? "." : display(e.path).c_str(), e.code.message().c_str(), suffix);
}

std::string json_error_code(const std::error_code& ec) {
  return "\"code\":" + std::to_string(ec.value()) + ",\"category\":" + json_string(ec.category().name()) +
         ",\"message\":" + json_string(ec.message());
}

std::string json_entries(const std::vector<treesync::entry_error>& v) {
  std::string s = "[";
  for (std::size_t k = 0; k < v.size(); ++k) {
    if (k) s += ',';
    s += '{' + json_path("path", v[k].path) + ",\"operation\":" + json_string(v[k].operation) + ',' +
         json_error_code(v[k].code) + '}';
  }
  return s + ']';
}

struct outcome {
  int exit_code = 0;
  const char* status = "ok";
  std::error_code refusal;
  const char* signal = nullptr;
};

std::string json_report(const options& opt, const treesync::report& r, const outcome& out,
                        const std::vector<recorded_action>* actions, int ranks, std::size_t depth,
                        const std::string& per_rank) {
  std::string s = "{\"schema\":1,\"version\":" + json_string(TREESYNC_VERSION_STRING);
  s += ',' + json_path("source", opt.operands[0]);
  s += ',' + json_path("destination", opt.operands[1]);
  s += ",\"dry_run\":" + std::string(opt.dry_run ? "true" : "false");
  s += ",\"jobs\":" + std::to_string(treesync::jobs{opt.jobs}.count());
  s += ",\"ranks\":" + std::to_string(ranks);
  s += ",\"frontier_depth\":" + std::to_string(depth);
  s += ",\"per_rank\":" + per_rank;
  s += ",\"status\":" + json_string(out.status);
  s += ",\"exit_code\":" + std::to_string(out.exit_code);
  s += ",\"refusal\":" + (out.refusal ? '{' + json_error_code(out.refusal) + '}' : std::string("null"));
  s += ",\"cancelled\":" + std::string(r.cancelled || out.signal ? "true" : "false");
  s += ",\"signal\":" + (out.signal ? json_string(out.signal) : std::string("null"));
  s += ",\"counts\":{\"scanned\":" + std::to_string(r.scanned) + ",\"created\":" + std::to_string(r.created) +
       ",\"updated\":" + std::to_string(r.updated) + ",\"meta_updated\":" + std::to_string(r.meta_updated) +
       ",\"deleted\":" + std::to_string(r.deleted) + ",\"excluded\":" + std::to_string(r.excluded) +
       ",\"skipped\":" + std::to_string(r.skipped) + ",\"cleaned\":" + std::to_string(r.cleaned) +
       ",\"settled\":" + std::to_string(r.settled) + ",\"errors\":" + std::to_string(r.errors.size()) +
       ",\"vanished\":" + std::to_string(r.vanished.size()) + '}';
  s += ",\"bytes_copied\":" + std::to_string(r.bytes_copied);
  char num[64];
  std::snprintf(num, sizeof num, "%.6f", seconds(r));
  s += ",\"elapsed_seconds\":" + std::string(num);
  std::snprintf(num, sizeof num, "%.0f", rate(r));
  s += ",\"bytes_per_second\":" + std::string(num);
  s += ",\"errors\":" + json_entries(r.errors);
  s += ",\"vanished\":" + json_entries(r.vanished);
  s += ",\"skipped\":" + json_entries(r.skipped_entries);
  if (actions) {
    s += ",\"actions\":[";
    for (std::size_t k = 0; k < actions->size(); ++k) {
      if (k) s += ',';
      s += json_action((*actions)[k].view(), opt.compare == compare_mode::checksum);
    }
    s += ']';
  }
  return s + "}\n";
}

void print_refusal(const std::string& src, const std::string& dst, const std::error_code& ec) {
  struct stat st;
  if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) {
    if (::stat(src.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "treesync: refused: source %s: %s\n", display(src).c_str(), ec.message().c_str());
      return;
    }
    if (::stat(dst.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "treesync: refused: destination %s: %s\n", display(dst).c_str(), ec.message().c_str());
      return;
    }
  }
  std::fprintf(stderr, "treesync: refused %s -> %s: %s\n", display(src).c_str(), display(dst).c_str(),
               ec.message().c_str());
}

// ---- interrupts ------------------------------------------------------------------------------------------

std::atomic<bool> cancel_flag{false};
std::atomic<int> first_signal{0};

extern "C" {
static void on_signal(int sig) {
  if (first_signal.exchange(sig) != 0) _exit(sig == SIGINT ? 130 : 143);
  cancel_flag.store(true);
}
}

void install_signal_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a call blocked when the signal arrives returns (EINTR) and the run stops
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// ---- the work queue of rank 0 (filled by the shallow pass, drained by the ranks) ------------------------

class work_queue {
 public:
  void push(std::string rel) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(std::move(rel));
    }
    cv_.notify_all();
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  /// An item, or nullopt when the queue is closed and empty.
  std::optional<std::string> pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !items_.empty() || closed_ || cancel_flag.load(); });
    return take();
  }
  /// What pop() returns, without waiting: `finished` is set when nothing more will come.
  std::optional<std::string> try_pop(bool& finished) {
    std::lock_guard<std::mutex> lock(mu_);
    finished = (items_.empty() && closed_) || cancel_flag.load();
    return take();
  }

 private:
  std::optional<std::string> take() {
    if (items_.empty() || cancel_flag.load()) return std::nullopt;
    std::string s = std::move(items_.front());
    items_.pop_front();
    return s;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> items_;
  bool closed_ = false;
};

constexpr int tag_request = 1;
constexpr int tag_work = 2;
constexpr int tag_done = 3;

/// Rank 0's main thread: answers the other ranks' requests from the queue until every one of them
/// has been told "done".
void serve(work_queue& q, int ranks) {
  std::deque<int> waiting;
  int released = 0;
  while (released < ranks - 1) {
    bool progress = false;
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, tag_request, MPI_COMM_WORLD, &flag, &st);
    if (flag) {
      MPI_Recv(nullptr, 0, MPI_CHAR, st.MPI_SOURCE, tag_request, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      waiting.push_back(st.MPI_SOURCE);
      progress = true;
    }
    while (!waiting.empty()) {
      bool finished = false;
      auto item = q.try_pop(finished);
      if (item) {
        MPI_Send(item->data(), static_cast<int>(item->size()), MPI_CHAR, waiting.front(), tag_work, MPI_COMM_WORLD);
      } else if (finished) {
        MPI_Send(nullptr, 0, MPI_CHAR, waiting.front(), tag_done, MPI_COMM_WORLD);
        ++released;
      } else {
        break;
      }
      waiting.pop_front();
      progress = true;
    }
    if (!progress) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

/// A rank other than 0: asks for subtrees until told "done".
template <class F>
void request_work(F&& process) {
  for (;;) {
    MPI_Send(nullptr, 0, MPI_CHAR, 0, tag_request, MPI_COMM_WORLD);
    MPI_Status st;
    MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    std::string rel(static_cast<std::size_t>(n), '\0');
    MPI_Recv(rel.data(), n, MPI_CHAR, 0, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (st.MPI_TAG == tag_done) return;
    process(rel);
  }
}

/// One distribution round: rank 0 serves `q` (and works on it with a thread of its own), the other
/// ranks request work.  `process` runs on every rank.
template <class F>
void distribute(int rank, int ranks, work_queue* q, F&& process) {
  if (rank == 0) {
    std::thread local([&] {
      while (auto item = q->pop()) process(*item);
    });
    serve(*q, ranks);
    local.join();
  } else {
    request_work(process);
  }
}

std::string bcast_string(std::string s, int root) {
  std::uint64_t n = s.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, root, MPI_COMM_WORLD);
  s.resize(static_cast<std::size_t>(n));
  if (n) MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, root, MPI_COMM_WORLD);
  return s;
}

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

/// An empty directory of this rank's own, for the dry runs of subtrees whose destination does not
/// exist yet; removed at the end.
std::mutex empty_mu;
std::string empty_path;
std::string empty_dir() {
  std::lock_guard<std::mutex> lock(empty_mu);
  if (empty_path.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/treesync-mpi-dry-XXXXXX";
    if (::mkdtemp(templ.data())) empty_path = templ;
  }
  return empty_path.empty() ? std::string("/nonexistent/treesync-mpi-dry") : empty_path;
}

int finish(int code) {
  if (!empty_path.empty()) ::rmdir(empty_path.c_str());
  MPI_Finalize();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const auto t0 = std::chrono::steady_clock::now();

  const parse_result parsed = parse(argc, argv);
  if (parsed.exit_now) {
    if (rank == 0) std::fputs(parsed.message.c_str(), parsed.exit_code == 0 ? stdout : stderr);
    return finish(parsed.exit_code);
  }
  if (provided < MPI_THREAD_FUNNELED) {
    if (rank == 0) std::fprintf(stderr, "treesync_mpi: the MPI library does not provide MPI_THREAD_FUNNELED\n");
    return finish(1);
  }
  const options& opt = parsed.opt;
  const std::string& src = opt.operands[0];
  const std::string& dst = opt.operands[1];

  // --exclude-from: read by rank 0 (stdin reaches rank 0 only), broadcast
  std::string exclude_text;
  int read_ok = 1;
  if (rank == 0) {
    for (const auto& file : opt.exclude_files) {
      std::error_code ec;
      std::string text;
      if (!read_file(file, text, ec)) {
        std::fprintf(stderr, "treesync: read %s: %s\n", display(file).c_str(), ec.message().c_str());
        read_ok = 0;
        break;
      }
      exclude_text += text;
      exclude_text += '\n';
    }
  }
  MPI_Bcast(&read_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!read_ok) return finish(1);
  exclude_text = bcast_string(exclude_text, 0);
  treesync::exclude patterns = treesync::exclude::from_lines(exclude_text);
  for (const auto& p : opt.excludes) patterns.add(p);

  install_signal_handlers();

  collector actions;
  actions.on = opt.itemize || opt.verbose;
  const cli_compare compare{opt.compare, std::chrono::nanoseconds(opt.modify_window_ns)};
  const cli_deletion deletion{opt.deletion};
  const cli_links links{opt.links};

  // Every sync of the run: the options' policies plus `extra...` (observer, frontier, subtree);
  // dry run and allow_empty_source vary per call, as run-time options.
  auto run = [&](const std::filesystem::path& s, const std::filesystem::path& d, bool dry, bool allow_empty,
                 std::error_code& ec, const auto&... extra) -> treesync::report {
    treesync::options o;
    o.dry_run = dry;
    o.allow_empty_source = allow_empty;
    o.write = opt.inplace ? treesync::write_mode::in_place : treesync::write_mode::atomic;
    o.jobs = opt.jobs;
    o.cancel = &cancel_flag;
    return treesync::sync(s, d, o, compare, deletion, links, patterns, extra..., ec);
  };

  // ---- 1. guards and the frontier depth, decided by rank 0 -----------------------------------------
  std::int64_t refusal[2] = {0, 0};  // value, category id
  std::uint64_t depth = 1;
  std::vector<std::string> planned;   // the frontier of the chosen depth (dry run)
  std::size_t shallow_deletions = 0;  // what the shallow levels delete
  if (rank == 0) {
    const std::size_t target = 4 * static_cast<std::size_t>(ranks);
    constexpr std::size_t max_depth = 6;
    std::size_t previous = 0;
    for (std::size_t d = 1; d <= max_depth; ++d) {
      std::vector<std::string> found;
      std::mutex mu;
      treesync::frontier f{d, [&](std::string_view rel) {
                             std::lock_guard<std::mutex> lock(mu);
                             found.emplace_back(rel);
                           }};
      std::error_code ec;
      const treesync::report r = run(src, dst, true, opt.allow_empty_source, ec, treesync::no_observer_t{}, f);
      if (ec) {
        refusal[0] = ec.value();
        refusal[1] = category_id(ec);
        break;
      }
      if (d > 1 && found.size() <= previous) break;  // no deeper split: keep the previous depth
      depth = d;
      planned = std::move(found);
      shallow_deletions = r.deleted;
      previous = planned.size();
      if (previous >= target) break;
    }
    std::sort(planned.begin(), planned.end());
  }
  MPI_Bcast(refusal, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
  MPI_Bcast(&depth, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);

  // --max-delete over the whole run: every rank dry-runs the subtrees it is handed; the sum decides
  if (refusal[0] == 0 && opt.max_delete) {
    std::atomic<std::uint64_t> mine{0};
    work_queue plan_q;
    if (rank == 0) {
      for (auto& rel : planned) plan_q.push(rel);
      plan_q.close();
    }
    distribute(rank, ranks, &plan_q, [&](const std::string& rel) {
      struct stat st;
      const std::string d = dst + "/" + rel;
      if (::lstat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;  // nothing to delete below
      std::error_code ec;
      const treesync::report r = run(src + "/" + rel, d, true, true, ec, treesync::no_observer_t{},
                                     treesync::subtree{rel});
      mine += r.deleted;
    });
    std::uint64_t local = mine.load(), total = 0;
    MPI_Reduce(&local, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && shallow_deletions + total > *opt.max_delete) {
      const std::error_code ec = treesync::errc::max_delete_exceeded;
      refusal[0] = ec.value();
      refusal[1] = category_id(ec);
    }
    MPI_Bcast(refusal, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
  }

  // ---- 2-3. the shallow pass on rank 0, the subtrees everywhere ------------------------------------
  treesync::report mine;
  std::mutex mine_mu;
  std::atomic<std::uint64_t> subtrees_done{0};
  std::error_code shallow_refusal;
  if (refusal[0] == 0) {
    work_queue q;
    std::thread shallow;
    if (rank == 0) {
      shallow = std::thread([&] {
        // the observer is called before on_subtree, under the same mutex: `fresh` is up to date
        std::mutex fresh_mu;
        std::vector<std::string> fresh;
        const shallow_observer obs{&actions, static_cast<std::size_t>(depth), &fresh_mu, &fresh};
        treesync::frontier f{static_cast<std::size_t>(depth), [&](std::string_view rel) {
                               std::lock_guard<std::mutex> lock(fresh_mu);
                               const bool is_fresh = std::find(fresh.rbegin(), fresh.rend(), rel) != fresh.rend();
                               q.push((is_fresh ? "F" : "-") + std::string(rel));
                             }};
        std::error_code ec;
        treesync::report r = run(src, dst, opt.dry_run, opt.allow_empty_source, ec, obs, f);
        if (ec && ec != std::errc::operation_canceled) shallow_refusal = ec;
        {
          std::lock_guard<std::mutex> lock(mine_mu);
          add(mine, std::move(r));
        }
        q.close();
      });
    }
    distribute(rank, ranks, &q, [&](const std::string& item) {
      const bool fresh = item[0] == 'F';
      const std::string rel = item.substr(1);
      const std::filesystem::path s = std::filesystem::path(src) / rel, d = std::filesystem::path(dst) / rel;
      std::error_code ec;
      treesync::report r;
      std::size_t dropped_meta = 0, dropped_create = 0;
      const subtree_observer obs{&actions, &rel, fresh, &dropped_meta, &dropped_create};
      struct stat st;
      if (opt.dry_run && (::lstat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
        // a dry run did not create DST/rel: plan it against an empty directory (the shallow pass
        // reported DST/rel as created, so the subtree's root is `fresh`)
        r = run(s, empty_dir(), true, true, ec, obs, treesync::subtree{rel});
      } else {
        r = run(s, d, opt.dry_run, true, ec, obs, treesync::subtree{rel});
      }
      r.meta_updated -= std::min(r.meta_updated, dropped_meta);
      r.created -= std::min(r.created, dropped_create);
      ++subtrees_done;
      if (ec == std::errc::no_such_file_or_directory && ::lstat(s.c_str(), &st) != 0)
        r.vanished.push_back({rel, "list", ec});  // gone since the shallow pass saw it
      else if (ec && ec != std::errc::operation_canceled)
        r.errors.push_back({rel, "sync", ec});
      std::lock_guard<std::mutex> lock(mine_mu);
      add(mine, std::move(r));
    });
    if (shallow.joinable()) shallow.join();
  }

  // ---- 5. gather the reports (every rank is done past this point) ----------------------------------
  const std::string buf = serialize(mine, actions.actions, subtrees_done.load());
  int size = static_cast<int>(buf.size());
  std::vector<int> sizes(static_cast<std::size_t>(ranks)), offsets(static_cast<std::size_t>(ranks));
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (rank == 0) {
    std::size_t total = 0;
    for (int k = 0; k < ranks; ++k) {
      offsets[static_cast<std::size_t>(k)] = static_cast<int>(total);
      total += static_cast<std::size_t>(sizes[static_cast<std::size_t>(k)]);
    }
    all.resize(total);
  }
  MPI_Gatherv(buf.data(), size, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  int signalled = first_signal.load(), any_signal = 0;
  MPI_Allreduce(&signalled, &any_signal, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

  int exit_code = 0;
  if (rank == 0) {
    treesync::report merged;
    std::vector<recorded_action> acts;
    // --json's "per_rank": what each rank did (rank 0's counts include the shallow pass)
    std::string per_rank = "[";
    for (int k = 0; k < ranks; ++k) {
      const auto off = static_cast<std::size_t>(offsets[static_cast<std::size_t>(k)]);
      treesync::report r;
      const std::uint64_t n =
          deserialize(all.substr(off, static_cast<std::size_t>(sizes[static_cast<std::size_t>(k)])), r, acts);
      per_rank += (k ? ",{\"rank\":" : "{\"rank\":") + std::to_string(k) + ",\"subtrees\":" + std::to_string(n) +
                  ",\"scanned\":" + std::to_string(r.scanned) + ",\"written\":" +
                  std::to_string(r.created + r.updated + r.meta_updated + r.deleted + r.cleaned) +
                  ",\"errors\":" + std::to_string(r.errors.size()) + '}';
      add(merged, std::move(r));
    }
    per_rank += ']';

    // ---- 4. the shallow directories' mtimes, once every subtree is in ------------------------------
    if (refusal[0] == 0 && !shallow_refusal && !opt.dry_run && any_signal == 0) {
      std::error_code ec;
      treesync::report fix = run(src, dst, false, true, ec, treesync::no_observer_t{},
                                 treesync::frontier{static_cast<std::size_t>(depth), {}});
      for (auto& e : fix.errors) merged.errors.push_back(std::move(e));
      if (ec && ec != std::errc::operation_canceled) merged.errors.push_back({"", "utime", ec});
    }

    const auto by_path = [](const treesync::entry_error& a, const treesync::entry_error& b) {
      return a.path != b.path ? a.path < b.path : a.operation < b.operation;
    };
    const auto same = [](const treesync::entry_error& a, const treesync::entry_error& b) {
      return a.path == b.path && a.operation == b.operation && a.code == b.code;
    };
    for (auto* v : {&merged.errors, &merged.vanished, &merged.skipped_entries, &merged.notices}) {
      std::stable_sort(v->begin(), v->end(), by_path);
      // the second shallow pass meets the shallow levels' failures again
      v->erase(std::unique(v->begin(), v->end(), same), v->end());
    }
    std::stable_sort(acts.begin(), acts.end(),
                     [](const recorded_action& a, const recorded_action& b) { return a.path < b.path; });
    merged.elapsed = std::chrono::steady_clock::now() - t0;

    outcome out;
    std::error_code refused = refusal[0] != 0 ? make_code(static_cast<int>(refusal[0]), static_cast<int>(refusal[1]))
                                              : shallow_refusal;
    if (any_signal != 0) {
      out.exit_code = any_signal == SIGINT ? 130 : 143;
      out.status = "interrupted";
      out.signal = any_signal == SIGINT ? "SIGINT" : "SIGTERM";
    } else if (refused) {
      out.exit_code = 2;
      out.status = "refused";
      out.refusal = refused;
    } else if (!merged.errors.empty()) {
      out.exit_code = 23;
      out.status = "errors";
    } else if (!merged.vanished.empty()) {
      out.exit_code = 24;
      out.status = "vanished";
    }
    if (out.refusal) print_refusal(src, dst, refused);
    print_entries(merged.errors, "");
    print_entries(merged.vanished, " (the source changed during the run; the next run retries it)");
    if (out.signal)
      std::fprintf(stderr, "treesync: interrupted by %s: no new work was started and no partial file was left "
                           "at a final name; the report is partial\n", out.signal);

    const bool checksum = opt.compare == compare_mode::checksum;
    if (opt.json) {
      const std::string text = json_report(opt, merged, out, actions.on ? &acts : nullptr, ranks, depth, per_rank);
      std::fputs(text.c_str(), stdout);
    } else {
      for (const auto& ra : acts) {
        const treesync::action a = ra.view();
        if (opt.itemize) {
          const std::string code = itemize_code(a, checksum);
          if (!code.empty()) std::printf("%s %s\n", code.c_str(), shown_path(a).c_str());
        } else if (a.kind != treesync::action_kind::error && a.kind != treesync::action_kind::vanished) {
          std::printf("%s %s\n", verbose_label(a.kind), shown_path(a).c_str());
        }
      }
      if (!out.refusal) {
        if (opt.stats) print_stats(merged, opt.dry_run, out.signal != nullptr, ranks);
        else if (!opt.quiet) print_summary(merged, opt.dry_run, out.signal != nullptr);
      }
    }
    if (std::fflush(stdout) != 0 && out.exit_code == 0) out.exit_code = 23;
    exit_code = out.exit_code;
  }
  MPI_Bcast(&exit_code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return finish(exit_code);
}
