// jobs{n}: the parallel executor gives the serial run's outcome.
#include <treesync/mock_fs.hpp>

#include <doctest/doctest.h>

#include "support/report_checks.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

namespace {

using treesync::file_type;
using treesync::mock_fs;
using namespace std::chrono_literals;

// The same pseudo-random tree (and the same churn) built into any number of mock filesystems.
struct scenario {
  explicit scenario(unsigned seed) : seed_(seed) {}

  void build(mock_fs& fs) const {
    std::mt19937 rng(seed_);
    std::vector<std::string> dirs{"/src"};
    for (int i = 0; i < 120; ++i) {
      const std::string parent = dirs[rng() % dirs.size()];
      dirs.push_back(parent + "/d" + std::to_string(i));
      fs.mkdir(dirs.back(), rng() % 4 == 0 ? 0700 : 0755);
    }
    for (int i = 0; i < 1500; ++i) {
      const std::string dir = dirs[rng() % dirs.size()];
      fs.write(dir + "/f" + std::to_string(i), std::string(rng() % 200, char('a' + i % 26)), rng() % 3 ? 0644 : 0600);
      fs.set_mtime(dir + "/f" + std::to_string(i), 1600000000LL * 1000000000 + std::int64_t(rng()));
    }
    for (int i = 0; i < 40; ++i) fs.symlink(dirs[rng() % dirs.size()] + "/l" + std::to_string(i), "/src/d0");
    fs.symlink("/src/dangling", "nowhere");
    fs.fifo("/src/pipe");
    fs.advance(10s);
  }

  // adds, deletes, modifications and type swaps on both sides
  void churn(mock_fs& fs) const {
    std::mt19937 rng(seed_ + 1);
    auto tree = fs.tree("/src");
    std::vector<std::string> files;
    for (const auto& [path, n] : tree)
      if (n.type == file_type::regular) files.push_back(path);
    for (int i = 0; i < 60; ++i) {
      const std::string f = "/src/" + files[rng() % files.size()];
      if (!fs.exists(f)) continue;
      switch (rng() % 4) {
        case 0: fs.remove(f); break;
        case 1: fs.write(f, "modified " + std::to_string(i)); break;
        case 2: fs.remove(f), fs.write(f + "/now-a-dir", "x"); break;
        default: fs.write(f + ".new", "new"); break;
      }
    }
    fs.write("/dst/stale/deep/file", "stale");
    fs.write("/dst/.treesync-tmp-1-1", "leftover");
    fs.advance(10s);
  }
  unsigned seed_;
};

struct outcome {
  std::map<std::string, mock_fs::node> tree;
  treesync::report report;
};

template <class... Ps>
outcome run(mock_fs& fs, Ps&&... ps) {
  outcome o;
  o.report = treesync::sync(fs, "/src", "/dst", std::forward<Ps>(ps)...);
  o.tree = fs.tree("/dst");
  return o;
}

void check_same(const outcome& serial, const outcome& parallel) {
  CHECK(serial.tree == parallel.tree);
  const auto& a = serial.report;
  const auto& b = parallel.report;
  CHECK(treesync_test::count_diff(a, b) == "");
  REQUIRE(a.errors.size() == b.errors.size());
  for (std::size_t i = 0; i < a.errors.size(); ++i) {
    CHECK(a.errors[i].path == b.errors[i].path);
    CHECK(a.errors[i].operation == b.errors[i].operation);
    CHECK(a.errors[i].code == b.errors[i].code);
  }
  CHECK(a.skipped_entries.size() == b.skipped_entries.size());
}

}  // namespace

TEST_CASE("jobs{n}: cold and churned warm runs give the serial run's destination and report") {
  for (unsigned seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    const scenario sc(seed);
    mock_fs one, many;
    sc.build(one);
    sc.build(many);
    check_same(run(one), run(many, treesync::jobs{4}));
    sc.churn(one);
    sc.churn(many);
    check_same(run(one), run(many, treesync::jobs{4}));
    one.advance(10s);
    many.advance(10s);
    const auto quiet = run(many, treesync::jobs{3});
    CHECK(quiet.report.unchanged());
    check_same(run(one), quiet);
  }
}

TEST_CASE("jobs{n}: a warm run on an unchanged tree performs zero writes") {
  const scenario sc(7);
  mock_fs fs;
  sc.build(fs);
  run(fs, treesync::jobs{4});
  fs.advance(10s);
  fs.reset_counters();
  CHECK(run(fs, treesync::jobs{4}).report.unchanged());
  CHECK(fs.ops().writes() == 0);
}

