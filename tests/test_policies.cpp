// Each built-in policy's observable effect over mock_fs, user-defined policies of each category, and
// the compile-time category detection ([treesync.traits]).
//
// The mock's clock is advanced between building a tree and syncing it: a destination written within
// the racy window of its source's mtime is "racily clean" and settled by content (README, Guarantees 13),
// which would hide what a comparison policy decides on its own.
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include "support/report_checks.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using treesync::action_kind;
using treesync::file_type;
using treesync::mock_fs;

constexpr std::int64_t one_second = 1000000000;

// Moves the clock well past the racy window of everything written so far.
void settle(mock_fs& fs) { fs.advance(std::chrono::seconds(10)); }

std::int64_t mtime_of(const mock_fs& fs, const std::string& path) { return fs.lstat(path).mtime_ns; }
std::uint64_t ino_of(const mock_fs& fs, const std::string& path) { return fs.lstat(path).ino; }

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Rewrites a source file with new content of the same size and puts its mtime back: only the bytes
// differ.
void same_size_same_mtime(mock_fs& fs, const std::string& path, std::string_view content) {
  const std::int64_t m = mtime_of(fs, path);
  REQUIRE(fs.read(path).size() == content.size());
  fs.write(path, content);
  fs.set_mtime(path, m);
}

// One observed action, owning its path.
struct seen {
  action_kind kind;
  file_type type;
  std::string path;
  std::uint64_t src_size;
  std::uint64_t dst_size;
  std::error_code code;
};

// An observer that appends to a log it does not own (observers are taken by reference, but a
// pointer member keeps the struct copyable and the log inspectable).
struct recorder {
  std::vector<seen>* log;
  void operator()(const treesync::action& a) const {
    log->push_back({a.kind, a.type, std::string(a.path), a.src_size, a.dst_size, a.code});
  }
};

std::string render(const std::vector<seen>& log) {
  std::string out;
  for (const seen& s : log) {
    out += treesync::to_string(s.kind);
    out += ' ';
    out += treesync::to_string(s.type);
    out += " '" + s.path + "' " + std::to_string(s.src_size) + "/" + std::to_string(s.dst_size);
    if (s.code) out += " (" + s.code.message() + ")";
    out += '\n';
  }
  return out;
}

const seen* find_action(const std::vector<seen>& log, std::string_view path) {
  for (const seen& s : log)
    if (s.path == path) return &s;
  return nullptr;
}

std::size_t count_kind(const std::vector<seen>& log, action_kind k) {
  std::size_t n = 0;
  for (const seen& s : log) n += s.kind == k ? 1 : 0;
  return n;
}

void check_same_counts(const treesync::report& a, const treesync::report& b) {
  CHECK(treesync_test::count_diff(a, b) == "");
}

// Renders a tree (types, modes, mtimes, content; not inode numbers) for whole-tree comparisons.
std::string render(const std::map<std::string, mock_fs::node>& tree) {
  std::string out;
  for (const auto& [path, n] : tree) {
    out += path + " " + treesync::to_string(n.type) + " " + std::to_string(n.mode) + " " +
           std::to_string(n.mtime_ns) + " [" + n.data + "]\n";
  }
  return out;
}

// A mirrored pair /src -> /dst with a settled clock: a.txt "alpha", b.txt "bravo", d/c.txt "charlie".
void mirrored(mock_fs& fs) {
  fs.write("/src/a.txt", "alpha");
  fs.write("/src/b.txt", "bravo");
  fs.write("/src/d/c.txt", "charlie");
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst");
  REQUIRE(r.ok());
  REQUIRE(fs.read("/dst/a.txt") == "alpha");
  settle(fs);
  fs.reset_counters();
}

}  // namespace

// ---- compare -----------------------------------------------------------------------------------

TEST_CASE("compare::size_mtime (default): equal size and mtime are trusted, the bytes are not read") {
  for (int explicit_policy = 0; explicit_policy < 2; ++explicit_policy) {
    CAPTURE(explicit_policy);
    mock_fs fs;
    mirrored(fs);
    same_size_same_mtime(fs, "/src/a.txt", "ALPHA");
    settle(fs);
    fs.reset_counters();
    const treesync::report r = explicit_policy ? treesync::sync(fs, "/src", "/dst", treesync::compare::size_mtime{})
                                               : treesync::sync(fs, "/src", "/dst");
    CHECK(fs.read("/dst/a.txt") == "alpha");
    CHECK(r.updated == 0u);
    CHECK(fs.ops()[mock_fs::op::open_read] == 0u);
    CHECK(fs.ops().writes() == 0u);
  }
}

TEST_CASE("compare::size_mtime (default): a different mtime, even by 1 ns, rewrites the file") {
  for (int explicit_policy = 0; explicit_policy < 2; ++explicit_policy) {
    CAPTURE(explicit_policy);
    mock_fs fs;
    mirrored(fs);
    const std::int64_t m = mtime_of(fs, "/src/a.txt");
    fs.write("/src/a.txt", "ALPHA");
    fs.set_mtime("/src/a.txt", m + 1);
    settle(fs);
    const treesync::report r = explicit_policy ? treesync::sync(fs, "/src", "/dst", treesync::compare::size_mtime{})
                                               : treesync::sync(fs, "/src", "/dst");
    CHECK(fs.read("/dst/a.txt") == "ALPHA");
    CHECK(mtime_of(fs, "/dst/a.txt") == m + 1);
    CHECK(r.updated == 1u);
  }
}

TEST_CASE("compare::size_mtime (default): a different size rewrites the file") {
  mock_fs fs;
  mirrored(fs);
  const std::int64_t m = mtime_of(fs, "/src/a.txt");
  fs.write("/src/a.txt", "alpha, longer");
  fs.set_mtime("/src/a.txt", m);
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst");
  CHECK(fs.read("/dst/a.txt") == "alpha, longer");
  CHECK(r.updated == 1u);
}

TEST_CASE("compare::size_mtime: a racily clean pair (destination written in the source's tick) is settled by content") {
  mock_fs fs;
  fs.write("/src/a.txt", "alpha");
  REQUIRE(treesync::sync(fs, "/src", "/dst").ok());  // same clock tick: the copy is racily clean
  fs.write("/src/a.txt", "ALPHA");                    // rewritten in the same tick: same size, same mtime
  REQUIRE(mtime_of(fs, "/src/a.txt") == mtime_of(fs, "/dst/a.txt"));
  const treesync::report r = treesync::sync(fs, "/src", "/dst");
  CHECK(fs.read("/dst/a.txt") == "ALPHA");
  CHECK(r.updated == 1u);
}

TEST_CASE("compare::size_mtime{window}: mtimes closer than the window are equal, farther ones are not") {
  const treesync::compare::size_mtime two_seconds{std::chrono::seconds(2)};
  struct offset_row {
    std::int64_t offset_ns;
    bool copied;
  };
  const offset_row rows[] = {
      {one_second, false},      {-one_second, false},      {2 * one_second - 1, false},
      {2 * one_second + 1, true}, {3 * one_second, true}, {-3 * one_second, true},
  };
  for (const offset_row& row : rows) {
    const std::int64_t offset_ns = row.offset_ns;
    const bool copied = row.copied;
    CAPTURE(offset_ns);
    CAPTURE(copied);
    mock_fs fs;
    mirrored(fs);
    const std::int64_t m = mtime_of(fs, "/src/a.txt");
    fs.write("/src/a.txt", "ALPHA");
    fs.set_mtime("/src/a.txt", m + offset_ns);
    settle(fs);
    const treesync::report r = treesync::sync(fs, "/src", "/dst", two_seconds);
    CHECK(fs.read("/dst/a.txt") == (copied ? "ALPHA" : "alpha"));
    CHECK(r.updated == (copied ? 1u : 0u));
  }
}

TEST_CASE("compare::size_only: equal sizes are up to date whatever the mtime and content") {
  mock_fs fs;
  mirrored(fs);
  fs.write("/src/a.txt", "ALPHA");  // same size, new content, new mtime
  fs.write("/src/b.txt", "bravo!");  // new size
  settle(fs);
  REQUIRE(mtime_of(fs, "/src/a.txt") != mtime_of(fs, "/dst/a.txt"));
  fs.reset_counters();
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::compare::size_only);
  CHECK(fs.read("/dst/a.txt") == "alpha");
  CHECK(fs.read("/dst/b.txt") == "bravo!");
  CHECK(r.updated == 1u);
  CHECK(fs.ops()[mock_fs::op::open_write] == 1u);  // b.txt only
  // size_only declares `restamp`: the kept file takes the source's mtime
  CHECK(mtime_of(fs, "/dst/a.txt") == mtime_of(fs, "/src/a.txt"));
}

