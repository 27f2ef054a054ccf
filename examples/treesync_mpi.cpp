// treesync_mpi - one mirror of SRC into DST sharded over the ranks of an MPI job.
//
//   mpirun -np N treesync_mpi [OPTIONS] SRC DST        (srun treesync_mpi ... under Slurm)
//
// The command line, the policies it selects, the output (-i, -v, --stats, --json, refusals,
// errors), the signals and the exit status are the treesync CLI's, through the same code
// (examples/cli/; the --json schema at the top of examples/treesync.cpp applies unchanged: "jobs"
// is the per-rank worker count and the object gains "ranks", "frontier_depth" and "per_rank").
// This file holds only the distribution.  Options whose meaning spans the whole tree (-H, -x,
// --backup-dir, --temp-dir, --state, --verify) or that need a single process (--progress and its
// synonym --info=progress2) are usage errors: the option rows say which (whole_tree_options()).
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
//      entries merged, and the actions of every rank given to the CLI's printer, which prints
//      -i / -v / --json actions in the CLI's order.
// the CLI's support code (with options.hpp, output.hpp and text.hpp, which these include)
#include "cli/outcome.hpp"
#include "cli/run.hpp"
#include "cli/signals.hpp"
#include "cli/trust.hpp"

#include <treesync/treesync.hpp>

// the C API only (Open MPI and MPICH otherwise pull in their deprecated C++ bindings)
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
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

#include <sys/stat.h>
#include <unistd.h>

namespace {

using namespace treesync_cli;

// The options treesync_mpi refuses (one spelling each: every spelling of the option is refused):
// they span the whole tree or need one process.
const char* mpi_help_text() {
  static const std::string text =
      "usage: mpirun -np N treesync_mpi [OPTIONS] SRC DST\n"
      "Mirror SRC into DST like `treesync SRC DST`, the subtrees shared out over the MPI ranks.\n"
      "\n"
      "The options, the output and the exit status are those of the treesync CLI (`treesync --help`),\n"
      "with these differences:\n"
      "  -j, --jobs=N              N worker threads in each rank (default 4; 0 = one per hardware thread)\n"
      "      --max-delete=N        holds for the whole run, summed over the ranks\n"
      "      --exclude-from=FILE   and --include-from: '-' is the stdin of rank 0\n"
      "  " + options_list(whole_tree_options()) + ": usage errors (they span the whole tree\n"
      "                            or need one process)\n"
      "      --insecure-links      as the CLI's: DST and the --*-from files follow only root's or the\n"
      "                            caller's symlinks without it (exit 3 / 11, rank 0 decides)\n"
      "  --stats adds a Ranks line; --json adds \"ranks\", \"frontier_depth\" and \"per_rank\".\n";
  return text.c_str();
}

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
  treesync::changed changes;
  treesync::copy_method method;
  bool sparse;
  treesync::action view() const { return {kind, type, path, src_size, dst_size, code, changes, method, sparse}; }
};

