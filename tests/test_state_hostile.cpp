// tests/test_state_hostile.cpp - the state file is input someone else may have written (issue 23).
//
// Whoever can write the state file (or the destination, when the file lives there) must at worst
// make a run skip a change inside the destination under verify::none; never make it read, write,
// delete or chmod anything outside it, never make it crash, and never cost memory or time beyond
// what the file holds.  Each attack is made deterministically: a real run writes a true state
// file, the attacker edits it (or the path it is at), the next run must ignore it with a notice
// that says why, converge, and leave the canary outside the destination as it was.
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include "support/canary.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

using namespace treesync_test;

namespace {

using treesync::file_type;
using treesync::mock_fs;
using treesync::verify_level;
using namespace std::chrono_literals;

treesync::options with_state(const std::string& state, verify_level level) {
  treesync::options o;
  o.state = state;
  o.verify = level;
  return o;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::string unescaped(const std::string& field) {
  std::string out;
  treesync::detail::manifest::unescape(field, out);
  return out;
}

// The state file `text` with one more entry line in the root's record (its count raised, the
// entries kept in the order the format asks for): what an attacker who can write the file adds.
std::string with_root_entry(const std::string& text, const std::string& entry_line) {
  std::vector<std::string> lines = lines_of(text);
  const auto root = std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("D 0 / ", 0) == 0; });
  REQUIRE(root != lines.end());
  std::vector<std::string> f;
  std::istringstream fields(*root);
  for (std::string w; fields >> w;) f.push_back(w);
  REQUIRE(f.size() == 12);
  f[4] = std::to_string(std::stoull(f[4]) + 1);
  std::string d;
  for (const auto& w : f) d += (d.empty() ? "" : " ") + w;
  *root = d;
  const auto first = root + 1;
  auto last = first;
  while (last != lines.end() && last->rfind("E ", 0) == 0) ++last;
  std::vector<std::string> entries(first, last);
  entries.push_back(entry_line);
  const auto name = [](const std::string& l) { return unescaped(l.substr(2, l.find(' ', 2) - 2)); };
  std::stable_sort(entries.begin(), entries.end(), [&](const std::string& a, const std::string& b) { return name(a) < name(b); });
  const auto at = lines.erase(first, last);
  lines.insert(at, entries.begin(), entries.end());
  return join_lines(lines);
}

// The ignored notice of a run, or nullptr.
const treesync::entry_error* ignored_notice(const treesync::report& r) {
  for (const auto& n : r.notices)
    if (n.code == treesync::errc::state_ignored) return &n;
  return nullptr;
}

void mock_tree(mock_fs& fs) {
  fs.mkdir("/state");
  fs.write("/canary/secret", "do not delete");
  fs.write("/canary/sub/file", "nor this");
  fs.write("/src/a/one", "one");
  fs.write("/src/top", "top");
  fs.advance(10s);
}

}  // namespace

// ---- A: a recorded name never becomes a path ---------------------------------------------------

TEST_CASE("state file hostile: an entry named with '/', '..', '.', NUL or nothing makes the run ignore the file, and nothing outside the destination is deleted") {
  const char* const names[] = {"..%2F..%2Fcanary%2Fsecret", "..", ".", "%2Fcanary%2Fsecret", "a%2F..%2F..%2Fcanary",
                               "x%00y", "..%2F..%2Fcanary"};
  for (const char* bad : names) {
    CAPTURE(bad);
    for (const verify_level level : {verify_level::none, verify_level::dirs}) {
      CAPTURE(static_cast<int>(level));
      mock_fs fs;
      mock_tree(fs);
      REQUIRE(treesync::sync(fs, "/src", "/dst", with_state("/state/s", verify_level::full)).ok());
      const std::string tampered = with_root_entry(fs.read("/state/s"), std::string("E ") + bad + " 1 -");
      fs.write("/state/s", tampered);
      const auto canary = fs.tree("/canary");
      const auto r = treesync::sync(fs, "/src", "/dst", with_state("/state/s", level));
      CHECK(r.ok());
      const treesync::entry_error* n = ignored_notice(r);
      REQUIRE(n != nullptr);
      CHECK(n->detail.find("line ") != std::string::npos);
      CHECK(n->detail.find("single path component") != std::string::npos);
      CHECK(r.deleted == 0);
      CHECK(fs.tree("/canary") == canary);
      CHECK(fs.tree("/dst") == fs.tree("/src"));
    }
  }
}