TEST_CASE("compare::newer: a destination newer than the source is kept") {
  mock_fs fs;
  mirrored(fs);
  fs.write("/dst/a.txt", "edited in the mirror");  // newer than the source, other size
  fs.write("/src/b.txt", "BRAVO");                 // source newer: copied
  settle(fs);
  REQUIRE(mtime_of(fs, "/dst/a.txt") > mtime_of(fs, "/src/a.txt"));
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::compare::newer);
  CHECK(fs.read("/dst/a.txt") == "edited in the mirror");
  CHECK(mtime_of(fs, "/dst/a.txt") > mtime_of(fs, "/src/a.txt"));  // no re-stamp either
  CHECK(fs.read("/dst/b.txt") == "BRAVO");
  CHECK(r.updated == 1u);

  // the default comparison puts the source's version back
  settle(fs);
  (void)treesync::sync(fs, "/src", "/dst");
  CHECK(fs.read("/dst/a.txt") == "alpha");
}

TEST_CASE("compare::newer: a destination file newer than the source is left entirely alone (issue 24)") {
  // rsync -u keeps a newer receiver file as it is: not its data only, its mode, owner and times
  // too (before, the engine still chmodded it: `.f...p..... a.txt`)
  mock_fs fs;
  mirrored(fs);
  fs.write("/dst/a.txt", "edited in the mirror");  // newer, another size
  fs.chmod("/dst/a.txt", 0600);
  fs.write("/dst/b.txt", "BRAVO");  // newer, the same size
  fs.chmod("/dst/b.txt", 0640);
  fs.chown("/dst/b.txt", 4242, 4343);
  settle(fs);
  const treesync::stat_info a_before = fs.lstat("/dst/a.txt"), b_before = fs.lstat("/dst/b.txt");
  REQUIRE(a_before.mtime_ns > mtime_of(fs, "/src/a.txt"));
  fs.reset_counters();
  std::vector<std::string> acted;
  const treesync::report r =
      treesync::sync(fs, "/src", "/dst", treesync::compare::newer, treesync::preserve_owner, treesync::preserve_group,
                     [&acted](const treesync::action& a) { acted.emplace_back(a.path); });
  CHECK(r.ok());
  CHECK(acted.empty());
  CHECK(r.meta_updated == 0u);
  CHECK(r.updated == 0u);
  CHECK(fs.ops()[mock_fs::op::chmod] == 0u);
  CHECK(fs.ops()[mock_fs::op::chown] == 0u);
  CHECK(fs.ops()[mock_fs::op::open_write] == 0u);
  const treesync::stat_info a_after = fs.lstat("/dst/a.txt"), b_after = fs.lstat("/dst/b.txt");
  CHECK(fs.read("/dst/a.txt") == "edited in the mirror");
  CHECK(fs.read("/dst/b.txt") == "BRAVO");
  CHECK(a_after.mode == a_before.mode);
  CHECK(b_after.mode == b_before.mode);
  CHECK(b_after.uid == 4242u);
  CHECK(b_after.gid == 4343u);
  CHECK(a_after.mtime_ns == a_before.mtime_ns);
  CHECK(b_after.mtime_ns == b_before.mtime_ns);
  CHECK(a_after.ino == a_before.ino);
  CHECK(b_after.ino == b_before.ino);

  // an older destination file whose mode differs is still fixed (newer is no blanket skip)
  fs.chmod("/dst/d/c.txt", 0600);
  settle(fs);
  const treesync::report r2 = treesync::sync(fs, "/src", "/dst", treesync::compare::newer);
  CHECK(r2.meta_updated == 1u);
  CHECK((fs.lstat("/dst/d/c.txt").mode & 07777) == (fs.lstat("/src/d/c.txt").mode & 07777));
}

TEST_CASE("compare::checksum: equal size and mtime but different bytes are copied") {
  mock_fs fs;
  mirrored(fs);
  same_size_same_mtime(fs, "/src/a.txt", "ALPHA");
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::compare::checksum);
  CHECK(fs.read("/dst/a.txt") == "ALPHA");
  CHECK(r.updated == 1u);
}

TEST_CASE("compare::checksum: equal bytes with a different mtime are not rewritten, only re-stamped") {
  // [treesync.policy.compare]: checksum declares `restamp`, so a current file whose mtime differs
  // gets the source's mtime (rsync -c -t) - whichever way the mtime moved, and without a data write.
  static_assert(treesync::detail::compare_restamps<treesync::compare::checksum_t>::value);
  const std::int64_t offsets[] = {5 * one_second, -5 * one_second, 30 * one_second};
  for (const std::int64_t offset_ns : offsets) {
    CAPTURE(offset_ns);
    mock_fs fs;
    mirrored(fs);
    const std::uint64_t old_ino = ino_of(fs, "/dst/a.txt");
    fs.set_mtime("/src/a.txt", mtime_of(fs, "/src/a.txt") + offset_ns);  // same bytes, other mtime
    settle(fs);
    fs.reset_counters();
    const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::compare::checksum);
    CHECK(r.ok());
    CHECK(r.updated == 0u);
    CHECK(r.bytes_copied == 0u);
    CHECK(fs.ops()[mock_fs::op::open_write] == 0u);
    CHECK(fs.ops()[mock_fs::op::rename] == 0u);
    CHECK(ino_of(fs, "/dst/a.txt") == old_ino);
    CHECK(fs.read("/dst/a.txt") == "alpha");
    CHECK(fs.ops()[mock_fs::op::open_read] >= 2u);  // the bytes were read to decide
    CHECK(mtime_of(fs, "/dst/a.txt") == mtime_of(fs, "/src/a.txt"));
    CHECK(r.meta_updated >= 1u);
  }
}

TEST_CASE("compare::checksum: permission bits are synced even when the bytes are equal") {
  mock_fs fs;
  mirrored(fs);
  fs.chmod("/src/a.txt", 0600);
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::compare::checksum);
  CHECK(fs.lstat("/dst/a.txt").mode == 0600u);
  CHECK(r.meta_updated == 1u);
  CHECK(r.updated == 0u);
}

TEST_CASE("compare::always: every file is rewritten, even on an unchanged tree") {
  mock_fs fs;
  mirrored(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::compare::always);
  CHECK(r.updated == 3u);
  CHECK(r.bytes_copied == std::uint64_t{5 + 5 + 7});
  CHECK(fs.ops()[mock_fs::op::open_write] == 3u);
  CHECK(render(fs.tree("/dst")) == render(fs.tree("/src")));
}

TEST_CASE("compare::always: a rewritten unchanged file is an update with no change, and DST is not read") {
  // what the CLI's -I prints as rsync's >f......... (no size, time or mode letter, no 'c')
  mock_fs fs;
  mirrored(fs);
  fs.chmod("/dst/b.txt", 0600);
  settle(fs);
  fs.reset_counters();
  std::map<std::string, treesync::changed> changes;  // of each update
  std::size_t others = 0;
  const auto observe = [&](const treesync::action& a) {
    if (a.kind == action_kind::update) changes[std::string(a.path)] = a.changes;
    else ++others;
  };
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::compare::always, observe);
  CHECK(r.updated == 3u);
  CHECK(r.meta_updated == 0u);
  CHECK(others == 0u);
  CHECK(fs.ops()[mock_fs::op::open_read] == 3u);  // the three sources, for the copy; no DST file
  REQUIRE(changes.size() == 3u);
  CHECK(changes.at("a.txt") == treesync::changed::none);
  CHECK(changes.at("d/c.txt") == treesync::changed::none);
  CHECK(changes.at("b.txt") == treesync::changed::mode);  // rewritten with SRC's mode
  CHECK(fs.lstat("/dst/b.txt").mode == 0644u);
}

// ---- deletion ----------------------------------------------------------------------------------

namespace {
// A mirrored pair plus destination-only entries: x.txt, x.o (excluded by "*.o" in the tests that
// use it) and the tree old/{1,2}.
void with_extraneous(mock_fs& fs) {
  mirrored(fs);
  fs.write("/dst/x.txt", "extra");
  fs.write("/dst/x.o", "object");
  fs.write("/dst/old/1", "1");
  fs.write("/dst/old/2", "2");
  settle(fs);
  fs.reset_counters();
}
}  // namespace

TEST_CASE("deletion::extraneous (default): what the source lacks is deleted, excluded entries are kept") {
  for (int explicit_policy = 0; explicit_policy < 2; ++explicit_policy) {
    CAPTURE(explicit_policy);
    mock_fs fs;
    with_extraneous(fs);
    const treesync::exclude ex{"*.o"};
    const treesync::report r = explicit_policy ? treesync::sync(fs, "/src", "/dst", ex, treesync::deletion::extraneous)
                                               : treesync::sync(fs, "/src", "/dst", ex);
    CHECK_FALSE(fs.exists("/dst/x.txt"));
    CHECK_FALSE(fs.exists("/dst/old"));
    CHECK(fs.exists("/dst/x.o"));
    CHECK(r.deleted == 4u);  // x.txt, old, old/1, old/2
    CHECK(r.excluded == 1u);
    CHECK(fs.exists("/dst/a.txt"));
  }
}

