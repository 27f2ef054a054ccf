// The filesystem conformance suite: the contract of <treesync/filesystem.hpp>, checked over every
// backend that ships (mock_fs, posix_fs, std_fs) and the example backend (examples/custom_fs.hpp).
//
// A backend author adds a fixture for their type (a fresh instance, or a scratch directory, and
// the few setup calls below) to CONFORMANCE_FIXTURES and runs this file: first each operation's
// promise (what it does, which error it reports), then whole runs (a cold mirror, a warm no-op,
// edits, deletions and type swaps converging, a parallel run).  Where a backend declares that it
// lacks a capability (filesystem_capabilities_v), the check says so (MESSAGE) and skips.
#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include <doctest/doctest.h>

#include "../examples/custom_fs.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace {

using treesync::file_type;
using treesync::stat_info;
constexpr std::int64_t second = 1000000000;

// ---- one fixture per backend: the filesystem, a scratch root, setup calls ----------------------
// Each fixture offers: `fs` (the backend), `path(rel)` (an absolute path under the scratch root),
// `past` (a timestamp a day before the backend's now), write / mkdir / symlink / erase (setup,
// making parents; not through the contract), and a `name` for messages.

struct mock_fixture {
  static constexpr const char* name = "mock_fs";
  static constexpr std::int64_t time_slack = 0;
  treesync::mock_fs fs;
  std::int64_t past = fs.now() - 86400 * second;
  mock_fixture() { fs.mkdir("/t"); }
  std::string path(const std::string& rel) const { return rel.empty() ? "/t" : "/t/" + rel; }
  void write(const std::string& rel, const std::string& data, std::uint32_t mode = 0644) {
    fs.write(path(rel), data, mode);
    fs.set_mtime(path(rel), past);
  }
  void mkdir(const std::string& rel) { fs.mkdir(path(rel)); }
  void symlink(const std::string& rel, const std::string& target) { fs.symlink(path(rel), target); }
  void erase(const std::string& rel) { fs.remove(path(rel)); }
};

template <class FS>
struct disk_fixture {
  FS fs;
  treesync_test::temp_dir tmp;
  std::int64_t past = treesync_test::past_ns(86400);
  std::string path(const std::string& rel) const {
    return rel.empty() ? tmp.path().string() : (tmp / rel).string();
  }
  void write(const std::string& rel, const std::string& data, std::uint32_t mode = 0644) {
    std::filesystem::create_directories(std::filesystem::path(path(rel)).parent_path());
    treesync_test::write_file(path(rel), data, mode, past);
  }
  void mkdir(const std::string& rel) { std::filesystem::create_directories(path(rel)); }
  void symlink(const std::string& rel, const std::string& target) {
    std::filesystem::create_directories(std::filesystem::path(path(rel)).parent_path());
    treesync_test::make_symlink(target, path(rel));
  }
  void erase(const std::string& rel) { std::filesystem::remove_all(path(rel)); }
};
struct posix_fixture : disk_fixture<treesync::posix_fs> {
  static constexpr const char* name = "posix_fs";
  static constexpr std::int64_t time_slack = 0;
};
struct std_fixture : disk_fixture<treesync::std_fs> {
  static constexpr const char* name = "std_fs";
  // std_fs converts file_time_type to Unix time by an offset measured once (two clock reads), so
  // the times it reports differ from the true ones by that skew (exact round trips within a run)
  static constexpr std::int64_t time_slack = 1000000;
};

struct custom_fixture {
  static constexpr const char* name = "custom::memory_fs";
  static constexpr std::int64_t time_slack = 0;
  custom::memory_fs fs;
  std::int64_t past = fs.now() - 86400 * second;
  custom_fixture() { fs.make_directory("/t"); }
  std::string path(const std::string& rel) const { return rel.empty() ? "/t" : "/t/" + rel; }
  void write(const std::string& rel, const std::string& data, std::uint32_t mode = 0644) {
    fs.write_file(path(rel), data, mode, past);
  }
  void mkdir(const std::string& rel) { fs.make_directory(path(rel)); }
  void symlink(const std::string& rel, const std::string& target) { fs.make_link(path(rel), target); }
  void erase(const std::string& rel) { fs.erase(path(rel)); }
};

