// tests/test_faults_parallel.cpp - the fault sweep of test_faults.cpp under jobs{2} (issue 13,
// item 7).
//
// For each scenario the unfaulted jobs{2} run is made once to count its filesystem operations N;
// then, for every k in 1..N, a fresh tree is synced with jobs{2} and `fail_any(k, EIO)`: the k-th
// operation fails.  Two workers interleave their operations differently from run to run, so which
// operation is the k-th is not fixed: every assertion below holds whatever operation it is.
//
//   1. the fault triggers exactly once, and the run ends (an operation guard fails everything
//      past 50 N operations, so a runaway ends too, and is reported as one);
//   2. the fault is visible as the error mode says: under errors::collect the run is refused or
//      report.errors is not empty; under errors::stop the returned error code is set (and so is
//      report.errors, unless the run was refused before its walk); or - either mode - the run
//      still made the exact mirror (a best-effort probe failed and nothing depended on it);
//   3. the source tree is unchanged;
//   4. a next jobs{2} run without the fault succeeds with the exact mirror (types, bytes, modes,
//      mtimes, link targets, the roots' mode and mtime), leaves no temporary, and a further run
//      writes nothing.
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>

#include "support/mock_mirror.hpp"
#include "support/mock_trees.hpp"
#include "support/report_checks.hpp"

#include <functional>
#include <string>
#include <vector>

