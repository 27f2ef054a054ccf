// tests/test_state_memory.cpp - what a crafted but valid state file may cost a run (issue 33, item 8).
//
// A state file's records are held for the whole run, and a record costs more than its line: a
// file of short sibling names once held 35 times its size, and an address-space limit turned
// that into an uncaught std::bad_alloc.  And under verify::none a record's names are taken for
// the destination's: names it no longer has were "deleted" one by one.  Here: the records past
// the cap (state_file::max_memory) make the file ignored as too large, a bad_alloc while it is
// read does the same, and recorded names already gone are one notice, never deletions.
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include <algorithm>
#include <chrono>
#include <new>
#include <sstream>
#include <string>
#include <vector>

namespace {

using treesync::mock_fs;
using treesync::verify_level;
using namespace std::chrono_literals;

treesync::options with_state(verify_level level, std::uint64_t memory = treesync::default_state_memory) {
  treesync::options o;
  o.state = "/state/s";
  o.verify = level;
  o.state_memory = memory;
  return o;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The state file `text` with `count` more entries (regular files, no stat, named "~" and a
// number: after every name of the trees here) in the record whose D line starts with `dir`, its
// count raised to match: a crafted file that still parses.  The names exist nowhere.
std::string with_phantoms(const std::string& text, const std::string& dir, std::size_t count) {
  std::vector<std::string> lines = lines_of(text);
  const auto d = std::find_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(dir, 0) == 0; });
  REQUIRE(d != lines.end());
  std::vector<std::string> f;
  std::istringstream fields(*d);
  for (std::string w; fields >> w;) f.push_back(w);
  REQUIRE(f.size() == 12);
  f[4] = std::to_string(std::stoull(f[4]) + count);
  std::string head;
  for (const auto& w : f) head += (head.empty() ? "" : " ") + w;
  *d = head;
  auto last = d + 1;
  while (last != lines.end() && last->rfind("E ", 0) == 0) ++last;
  std::vector<std::string> added;
  for (std::size_t k = 0; k < count; ++k) {
    std::string n = std::to_string(k);
    added.push_back("E ~" + std::string(7 - std::min<std::size_t>(7, n.size()), '0') + n + " 1 -");
  }
  lines.insert(last, added.begin(), added.end());
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

const treesync::entry_error* notice_of(const treesync::report& r, treesync::errc code) {
  for (const auto& n : r.notices)
    if (n.code == code) return &n;
  return nullptr;
}

// src/a holds two files, src/top one; a run with a state file has mirrored it and recorded it.
void synced_tree(mock_fs& fs) {
  fs.mkdir("/state");
  fs.write("/src/a/one", "one");
  fs.write("/src/a/two", "two");
  fs.write("/src/top", "top");
  fs.advance(10s);
  REQUIRE(treesync::sync(fs, "/src", "/dst", with_state(verify_level::full)).ok());
  fs.advance(10s);
}

}  // namespace

TEST_CASE("state file memory: a file whose records need more than state_file::max_memory is ignored as too large, and the run reads the destination in full") {
  mock_fs fs;
  synced_tree(fs);
  const std::string crafted = with_phantoms(fs.read("/state/s"), "D 1 a ", 1000);  // 15 KB of lines, ~180 KB of records
  fs.write("/state/s", crafted);
  fs.remove("/src/a/two");
  fs.advance(10s);
  fs.reset_counters();
  std::vector<treesync::action_kind> seen;
  const auto r = treesync::sync(fs, "/src", "/dst", treesync::state_file{"/state/s", 64 << 10}, treesync::verify::none,
                                [&seen](const treesync::action& a) { seen.push_back(a.kind); });
  CHECK(r.ok());
  const treesync::entry_error* n = notice_of(r, treesync::errc::state_ignored);
  REQUIRE(n != nullptr);
  CHECK(n->detail.rfind("too large: ", 0) == 0);
  CHECK(n->detail.find("64 MiB") == std::string::npos);
  CHECK(n->detail.find("65536 bytes") != std::string::npos);
  // the destination was read, not the records: the one real deletion, no phantom
  CHECK(r.deleted == 1);
  CHECK(std::count(seen.begin(), seen.end(), treesync::action_kind::remove) == 1);
  CHECK(fs.ops()[mock_fs::op::unlink] == 2);  // dst/a/two, and the state file before the first write
  CHECK(fs.tree("/dst") == fs.tree("/src"));
  // and the file was replaced by a true one, which the next run takes
  const auto again = treesync::sync(fs, "/src", "/dst", treesync::state_file{"/state/s", 64 << 10}, treesync::verify::none);
  CHECK(again.ok());
  CHECK(again.notices.empty());
}

TEST_CASE("state file memory: an entry count past the default cap is refused as too large at its line, before anything is reserved") {
  mock_fs fs;
  synced_tree(fs);
  // ten million entries announced (1.7 GB of records), two given: refused at the D line, not
  // when the entries run out ("damaged") and not by an allocation
  std::vector<std::string> lines = lines_of(fs.read("/state/s"));
  std::size_t at = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("D 1 a ", 0) != 0) continue;
    std::istringstream in(lines[i]);
    std::vector<std::string> f;
    for (std::string w; in >> w;) f.push_back(w);
    f[4] = "10000000";
    lines[i].clear();
    for (const auto& w : f) lines[i] += (lines[i].empty() ? "" : " ") + w;
    at = i + 1;
  }
  REQUIRE(at != 0);
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  fs.write("/state/s", text);
  treesync::report r;
  CHECK_NOTHROW(r = treesync::sync(fs, "/src", "/dst", with_state(verify_level::none)));
  CHECK(r.ok());
  const treesync::entry_error* n = notice_of(r, treesync::errc::state_ignored);
  REQUIRE(n != nullptr);
  CHECK(n->detail == "too large: line " + std::to_string(at) +
                         ": its records need more than 256 MiB of memory (the cap: state_file::max_memory)");
  CHECK(fs.tree("/dst") == fs.tree("/src"));
}