TEST_CASE("state file hostile: a directory record named with '/' or '..' is refused like an entry") {
  mock_fs fs;
  mock_tree(fs);
  REQUIRE(treesync::sync(fs, "/src", "/dst", with_state("/state/s", verify_level::full)).ok());
  std::string text = fs.read("/state/s");
  const auto at = text.find("\nD 1 a ");
  REQUIRE(at != std::string::npos);
  text.replace(at, 7, "\nD 1 ..%2F..%2Fcanary ");
  fs.write("/state/s", text);
  const auto canary = fs.tree("/canary");
  const auto r = treesync::sync(fs, "/src", "/dst", with_state("/state/s", verify_level::none));
  CHECK(r.ok());
  REQUIRE(ignored_notice(r) != nullptr);
  CHECK(fs.tree("/canary") == canary);
  CHECK(fs.tree("/dst") == fs.tree("/src"));
}

TEST_CASE("posix: a state file entry named ../../canary/secret deletes nothing outside the destination, as root too") {
  temp_dir t;
  make_dir(t / "src");
  make_dir(t / "src/sub");
  write_file(t / "src/sub/f", "f");
  make_dir(t / "canary");
  plant_canary(t / "canary");
  write_file(t / "canary/secret", "secret");
  const std::string state = (t / "mirror.state").string();
  REQUIRE(treesync::sync((t / "src").string(), (t / "dst").string(), with_state(state, verify_level::full)).ok());
  // in the record of dst/sub: dst/sub/../../canary/secret is t/canary/secret
  std::vector<std::string> lines = lines_of(read_file(state));
  const auto sub = std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("D 1 sub ", 0) == 0; });
  REQUIRE(sub != lines.end());
  std::istringstream fields(*sub);
  std::vector<std::string> f;
  for (std::string w; fields >> w;) f.push_back(w);
  f[4] = std::to_string(std::stoull(f[4]) + 1);
  std::string d;
  for (const auto& w : f) d += (d.empty() ? "" : " ") + w;
  *sub = d;
  lines.insert(sub + 1, "E ..%2F..%2Fcanary%2Fsecret 1 -");
  write_file(state, join_lines(lines));
  const canary_snapshot before = snapshot(t / "canary");
  for (const verify_level level : {verify_level::none, verify_level::dirs}) {
    const auto r = treesync::sync((t / "src").string(), (t / "dst").string(), with_state(state, level));
    CHECK(r.ok());
    CHECK(r.deleted == 0);
    CHECK(changes(before, snapshot(t / "canary")) == "");
  }
  CHECK(read_file(t / "dst/sub/f") == "f");
}

// ---- C: the state file's own path --------------------------------------------------------------

TEST_CASE("state file hostile: a FIFO, device, directory or symlink at the state file's name refuses the run before any write and is left in place") {
  for (const file_type t : {file_type::fifo, file_type::character, file_type::directory, file_type::symlink}) {
    CAPTURE(treesync::to_string(t));
    mock_fs fs;
    mock_tree(fs);
    if (t == file_type::symlink)
      fs.symlink("/state/s", "/canary/secret");
    else if (t == file_type::directory)
      fs.mkdir("/state/s");
    else if (t == file_type::fifo)
      fs.fifo("/state/s");
    else
      fs.device("/state/s", t, 0x0103);  // 1,3: /dev/null
    const auto canary = fs.tree("/canary");
    std::error_code ec;
    (void)treesync::sync(fs, "/src", "/dst", with_state("/state/s", verify_level::full), ec);
    CHECK(ec == treesync::errc::state_not_regular);
    CHECK(fs.lstat("/state/s").type == t);
    CHECK_FALSE(fs.exists("/dst"));
    CHECK(fs.tree("/canary") == canary);
  }
}

TEST_CASE("posix: --state=a device or a FIFO refuses the run; the node is neither removed nor replaced") {
  temp_dir t;
  make_dir(t / "src");
  write_file(t / "src/f", "f");
  make_fifo(t / "fifo");  // no writer: an open that blocked would hang the test
  std::vector<std::string> states{(t / "fifo").string()};
  if (make_null_device(t / "null")) states.push_back((t / "null").string());  // root: a device of its own
  else MESSAGE("the device case needs root (mknod); the FIFO runs");
  for (const std::string& state : states) {
    CAPTURE(state);
    const struct ::stat before = lstat_of(state);
    std::error_code ec;
    (void)treesync::sync((t / "src").string(), (t / "dst").string(), with_state(state, verify_level::full), ec);
    CHECK(ec == treesync::errc::state_not_regular);
    const struct ::stat after = lstat_of(state);
    CHECK(after.st_ino == before.st_ino);
    CHECK(after.st_mode == before.st_mode);
    CHECK_FALSE(exists_nofollow(t / "dst"));
  }
}

