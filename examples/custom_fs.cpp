// custom_fs - mirroring a tree inside a filesystem backend of your own (custom_fs.hpp).
//
// custom::memory_fs keeps a whole tree in a std::map; treesync::sync(fs, src, dst) runs the same
// engine over it as over the disk.  This program builds a small source tree in it, mirrors it,
// changes the source (an edit, a deletion, a file turned into a directory, a link retargeted)
// and mirrors it again, printing what each run did; then it checks the mirror and that a third
// run has nothing to do.  It prints "custom_fs: all expectations met" when everything held.
#include "custom_fs.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace {

struct printer {  // an observer: one line per change, sorted afterwards (workers interleave)
  std::vector<std::string>* lines;
  void operator()(const treesync::action& a) const {
    lines->push_back(std::string(treesync::to_string(a.kind)) + " " + treesync::to_string(a.type) + " " +
                     (a.path.empty() ? std::string(".") : std::string(a.path)));
  }
};

int failures = 0;
void expect(bool ok, const char* what) {
  std::printf("  %s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok)
    ++failures;
}

treesync::report run(custom::memory_fs& fs, const char* title) {
  std::vector<std::string> lines;
  const auto r =
      treesync::sync(fs, "/src", "/mirror", printer{&lines}, treesync::links::preserve, treesync::jobs{2});
  std::sort(lines.begin(), lines.end());
  std::printf("%s\n", title);
  for (const auto& l : lines)
    std::printf("  %s\n", l.c_str());
  std::printf("  -> %zu created, %zu updated, %zu deleted, %zu errors\n", r.created, r.updated, r.deleted,
              r.errors.size());
  return r;
}

}  // namespace

int main() {
  static_assert(treesync::is_filesystem_v<custom::memory_fs>, "memory_fs meets the filesystem contract");
  constexpr auto caps = treesync::filesystem_capabilities_v<custom::memory_fs>;
  static_assert(!caps.owners && !caps.hard_links && !caps.state_file, "declared and detected capabilities");

  const std::int64_t day_ago = custom::memory_fs{}.now() - std::int64_t(86400) * 1000000000;
  custom::memory_fs fs;
  fs.write_file("/src/README", "hello\n", 0644, day_ago);
  fs.write_file("/src/bin/tool", "#!/bin/sh\necho tool\n", 0755, day_ago);
  fs.write_file("/src/docs/guide.txt", "chapter 1\n", 0644, day_ago);
  fs.write_file("/src/docs/old.txt", "obsolete\n", 0644, day_ago);
  fs.write_file("/src/cache", "a file for now\n", 0644, day_ago);
  fs.make_link("/src/latest", "docs/guide.txt");

  const auto first = run(fs, "first run (cold):");
  expect(first.ok() && first.created == 9, "the cold run creates the mirror: its root and 8 entries");

  fs.write_file("/src/README", "hello, world\n", 0644, day_ago + 1);      // an edit
  fs.erase("/src/docs/old.txt");                                          // a deletion
  fs.erase("/src/cache");                                                 // a file ...
  fs.write_file("/src/cache/index", "now a directory\n", 0644, day_ago);  // ... becomes a directory
  fs.erase("/src/latest");
  fs.make_link("/src/latest", "README");  // a link retargeted

  const auto second = run(fs, "second run (after edits):");
  expect(second.ok(), "the second run reports no error");
  expect(fs.content("/mirror/README") == "hello, world\n", "the edit is mirrored");
  treesync::stat_info st;
  expect(!fs.lookup("/mirror/docs/old.txt", st), "the deleted file is gone");
  expect(fs.lookup("/mirror/cache", st) && st.type == treesync::file_type::directory,
         "the file became a directory");
  expect(fs.lookup("/mirror/bin/tool", st) && st.mode == 0755 && st.mtime_ns == day_ago,
         "mode and mtime kept");
  std::vector<std::string> src = fs.listing("/src"), dst = fs.listing("/mirror");
  expect(src == dst, "the mirror lists exactly as the source");

  const auto third = run(fs, "third run (nothing changed):");
  expect(third.unchanged(), "a run over an unchanged tree does nothing");

  std::printf("the mirror:\n");
  for (const auto& l : dst)
    std::printf("  %s\n", l.c_str());
  if (failures == 0)
    std::printf("custom_fs: all expectations met\n");
  return failures == 0 ? 0 : 1;
}
