// tests/test_faults.cpp - the exhaustive fault sweep over mock_fs (issue 6, item 1).
//
// For each scenario (a cold sync; warm syncs with churn: adds, deletes, modifications, every type
// swap file <-> directory <-> symlink, link retargets, a leftover temporary; several policy sets)
// the run is made once to count its filesystem operations, then once per operation index k and
// per errno e in {EIO, ENOSPC, EACCES, ENOENT, EXDEV} with `fail_any(k, e)`: operation k fails
// with e, every other one succeeds.  After each faulted run:
//
//   1. the failure is visible.  Precisely: the run was refused or stopped (the error_code is
//      set), or report.errors is non-empty, or - for ENOENT only - the entry was reported as
//      vanished, or the failed operation was on the destination side, where "no such entry" is
//      what the engine was about to make true (an unlink, a probe of an entry it then creates);
//      the clean run below proves that reading was harmless; or - for any errno - the run still
//      produced the exact mirror (a best-effort probe failed and nothing depended on it);
//   2. the source tree is unchanged (every entry's type, bytes, mode, mtime and inode; the root);
//   3. no destination file at its final name has bytes different from the source while carrying
//      the source's size and mtime (nothing looks up to date that is not) - no such file was
//      created by the faulted run;
//   4. a clean run then succeeds and converges to the exact mirror (types, bytes, modes, mtimes,
//      link targets, the root's mode and mtime) computed from the source snapshot alone, with no
//      `.treesync-tmp-*` left; and a further run writes nothing.
//
// Each test case prints (MESSAGE) how many fault points it exercised and how each was reported.
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>

#include "support/fault_sweep.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace {

using treesync::file_type;
using treesync::mock_fs;
using op = treesync::mock_fs::op;
using namespace std::chrono_literals;
using namespace treesync_test;

const std::vector<std::errc> fault_errors{std::errc::io_error, std::errc::no_space_on_device,
                                          std::errc::permission_denied, std::errc::no_such_file_or_directory,
                                          std::errc::cross_device_link};

// ---- scenarios (base_tree() and churn(): tests/support/mock_trees.hpp) --------------------------

struct scenario {
  std::string name;
  bool follow;  // links dereferenced: the mirror shows what they point to
  setup_fn setup;
  run_fn run;
};

template <class... Ps>
run_fn runner(Ps... ps) {
  return [=](mock_fs& fs, std::error_code& ec) { return treesync::sync(fs, "/src", "/dst", ps..., ec); };
}

// A destination written in the same timestamp tick as its source (racily clean), one source file
// then rewritten in that tick with the same size: the swept run must settle them by content and
// re-stamp the rest.
void racy_setup(mock_fs& fs) {
  fs.set_granularity(1s);
  fs.write("/src/gen1.h", "v1 one");
  fs.write("/src/gen2.h", "v1 two");
  fs.write("/src/sub/gen3.h", "v1 three");
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/dst", ec);
  if (ec) throw std::runtime_error("racy setup failed");
  fs.write("/src/gen2.h", "v2 two");  // same size, same tick: same mtime
  fs.advance(5s);
}

// ---- one faulted run --------------------------------------------------------------------------

struct sweep_result {
  std::size_t points = 0;  // (k, errno) pairs run
  std::size_t ops = 0;     // operations of the unfaulted run
  std::size_t triggered = 0;
  std::size_t refused = 0, reported = 0, vanished = 0, enoent_dst = 0, absorbed = 0;
  std::vector<std::string> problems;
};

void faulted_run(const scenario& sc, std::size_t k, std::errc e, sweep_result& out) {
  mock_fs fs;  // built afresh each time (a mock_fs is not copyable)
  sc.setup(fs);
  const source_guard src(fs);
  std::vector<std::string> liars_before = lying_files(fs, "/src", "/dst", sc.follow);

  const fault_point p = inject_and_run(fs, sc.run, k, e);
  const treesync::report& r = p.report;
  const std::error_code& ec = p.ec;
  const std::string where = p.where(sc.name, true);
  ++out.points;
  if (p.triggered != 1) {
    out.problems.push_back(where + "the fault did not trigger");
    return;
  }
  ++out.triggered;

  // 1. visible
  const bool on_dst = p.path == "/dst" || p.path.rfind("/dst/", 0) == 0;
  if (ec)
    ++out.refused;
  else if (!r.errors.empty())
    ++out.reported;
  else if (e == std::errc::no_such_file_or_directory && !r.vanished.empty())
    ++out.vanished;
  else if (e == std::errc::no_such_file_or_directory && on_dst)
    ++out.enoent_dst;
  else if (fs.exists("/dst") && mirror_diff(expected_mirror(fs, "/src", sc.follow), fs.tree("/dst")).empty() &&
           temporaries(fs, "/dst").empty())
    ++out.absorbed;  // a best-effort operation (a probe) failed and the run still made the exact mirror
  else
    out.problems.push_back(where + "not reported, and the destination is not the mirror (" + describe(r, ec) + ")");

  // 2. the source is untouched
  if (!src.unchanged(fs)) out.problems.push_back(where + "the source changed");

  // 3. nothing new looks up to date that is not
  if (fs.exists("/dst")) {
    for (const auto& rel : lying_files(fs, "/src", "/dst", sc.follow))
      if (std::find(liars_before.begin(), liars_before.end(), rel) == liars_before.end())
        out.problems.push_back(where + "dst/" + treesync::escape(rel) + " has the source's size and mtime, not its bytes");
  }

  // 4. a clean run converges exactly, leaves no temporary, and the next one writes nothing
  check_recovery(fs, sc.run, sc.follow, where, out.problems);
}