#define CONFORMANCE_FIXTURES mock_fixture, posix_fixture, std_fixture, custom_fixture

template <class F>
constexpr treesync::filesystem_capabilities caps() {
  return treesync::filesystem_capabilities_v<decltype(F::fs)>;
}

template <class F>
void skip(const char* what) {
  const std::string text = std::string(F::name) + " declares no " + what + ": skipped";
  MESSAGE(text);
}

// The scratch root, opened through the contract.
template <class F>
auto root(F& f) {
  std::error_code ec;
  auto h = f.fs.open_root(f.path(""), ec);
  REQUIRE_FALSE(ec);
  return h;
}

template <class F>
stat_info must_stat(F& f, typename decltype(F::fs)::dir_handle& d, const std::string& name,
                    bool follow = false) {
  std::error_code ec;
  const stat_info st = f.fs.stat(d, name, follow, ec);
  REQUIRE_MESSAGE(!ec, name << ": " << ec.message());
  return st;
}

bool same_object(const stat_info& a, const stat_info& b) { return a.dev == b.dev && a.ino == b.ino; }

// Whether a time a backend reports is `want`, within the fixture's conversion slack.
template <class F>
bool same_time(std::int64_t got, std::int64_t want) {
  return got - want <= F::time_slack && want - got <= F::time_slack;
}

// What differs between two trees of one filesystem, read through the contract alone: names,
// types, sizes, modes, mtimes of files and directories, link targets and file contents.
template <class F>
void diff_trees(F& f, typename decltype(F::fs)::dir_handle& a, typename decltype(F::fs)::dir_handle& b,
                const std::string& rel, std::vector<std::string>& out) {
  std::error_code ec;
  auto names = [&](typename decltype(F::fs)::dir_handle& d) {
    std::vector<std::string> n;
    for (const auto& e : f.fs.list(d, ec))
      n.push_back(e.name);
    std::sort(n.begin(), n.end());
    return n;
  };
  const auto na = names(a), nb = names(b);
  if (na != nb)
    out.push_back(rel + ": the names differ");
  for (const auto& name : na) {
    if (!std::binary_search(nb.begin(), nb.end(), name))
      continue;
    const std::string r = rel.empty() ? name : rel + "/" + name;
    std::error_code ex, ey;
    const stat_info x = f.fs.stat(a, name, false, ex), y = f.fs.stat(b, name, false, ey);
    if (ex || ey) {
      out.push_back(r + ": stat " + (ex ? ex : ey).message());
      continue;
    }
    if (x.type != y.type) {
      out.push_back(r + ": type");
      continue;
    }
    if (x.type != file_type::symlink && x.mode != y.mode)
      out.push_back(r + ": mode");
    if (x.type == file_type::regular) {
      if (x.size != y.size || x.mtime_ns != y.mtime_ns)
        out.push_back(r + ": size or mtime");
      else if (!f.fs.same_content(a, name, false, b, name, ec) || ec)
        out.push_back(r + ": content");
    } else if (x.type == file_type::symlink) {
      if (f.fs.read_link(a, name, ec) != f.fs.read_link(b, name, ec))
        out.push_back(r + ": target");
    } else if (x.type == file_type::directory) {
      if (x.mtime_ns != y.mtime_ns)
        out.push_back(r + ": directory mtime");
      auto sa = f.fs.open_dir(a, name, false, ec);
      auto sb = f.fs.open_dir(b, name, false, ec);
      if (ec)
        out.push_back(r + ": opendir " + ec.message());
      else
        diff_trees(f, sa, sb, r, out);
    }
  }
}

template <class F>
std::vector<std::string> mirror_differences(F& f) {
  std::error_code ec;
  auto s = f.fs.open_root(f.path("src"), ec);
  REQUIRE_FALSE(ec);
  auto d = f.fs.open_root(f.path("dst"), ec);
  REQUIRE_FALSE(ec);
  std::vector<std::string> out;
  diff_trees(f, s, d, "", out);
  return out;
}

template <class F>
void make_source(F& f) {
  f.write("src/a.txt", "alpha");
  f.write("src/exec", "#!/bin/sh\n", 0755);
  f.write("src/sub/b.txt", "beta beta");
  f.write("src/sub/deeper/c.txt", "gamma");
  f.write("src/will_be_dir", "a file first");
  f.mkdir("src/will_be_file");
  f.write("src/will_be_file/inside", "x");
  f.symlink("src/link", "a.txt");
  f.symlink("src/dangling", "nowhere/at/all");
}