TEST_CASE("deletion::keep: nothing is deleted, new files are still copied") {
  mock_fs fs;
  with_extraneous(fs);
  fs.write("/src/new.txt", "new");
  settle(fs);
  const auto before = fs.tree("/dst");
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::deletion::keep);
  CHECK(r.deleted == 0u);
  CHECK(fs.ops()[mock_fs::op::unlink] == 0u);
  CHECK(fs.ops()[mock_fs::op::rmdir] == 0u);
  for (const auto& entry : before) {
    const std::string& path = entry.first;
    CAPTURE(path);
    CHECK(fs.exists("/dst/" + path));
  }
  CHECK(fs.read("/dst/new.txt") == "new");
}

TEST_CASE("deletion::delete_excluded: excluded destination-only entries are deleted too") {
  mock_fs fs;
  with_extraneous(fs);
  const treesync::report r =
      treesync::sync(fs, "/src", "/dst", treesync::exclude{"*.o"}, treesync::deletion::delete_excluded);
  CHECK_FALSE(fs.exists("/dst/x.o"));
  CHECK_FALSE(fs.exists("/dst/x.txt"));
  CHECK_FALSE(fs.exists("/dst/old"));
  CHECK(r.deleted == 5u);
  CHECK(fs.exists("/dst/a.txt"));
}

// rsync --delete-excluded: "also delete excluded files from dest dirs" - the usual way to purge a
// newly excluded pattern from a mirror, where the source still has those files.
TEST_CASE("deletion::delete_excluded: an excluded entry is deleted from the destination even when the source has it") {
  mock_fs fs;
  mirrored(fs);
  fs.write("/src/m.o", "object");  // mirrored first, then excluded with delete_excluded
  settle(fs);
  (void)treesync::sync(fs, "/src", "/dst");
  REQUIRE(fs.exists("/dst/m.o"));
  settle(fs);
  (void)treesync::sync(fs, "/src", "/dst", treesync::exclude{"*.o"});  // deletion::extraneous leaves it
  CHECK(fs.exists("/dst/m.o"));
  const treesync::report r =
      treesync::sync(fs, "/src", "/dst", treesync::exclude{"*.o"}, treesync::deletion::delete_excluded);
  CHECK_FALSE(fs.exists("/dst/m.o"));
  CHECK(r.deleted == 1u);
}

// Regression (was a bug): the links::skip path returns before the destination counterpart is considered, so an
// excluded link that the links policy skips keeps its destination entry under delete_excluded
// (every other excluded entry present on both sides is deleted, as tested just above).
TEST_CASE("deletion::delete_excluded: an excluded link that links::skip skips is deleted from the destination") {
  mock_fs fs;
  fs.write("/src/a", "a");
  fs.symlink("/src/l.o", "a");
  fs.write("/dst/l.o", "copied by an earlier run");
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::exclude{"*.o"}, treesync::links::skip,
                                            treesync::deletion::delete_excluded);
  CHECK_FALSE(fs.exists("/dst/l.o"));
  CHECK(r.deleted == 1u);
}

// "An excluded entry is neither copied nor deleted (unless the deletion policy deletes excluded
// entries)" holds inside a destination-only directory too; the directory then stays (rsync --delete).
TEST_CASE("deletion::extraneous: an excluded entry inside a destination-only directory is not deleted") {
  mock_fs fs;
  mirrored(fs);
  fs.write("/dst/old/gone.txt", "gone");
  fs.write("/dst/old/keep.o", "kept");
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::exclude{"*.o"});
  CHECK_FALSE(fs.exists("/dst/old/gone.txt"));
  CHECK(fs.read("/dst/old/keep.o") == "kept");
  CHECK(r.deleted == 1u);
  CHECK(r.ok());

  // delete_excluded takes it, and the directory with it
  settle(fs);
  (void)treesync::sync(fs, "/src", "/dst", treesync::exclude{"*.o"}, treesync::deletion::delete_excluded);
  CHECK_FALSE(fs.exists("/dst/old"));
}

TEST_CASE("deletion::max_delete{n}: a plan of exactly n deletions runs") {
  mock_fs fs;
  with_extraneous(fs);  // the plan deletes x.txt, x.o, old, old/1, old/2
  std::error_code ec;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::max_delete{5}, ec);
  CHECK_FALSE(ec);
  CHECK(r.deleted == 5u);
  CHECK_FALSE(fs.exists("/dst/x.txt"));
  CHECK_FALSE(fs.exists("/dst/old"));
}

TEST_CASE("deletion::max_delete{n}: a run of n+1 deletions makes none of them, and its other changes") {
  mock_fs fs;
  with_extraneous(fs);
  fs.write("/src/new.txt", "new");  // created all the same
  settle(fs);
  fs.reset_counters();

  std::error_code ec;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::max_delete{4}, ec);
  CHECK(ec == treesync::errc::max_delete_exceeded);
  CHECK(r.deleted == 0u);
  CHECK(r.would_delete == 5u);
  CHECK(r.created == 1u);
  CHECK(fs.read("/dst/new.txt") == "new");
  CHECK(fs.ops()[mock_fs::op::unlink] == 0u);
  CHECK(fs.ops()[mock_fs::op::rmdir] == 0u);
  const auto before = fs.tree("/dst");
  fs.reset_counters();

  // the throwing overload throws the same code
  std::error_code thrown;
  try {
    (void)treesync::sync(fs, "/src", "/dst", treesync::max_delete{4});
  } catch (const std::filesystem::filesystem_error& e) {
    thrown = e.code();
  }
  CHECK(thrown == treesync::errc::max_delete_exceeded);
  CHECK(fs.ops().writes() == 0u);
  CHECK(render(fs.tree("/dst")) == render(before));
}

TEST_CASE("deletion::max_delete{n}: excluded entries are not in the plan of the default base policy") {
  mock_fs fs;
  with_extraneous(fs);  // x.o is excluded: the plan is x.txt, old, old/1, old/2
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/dst", treesync::exclude{"*.o"}, treesync::max_delete{3}, ec);
  CHECK(ec == treesync::errc::max_delete_exceeded);
  CHECK(fs.exists("/dst/x.txt"));
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::exclude{"*.o"}, treesync::max_delete{4}, ec);
  CHECK_FALSE(ec);
  CHECK(r.deleted == 4u);
  CHECK(fs.exists("/dst/x.o"));
}

TEST_CASE("deletion::max_delete{n, delete_excluded}: excluded entries are deleted and counted against the limit") {
  static_assert(std::is_same_v<decltype(treesync::max_delete{1, treesync::deletion::delete_excluded}),
                               treesync::deletion::max_delete<treesync::deletion::delete_excluded_t>>);
  const treesync::exclude ex{"*.o"};
  {
    mock_fs fs;
    with_extraneous(fs);  // the plan: x.txt, x.o, old, old/1, old/2
    std::error_code ec;
    (void)treesync::sync(fs, "/src", "/dst", ex, treesync::max_delete{4, treesync::deletion::delete_excluded}, ec);
    CHECK(ec == treesync::errc::max_delete_exceeded);
    CHECK(fs.exists("/dst/x.o"));
    CHECK(fs.exists("/dst/x.txt"));
  }
  {
    mock_fs fs;
    with_extraneous(fs);
    std::error_code ec;
    const treesync::report r =
        treesync::sync(fs, "/src", "/dst", ex, treesync::max_delete{5, treesync::deletion::delete_excluded}, ec);
    CHECK_FALSE(ec);
    CHECK(r.deleted == 5u);
    CHECK_FALSE(fs.exists("/dst/x.o"));
  }
}

// ---- allow_empty_source ------------------------------------------------------------------------

TEST_CASE("allow_empty_source: an empty source empties the destination only when allowed") {
  mock_fs fs;
  fs.mkdir("/src");
  fs.write("/dst/a", "a");
  settle(fs);
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/dst", ec);
  CHECK(ec == treesync::errc::empty_source);
  CHECK(fs.exists("/dst/a"));

  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::allow_empty_source, ec);
  CHECK_FALSE(ec);
  CHECK_FALSE(fs.exists("/dst/a"));
  CHECK(r.deleted == 1u);
}

// ---- links -------------------------------------------------------------------------------------

namespace {
// /src/a.txt, /src/d/c.txt, and links: to_file -> a.txt, to_dir -> d, d/up -> ../a.txt (inside),
// out -> ../outside.txt and abs -> /outside.txt (outside the source).
void with_links(mock_fs& fs) {
  fs.write("/outside.txt", "outside");
  fs.write("/src/a.txt", "alpha");
  fs.write("/src/d/c.txt", "charlie");
  fs.symlink("/src/to_file", "a.txt");
  fs.symlink("/src/to_dir", "d");
  fs.symlink("/src/d/up", "../a.txt");
  fs.symlink("/src/out", "../outside.txt");
  fs.symlink("/src/abs", "/outside.txt");
  settle(fs);
}

// What a link at `path` in the destination tree `t` became: its type and its data (a link's target).
struct link_row {
  const char* path;
  file_type type;
  const char* data;
};
template <class Tree>
void check_landed(const Tree& t, std::initializer_list<link_row> rows) {
  for (const link_row& row : rows) {
    const std::string path = row.path;
    CAPTURE(path);
    REQUIRE(t.count(path) == 1u);
    CHECK(t.at(path).type == row.type);
    CHECK(t.at(path).data == row.data);
  }
}

// Each link of `paths` is absent from `t` and reported as a skipped symlink in `log`.
template <class Tree>
void check_skipped(const Tree& t, const std::vector<seen>& log, std::initializer_list<const char*> paths) {
  for (const char* p : paths) {
    CAPTURE(p);
    CHECK(t.count(p) == 0u);
    const seen* s = find_action(log, p);
    REQUIRE(s != nullptr);
    CHECK(s->kind == action_kind::skip);
    CHECK(s->type == file_type::symlink);
  }
}
}  // namespace