TEST_CASE("state file memory: a std::bad_alloc while the state file is read makes the run ignore it with a notice, never throw") {
  mock_fs fs;
  synced_tree(fs);
  fs.write("/src/new", "new");
  fs.advance(10s);
  bool thrown = false;
  fs.on_operation([&thrown](mock_fs::op k, const std::string& path) {
    if (k == mock_fs::op::open_read && path == "/state/s" && !thrown) {
      thrown = true;
      throw std::bad_alloc();  // as an address-space limit (ulimit -v) makes it
    }
  });
  treesync::report r;
  CHECK_NOTHROW(r = treesync::sync(fs, "/src", "/dst", with_state(verify_level::none)));
  fs.on_operation(nullptr);
  CHECK(thrown);
  CHECK(r.ok());
  const treesync::entry_error* n = notice_of(r, treesync::errc::state_ignored);
  REQUIRE(n != nullptr);
  CHECK(n->detail.rfind("too large: ", 0) == 0);
  CHECK(n->detail.find("could not be held in memory") != std::string::npos);
  CHECK(fs.tree("/dst") == fs.tree("/src"));
  // replaced by a true record: the next run takes it
  const auto again = treesync::sync(fs, "/src", "/dst", with_state(verify_level::none));
  CHECK(again.ok());
  CHECK(again.notices.empty());
}

TEST_CASE("state file memory: under verify::none recorded names the destination no longer has are one notice with their count, not deletions") {
  for (const bool deferred : {false, true}) {  // deletions in the walk, or at its end (keep_on_source_error)
    CAPTURE(deferred);
    mock_fs fs;
    synced_tree(fs);
    fs.write("/state/s", with_phantoms(fs.read("/state/s"), "D 1 a ", 1000));
    fs.remove("/src/a/two");  // one real deletion beside them
    fs.advance(10s);
    fs.reset_counters();
    treesync::options o = with_state(verify_level::none);
    o.keep_on_source_error = deferred;
    std::vector<treesync::action_kind> seen;
    const auto r = treesync::sync(fs, "/src", "/dst", o, [&seen](const treesync::action& a) { seen.push_back(a.kind); });
    CHECK(r.ok());
    CHECK(notice_of(r, treesync::errc::state_ignored) == nullptr);  // the records were taken
    CHECK(r.deleted == 1);
    CHECK(std::count(seen.begin(), seen.end(), treesync::action_kind::remove) == 1);
    const treesync::entry_error* n = notice_of(r, treesync::errc::state_entries_gone);
    REQUIRE(n != nullptr);
    CHECK(n->path == "/state/s");
    CHECK(n->operation == treesync::operation::state);
    CHECK(n->detail == "1000 entries it recorded were no longer in the destination");
    CHECK(std::count_if(r.notices.begin(), r.notices.end(), [](const treesync::entry_error& e) {
            return e.code == treesync::errc::state_entries_gone;
          }) == 1);
    // one attempt a name (O(names), nothing more), and the state file's removal before the first write
    CHECK(fs.ops()[mock_fs::op::unlink] == 1002);
    CHECK(fs.tree("/dst") == fs.tree("/src"));
    // the record written now holds what is there: the next run has nothing gone
    const auto again = treesync::sync(fs, "/src", "/dst", o);
    CHECK(again.ok());
    CHECK(notice_of(again, treesync::errc::state_entries_gone) == nullptr);
    CHECK(again.deleted == 0);
  }
}

TEST_CASE("state file memory: the reader counts what the records take and stops at its budget, whatever a count says") {
  using treesync::detail::manifest;
  using treesync::detail::manifest_reader;
  const std::string head = "treesync-state 2\nid x\n";
  // a count of 2^64 - 1: refused at its line, before anything is reserved
  manifest m;
  treesync::detail::state_defect why;
  bool ok = true;
  CHECK_NOTHROW(ok = m.parse(head + "D 0 / 0 18446744073709551615 1 2 0 0 0 0 0\nend 1\n", &why));
  CHECK_FALSE(ok);
  CHECK(why.too_large);
  CHECK(why.line == 3);
  // a file within its budget parses; with one byte less, the same file is too large
  const std::string text = head + "D 0 / 0 3 1 2 0 0 0 0 0\nE a 1 -\nE b 1 -\nE " + std::string(40, 'c') +
                           " 3 - %" + std::string(100, 't') + "\nend 1\n";
  manifest whole;
  manifest_reader r(whole);
  REQUIRE(r.feed(text));
  REQUIRE(r.finish());
  const std::uint64_t held = r.held();
  CHECK(held >= 3 * sizeof(treesync::detail::entry_record) + 100);  // the records, and the long name's and target's heap
  CHECK(whole.parse(text, &why, held));
  CHECK_FALSE(whole.parse(text, &why, held - 1));
  CHECK(why.too_large);
  CHECK(whole.dirs.empty());
}
