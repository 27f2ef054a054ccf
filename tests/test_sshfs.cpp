// tests/test_sshfs.cpp - treesync's no-op promise over a network filesystem, counted where it
// matters: at the SFTP server behind an sshfs mount. After a cold run and at most one settling run,
// a warm run on an unchanged tree must send the server no write-type request and read no file data,
// with the source on local disk (local->sshfs) and on the mount too (sshfs->sshfs).
//
// SFTPv3 keeps whole-second mtimes and has no ctime (sshfs reports ctime == mtime), so a backend
// that compares nanoseconds, or trusts ctime, rewrites or re-reads everything on every run there.
//
// Built as its own executable (treesync_sshfs_tests) and registered only by tests/sshfs/sshfs.cmake,
// run through `tests/sshfs/sshfs_fixture.sh run STATE_DIR`: that sets TREESYNC_TEST_SSHFS_STATE (the
// fixture's state directory: its `ready` file names the mount, the served directory and the
// sftp-server log) and TREESYNC_TEST_TMPDIR (a directory on the mount), or skips the test with the
// reason when there is no mount. The sftp-server logs every request at DEBUG1, one line each, with
// the server-side path; a test counts the lines that name its own temporary directory, so other
// tests using the mount at the same time do not disturb the counts.
#include <doctest/doctest.h>

#include <treesync/treesync.hpp>

#include "support/temp_dir.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace treesync_test;

/// The running fixture, from $TREESYNC_TEST_SSHFS_STATE/ready (key=value lines).
struct sshfs_fixture {
  fs::path mount;     // where the client sees the served directory
  fs::path remote;    // the served directory, as the server names it (in its log)
  fs::path sftp_log;  // the sftp-server's request log
};

sshfs_fixture the_fixture() {
  const char* state = std::getenv("TREESYNC_TEST_SSHFS_STATE");
  if (state == nullptr || *state == '\0')
    FAIL("TREESYNC_TEST_SSHFS_STATE is not set: run these tests with `ctest -R sshfs` "
         "(through tests/sshfs/sshfs_fixture.sh run STATE_DIR)");
  std::ifstream in(fs::path(state) / "ready");
  if (!in) FAIL("no " << (fs::path(state) / "ready") << ": the sshfs fixture is not running");
  std::map<std::string, std::string> kv;
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  sshfs_fixture f{kv["mount"], kv["remote"], kv["sftp_log"]};
  if (f.mount.empty() || f.remote.empty() || f.sftp_log.empty())
    FAIL((fs::path(state) / "ready") << " lacks mount=, remote= or sftp_log=");
  return f;
}

/// What one run sent the server, for the paths under one directory, by kind of request.
struct requests {
  std::size_t writes = 0;      // open for WRITE/CREATE/TRUNCATE/APPEND, write, set (setstat/fsetstat),
                               // rename, posix-rename, remove, mkdir, rmdir, symlink, hardlink, fsync
  std::size_t reads = 0;       // read (file data)
  std::size_t read_opens = 0;  // open for READ only: a file opened, whether or not read
  std::size_t other = 0;       // lstat/stat, opendir/readdir/closedir, close, readlink, ...
  std::size_t nested = 0;      // of all of these: those naming a path below a top-level entry of
                               // the counted directory (DIR/x/...), as DIR/dst/... below a mirror
  std::string nested_lines;    // the first few of those
  std::string write_lines, read_lines;  // the first few of each, for the failure message

  std::string summary() const {
    return std::to_string(writes) + " write-type, " + std::to_string(reads) + " read, " +
           std::to_string(read_opens) + " open-for-read, " + std::to_string(other) + " other requests";
  }
};

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

