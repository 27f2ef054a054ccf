// tests/test_interrupt.cpp - a run stopped at any point keeps what it finished (issue 32, item 3).
//
// Each scenario's unstopped run is made once to count its filesystem operations; then, for every
// operation k, a fresh tree is run again and stopped there: by cancel_on (the flag is set by the
// mock's hook just before operation k, as a signal handler would set it), or under errors::stop by
// a failure of operation k.  After each stopped run:
//
//   1. the source is unchanged;
//   2. no file at a final name in the destination is partial: every regular file there carries
//      either the bytes of the source or what the destination held before (never a mix, never a
//      file that looks up to date and is not);
//   3. what the report (the observer's actions) says was made exists: a file reported created or
//      updated is at its name with the source's bytes, a directory is there, a deleted entry is
//      gone (so a staged new directory cut short is published with what it holds, not thrown away);
//   4. cancelled: no temporary is left;
//   5. the next run copies exactly the files the stopped run did not finish (the mock's count of
//      files opened for writing), converges to the exact mirror, and the run after it writes
//      nothing.
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>

#include "support/fault_sweep.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

using treesync::file_type;
using treesync::mock_fs;
using op = treesync::mock_fs::op;
using namespace std::chrono_literals;
using namespace treesync_test;

// What the observer was told, path by path.
struct told {
  treesync::action_kind kind;
  file_type type;
  std::string path;
};

struct recorder {
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  std::shared_ptr<std::vector<told>> seen = std::make_shared<std::vector<told>>();
  void operator()(const treesync::action& a) const {
    std::lock_guard<std::mutex> lock(*mu);
    seen->push_back({a.kind, a.type, std::string(a.path)});
  }
};

// How a scenario's run is stopped at operation k.
enum class stop_by { cancel, failure };

struct scenario {
  std::string name;
  setup_fn setup;
  unsigned jobs;
};

treesync::report run_with(mock_fs& fs, const scenario& sc, stop_by how, const std::atomic<bool>& flag,
                          const recorder& rec, std::error_code& ec) {
  if (how == stop_by::cancel)
    return treesync::sync(fs, "/src", "/dst", treesync::cancel_on(flag), treesync::jobs{sc.jobs}, rec, ec);
  return treesync::sync(fs, "/src", "/dst", treesync::errors::stop, treesync::jobs{sc.jobs}, rec, ec);
}

std::string dst_path(const std::string& rel) { return rel.empty() ? "/dst" : "/dst/" + rel; }

// Whether `rel` is `dir` or below it.
bool within(const std::string& rel, const std::string& dir) {
  return rel == dir || (rel.size() > dir.size() && rel.compare(0, dir.size(), dir) == 0 && rel[dir.size()] == '/');
}

// Whether a component of `rel` is a temporary name (an entry inside a staged directory).
bool in_temporary(const std::string& rel) {
  return rel.rfind(".treesync-tmp-", 0) == 0 || rel.find("/.treesync-tmp-") != std::string::npos;
}

// 3: every action the stopped run reported is true of the destination afterwards, but below a
// new directory whose rename into place the report says failed (then left under its temporary
// name, which the next run removes).
void check_reported(mock_fs& fs, const snapshot& want, const std::vector<told>& seen, const treesync::report& r,
                    const std::string& where, std::vector<std::string>& problems) {
  const snapshot now = fs.exists("/dst") ? fs.tree("/dst") : snapshot{};
  std::vector<std::string> unpublished;
  for (const auto& e : r.errors)
    if (e.operation == treesync::operation::rename) unpublished.push_back(e.path);
  for (const told& t : seen) {
    if (std::any_of(unpublished.begin(), unpublished.end(), [&](const std::string& u) { return within(t.path, u); }))
      continue;
    const std::string p = dst_path(t.path);
    const auto got = now.find(t.path);
    const bool there = t.path.empty() ? fs.exists("/dst") : got != now.end();
    switch (t.kind) {
      case treesync::action_kind::create:
      case treesync::action_kind::update:
      case treesync::action_kind::update_meta: {
        if (!there) {
          problems.push_back(where + "reported " + treesync::to_string(t.kind) + " but missing: " + p);
          break;
        }
        if (t.path.empty() || t.type != file_type::regular) break;
        const auto w = want.find(t.path);
        if (got->second.type != file_type::regular || w == want.end() || got->second.data != w->second.data)
          problems.push_back(where + "reported " + treesync::to_string(t.kind) + " but not the source's bytes: " + p);
        break;
      }
      case treesync::action_kind::remove:
        if (there && !t.path.empty()) problems.push_back(where + "reported deleted but still there: " + p);
        break;
      default: break;
    }
  }
}

