// tests/support/fault_sweep.hpp - the fault sweep over mock_fs, shared by tests/test_faults.cpp
// (serial, five errnos) and tests/test_faults_parallel.cpp (jobs{2}, EIO), and usable for a
// policy or an engine change of one's own:
//
//   const std::size_t n = count_operations("cold", setup, run);   // the unfaulted run's operations
//   for (std::size_t k = 1; k <= n; ++k) {
//     treesync::mock_fs fs;
//     setup(fs);
//     const source_guard src(fs);                                  // the source as it was
//     const fault_point p = inject_and_run(fs, run, k, std::errc::io_error);
//     ... judge p.ec / p.report: was the fault visible? ...
//     if (!src.unchanged(fs)) problems.push_back(p.where("cold") + "the source changed");
//     check_recovery(fs, run, follow, p.where("cold"), problems);  // the next run converges
//   }
//   CHECK_MESSAGE(problems.empty(), first_problems(problems));
//
// Operation k is counted over every kind (mock_fs::fail_any); which operation it was (kind and
// path) is recorded by a hook, for the messages.  With a runaway limit, every operation past it
// fails, so a run that would never end ends (and is flagged).
#ifndef TREESYNC_TESTS_SUPPORT_FAULT_SWEEP_HPP
#define TREESYNC_TESTS_SUPPORT_FAULT_SWEEP_HPP

#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>

#include "mock_mirror.hpp"
#include "mock_trees.hpp"
#include "report_checks.hpp"

#include <functional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace treesync_test {

using setup_fn = std::function<void(treesync::mock_fs&)>;
using run_fn = std::function<treesync::report(treesync::mock_fs&, std::error_code&)>;

/// A warm scenario's setup: base_tree, one clean sync with `ps...`, then churn (mock_trees.hpp).
template <class... Ps>
setup_fn warm_setup(Ps... ps) {
  return [=](treesync::mock_fs& fs) {
    base_tree(fs);
    std::error_code ec;
    const auto r = treesync::sync(fs, "/src", "/dst", ps..., ec);
    if (ec || !r.ok())
      throw std::runtime_error("warm setup: the initial sync failed");
    churn(fs);
  };
}

/// The number of filesystem operations of the unfaulted run on a fresh tree; that run must succeed.
inline std::size_t count_operations(const std::string& name, const setup_fn& setup, const run_fn& run) {
  treesync::mock_fs fs;
  setup(fs);
  fs.reset_counters();
  std::error_code ec;
  const auto r = run(fs, ec);
  REQUIRE_MESSAGE(!ec, name, ": the unfaulted run is refused: ", ec.message());
  REQUIRE_MESSAGE(r.ok(), name, ": the unfaulted run fails: ", describe(r, ec));
  return fs.ops().total();
}

/// What one faulted run did.
struct fault_point {
  std::size_t k = 0;
  std::errc error{};
  treesync::mock_fs::op kind = treesync::mock_fs::op::list;  ///< the operation that failed
  std::string path;                                          ///< and its path
  std::size_t triggered = 0;                                 ///< faults that fired (1 expected)
  bool runaway = false;                                      ///< the runaway limit was passed
  treesync::report report;
  std::error_code ec;

  /// "<scenario>: fault <k> (<op> <path>)[ = <errno message>]: ", the prefix of a problem.
  std::string where(const std::string& scenario, bool with_errno = false) const {
    return scenario + ": fault " + std::to_string(k) + " (" + op_name(kind) + " " + treesync::escape(path) +
           ")" + (with_errno ? " = " + std::make_error_code(error).message() : std::string()) + ": ";
  }
};

/// Fails the k-th operation of `fs` (any kind) with `e`, runs `run`, and disarms the fault.  With
/// `runaway_limit` > 0, every operation past that many fails too (fault_point::runaway is set).
inline fault_point inject_and_run(treesync::mock_fs& fs, const run_fn& run, std::size_t k, std::errc e,
                                  std::size_t runaway_limit = 0) {
  fault_point p;
  p.k = k;
  p.error = e;
  std::size_t n = 0;
  // the hook runs under the mock's lock: no other synchronisation is needed under jobs{n}
  fs.on_operation([&](treesync::mock_fs::op kind, const std::string& path) {
    ++n;
    if (n == k) {
      p.kind = kind;
      p.path = path;
    }
    if (runaway_limit != 0 && n == runaway_limit + 1) {
      p.runaway = true;
      fs.fail_any(1, std::errc::io_error);  // from here on, every operation fails
    }
  });
  fs.fail_any(k, e);
  p.report = run(fs, p.ec);
  fs.on_operation(nullptr);
  p.triggered = fs.faults_triggered();
  fs.clear_faults();
  return p;
}

/// The source tree (every entry with its inode) and its root, taken before a faulted run.
struct source_guard {
  snapshot tree;
  treesync::stat_info root;
  explicit source_guard(const treesync::mock_fs& fs, const std::string& src = "/src")
      : tree(fs.tree(src)), root(fs.lstat(src)), src_(src) {}
  bool unchanged(const treesync::mock_fs& fs) const {
    const treesync::stat_info now = fs.lstat(src_);
    return same_with_inodes(fs.tree(src_), tree) && now.mtime_ns == root.mtime_ns && now.mode == root.mode;
  }

 private:
  std::string src_;
};

/// After a faulted run: a clean run succeeds with the exact mirror and no temporary left, and the
/// run after it writes nothing (and, with `require_unchanged`, reports no error and no change).
/// Each failure is appended to `problems`, prefixed by `where`.
inline void check_recovery(treesync::mock_fs& fs, const run_fn& run, bool follow, const std::string& where,
                           std::vector<std::string>& problems, bool require_unchanged = false) {
  std::error_code ec2;
  const treesync::report r2 = run(fs, ec2);
  if (ec2 || !r2.ok()) {
    problems.push_back(where + "the clean run failed (" + describe(r2, ec2) + ")");
    return;
  }
  const std::string diff = exact_mirror_diff(fs, "/src", "/dst", follow);
  if (!diff.empty())
    problems.push_back(where + "no exact mirror after the clean run:\n" + diff);
  if (!temporaries(fs, "/dst").empty())
    problems.push_back(where + "temporaries left after the clean run");
  fs.reset_counters();
  std::error_code ec3;
  const treesync::report r3 = run(fs, ec3);
  if (ec3 || fs.ops().writes() != 0 || (require_unchanged && (!r3.ok() || !r3.unchanged())))
    problems.push_back(where + "the run after the clean run wrote " + std::to_string(fs.ops().writes()) +
                       " times");
}

/// The first `n` problems, one a line, for a CHECK_MESSAGE.
inline std::string first_problems(const std::vector<std::string>& problems, std::size_t n = 25) {
  std::string out = std::to_string(problems.size()) + " problems, the first ones:\n";
  for (std::size_t i = 0; i < problems.size() && i < n; ++i)
    out += problems[i] + "\n";
  return out;
}

}  // namespace treesync_test

#endif  // TREESYNC_TESTS_SUPPORT_FAULT_SWEEP_HPP
