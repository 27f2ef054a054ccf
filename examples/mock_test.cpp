// mock_test - how to test a policy of your own against treesync::mock_fs, with no disk at all.
//
// The policy under test keeps "*.local" files in the destination even when the source lacks them
// (a deletion policy).  The checks are the kind a unit test of yours would make: what the mirror
// looks like, what the report says, and what the filesystem was asked to do (mock_fs counts every
// operation by kind, so "a second run writes nothing" is an exact assertion, not a timing).
#include <treesync/mock_fs.hpp>
#include <treesync/treesync.hpp>

#include <cstdio>
#include <string_view>

namespace {

// Deletes what the source lacks, except excluded entries and files ending in ".local".
struct keep_local_files {
  bool removes(std::string_view rel, treesync::file_type, bool excluded) const {
    return !excluded && !(rel.size() >= 6 && rel.substr(rel.size() - 6) == ".local");
  }
  std::size_t limit() const { return treesync::unlimited; }
};

int failures = 0;
void expect(bool ok, const char* what) {
  std::printf("  %s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

}  // namespace

int main() {
  using namespace std::chrono_literals;
  treesync::mock_fs fs;
  fs.write("/src/app.conf", "port = 80\n");
  fs.write("/src/lib/util.h", "int util();\n");
  fs.write("/dst/settings.local", "port = 8080\n");  // the user's own file in the mirror
  fs.write("/dst/stale.h", "old\n");                 // left over: must go
  fs.advance(10s);                                    // files older than the racy window

  const auto first = treesync::sync(fs, "/src", "/dst", keep_local_files{});
  expect(first.ok(), "the first run reports no error");
  expect(fs.exists("/dst/settings.local"), "the .local file is kept");
  expect(!fs.exists("/dst/stale.h"), "the stale file is deleted");
  expect(fs.read("/dst/lib/util.h") == "int util();\n", "source files are mirrored");

  fs.advance(10s);
  fs.reset_counters();
  const auto second = treesync::sync(fs, "/src", "/dst", keep_local_files{});
  expect(second.unchanged(), "a second run changes nothing");
  expect(fs.ops().writes() == 0, "and asks the filesystem for no write at all");

  fs.fail_path("/src/app.conf", std::errc::permission_denied, treesync::mock_fs::op::open_read);
  fs.write("/src/app.conf", "port = 81\n");
  fs.advance(10s);
  const auto third = treesync::sync(fs, "/src", "/dst", keep_local_files{});
  expect(third.errors.size() == 1 && third.errors[0].path == "app.conf", "an unreadable file is reported by path");
  expect(fs.read("/dst/app.conf") == "port = 80\n", "and its old copy is kept");

  if (failures == 0) std::printf("mock_test: all expectations met\n");
  return failures == 0 ? 0 : 1;
}