// 2: a regular file at a final name holds the source's bytes or the bytes it held before the run.
void check_no_partial(mock_fs& fs, const snapshot& want, const snapshot& before, const std::string& where,
                      std::vector<std::string>& problems) {
  if (!fs.exists("/dst")) return;
  for (const auto& [rel, d] : fs.tree("/dst")) {
    if (d.type != file_type::regular || in_temporary(rel)) continue;
    const auto w = want.find(rel);
    const auto b = before.find(rel);
    const bool source = w != want.end() && w->second.type == file_type::regular && w->second.data == d.data;
    const bool old = b != before.end() && b->second.type == file_type::regular && b->second.data == d.data;
    if (!source && !old) problems.push_back(where + "a partial or foreign file at a final name: " + rel);
  }
  for (const std::string& rel : lying_files(fs, "/src", "/dst", true))
    problems.push_back(where + "looks up to date but is not: " + rel);
}

// The files of the mirror the stopped run did not finish: not at their name with the source's
// bytes, size and mtime (the next run's quick check copies exactly these).
std::size_t unfinished(mock_fs& fs, const snapshot& want) {
  const snapshot now = fs.exists("/dst") ? fs.tree("/dst") : snapshot{};
  std::size_t n = 0;
  for (const auto& [rel, s] : want) {
    if (s.type != file_type::regular) continue;
    const auto d = now.find(rel);
    if (d == now.end() || d->second.type != file_type::regular || d->second.data != s.data ||
        d->second.mtime_ns != s.mtime_ns)
      ++n;
  }
  return n;
}