TEST_CASE("state file: a state file in a directory that does not exist refuses the run before any write") {
  mock_fs fs;
  mock_tree(fs);
  std::error_code ec;
  (void)treesync::sync(fs, "/src", "/dst", with_state("/nodir/s", verify_level::full), ec);
  CHECK(ec == treesync::errc::state_dir_missing);
  CHECK_FALSE(fs.exists("/dst"));
}

TEST_CASE("posix: a state file inside the destination is never reached through a symlink planted there") {
  temp_dir t;
  make_dir(t / "src");
  make_dir(t / "src/meta");
  write_file(t / "src/f", "f");
  make_dir(t / "canary");
  write_file(t / "canary/state", "not a state file");
  const std::string state = (t / "dst/meta/state").string();
  make_dir(t / "dst");
  make_dir(t / "dst/meta");
  REQUIRE(treesync::sync((t / "src").string(), (t / "dst").string(), with_state(state, verify_level::full)).ok());
  REQUIRE(exists_nofollow(t / "dst/meta/state"));
  // the attacker, who can write dst, swaps dst/meta for a link to a directory outside
  fs::remove_all(t / "dst/meta");
  make_symlink((t / "canary").string(), t / "dst/meta");
  const canary_snapshot before = snapshot(t / "canary");
  write_file(t / "src/f", "changed", 0644, past_ns(5));
  std::error_code ec;
  (void)treesync::sync((t / "src").string(), (t / "dst").string(), with_state(state, verify_level::none), ec);
  CHECK(ec == treesync::errc::state_dir_missing);
  CHECK(changes(before, snapshot(t / "canary")) == "");
}

// ---- D, E: bounded by what the file holds ------------------------------------------------------

TEST_CASE("state file hostile: a huge or overflowing entry count is ignored with a notice, without an exception or a large allocation") {
  for (const char* count : {"18446744073709551615", "18446744073709551616", "99999999999999999999999", "-1"}) {
    CAPTURE(count);
    mock_fs fs;
    mock_tree(fs);
    REQUIRE(treesync::sync(fs, "/src", "/dst", with_state("/state/s", verify_level::full)).ok());
    std::vector<std::string> lines = lines_of(fs.read("/state/s"));
    for (auto& l : lines) {
      if (l.rfind("D 1 a ", 0) != 0) continue;
      std::istringstream in(l);
      std::vector<std::string> f;
      for (std::string w; in >> w;) f.push_back(w);
      f[4] = count;
      l.clear();
      for (const auto& w : f) l += (l.empty() ? "" : " ") + w;
    }
    fs.write("/state/s", join_lines(lines));
    treesync::report r;
    CHECK_NOTHROW(r = treesync::sync(fs, "/src", "/dst", with_state("/state/s", verify_level::none)));
    CHECK(r.ok());
    CHECK(ignored_notice(r) != nullptr);
    CHECK(fs.tree("/dst") == fs.tree("/src"));
  }
}