/// Counts the sftp-server log lines in `text` that name a path at or below `root` (server side).
requests count_requests(const std::string& text, const std::string& root) {
  requests r;
  std::istringstream in(text);
  int shown_writes = 0, shown_reads = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find('"' + root + '"') == std::string::npos && line.find('"' + root + '/') == std::string::npos)
      continue;
    std::string msg = line;
    if (starts_with(msg, "debug1: request ")) msg = msg.substr(msg.find(": ", 16) + 2);  // "request N: ..."
    bool write = false, read = false, read_open = false;
    if (starts_with(msg, "open \"")) {
      const auto flags = msg.find(" flags ");
      const std::string f = flags == std::string::npos ? "" : msg.substr(flags);
      write = f.find("WRITE") != std::string::npos || f.find("CREATE") != std::string::npos ||
              f.find("TRUNCATE") != std::string::npos || f.find("APPEND") != std::string::npos;
      read_open = !write;
    } else if (starts_with(msg, "write \"") || starts_with(msg, "set \"") || starts_with(msg, "rename old ") ||
               starts_with(msg, "posix-rename old ") || starts_with(msg, "remove name ") ||
               starts_with(msg, "mkdir name ") || starts_with(msg, "rmdir name ") || starts_with(msg, "symlink old ") ||
               starts_with(msg, "hardlink old ") || starts_with(msg, "fsync \"")) {
      write = true;
    } else if (starts_with(msg, "read \"")) {
      read = true;
    }
    const auto quoted = line.find('"' + root + '/');
    if (quoted != std::string::npos) {
      const std::string rest = line.substr(quoted + root.size() + 2);
      const auto slash = rest.find('/'), quote = rest.find('"');
      if (slash != std::string::npos && slash < quote && ++r.nested <= 20) r.nested_lines += "  " + line + "\n";
    }
    if (write) {
      ++r.writes;
      if (shown_writes++ < 20) r.write_lines += "  " + line + "\n";
    } else if (read || read_open) {
      (read ? r.reads : r.read_opens) += 1;
      if (shown_reads++ < 20) r.read_lines += "  " + line + "\n";
    } else {
      ++r.other;
    }
  }
  return r;
}