TEST_CASE("links::dereference (default): a link is replaced by what it points to") {
  for (int explicit_policy = 0; explicit_policy < 2; ++explicit_policy) {
    CAPTURE(explicit_policy);
    mock_fs fs;
    with_links(fs);
    const treesync::report r = explicit_policy ? treesync::sync(fs, "/src", "/dst", treesync::links::dereference)
                                               : treesync::sync(fs, "/src", "/dst");
    CHECK(r.ok());
    const auto t = fs.tree("/dst");
    for (const char* p : {"to_file", "d/up", "out", "abs"}) {
      CAPTURE(p);
      REQUIRE(t.count(p) == 1u);
      CHECK(t.at(p).type == file_type::regular);
    }
    CHECK(t.at("to_file").data == "alpha");
    CHECK(t.at("d/up").data == "alpha");
    CHECK(t.at("out").data == "outside");
    CHECK(t.at("abs").data == "outside");
    REQUIRE(t.count("to_dir") == 1u);
    CHECK(t.at("to_dir").type == file_type::directory);
    CHECK(t.at("to_dir/c.txt").data == "charlie");
  }
}

TEST_CASE("links::preserve: a link is recreated as a link with the same target") {
  mock_fs fs;
  with_links(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::links::preserve);
  CHECK(r.ok());
  const auto t = fs.tree("/dst");
  const std::pair<const char*, const char*> expected[] = {
      {"to_file", "a.txt"}, {"to_dir", "d"}, {"d/up", "../a.txt"}, {"out", "../outside.txt"}, {"abs", "/outside.txt"}};
  for (const auto& link : expected) {
    const std::string path = link.first;
    const std::string target = link.second;
    CAPTURE(path);
    REQUIRE(t.count(path) == 1u);
    CHECK(t.at(path).type == file_type::symlink);
    CHECK(t.at(path).data == target);
  }
  CHECK(t.count("to_dir/c.txt") == 0u);  // not walked through
}

TEST_CASE("links::preserve: an unchanged link is not rewritten by the next run") {
  mock_fs fs;
  with_links(fs);
  REQUIRE(treesync::sync(fs, "/src", "/dst", treesync::links::preserve).ok());
  settle(fs);
  fs.reset_counters();
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::links::preserve);
  CHECK(r.unchanged());
  CHECK(fs.ops().writes() == 0u);

  // a changed target is
  fs.symlink("/src/to_file", "d/c.txt");
  settle(fs);
  const treesync::report changed = treesync::sync(fs, "/src", "/dst", treesync::links::preserve);
  CHECK(changed.updated == 1u);
  CHECK(fs.tree("/dst").at("to_file").data == "d/c.txt");
}

TEST_CASE("compare::always: directories and symlinks are left alone, only regular files are rewritten") {
  mock_fs fs;
  with_links(fs);
  REQUIRE(treesync::sync(fs, "/src", "/dst", treesync::links::preserve).ok());
  settle(fs);
  fs.reset_counters();
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::compare::always, treesync::links::preserve);
  CHECK(r.ok());
  CHECK(r.updated == 2u);  // a.txt, d/c.txt
  CHECK(r.created == 0u);
  CHECK(r.meta_updated == 0u);
  CHECK(fs.ops()[mock_fs::op::open_write] == 2u);
  CHECK(fs.ops()[mock_fs::op::symlink] == 0u);
  CHECK(fs.ops()[mock_fs::op::mkdir] == 0u);
  CHECK(render(fs.tree("/dst")) == render(fs.tree("/src")));
}

TEST_CASE("links::skip: a link is neither followed nor copied, and is reported as skipped") {
  mock_fs fs;
  with_links(fs);
  std::vector<seen> log;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::links::skip, recorder{&log});
  CHECK(r.ok());
  CHECK(r.skipped == 5u);
  const auto t = fs.tree("/dst");
  check_skipped(t, log, {"to_file", "to_dir", "d/up", "out", "abs"});
  CHECK(t.at("a.txt").data == "alpha");
}

TEST_CASE("links::dereference_unsafe: a link inside the source stays a link, one going outside is dereferenced") {
  mock_fs fs;
  with_links(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::links::dereference_unsafe);
  CHECK(r.ok());
  check_landed(fs.tree("/dst"), {{"to_file", file_type::symlink, "a.txt"},
                                 {"to_dir", file_type::symlink, "d"},
                                 {"d/up", file_type::symlink, "../a.txt"},
                                 {"out", file_type::regular, "outside"},
                                 {"abs", file_type::regular, "outside"}});
}

TEST_CASE("links::preserve_safe: a link inside the source stays a link, one going outside is skipped and reported") {
  mock_fs fs;
  with_links(fs);
  std::vector<seen> log;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::links::preserve_safe, recorder{&log});
  CHECK(r.ok());
  CHECK(r.skipped == 2u);
  const auto t = fs.tree("/dst");
  check_landed(t, {{"to_file", file_type::symlink, "a.txt"},
                   {"to_dir", file_type::symlink, "d"},
                   {"d/up", file_type::symlink, "../a.txt"}});
  check_skipped(t, log, {"out", "abs"});
  REQUIRE(r.skipped_entries.size() == 2u);
  for (const treesync::entry_error& e : r.skipped_entries) CHECK(e.code == treesync::errc::skipped_symlink);
}

TEST_CASE("links::preserve_safe: what the destination holds where an unsafe link is skipped is kept, also when deleting") {
  mock_fs fs;
  with_links(fs);
  fs.write("/dst/out", "old file");
  fs.symlink("/dst/abs", "/elsewhere");
  fs.write("/dst/extra", "x");
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::links::preserve_safe);  // deletes extraneous
  CHECK(r.ok());
  const auto t = fs.tree("/dst");
  CHECK(t.count("extra") == 0u);
  REQUIRE(t.count("out") == 1u);
  CHECK(t.at("out").type == file_type::regular);
  CHECK(t.at("out").data == "old file");
  REQUIRE(t.count("abs") == 1u);
  CHECK(t.at("abs").type == file_type::symlink);
  CHECK(t.at("abs").data == "/elsewhere");
}

TEST_CASE("links::preserve_safe: a '..' after a name is unsafe, as in rsync 3.5 (the name may be a link up)") {
  mock_fs fs;
  fs.write("/src/d/f", "f");
  fs.symlink("/src/d/a", "..");           // safe: the root
  fs.symlink("/src/d/l", "a/../../x");    // lexically inside, but through d/a it names /x
  fs.symlink("/src/d/m", "..//d/f");      // '..' before any name: counted, safe
  fs.symlink("/src/d/n", "../d/..");      // ends in '/..': unsafe
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::links::preserve_safe);
  CHECK(r.ok());
  const auto t = fs.tree("/dst");
  CHECK(t.count("d/a") == 1u);
  CHECK(t.count("d/m") == 1u);
  CHECK(t.count("d/l") == 0u);
  CHECK(t.count("d/n") == 0u);
  CHECK(r.skipped == 2u);
}

TEST_CASE("links::chosen{kind::preserve_safe} is links::preserve_safe, by state_key and by action") {
  const treesync::links::chosen c{treesync::links::kind::preserve_safe};
  CHECK(std::string_view(c.state_key()) == "preserve_safe");
  CHECK(std::string_view(c.state_key()) == treesync::links::preserve_safe.state_key());
  for (const bool inside : {true, false}) {
    CAPTURE(inside);
    CHECK(c.on_symlink("d/l", "x", inside) == treesync::links::preserve_safe.on_symlink("d/l", "x", inside));
  }
  CHECK(c.on_symlink("l", "x", true) == treesync::link_action::preserve);
  CHECK(c.on_symlink("l", "../x", false) == treesync::link_action::skip);
}

// ---- exclude -----------------------------------------------------------------------------------