TEST_CASE("jobs{n}: errors are reported in a deterministic, sorted order") {
  const scenario sc(11);
  mock_fs a, b;
  sc.build(a);
  sc.build(b);
  for (mock_fs* fs : {&a, &b}) {
    for (const auto& [path, n] : fs->tree("/src"))
      if (n.type == file_type::regular && path.back() == '7')
        fs->fail_path("/src/" + path, std::errc::permission_denied, mock_fs::op::open_read);
  }
  const auto serial = run(a);
  const auto parallel = run(b, treesync::jobs{4});
  REQUIRE(serial.report.errors.size() > 5);
  check_same(serial, parallel);
  CHECK(std::is_sorted(parallel.report.errors.begin(), parallel.report.errors.end(),
                       [](const auto& x, const auto& y) { return x.path < y.path; }));
}

TEST_CASE("jobs{n}: directory mtimes are set after all of their content, whichever worker finishes last") {
  const scenario sc(5);
  mock_fs fs;
  sc.build(fs);
  run(fs, treesync::jobs{4});
  const auto src = fs.tree("/src");
  const auto dst = fs.tree("/dst");
  for (const auto& entry : src)
    if (entry.second.type == file_type::directory) {
      CAPTURE(entry.first);
      CHECK(dst.at(entry.first).mtime_ns == entry.second.mtime_ns);
    }
}

TEST_CASE("jobs{n}: the observer sees each action exactly once") {
  const scenario sc(9);
  mock_fs one, many;
  sc.build(one);
  sc.build(many);
  std::size_t serial_actions = 0;
  std::atomic<std::size_t> parallel_actions{0};
  (void)treesync::sync(one, "/src", "/dst", [&](const treesync::action&) { ++serial_actions; });
  (void)treesync::sync(many, "/src", "/dst", treesync::jobs{4}, [&](const treesync::action&) { ++parallel_actions; });
  CHECK(serial_actions == parallel_actions.load());
}

// errors::stop under jobs{n} (issue 16). A failing worker sets the stop, then records its failure,
// tells the observer and cleans up; the other workers check the stop before each entry. So,
// whatever the scheduling:
//   - the run ends with the first failure recorded, and the report lists it; with one failing
//     entry that is the one; with several, any of them (this test expected the injected ENOSPC
//     although scenario 13 also has a dangling link and 40 links into a cycle, and failed 1 run in
//     200 when a worker met one of those first);
//   - each worker records at most one failure (its own stops it);
//   - the others go on until the stop is set: the failing worker's few steps from the failed call
//     to the stop, which a preempted worker can stretch. (The stop used to be set after the
//     failing worker had removed its partial file: a filesystem call that, on mock_fs's one mutex,
//     can wait behind the other workers' calls until they have done the whole tree. That failed
//     1 run in 322, 1620 entries created of 1621, in a Release build on a loaded machine.) The
//     first test holds the other workers' filesystem calls from the failing call until the
//     observer hears of the failure, which is after the stop: their work past the failure is
//     then at most the entry each has in hand. The second, with failures of several kinds,
//     checks only that a parallel run stops well short of the tree's end; only the serial run
//     has an exact count of the work done.
namespace {
// entries a full run creates: every source directory and regular file (the root is not listed)
std::size_t to_create(mock_fs& fs) {
  std::size_t n = 0;
  for (const auto& [path, node] : fs.tree("/src"))
    if (node.type == file_type::regular || node.type == file_type::directory) ++n;
  return n;
}
}  // namespace