struct collector {  // the observer of every sync on a rank (two run at once on rank 0)
  bool on = false;
  std::mutex mu;
  std::vector<recorded_action> actions;
  void operator()(const treesync::action& a) {
    if (!on) return;
    std::lock_guard<std::mutex> lock(mu);
    actions.push_back(
        {a.kind, a.type, std::string(a.path), a.src_size, a.dst_size, a.code, a.changes, a.method, a.sparse});
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
  const bool cancelled = r.cancelled;
  into.merge(std::move(r));  // the counts added, the lists appended
  into.cancelled = into.cancelled || cancelled;
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
      u64(static_cast<std::uint64_t>(e.operation));
      u64(static_cast<std::uint64_t>(e.side));
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
      e.operation = static_cast<treesync::operation>(u64());
      e.side = static_cast<treesync::side>(u64());
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
    w.u64(static_cast<std::uint64_t>(a.changes));
    w.u64(static_cast<std::uint64_t>(a.method));
    w.u64(a.sparse ? 1 : 0);
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
    a.changes = static_cast<treesync::changed>(rd.u64());
    a.method = static_cast<treesync::copy_method>(rd.u64());
    a.sparse = rd.u64() != 0;
    actions.push_back(std::move(a));
  }
  return subtrees;
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

namespace {

/// One rank's share of the run: the steps main() takes in order, and what they hand on.  Rank 0
/// decides (the filter texts, the frontier depth, the refusals) and broadcasts; every rank syncs
/// the subtrees it is handed; rank 0 gathers and prints the report.
struct mpi_run {
  int rank = 0, ranks = 1;
  const tool_info& tool;
  const options& opt;
  treesync::filter patterns;
  std::vector<std::string> texts;  // the --*-from files' texts, read by rank 0, the same on every rank
  std::shared_ptr<dst_directories> dst_dirs;
  cli_deletion deletion{opt.deletion, treesync::unlimited};  // --max-delete: decided for the whole run
  collector actions;
  treesync::options library = library_options(opt, opt.jobs, &cancel_flag, std::string());
  std::int64_t refusal[2] = {0, 0};  // value, category id
  std::uint64_t depth = 1;
  std::vector<std::string> planned;   // the frontier of the chosen depth (dry run)
  std::size_t shallow_deletions = 0;  // what the shallow levels delete
  std::size_t would_delete = 0;       // what the whole run would delete (counted for --max-delete)
  treesync::report mine;
  std::mutex mine_mu;
  std::atomic<std::uint64_t> subtrees_done{0};
  std::error_code shallow_refusal;

  mpi_run(int r, int n, const tool_info& t, const options& o) : rank(r), ranks(n), tool(t), opt(o) {
    actions.on = opt.itemize || opt.verbose;
  }

  // Every sync of the run: the options' policies plus `extra...` (observer, frontier, subtree);
  // dry run and allow_empty_source vary per call.
  template <class... Extra>
  treesync::report run(const std::filesystem::path& s, const std::filesystem::path& d, bool dry, bool allow_empty,
                       std::error_code& ec, Extra&&... extra) {
    treesync::options o = library;
    o.dry_run = dry;
    o.allow_empty_source = allow_empty;
    return sync_with(opt, deletion, patterns, s, d, o, ec, std::forward<Extra>(extra)...);
  }

  /// A reader of rule files that replays the texts rank 0 read, in order.
  auto replay() {
    return [this, next = std::size_t{0}](const std::string&, std::string& text, std::error_code&) mutable {
      text = texts[next++];
      return true;
    };
  }