namespace {
// a.txt, m.o, b.h, keep.log, build/{x.txt}, lib/{c.h, n.o, build (a file), tmp.log}, tmp/{t.log, t.txt}
void with_mixed_tree(mock_fs& fs) {
  fs.write("/src/a.txt", "a");
  fs.write("/src/m.o", "m");
  fs.write("/src/b.h", "b");
  fs.write("/src/keep.log", "k");
  fs.write("/src/build/x.txt", "x");
  fs.write("/src/lib/c.h", "c");
  fs.write("/src/lib/n.o", "n");
  fs.write("/src/lib/build", "a file called build");
  fs.write("/src/lib/tmp.log", "l");
  fs.write("/src/tmp/t.log", "t");
  fs.write("/src/tmp/t.txt", "t");
  settle(fs);
}

std::vector<std::string> files_in(const mock_fs& fs, const std::string& root) {
  std::vector<std::string> out;
  for (const auto& [path, n] : fs.tree(root))
    if (n.type != file_type::directory) out.push_back(path);
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}
}  // namespace

TEST_CASE("exclude{globs}: matching entries are not copied and excluded directories are not entered") {
  mock_fs fs;
  with_mixed_tree(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::exclude{"*.o", "build/"});
  CHECK(joined(files_in(fs, "/dst")) ==
        joined({"a.txt", "b.h", "keep.log", "lib/build", "lib/c.h", "lib/tmp.log", "tmp/t.log", "tmp/t.txt"}));
  CHECK_FALSE(fs.exists("/dst/build"));
  CHECK(r.excluded == 3u);  // m.o, lib/n.o, build
  CHECK(r.scanned == 13u);  // 7 at the root, 4 in lib, 2 in tmp: build/ is never listed
}

TEST_CASE("exclude: a predicate lambda (rel, type) decides") {
  mock_fs fs;
  with_mixed_tree(fs);
  std::vector<std::string> asked;
  const auto pred = [&asked](std::string_view rel, file_type t) {
    asked.push_back(std::string(rel) + (t == file_type::directory ? "/" : ""));
    return ends_with(rel, ".log") || rel == "lib";
  };
  static_assert(treesync::is_exclude_policy_v<decltype(pred)>);
  static_assert(!treesync::is_observer_policy_v<decltype(pred)>);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", pred);
  CHECK(joined(files_in(fs, "/dst")) == joined({"a.txt", "b.h", "build/x.txt", "m.o", "tmp/t.txt"}));
  CHECK(r.excluded == 3u);  // keep.log, lib, tmp/t.log
  // the predicate sees relative paths with '/' and the entry's type
  CHECK(std::find(asked.begin(), asked.end(), "lib/") != asked.end());
  CHECK(std::find(asked.begin(), asked.end(), "tmp/t.log") != asked.end());
  CHECK(std::find(asked.begin(), asked.end(), "lib/c.h") == asked.end());  // lib was not entered
}

TEST_CASE("exclude: any_of excludes what any of its predicates excludes") {
  mock_fs fs;
  with_mixed_tree(fs);
  const auto in_tmp = [](std::string_view rel, file_type) { return rel == "tmp"; };
  (void)treesync::sync(fs, "/src", "/dst", treesync::any_of(treesync::exclude{"*.o"}, in_tmp, treesync::exclude{"*.h"}));
  CHECK(joined(files_in(fs, "/dst")) == joined({"a.txt", "build/x.txt", "keep.log", "lib/build", "lib/tmp.log"}));
}

TEST_CASE("exclude: all_of excludes only what all of its predicates exclude") {
  mock_fs fs;
  with_mixed_tree(fs);
  const auto under_tmp_or_lib = [](std::string_view rel, file_type) {
    return rel.substr(0, 4) == "tmp/" || rel.substr(0, 4) == "lib/";
  };
  (void)treesync::sync(fs, "/src", "/dst", treesync::all_of(treesync::exclude{"*.log"}, under_tmp_or_lib));
  // *.log only below tmp/ and lib/: keep.log at the root stays
  CHECK(joined(files_in(fs, "/dst")) ==
        joined({"a.txt", "b.h", "build/x.txt", "keep.log", "lib/build", "lib/c.h", "lib/n.o", "m.o", "tmp/t.txt"}));
}

TEST_CASE("exclude: not_ inverts a predicate (only *.h, directories let through)") {
  mock_fs fs;
  with_mixed_tree(fs);
  const auto is_file = [](std::string_view, file_type t) { return t != file_type::directory; };
  (void)treesync::sync(fs, "/src", "/dst", treesync::all_of(treesync::not_(treesync::exclude{"*.h"}), is_file));
  CHECK(joined(files_in(fs, "/dst")) == joined({"b.h", "lib/c.h"}));

  // not_ alone also excludes the directories, so nothing below the root is copied
  mock_fs fs2;
  with_mixed_tree(fs2);
  (void)treesync::sync(fs2, "/src", "/dst", treesync::not_(treesync::exclude{"*.h"}));
  CHECK(joined(files_in(fs2, "/dst")) == joined({"b.h"}));
}

// Regression (was a bug): exclusion is decided after a link is followed (it needs the target's type for "dir/"
// patterns), so an excluded dangling link is reported as errc::dangling_symlink and the run is not
// ok() - e.g. Emacs lock files ".#name", dangling links by design.  rsync checks the exclude rules
// before reporting a failed stat ("See if file is excluded before reporting an error", flist.c).
TEST_CASE("exclude: an excluded dangling symlink is not an error") {
  mock_fs fs;
  fs.write("/src/main.c", "int main;");
  fs.symlink("/src/.#main.c", "user@host.1234:1700000000");  // an editor's lock file
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::exclude{".#*"});
  CHECK(r.ok());
  CHECK(r.errors.empty());
  CHECK(r.excluded == 1u);
  CHECK_FALSE(fs.exists("/dst/.#main.c"));
  CHECK(fs.read("/dst/main.c") == "int main;");
}

// ---- write -------------------------------------------------------------------------------------

TEST_CASE("write::atomic (default): a rewritten file is a new inode; a hard link to the old one keeps the old bytes") {
  for (int explicit_policy = 0; explicit_policy < 2; ++explicit_policy) {
    CAPTURE(explicit_policy);
    mock_fs fs;
    mirrored(fs);
    fs.hard_link("/dst/a.txt", "/elsewhere.txt");
    const std::uint64_t old_ino = ino_of(fs, "/dst/a.txt");
    fs.write("/src/a.txt", "ALPHA!");
    settle(fs);
    const treesync::report r = explicit_policy ? treesync::sync(fs, "/src", "/dst", treesync::write::atomic)
                                               : treesync::sync(fs, "/src", "/dst");
    CHECK(r.updated == 1u);
    CHECK(fs.read("/dst/a.txt") == "ALPHA!");
    CHECK(fs.tree("/dst").at("a.txt").ino != old_ino);
    CHECK(fs.read("/elsewhere.txt") == "alpha");
    CHECK(fs.ops()[mock_fs::op::rename] == 1u);
  }
}

TEST_CASE("write::in_place: a rewritten file keeps its inode") {
  mock_fs fs;
  mirrored(fs);
  const std::uint64_t old_ino = ino_of(fs, "/dst/a.txt");
  fs.write("/src/a.txt", "ALPHA!");
  fs.write("/src/new.txt", "new");
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::write::in_place);
  CHECK(r.updated == 1u);
  CHECK(r.created == 1u);
  CHECK(fs.read("/dst/a.txt") == "ALPHA!");
  CHECK(fs.tree("/dst").at("a.txt").ino == old_ino);
  CHECK(mtime_of(fs, "/dst/a.txt") == mtime_of(fs, "/src/a.txt"));
  CHECK(fs.read("/dst/new.txt") == "new");
  CHECK(fs.ops()[mock_fs::op::rename] == 0u);
}

TEST_CASE("write::in_place never writes into a file with other hard links: it gets a fresh inode") {
  // the other name may be a hard link planted from outside the destination (issue 12)
  mock_fs fs;
  mirrored(fs);
  fs.hard_link("/dst/a.txt", "/elsewhere.txt");
  const std::string before = fs.read("/elsewhere.txt");
  const std::uint64_t old_ino = ino_of(fs, "/dst/a.txt");
  fs.write("/src/a.txt", "ALPHA!");
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::write::in_place);
  CHECK(r.updated == 1u);
  CHECK(fs.read("/dst/a.txt") == "ALPHA!");
  CHECK(fs.tree("/dst").at("a.txt").ino != old_ino);
  CHECK(fs.read("/elsewhere.txt") == before);
  CHECK(mtime_of(fs, "/dst/a.txt") == mtime_of(fs, "/src/a.txt"));
}

// ---- errors ------------------------------------------------------------------------------------

namespace {
void three_files(mock_fs& fs) {
  fs.write("/src/a", "a");
  fs.write("/src/b", "b");
  fs.write("/src/c", "c");
  settle(fs);
}
}  // namespace