template <class F>
treesync::report mirror(F& f, unsigned jobs = 1) {
  return treesync::sync(f.fs, f.path("src"), f.path("dst"), treesync::links::preserve, treesync::jobs{jobs});
}

}  // namespace

TEST_SUITE_BEGIN("conformance");

// ---- the operations --------------------------------------------------------------------------

TEST_CASE_TEMPLATE("conformance: every backend meets the contract's static requirements", F,
                   CONFORMANCE_FIXTURES) {
  using FS = decltype(F::fs);
  static_assert(treesync::is_filesystem_v<FS>, "is_filesystem_v");
  static_assert(treesync::detail::check_filesystem<FS>(), "every required operation");
  constexpr auto c = caps<F>();
  CHECK(c.state_file == treesync::detail::has_state_ops<FS>::value);
  CHECK(c.timestamps == treesync::detail::has_timestamps<FS>::value);
}

TEST_CASE_TEMPLATE("conformance: open_dir reports a missing name, a non-directory and an unfollowed symlink",
                   F, CONFORMANCE_FIXTURES) {
  F f;
  f.write("file", "x");
  f.mkdir("dir");
  f.symlink("to_dir", "dir");
  auto r = root(f);
  std::error_code ec;
  (void)f.fs.open_dir(r, "missing", false, ec);
  CHECK(ec == std::errc::no_such_file_or_directory);
  (void)f.fs.open_dir(r, "file", false, ec);
  CHECK(ec == std::errc::not_a_directory);
  (void)f.fs.open_dir(r, "to_dir", false, ec);  // Linux's O_DIRECTORY | O_NOFOLLOW says ENOTDIR
  CHECK((ec == std::errc::too_many_symbolic_link_levels || ec == std::errc::not_a_directory));
  auto followed = f.fs.open_dir(r, "to_dir", true, ec);
  REQUIRE_FALSE(ec);
  CHECK(same_object(must_stat(f, followed, "."), must_stat(f, r, "dir")));
}

TEST_CASE_TEMPLATE("conformance: open_dir of \".\" is the directory and of \"..\" its parent", F,
                   CONFORMANCE_FIXTURES) {
  F f;
  f.mkdir("up/down");
  auto r = root(f);
  std::error_code ec;
  auto up = f.fs.open_dir(r, "up", false, ec);
  REQUIRE_FALSE(ec);
  auto down = f.fs.open_dir(up, "down", false, ec);
  REQUIRE_FALSE(ec);
  auto again = f.fs.open_dir(down, ".", false, ec);
  REQUIRE_FALSE(ec);
  CHECK(same_object(must_stat(f, again, "."), must_stat(f, up, "down")));
  auto parent = f.fs.open_dir(down, "..", false, ec);
  REQUIRE_FALSE(ec);
  CHECK(same_object(must_stat(f, parent, "."), must_stat(f, r, "up")));
}

TEST_CASE_TEMPLATE("conformance: list names every entry once, without \".\" and \"..\"", F,
                   CONFORMANCE_FIXTURES) {
  F f;
  f.write("d/file", "x");
  f.mkdir("d/sub");
  f.symlink("d/link", "file");
  auto r = root(f);
  std::error_code ec;
  auto d = f.fs.open_dir(r, "d", false, ec);
  REQUIRE_FALSE(ec);
  auto entries = f.fs.list(d, ec);
  REQUIRE_FALSE(ec);
  std::map<std::string, file_type> seen;
  for (const auto& e : entries)
    CHECK(seen.emplace(e.name, e.type).second);
  REQUIRE(seen.size() == 3);
  const std::map<std::string, file_type> want{
      {"file", file_type::regular}, {"link", file_type::symlink}, {"sub", file_type::directory}};
  for (const auto& [name, type] : want) {
    REQUIRE(seen.count(name));
    CHECK((seen[name] == type || seen[name] == file_type::unknown));  // unknown: the engine stats
  }
}