TEST_CASE("state file hostile: a line longer than the cap or numbers out of range are refused with the line named") {
  treesync::detail::manifest m;
  treesync::detail::state_defect why;
  const std::string head = "treesync-state 2\nid x\n";
  CHECK_FALSE(m.parse(head + "D 0 / 0 0 1 2 " + std::string(70000, '7') + " 0 0 0 0\nend 1\n", &why));
  CHECK(why.line == 3);
  CHECK(why.reason.find("longer than") != std::string::npos);
  CHECK_FALSE(m.parse(head + "D 0 / 0 0 1 2 4294967296 0 0 0 0\nend 1\n", &why));  // mode past 32 bits
  CHECK(why.line == 3);
  CHECK_FALSE(m.parse(head + "D 0 / 2 0 1 2 0 0 0 0 0\nend 1\n", &why));  // settled is 0 or 1
  CHECK_FALSE(m.parse(head + "D 0 / 0 0 1 2 0 0 0 9223372036854775808 0\nend 1\n", &why));  // mtime past int64
  CHECK(m.parse(head + "D 0 / 0 0 1 2 0 0 0 -9223372036854775808 0\nend 1\n", &why));
  CHECK_FALSE(m.parse(head + "D 0 / 0 1 1 2 0 0 0 0 0\nE x 1 -\nE y 1 -\nend 1\n", &why));  // more entries than said
  CHECK(why.line == 5);
  CHECK_FALSE(m.parse(head + "D 0 / 0 2 1 2 0 0 0 0 0\nE y 1 -\nE x 1 -\nend 1\n", &why));  // not sorted
  CHECK_FALSE(m.parse(head + "D 0 / 0 1 1 2 0 0 0 0 0\nE x 1 - %target\nend 1\n", &why));  // a target on a file
  CHECK_FALSE(m.parse(head + "D 0 / 0 0 1 2 0 0 0 0 0\nD 1 x 0 0 1 2 0 0 0 0 0\nend 2\n", &why));  // not listed by its parent
  CHECK(why.reason.find("does not list it") != std::string::npos);
  CHECK_FALSE(m.parse(head + "D 0 / 0 1 1 2 0 0 0 0 0\nE x 2 -\nD 2 x 0 0 1 2 0 0 0 0 0\nend 2\n", &why));  // too deep
  CHECK_FALSE(m.parse(head + "D 0 / 0 1 1 2 0 0 0 0 0\nE x 2 -\nD 1 x 0 0 1 2 0 0 0 0 0\nD 1 x 0 0 1 2 0 0 0 0 0\nend 3\n", &why));
  CHECK(why.reason.find("twice") != std::string::npos);
  CHECK(m.parse(head + "D 0 / 0 1 1 2 0 0 0 0 0\nE x 2 -\nD 1 x 0 0 1 2 0 0 0 0 0\nend 2\n", &why));
  CHECK_FALSE(m.parse("treesync-state 1\nid x\nend 0\n", &why));
  CHECK(why.reason.find("another version") != std::string::npos);
}

TEST_CASE("state file: a deep chain's state file grows linearly with its depth (names, not paths)") {
  mock_fs fs;
  std::string dir = "/src";
  const std::size_t depth = 2000;
  for (std::size_t i = 0; i < depth; ++i) dir += "/d" + std::to_string(i % 10);
  fs.write(dir + "/leaf", "x");
  fs.mkdir("/state");
  fs.advance(10s);
  REQUIRE(treesync::sync(fs, "/src", "/dst", with_state("/state/s", verify_level::full)).ok());
  const std::string text = fs.read("/state/s");
  MESSAGE("state file of a " << depth << "-level chain: " << text.size() << " bytes, " << text.size() / depth << " per level");
  CHECK(text.size() < depth * 200);  // a D line and an E line per level; full paths would be ~4 MB
  treesync::detail::manifest m;
  REQUIRE(m.parse(text));
  CHECK(m.dirs.size() == depth + 1);
  const auto r = treesync::sync(fs, "/src", "/dst", with_state("/state/s", verify_level::none));
  CHECK(r.ok());
  CHECK(ignored_notice(r) == nullptr);
  CHECK(r.created + r.updated + r.deleted + r.meta_updated == 0);
}

// ---- what survives tampering: at worst a wrong skip inside the destination ---------------------

TEST_CASE("state file hostile: a forged stat under verify::none can only make the run skip inside the destination, and verify::full repairs it") {
  mock_fs fs;
  mock_tree(fs);
  REQUIRE(treesync::sync(fs, "/src", "/dst", with_state("/state/s", verify_level::full)).ok());
  fs.write("/src/top", "TOP", 0644);  // same size: the stat decides
  fs.advance(10s);
  // the attacker records the source's new stat for dst/top: verify::none believes it
  const treesync::stat_info s = fs.lstat("/src/top");
  std::vector<std::string> lines = lines_of(fs.read("/state/s"));
  for (auto& l : lines) {
    if (l.rfind("E top ", 0) != 0) continue;
    std::istringstream in(l);
    std::vector<std::string> f;
    for (std::string w; in >> w;) f.push_back(w);
    f[4] = std::to_string(s.mtime_ns);
    f[5] = std::to_string(s.mtime_ns + 20 * 1000000000LL);  // and a ctime past the racy window
    l.clear();
    for (const auto& w : f) l += (l.empty() ? "" : " ") + w;
  }
  fs.write("/state/s", join_lines(lines));
  const auto canary = fs.tree("/canary");
  const auto r = treesync::sync(fs, "/src", "/dst", with_state("/state/s", verify_level::none));
  CHECK(r.ok());
  CHECK(fs.read("/dst/top") == "top");  // the blind spot: skipped
  CHECK(fs.tree("/canary") == canary);
  REQUIRE(treesync::sync(fs, "/src", "/dst", with_state("/state/s", verify_level::full)).ok());
  CHECK(fs.read("/dst/top") == "TOP");
}