TEST_CASE("errors::collect (default): a failed entry is reported and the rest is synced") {
  for (int explicit_policy = 0; explicit_policy < 2; ++explicit_policy) {
    CAPTURE(explicit_policy);
    mock_fs fs;
    three_files(fs);
    fs.fail(mock_fs::op::open_read, 1, std::errc::io_error);  // the first file read: "a"
    treesync::report r;
    CHECK_NOTHROW(r = explicit_policy ? treesync::sync(fs, "/src", "/dst", treesync::errors::collect)
                                      : treesync::sync(fs, "/src", "/dst"));
    CHECK(fs.faults_triggered() == 1u);
    CHECK_FALSE(r.ok());
    REQUIRE(r.errors.size() == 1u);
    CHECK(r.errors[0].path == "a");
    CHECK(r.errors[0].operation == treesync::operation::copy);
    CHECK(r.errors[0].code == std::errc::io_error);
    CHECK_FALSE(fs.exists("/dst/a"));
    CHECK(fs.read("/dst/b") == "b");
    CHECK(fs.read("/dst/c") == "c");
    CHECK(r.created == 3u);  // the root, b, c
  }
}

TEST_CASE("errors::stop: the first failure ends the run; the throwing overload throws filesystem_error") {
  mock_fs fs;
  three_files(fs);
  fs.fail(mock_fs::op::open_read, 1, std::errc::io_error);
  bool thrown = false;
  try {
    (void)treesync::sync(fs, "/src", "/dst", treesync::errors::stop);
  } catch (const std::filesystem::filesystem_error& e) {
    thrown = true;
    CHECK(e.code() == std::errc::io_error);
    CHECK(e.path1() == std::filesystem::path("/src/a"));
    CHECK(e.path2() == std::filesystem::path("/dst/a"));
  }
  CHECK(thrown);
  CHECK_FALSE(fs.exists("/dst/b"));
  CHECK_FALSE(fs.exists("/dst/c"));
}

TEST_CASE("errors::stop: the error_code overload sets ec and returns the report") {
  mock_fs fs;
  three_files(fs);
  fs.fail(mock_fs::op::open_read, 1, std::errc::io_error);
  std::error_code ec;
  treesync::report r;
  CHECK_NOTHROW(r = treesync::sync(fs, "/src", "/dst", treesync::errors::stop, ec));
  CHECK(ec == std::errc::io_error);
  REQUIRE(r.errors.size() == 1u);
  CHECK(r.errors[0].path == "a");
  CHECK_FALSE(fs.exists("/dst/b"));
  CHECK_FALSE(fs.exists("/dst/c"));
}

// ---- dry_run -----------------------------------------------------------------------------------

namespace {
// A mirrored tree, then every kind of change: new file, new directory, changed file, mode change,
// removed file, removed directory tree, file replaced by a directory, new link, and a racily clean
// copy (same size and mtime, destination written in the source's tick: verified, then re-stamped).
void with_pending_changes(mock_fs& fs) {
  fs.write("/src/a.txt", "alpha");
  fs.write("/src/b.txt", "bravo");
  fs.write("/src/mode.txt", "mode");
  fs.write("/src/gone.txt", "gone");
  fs.write("/src/swap", "a file, later a directory");
  fs.write("/src/old/1", "1");
  fs.write("/src/old/sub/2", "2");
  fs.write("/src/keep/k", "k");
  fs.write("/src/racy.txt", "racy");
  settle(fs);
  REQUIRE(treesync::sync(fs, "/src", "/dst").ok());
  settle(fs);
  fs.write("/src/racy.txt", "racy");
  fs.set_mtime("/dst/racy.txt", mtime_of(fs, "/src/racy.txt"));  // same tick: racily clean
  fs.write("/src/new.txt", "new");
  fs.write("/src/newdir/n", "n");
  fs.write("/src/b.txt", "BRAVO, longer");
  fs.chmod("/src/mode.txt", 0600);
  fs.remove("/src/gone.txt");
  fs.remove("/src/old");
  fs.remove("/src/swap");
  fs.write("/src/swap/inside", "i");
  fs.symlink("/src/link", "a.txt");
  settle(fs);
  fs.reset_counters();
}
}  // namespace

TEST_CASE("dry_run: nothing is written, and the report and observer list what the real run then does") {
  mock_fs fs;
  with_pending_changes(fs);
  const std::string before = render(fs.tree("/dst"));

  std::vector<seen> dry_log;
  const treesync::report dry = treesync::sync(fs, "/src", "/dst", treesync::dry_run, recorder{&dry_log});
  CHECK(fs.ops().writes() == 0u);
  CHECK(fs.ops().bytes_written == 0u);
  CHECK(render(fs.tree("/dst")) == before);
  CHECK(dry.created > 0u);
  CHECK(dry.updated > 0u);
  CHECK(dry.deleted > 0u);
  CHECK(dry.meta_updated > 0u);

  std::vector<seen> real_log;
  const treesync::report real = treesync::sync(fs, "/src", "/dst", recorder{&real_log});
  check_same_counts(dry, real);
  CHECK(render(dry_log) == render(real_log));
  CHECK(render(fs.tree("/dst")) != before);
  // the scenario covers a re-stamp of a racily clean file whose mtime already matched: settled,
  // not an action
  CHECK(find_action(real_log, "racy.txt") == nullptr);
  CHECK(real.settled == 1u);
}

TEST_CASE("dry_run: a missing destination is not created") {
  mock_fs fs;
  fs.write("/src/a", "a");
  fs.write("/src/d/b", "b");
  settle(fs);
  std::vector<seen> dry_log;
  const treesync::report dry = treesync::sync(fs, "/src", "/dst", treesync::dry_run, recorder{&dry_log});
  CHECK_FALSE(fs.exists("/dst"));
  CHECK(fs.ops().writes() == 0u);
  CHECK(dry.created == 4u);  // the root, a, d, d/b
  std::vector<seen> real_log;
  const treesync::report real = treesync::sync(fs, "/src", "/dst", recorder{&real_log});
  check_same_counts(dry, real);
  CHECK(render(dry_log) == render(real_log));
}

// ---- observer ----------------------------------------------------------------------------------

TEST_CASE("observer: each action arrives with its kind, type, path and sizes") {
  mock_fs fs;
  fs.write("/src/same", "same");
  fs.write("/src/grow", "12");
  fs.write("/src/mode", "mode");
  fs.write("/dst/same", "same");
  fs.write("/dst/grow", "1");
  fs.write("/dst/mode", "mode");
  fs.write("/dst/extra/e", "e");
  fs.write("/src/d/new", "new!!");
  settle(fs);  // so that "same" is not racily clean
  fs.set_mtime("/dst/same", mtime_of(fs, "/src/same"));
  fs.set_mtime("/dst/mode", mtime_of(fs, "/src/mode"));
  fs.chmod("/dst/mode", 0600);
  settle(fs);
  std::vector<seen> log;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", recorder{&log});
  CAPTURE(render(log));

  const seen* d = find_action(log, "d");
  REQUIRE(d != nullptr);
  CHECK(d->kind == action_kind::create);
  CHECK(d->type == file_type::directory);

  const seen* created = find_action(log, "d/new");
  REQUIRE(created != nullptr);
  CHECK(created->kind == action_kind::create);
  CHECK(created->type == file_type::regular);
  CHECK(created->src_size == 5u);
  CHECK(created->dst_size == 0u);

  const seen* updated = find_action(log, "grow");
  REQUIRE(updated != nullptr);
  CHECK(updated->kind == action_kind::update);
  CHECK(updated->type == file_type::regular);
  CHECK(updated->src_size == 2u);
  CHECK(updated->dst_size == 1u);

  const seen* meta = find_action(log, "mode");
  REQUIRE(meta != nullptr);
  CHECK(meta->kind == action_kind::update_meta);
  CHECK(meta->type == file_type::regular);

  const seen* removed_file = find_action(log, "extra/e");
  REQUIRE(removed_file != nullptr);
  CHECK(removed_file->kind == action_kind::remove);
  CHECK(removed_file->type == file_type::regular);
  const seen* removed_dir = find_action(log, "extra");
  REQUIRE(removed_dir != nullptr);
  CHECK(removed_dir->kind == action_kind::remove);
  CHECK(removed_dir->type == file_type::directory);

  CHECK(find_action(log, "same") == nullptr);  // up to date: no action

  // one action per counted change
  CHECK(count_kind(log, action_kind::create) == r.created);
  CHECK(count_kind(log, action_kind::update) == r.updated);
  CHECK(count_kind(log, action_kind::update_meta) == r.meta_updated);
  CHECK(count_kind(log, action_kind::remove) == r.deleted);
}

TEST_CASE("observer: a failure is observed as an error action with its code") {
  mock_fs fs;
  three_files(fs);
  fs.fail(mock_fs::op::open_read, 2, std::errc::permission_denied);  // "b"
  std::vector<seen> log;
  (void)treesync::sync(fs, "/src", "/dst", recorder{&log});
  const seen* b = find_action(log, "b");
  REQUIRE(b != nullptr);
  CHECK(b->kind == action_kind::error);
  CHECK(b->code == std::errc::permission_denied);
}

// ---- policy order ------------------------------------------------------------------------------