sweep_result sweep(const scenario& sc) {
  sweep_result out;
  out.ops = count_operations(sc.name, sc.setup, sc.run);
  for (std::size_t k = 1; k <= out.ops; ++k)
    for (const auto e : fault_errors) faulted_run(sc, k, e, out);
  MESSAGE(sc.name, ": ", out.ops, " operations, ", out.points, " fault points (", out.refused, " refused or stopped, ",
          out.reported, " in report.errors, ", out.vanished, " vanished, ", out.enoent_dst,
          " ENOENT on the destination side, ", out.absorbed, " absorbed with an exact mirror, ", out.problems.size(),
          " problems)");
  return out;
}

void check_sweep(const scenario& sc) {
  const sweep_result res = sweep(sc);
  CHECK(res.ops > 0);
  CHECK(res.triggered == res.points);
  CHECK_MESSAGE(res.problems.empty(), first_problems(res.problems));
}

}  // namespace

TEST_CASE("fault sweep: a cold sync survives a failure at every operation") {
  check_sweep({"cold", true, base_tree, runner()});
}

TEST_CASE("fault sweep: a cold sync with preserved links survives a failure at every operation") {
  check_sweep({"cold preserve", false, base_tree, runner(treesync::links::preserve)});
}

TEST_CASE("fault sweep: a warm sync with churn and type swaps survives a failure at every operation") {
  check_sweep({"churn preserve", false, warm_setup(treesync::links::preserve), runner(treesync::links::preserve)});
}

TEST_CASE("fault sweep: a warm in-place sync with churn through dereferenced links survives a failure at every operation") {
  check_sweep({"churn in_place", true, warm_setup(), runner(treesync::write::in_place)});
}

TEST_CASE("fault sweep: a warm checksum sync under errors::stop survives a failure at every operation") {
  check_sweep({"churn checksum stop", false, warm_setup(treesync::links::preserve),
               runner(treesync::links::preserve, treesync::compare::checksum, treesync::errors::stop)});
}

TEST_CASE("fault sweep: settling racily clean files survives a failure at every operation") {
  check_sweep({"racy", false, racy_setup, runner()});
}

// ---- failures the sweep found, pinned one by one ------------------------------------------------

// Found by the sweep (the guard ignored a failed stat of an ancestor and answered "not nested",
// so one transient EIO let a sync into a directory inside the source proceed and recreate the
// destination inside itself level after level); the engine now fails closed.
TEST_CASE("the nesting guard refuses the run when it cannot stat an ancestor of the destination") {
  mock_fs fs;
  fs.write("/src/a", "a");
  fs.mkdir("/src/sub");
  fs.advance(10s);
  // stats: 1 source root, 2 destination root, 3 /src/sub (the walk starts at the destination),
  // 4 /src: the ancestor that is the source
  fs.fail(op::stat, 4, std::errc::io_error);
  std::size_t ops = 0;
  fs.on_operation([&](op, const std::string&) {
    if (++ops > 5000) fs.fail_any(1, std::errc::io_error);  // a runaway: fail everything from here on
  });
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/src/sub", ec);
  fs.on_operation(nullptr);
  CHECK(ops <= 5000);
  CHECK(ec == std::errc::io_error);
  CHECK_FALSE(fs.exists("/src/sub/sub"));
}

// Found by the sweep: under errors::stop a failed listing of a root was recorded in
// report.errors but the run returned an empty error_code (the throwing overload did not throw).
TEST_CASE("under errors::stop a failed listing of the root ends the run with its error code") {
  for (const std::string root : {"/src", "/dst"}) {
    CAPTURE(root);
    mock_fs fs;
    base_tree(fs);
    std::error_code ec;
    (void)treesync::sync(fs, "/src", "/dst", ec);
    REQUIRE_FALSE(ec);
    fs.advance(10s);
    fs.fail_path(root, std::errc::io_error, op::list);
    const auto r = treesync::sync(fs, "/src", "/dst", treesync::errors::stop, ec);
    CHECK(r.errors.size() == 1);
    CHECK(ec == std::errc::io_error);
    CHECK_THROWS_AS((void)treesync::sync(fs, "/src", "/dst", treesync::errors::stop), std::filesystem::filesystem_error);
  }
}