  /// The filter rules: rank 0 reads the --*-from files (stdin reaches rank 0 only) and broadcasts
  /// their texts, which the other ranks read the same rules from.  rsync 3.5's rule (cli/trust.hpp):
  /// no other user's symlink followed in those files (exit 11) or in DST (exit 3); every rank
  /// walks DST and works in what its walk reached (pin_dst); rank 0's walk decides.  Returns the
  /// exit status of a refused run.
  std::optional<int> read_filters() {
    filter_error bad;
    int filter_ok = 1;
    const rule_file_reader read_rules{&opt};
    std::optional<trust_refusal> untrusted;
    const std::optional<trust_refusal> dst_untrusted = untrusted_operator_path(opt, &dst_dirs);
    if (rank == 0) {
      const auto read_and_keep = [this, &read_rules](const std::string& name, std::string& text, std::error_code& ec) {
        if (!read_rules(name, text, ec)) return false;
        texts.push_back(text);
        return true;
      };
      filter_ok = make_filter(opt, read_and_keep, patterns, bad) ? 1 : 0;
      untrusted = *read_rules.refused;
      if (filter_ok && !untrusted) untrusted = dst_untrusted;
    }
    int untrusted_exit = untrusted ? untrusted->exit_code : 0;
    MPI_Bcast(&untrusted_exit, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (untrusted_exit != 0) return rank == 0 ? print_untrusted_refusal(opt, *untrusted) : untrusted_exit;
    MPI_Bcast(&filter_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!filter_ok) {
      const std::string message = bad.usage ? usage_message(tool, bad.message) : "treesync: " + bad.message + "\n";
      return rank == 0 ? usage_exit(tool, opt.json, message) : 1;
    }
    std::uint64_t text_count = texts.size();
    MPI_Bcast(&text_count, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    texts.resize(static_cast<std::size_t>(text_count));
    for (auto& t : texts) t = bcast_string(t, 0);
    if (rank != 0) make_filter(opt, replay(), patterns, bad);
    deletion.dst_dirs = dst_dirs;
    return std::nullopt;
  }

  /// With -F / dir-merge and --delete, what DST's rule files exclude is kept too: every rank reads
  /// them now, and the collective holds every rank until all have (none writes before), and
  /// refuses the run on every rank when one met a bad line.  Returns the exit status of a refusal.
  std::optional<int> keep_dst_rules() {
    std::string message, notice;
    int dst_rules_ok = keep_dst_rule_files(opt, replay(), deletion, message, notice, &patterns, nullptr, dst_dirs) ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &dst_rules_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!dst_rules_ok) {
      if (message.empty()) message = "treesync: DST's rule files changed while the ranks read them (nothing was written)\n";
      return rank == 0 ? usage_exit(tool, opt.json, message) : 1;
    }
    if (rank == 0) std::fputs(notice.c_str(), stderr);
    return std::nullopt;
  }

  void refuse(const std::error_code& ec) {
    refusal[0] = ec.value();
    refusal[1] = category_id(ec);
  }

  /// 1. The guards and the frontier depth, decided by rank 0: the shallowest depth with at least
  /// four subtrees a rank (at most 6 levels; deeper only while it splits further).
  void choose_depth() {
    if (rank == 0) {
      const std::size_t target = 4 * static_cast<std::size_t>(ranks);
      std::size_t previous = 0;
      for (std::size_t d = 1; d <= 6; ++d) {
        std::vector<std::string> found;
        std::mutex mu;
        treesync::frontier f{d, [&](std::string_view rel) {
                               std::lock_guard<std::mutex> lock(mu);
                               found.emplace_back(rel);
                             }};
        std::error_code ec;
        const treesync::report r = run(opt.src_root, opt.dst_root, true, opt.lib.allow_empty_source, ec,
                                       treesync::no_observer_t{}, f);
        if (ec) {
          refuse(ec);
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
  }

  /// --max-delete over the whole run: every rank dry-runs the subtrees it is handed; the sum decides.
  void check_max_delete() {
    if (refusal[0] != 0 || !opt.max_delete) return;
    std::atomic<std::uint64_t> counted{0};
    work_queue plan_q;
    if (rank == 0) {
      for (auto& rel : planned) plan_q.push(rel);
      plan_q.close();
    }
    distribute(rank, ranks, &plan_q, [&](const std::string& rel) {
      struct stat st;
      const std::string d = opt.dst_root + "/" + rel;
      if (::lstat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;  // nothing to delete below
      std::error_code ec;
      const treesync::report r = run(opt.src_root + "/" + rel, d, true, true, ec, treesync::no_observer_t{},
                                     treesync::subtree{rel});
      counted += r.deleted;
    });
    std::uint64_t local = counted.load(), total = 0;
    MPI_Reduce(&local, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    would_delete = shallow_deletions + static_cast<std::size_t>(total);
    if (rank == 0 && would_delete > *opt.max_delete) refuse(treesync::errc::max_delete_exceeded);
    MPI_Bcast(refusal, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
  }

  /// 2-3. The shallow pass on rank 0 (a thread that hands out the frontier's subtrees as it meets
  /// them), the subtrees on every rank.
  void sync_all() {
    if (refusal[0] != 0) return;
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
        treesync::report r = run(opt.src_root, opt.dst_root, opt.lib.dry_run, opt.lib.allow_empty_source, ec, obs, f);
        if (ec && ec != std::errc::operation_canceled) shallow_refusal = ec;
        {
          std::lock_guard<std::mutex> lock(mine_mu);
          add(mine, std::move(r));
        }
        q.close();
      });
    }
    distribute(rank, ranks, &q, [&](const std::string& item) { sync_subtree(item[0] == 'F', item.substr(1)); });
    if (shallow.joinable()) shallow.join();
  }

  /// One subtree of the frontier (`fresh`: the shallow pass created its root).
  void sync_subtree(bool fresh, const std::string& rel) {
    const std::filesystem::path s = std::filesystem::path(opt.src_root) / rel, d = std::filesystem::path(opt.dst_root) / rel;
    std::error_code ec;
    treesync::report r;
    std::size_t dropped_meta = 0, dropped_create = 0;
    const subtree_observer obs{&actions, &rel, fresh, &dropped_meta, &dropped_create};
    struct stat st;
    if (opt.lib.dry_run && (::lstat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
      // a dry run did not create DST/rel: plan it against an empty directory (the shallow pass
      // reported DST/rel as created, so the subtree's root is `fresh`)
      r = run(s, empty_dir(), true, true, ec, obs, treesync::subtree{rel});
    } else {
      r = run(s, d, opt.lib.dry_run, true, ec, obs, treesync::subtree{rel});
    }
    r.meta_updated -= std::min(r.meta_updated, dropped_meta);
    r.created -= std::min(r.created, dropped_create);
    ++subtrees_done;
    if ((ec == treesync::errc::source_missing || ec == std::errc::no_such_file_or_directory) &&
        ::lstat(s.c_str(), &st) != 0)  // gone since the shallow pass saw it
      r.vanished.push_back({rel, treesync::operation::list, std::make_error_code(std::errc::no_such_file_or_directory),
                            treesync::side::source});
    else if (ec && ec != std::errc::operation_canceled)  // a subtree's run refused: the source's fault only when missing
      r.errors.push_back({rel, treesync::operation::sync, ec,
                          ec == treesync::errc::source_missing ? treesync::side::source : treesync::side::destination});
    std::lock_guard<std::mutex> lock(mine_mu);
    add(mine, std::move(r));
  }

  /// 5. Every rank's report, serialized, to rank 0 (`sizes` and `offsets` of each in the result).
  std::string gather(std::vector<int>& sizes, std::vector<int>& offsets) {
    const std::string buf = serialize(mine, actions.actions, subtrees_done.load());
    int size = static_cast<int>(buf.size());
    sizes.assign(static_cast<std::size_t>(ranks), 0);
    offsets.assign(static_cast<std::size_t>(ranks), 0);
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
    return all;
  }

  /// Rank 0: the ranks' reports merged into `merged` (and their actions into `acts`); returns
  /// --json's "per_rank" (rank 0's counts include the shallow pass).
  std::string merge(const std::string& all, const std::vector<int>& sizes, const std::vector<int>& offsets,
                    treesync::report& merged, std::vector<recorded_action>& acts) {
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
    return per_rank + ']';
  }

  /// 4. Rank 0: the shallow directories' mtimes, once every subtree is in; then the failures in
  /// the CLI's order, each once (the second shallow pass meets the shallow levels' again).
  void finish_shallow(treesync::report& merged, int any_signal) {
    if (refusal[0] == 0 && !shallow_refusal && !opt.lib.dry_run && any_signal == 0) {
      std::error_code ec;
      treesync::report fix = run(opt.src_root, opt.dst_root, false, true, ec, treesync::no_observer_t{},
                                 treesync::frontier{static_cast<std::size_t>(depth), {}});
      for (auto& e : fix.errors) merged.errors.push_back(std::move(e));
      if (ec && ec != std::errc::operation_canceled)
        merged.errors.push_back({"", treesync::operation::utime, ec, treesync::side::destination});
    }
    sort_entries(merged);  // in the order of the actions, as the CLI's
    const auto same = [](const treesync::entry_error& a, const treesync::entry_error& b) {
      return a.path == b.path && a.operation == b.operation && a.side == b.side && a.code == b.code;
    };
    for (auto* v : {&merged.errors, &merged.vanished, &merged.skipped_entries, &merged.notices})
      v->erase(std::unique(v->begin(), v->end(), same), v->end());
  }

  /// Gathers every rank's report; rank 0 prints it with the CLI's printer.  Returns the exit status
  /// (every rank's).
  int report(std::chrono::steady_clock::time_point t0) {
    report_dst_swaps(deletion, mine);  // DST directories exchanged since their rule files were read
    std::vector<int> sizes, offsets;
    const std::string all = gather(sizes, offsets);
    int signalled = first_signal.load(), any_signal = 0;
    MPI_Allreduce(&signalled, &any_signal, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int exit_code = 0;
    if (rank == 0) {
      treesync::report merged;
      std::vector<recorded_action> acts;
      const std::string per_rank = merge(all, sizes, offsets, merged, acts);
      finish_shallow(merged, any_signal);
      merged.elapsed = std::chrono::steady_clock::now() - t0;
      printer shown(opt);  // the actions of every rank, printed (-i, -v) or kept (--json), in the CLI's order
      for (const auto& ra : acts) shown(ra.view());
      shown.finish();
      const std::error_code refused = refusal[0] != 0
                                          ? make_code(static_cast<int>(refusal[0]), static_cast<int>(refusal[1]))
                                          : shallow_refusal;
      const outcome out = decide_outcome(any_signal, refused, merged);
      const refusal_text why = out.refusal ? describe_refusal(opt, refused, would_delete) : refusal_text{};
      report_extras extras;
      extras.json_members = ",\"ranks\":" + std::to_string(ranks) + ",\"frontier_depth\":" + std::to_string(depth) +
                            ",\"per_rank\":" + per_rank;
      extras.stats_lines = "Ranks:               " + std::to_string(ranks) + "\n";
      exit_code = print_report(opt, merged, out, why, actions.on ? &shown.json_actions() : nullptr, extras);
    }
    MPI_Bcast(&exit_code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return exit_code;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const auto t0 = std::chrono::steady_clock::now();

  tool_info tool;
  tool.name = "treesync_mpi";
  tool.help = mpi_help_text;
  tool.not_supported = whole_tree_options();
  tool.not_supported_why = " (use the treesync CLI)";
  const parse_result parsed = parse(argc, argv, tool);
  if (parsed.exit_now) return finish(rank == 0 ? parse_exit(tool, parsed, argc, argv) : parsed.exit_code);
  if (provided < MPI_THREAD_FUNNELED) {
    if (rank == 0) std::fprintf(stderr, "treesync_mpi: the MPI library does not provide MPI_THREAD_FUNNELED\n");
    return finish(1);
  }
  const options& opt = parsed.opt;
  if (!opt.name.empty())  // rsync's rule (issue 24): the directory itself into DST/NAME; not done here
    return finish(rank == 0 ? usage_exit(tool, opt.json,
                                         usage_message(tool, "SRC without a trailing slash (" + display(opt.operands[0]) +
                                                                 ") is the directory itself, copied into DST/NAME by "
                                                                 "rsync and treesync; treesync_mpi copies contents: "
                                                                 "give SRC/ and DST/NAME"))
                            : 1);
  mpi_run run(rank, ranks, tool, opt);
  if (const std::optional<int> refused = run.read_filters()) return finish(*refused);
  install_signal_handlers();
  if (const std::optional<int> refused = run.keep_dst_rules()) return finish(*refused);
  run.choose_depth();
  run.check_max_delete();
  run.sync_all();
  return finish(run.report(t0));
}