// Stops the scenario's run at each of its operations in turn; returns the problems found.
std::vector<std::string> sweep(const scenario& sc, stop_by how, std::size_t& points, std::size_t& kept_files) {
  const run_fn plain = [&sc](mock_fs& fs, std::error_code& ec) {
    return treesync::sync(fs, "/src", "/dst", treesync::jobs{sc.jobs}, ec);
  };
  const std::size_t n = count_operations(sc.name, sc.setup, plain);
  std::vector<std::string> problems;
  points = n;
  kept_files = 0;
  for (std::size_t k = 1; k <= n; ++k) {
    mock_fs fs;
    sc.setup(fs);
    const source_guard src(fs);
    const snapshot want = expected_mirror(fs, "/src", true);
    const snapshot before = fs.exists("/dst") ? fs.tree("/dst") : snapshot{};
    const std::string where = sc.name + (how == stop_by::cancel ? ": cancelled at " : ": failed at ") +
                              "operation " + std::to_string(k) + ": ";
    std::atomic<bool> flag{false};
    recorder rec;
    std::size_t seen_ops = 0;
    fs.on_operation([&](op, const std::string&) {
      if (++seen_ops == k && how == stop_by::cancel) flag.store(true);
    });
    if (how == stop_by::failure) fs.fail_any(k, std::errc::io_error);
    std::error_code ec;
    const treesync::report r = run_with(fs, sc, how, flag, rec, ec);
    fs.on_operation(nullptr);
    fs.clear_faults();
    if (how == stop_by::cancel && ec && ec != std::errc::operation_canceled)
      problems.push_back(where + "refused or failed: " + ec.message());
    if (how == stop_by::cancel && ec && !r.cancelled) problems.push_back(where + "report::cancelled not set");
    if (!src.unchanged(fs)) problems.push_back(where + "the source changed");
    check_no_partial(fs, want, before, where, problems);
    check_reported(fs, want, *rec.seen, r, where, problems);
    if (how == stop_by::cancel)
      for (const std::string& t : temporaries(fs, "/dst"))
        if (!before.count(t)) problems.push_back(where + "a temporary left: " + t);
    // 5: the next run copies what is left, and only that
    const std::size_t left = unfinished(fs, want);
    kept_files += want.size() > 0 ? (static_cast<std::size_t>(std::count_if(want.begin(), want.end(), [](const auto& e) {
                                       return e.second.type == file_type::regular;
                                     })) - left)
                                  : 0;
    fs.advance(10s);
    fs.reset_counters();
    std::error_code ec2;
    const treesync::report r2 = plain(fs, ec2);
    if (ec2 || !r2.ok()) {
      problems.push_back(where + "the next run failed: " + describe(r2, ec2));
      continue;
    }
    if (fs.ops()[op::open_write] != left)
      problems.push_back(where + "the next run copied " + std::to_string(fs.ops()[op::open_write]) + " files, " +
                         std::to_string(left) + " were unfinished");
    const std::string diff = exact_mirror_diff(fs, "/src", "/dst", true);
    if (!diff.empty()) problems.push_back(where + "no exact mirror after the next run:\n" + diff);
    if (!temporaries(fs, "/dst").empty()) problems.push_back(where + "temporaries left after the next run");
    fs.reset_counters();
    std::error_code ec3;
    (void)plain(fs, ec3);
    if (ec3 || fs.ops().writes() != 0)
      problems.push_back(where + "the run after the next one wrote " + std::to_string(fs.ops().writes()) + " times");
  }
  return problems;
}

// A cold tree: nested new directories (each staged), a read-only one, files of several sizes.
void cold_tree(mock_fs& fs) { base_tree(fs); }

// The same tree into an existing, empty destination.
void cold_into_empty(mock_fs& fs) {
  base_tree(fs);
  fs.mkdir("/dst", 0755);
}

const scenario cold{"cold", cold_tree, 1};
const scenario empty_dst{"cold into an empty destination", cold_into_empty, 1};
const scenario warm{"warm with churn", warm_setup(), 1};
const scenario cold_parallel{"cold, jobs{2}", cold_tree, 2};

void run_sweep(const scenario& sc, stop_by how) {
  std::size_t points = 0, kept = 0;
  const std::vector<std::string> problems = sweep(sc, how, points, kept);
  MESSAGE(sc.name, ": stopped at each of ", points, " operations; files kept over all stopped runs: ", kept);
  CHECK(points > 20);
  CHECK(kept > 0);
  CHECK_MESSAGE(problems.empty(), first_problems(problems));
}

}  // namespace

TEST_CASE("interrupt: a cold run cancelled at any operation keeps every finished file and the rerun copies only the rest") {
  run_sweep(cold, stop_by::cancel);
}

TEST_CASE("interrupt: a run into an empty destination cancelled at any operation keeps every finished file") {
  run_sweep(empty_dst, stop_by::cancel);
}

TEST_CASE("interrupt: a warm run cancelled at any operation leaves no partial file and reports only what it did") {
  run_sweep(warm, stop_by::cancel);
}

TEST_CASE("interrupt: a cold run under jobs{2} cancelled at any operation keeps every finished file") {
  run_sweep(cold_parallel, stop_by::cancel);
}

TEST_CASE("interrupt: a cold run stopped by a failure (errors::stop) at any operation keeps every finished file") {
  run_sweep(cold, stop_by::failure);
}

TEST_CASE("interrupt: a warm run stopped by a failure (errors::stop) at any operation keeps what it finished") {
  run_sweep(warm, stop_by::failure);
}