TEST_CASE_TEMPLATE("conformance: stat reports a missing name as ENOENT and a link as itself unless followed",
                   F, CONFORMANCE_FIXTURES) {
  F f;
  f.write("file", "12345");
  f.symlink("link", "file");
  auto r = root(f);
  std::error_code ec;
  (void)f.fs.stat(r, "missing", false, ec);
  CHECK(ec == std::errc::no_such_file_or_directory);
  const stat_info link = must_stat(f, r, "link");
  CHECK(link.type == file_type::symlink);
  CHECK(link.size == 4);  // the target's length
  const stat_info file = must_stat(f, r, "link", true);
  CHECK(file.type == file_type::regular);
  CHECK(file.size == 5);
  CHECK(same_time<F>(file.mtime_ns, f.past));
}

TEST_CASE_TEMPLATE("conformance: identity (dev, ino) is stable and tells objects apart", F,
                   CONFORMANCE_FIXTURES) {
  F f;
  f.mkdir("one");
  f.mkdir("two");
  f.write("a", "x");
  f.write("b", "y");
  auto r = root(f);
  std::error_code ec;
  auto one = f.fs.open_dir(r, "one", false, ec);
  REQUIRE_FALSE(ec);
  CHECK(same_object(must_stat(f, r, "one"), must_stat(f, r, "one")));
  CHECK(same_object(must_stat(f, r, "one"), must_stat(f, one, ".")));
  CHECK_FALSE(same_object(must_stat(f, r, "one"), must_stat(f, r, "two")));
  if (!caps<F>().file_identity)
    return skip<F>("identity for files");
  CHECK(same_object(must_stat(f, r, "a"), must_stat(f, r, "a")));
  CHECK_FALSE(same_object(must_stat(f, r, "a"), must_stat(f, r, "b")));
  const stat_info before = must_stat(f, r, "a");
  f.fs.rename(r, "a", "renamed", ec);
  REQUIRE_FALSE(ec);
  CHECK(same_object(before, must_stat(f, r, "renamed")));  // a rename keeps the object
}

TEST_CASE_TEMPLATE("conformance: rename replaces an existing file in one step", F, CONFORMANCE_FIXTURES) {
  F f;
  f.write("new", "the new content");
  f.write("old", "old");
  auto r = root(f);
  std::error_code ec;
  f.fs.rename(r, "new", "old", ec);
  REQUIRE_FALSE(ec);
  CHECK(must_stat(f, r, "old").size == 15);
  (void)f.fs.stat(r, "new", false, ec);
  CHECK(ec == std::errc::no_such_file_or_directory);
  f.fs.rename(r, "missing", "old", ec);
  CHECK(ec == std::errc::no_such_file_or_directory);
  CHECK(must_stat(f, r, "old").size == 15);  // a failed rename left the target alone
  f.mkdir("staged");
  f.write("staged/inside", "x");
  f.fs.rename(r, "staged", "final", ec);  // a staged directory, to a free name, with its content
  REQUIRE_FALSE(ec);
  auto fin = f.fs.open_dir(r, "final", false, ec);
  REQUIRE_FALSE(ec);
  CHECK(must_stat(f, fin, "inside").type == file_type::regular);
}

TEST_CASE_TEMPLATE("conformance: move renames across directories", F, CONFORMANCE_FIXTURES) {
  F f;
  f.write("from/file", "moving");
  f.mkdir("to");
  auto r = root(f);
  std::error_code ec;
  auto from = f.fs.open_dir(r, "from", false, ec);
  auto to = f.fs.open_dir(r, "to", false, ec);
  REQUIRE_FALSE(ec);
  f.fs.move(from, "file", to, "arrived", ec);
  REQUIRE_FALSE(ec);
  CHECK(must_stat(f, to, "arrived").size == 6);
  (void)f.fs.stat(from, "file", false, ec);
  CHECK(ec == std::errc::no_such_file_or_directory);
}

TEST_CASE_TEMPLATE("conformance: remove takes a file or a link itself and refuses a directory", F,
                   CONFORMANCE_FIXTURES) {
  F f;
  f.write("file", "x");
  f.symlink("link", "file");
  f.mkdir("dir");
  auto r = root(f);
  std::error_code ec;
  f.fs.remove(r, "link", ec);
  REQUIRE_FALSE(ec);
  CHECK(must_stat(f, r, "file").type == file_type::regular);  // not the target
  f.fs.remove(r, "file", ec);
  REQUIRE_FALSE(ec);
  (void)f.fs.stat(r, "file", false, ec);
  CHECK(ec == std::errc::no_such_file_or_directory);
  f.fs.remove(r, "file", ec);
  CHECK(ec == std::errc::no_such_file_or_directory);
  f.fs.remove(r, "dir", ec);
  CHECK((ec == std::errc::is_a_directory || ec == std::errc::operation_not_permitted));
  CHECK(must_stat(f, r, "dir").type == file_type::directory);
}