std::uintmax_t size_of(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

std::string read_from(const fs::path& p, std::uintmax_t offset) {
  std::ifstream in(p, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// Runs `fn` and returns what reached the server for paths under `dir` (a directory on the
/// mount) meanwhile. The server handles one connection's requests in order and logs each before it
/// answers, so once a lookup of a unique name made afterwards is in the log, so is every request
/// `fn` caused.
template <class Fn>
requests server_requests(const sshfs_fixture& fx, const fs::path& dir, Fn&& fn) {
  const std::string root = (fx.remote / fs::relative(dir, fx.mount)).lexically_normal().string();
  static int markers = 0;
  const std::string marker = ".treesync-log-marker-" + std::to_string(::getpid()) + "-" + std::to_string(++markers);
  const std::uintmax_t start = size_of(fx.sftp_log);
  fn();
  struct ::stat st;
  REQUIRE(::lstat((dir / marker).c_str(), &st) != 0);  // a lookup the server logs: `lstat name ".../marker"`
  std::string text;
  for (int i = 0; i < 200; ++i) {  // 10 s at most
    text = read_from(fx.sftp_log, start);
    if (text.find(marker) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE_MESSAGE(text.find(marker) != std::string::npos,
                  "the sftp-server log " << fx.sftp_log << " never showed the lookup of " << marker);
  return count_requests(text.substr(0, text.find(marker)), root);
}

/// src/: files of several sizes and modes (an empty one, one larger than any copy buffer), nested
/// directories, a symlink (followed by default). Every mtime is thousands of seconds in the past,
/// far outside the 1 s racy window, with a nanosecond part (which SFTPv3 drops); directories are
/// stamped after their content.
void make_tree(const fs::path& s) {
  make_dir(s, 0755);
  write_file(s / "top.txt", "top level file\n", 0640, past_ns(5000, 111111111));
  write_file(s / "empty", "", 0600, past_ns(5001, 222222222));
  write_file(s / "run.sh", "#!/bin/sh\necho hi\n", 0755, past_ns(5002, 333333333));
  std::string big(200 * 1024 + 17, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  write_file(s / "big.bin", big, 0644, past_ns(5003, 444444444));
  make_dir(s / "a", 0750);
  write_file(s / "a" / "mid.txt", "middle\n", 0600, past_ns(5004, 555555555));
  make_dir(s / "a" / "b", 0700);
  write_file(s / "a" / "b" / "deep.txt", "deep down\n", 0644, past_ns(5005, 666666666));
  make_dir(s / "emptydir", 0711, past_ns(5006, 777777777));
  make_dir(s / "lib", 0755);
  write_file(s / "lib" / "libx.so.1", big.substr(0, 4096), 0755, past_ns(5007, 888888888));
  make_symlink("libx.so.1", s / "lib" / "libx.so");
  set_mtime(s / "a" / "b", past_ns(6000, 101010101));
  set_mtime(s / "a", past_ns(6001, 202020202));
  set_mtime(s / "lib", past_ns(6002, 303030303));
  set_mtime(s, past_ns(6003, 404040404));
}

/// A cold run, one settling run, then the warm no-op run, counted at the server. `local_source`:
/// the source is on local disk (temp_directory_path()), else on the mount next to the destination.
requests warm_noop_requests(bool local_source) {
  const sshfs_fixture fx = the_fixture();
  const temp_dir on_mount;  // under $TREESYNC_TEST_TMPDIR, on the mount
  REQUIRE_MESSAGE(fs::relative(on_mount.path(), fx.mount).string().rfind("..", 0) != 0,
                  on_mount.path() << " is not on the mount " << fx.mount << " (TREESYNC_TEST_TMPDIR?)");
  const temp_dir local(fs::temp_directory_path());
  const fs::path src = (local_source ? local.path() : on_mount.path()) / "src";
  const fs::path dst = on_mount / "dst";
  make_tree(src);

  const treesync::report cold = treesync::sync(src, dst);
  INFO("cold run: " << cold.created << " created, " << cold.errors.size() << " errors");
  REQUIRE(cold.ok());
  const treesync::report settle = treesync::sync(src, dst);
  INFO("settling run: " << settle.created << " created, " << settle.updated << " updated, " << settle.meta_updated
                        << " metadata-only, " << settle.deleted << " deleted, " << settle.bytes_copied
                        << " bytes copied");
  REQUIRE(settle.ok());

  treesync::report warm;
  const requests r = server_requests(fx, on_mount.path(), [&] { warm = treesync::sync(src, dst); });
  std::printf("sshfs %s warm no-op: the server saw %s (report: %zu updated, %zu metadata-only, %zu created, "
              "%zu deleted, %llu bytes copied)\n",
              local_source ? "local->sshfs" : "sshfs->sshfs", r.summary().c_str(), warm.updated, warm.meta_updated,
              warm.created, warm.deleted, static_cast<unsigned long long>(warm.bytes_copied));
  std::fflush(stdout);
  CHECK(warm.ok());
  return r;
}

}  // namespace

TEST_CASE("sshfs: a warm no-op local->sshfs sends the server no write-type request") {
  const requests r = warm_noop_requests(true);
  INFO("server saw " << r.summary() << "; write-type requests:\n" << r.write_lines);
  CHECK(r.writes == 0);
}

TEST_CASE("sshfs: a warm no-op local->sshfs reads no file data at the server") {
  const requests r = warm_noop_requests(true);
  INFO("server saw " << r.summary() << "; reads and opens for reading:\n" << r.read_lines);
  CHECK(r.reads == 0);
  CHECK(r.read_opens == 0);
}

TEST_CASE("sshfs: a warm no-op sshfs->sshfs sends the server no write-type request") {
  const requests r = warm_noop_requests(false);
  INFO("server saw " << r.summary() << "; write-type requests:\n" << r.write_lines);
  CHECK(r.writes == 0);
}

TEST_CASE("sshfs: a warm no-op sshfs->sshfs reads no file data at the server") {
  const requests r = warm_noop_requests(false);
  INFO("server saw " << r.summary() << "; reads and opens for reading:\n" << r.read_lines);
  CHECK(r.reads == 0);
  CHECK(r.read_opens == 0);
}

// ---- the state file over sshfs (issue 15) -----------------------------------------------------------

namespace {

/// local->sshfs with a state file on local disk: a cold run, a settling run (verify::full), then
/// the warm no-op at `level`, counted at the server.
requests warm_noop_with_state(treesync::verify_level level) {
  const sshfs_fixture fx = the_fixture();
  const temp_dir on_mount;
  const temp_dir local(fs::temp_directory_path());
  const fs::path src = local.path() / "src";
  const fs::path dst = on_mount / "dst";
  make_tree(src);
  treesync::options o;
  o.state = local.path() / "mirror.state";
  REQUIRE(treesync::sync(src, dst, o).ok());
  REQUIRE(treesync::sync(src, dst, o).ok());
  o.verify = level;
  treesync::report warm;
  const requests r = server_requests(fx, on_mount.path(), [&] { warm = treesync::sync(src, dst, o); });
  std::printf("sshfs local->sshfs warm no-op with a state file, verify level %d: the server saw %s\n", int(level),
              r.summary().c_str());
  std::fflush(stdout);
  CHECK(warm.ok());
  CHECK(warm.updated + warm.created + warm.deleted + warm.meta_updated == 0);
  return r;
}

}  // namespace

TEST_CASE("sshfs: with a state file, a warm no-op local->sshfs sends fewer requests at each lower verify level") {
  const requests full = warm_noop_with_state(treesync::verify_level::full);
  const requests dirs = warm_noop_with_state(treesync::verify_level::dirs);
  const requests none = warm_noop_with_state(treesync::verify_level::none);
  INFO("full: " << full.summary() << "; dirs: " << dirs.summary() << "; none: " << none.summary());
  CHECK(full.writes + dirs.writes + none.writes == 0);
  CHECK(full.reads + dirs.reads + none.reads + full.read_opens + dirs.read_opens + none.read_opens == 0);
  CHECK(dirs.other < full.other);
  CHECK(none.other < dirs.other);
  // verify::none: the destination root's own stat, opendir and statvfs and the kernel's lookups of
  // it and its parent (their number depends on the kernel's path walks), nothing below the root
  INFO("none, below the destination root:\n" << none.nested_lines);
  CHECK(none.nested == 0);
  CHECK(dirs.nested > 0);  // the counter sees what lies below the root (dirs stats the directories)
}

TEST_CASE("sshfs: verify::none applies a source change on whole-second mtimes and keeps the state file true") {
  const temp_dir on_mount;
  const temp_dir local(fs::temp_directory_path());
  const fs::path src = local.path() / "src";
  const fs::path dst = on_mount / "dst";
  make_tree(src);
  treesync::options o;
  o.state = local.path() / "mirror.state";
  REQUIRE(treesync::sync(src, dst, o).ok());
  o.verify = treesync::verify_level::none;
  write_file(src / "a" / "b" / "deep.txt", "deep down, changed\n", 0644, past_ns(4000, 123456789));
  write_file(src / "a" / "new.txt", "new\n", 0644, past_ns(4001, 0));
  const treesync::report r = treesync::sync(src, dst, o);
  CHECK(r.ok());
  CHECK(r.updated == 1);
  CHECK(r.created == 1);
  CHECK(read_file(dst / "a" / "b" / "deep.txt") == "deep down, changed\n");
  o.verify = treesync::verify_level::full;
  const treesync::report again = treesync::sync(src, dst, o);  // reads everything: nothing left to do
  CHECK(again.ok());
  CHECK(again.updated + again.created + again.deleted == 0);
}
