// A deletion policy given the identity of the destination directory it is asked about (issue 45
// item 2): the optional four-argument removes(rel, type, excluded, const dir_identity&).  The
// engine takes the identity from the directory it holds open, once per directory, in the walk and
// in the pruner; a policy that read something of DST before the run (the CLI: DST's rule files,
// each directory's recorded with its identity) can then tell a directory exchanged with another
// meanwhile.  Over mock_fs, the exchange made at an exact point (the on_operation hook: after the
// policy's read, before the engine opens the directory); the CLI's own use of it is tested in
// examples/cli_test.py (rule_file_security).
#include <doctest/doctest.h>

#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <system_error>

using namespace std::chrono_literals;
using treesync::mock_fs;
using op = mock_fs::op;

namespace {

// DST's "r" protects its "precious" (as a rule file there would); "decoy" is the attacker's empty
// directory.  SRC has both directories, without their files.
void swap_fixture(mock_fs& fs) {
  fs.mkdir("/src/r");
  fs.mkdir("/src/decoy");
  fs.write("/src/r/keep", "k");
  fs.write("/dst/r/precious", "p");
  fs.write("/dst/r/junk", "j");
  fs.mkdir("/dst/decoy");
  fs.write("/dst/decoy/junk2", "j");
  fs.advance(10s);
}

treesync::dir_identity identity_of(mock_fs& fs, const std::string& path) {
  std::error_code ec;
  const treesync::stat_info st = fs.stat_path(path, false, ec);
  REQUIRE_FALSE(ec);
  return treesync::dir_identity{st.dev, st.ino, true};
}

// What the CLI's deletion policy does, in small: the directories of DST as read before the run
// (path -> identity), "precious" protected in the one read as "r"; in a directory that is not the
// one read under its path nothing is deleted, and it is noted.
struct read_before_run {
  std::map<std::string, treesync::dir_identity> read;  // "" is DST itself
  mutable std::mutex mu;
  mutable std::set<std::string> refused;
  mutable std::map<std::string, treesync::dir_identity> seen;  // rel -> the identity it was asked with

  std::size_t limit() const { return treesync::unlimited; }
  bool removes(std::string_view, treesync::file_type, bool excluded) const { return !excluded; }
  bool removes(std::string_view rel, treesync::file_type t, bool excluded, const treesync::dir_identity& in) const {
    const std::size_t slash = rel.rfind('/');
    const std::string dir(slash == std::string_view::npos ? std::string_view() : rel.substr(0, slash));
    std::lock_guard<std::mutex> lock(mu);
    seen[std::string(rel)] = in;
    const auto it = read.find(dir);
    if (it == read.end() || it->second != in) {
      refused.insert(dir);
      return false;
    }
    if (dir == "r" && rel == "r/precious") return false;  // the rule read in "r"
    return removes(rel, t, excluded);
  }
};

void read_dst(mock_fs& fs, read_before_run& p) {
  p.read[""] = identity_of(fs, "/dst");
  p.read["r"] = identity_of(fs, "/dst/r");
  p.read["decoy"] = identity_of(fs, "/dst/decoy");
}

// "r" and "decoy" exchanged (as renameat2 RENAME_EXCHANGE would) just before the engine opens
// DST's "decoy": after the policy's read, before the engine enters either directory
void exchange_when_entered(mock_fs& fs, bool& done) {
  fs.on_operation([&fs, &done](op kind, const std::string& path) {
    if (done || kind != op::open_dir || path != "/dst/decoy") return;
    done = true;
    fs.rename("/dst/r", "/dst/swap-tmp");
    fs.rename("/dst/decoy", "/dst/r");
    fs.rename("/dst/swap-tmp", "/dst/decoy");
  });
}

}  // namespace