TEST_CASE_TEMPLATE("conformance: remove_dir takes an empty directory only", F, CONFORMANCE_FIXTURES) {
  F f;
  f.mkdir("empty");
  f.write("full/x", "x");
  f.write("file", "x");
  auto r = root(f);
  std::error_code ec;
  f.fs.remove_dir(r, "full", ec);
  CHECK((ec == std::errc::directory_not_empty || ec == std::errc::file_exists));
  f.fs.remove_dir(r, "file", ec);
  CHECK(ec == std::errc::not_a_directory);
  f.fs.remove_dir(r, "empty", ec);
  CHECK_FALSE(ec);
  f.fs.remove_dir(r, "empty", ec);
  CHECK(ec == std::errc::no_such_file_or_directory);
}

TEST_CASE_TEMPLATE("conformance: make_dir and make_symlink refuse an existing name", F,
                   CONFORMANCE_FIXTURES) {
  F f;
  f.write("taken", "x");
  auto r = root(f);
  std::error_code ec;
  f.fs.make_dir(r, "taken", 0755, ec);
  CHECK(ec == std::errc::file_exists);
  f.fs.make_symlink(r, "taken", "anything", ec);
  CHECK(ec == std::errc::file_exists);
  f.fs.make_dir(r, "made", 0750, ec);
  REQUIRE_FALSE(ec);
  CHECK(must_stat(f, r, "made").type == file_type::directory);
  f.fs.make_dir(r, "made", 0750, ec);
  CHECK(ec == std::errc::file_exists);
}

TEST_CASE_TEMPLATE("conformance: a symlink reads back verbatim, never resolved", F, CONFORMANCE_FIXTURES) {
  F f;
  auto r = root(f);
  std::error_code ec;
  int i = 0;
  for (const std::string target : {"plain", "a/../b", "/absolute/path", "./dot", "dangling/nowhere"}) {
    const std::string name = "l" + std::to_string(++i);
    f.fs.make_symlink(r, name, target, ec);
    REQUIRE_FALSE(ec);
    CHECK(f.fs.read_link(r, name, ec) == target);
    CHECK_FALSE(ec);
    CHECK(must_stat(f, r, name).type == file_type::symlink);
  }
  f.write("file", "x");
  (void)f.fs.read_link(r, "file", ec);
  CHECK(ec == std::errc::invalid_argument);
}

TEST_CASE_TEMPLATE("conformance: set_mode and set_mtime read back", F, CONFORMANCE_FIXTURES) {
  F f;
  f.write("file", "x");
  f.mkdir("dir");
  auto r = root(f);
  std::error_code ec;
  std::int64_t resolution = 1;
  if constexpr (caps<F>().timestamps) {
    const treesync::time_model m = f.fs.timestamps(r, ec);
    if (!ec)
      resolution = std::max<std::int64_t>(1, m.resolution_ns);
  }
  const std::int64_t t = f.past + 987654321;  // a nanosecond part the backend keeps at its resolution
  for (const char* name : {"file", "dir"}) {
    f.fs.set_mode(r, name, 0640, ec);
    REQUIRE_FALSE(ec);
    f.fs.set_mtime(r, name, t, ec);
    REQUIRE_FALSE(ec);
    const stat_info st = must_stat(f, r, name);
    CHECK(st.mode == 0640);
    CHECK(st.mtime_ns / resolution == t / resolution);
  }
  auto dir = f.fs.open_dir(r, "dir", false, ec);
  REQUIRE_FALSE(ec);
  f.fs.set_mode(dir, ".", 0750, ec);  // "." names the handle's directory
  REQUIRE_FALSE(ec);
  CHECK(must_stat(f, r, "dir").mode == 0750);
}