TEST_CASE("jobs{n}: errors::stop ends a parallel run with the error") {
  constexpr unsigned workers = 4;
  constexpr std::size_t failing_write = 10;
  const scenario sc(13);
  const auto build = [&](mock_fs& fs) {
    sc.build(fs);
    // no symlinks: the dangling one and the cycles would be failures of their own
    for (const auto& [path, n] : fs.tree("/src"))
      if (n.type == file_type::symlink) fs.remove("/src/" + path);
    fs.fail(mock_fs::op::open_write, failing_write, std::errc::no_space_on_device);  // the only entry that can fail
  };
  mock_fs fs;
  build(fs);
  const std::size_t entries = to_create(fs);

  // From the failing call until the observer hears of the failure, every other thread's call waits
  // (the hook runs inside the call, before the fault is applied).
  std::mutex mu;
  std::condition_variable cv;
  std::size_t writes = 0;
  std::thread::id failing;
  bool failed = false, reported = false, timed_out = false;
  fs.on_operation([&](mock_fs::op kind, const std::string&) {
    std::unique_lock<std::mutex> lock(mu);
    if (kind == mock_fs::op::open_write && ++writes == failing_write) {
      failed = true;
      failing = std::this_thread::get_id();
      return;
    }
    if (failed && std::this_thread::get_id() != failing &&
        !cv.wait_for(lock, std::chrono::seconds(30), [&] { return reported; }))
      timed_out = true;  // the failure was never reported: checked below
  });
  const auto observer = [&](const treesync::action& a) {
    if (a.kind != treesync::action_kind::error) return;
    {
      const std::lock_guard<std::mutex> lock(mu);
      reported = true;
    }
    cv.notify_all();
  };
  std::error_code ec;
  const auto r = treesync::sync(fs, "/src", "/dst", treesync::jobs{workers}, treesync::errors::stop, observer, ec);
  CHECK_FALSE(timed_out);
  CHECK(ec == std::errc::no_space_on_device);
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].code == std::errc::no_space_on_device);
  // Before the failure: the files of failing_write - 1 writes, and directories. After it: the
  // entry each other worker has in hand. Without the stop: every entry but the failed file.
  CHECK(r.created < entries / 2);

  mock_fs one;  // serial: the run stops at the failing write itself
  build(one);
  const auto s = treesync::sync(one, "/src", "/dst", treesync::errors::stop, ec);
  CHECK(ec == std::errc::no_space_on_device);
  CHECK(s.errors.size() == 1);
  CHECK(one.ops()[mock_fs::op::open_write] == 10);
}

TEST_CASE("jobs{n}: errors::stop with several failing entries ends the run with one of them, reported") {
  constexpr unsigned workers = 4;
  const scenario sc(13);  // a dangling link, and 40 links that lead into a cycle (41 failures in all)
  const auto known = [](const treesync::entry_error& e) {
    return e.code == std::errc::no_space_on_device || e.code == treesync::errc::dangling_symlink ||
           e.code == treesync::errc::symlink_cycle;
  };

  for (int round = 0; round < 5; ++round) {  // whichever failure a worker meets first
    CAPTURE(round);
    mock_fs fs;
    sc.build(fs);
    const std::size_t entries = to_create(fs);
    fs.fail(mock_fs::op::open_write, 10, std::errc::no_space_on_device);
    std::error_code ec;
    const auto r = treesync::sync(fs, "/src", "/dst", treesync::jobs{workers}, treesync::errors::stop, ec);
    REQUIRE(ec);
    REQUIRE_FALSE(r.errors.empty());
    bool listed = false;
    for (const auto& e : r.errors) {
      CAPTURE(e.path);
      CHECK(known(e));
      listed = listed || e.code == ec;
    }
    CHECK_MESSAGE(listed, "the error that ended the run (", ec.message(), ") is in the report");
    CHECK(r.errors.size() <= workers);  // one failure per worker at most: its own stops it
    CHECK(r.created < entries / 2);
  }

  // serial: the first failure in the run's order, every time (the dangling link, a root entry)
  mock_fs one;
  sc.build(one);
  one.fail(mock_fs::op::open_write, 10, std::errc::no_space_on_device);
  std::error_code ec;
  const auto r = treesync::sync(one, "/src", "/dst", treesync::errors::stop, ec);
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].path == "dangling");
  CHECK(ec == treesync::errc::dangling_symlink);
  CHECK(one.ops()[mock_fs::op::open_write] < 10);  // stopped before the injected failure
}

TEST_CASE("jobs{n}: max_delete is decided for the whole run before any deletion") {
  const scenario sc(17);
  mock_fs fs;
  sc.build(fs);
  run(fs, treesync::jobs{4});
  for (int i = 0; i < 30; ++i) fs.write("/dst/extra" + std::to_string(i), "x");
  fs.advance(10s);
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/dst", treesync::jobs{4}, treesync::max_delete{29}, ec);
  CHECK(ec == treesync::errc::max_delete_exceeded);
  CHECK(fs.exists("/dst/extra0"));
  CHECK(treesync::sync(fs, "/src", "/dst", treesync::jobs{4}, treesync::max_delete{30}).deleted == 30);
}