TEST_CASE("policies: the order of the arguments does not matter") {
  struct outcome {
    treesync::report rep;
    std::string log;
    std::string tree;
  };
  const auto run = [](bool reversed) {
    mock_fs fs;
    with_pending_changes(fs);
    fs.write("/dst/x.o", "x");
    fs.write("/src/y.o", "y");
    settle(fs);
    std::vector<seen> log;
    const treesync::exclude ex{"*.o"};
    outcome out;
    out.rep = reversed ? treesync::sync(fs, "/src", "/dst", recorder{&log}, treesync::write::in_place,
                                        treesync::deletion::keep, treesync::compare::size_only,
                                        treesync::links::preserve, ex)
                       : treesync::sync(fs, "/src", "/dst", ex, treesync::links::preserve, treesync::compare::size_only,
                                        treesync::deletion::keep, treesync::write::in_place, recorder{&log});
    out.log = render(log);
    out.tree = render(fs.tree("/dst"));
    // every policy took effect
    CHECK(fs.tree("/dst").at("link").type == file_type::symlink);  // links::preserve
    CHECK(fs.exists("/dst/gone.txt"));                              // deletion::keep
    CHECK(fs.exists("/dst/x.o"));
    CHECK_FALSE(fs.exists("/dst/y.o"));                             // exclude
    CHECK(fs.read("/dst/b.txt") == "BRAVO, longer");
    return out;
  };
  const outcome a = run(false);
  const outcome b = run(true);
  check_same_counts(a.rep, b.rep);
  CHECK(a.log == b.log);
  CHECK(a.tree == b.tree);
}

TEST_CASE("jobs{n}: several workers give the serial run's destination and counts") {
  const auto run = [](unsigned n) {
    mock_fs fs;
    with_pending_changes(fs);
    treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::jobs{n}, treesync::links::preserve);
    return std::make_pair(r, render(fs.tree("/dst")));
  };
  const auto serial = run(1);
  const auto parallel = run(4);
  check_same_counts(serial.first, parallel.first);
  CHECK(serial.second == parallel.second);
}

// ---- user-defined policies ---------------------------------------------------------------------

namespace {
// Equal when the sizes match and the destination is not older than the source (a custom compare policy).
struct same_size_not_older {
  bool up_to_date(const treesync::file_pair& f) const {
    return f.src.size == f.dst.size && f.dst.mtime_ns >= f.src.mtime_ns;
  }
};

// Deletes what the source lacks, except excluded entries and *.keep files.
struct protect_keep {
  bool removes(std::string_view rel, file_type, bool excluded) const { return !excluded && !ends_with(rel, ".keep"); }
  std::size_t limit() const { return treesync::unlimited; }
};

// Preserves links to shared libraries, follows the rest; records what it was asked.
struct keep_so_links {
  struct question {
    std::string rel;
    std::string target;
    bool inside;
  };
  std::vector<question>* asked;
  treesync::link_action on_symlink(std::string_view rel, std::string_view target, bool inside) const {
    asked->push_back({std::string(rel), std::string(target), inside});
    return ends_with(target, ".so") ? treesync::link_action::preserve : treesync::link_action::follow;
  }
};

// Excludes hidden entries (a name starting with '.'), at any depth.
struct no_hidden {
  bool excluded(std::string_view rel, file_type) const {
    const auto slash = rel.rfind('/');
    const std::string_view name = slash == std::string_view::npos ? rel : rel.substr(slash + 1);
    return !name.empty() && name.front() == '.';
  }
};
}  // namespace

TEST_CASE("user-defined compare policy: same size and destination not older is up to date") {
  static_assert(treesync::is_compare_policy_v<same_size_not_older>);
  static_assert(treesync::is_policy_v<same_size_not_older>);
  mock_fs fs;
  mirrored(fs);
  fs.write("/dst/a.txt", "ALPHA");  // destination newer, same size: kept
  fs.write("/dst/b.txt", "BRAVO");
  fs.set_mtime("/dst/b.txt", mtime_of(fs, "/src/b.txt") - one_second);  // destination older: copied
  fs.write("/dst/d/c.txt", "newer but longer");                         // other size: copied
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", same_size_not_older{});
  CHECK(fs.read("/dst/a.txt") == "ALPHA");
  CHECK(mtime_of(fs, "/dst/a.txt") > mtime_of(fs, "/src/a.txt"));  // no `restamp`: mtime left alone
  CHECK(fs.read("/dst/b.txt") == "bravo");
  CHECK(fs.read("/dst/d/c.txt") == "charlie");
  CHECK(r.updated == 2u);
}

TEST_CASE("user-defined deletion policy: *.keep files are protected from deletion") {
  static_assert(treesync::is_deletion_policy_v<protect_keep>);
  static_assert(treesync::is_policy_v<protect_keep>);
  mock_fs fs;
  mirrored(fs);
  fs.write("/dst/notes.keep", "mine");
  fs.write("/dst/d/more.keep", "mine too");
  fs.write("/dst/x.txt", "x");
  fs.write("/dst/d/y.txt", "y");
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", protect_keep{});
  CHECK(fs.read("/dst/notes.keep") == "mine");
  CHECK(fs.read("/dst/d/more.keep") == "mine too");
  CHECK_FALSE(fs.exists("/dst/x.txt"));
  CHECK_FALSE(fs.exists("/dst/d/y.txt"));
  CHECK(r.deleted == 2u);
}

// The policy is asked about each entry of a destination-only directory, not only about the directory.
TEST_CASE("user-defined deletion policy: a *.keep file inside a destination-only directory is protected") {
  mock_fs fs;
  mirrored(fs);
  fs.write("/dst/old/notes.keep", "mine");
  fs.write("/dst/old/x.txt", "x");
  settle(fs);
  (void)treesync::sync(fs, "/src", "/dst", protect_keep{});
  CHECK(fs.exists("/dst/old/notes.keep"));
  CHECK_FALSE(fs.exists("/dst/old/x.txt"));
}

TEST_CASE("user-defined deletion policy: its limit() refuses a larger plan like max_delete") {
  struct at_most_one {
    bool removes(std::string_view, file_type, bool excluded) const { return !excluded; }
    std::size_t limit() const { return 1; }
  };
  static_assert(treesync::is_deletion_policy_v<at_most_one>);
  mock_fs fs;
  mirrored(fs);
  fs.write("/dst/x", "x");
  fs.write("/dst/y", "y");
  settle(fs);
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/dst", at_most_one{}, ec);
  CHECK(ec == treesync::errc::max_delete_exceeded);
  CHECK(fs.exists("/dst/x"));
  CHECK(fs.exists("/dst/y"));
}

TEST_CASE("user-defined links policy: decides per link from its path, target and whether it stays inside") {
  static_assert(treesync::is_links_policy_v<keep_so_links>);
  static_assert(treesync::is_policy_v<keep_so_links>);
  mock_fs fs;
  fs.write("/src/lib/libz.so.1", "z");
  fs.symlink("/src/lib/libz.so", "libz.so.1");  // follow
  fs.symlink("/src/lib/libc.so", "/usr/lib/libc.so");  // preserve (dangling here, never followed)
  fs.symlink("/src/readme", "../README.so");           // preserve (outside)
  fs.write("/README.so", "r");
  settle(fs);
  std::vector<keep_so_links::question> asked;
  const treesync::report r = treesync::sync(fs, "/src", "/dst", keep_so_links{&asked});
  CHECK(r.ok());
  const auto t = fs.tree("/dst");
  CHECK(t.at("lib/libz.so").type == file_type::regular);
  CHECK(t.at("lib/libz.so").data == "z");
  CHECK(t.at("lib/libc.so").type == file_type::symlink);
  CHECK(t.at("lib/libc.so").data == "/usr/lib/libc.so");
  CHECK(t.at("readme").type == file_type::symlink);
  REQUIRE(asked.size() == 3u);
  for (const auto& q : asked) {
    CAPTURE(q.rel);
    if (q.rel == "lib/libz.so") {
      CHECK(q.target == "libz.so.1");
      CHECK(q.inside);
    } else if (q.rel == "lib/libc.so") {
      CHECK(q.target == "/usr/lib/libc.so");
      CHECK_FALSE(q.inside);
    } else {
      CHECK(q.rel == "readme");
      CHECK(q.target == "../README.so");
      CHECK_FALSE(q.inside);
    }
  }
}

TEST_CASE("user-defined exclude policy: a struct with an excluded() member") {
  static_assert(treesync::is_exclude_policy_v<no_hidden>);
  static_assert(treesync::is_policy_v<no_hidden>);
  mock_fs fs;
  fs.write("/src/a", "a");
  fs.write("/src/.hidden", "h");
  fs.write("/src/.git/config", "c");
  fs.write("/src/d/.swp", "s");
  fs.write("/src/d/b", "b");
  fs.write("/dst/.local", "protected: excluded");
  settle(fs);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", no_hidden{});
  CHECK(joined(files_in(fs, "/dst")) == joined({".local", "a", "d/b"}));
  CHECK(r.excluded == 4u);  // .hidden, .git, d/.swp, and .local on the destination side
}