namespace {

using treesync::mock_fs;
using op = treesync::mock_fs::op;
using namespace treesync_test;

struct scenario {
  std::string name;
  bool follow;  // links dereferenced
  bool stop;    // errors::stop: a fault must end the run with its error code
  std::function<void(mock_fs&)> setup;
  std::function<treesync::report(mock_fs&, std::error_code&)> run;
};

template <class... Ps>
std::function<treesync::report(mock_fs&, std::error_code&)> runner(Ps... ps) {
  return [=](mock_fs& fs, std::error_code& ec) {
    return treesync::sync(fs, "/src", "/dst", treesync::jobs{2}, ps..., ec);
  };
}

template <class... Ps>
std::function<void(mock_fs&)> warm_setup(Ps... ps) {
  return [=](mock_fs& fs) {
    base_tree(fs);
    std::error_code ec;
    const auto r = treesync::sync(fs, "/src", "/dst", ps..., ec);
    if (ec || !r.ok()) throw std::runtime_error("warm setup: the initial sync failed");
    churn(fs);
  };
}

struct sweep_result {
  std::size_t ops = 0;     // operations of the unfaulted run
  std::size_t points = 0;  // faulted runs
  std::size_t refused = 0, reported = 0, absorbed = 0;
  std::vector<std::string> absorbed_ops;  // which operations failed without a visible effect
  std::vector<std::string> problems;
};

void faulted_run(const scenario& sc, std::size_t k, sweep_result& out) {
  mock_fs fs;
  sc.setup(fs);
  const snapshot src_before = fs.tree("/src");
  const treesync::stat_info src_root = fs.lstat("/src");

  // the hook runs under the mock's lock: no other synchronisation is needed
  std::size_t n = 0;
  bool runaway = false;
  op failed_kind = op::list;
  std::string failed_path;
  fs.on_operation([&](op kind, const std::string& path) {
    ++n;
    if (n == k) {
      failed_kind = kind;
      failed_path = path;
    }
    if (n == 50 * out.ops + 1) {
      runaway = true;
      fs.fail_any(1, std::errc::io_error);  // from here on, every operation fails
    }
  });
  fs.fail_any(k, std::errc::io_error);
  std::error_code ec;
  const treesync::report r = sc.run(fs, ec);
  fs.on_operation(nullptr);
  const std::size_t triggered = fs.faults_triggered();
  fs.clear_faults();

  ++out.points;
  const std::string where = sc.name + ": fault " + std::to_string(k) + " (" + op_name(failed_kind) + " " +
                            treesync::escape(failed_path) + "): ";
  if (runaway) {
    out.problems.push_back(where + "more than 50 times the unfaulted run's operations");
    return;
  }
  if (triggered != 1) {
    out.problems.push_back(where + "the fault triggered " + std::to_string(triggered) + " times");
    return;
  }

  // 2. visible, per the error mode
  const bool exact = exact_mirror_diff(fs, "/src", "/dst", sc.follow).empty() && temporaries(fs, "/dst").empty();
  if (ec) {
    ++out.refused;
  } else if (!r.errors.empty() && !sc.stop) {
    ++out.reported;
  } else if (exact) {
    ++out.absorbed;
    out.absorbed_ops.push_back(std::string(op_name(failed_kind)) + " " + treesync::escape(failed_path));
  } else {
    out.problems.push_back(where + "not reported as the error mode says, and no exact mirror (" + describe(r, ec) + ")");
  }
  if (sc.stop && !r.errors.empty() && !ec)
    out.problems.push_back(where + "errors::stop: report.errors is set but no error code returned");

  // 3. the source is untouched
  if (!same_with_inodes(fs.tree("/src"), src_before) || fs.lstat("/src").mtime_ns != src_root.mtime_ns ||
      fs.lstat("/src").mode != src_root.mode)
    out.problems.push_back(where + "the source changed");

  // 4. the next run converges; the one after it writes nothing
  std::error_code ec2;
  const treesync::report r2 = sc.run(fs, ec2);
  if (ec2 || !r2.ok()) {
    out.problems.push_back(where + "the clean run failed (" + describe(r2, ec2) + ")");
    return;
  }
  const std::string diff = exact_mirror_diff(fs, "/src", "/dst", sc.follow);
  if (!diff.empty()) out.problems.push_back(where + "no exact mirror after the clean run:\n" + diff);
  if (!temporaries(fs, "/dst").empty()) out.problems.push_back(where + "temporaries left after the clean run");
  fs.reset_counters();
  std::error_code ec3;
  const treesync::report r3 = sc.run(fs, ec3);
  if (ec3 || !r3.ok() || fs.ops().writes() != 0 || !r3.unchanged())
    out.problems.push_back(where + "the run after the clean run wrote " + std::to_string(fs.ops().writes()) + " times");
}

void check_sweep(const scenario& sc) {
  sweep_result res;
  {
    mock_fs fs;
    sc.setup(fs);
    fs.reset_counters();
    std::error_code ec;
    const auto r = sc.run(fs, ec);
    REQUIRE_MESSAGE(!ec, sc.name, ": the unfaulted run is refused: ", ec.message());
    REQUIRE_MESSAGE(r.ok(), sc.name, ": the unfaulted run fails: ", describe(r, ec));
    res.ops = fs.ops().total();
  }
  REQUIRE(res.ops > 0);
  for (std::size_t k = 1; k <= res.ops; ++k) faulted_run(sc, k, res);
  MESSAGE(sc.name, ": ", res.ops, " operations, ", res.points, " faulted runs (", res.refused,
          " refused or stopped, ", res.reported, " in report.errors, ", res.absorbed, " absorbed with an exact mirror, ",
          res.problems.size(), " problems)");
  std::string absorbed;
  for (const auto& a : res.absorbed_ops) absorbed += "  " + a + "\n";
  if (!absorbed.empty()) MESSAGE(sc.name, ": the operations whose failure was absorbed:\n", absorbed);
  CHECK(res.points == res.ops);
  std::string first;
  for (std::size_t i = 0; i < res.problems.size() && i < 25; ++i) first += res.problems[i] + "\n";
  CHECK_MESSAGE(res.problems.empty(), res.problems.size(), " problems, the first ones:\n", first);
}

}  // namespace

TEST_CASE("jobs{2} fault sweep: a cold sync reports a failure at any operation and the next run converges") {
  check_sweep({"cold", true, false, base_tree, runner()});
}

TEST_CASE("jobs{2} fault sweep: a warm sync with churn and type swaps reports a failure at any operation and the next run converges") {
  check_sweep({"churn preserve", false, false, warm_setup(treesync::links::preserve), runner(treesync::links::preserve)});
}

// This case found a bug (about 1 loop run in 15): a stopped run leaves a staged directory
// `.treesync-tmp-<token>-4`; the next run in the same process numbered its temporaries from 1
// again with the same stem, and under jobs{2} another worker could make temporary #4 before the
// leftover was removed ("symlink s3: File exists").  Temporary names now carry the run's serial
// number as well as the process's.
TEST_CASE("jobs{2} fault sweep: under errors::stop a failure at any operation ends the run with its error code and the next run converges") {
  check_sweep({"churn stop", false, true, warm_setup(treesync::links::preserve),
               runner(treesync::links::preserve, treesync::errors::stop)});
}