TEST_CASE_TEMPLATE("conformance: set_mtime on a link sets the link's own time or, declared, nothing", F,
                   CONFORMANCE_FIXTURES) {
  F f;
  f.write("target", "x");
  f.symlink("link", "target");
  auto r = root(f);
  std::error_code ec;
  f.fs.set_mtime(r, "link", f.past - 7 * second, ec);
  REQUIRE_FALSE(ec);
  CHECK(same_time<F>(must_stat(f, r, "target").mtime_ns, f.past));  // never followed
  if (!caps<F>().link_mtime)
    return skip<F>("link mtimes");
  CHECK(must_stat(f, r, "link").mtime_ns / second == (f.past - 7 * second) / second);
}

TEST_CASE_TEMPLATE("conformance: copy_file copies the data and applies the expected mode and mtime", F,
                   CONFORMANCE_FIXTURES) {
  F f;
  f.write("src", std::string(100000, 'z') + "end", 0604);
  f.write("existing", "old");
  auto r = root(f);
  std::error_code ec;
  const stat_info st = must_stat(f, r, "src");
  treesync::copy_options opt;
  const treesync::copy_result res = f.fs.copy_file(r, "src", r, "copy", st, opt, ec);
  REQUIRE_MESSAGE(!ec, ec.message());
  CHECK(res.bytes == 100003);
  const stat_info c = must_stat(f, r, "copy");
  CHECK(c.size == 100003);
  CHECK(c.mode == 0604);
  CHECK(c.mtime_ns == st.mtime_ns);
  CHECK(f.fs.same_content(r, "src", false, r, "copy", ec));
  (void)f.fs.copy_file(r, "src", r, "existing", st, opt, ec);  // created exclusively
  CHECK(ec == std::errc::file_exists);
  CHECK(must_stat(f, r, "existing").size == 3);
  opt.replace = true;  // truncated in place
  (void)f.fs.copy_file(r, "src", r, "existing", st, opt, ec);
  REQUIRE_FALSE(ec);
  CHECK(must_stat(f, r, "existing").size == 100003);
}

TEST_CASE_TEMPLATE("conformance: copy_file refuses a source that is not what the engine expects", F,
                   CONFORMANCE_FIXTURES) {
  F f;
  f.write("file", "content");
  f.symlink("link", "file");
  f.mkdir("dir");
  auto r = root(f);
  std::error_code ec;
  stat_info st = must_stat(f, r, "file");
  treesync::copy_options opt;
  (void)f.fs.copy_file(r, "link", r, "c1", st, opt, ec);  // a link, not followed
  CHECK(ec == std::errc::too_many_symbolic_link_levels);
  opt.follow = true;
  (void)f.fs.copy_file(r, "link", r, "c2", st, opt, ec);
  CHECK_FALSE(ec);
  (void)f.fs.copy_file(r, "dir", r, "c3", st, opt, ec);
  CHECK((ec == treesync::errc::special_file || ec == std::errc::is_a_directory));
  st.size += 1;  // the source no longer matches what the walker saw
  (void)f.fs.copy_file(r, "file", r, "c4", st, opt, ec);
  CHECK(ec == treesync::errc::changed_during_copy);
}

TEST_CASE_TEMPLATE("conformance: same_content compares bytes of regular files only", F,
                   CONFORMANCE_FIXTURES) {
  F f;
  f.write("a", "same bytes");
  f.write("b", "same bytes");
  f.write("c", "other byte");
  f.mkdir("dir");
  auto r = root(f);
  std::error_code ec;
  CHECK(f.fs.same_content(r, "a", false, r, "b", ec));
  CHECK_FALSE(ec);
  CHECK_FALSE(f.fs.same_content(r, "a", false, r, "c", ec));
  CHECK_FALSE(ec);
  (void)f.fs.same_content(r, "a", false, r, "dir", ec);
  CHECK((ec == treesync::errc::special_file || ec == std::errc::is_a_directory));
}

TEST_CASE_TEMPLATE("conformance: set_owner works or says it is not supported", F, CONFORMANCE_FIXTURES) {
  F f;
  f.write("file", "x");
  auto r = root(f);
  std::error_code ec;
  f.fs.set_owner(r, "file", -1, -1, ec);  // -1, -1: keep both
  if (caps<F>().owners)
    CHECK_FALSE(ec);
  else
    CHECK(ec == std::errc::operation_not_supported);
}