// ---- static checks -----------------------------------------------------------------------------

namespace {
struct nothing_at_all {};
// Callable both as an exclude predicate and as an observer: it counts as an exclude predicate only.
struct predicate_and_observer {
  bool operator()(std::string_view, file_type) const { return false; }
  void operator()(const treesync::action&) const {}
};
struct two_categories {  // a compare policy and an exclude predicate at once
  bool up_to_date(const treesync::file_pair&) const { return true; }
  bool excluded(std::string_view, file_type) const { return false; }
};
}  // namespace

TEST_CASE("traits: each built-in belongs to exactly one category, non-policies to none") {
  namespace ts = treesync;
  // compare
  static_assert(ts::is_compare_policy_v<ts::compare::size_mtime>);
  static_assert(ts::is_compare_policy_v<ts::compare::size_only_t>);
  static_assert(ts::is_compare_policy_v<decltype(ts::compare::newer)>);
  static_assert(ts::is_compare_policy_v<const ts::compare::checksum_t&>);
  static_assert(ts::is_compare_policy_v<ts::compare::always_t>);
  static_assert(!ts::is_compare_policy_v<ts::deletion::keep_t>);
  static_assert(!ts::is_compare_policy_v<int>);
  // the other categories
  static_assert(ts::is_deletion_policy_v<ts::deletion::extraneous_t>);
  static_assert(ts::is_deletion_policy_v<ts::deletion::keep_t>);
  static_assert(ts::is_deletion_policy_v<ts::deletion::delete_excluded_t>);
  static_assert(ts::is_deletion_policy_v<ts::max_delete<>>);
  static_assert(ts::is_deletion_policy_v<ts::max_delete<ts::deletion::delete_excluded_t>>);
  static_assert(ts::is_links_policy_v<ts::links::dereference_t>);
  static_assert(ts::is_links_policy_v<ts::links::preserve_t>);
  static_assert(ts::is_links_policy_v<ts::links::skip_t>);
  static_assert(ts::is_links_policy_v<ts::links::dereference_unsafe_t>);
  static_assert(ts::is_links_policy_v<ts::links::preserve_safe_t>);
  static_assert(ts::is_exclude_policy_v<ts::exclude>);
  static_assert(ts::is_exclude_policy_v<ts::exclude_nothing_t>);
  static_assert(ts::is_exclude_policy_v<decltype(ts::any_of(ts::exclude{"a"}, ts::exclude_nothing))>);
  static_assert(ts::is_exclude_policy_v<decltype(ts::all_of(ts::exclude{"a"}))>);
  static_assert(ts::is_exclude_policy_v<decltype(ts::not_(ts::exclude{"a"}))>);
  static_assert(ts::is_write_policy_v<ts::write::atomic_t>);
  static_assert(ts::is_write_policy_v<ts::write::in_place_t>);
  static_assert(ts::is_errors_policy_v<ts::errors::collect_t>);
  static_assert(ts::is_errors_policy_v<ts::errors::stop_t>);
  static_assert(ts::is_observer_policy_v<ts::no_observer_t>);
  static_assert(ts::is_observer_policy_v<recorder>);
  static_assert(ts::is_dry_run_policy_v<ts::dry_run_t>);
  static_assert(ts::is_allow_empty_source_policy_v<ts::allow_empty_source_t>);
  static_assert(ts::is_jobs_policy_v<ts::jobs>);

  // exactly one category each
  static_assert(ts::policy_category_count_v<ts::compare::size_mtime> == 1);
  static_assert(ts::policy_category_count_v<ts::compare::size_only_t> == 1);
  static_assert(ts::policy_category_count_v<ts::compare::newer_t> == 1);
  static_assert(ts::policy_category_count_v<ts::compare::checksum_t> == 1);
  static_assert(ts::policy_category_count_v<ts::compare::always_t> == 1);
  static_assert(ts::policy_category_count_v<ts::deletion::extraneous_t> == 1);
  static_assert(ts::policy_category_count_v<ts::deletion::keep_t> == 1);
  static_assert(ts::policy_category_count_v<ts::deletion::delete_excluded_t> == 1);
  static_assert(ts::policy_category_count_v<ts::max_delete<>> == 1);
  static_assert(ts::policy_category_count_v<ts::links::dereference_t> == 1);
  static_assert(ts::policy_category_count_v<ts::links::preserve_t> == 1);
  static_assert(ts::policy_category_count_v<ts::links::skip_t> == 1);
  static_assert(ts::policy_category_count_v<ts::links::dereference_unsafe_t> == 1);
  static_assert(ts::policy_category_count_v<ts::links::preserve_safe_t> == 1);
  static_assert(ts::policy_category_count_v<ts::exclude> == 1);
  static_assert(ts::policy_category_count_v<ts::exclude_nothing_t> == 1);
  static_assert(ts::policy_category_count_v<ts::write::atomic_t> == 1);
  static_assert(ts::policy_category_count_v<ts::write::in_place_t> == 1);
  static_assert(ts::policy_category_count_v<ts::errors::collect_t> == 1);
  static_assert(ts::policy_category_count_v<ts::errors::stop_t> == 1);
  static_assert(ts::policy_category_count_v<ts::no_observer_t> == 1);
  static_assert(ts::policy_category_count_v<ts::dry_run_t> == 1);
  static_assert(ts::policy_category_count_v<ts::allow_empty_source_t> == 1);
  static_assert(ts::policy_category_count_v<ts::jobs> == 1);
  static_assert(ts::policy_category_count_v<recorder> == 1);

  static_assert(ts::is_policy_v<ts::compare::size_mtime>);
  static_assert(ts::is_policy_v<ts::deletion::max_delete<ts::deletion::delete_excluded_t>>);
  static_assert(ts::is_policy_v<ts::links::dereference_unsafe_t>);
  static_assert(ts::is_policy_v<ts::links::preserve_safe_t>);
  static_assert(ts::is_policy_v<ts::exclude>);
  static_assert(ts::is_policy_v<ts::write::in_place_t>);
  static_assert(ts::is_policy_v<ts::errors::stop_t>);
  static_assert(ts::is_policy_v<ts::dry_run_t>);
  static_assert(ts::is_policy_v<ts::allow_empty_source_t>);
  static_assert(ts::is_policy_v<const ts::exclude&>);

  // non-policies
  static_assert(ts::policy_category_count_v<int> == 0);
  static_assert(!ts::is_policy_v<int>);
  static_assert(!ts::is_compare_policy_v<int>);
  static_assert(ts::policy_category_count_v<nothing_at_all> == 0);
  static_assert(!ts::is_policy_v<nothing_at_all>);
  static_assert(ts::policy_category_count_v<std::string> == 0);
  static_assert(ts::policy_category_count_v<two_categories> == 2);
  static_assert(ts::is_exclude_policy_v<predicate_and_observer>);
  static_assert(!ts::is_observer_policy_v<predicate_and_observer>);
  static_assert(ts::policy_category_count_v<predicate_and_observer> == 1);
  static_assert(!ts::is_policy_v<two_categories>);

  // the same answers at run time, so the test run shows them
  CHECK(ts::policy_category_count_v<int> == 0);
  CHECK(ts::policy_category_count_v<nothing_at_all> == 0);
  CHECK(ts::is_policy_v<ts::compare::checksum_t>);
  CHECK_FALSE(ts::is_policy_v<two_categories>);
}

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
namespace {
struct near_miss_compare {  // up_to_date is not const: resembles a compare policy
  bool up_to_date(const treesync::file_pair&) { return true; }
};
// Whether sync() is viable for these argument types (a dependent requires-expression: an invalid
// call makes it false instead of an error)
template <class FS, class... A>
constexpr bool can_sync = requires(FS& fs, A&... a) { treesync::sync(fs, "/a", "/b", a...); };
template <class... A>
constexpr bool can_sync_paths = requires(A&... a) { treesync::sync("/a", "/b", a...); };
}  // namespace

TEST_CASE("C++20: sync is constrained by its concepts: a non-policy or a non-filesystem makes it not viable") {
  constexpr bool with_options = can_sync<treesync::mock_fs, treesync::options>;
  constexpr bool with_error_code = can_sync<treesync::mock_fs, const treesync::compare::size_only_t, std::error_code>;
  constexpr bool with_int = can_sync<treesync::mock_fs, int>;
  constexpr bool with_string = can_sync_paths<std::string>;
  constexpr bool on_an_int = can_sync<int>;
  CHECK(with_options);
  CHECK(with_error_code);
  CHECK_FALSE(with_int);
  CHECK_FALSE(with_string);
  CHECK_FALSE(on_an_int);
  // a near miss stays viable, so that sync's static_assert names the category it resembles
  CHECK(treesync::sync_argument<near_miss_compare>);
  CHECK_FALSE(treesync::sync_argument<int>);
  CHECK(treesync::filesystem<treesync::mock_fs>);
  CHECK_FALSE(treesync::filesystem<int>);
}
#endif
