// tests/test_report_api.cpp - the report's vocabulary (issue 13 item 4, issue 14 item 5): counts
// and merge, the operation and side of an entry error, the `changed` bitmask, the refusals that
// tell a missing source from a missing destination parent, and a dangling-symlink destination.
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include <string>
#include <string_view>
#include <type_traits>

namespace {

using treesync::changed;
using treesync::counts;
using treesync::entry_error;
using treesync::file_type;
using treesync::mock_fs;
using treesync::operation;
using treesync::report;
using treesync::side;
using mop = treesync::mock_fs::op;

counts numbered(std::size_t base) {
  counts c;
  c.scanned = base + 1;
  c.created = base + 2;
  c.updated = base + 3;
  c.meta_updated = base + 4;
  c.deleted = base + 5;
  c.excluded = base + 6;
  c.skipped = base + 7;
  c.cleaned = base + 8;
  c.settled = base + 9;
  c.bytes_copied = base + 10;
  return c;
}

// The members of counts, one at a time, for the per-field checks.
template <class F>
void each_field(F f) {
  f(&counts::scanned);
  f(&counts::created);
  f(&counts::updated);
  f(&counts::meta_updated);
  f(&counts::deleted);
  f(&counts::excluded);
  f(&counts::skipped);
  f(&counts::cleaned);
  f(&counts::settled);
}

void small_tree(mock_fs& fs) {
  fs.write("/src/a", "alpha");
  fs.write("/src/sub/b", "beta");
}

}  // namespace

TEST_CASE("counts += adds every field") {
  counts sum = numbered(0);
  sum += numbered(100);
  CHECK(sum.scanned == 1 + 101);
  CHECK(sum.created == 2 + 102);
  CHECK(sum.updated == 3 + 103);
  CHECK(sum.meta_updated == 4 + 104);
  CHECK(sum.deleted == 5 + 105);
  CHECK(sum.excluded == 6 + 106);
  CHECK(sum.skipped == 7 + 107);
  CHECK(sum.cleaned == 8 + 108);
  CHECK(sum.settled == 9 + 109);
  CHECK(sum.bytes_copied == 10 + 110);
}

TEST_CASE("counts == compares every field, and != is its negation") {
  CHECK(numbered(3) == numbered(3));
  CHECK_FALSE(numbered(3) != numbered(3));
  each_field([](std::size_t counts::*m) {
    counts other = numbered(3);
    ++(other.*m);
    CHECK_FALSE(numbered(3) == other);
    CHECK(numbered(3) != other);
  });
  counts other = numbered(3);
  ++other.bytes_copied;
  CHECK(numbered(3) != other);
}

TEST_CASE("a report's counts are its base: rep.created and totals() name the same number") {
  static_assert(std::is_base_of_v<counts, report>);
  report r;
  r.created = 4;
  CHECK(r.totals().created == 4);
  r.totals() += numbered(0);
  CHECK(r.created == 6);
}

TEST_CASE("report::merge adds the counts and appends every list in order") {
  report a;
  a.totals() = numbered(0);
  a.errors.push_back({"x", operation::copy, std::make_error_code(std::errc::io_error), side::source});
  report b;
  b.totals() = numbered(10);
  b.errors.push_back({"y", operation::mkdir, std::make_error_code(std::errc::permission_denied), side::destination});
  b.vanished.push_back({"v", operation::stat, treesync::errc::vanished, side::source});
  b.skipped_entries.push_back({"s", operation::open, treesync::errc::special_file, side::source});
  b.notices.push_back({"n", operation::list, treesync::errc::case_collision, side::source});
  const report b_copy = b;

  a.merge(b_copy);  // the const& overload leaves its argument alone
  CHECK(b_copy.errors.size() == 1);
  CHECK(a.totals() == numbered(0) + numbered(10));
  REQUIRE(a.errors.size() == 2);
  CHECK(a.errors[0].path == "x");
  CHECK(a.errors[1].path == "y");
  CHECK(a.errors[1].side == side::destination);
  CHECK(a.vanished.size() == 1);
  CHECK(a.skipped_entries.size() == 1);
  CHECK(a.notices.size() == 1);

  a.merge(std::move(b));
  CHECK(a.totals() == numbered(0) + numbered(10) + numbered(10));
  CHECK(a.errors.size() == 3);
  CHECK(a.vanished.size() == 2);
}

TEST_CASE("every operation round-trips through to_string and from_string") {
  const std::string_view words[] = {"list",   "stat", "open",   "opendir", "readlink", "copy",  "compare",
                                    "mkdir",  "symlink", "mknod", "link",  "rename",   "unlink", "rmdir",
                                    "chmod",  "chown", "utime", "fsync", "xattr",    "backup",  "state", "sync"};
  unsigned n = 0;
  for (std::string_view w : words) {
    CAPTURE(w);
    operation o{};
    REQUIRE(treesync::from_string(w, o));
    CHECK(static_cast<unsigned>(o) == n);
    CHECK(std::string_view(treesync::to_string(o)) == w);
    ++n;
  }
  CHECK(std::string_view(treesync::to_string(static_cast<operation>(n))) == "?");  // one past the last
  operation o{};
  CHECK_FALSE(treesync::from_string("remove", o));
}

TEST_CASE("side names the tree: source and destination") {
  CHECK(std::string_view(treesync::to_string(side::source)) == "source");
  CHECK(std::string_view(treesync::to_string(side::destination)) == "destination");
}