TEST_CASE_TEMPLATE("conformance: make_special makes a FIFO or says it is not supported", F,
                   CONFORMANCE_FIXTURES) {
  F f;
  auto r = root(f);
  std::error_code ec;
  stat_info fifo;
  fifo.type = file_type::fifo;
  fifo.mode = 0600;
  f.fs.make_special(r, "fifo", fifo, ec);
  if (caps<F>().specials) {
    CHECK_FALSE(ec);
    CHECK(must_stat(f, r, "fifo").type == file_type::fifo);
  } else {
    CHECK(ec == std::errc::operation_not_supported);
  }
}

TEST_CASE_TEMPLATE("conformance: link makes a second name for the same file", F, CONFORMANCE_FIXTURES) {
  F f;
  f.write("file", "x");
  auto r = root(f);
  std::error_code ec;
  if (!caps<F>().hard_links)
    return skip<F>("hard links");
  f.fs.link(r, "file", r, "second", ec);
  REQUIRE_FALSE(ec);
  CHECK(same_object(must_stat(f, r, "file"), must_stat(f, r, "second")));
  CHECK(must_stat(f, r, "second").nlink == 2);
  f.fs.link(r, "file", r, "second", ec);
  CHECK(ec == std::errc::file_exists);
}

TEST_CASE_TEMPLATE("conformance: sync_dir and copy_xattrs succeed", F, CONFORMANCE_FIXTURES) {
  F f;
  f.mkdir("a");
  auto r = root(f);
  std::error_code ec;
  auto a = f.fs.open_dir(r, "a", false, ec);
  REQUIRE_FALSE(ec);
  f.fs.sync_dir(a, ec);
  CHECK_FALSE(ec);
  f.fs.copy_xattrs(r, a, ec);
  CHECK_FALSE(ec);
  if (!caps<F>().durable)
    skip<F>("durability (sync_dir is a no-op)");
}

// ---- whole runs ------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("conformance: a cold sync builds the mirror", F, CONFORMANCE_FIXTURES) {
  F f;
  make_source(f);
  const treesync::report r = mirror(f);
  CHECK_MESSAGE(r.ok(), std::string(F::name));
  CHECK(r.created == 12);  // the root and 11 entries
  CHECK(mirror_differences(f) == std::vector<std::string>{});
}

TEST_CASE_TEMPLATE("conformance: a warm sync over an unchanged tree changes nothing", F,
                   CONFORMANCE_FIXTURES) {
  F f;
  make_source(f);
  REQUIRE(mirror(f).ok());
  const treesync::report r = mirror(f);
  CHECK(r.ok());
  CHECK(r.unchanged());
}

TEST_CASE_TEMPLATE("conformance: edits, deletions and type swaps converge", F, CONFORMANCE_FIXTURES) {
  F f;
  make_source(f);
  REQUIRE(mirror(f).ok());
  f.write("src/a.txt", "alpha, edited");  // longer
  f.erase("src/sub/deeper");              // a whole tree
  f.erase("src/will_be_dir");
  f.write("src/will_be_dir/now", "inside");  // a file becomes a directory
  f.erase("src/will_be_file");
  f.write("src/will_be_file", "now a file");  // a directory becomes a file
  f.erase("src/link");
  f.write("src/link", "a link becomes a file");
  f.erase("src/dangling");
  f.symlink("src/dangling", "sub/b.txt");  // retargeted
  f.write("src/new/file", "brand new");
  const treesync::report r = mirror(f);
  CHECK(r.ok());
  CHECK(mirror_differences(f) == std::vector<std::string>{});
  CHECK(mirror(f).unchanged());
}

TEST_CASE_TEMPLATE("conformance: a parallel sync (jobs{4}) builds the same mirror", F, CONFORMANCE_FIXTURES) {
  F f;
  for (int d = 0; d < 6; ++d)
    for (int i = 0; i < 20; ++i)
      f.write("src/d" + std::to_string(d) + "/f" + std::to_string(i), std::string(std::size_t(i) * 10, 'a'));
  make_source(f);
  const treesync::report r = mirror(f, 4);
  CHECK(r.ok());
  CHECK(mirror_differences(f) == std::vector<std::string>{});
  CHECK(mirror(f, 4).unchanged());
}

TEST_SUITE_END();