TEST_CASE("dir_identity: the policy is asked with the identity of the directory the engine holds, the exchanged one") {
  mock_fs fs;
  swap_fixture(fs);
  read_before_run p;
  read_dst(fs, p);
  bool exchanged = false;
  exchange_when_entered(fs, exchanged);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", p);
  fs.on_operation(nullptr);
  REQUIRE(exchanged);
  // the real "r" is at "decoy" now: asked about as decoy/precious, with r's identity
  REQUIRE(p.seen.count("decoy/precious") == 1);
  CHECK(p.seen.at("decoy/precious") == p.read.at("r"));
  REQUIRE(p.seen.count("r/junk2") == 1);
  CHECK(p.seen.at("r/junk2") == p.read.at("decoy"));
  (void)r;
}

TEST_CASE("dir_identity: a directory exchanged after the policy read it keeps what it protects, and the swap is seen") {
  mock_fs fs;
  swap_fixture(fs);
  read_before_run p;
  read_dst(fs, p);
  bool exchanged = false;
  exchange_when_entered(fs, exchanged);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", p);
  fs.on_operation(nullptr);
  REQUIRE(exchanged);
  CHECK(fs.exists("/dst/decoy/precious"));  // the real r, under the decoy's name: nothing deleted in it
  CHECK(fs.exists("/dst/decoy/junk"));
  CHECK(fs.exists("/dst/r/junk2"));
  CHECK(p.refused == std::set<std::string>{"decoy", "r"});
  CHECK(r.deleted == 0);
}

TEST_CASE("dir_identity: without an exchange, the policy deletes what its rules allow") {
  mock_fs fs;
  swap_fixture(fs);
  read_before_run p;
  read_dst(fs, p);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", p);
  CHECK(r.ok());
  CHECK(fs.exists("/dst/r/precious"));
  CHECK_FALSE(fs.exists("/dst/r/junk"));
  CHECK_FALSE(fs.exists("/dst/decoy/junk2"));
  CHECK(fs.read("/dst/r/keep") == "k");
  CHECK(p.refused.empty());
}

TEST_CASE("dir_identity: in a directory tree being deleted, each entry is asked with the identity of its own directory") {
  mock_fs fs;
  fs.write("/src/a", "a");
  fs.write("/dst/gone/1", "1");
  fs.write("/dst/gone/sub/2", "2");
  fs.advance(10s);
  read_before_run p;
  p.read[""] = identity_of(fs, "/dst");
  p.read["gone"] = identity_of(fs, "/dst/gone");
  p.read["gone/sub"] = identity_of(fs, "/dst/gone/sub");
  const treesync::report r = treesync::sync(fs, "/src", "/dst", p);
  CHECK(r.ok());
  CHECK(p.seen.at("gone") == p.read.at(""));
  CHECK(p.seen.at("gone/1") == p.read.at("gone"));
  CHECK(p.seen.at("gone/sub/2") == p.read.at("gone/sub"));
  CHECK_FALSE(fs.exists("/dst/gone"));
}

TEST_CASE("dir_identity: a three-argument deletion policy is called as before, and max_delete passes the four-argument form on") {
  static_assert(!treesync::detail::has_removes_in<treesync::deletion::extraneous_t>::value);
  static_assert(treesync::detail::has_removes_in<read_before_run>::value);
  static_assert(treesync::detail::has_removes_in<treesync::max_delete<read_before_run>>::value);
  static_assert(!treesync::detail::has_removes_in<treesync::max_delete<>>::value);
  static_assert(treesync::is_deletion_policy_v<read_before_run>);
  mock_fs fs;
  swap_fixture(fs);
  bool exchanged = false;
  exchange_when_entered(fs, exchanged);
  const treesync::report r = treesync::sync(fs, "/src", "/dst", treesync::deletion::extraneous);
  fs.on_operation(nullptr);
  CHECK(exchanged);
  (void)r;  // (the exchange may fail the directories' metadata: not what is asked here)
  CHECK_FALSE(fs.exists("/dst/decoy/precious"));  // nothing asked of the identity: deleted as before
}