TEST_CASE("changed is a bitmask: |, &, ~ within all, any and has") {
  constexpr changed st = changed::size | changed::mtime;
  static_assert(treesync::has(st, changed::size));
  static_assert(!treesync::has(st, changed::mode));
  static_assert(treesync::any(st & changed::mtime));
  static_assert(!treesync::any(st & changed::mode));
  static_assert((changed::all & ~changed::size) == (changed::mtime | changed::mode));
  static_assert(~changed::all == changed::none);
  changed m = changed::none;
  m |= changed::mode;
  CHECK(m == changed::mode);
  m &= changed::size;
  CHECK_FALSE(treesync::any(m));
}

TEST_CASE("differences sets the bit of each attribute that differs, all of them when absent") {
  treesync::stat_info a, b;
  a.size = 1;
  b.size = 1;
  a.mode = 0644;
  b.mode = 0600;
  CHECK(treesync::differences(a, &b) == changed::mode);
  b.mtime_ns = 5;
  CHECK(treesync::differences(a, &b) == (changed::mode | changed::mtime));
  CHECK(treesync::differences(a, nullptr) == changed::all);
}

TEST_CASE("an unreadable source file is an error on the source side") {
  mock_fs fs;
  small_tree(fs);
  fs.fail_path("/src/a", std::errc::permission_denied, mop::open_read);
  const report r = treesync::sync(fs, "/src", "/dst");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].path == "a");
  CHECK(r.errors[0].operation == operation::copy);
  CHECK(r.errors[0].side == side::source);
}

TEST_CASE("an unreadable source directory is an error on the source side") {
  mock_fs fs;
  small_tree(fs);
  fs.fail_path("/src/sub", std::errc::io_error, mop::list);
  const report r = treesync::sync(fs, "/src", "/dst");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].operation == operation::list);
  CHECK(r.errors[0].side == side::source);
}

TEST_CASE("an unlistable destination directory is an error on the destination side") {
  mock_fs fs;
  small_tree(fs);
  fs.mkdir("/dst/sub");
  fs.fail_path("/dst/sub", std::errc::io_error, mop::list);
  const report r = treesync::sync(fs, "/src", "/dst");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].path == "sub");
  CHECK(r.errors[0].operation == operation::list);
  CHECK(r.errors[0].side == side::destination);
}

TEST_CASE("a failed destination chmod is an error on the destination side") {
  mock_fs fs;
  small_tree(fs);
  (void)treesync::sync(fs, "/src", "/dst");
  fs.chmod("/src/a", 0600);
  fs.fail_path("/dst/a", std::errc::operation_not_permitted, mop::chmod);
  const report r = treesync::sync(fs, "/src", "/dst");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].operation == operation::chmod);
  CHECK(r.errors[0].side == side::destination);
}

TEST_CASE("a missing source is refused with errc::source_missing") {
  mock_fs fs;
  fs.mkdir("/dst");
  std::error_code ec;
  const report r = treesync::sync(fs, "/nowhere", "/dst", ec);
  CHECK(ec == treesync::errc::source_missing);
  CHECK(ec != treesync::errc::destination_parent_missing);
  CHECK(r.unchanged());
}

TEST_CASE("both missing-path refusals still compare equal to no_such_file_or_directory") {
  const std::error_code src = treesync::errc::source_missing;
  const std::error_code parent = treesync::errc::destination_parent_missing;
  CHECK(src == std::errc::no_such_file_or_directory);
  CHECK(parent == std::errc::no_such_file_or_directory);
  CHECK(src != parent);
  CHECK(std::error_code(treesync::errc::destination_dangling_symlink) != std::errc::no_such_file_or_directory);
}

TEST_CASE("a destination whose parent is missing is refused with errc::destination_parent_missing") {
  mock_fs fs;
  small_tree(fs);
  std::error_code ec;
  const report r = treesync::sync(fs, "/src", "/no/parent/dst", ec);
  CHECK(ec == treesync::errc::destination_parent_missing);
  CHECK(ec != treesync::errc::source_missing);
  CHECK_FALSE(fs.exists("/no"));
  CHECK(r.errors.empty());
}

TEST_CASE("a destination root that is a dangling symlink is refused and left alone") {
  mock_fs fs;
  small_tree(fs);
  fs.symlink("/dst", "/gone");
  std::error_code ec;
  const report r = treesync::sync(fs, "/src", "/dst", ec);
  CHECK(ec == treesync::errc::destination_dangling_symlink);
  CHECK(fs.lstat("/dst").type == file_type::symlink);
  CHECK_FALSE(fs.exists("/gone"));
  CHECK(r.unchanged());
}

TEST_CASE("a dangling symlink in the destination is replaced by the source's file and directory") {
  mock_fs fs;
  small_tree(fs);
  fs.mkdir("/dst");
  fs.symlink("/dst/a", "nowhere");
  fs.symlink("/dst/sub", "nowhere");
  const report r = treesync::sync(fs, "/src", "/dst");
  CHECK(r.errors.empty());
  CHECK(fs.lstat("/dst/a").type == file_type::regular);
  CHECK(fs.read("/dst/a") == "alpha");
  CHECK(fs.lstat("/dst/sub").type == file_type::directory);
  CHECK(fs.read("/dst/sub/b") == "beta");
}

TEST_CASE("sync without an error_code throws for a missing source, naming it") {
  mock_fs fs;
  CHECK_THROWS_AS((void)treesync::sync(fs, "/nowhere", "/dst"), std::filesystem::filesystem_error);
}
